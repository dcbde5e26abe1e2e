# softmax over the last axis. int8: TFLite Micro's fixed-point softmax (output q 1/256, -128;
# with dtype=i16, an int16 output of q 1/65536, -32768, as TFLM's int8 -> int16 softmax):
# t= is the table of exp(-d * input scale * beta) for input differences d = 0..255 in Q0.31,
# made at pack time with TFLM's own exp_on_negative_values; the board does the rest in
# integers (sum, reciprocal by Newton-Raphson, scaling), as TFLM does.
from .. import check
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        self.depth = x.shape[-1]
        self.beta = kv.get("beta", 1.0)
        dt = kv.get("dtype", x.dtype)
        if x.dtype == "i8" and dt == "i16":
            if "q" not in kv:
                raise self.fail("an int16 softmax output needs q=", "q")
            q = kv["q"]
            if q[1] != -32768 or abs(q[0] * 65536 - 1) > 1e-3:  # TFLM's Prepare: 1/65536 within 0.1%
                raise self.fail("an int16 softmax output is q=1.52587890625e-05,-32768 (1/65536), not %s"
                                % (q,), "q")
        elif dt != x.dtype:
            raise self.fail("dtype=%s: an int8 softmax may output i16; others keep the input's dtype" % dt,
                            "dtype")
        elif self.int8():
            q = kv["q"]
            if q[1] != -128 or abs(q[0] * 256 - 1) > 1e-6:
                raise self.fail("int8 softmax outputs q=0.00390625,-128 (1/256), not %s" % (q,), "q")
        elif "t" in kv:
            raise self.fail("t= is for int8 softmax", "t")
        if x.dtype == "i8":
            if "t" not in kv:
                raise self.fail("int8 softmax needs t= (the exp table)", "t")
            if self.depth > 511:
                raise self.fail("int8 softmax over %d > 511 values (TFLM's fixed point overflows)" % self.depth, "x")
            self.param("table", "t", (256,), "i32", init)
        self.out = (x.shape, dt, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        rows = x.size // self.depth
        if x.dtype == "i8":
            kind = check.SOFTMAX if y.dtype == "i8" else check.SOFTMAX16
            return [c.record(kind, [0, 0, 0, 0, c.off(x), c.off(y), self.depth, rows] + c.ref(self.table))]
        from ..program import f32_bits

        return [c.record(check.FSOFTMAX, [c.off(x), c.off(y), self.depth, rows, f32_bits(self.beta)])]
