# quantize (f32 -> an integer dtype: round(x / scale) + zero point, half away from zero,
# saturated; or integer -> integer, a requantization) and dequantize (integer -> f32: scale *
# (q - zero point)), as TFLite Micro's QUANTIZE/DEQUANTIZE: the edges of an integer model that
# takes or gives floats, and the int8 <-> int16 crossings of mixed models.
import array

from .. import check
from . import Op as Base

_F32 = array.array("f", (0.0,))  # rounds a quotient to float32, as TFLM divides


_RANGE = {3: (-128, 127), 5: (-32768, 32767), 7: (-2147483648, 2147483647)}  # by dtype code


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
        from ..program import f32_bits

        x, y = self.x[0], self.y
        if self.name == "dequantize":
            return [c.record(check.DEQUANTIZE, [c.off(x), c.off(y), y.size, x.q[1], f32_bits(x.q[0]),
                                                 ITEMSIZE[x.dtype]])]
        if x.dtype == "f32":
            return [c.record(check.QUANTIZE, [c.off(x), c.off(y), y.size, y.q[1], f32_bits(y.q[0]),
                                               ITEMSIZE[y.dtype]])]
        lo, hi = RANGE[y.dtype]
        m, s = self.mult
        return [c.record(check.RESCALE, [c.off(x), c.off(y), y.size, ITEMSIZE[x.dtype], ITEMSIZE[y.dtype], x.q[1],
                                          y.q[1], lo, hi, c.scratch, BLOCK, m, s, m, s, 0])]
