# reshape to any shape of the same size. Values are stored NHWC, so a reshape keeps the bytes
# where they are and shares its input's buffer (no copy) - except order=chw: a flatten of an
# H, W, C value in C, H, W order (what torch's Flatten of an NCHW tensor computes), a copy.
from ..kinds import MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        shape = list(kv["shape"])
        if shape.count(-1) == 1:  # one dimension inferred from the others
            rest = 1
            for d in shape:
                rest *= d if d != -1 else 1
            shape[shape.index(-1)] = x.size // rest if rest and x.size % rest == 0 else 0
        shape = check_shape(shape, n)
        size = 1
        for d in shape:
            size *= d
        if size != x.size:
            raise self.fail("shape %s has %d elements, the input %s has %d" % (shape, size, x.shape, x.size),
                            "shape")
        chw = kv.get("order") == "chw" and len(x.shape) == 3 and x.shape[2] > 1 and x.shape[0] * x.shape[1] > 1
        self.alias = not chw
        if "q" in kv and (x.q is None or tuple(kv["q"]) != tuple(x.q)):
            raise self.fail("q= must be the input's quantization (a reshape moves bytes only)", "q")
        self.out = (shape, x.dtype, x.q)

    def records(self, c):
        from ..graph import ITEMSIZE

        if self.alias:
            return []
        x = self.x[0]
        ch = x.shape[2]
        hw = x.size // ch
        # dst[ch * HW + i] = src[i * C + ch]: rows = channels, cols = pixels
        return [c.record(MOVE, [c.off(x), c.off(self.y), ch, hw, 1, ch, hw, 1, ITEMSIZE[x.dtype], 1, 0, 0])]
