# mean over H and W per channel (global average pooling; TFLite's MEAN over axes 1, 2, ONNX's
# GlobalAveragePool and ReduceMean): (H, W, C) -> (1, 1, C). int8: m = multiplier,shift with
# 1/(H*W) folded in at pack time, exactly as TFLite Micro computes it.
from .. import check
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        q8 = self.int8()
        self.mq = kv.get("m")
        if q8:
            self.needs("m")
            m = kv["m"]
            if len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                raise self.fail("m=multiplier,shift: multiplier 0..2**31-1, shift -31..30", "m")
            self.scratch = x.shape[2]
        self.out = ((1, 1, x.shape[2]), x.dtype, kv.get("q"))

    def records(self, c):
        # the kernels' record (mpy_lazy/_pure.py, "mean record")
        x, y = self.x[0], self.y
        h, w, ch = x.shape
        if y.dtype != "i8":
            return [c.record(check.FMEAN, [1, 0, 0, 0, c.off(x), c.off(y), h * w, 0, ch, 0, 0, 0])]
        return [c.record(check.MEAN, [1, y.q[1], -128, 127, c.off(x), c.off(y), h * w, x.q[1], ch, c.scratch]
                         + list(self.mq))]
