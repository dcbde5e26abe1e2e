# groupnorm: torch's GroupNorm and InstanceNorm (ONNX's InstanceNormalization, and the
# Reshape / InstanceNormalization / Reshape torch's exporters make of a GroupNorm), float: the
# C channels of a value (the last axis; every other axis its pixels) in `groups` groups of C /
# groups consecutive channels (default C: each channel its own group, InstanceNorm), each group
# over all its pixels normalized to mean 0 and variance 1 (eps= added to the variance, default
# 1e-5), times w (gamma), plus b (beta): one of each per channel. An int8 model runs it between
# dequantize and quantize (TFLite has no such op).
import math

from .._arith import f32_bits
from ..kinds import FGROUPNORM
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
        return [c.record(FGROUPNORM, [c.off(x), c.off(y)] + list(self.geo) + c.ref(self.weight)
                         + c.ref(self.bias) + [f32_bits(self.eps)])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {FGROUPNORM: 'fgroupnorm'}


def _check(r, E):
    """float groupnorm: 2 XO 3 YO 4 P (pixels) 5 C (channels) 6 CG (channels per group,
    divides C) 7-8 gamma (f32 [C]) 9-10 beta (f32 [C]) 11 EPS (f32 bits)."""
    p, c = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    cg = r.range(6, "groups", 1, c)
    if c % cg:
        r.fail("groups", "%d channels per group do not divide %d channels" % (cg, c))
    if p * c > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    r.region(2, "x", 4 * p * c, 4)
    r.region(3, "y", 4 * p * c, 4)
    r.tensor(7, "weight", ("f32",), 4 * c)
    r.tensor(9, "bias", ("f32",), 4 * c)
    r.eps(11)


def check(r, E):
    _check(r, E)
    r.inplace = 2


# groupnorm record (f32): 2 XO 3 YO (bytes) 4 P (pixels) 5 C (channels) 6 CG (channels per
# group, divides C) 7-8 gamma (f32 [C]) 9-10 beta (f32 [C]) 11 EPS (f32 bits). A P,C value's
# channels in C / CG groups of CG consecutive channels (torch's GroupNorm; CG 1: InstanceNorm),
# each group over all its P x CG elements: mean, variance (the mean of the squared
# differences), (x - mean) / sqrt(variance + eps) x gamma[c] + beta[c]; sums in stored order
# (pixel by pixel, the group's channels within a pixel).

def fgroupnorm(E, P, k):
    a = E.af
    xo, yo, p, c, cg = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5], P[k + 6]
    gam, g0, bet, b0 = E.sf[P[k + 7]], P[k + 8] // 4, E.sf[P[k + 9]], P[k + 10] // 4
    eps = E.pf[k + 11]
    n = p * cg
    for c0 in range(0, c, cg):
        s = 0.0
        for i in range(p):
            x = xo + i * c + c0
            for j in range(cg):
                s += a[x + j]
        mean = s / n
        s = 0.0
        for i in range(p):
            x = xo + i * c + c0
            for j in range(cg):
                d = a[x + j] - mean
                s += d * d
        inv = 1.0 / math.sqrt(s / n + eps)
        for i in range(p):
            x, y = xo + i * c + c0, yo + i * c + c0
            for j in range(cg):
                a[y + j] = (a[x + j] - mean) * inv * gam[g0 + c0 + j] + bet[b0 + c0 + j]
