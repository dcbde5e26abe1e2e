# logsoftmax, l2norm, l2pool: TFLite's LOG_SOFTMAX and L2_NORMALIZATION over the last axis, and
# L2_POOL_2D (TFLM's log_softmax.cc, l2norm.cc, l2_pool_2d.cc): float32; logsoftmax and l2norm
# int8 too.
#
# int8 logsoftmax, TFLM's: per row, with d = max - x, the sum of t[d] (the Q12.19 exps the
# packer tabled, 0 below TFLM's diff_min) goes through TFLM's fixed-point log (Q5.26, log_x
# below); an element with -d above max(diff_min - 1, mbqm(log - 2**31, RSD, RLS)) gives
# clamp(127 + rdbpot(t[256 + d] - log, 22)) (t[256 + d] = mbqm(-d, ...) in Q5.26), the others
# -128: codes of q=16/256,127 (TFLM's output, checked by the packer).
# int8 l2norm, TFLM's: per row, s = sum (x - z_x)² in int32, TFLM's fixed-point inverse square
# root of s (GetInvSqrtQuantizedMultiplierExp: a multiplier and shift) and each output
# clamp(mbqm(x - z_x, inv, shift + 7)): codes of q=1/128,0 whatever the output's q.
#
# Float arithmetic, TFLM's, in float32: each product, sum and quotient is rounded to float32
# (stored in the op's two scratch words, or the output, and read back) in TFLM's order, so
# l2norm and l2pool give TFLM's values bit for bit; logsoftmax's exp and log are the libm's of
# each side (within float32 rounding of TFLM's expf / logf).
import math

from .._arith import ACTS, head, rdbpot, rec, requant, srdhm
from ..kinds import FNORM, INT32_MAX, NORM
from . import Op as Base, act_code

_FN = {"logsoftmax": 0, "l2norm": 1, "l2pool": 2}
EPSILON = 1e-6  # TFLM's L2_NORMALIZATION floor of the norm (float32 1e-6f)


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        self.scratch = 2
        self.act = act_code(kv)
        if name == "logsoftmax" and x.dtype != "f32":
            self.quantized(("i8",))
            m = kv.get("m")
            if m is None or len(m) != 3 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 0 or m[2] > 0:
                raise self.fail("int8 logsoftmax needs m=RSD,RLS,DIFF_MIN (RLS -31..0, DIFF_MIN <= 0)", "m")
            if "t" not in kv:
                raise self.fail("int8 logsoftmax needs t= (its table)", "t")
            if x.shape[-1] > 4095:
                raise self.fail("rows of %d: the sum of exps can leave int32 (4095 at most)" % x.shape[-1], "x")
            if tuple(kv["q"]) != (0.0625, 127):
                raise self.fail("int8 logsoftmax writes q=0.0625,127 (TFLM's)", "q")
            self.mq = tuple(m)
            self.param("table", "t", (512,), "i32", init)
            self.out = (x.shape, "i8", kv["q"])
            return
        if name == "l2norm" and x.dtype != "f32":
            self.quantized(("i8",))
            if 255 * 255 * x.shape[-1] > INT32_MAX:
                raise self.fail("rows of %d: the sums of squares can leave int32" % x.shape[-1], "x")
            self.scratch = x.shape[-1]
            self.out = (x.shape, "i8", kv["q"])
            return
        self.float_only()
        if name != "l2pool":
            self.out = (x.shape, "f32", None)
            return
        if len(x.shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        k = list(kv["k"])
        stride = list(kv.get("stride", k))
        pad = list(kv.get("pad", (0, 0, 0, 0)))
        if len(k) != 2 or len(stride) != 2 or len(pad) != 4 or min(k + stride) < 1 or min(pad) < 0:
            raise self.fail("k=kh,kw stride=sh,sw pad=t,l,b,r", "k")
        h, w, c = x.shape
        oh = (h + pad[0] + pad[2] - k[0]) // stride[0] + 1
        ow = (w + pad[1] + pad[3] - k[1]) // stride[1] + 1
        if oh < 1 or ow < 1 or max(pad) >= max(k):
            raise self.fail("a %s window over %s with pad %s leaves no output" % (k, x.shape, pad), "k")
        self.geo = [h, w, c, k[0], k[1], stride[0], stride[1], pad[0], pad[1], oh, ow]
        self.out = ((oh, ow, c), "f32", None)

    def records(self, c):
        x, y = self.x[0], self.y
        head = [_FN[self.name], c.off(x), c.off(y), c.scratch]
        if self.name == "l2pool":
            return [c.record(FNORM, head + self.geo + [self.act])]
        n = x.shape[-1]
        if x.dtype == "i8" and self.name == "logsoftmax":
            return [c.record(NORM, [1, 127, -128, 127, 0, c.off(x), c.off(y), x.size // n, n, 0, 0]
                             + list(self.mq) + c.ref(self.table))]
        if x.dtype == "i8":
            return [c.record(NORM, [1, 0, -128, 127, 1, c.off(x), c.off(y), x.size // n, n, x.q[1], c.scratch,
                                    0, 0, 0, 0, 0])]
        return [c.record(FNORM, head + [x.size // n, n] + [0] * 9 + [self.act])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {NORM: 'norm', FNORM: 'fnorm'}
FAST = '_viper_reduce'


def check(r, E):
    if r.kind == NORM:
        _check_int(r, E)
        return
    # fnorm: 2 FN 3 X 4 Y 5 TMP 6.. (FN 0, 1: 6 ROWS 7 N; FN 2: 6 H 7 W 8 C 9 KH 10 KW 11 SH 12 SW
    # 13 PT 14 PL 15 OH 16 OW) 17 ACT
    fn = r.range(2, "fn", 0, 2)
    r.range(17, "act", 0, 3)
    r.region(5, "scratch", 8, 4)
    if fn < 2:
        rows, n = r.range(6, "x", 1, 1 << 24), r.range(7, "x", 1, 1 << 24)
        if rows * n > 1 << 24:
            r.fail("x", "more than 2**24 elements")
        for i in range(8, 17):
            r.range(i, "x", 0, 0)
        r.region(3, "x", 4 * rows * n, 4)
        r.region(4, "y", 4 * rows * n, 4)
        return
    h, w, c, kh, kw, sh, sw, oh, ow = r.dims((6, "x"), (7, "x"), (8, "x"), (9, "k"), (10, "k"), (11, "stride"),
                                             (12, "stride"), (15, "y"), (16, "y"))
    pt, pl = r.range(13, "pad", 0, kh - 1), r.range(14, "pad", 0, kw - 1)
    if h * w * c > 1 << 24 or oh * ow * c > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    if (oh - 1) * sh - pt >= h or (ow - 1) * sw - pl >= w:
        r.fail("y", "%d x %d outputs leave the %d x %d input" % (oh, ow, h, w))
    r.region(3, "x", 4 * h * w * c, 4)
    r.region(4, "y", 4 * oh * ow * c, 4)


def _check_int(r, E):
    # norm: 2 OC (1) 3 ZY 4 LO 5 HI 6 FN (0 logsoftmax, 1 l2norm) 7 X 8 Y 9 ROWS 10 N; l2norm:
    # 11 ZX 12 ACC 13-17 (0); logsoftmax: 11, 12 (0) 13 RSD 14 RLS 15 DIFF_MIN 16-17 table
    r.range(2, "out", 1, 1)
    fn = r.range(6, "fn", 0, 1)
    r.range(3, "zero_point", 127 - 127 * fn, 127 - 127 * fn)
    r.range(4, "clamp", -128, -128)
    r.range(5, "clamp", 127, 127)
    rows, n = r.range(9, "x", 1, 1 << 24), r.range(10, "x", 1, 1 << 24)
    if rows * n > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    if fn == 0:
        if n > 4095:
            r.fail("x", "rows of %d: the sum of exps can leave int32 (4095 at most)" % n)
        r.region(7, "x", rows * n)
        r.region(8, "y", rows * n)
        r.range(11, "x", 0, 0)
        r.range(12, "x", 0, 0)
        r.range(13, "m", 0, INT32_MAX)
        r.range(14, "m", -31, 0)
        r.range(15, "m", -INT32_MAX - 1, 0)
        r.tensor(16, "table", ("i32",), 2048)  # (any int32: the sums and differences wrap as TFLM's)
        return
    if 255 * 255 * n > INT32_MAX:
        r.fail("x", "rows of %d: the sums of squares can leave int32" % n)
    r.range(11, "zero_point", -128, 127)
    r.region(7, "x", rows * n)
    r.region(8, "y", rows * n)
    r.region(12, "scratch", 4 * n, 4)
    for i in range(13, 18):
        r.range(i, "x", 0, 0)


def _sat_shl(x, e):
    """gemmlowp's SaturatingRoundingMultiplyByPOT<e>, e > 0: x << e, saturated to int32."""
    t = (1 << (31 - e)) - 1
    return INT32_MAX if x > t else (-INT32_MAX - 1 if x < -t else x << e)


def inv_sqrt(s):
    """TFLM's GetInvSqrtQuantizedMultiplierExp(s, kReverseShift = -1): (multiplier, shift)
    with 1/sqrt(s) ~ multiplier 2**(shift - 31) (s <= 1: INT32_MAX, 0)."""
    if s <= 1:
        return INT32_MAX, 0
    shift = 11
    while s >= 1 << 29:
        s //= 4
        shift += 1
    bits = 0  # s's bit length (MicroPython's int has no bit_length())
    while s >> bits:
        bits += 1
    pairs = (31 - bits) // 2 - 1  # (CountLeadingZeros(s) - 1) / 2 - 1
    shift -= pairs
    s <<= 2 * pairs
    half = rdbpot(s >> 1, 1)  # F3
    x = 1 << 28  # F3 one
    for _ in range(5):
        x3 = _sat_shl(srdhm(srdhm(x, x), x), 6)
        x = _sat_shl(srdhm((1 << 28) + (1 << 27), x) - srdhm(half, x3), 3)
    x = srdhm(x, 1518500250)
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, -shift


def _sat(x, e):
    """gemmlowp's SaturatingRoundingMultiplyByPOT(Param) for e >= 0."""
    return x if e == 0 else _sat_shl(x, e)


def _wrap(v):
    return ((v + 2147483648) & 4294967295) - 2147483648


def _recip(a):
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out; Newton-Raphson in Q2.29)."""
    half = a + INT32_MAX + (1 if a + INT32_MAX >= 0 else -1)
    half = half // 2 if half >= 0 else -((-half) // 2)
    x = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        x = _wrap(x + _sat_shl(srdhm(x, (1 << 29) - srdhm(half, x)), 2))
    return _sat_shl(x, 1)


def log_x(x):
    """TFLite's log_x_for_x_greater_than_or_equal_to_1<5> of x in Q12.19: the log in Q5.26."""
    quarter = 8388608  # 1/4 in Q6.25
    ha = 32
    v = x & 4294967295
    while v:
        ha -= 1
        v >>= 1
    r_a = _sat(srdhm(_sat(x, ha - 1), 1518500250), 1)  # (1518500250: sqrt(1/2) in Q0.31)
    za = max(-INT32_MAX - 1, min(INT32_MAX, _sat(12 - ha, 25) + quarter))
    zb = srdhm(x, 1518500250)
    hb = 31
    v = zb & 4294967295
    while v:
        hb -= 1
        v >>= 1
    r_b = _sat(x, hb)
    zb = max(-INT32_MAX - 1, min(INT32_MAX, _sat(12 - hb, 25) - quarter))
    r, z = min(r_a, r_b), max(za, zb)
    p = r + 1805811301  # RoundingHalfSum(r, sqrt(sqrt(1/2)))
    p = (p + 1) // 2 if p >= 0 else -((1 - p) // 2)
    q = _wrap(2 * _wrap(r - 1805811301))
    sq = srdhm(q, q)
    num = _wrap(srdhm(q, r) + srdhm(srdhm(q, sq), 117049297))
    den = _wrap(srdhm(p, _wrap(1057819769 + q + srdhm(127690142, sq))) + srdhm(638450708, q))
    return _sat_shl(_wrap(srdhm(z, 1488522236) + srdhm(rdbpot(num, 6), _recip(den))), 1)


def _log_softmax(E, p):
    a = E.a8
    t, t0 = E.s32[p[16]], p[17] // 4
    x, y, rows, n, rsd, rls, dmin = p[7], p[8], p[9], p[10], p[13], p[14], p[15]
    for i in range(rows):
        row, out = x + i * n, y + i * n
        top = -128
        for j in range(n):
            if a[row + j] > top:
                top = a[row + j]
        s = 0
        for j in range(n):
            s = _wrap(s + t[t0 + top - a[row + j]])
        log = log_x(s)
        floor = rdbpot(srdhm(_wrap(log - INT32_MAX - 1), rsd), -rls)
        if floor < dmin - 1:
            floor = dmin - 1
        for j in range(n):
            d = a[row + j] - top
            if d > floor:
                v = rdbpot(_wrap(t[t0 + 256 - d] - log), 22) + 127
                a[out + j] = -128 if v < -128 else (127 if v > 127 else v)
            else:
                a[out + j] = -128


# norm record (int8): 2 OC (1) 3 ZY 4 LO (-128) 5 HI (127) 6 FN 7 X 8 Y (bytes) 9 ROWS 10 N
# (rows of N consecutive elements). FN 1 (l2norm): ZY 0, 11 ZX 12 ACC (N int32) 13-17 (0); per
# row the sum of squares, inv_sqrt, then the row through mbqm(x - ZX, inv, shift + 7) into the
# clamp. FN 0 (logsoftmax): ZY 127, 11-12 (0) 13 RSD 14 RLS (<= 0) 15 DIFF_MIN 16-17 table (i32
# [512]: the exps, then the Q5.26 differences), as above.

def norm(E, P, k):
    p = rec(P, k)
    if p[6] == 0:
        _log_softmax(E, p)
        return
    a, acc, W = E.a8, E.view(4), E.W
    x, y, rows, n, zx, ao = p[7], p[8], p[9], p[10], p[11], p[12] // 4
    mq = [0, 0]
    head(W, p)
    for i in range(rows):
        s = 0
        for j in range(n):
            d = a[x + i * n + j] - zx
            acc[ao + j] = d
            s += d * d
        m, sh = inv_sqrt(s)
        mq[0], mq[1] = m, sh + 7
        W[0] = y + i * n
        W[1] = n
        requant(acc, ao, mq, 0, a, W)


# fnorm record (f32): 2 FN (0 logsoftmax, 1 l2norm, 2 l2pool) 3 X 4 Y (bytes) 5 TMP (two f32
# words) then FN 0, 1: 6 ROWS 7 N (each row: N consecutive elements; 8-16 zero); FN 2: 6 H 7 W
# 8 C 9 KH 10 KW 11 SH 12 SW 13 PT 14 PL (pads at the top and left) 15 OH 16 OW; 17 ACT (fused
# activation: l2pool's; 0 otherwise).

def fnorm(E, P, k):
    f = E.af
    fn, x, y, t = P[k + 2], P[k + 3] // 4, P[k + 4] // 4, P[k + 5] // 4
    if fn == 2:
        _l2pool(f, x, y, t, P, k)
        return
    rows, n = P[k + 6], P[k + 7]
    for i in range(rows):
        row, out = x + i * n, y + i * n
        if fn == 1:  # sum of squares, its square root, floored at 1e-6: the divisor
            f[t] = 0.0
            for j in range(n):
                f[t + 1] = f[row + j] * f[row + j]
                f[t] = f[t] + f[t + 1]
            f[t] = math.sqrt(f[t])
            f[t + 1] = EPSILON
            if f[t] < f[t + 1]:
                f[t] = f[t + 1]
            for j in range(n):
                f[out + j] = f[row + j] / f[t]
            continue
        f[t] = -ACTS[3][1]  # the largest element, then the log of the sum of exps
        for j in range(n):
            if f[row + j] > f[t]:
                f[t] = f[row + j]
        f[t + 1] = 0.0
        for j in range(n):
            f[out + j] = f[row + j] - f[t]  # (out is the exp's float32 argument; rewritten below)
            f[out + j] = math.exp(f[out + j])
            f[t + 1] = f[t + 1] + f[out + j]
        f[t + 1] = math.log(f[t + 1])
        for j in range(n):
            f[out + j] = f[row + j] - f[t]
            f[out + j] = f[out + j] - f[t + 1]


def _l2pool(f, x, y, t, P, k):
    h, w, c, kh, kw, sh, sw, pt, pl, oh, ow = [P[k + i] for i in range(6, 17)]
    lo, hi = ACTS[P[k + 17]] or (None, None)
    o = y
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * sh - pt, ox * sw - pl
            for ch in range(c):
                f[t] = 0.0
                count = 0
                for fy in range(max(0, -y0), min(kh, h - y0)):
                    for fx in range(max(0, -x0), min(kw, w - x0)):
                        q = x + ((y0 + fy) * w + x0 + fx) * c + ch
                        f[t + 1] = f[q] * f[q]
                        f[t] = f[t] + f[t + 1]
                        count += 1
                f[t] = f[t] / count
                v = math.sqrt(f[t])
                if lo is not None:
                    v = lo if v < lo else (hi if v > hi else v)
                f[o] = v
                o += 1
