# quantize (f32 -> an integer dtype: round(x / scale) + zero point, half away from zero,
# saturated; or integer -> integer, a requantization) and dequantize (integer -> f32: scale *
# (q - zero point)), as TFLite Micro's QUANTIZE/DEQUANTIZE: the edges of an integer model that
# takes or gives floats, and the int8 <-> int16 crossings of mixed models.
import array

from .._arith import bits_f32, f32_bits, rec, requant, wrap32
from ..kinds import DEQUANTIZE, QUANTIZE, RESCALE
from . import Op as Base

_F32 = array.array("f", (0.0,))  # rounds a quotient to float32, as TFLM divides


_RANGE = {3: (-128, 127), 4: (0, 255), 5: (-32768, 32767), 7: (-2147483648, 2147483647),
          11: (-9223372036854775808, 9223372036854775807)}  # by dtype code (11 i64: floats within +-2^32)


def to_int(f, s, z, code=3):
    """round(f / s) + z, half away from zero, saturated to the integer dtype `code` (3 i8,
    5 i16, 7 i32); the quotient rounded to float32 first (TFLM's float division, also where
    floats are doubles). +-Inf saturate like any large value; NaN gives z (the code of 0.0:
    TFLM leaves it undefined)."""
    lo, hi = _RANGE[code]
    r = f / s
    if r != r:
        r = 0.0
    elif r > 4294967296.0:  # beyond every range whatever z is; keeps inf out of int()
        r = 4294967296.0
    elif r < -4294967296.0:
        r = -4294967296.0
    _F32[0] = r
    r = _F32[0]
    r = int(r + 0.5) if r >= 0 else -int(0.5 - r)
    r += z
    return lo if r < lo else (hi if r > hi else r)


def to_int8(f, s, z):
    return to_int(f, s, z, 3)


BLOCK = 256  # int32 scratch of an integer requantization (rescale record)


class Op(Base):
    """quantize: f32 -> an integer dtype (`dtype`, default i8) with q=; or an integer value
    -> another integer dtype or scale (TFLM's requantizing QUANTIZE), with m=multiplier,shift
    computed at pack time. dequantize: an integer value -> f32."""

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        from ..graph import zero_point

        x = ins[0]
        if name == "quantize":
            dt = kv.get("dtype", "i8")
            if dt == "f32":
                raise self.fail("quantize makes an integer value (dtype=i8, i16 or i32)", "dtype")
            zero_point(kv["q"], dt, n)
            if x.dtype == "f32":
                if "m" in kv:
                    raise self.fail("m= is for an integer input (a requantization)", "m")
            else:
                m = kv.get("m")
                if m is None or len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                    raise self.fail("an integer input needs m=multiplier,shift (0..2**31-1, -31..30)", "m")
                self.scratch = BLOCK
                self.mult = tuple(m)
            self.out = (x.shape, dt, kv["q"])
        else:
            if x.dtype == "f32":
                raise self.fail("dequantize takes an integer value", "x")
            self.out = (x.shape, "f32", None)

    def records(self, c):
        from ..graph import ITEMSIZE, RANGE

        x, y = self.x[0], self.y
        if self.name == "dequantize":
            return [c.record(DEQUANTIZE, [c.off(x), c.off(y), y.size, x.q[1], f32_bits(x.q[0]),
                                           ITEMSIZE[x.dtype]])]
        if x.dtype == "f32":
            return [c.record(QUANTIZE, [c.off(x), c.off(y), y.size, y.q[1], f32_bits(y.q[0]),
                                         ITEMSIZE[y.dtype]])]
        lo, hi = RANGE[y.dtype]
        m, s = self.mult
        return [c.record(RESCALE, [c.off(x), c.off(y), y.size, ITEMSIZE[x.dtype], ITEMSIZE[y.dtype], x.q[1],
                                    y.q[1], lo, hi, c.scratch, BLOCK, m, s, m, s, 0])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {QUANTIZE: 'quantize', DEQUANTIZE: 'dequantize', RESCALE: 'rescale'}


def _check(r, E):
    n = r.range(4, "x", 1, 1 << 24)
    q = r.kind == QUANTIZE
    es = r[7]
    if es not in (1, 2, 4):
        r.fail("dtype", "%d bytes per integer (1, 2 or 4)" % es)
    r.region(2, "x", n * (4 if q else es), 4 if q else es)
    r.region(3, "y", n * (es if q else 4), es if q else 4)
    r.range(5, "zero_point", -(1 << (8 * es - 1)), (1 << (8 * es - 1)) - 1)
    s = bits_f32(r[6])
    if not (s - s == 0 and s > 0):
        r.fail("q", "scale %r is not finite and > 0" % s)


def _check_rescale(r, E):
    xes, yes = r[5], r[6]
    if xes not in (1, 2, 4) or yes not in (1, 2, 4):
        r.fail("dtype", "%d and %d bytes per element (1, 2 or 4)" % (xes, yes))
    n = r.range(4, "x", 1, 1 << 24)
    r.region(2, "x", n * xes, xes)
    r.region(3, "y", n * yes, yes)
    xtop, ytop = (1 << (8 * xes - 1)) - 1, (1 << (8 * yes - 1)) - 1
    r.range(7, "zero_point", -xtop - 1, xtop)
    r.range(8, "zero_point", -ytop - 1, ytop)
    lo = r.range(9, "clamp", -ytop - 1, ytop)
    r.range(10, "clamp", lo, ytop)
    block = r.range(12, "scratch", 1, 1 << 16)
    r.region(11, "scratch", 4 * block, 4)
    r.mq(13, 2, "m")
    r.range(17, "alt", 0, 3)


def check(r, E):
    if r.kind == RESCALE:
        _check_rescale(r, E)
        r.inplace = 2
    else:
        _check(r, E)


# rescale record: 2 XO 3 YO (bytes) 4 N 5 XES 6 YES (bytes per input / output element: 1, 2, 4)
# 7 ZI 8 ZO 9 LO 10 HI 11 ACC (BLOCK int32) 12 BLOCK 13 M1 14 S1 15 M2 16 S2 17 ALT: y =
# clamp(ZO + mbqm(x - ZI, M1, S1)), or for x - ZI < 0 with ALT 1, 2, +-mbqm(x - ZI, M2, S2): TFLM's
# integer QUANTIZE (requantize), RELU, RELU6 and LEAKY_RELU of int16 values; ALT 3: clamp(ZO +
# mbqm(|x - ZI|, M1, S1)), TFLM's int16 ABS.

def rescale(E, P, k):
    p = rec(P, k)
    W, a32 = E.W, E.a32
    xes, yes = p[5], p[6]
    src = E.a8 if xes == 1 else (E.a16 if xes == 2 else a32)
    dst = E.a8 if yes == 1 else (E.a16 if yes == 2 else a32)
    xo, yo, n, zi = p[2] // xes, p[3] // yes, p[4], p[7]
    ao, block = p[11] // 4, p[12]
    mag = p[17] == 3
    W[2], W[3], W[4], W[5], W[6], W[7] = 1, p[8], p[9], p[10], yes, 0 if mag else p[17]
    if yes == 4:
        W[2] = -1  # int32 out: raw, then the zero point and the clamp here
    i = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            v = src[xo + i + q] - zi
            a32[ao + q] = wrap32(-v if mag and v < 0 else v)
        W[0] = yo + i
        W[1] = m
        requant(a32, ao, p, 13, dst, W)
        if yes == 4:
            for q in range(m):
                v = wrap32(dst[yo + i + q] + p[8])
                dst[yo + i + q] = p[9] if v < p[9] else (p[10] if v > p[10] else v)
        i += m


# quantize record: 2 XO (f32) 3 YO (integer) 4 N 5 ZY 6 SCALE (f32) 7 ES (bytes per integer: 1,
# 2, 4); dequantize: 2 XO (integer) 3 YO (f32) 4 N 5 ZX 6 SCALE 7 ES

def quantize(E, P, k):
    es = P[k + 7]
    f, a = E.af, E.view(es)
    xo, yo, n, z = P[k + 2] // 4, P[k + 3] // es, P[k + 4], P[k + 5]
    s = E.pf[k + 6]
    code = (0, 3, 5, 0, 7)[es]
    for i in range(n):
        a[yo + i] = to_int(f[xo + i], s, z, code)


def dequantize(E, P, k):
    es = P[k + 7]
    f, a = E.af, E.view(es)
    xo, yo, n, z = P[k + 2] // es, P[k + 3] // 4, P[k + 4], P[k + 5]
    s = E.pf[k + 6]
    for i in range(n):
        f[yo + i] = s * (a[xo + i] - z)
