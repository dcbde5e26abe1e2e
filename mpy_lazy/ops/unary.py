# Float functions of one operand (TFLite's NEG, SQRT, RSQRT, SQUARE, EXP, LOG, SIN, COS, FLOOR,
# CEIL, ROUND, ELU on float32): one record kind with a function code. Each result is the
# float32 TFLM's kernel gives: the function of the float32 input, rounded once to float32
# (RSQRT rounds the square root first, as 1.f / sqrtf(x) does); ROUND is TFLM's RoundToNearest
# (halves to even). NaN in gives NaN out; a result beyond float32's range is +-inf. The int8
# forms TFLM has (RSQRT, ELU) are lut tables made at pack time (ops/act.py). May run in place.
import math

from ..kinds import FUNARY
from . import Op as Base

FN = {"neg": 0, "sqrt": 1, "rsqrt": 2, "square": 3, "exp": 4, "log": 5, "sin": 6, "cos": 7, "floor": 8,
      "ceil": 9, "round": 10, "elu": 11}


class Op(Base):
    inplace = True

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        self.float_only()
        self.fn = FN[name]
        self.out = (ins[0].shape, "f32", None)

    def records(self, c):
        x, y = self.x[0], self.y
        return [c.record(FUNARY, [self.fn, c.off(x), c.off(y), y.size])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {FUNARY: 'funary'}


def check(r, E):
    """funary: 2 FN 3 XO 4 YO 5 N."""
    r.range(2, "op", 0, len(FN) - 1)
    n = r.range(5, "x", 1, 1 << 24)
    r.region(3, "x", 4 * n, 4)
    r.region(4, "y", 4 * n, 4)
    r.inplace = 3


# funary record: 2 FN (0 neg, 1 sqrt, 2 rsqrt, 3 square, 4 exp, 5 log, 6 sin, 7 cos, 8 floor,
# 9 ceil, 10 round, 11 elu: x if x >= 0 else expm1(x)) 3 XO 4 YO (bytes) 5 N

_INF, _NAN = float("inf"), float("nan")
# FLT_MAX + half its ulp: a float32 rounds anything above to inf. Parsed at import: frozen
# into a float32 firmware the literal would not fit (mpy-tool refuses it); there it is inf.
_TOP = float("3.4028235677973366e38")
_INTEGRAL = 8388608.0  # 2 ** 23: float32s this large are integers
# -0.0, parsed at import too: frozen, the literal is +0.0 (mpy-tool writes it as `(mp_float_t)-0`,
# an integer zero), and CEIL of (-1, 0) would lose its sign on every board.
_NEG_ZERO = float("-0.0")


def funary(E, P, k):
    a = E.af
    fn, xo, yo, n = P[k + 2], P[k + 3] // 4, P[k + 4] // 4, P[k + 5]
    for i in range(n):
        v = a[xo + i]
        if fn == 2:  # 1 / (sqrt(x) rounded to float32)
            a[yo + i] = _one(1, v)
            v = a[yo + i]
            v = _NAN if v != v else (1.0 / v if v != 0.0 else math.copysign(_INF, v))
        else:
            v = _one(fn, v)
        a[yo + i] = _INF if v > _TOP else (-_INF if v < -_TOP else v)


def _one(fn, v):
    """Function fn (not rsqrt) of one float32 value, unrounded (Python's float)."""
    if fn == 0:
        return -v
    if v != v:
        return v
    if fn == 1:
        return math.sqrt(v) if v >= 0.0 else _NAN
    if fn == 3:
        return v * v
    if fn == 4:
        try:
            return _INF if v > 709.0 else math.exp(v)
        except (OverflowError, ValueError):  # a float32 board's exp overflows above 88.7
            return _INF
    if fn == 5:
        return _NAN if v < 0.0 else (-_INF if v == 0.0 else (v if v == _INF else math.log(v)))
    if fn <= 7:
        if v - v != 0.0:
            return _NAN
        return math.sin(v) if fn == 6 else math.cos(v)
    if fn == 11:
        return v if v >= 0.0 else _expm1(v)
    if v == 0.0 or not -_INTEGRAL < v < _INTEGRAL:  # (keeps the sign of zero, and +-inf)
        return v
    f = float(math.floor(v))
    if fn == 8:
        return f
    if fn == 9:
        return f if f == v else (f + 1.0 if f != -1.0 else _NEG_ZERO)
    d = v - f  # TFLM's RoundToNearest: halves to the even neighbour
    return f if d < 0.5 or d == 0.5 and int(f) % 2 == 0 else f + 1.0


def _expm1_series(v):
    """exp(v) - 1 for ports whose math module lacks expm1: the series near 0 (where exp(v) - 1
    cancels), else the difference, both within float32's resolution."""
    if v > -1e-5:
        return v + v * v * (0.5 + v / 6.0)
    return math.exp(v) - 1.0


_expm1 = getattr(math, "expm1", None) or _expm1_series
