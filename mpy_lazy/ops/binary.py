# add and mul of two values: the same shape, or one of them per channel ((C,) or (1, 1, C))
# broadcast over an H, W, C value (residual adds, per-channel scaling).
# int8 add follows TFLite Micro: both inputs rescaled to a common scale with 20 bits of
# headroom (m = m1,s1,m2,s2,m,s), summed, requantized; int8 mul: m = m,s of the product.
from .. import kernels
from ..graph import clamp
from . import Op as Base, act_range, i32, ints

BLOCK = 256  # int32 accumulators per requantization call (scratch in the arena: kept small)


class Op(Base):
    inplace = True  # elementwise: the output may take the first input's buffer (same size)

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        if len(ins) != 2:
            raise self.fail("takes two inputs (x=a,b)", "x")
        a, b = ins
        self.swap = False
        if a.shape != b.shape:
            if b.size == a.shape[-1] and b.size != a.size:
                pass
            elif a.size == b.shape[-1] and a.size != b.size:
                self.swap = True  # kernels broadcast their second input
            else:
                raise self.fail("shapes %s and %s: equal, or one per channel" % (a.shape, b.shape), "x")
        big = b if self.swap else a
        self.lo, self.hi = act_range(kv)
        self.mq = kv.get("m")
        q8 = self.int8()
        if q8:
            self.needs("m")
            want = 6 if name == "add" else 2
            if len(kv["m"]) != want:
                raise self.fail("int8 %s needs m= with %d integers" % (name, want), "m")
            for i in range(1, want, 2):
                if not 0 <= kv["m"][i - 1] < 2 ** 31 or not -31 <= kv["m"][i] <= 30:
                    raise self.fail("m=%s: multipliers 0..2**31-1, shifts -31..30" % (kv["m"],), "m")
            self.clamp = clamp(kv, n)
            self.scratch = (512 if name == "add" else 0) + min(BLOCK, max(big.size, 256))
        self.out = (big.shape, "i8" if q8 else "f32", kv.get("q"))

    def prepare(self, m, scr=None):
        a, b = self.x
        if self.swap:
            a, b = b, a
        y = self.y
        if y.dtype != "i8":
            self.m = m
            return
        mq = self.mq
        if self.swap and self.name == "add":
            mq = mq[2:4] + mq[0:2] + mq[4:]
        block = min(BLOCK, max(a.size, 256))
        self.p = ints((0, 0, 1, y.q[1], self.clamp[0], self.clamp[1], a.offset, b.offset, y.offset,
                       a.size, b.size, block, a.q[1], b.q[1]))
        if self.name == "add":
            self.b = (m.arena, i32(scr[:2048], 512), i32(scr[2048:], block), ints(mq[0:2]), ints(mq[2:4]),
                      ints(mq[4:6]))
        else:
            self.b = (m.arena, ints(mq), i32(scr, block))

    def run(self):
        if self.y.dtype == "i8":
            if self.name == "add":
                kernels.i8.add(self.b, self.p)
            else:
                kernels.i8.mul(self.b, self.p)
            return
        a, b = self.x
        if self.swap:
            a, b = b, a
        f = self.m.farena
        ao, bo, yo, bc = a.offset, b.offset, self.y.offset, b.size
        lo, hi = self.lo, self.hi
        is_add = self.name == "add"
        j = 0
        for i in range(a.size):
            v = f[ao + i] + f[bo + j] if is_add else f[ao + i] * f[bo + j]
            if lo is not None and v < lo:
                v = lo
            if hi is not None and v > hi:
                v = hi
            f[yo + i] = v
            j += 1
            if j == bc:
                j = 0
