# mean over H and W per channel (global average pooling; TFLite's MEAN over axes 1, 2, ONNX's
# GlobalAveragePool and ReduceMean): (H, W, C) -> (1, 1, C). int8: m = multiplier,shift with
# 1/(H*W) folded in at pack time, exactly as TFLite Micro computes it.
from .._arith import head, rec, requant
from ..kinds import FMEAN, INT32_MAX, MAX_DIM, MEAN
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
        # the kernels' record ("mean record" below)
        x, y = self.x[0], self.y
        h, w, ch = x.shape
        if y.dtype != "i8":
            return [c.record(FMEAN, [1, 0, 0, 0, c.off(x), c.off(y), h * w, 0, ch, 0, 0, 0])]
        return [c.record(MEAN, [1, y.q[1], -128, 127, c.off(x), c.off(y), h * w, x.q[1], ch, c.scratch]
                         + list(self.mq))]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {MEAN: 'mean', FMEAN: 'fmean'}


def check(r, E):
    fl = r.kind == FMEAN
    hw, c = r.range(8, "x", 1, 1 << 24), r.range(10, "c", 1, MAX_DIM)
    if hw * c > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    size = 4 if fl else 1
    r.region(6, "x", hw * c * size, size)
    r.region(7, "y", c * size, size)
    if fl:
        return
    r.clamp()
    r.range(2, "out", 1, 1)
    r.range(9, "zero_point", -128, 127)
    if 255 * hw > INT32_MAX:
        r.fail("x", "the sums of %d pixels can leave int32" % hw)
    r.region(11, "scratch", 4 * c, 4)
    r.mq(12, 1, "m")



# mean record: 2 OC (1) 3 ZY 4 LO 5 HI 6 XO 7 YO 8 HW (pixels) 9 ZX 10 C 11 ACC (C int32) 12 M 13 S

def mean(E, P, k):
    """Per channel: clamp(ZY + mbqm(sum(x) - ZX * HW, m, s)) (TFLM's MEAN over H, W)."""
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    xo, hw, zx, c, ao = p[6], p[8], p[9], p[10], p[11] // 4
    for ch in range(c):
        a32[ao + ch] = -zx * hw
    q = xo
    for _ in range(hw):
        for ch in range(c):
            a32[ao + ch] += a[q]
            q += 1
    W[0] = p[7]
    W[1] = c
    requant(a32, ao, p, 12, a, W)


# fmean record (f32): 6 XO 7 YO 8 HW 10 C

def fmean(E, P, k):
    a = E.af
    xo, yo, hw, c = P[k + 6] // 4, P[k + 7] // 4, P[k + 8], P[k + 10]
    for ch in range(c):
        s = 0.0
        q = xo + ch
        for _ in range(hw):
            s += a[q]
            q += c
        a[yo + ch] = s / hw
