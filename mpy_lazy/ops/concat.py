# concat along one axis (axis=, default the last: the channels of H, W, C values, or a vector's
# elements; 0 or 1: H or W). int8: every input has the output's quantization (TFLite's rule;
# mpy-lazy pack makes it so for ONNX models).
from ..kinds import MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        rank = len(ins[0].shape)
        self.axis = kv.get("axis", rank - 1)
        if not 0 <= self.axis < rank:
            raise self.fail("axis=%d: the inputs have %d axes" % (self.axis, rank), "axis")
        total = 0
        for v in ins:
            if len(v.shape) != rank or [d for i, d in enumerate(v.shape) if i != self.axis] != \
                    [d for i, d in enumerate(ins[0].shape) if i != self.axis]:
                raise self.fail("inputs %s differ outside axis %d" % ([v.shape for v in ins], self.axis), "x")
            total += v.shape[self.axis]
        if ins[0].dtype == "bool":  # (bytes 0 or 1: no q)
            self.keeps_q()
        elif self.quantized(("i8", "i16", "i32", "i64")) != "f32":
            for v in ins:
                if tuple(v.q) != tuple(kv["q"]):
                    raise self.fail("integer inputs need the output's q (%r has %s)" % (v.name, v.q), "q")
        from ..graph import check_shape

        shape = list(ins[0].shape)
        shape[self.axis] = total
        self.out = (check_shape(shape, n, "output"), ins[0].dtype, kv.get("q"))

    def records(self, c):
        """One move per input: each of its rows (everything from the axis on: a contiguous
        run of elements) into its place in each output row."""
        from ..graph import ITEMSIZE

        y = self.y
        es = ITEMSIZE[y.dtype]
        row = 1
        for d in y.shape[self.axis:]:
            row *= d
        rows = y.size // row
        out = []
        off = 0
        for v in self.x:
            n = v.size // rows
            out.append(c.record(MOVE, [c.off(v), c.off(y) + off * es, rows, n, n, 1, row, 1, es, 1, 0, 0]))
            off += n
        return out
