# softmax over the last axis. int8: TFLite Micro's fixed-point softmax (output q 1/256, -128;
# with dtype=i16, an int16 output of q 1/65536, -32768, as TFLM's int8 -> int16 softmax):
# t= is the table of exp(-d * input scale * beta) for input differences d = 0..255 in Q0.31,
# made at pack time with TFLM's own exp_on_negative_values; the board does the rest in
# integers (sum, reciprocal by Newton-Raphson, scaling), as TFLM does. Over 511 values the sum
# may pass 2**28 and TFLM's final shift 31 (gemmlowp asserts it is not: the tflite-micro wheel
# aborts on 1001 equal inputs): mpy-lazy gives the rounded quotient there, 0 (each of them <
# 1/512). int16 (q 1/32768, 0):
# TFLM's SoftmaxInt16, m= scaling the input difference to [-65535, 0] for [-10, 0], t= its two
# 513-entry int16 tables (exp over [-10, 0], 1 / (1 + x) over [0, 1]), read with interpolation.
import math

from .._arith import bits_f32, f32_bits, mbqm, rdbpot, rec, srdhm
from ..kinds import FSOFTMAX, SOFTMAX, SOFTMAX16, SOFTMAX_I16
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        self.depth = x.shape[-1]
        self.beta = kv.get("beta", 1.0)
        dt = kv.get("dtype", x.dtype)
        if x.dtype == "i16":
            q = kv.get("q")
            if dt != "i16" or q is None or q[1] != 0 or abs(q[0] * 32768 - 1) > 1e-3:
                raise self.fail("an int16 softmax outputs i16 of q=3.0517578125e-05,0 (1/32768)", "q")
            if x.q[1] != 0:
                raise self.fail("an int16 softmax input has zero point 0", "x")
            m = kv.get("m")
            if "t" not in kv or m is None or len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                raise self.fail("an int16 softmax needs m=multiplier,shift and t= (its two tables)", "m")
            self.mult = tuple(m)
            self.param("table", "t", (1026,), "i16", init)
            self.scratch = 256
        elif x.dtype == "i8" and dt == "i16":
            if "q" not in kv:
                raise self.fail("an int16 softmax output needs q=", "q")
            q = kv["q"]
            if q[1] != -32768 or abs(q[0] * 65536 - 1) > 1e-3:  # TFLM's Prepare: 1/65536 within 0.1%
                raise self.fail("an int16 softmax output is q=1.52587890625e-05,-32768 (1/65536), not %s"
                                % (q,), "q")
        elif dt != x.dtype:
            raise self.fail("dtype=%s: an int8 softmax may output i16; others keep the input's dtype" % dt,
                            "dtype")
        elif self.int8():
            q = kv["q"]
            if q[1] != -128 or abs(q[0] * 256 - 1) > 1e-6:
                raise self.fail("int8 softmax outputs q=0.00390625,-128 (1/256), not %s" % (q,), "q")
        elif "t" in kv:
            raise self.fail("t= is for int8 softmax", "t")
        if x.dtype == "i8":
            if "t" not in kv:
                raise self.fail("int8 softmax needs t= (the exp table)", "t")
            if self.depth > 4095:  # (TFLM's sum of exps in Q12.19)
                raise self.fail("int8 softmax over %d > 4095 values (TFLM's sum of exps overflows)" % self.depth, "x")
            self.param("table", "t", (256,), "i32", init)
        self.out = (x.shape, dt, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        rows = x.size // self.depth
        if x.dtype == "i16":
            return [c.record(SOFTMAX_I16, [0, 0, 0, 0, c.off(x), c.off(y), self.depth, rows] + c.ref(self.table)
                             + list(self.mult) + [c.scratch, 256])]
        if x.dtype == "i8":
            kind = SOFTMAX if y.dtype == "i8" else SOFTMAX16
            return [c.record(kind, [0, 0, 0, 0, c.off(x), c.off(y), self.depth, rows] + c.ref(self.table))]

        return [c.record(FSOFTMAX, [c.off(x), c.off(y), self.depth, rows, f32_bits(self.beta)])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {SOFTMAX: 'softmax', FSOFTMAX: 'fsoftmax', SOFTMAX16: 'softmax16', SOFTMAX_I16: 'softmax_i16'}


def _check(r, E):
    n, rows = r.range(8, "x", 1, 4095), r.range(9, "x", 1, 1 << 24)
    r.region(6, "x", n * rows)
    es = 2 if r.kind == SOFTMAX16 else 1
    r.region(7, "y", n * rows * es, es)
    r.tensor(10, "table", ("i32",), 1024)
    t = E.words(r[10], r[11], 256)
    for d in range(256):
        if t[d] < 0:
            r.fail("table", "entry %d is negative" % d)


def _check_f(r, E):
    n, rows = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    r.region(2, "x", 4 * n * rows, 4)
    r.region(3, "y", 4 * n * rows, 4)
    b = bits_f32(r[6])
    if b - b != 0:
        r.fail("beta", "%r is not finite" % b)


def _check16(r, E):
    n, rows = r.range(8, "x", 1, 65535), r.range(9, "x", 1, 1 << 24)  # (the sum of n Q0.15 exps fits int32)
    r.region(6, "x", 2 * n * rows, 2)
    r.region(7, "y", 2 * n * rows, 2)
    r.tensor(10, "table", ("i16",), 2052)
    r.mq(12, 1, "m")
    block = r.range(15, "scratch", 1, 1 << 16)
    r.region(14, "scratch", 4 * block, 4)


def check(r, E):
    (_check_f if r.kind == FSOFTMAX else _check16 if r.kind == SOFTMAX_I16 else _check)(r, E)


# softmax record: 6 XO 7 YO 8 N (depth) 9 ROWS 10 11 exps (256 int32): exps[d] = TFLM's
# exp_on_negative_values for the input difference -d in Q0.31 (0 where TFLM skips it), made at
# pack time.

def one_over_one_plus_x(a):
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0.31 in, Q0.31 out)."""
    s = a + 2147483647  # RoundingHalfSum(a, One): (s + sign(s)) / 2, truncated toward zero
    half = (s + 1) // 2 if s >= 0 else -((1 - s) // 2)
    x = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        one_minus = 536870912 - srdhm(half, x)
        x = x + _sat_shl(srdhm(x, one_minus), 2)
    return _sat_shl(x, 1)


def _sat_shl(x, e):
    """SaturatingRoundingMultiplyByPOT<e> for e > 0: x << e, saturated to int32."""
    t = (1 << (31 - e)) - 1
    if x > t:
        return 2147483647
    if x < -t:
        return -2147483648
    return x << e


def _clz32(x):
    n = 0
    while n < 32 and not (x >> (31 - n)) & 1:
        n += 1
    return n


def softmax(E, P, k):
    """TFLM's int8 softmax: output zero point -128, scale 1/256; kind softmax16: an int16
    output, zero point -32768, scale 1/65536."""
    p = rec(P, k)
    a = E.a8
    wide = (p[0] & 255) == SOFTMAX16
    o = E.a16 if wide else a
    lo, hi = (-32768, 32767) if wide else (-128, 127)
    exps, e0 = E.s32[p[10]], p[11] // 4
    xo, yo, n = p[6], p[7] // (2 if wide else 1), p[8]
    for _ in range(p[9]):
        top = -128
        for i in range(n):
            v = a[xo + i]
            if v > top:
                top = v
        total = 0
        for i in range(n):
            total += rdbpot(exps[e0 + top - a[xo + i]], 12)
        head_ = _clz32(total)
        bits = 12 - head_
        scale = one_over_one_plus_x(((total << head_) & 0xFFFFFFFF) - 2147483648)
        e = bits + (15 if wide else 23)  # TFLM: 31 - the output's bits
        for i in range(n):
            v = rdbpot(srdhm(scale, exps[e0 + top - a[xo + i]]), e) + lo
            o[yo + i] = lo if v < lo else (hi if v > hi else v)
        xo += n
        yo += n


softmax16 = softmax  # (one kernel reads the kind)


# int16 softmax record (kind softmax_i16): 6 XO 7 YO (bytes) 8 N (depth) 9 ROWS 10 11 tables (1026
# int16: exp, then 1 / (1 + x)) 12 M 13 S 14 ACC (BLOCK int32) 15 BLOCK

def lut16(t, t0, v):
    """TFLM's LUTLookup(int16 v) of the 513-entry int16 table at byte t0 of t (int8 view):
    interpolated on v's 7 low bits."""
    i = t0 + 2 * (256 + (v >> 7))
    base = (t[i] & 255) | t[i + 1] << 8
    nxt = (t[i + 2] & 255) | t[i + 3] << 8
    return base + (((nxt - base) * (v & 127) + 64) >> 7)


def softmax_i16(E, P, k):
    """TFLM's SoftmaxInt16: exps of the differences from the row's largest through the first
    table (kept in the output, as TFLM keeps them), their sum's reciprocal through the second."""
    p = rec(P, k)
    a = E.a16
    t, t0 = E.s8[p[10]], p[11]
    xo, yo, n, m, s = p[6] // 2, p[7] // 2, p[8], p[12], p[13]
    for _ in range(p[9]):
        top = -32768
        for i in range(n):
            if a[xo + i] > top:
                top = a[xo + i]
        total = 0
        for i in range(n):
            d = mbqm(a[xo + i] - top, m, s) + 32767
            e = lut16(t, t0, -32768 if d < -32768 else (32767 if d > 32767 else d))
            a[yo + i] = e
            total += e
        head_ = _clz32(total)
        v = (((total << (head_ - 1)) + (1 << 13)) >> 14) - 98304
        recip = lut16(t, t0 + 1026, -32768 if v < -32768 else (32767 if v > 32767 else v))
        sh = 31 - head_
        for i in range(n):
            v = (a[yo + i] * recip + (1 << (sh - 1))) >> sh
            a[yo + i] = 0 if v < 0 else (32767 if v > 32767 else v)
        xo += n
        yo += n


# fsoftmax record (f32): 2 XO 3 YO 4 N (depth) 5 ROWS 6 BETA (f32)

def fsoftmax(E, P, k):
    a = E.af
    xo, yo, n, rows = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5]
    beta = E.pf[k + 6]
    neg = beta < 0  # then the largest (x - top) * beta is at the smallest x
    for _ in range(rows):
        top = a[xo]
        for i in range(1, n):
            if (a[xo + i] < top) if neg else (a[xo + i] > top):
                top = a[xo + i]
        s = 0.0
        for i in range(n):
            e = math.exp((a[xo + i] - top) * beta)
            a[yo + i] = e
            s += e
        for i in range(n):
            a[yo + i] = a[yo + i] / s
        xo += n
        yo += n
