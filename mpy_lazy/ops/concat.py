# concat along the last axis (channels of H, W, C values, or of vectors). int8: every input
# has the output's quantization (TFLite's rule; mpy-lazy pack makes it so for ONNX models).
from .. import check
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        lead = ins[0].shape[:-1]
        total = 0
        for v in ins:
            if v.shape[:-1] != lead:
                raise self.fail("inputs %s differ outside the last axis" % ([v.shape for v in ins],), "x")
            total += v.shape[-1]
        if self.quantized(("i8", "i16", "i32")) != "f32":
            for v in ins:
                if tuple(v.q) != tuple(kv["q"]):
                    raise self.fail("integer inputs need the output's q (%r has %s)" % (v.name, v.q), "q")
        from ..graph import check_shape

        self.out = (check_shape(lead + (total,), n, "output"), ins[0].dtype, kv.get("q"))

    def records(self, c):
        """One move per input: its channels into their place in each output row."""
        from ..graph import ITEMSIZE

        y = self.y
        es = ITEMSIZE[y.dtype]
        rows = y.size // y.shape[-1]
        out = []
        off = 0
        for v in self.x:
            ch = v.shape[-1]
            out.append(c.record(check.MOVE, [c.off(v), c.off(y) + off * es, rows, ch, ch, 1, y.shape[-1], 1, es,
                                             1, 0, 0]))
            off += ch
        return out
