# quantize (f32 -> i8: round(x / scale) + zero point, half away from zero, saturated) and
# dequantize (i8 -> f32: scale * (q - zero point)), as TFLite Micro's QUANTIZE/DEQUANTIZE: the
# edges of an int8 model that takes or gives floats. (int8 -> int8 requantization is a lut.)
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


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if name == "quantize":
            if x.dtype != "f32":
                raise self.fail("quantize takes an f32 value (int8 -> int8 is a lut)", "x")
            self.out = (x.shape, "i8", kv["q"])
        else:
            if x.dtype != "i8":
                raise self.fail("dequantize takes an i8 value", "x")
            self.out = (x.shape, "f32", None)

    def records(self, c):
        from ..program import f32_bits

        x, y = self.x[0], self.y
        if self.name == "quantize":
            return [c.record(check.QUANTIZE, [c.off(x), c.off(y), y.size, y.q[1], f32_bits(y.q[0])])]
        return [c.record(check.DEQUANTIZE, [c.off(x), c.off(y), y.size, x.q[1], f32_bits(x.q[0])])]
