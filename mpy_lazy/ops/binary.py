# add, sub and mul of two values: the same shape, or one of them per channel ((C,) or (1, 1, C))
# broadcast over an H, W, C value (residual adds, per-channel scaling, squeeze-and-excite).
# Integer add and sub follow TFLite Micro: both inputs rescaled to a common scale with 20
# (int8) or 15 (int16) bits of headroom (m = m1,s1,m2,s2,m,s), added or subtracted,
# requantized; int8 mul: m = m,s of the product.
from .. import check
from ..graph import clamp
from . import Op as Base, act_code

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
                if name == "sub":
                    raise self.fail("sub broadcasts its second input only (%s - %s)" % (a.shape, b.shape), "x")
                self.swap = True  # kernels broadcast their second input
            else:
                raise self.fail("shapes %s and %s: equal, or one per channel" % (a.shape, b.shape), "x")
        big = b if self.swap else a
        self.act = act_code(kv)
        self.mq = kv.get("m")
        dt = self.quantized(("i8",) if name == "mul" else ("i8", "i16"))
        if dt != "f32":
            self.needs("m")
            want = 2 if name == "mul" else 6
            if len(kv["m"]) != want:
                raise self.fail("integer %s needs m= with %d integers" % (name, want), "m")
            for i in range(1, want, 2):
                if not 0 <= kv["m"][i - 1] < 2 ** 31 or not -31 <= kv["m"][i] <= (0 if want == 6 else 30):
                    raise self.fail("m=%s: multipliers 0..2**31-1, shifts -31..%d" % (kv["m"], 0 if want == 6 else 30),
                                    "m")
            self.clamp = clamp(kv, n, dt)
            self.scratch = (512 if name != "mul" else 0) + BLOCK
        self.out = (big.shape, dt, kv.get("q"))

    def records(self, c):
        a, b = self.x
        if self.swap:
            a, b = b, a
        y = self.y
        io = [c.off(a), c.off(b), c.off(y), a.size, b.size]
        if y.dtype == "f32":
            kind = {"add": check.FADD, "sub": check.FSUB, "mul": check.FMUL}[self.name]
            return [c.record(kind, [0, self.act, 0, 0] + io)]
        mq = list(self.mq)
        if self.swap and self.name == "add":
            mq = mq[2:4] + mq[0:2] + mq[4:]
        head = [1, y.q[1], self.clamp[0], self.clamp[1]] + io + [BLOCK, a.q[1], b.q[1]]
        s = c.scratch
        if self.name == "mul":
            return [c.record(check.MUL, head + [s] + mq)]
        wide = y.dtype == "i16"
        kind = (check.ADD16 if wide else check.ADD) if self.name == "add" else (check.SUB16 if wide else check.SUB)
        return [c.record(kind, head + [s, s + 2048] + mq)]
