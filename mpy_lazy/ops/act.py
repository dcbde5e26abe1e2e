# Elementwise activations. Float: relu, relu6, clip (lo, hi), leakyrelu (alpha), sigmoid, tanh,
# hardswish, hardsigmoid (alpha, beta: ONNX's), gelu (approx=tanh: its tanh form).
# int8: lut, a 256-entry table made at pack time by running TFLite Micro's own integer
# arithmetic (or the float function, for ONNX models) on every input code, so any elementwise
# int8 function (relu with requantization, relu6, sigmoid, tanh, leaky relu, requantize) is one
# table lookup and bit-exact by construction. All may run in place.
from .. import check
from . import Op as Base

_FN = {"relu": 0, "relu6": 1, "clip": 2, "leakyrelu": 3, "sigmoid": 4, "tanh": 5, "hardswish": 6, "hardsigmoid": 7,
       "gelu": 8}


class Op(Base):
    inplace = True

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if name == "lut":
            if x.dtype != "i8":
                raise self.fail("lut takes an i8 value", "x")
            self.param("table", "t", (256,), "i8", init)
        elif name == "leakyrelu" and x.dtype == "i16":
            # TFLM's int16 LEAKY_RELU: m=m_identity,s_identity,m_alpha,s_alpha (m_alpha < 0 for
            # alpha < 0); an int8 one is a lut
            self.quantized(("i16",))
            m = kv.get("m")
            if m is None or len(m) != 4 or not 0 <= m[0] < 2 ** 31 or not -2 ** 31 < m[2] < 2 ** 31 or \
                    not -31 <= m[1] <= 30 or not -31 <= m[3] <= 30:
                raise self.fail("an int16 leakyrelu needs m=m_identity,s_identity,m_alpha,s_alpha", "m")
            self.mult = tuple(m)
            self.scratch = 256
        else:
            self.float_only()
            if name == "clip" and not kv["lo"] <= kv["hi"]:
                raise self.fail("clip needs lo <= hi", "lo")
            if name == "clip":
                self.arg = (kv["lo"], kv["hi"])
            elif name == "hardsigmoid":
                self.arg = (kv.get("alpha", 0.2), kv.get("beta", 0.5))
            else:
                self.arg = (kv.get("alpha", 0.0), 0.0)
            self.fn = 9 if name == "gelu" and kv.get("approx") == "tanh" else _FN[name]
        self.out = (x.shape, x.dtype, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        if self.name == "lut":
            return [c.record(check.LUT, [0, 0, 0, 0, c.off(x), c.off(y), y.size] + c.ref(self.table))]
        if x.dtype == "i16":  # leakyrelu
            m1, s1, m2, s2 = self.mult
            return [c.record(check.RESCALE, [c.off(x), c.off(y), y.size, 2, 2, x.q[1], y.q[1], -32768, 32767,
                                              c.scratch, 256, m1, s1, -m2 if m2 < 0 else m2, s2, 2 if m2 < 0 else 1])]
        from ..program import f32_bits

        return [c.record(check.FACT, [self.fn, c.off(x), c.off(y), y.size, f32_bits(self.arg[0]),
                                      f32_bits(self.arg[1])])]
