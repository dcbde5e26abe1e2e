# cast: a value to another dtype (TFLite's CAST): integer codes as numbers, not as quantized
# reals (an integer output has q=1.0,0 unless given). Integer to integer keeps the low bits;
# integer to f32 rounds to the nearest f32; f32 to integer truncates toward zero, saturates,
# and gives 0 for NaN (the tflite-micro interpreter's results).
from .. import check
from ..graph import ITEMSIZE, zero_point
from . import Op as Base

_CODE = {"f32": 1, "i8": 3, "i16": 5, "i32": 7}  # FORMAT.md's dtype codes


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        dt = kv["dtype"]
        q = None
        if dt != "f32":
            q = kv.get("q", (1.0, 0))
            zero_point(q, dt, n)
        elif "q" in kv:
            raise self.fail("an f32 output takes no q=", "q")
        self.out = (x.shape, dt, q)

    def records(self, c):
        x, y = self.x[0], self.y
        if "f32" in (x.dtype, y.dtype):
            return [c.record(check.FCAST, [c.off(x), c.off(y), y.size, _CODE[x.dtype], _CODE[y.dtype]])]
        return [c.record(check.CAST, [c.off(x), c.off(y), y.size, ITEMSIZE[x.dtype], ITEMSIZE[y.dtype]])]
