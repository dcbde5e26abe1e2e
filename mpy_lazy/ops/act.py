# Elementwise activations. Float: relu, relu6, clip (lo, hi), leakyrelu (alpha), sigmoid, tanh.
# int8: lut, a 256-entry table made at pack time by running TFLite Micro's own integer
# arithmetic (or the float function, for ONNX models) on every input code, so any elementwise
# int8 function (relu with requantization, relu6, sigmoid, tanh, leaky relu, requantize) is one
# table lookup and bit-exact by construction. All may run in place.
from .. import check
from . import Op as Base

_FN = {"relu": 0, "relu6": 1, "clip": 2, "leakyrelu": 3, "sigmoid": 4, "tanh": 5}


class Op(Base):
    inplace = True

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if name == "lut":
            if x.dtype != "i8":
                raise self.fail("lut takes an i8 value", "x")
            self.param("table", "t", (256,), "i8", init)
        else:
            self.float_only()
            if name == "clip" and not kv["lo"] <= kv["hi"]:
                raise self.fail("clip needs lo <= hi", "lo")
            self.arg = (kv["lo"], kv["hi"]) if name == "clip" else (kv.get("alpha", 0.0), 0.0)
        self.out = (x.shape, x.dtype, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        if self.name == "lut":
            return [c.record(check.LUT, [0, 0, 0, 0, c.off(x), c.off(y), y.size] + c.ref(self.table))]
        from ..program import f32_bits

        return [c.record(check.FACT, [_FN[self.name], c.off(x), c.off(y), y.size, f32_bits(self.arg[0]),
                                      f32_bits(self.arg[1])])]
