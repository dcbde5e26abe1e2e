# Helpers shared by the runtime tests. These tests run unchanged on CPython (collected by pytest)
# and on the MicroPython unix port (driven by tests/test_on_micropython.py), so they use nothing
# but plain asserts and this module.
import sys

IS_MICROPYTHON = sys.implementation.name == "micropython"

_here = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
TESTS_DIR = _here.rsplit("/", 1)[0] if "/" in _here else ".."
GOLDEN_DIR = TESTS_DIR + "/golden"


def golden(name):
    """Bytes of tests/golden/<name>."""
    with open(GOLDEN_DIR + "/" + name, "rb") as f:
        return f.read()


def golden_json(name):
    import json

    with open(GOLDEN_DIR + "/" + name) as f:
        return json.load(f)


def raises(exc_type, fn, *args, **kwargs):
    """Call fn and return the exception it raised; fail unless it is an exc_type."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError("%s did not raise %s" % (fn, exc_type.__name__))


def crc32(data):
    import binascii

    return binascii.crc32(data) & 0xFFFFFFFF


def skip(reason):
    """Skip the calling test: pytest.skip on CPython, a marker line + exit on MicroPython."""
    if IS_MICROPYTHON:
        print("MPY-TEST-SKIP:", reason)
        raise SystemExit(0)
    import pytest

    pytest.skip(reason)


def small_board():
    """True on a microcontroller port (not the unix/windows ports nor CPython): tests then use
    fewer random cases, as the heap and the clock are a board's."""
    return IS_MICROPYTHON and sys.platform not in ("linux", "darwin", "win32")


class Lcg:
    """Deterministic pseudo-random integers (xorshift32 on plain Python ints), the same
    sequence on CPython and MicroPython (whose `random` differs and misbehaves above 2**30)."""

    def __init__(self, seed):
        self.s = (seed * 2654435761 + 1) & 0xFFFFFFFF or 1

    def next(self):
        """The next 32-bit value (never 0)."""
        x = self.s
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.s = x
        return x

    def int(self, lo, hi):
        """An integer in [lo, hi] (both included)."""
        span = hi - lo + 1
        v = self.next()
        if span > 0xFFFFFFFF:
            v = (v << 32) | self.next()
        return lo + v % span

    def pick(self, seq):
        return seq[self.next() % len(seq)]

    def chance(self, n):
        """True once in n draws."""
        return self.next() % n == 0


# --- gemmlowp / TFLite Micro integer arithmetic, written out from their C definitions -------
# (the runtime's own versions live in mpy_lazy/_pure.py and _viper.py; tests compare them
# against these)
INT32_MIN = -2147483648
INT32_MAX = 2147483647


def c_div(a, b):
    """C's integer division: the quotient truncated toward zero."""
    q = (a if a >= 0 else -a) // (b if b >= 0 else -b)
    return q if (a < 0) == (b < 0) else -q


def ref_srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul(int32 a, int32 b):
        overflow = a == b && a == INT32_MIN
        ab_64 = (int64)a * b
        nudge = ab_64 >= 0 ? (1 << 30) : (1 - (1 << 30))
        ab_x2_high32 = (int32)((ab_64 + nudge) / (1ll << 31))
        return overflow ? INT32_MAX : ab_x2_high32"""
    assert INT32_MIN <= a <= INT32_MAX and INT32_MIN <= b <= INT32_MAX
    if a == b and a == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return c_div(ab + nudge, 1 << 31)


def ref_rdbpot(x, e):
    """gemmlowp RoundingDivideByPOT(x, e), 0 <= e <= 31: x / 2**e rounded to the nearest
    integer, ties away from zero (computed here from the exact quotient, not the C masks)."""
    assert 0 <= e <= 31
    d = 1 << e
    q = x // d  # floor
    r = x - q * d  # 0 <= r < d
    if 2 * r > d or (2 * r == d and x > 0):
        q += 1
    return q


def ref_mbqm(x, m, s):
    """TFLite Micro's MultiplyByQuantizedMultiplier(int32 x, int32 m, int shift):
        left_shift = shift > 0 ? shift : 0; right_shift = shift > 0 ? 0 : -shift
        RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * (1 << left_shift), m), right_shift)
    (x * (1 << left_shift) must fit in int32: it is undefined in C otherwise)."""
    left = s if s > 0 else 0
    xs = x * (1 << left)
    assert INT32_MIN <= xs <= INT32_MAX, "x << shift overflows int32 (undefined in TFLM)"
    return ref_rdbpot(ref_srdhm(xs, m), -s if s < 0 else 0)


def ref_requant(acc, m, s, zy, lo=-128, hi=127):
    """An int8 output: clamp(zy + mbqm(acc, m, s), lo, hi) (TFLM's requantization)."""
    v = ref_mbqm(acc, m, s) + zy
    return lo if v < lo else (hi if v > hi else v)


def ref_one_over_one_plus_x(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (F0 in, F0 out), step by step:
        F0 half_denominator = RoundingHalfSum(a, F0::One())
        F2 x = 48/17 + half_denominator * -32/17           (constants 1515870810, -1010580540)
        3 times: x = x + Rescale<2>(x * (F2::One() - half_denominator * x))
        return Rescale<0>(ExactMulByPot<-1>(x))"""
    s = a + INT32_MAX  # RoundingHalfSum: (sum + sign) / 2 in int64, C division
    half = c_div(s + (1 if s >= 0 else -1), 2)
    x = 1515870810 + ref_srdhm(half, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - ref_srdhm(half, x)  # F2::One() is 2**29
        x = x + sat_pot(ref_srdhm(x, one_minus), 2)  # F4 -> F2: SaturatingRoundingMultiplyByPOT<2>
    return sat_pot(x, 1)  # F1 -> F0


def sat_pot(x, e):
    """gemmlowp SaturatingRoundingMultiplyByPOT<e> for e > 0: x * 2**e saturated to int32."""
    v = x * (1 << e)
    return INT32_MAX if v > INT32_MAX else (INT32_MIN if v < INT32_MIN else v)


def ref_softmax_row(x, exps, dmax, bits=8):
    """TFLM's int8 softmax (reference_ops::Softmax, int8 in, q 1/256 -128 out; bits=16: its
    int16 output, q 1/65536 -32768) with the per-difference exp values `exps` (what
    exp_on_negative_values gives for -d): elements whose difference to the row max is below
    diff_min (d > dmax) are skipped and output the output type's minimum."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    top = max(x)
    total = 0
    for v in x:
        if top - v <= dmax:
            total += ref_rdbpot(exps[top - v], 12)  # Rescale<12> of a Q0.31 value
    headroom = 0  # CountLeadingZeros(uint32 total)
    while not (total << headroom) & (1 << 31):
        headroom += 1
    bits_over_unit = 12 - headroom
    shifted = ((total << headroom) & 0xFFFFFFFF) - (1 << 31)
    scale = ref_one_over_one_plus_x(shifted)
    out = []
    for v in x:
        if top - v > dmax:
            out.append(lo)
            continue
        e = bits_over_unit + 31 - bits  # (over 31, a sum past 2**28: TFLM asserts; the quotient is 0)
        u = (ref_rdbpot(ref_srdhm(scale, exps[top - v]), e) if e <= 31 else 0) + lo
        out.append(lo if u < lo else (hi if u > hi else u))
    return out


def weight_index(layout, o, ky, kx, ci, oc, kh, kw, cpg):
    """Index of weight (output channel o, kernel row ky, column kx, input channel ci of its
    group) in a conv/depthwise tensor of `layout`, from the layout's definition."""
    if layout == "ohwi":
        return ((o * kh + ky) * kw + kx) * cpg + ci
    if layout == "ohwi8":  # [oc / 8, kh, kw, 8 cpg]: output o = 8 b + j at [b, ky, kx, 8 ci + j]
        return (((o // 8) * kh + ky) * kw + kx) * 8 * cpg + 8 * ci + o % 8
    if layout == "oihw":
        return ((o * cpg + ci) * kh + ky) * kw + kx
    if layout == "1hwo":
        return (ky * kw + kx) * oc + o
    return (o * kh + ky) * kw + kx  # o1hw


class _TooMuch(Exception):
    pass


def traced_lines(fn, limit, expected=()):
    """Lines of mpy_lazy code fn() runs, counted with sys.settrace (CPython only: MicroPython
    has no settrace), failing (AssertionError) as soon as the count passes `limit`, so runaway
    work fails fast instead of running for minutes under the tracer. Exceptions of the types in
    `expected` end fn quietly. A count, not a clock: a busy machine cannot change it."""
    n = [0]

    def tracer(frame, event, arg):
        if event == "call":
            return tracer if "mpy_lazy" in frame.f_code.co_filename else None
        if event == "line":
            n[0] += 1
            if n[0] > limit:
                raise _TooMuch()
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    except _TooMuch:
        raise AssertionError("more than %d lines of mpy_lazy code" % limit)
    except expected:
        pass
    finally:
        sys.settrace(None)
    return n[0]
