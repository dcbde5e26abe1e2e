# Elementwise activations. Float: relu, relu6, clip (lo, hi), leakyrelu (alpha), sigmoid, tanh.
# int8: lut, a 256-entry table made at pack time by running TFLite Micro's own integer
# arithmetic (or the float function, for ONNX models) on every input code, so any elementwise
# int8 function (relu with requantization, relu6, sigmoid, tanh, leaky relu, requantize) is one
# table lookup and bit-exact by construction. All may run in place.
import math

from .. import kernels
from . import Op as Base, ints, kbuf


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
            self.arg = (kv["lo"], kv["hi"]) if name == "clip" else kv.get("alpha")
        self.out = (x.shape, x.dtype, kv.get("q"))

    def prepare(self, m, scr=None):
        self.m = m
        if self.name == "lut":
            self.p = ints((0, 0, 1, 0, -128, 127, self.x[0].offset, self.y.offset, self.y.size))
            self.b = (m.arena, kbuf(self.table, "i8"))

    def run(self):
        if self.name == "lut":
            kernels.i8.lut(self.b, self.p)
            return
        a = self.m.farena
        xo, yo = self.x[0].offset, self.y.offset
        name = self.name
        arg = self.arg
        for i in range(self.y.size):
            v = a[xo + i]
            if name == "relu":
                v = v if v > 0.0 else 0.0
            elif name == "relu6":
                v = 0.0 if v < 0.0 else (6.0 if v > 6.0 else v)
            elif name == "clip":
                v = arg[0] if v < arg[0] else (arg[1] if v > arg[1] else v)
            elif name == "leakyrelu":
                v = v if v >= 0.0 else v * arg
            elif name == "sigmoid":
                v = 1.0 / (1.0 + math.exp(-v)) if v >= 0.0 else math.exp(v) / (1.0 + math.exp(v))
            else:
                v = math.tanh(v)
            a[yo + i] = v
