# quantize (f32 -> i8: round(x / scale) + zero point, half away from zero, saturated) and
# dequantize (i8 -> f32: scale * (q - zero point)), as TFLite Micro's QUANTIZE/DEQUANTIZE: the
# edges of an int8 model that takes or gives floats. (int8 -> int8 requantization is a lut.)
import array

from . import Op as Base


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

    def prepare(self, m, scr=None):
        self.m = m
        self.t = array.array("f", (0.0,))  # rounds a quotient to float32, as TFLM divides

    def run(self):
        m = self.m
        x, y = self.x[0], self.y
        xo, yo = x.offset, y.offset
        if self.name == "quantize":
            s, z = y.q
            a, f = m.arena, m.farena
            t = self.t
            for i in range(y.size):
                t[0] = f[xo + i] / s  # float32(a / b) even where floats are doubles
                r = t[0]
                r = int(r + 0.5) if r >= 0 else -int(0.5 - r)
                r += z
                a[yo + i] = -128 if r < -128 else (127 if r > 127 else r)
        else:
            s, z = x.q
            a, f = m.arena, m.farena
            for i in range(y.size):
                f[yo + i] = s * (a[xo + i] - z)
