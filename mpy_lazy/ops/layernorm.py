# layernorm: ONNX's LayerNormalization, float: each group of elements normalized to mean 0 and
# variance 1 (eps= added to the variance, default 1e-5), times w (gamma), plus b (beta).
# over=c (the default): the last axis (the channels of an H,W,C value, a whole vector); over=w:
# the W axis of a 1,W,C value (a sequence's features stored across its channels, as a torch
# (N, C, L) input arrives); over=all: the whole value. An int8 model runs it between dequantize
# and quantize (TFLite has no LayerNorm op).
from .. import check
from ..program import f32_bits
from . import Op as Base


class Op(Base):
    inplace = True

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if x.dtype != "f32":
            raise self.fail("takes f32 values (an int8 model dequantizes around it)", "x")
        over = kv.get("over", "c")
        s = x.shape
        if over == "c":  # (groups, elements per group, group stride, element stride)
            self.geo = (x.size // s[-1], s[-1], s[-1], 1)
        elif over == "w":
            if len(s) != 3 or s[0] != 1:
                raise self.fail("over=w takes a 1,W,C value", "over")
            self.geo = (s[2], s[1], 1, s[2])
        else:
            self.geo = (1, x.size, 0, 1)
        self.eps = kv.get("eps", 1e-5)
        if not self.eps >= 0:
            raise self.fail("eps >= 0", "eps")
        self.param("weight", "w", (self.geo[1],), "f32", init)
        if "b" in kv:
            self.param("bias", "b", (self.geo[1],), "f32", init)
        self.out = (x.shape, "f32", None)

    def records(self, c):
        x, y = self.x[0], self.y
        bias = getattr(self, "bias", None)
        return [c.record(check.FLAYERNORM, [c.off(x), c.off(y)] + list(self.geo) + c.ref(self.weight)
                         + [1 if bias is not None else 0] + c.ref(bias) + [f32_bits(self.eps)])]
