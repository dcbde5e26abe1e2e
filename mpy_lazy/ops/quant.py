# quantize (f32 -> i8: round(x / scale) + zero point, half away from zero, saturated) and
# dequantize (i8 -> f32: scale * (q - zero point)), as TFLite Micro's QUANTIZE/DEQUANTIZE: the
# edges of an int8 model that takes or gives floats. (int8 -> int8 requantization is a lut.)
import array

from .. import check
from . import Op as Base

_F32 = array.array("f", (0.0,))  # rounds a quotient to float32, as TFLM divides


def to_int8(f, s, z):
    """round(f / s) + z, half away from zero, saturated to int8; the quotient rounded to
    float32 first (TFLM's float division, also where floats are doubles). +-Inf saturate like
    any large value; NaN gives z (the code of 0.0: TFLM leaves it undefined)."""
    r = f / s
    if r != r:
        r = 0.0
    elif r > 256.0:  # beyond the int8 range whatever z is; keeps inf out of int()
        r = 256.0
    elif r < -256.0:
        r = -256.0
    _F32[0] = r
    r = _F32[0]
    r = int(r + 0.5) if r >= 0 else -int(0.5 - r)
    r += z
    return -128 if r < -128 else (127 if r > 127 else r)


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
