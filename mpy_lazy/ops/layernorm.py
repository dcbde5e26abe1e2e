# layernorm: ONNX's LayerNormalization, float: each group of elements normalized to mean 0 and
# variance 1 (eps= added to the variance, default 1e-5), times w (gamma), plus b (beta).
# over=c (the default): the last axis (the channels of an H,W,C value, a whole vector); over=w:
# the W axis of a 1,W,C value (a sequence's features stored across its channels, as a torch
# (N, C, L) input arrives); over=all: the whole value. An int8 model runs it between dequantize
# and quantize (TFLite has no LayerNorm op).
import math

from .._arith import f32_bits
from ..kinds import FLAYERNORM
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
        return [c.record(FLAYERNORM, [c.off(x), c.off(y)] + list(self.geo) + c.ref(self.weight)
                         + [1 if bias is not None else 0] + c.ref(bias) + [f32_bits(self.eps)])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {FLAYERNORM: 'flayernorm'}


def _check(r, E):
    """float layernorm: 2 XO 3 YO 4 G (groups) 5 N (elements per group) 6 GS 7 ES (element
    strides of a group and within it) 8-9 gamma (f32 [N]) 10 HASB 11-12 beta 13 EPS (f32 bits)."""
    g, n = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    gs, es = r.range(6, "x", 0, 1 << 24), r.range(7, "x", 0, 1 << 24)
    if g * n > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    last = (g - 1) * gs + (n - 1) * es + 1
    r.region(2, "x", 4 * last, 4)
    r.region(3, "y", 4 * last, 4)
    r.tensor(8, "weight", ("f32",), 4 * n)
    r.bias(11, r.range(10, "b", 0, 1), n)
    r.eps(13)


def check(r, E):
    _check(r, E)
    r.inplace = 2


# layernorm record (f32): 2 XO 3 YO (bytes) 4 G (groups) 5 N (elements per group) 6 GS 7 ES
# (element strides: from one group to the next, within a group) 8-9 gamma (f32 [N]) 10 HASB
# 11-12 beta 13 EPS (f32 bits). ONNX's LayerNormalization per group: mean, variance (the mean
# of the squared differences), (x - mean) / sqrt(variance + eps) x gamma + beta; sums in
# element order.

def flayernorm(E, P, k):
    a = E.af
    xo, yo, g, n, gs, es = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5], P[k + 6], P[k + 7]
    gam, g0 = E.sf[P[k + 8]], P[k + 9] // 4
    bet, b0 = (E.sf[P[k + 11]], P[k + 12] // 4) if P[k + 10] else (None, 0)
    eps = E.pf[k + 13]
    for gi in range(g):
        x = xo + gi * gs
        s = 0.0
        for j in range(n):
            s += a[x + j * es]
        mean = s / n
        s = 0.0
        for j in range(n):
            d = a[x + j * es] - mean
            s += d * d
        inv = 1.0 / math.sqrt(s / n + eps)
        y = yo + gi * gs
        for j in range(n):
            v = (a[x + j * es] - mean) * inv * gam[g0 + j]
            if bet is not None:
                v += bet[b0 + j]
            a[y + j * es] = v
