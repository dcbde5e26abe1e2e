# groupnorm: torch's GroupNorm and InstanceNorm (ONNX's InstanceNormalization, and the
# Reshape / InstanceNormalization / Reshape torch's exporters make of a GroupNorm), float: the
# C channels of a value (the last axis; every other axis its pixels) in `groups` groups of C /
# groups consecutive channels (default C: each channel its own group, InstanceNorm), each group
# over all its pixels normalized to mean 0 and variance 1 (eps= added to the variance, default
# 1e-5), times w (gamma), plus b (beta): one of each per channel. An int8 model runs it between
# dequantize and quantize (TFLite has no such op).
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
        c = x.shape[-1]
        g = kv.get("groups", c)
        if not 1 <= g <= c or c % g:
            raise self.fail("%d groups do not divide %d channels" % (g, c), "groups")
        self.geo = (x.size // c, c, c // g)  # (pixels, channels, channels per group)
        self.eps = kv.get("eps", 1e-5)
        if not self.eps >= 0:
            raise self.fail("eps >= 0", "eps")
        self.param("weight", "w", (c,), "f32", init)
        self.param("bias", "b", (c,), "f32", init)
        self.out = (x.shape, "f32", None)

    def records(self, c):
        x, y = self.x[0], self.y
        return [c.record(check.FGROUPNORM, [c.off(x), c.off(y)] + list(self.geo) + c.ref(self.weight)
                         + c.ref(self.bias) + [f32_bits(self.eps)])]
