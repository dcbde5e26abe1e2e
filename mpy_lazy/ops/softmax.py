# softmax over the last axis. int8: TFLite Micro's fixed-point softmax (output q 1/256, -128):
# t= is the table of exp(-d * input scale * beta) for input differences d = 0..255 in Q0.31,
# made at pack time with TFLM's own exp_on_negative_values; the board does the rest in
# integers (sum, reciprocal by Newton-Raphson, scaling), as TFLM does.
import array
import math

from .. import kernels
from . import Op as Base, ints, kbuf


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        self.depth = x.shape[-1]
        self.beta = kv.get("beta", 1.0)
        if self.int8():
            q = kv["q"]
            if q[1] != -128 or abs(q[0] * 256 - 1) > 1e-6:
                raise self.fail("int8 softmax outputs q=0.00390625,-128 (1/256), not %s" % (q,), "q")
            if "t" not in kv:
                raise self.fail("int8 softmax needs t= (the exp table)", "t")
            if self.depth > 511:
                raise self.fail("int8 softmax over %d > 511 values (TFLM's fixed point overflows)" % self.depth, "x")
            self.param("table", "t", (256,), "i32", init)
        elif "t" in kv:
            raise self.fail("t= is for int8 softmax", "t")
        self.out = (x.shape, x.dtype, kv.get("q"))

    def prepare(self, m, scr=None):
        x, y = self.x[0], self.y
        if y.dtype != "i8":
            self.m = m
        else:
            self.p = ints((0, 0, 1, -128, -128, 127, x.offset, y.offset, self.depth, x.size // self.depth))
            self.b = (m.arena, kbuf(self.table, "i32"), array.array("i", (0, 0, 0, 0)))

    def run(self):
        if self.y.dtype == "i8":
            kernels.i8.softmax(self.b, self.p)
            return
        a = self.m.farena
        n = self.depth
        beta = self.beta
        xo, yo = self.x[0].offset, self.y.offset
        neg = beta < 0  # then the largest (x - top) * beta is at the smallest x (issue 13)
        for _ in range(self.y.size // n):
            top = a[xo]
            for i in range(1, n):
                if (a[xo + i] < top) if neg else (a[xo + i] > top):
                    top = a[xo + i]
            s = 0.0
            for i in range(n):
                e = math.exp((a[xo + i] - top) * beta)
                a[yo + i] = e
                s += e
            for i in range(n):
                a[yo + i] = a[yo + i] / s
            xo += n
            yo += n
