# minimum, maximum, div and prelu: elementwise ops of two operands (TFLite's MINIMUM, MAXIMUM,
# DIV, PRELU). The second operand (a value, or for minimum/maximum a constant tensor t=, for
# prelu the alpha tensor w=; a tensor has `shape`, default one value per channel) has the
# first's shape, one value per channel, or one value: it is repeated over the first.
#
# Integer arithmetic, TFLite Micro's: minimum and maximum compare the stored codes (i8, i16 or
# i32; no requantization: the converter gives inputs and output one quantization); int8 div
# computes TFLM's fixed-point quotient with t= the table of its reciprocals (made at pack
# time), m=M,S the multiplier of scale1 / (scale2 x output scale); int8 prelu: m=M,S,ZA for
# x < z_x (the product (x - z_x)(alpha - ZA) requantized), t= the table of the other half.
from .. import check
from ..graph import ITEMSIZE, clamp
from . import Op as Base, act_code

BLOCK = 256  # prelu's int32 accumulators per requantization call


class Op(Base):
    inplace = True  # (prelu is not: see records)

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        const = {"prelu": "w", "div": None}.get(name, "t")  # the key of a constant second operand
        if len(ins) != (1 if const in kv else 2):
            raise self.fail("takes x=a,b%s" % (" or x=a %s=tensor" % const if const else ""), "x")
        if name == "prelu":
            self.inplace = False
        dt = self.quantized(("i8",) if name in ("div", "prelu") else ("i8", "i16", "i32"))
        if len(ins) == 2:
            other = ins[1].shape
            if "shape" in kv:
                raise self.fail("shape= is the shape of a constant operand", "shape")
        else:
            other = tuple(kv.get("shape", (x.shape[-1],)))
            self.param("weight", const, other, "f32" if dt == "f32" else dt, init)
        size = 1
        for d in other:
            size *= d
        if tuple(other) == tuple(x.shape):
            self.bc = x.size
        elif size == 1 or size == x.shape[-1] and other[-1] == size:
            self.bc = size
        else:
            raise self.fail("second operand of shape %s: %s, one per channel or one value" % (other, x.shape), "x")
        self.act = act_code(kv)
        if dt != "f32" and name in ("div", "prelu"):
            m = kv.get("m")
            want = 2 if name == "div" else 3
            if m is None or len(m) != want or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= (22 if want == 2 else 30):
                raise self.fail("int8 %s needs m=%s" % (name, "M,S (S <= 22)" if want == 2 else "M,S,ZA"), "m")
            if name == "prelu" and not -128 <= m[2] <= 127:
                raise self.fail("m=%s: ZA, the alpha zero point, is -128..127" % (m,), "m")
            if "t" not in kv:
                raise self.fail("int8 %s needs t= (%s)" % (name, "its reciprocals" if name == "div" else "its table"),
                                "t")
            self.mult = tuple(m)
            self.param("table", "t", (256,), "i32" if name == "div" else "i8", init)
            self.clamp = clamp(kv, n)
            if name == "prelu":
                self.scratch = BLOCK
        elif "t" in kv and name != "minimum" and name != "maximum":
            raise self.fail("t= is for int8 %s" % name, "t")
        self.out = (x.shape, dt, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        es = ITEMSIZE[x.dtype]
        op = getattr(self, "weight", None)
        x2 = [1, 0] + c.ref(op) if op is not None else [0, c.off(self.x[1]), 0, 0]
        if x.dtype == "f32":
            code = {"minimum": 0, "maximum": 1, "div": 2, "prelu": 3}[self.name]
            return [c.record(check.FBINARY, [code, self.act, c.off(x), c.off(y), y.size, self.bc] + x2)]
        if self.name in ("minimum", "maximum"):
            return [c.record(check.MINMAX, [1 if self.name == "maximum" else 0, es, c.off(x), c.off(y), y.size,
                                            self.bc] + x2)]
        head = [1, y.q[1], self.clamp[0], self.clamp[1]]
        if self.name == "div":
            return [c.record(check.DIV, head + [c.off(x), c.off(self.x[1]), c.off(y), y.size, self.bc, x.q[1],
                                                self.x[1].q[1], self.mult[0], self.mult[1]] + c.ref(self.table))]
        return [c.record(check.PRELU, head + [c.off(x), c.off(y), y.size, self.bc, x.q[1], self.mult[2],
                                              self.mult[0], self.mult[1]] + c.ref(self.weight) + c.ref(self.table)
                         + [c.scratch, BLOCK])]

