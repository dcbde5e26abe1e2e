# cumsum: the running sum along one axis of a value (TFLite's CUMSUM; TFLM's cumsum.cc):
# `exclusive=1` sums the elements before each one (the first gets 0), `reverse=1` runs from the
# axis's end. Same shape out.
#
# int8, TFLite Micro's arithmetic: each x - z_x is shifted left by 20 and halved (TFLM's input
# multiplier 0.5: exactly (x - z_x) << 19), the accumulator starts at -z_x << 19 (as TFLM's:
# its comment says 0) and adds them in int32, wrapping; each output is z_y + mbqm(accumulator,
# m=M,S) (2 s_x / (2**20 s_y), S <= 0), saturated.
from .._arith import head, rec, requant, wrap32
from ..kinds import CUMSUM, FCUMSUM, INT32_MAX
from . import Op as Base

SHIFT = 19  # TFLM's kCumSumIntegerShift (20) and its input multiplier 1/2


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        axis = kv.get("axis", -1)
        if not -len(x.shape) <= axis < len(x.shape):
            raise self.fail("axis %d of a %d-D value" % (axis, len(x.shape)), "axis")
        self.axis = axis % len(x.shape)
        self.flags = (1 if kv.get("exclusive", 0) else 0) | (2 if kv.get("reverse", 0) else 0)
        dt = self.quantized(("i8",))
        if dt == "i8":
            m = kv.get("m")
            if m is None or len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 0:
                raise self.fail("int8 cumsum needs m=multiplier,shift (0..2**31-1, -31..0)", "m")
            self.mq = tuple(m)
            self.scratch = x.size
        self.out = (x.shape, dt, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        before = after = 1
        for d, s in enumerate(x.shape):
            if d < self.axis:
                before *= s
            elif d > self.axis:
                after *= s
        geo = [before, x.shape[self.axis], after, self.flags]
        if x.dtype == "f32":
            return [c.record(FCUMSUM, [c.off(x), c.off(y)] + geo)]
        return [c.record(CUMSUM, [1, y.q[1], -128, 127, c.off(x), c.off(y)] + geo
                         + [x.q[1], c.scratch, self.mq[0], self.mq[1]])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {CUMSUM: 'cumsum', FCUMSUM: 'fcumsum'}
FAST = '_viper_reduce'


def check(r, E):
    fl = r.kind == FCUMSUM
    g = 4 if fl else 8  # (the geometry's first word)
    a, d, b = r.range(g, "x", 1, 1 << 24), r.range(g + 1, "x", 1, 1 << 24), r.range(g + 2, "x", 1, 1 << 24)
    if a * d * b > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    n = a * d * b
    r.range(g + 3, "flags", 0, 3)
    es = 4 if fl else 1
    r.region(g - 2, "x", n * es, es)
    r.region(g - 1, "y", n * es, es)
    if fl:
        return
    r.range(2, "out", 1, 1)
    r.clamp()
    r.range(12, "zero_point", -128, 127)
    r.region(13, "scratch", 4 * n, 4)
    r.range(14, "m", 0, INT32_MAX)
    r.range(15, "m", -31, 0)


# cumsum record (int8): 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 A (elements before the axis: the
# product of its outer dimensions) 9 D (the axis) 10 B (the product of the inner ones) 11 FLAGS
# (1 exclusive, 2 reverse) 12 ZX 13 ACC (int32 per element) 14 M 15 S (<= 0). Each element's
# accumulator goes to ACC at its own index, then all are requantized at once.

def cumsum(E, P, k):
    p = rec(P, k)
    a, acc = E.a8, E.view(4)
    x, y, na, nd, nb, flags, zx, ao = p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13] // 4
    for i in range(na):
        for j in range(nb):
            s = wrap32(-zx << SHIFT)
            for t in range(nd):
                q = i * nd * nb + (nd - 1 - t if flags & 2 else t) * nb + j
                v = wrap32(s + ((a[x + q] - zx) << SHIFT))
                acc[ao + q] = s if flags & 1 else v
                s = v
    W = E.W
    head(W, p)
    W[0] = y
    W[1] = na * nd * nb
    requant(acc, ao, p, 14, a, W)


# fcumsum record (f32): 2 X 3 Y 4 A 5 D 6 B 7 FLAGS (as cumsum's). The sums in float32: each
# partial sum is rounded to float32 (stored in y, read back) before the next addition.

def fcumsum(E, P, k):
    f = E.af
    x, y, na, nd, nb, flags = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5], P[k + 6], P[k + 7]
    for i in range(na):
        for j in range(nb):
            s = 0.0
            for t in range(nd):
                q = i * nd * nb + (nd - 1 - t if flags & 2 else t) * nb + j
                if flags & 1:
                    f[y + q] = s
                    s = f[y + q] + f[x + q]
                else:
                    f[y + q] = s + f[x + q]
                    s = f[y + q]
