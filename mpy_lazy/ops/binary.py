# add, sub and mul of two values, or of a value and a constant tensor (t=, of shape=, default one
# per channel; tq= its quantization when integer): the same shape, or the smaller one's shape the
# trailing dimensions of the other's (leading 1s aside: one value, one per channel, (W, C) over
# H, W, C ...), repeated over it (residual adds, per-channel scaling, squeeze-and-excite). A
# constant is copied into the op's scratch by a load record before the op's record runs. Any
# other broadcast of two values (numpy's: (H, 1, C) with (1, W, C), (H, W, 1) over (H, W, C))
# is made by move records with zero strides, copying the operands that need it into the scratch
# at the output's shape (RAM: their broadcast size, while the op runs). sub rev=1: y = t - x, t
# of x's shape (TFLite's SUB of a constant first operand; the packer broadcasts it).
# Integer add and sub follow TFLite Micro: both inputs rescaled to a common scale with 20
# (int8) or 15 (int16) bits of headroom (m = m1,s1,m2,s2,m,s), added or subtracted,
# requantized; int8 mul: m = m,s of the product.
from .._arith import ACTS, head, rec, requant, wrap32
from ..kinds import ADD, ADD16, FADD, FMUL, FSUB, IARITH, LOAD, MOVE, MUL, MUL16, SUB, SUB16
from . import Op as Base, act_code, broadcast as _broadcast, repeats as _repeats, spread as _spread

BLOCK = 256  # int32 accumulators per requantization call (scratch in the arena: kept small)


class Op(Base):
    inplace = True  # elementwise: the output may take the first input's buffer (same size)

    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import clamp

        Base.__init__(self, name, kv, ins, n)
        const = "t" in kv
        if len(ins) != (1 if const else 2):
            raise self.fail("takes two inputs (x=a,b), or one and a constant (x=a t=tensor)", "x")
        if not const and ("shape" in kv or "tq" in kv):
            raise self.fail("shape= and tq= describe a constant operand (t=)", "shape" if "shape" in kv else "tq")
        a = ins[0]
        bshape = tuple(kv.get("shape", (a.shape[-1],))) if const else ins[1].shape
        self.rev = kv.get("rev", 0)  # sub: y = t - x (TFLite's SUB of a constant first operand)
        if self.rev:
            if name != "sub" or not const or self.rev != 1:
                raise self.fail("rev=1 is for sub with a constant (y = t - x)", "rev")
            if bshape != a.shape:  # (it is the kernel's first operand: it has the output's shape)
                raise self.fail("rev=1: the constant's shape %s is x's %s" % (bshape, a.shape), "shape")
            self.inplace = False  # (the output may not take x's buffer: x is the kernel's second input)
        self.swap = False
        self.spread = ()  # the operands (0, 1) copied out at the output's shape
        oshape = a.shape
        if not _repeats(bshape, a.shape):
            if not const and name != "sub" and _repeats(a.shape, bshape):
                self.swap = True  # kernels broadcast their second input
                oshape = bshape
            elif const:
                raise self.fail("a constant of shape %s over %s: its shape, leading 1s aside, is x's trailing "
                                "dimensions (the packer broadcasts it that far)" % (bshape, a.shape), "shape")
            else:
                oshape = _broadcast(a.shape, bshape)
                if oshape is None:
                    raise self.fail("shapes %s and %s do not broadcast" % (a.shape, bshape), "x")
                self.spread = tuple([i for i, s in ((0, a.shape), (1, bshape)) if s != oshape and
                                     (i == 0 or not _repeats(s, oshape))])
        self.act = act_code(kv)
        self.mq = kv.get("m")
        dt = self.quantized(("i8", "i16", "i32"))
        if dt == "i32":  # unquantized int32 (TFLM's plain ADD, SUB, MUL): ops/elementwise.py's iarith
            if self.spread or "m" in kv or "tq" in kv:
                raise self.fail("int32 %s: no m= or tq=, the second operand one value, one per channel or x's "
                                "shape" % name, "x")
            if const:
                self.param("weight", "t", bshape, dt, init)
            size = 1
            for d in bshape:
                size *= d
            self.bsize = size
            self.clamp = clamp(kv, n, dt)
            self.out = (oshape, dt, kv.get("q"))
            return
        self.tq = None
        if const:
            from ..graph import ITEMSIZE, zero_point

            if dt != "f32":
                if "tq" not in kv:
                    raise self.fail("an integer constant operand needs tq=scale,zero_point", "tq")
                zero_point(kv["tq"], dt, n, "tq")
                self.tq = tuple(kv["tq"])
            elif "tq" in kv:
                raise self.fail("tq= is for an integer constant; the input is f32", "tq")
            self.param("weight", "t", bshape, dt, init)
            size = 1
            for d in bshape:
                size *= d
            self.bsize = size
            self.cwords = (size * ITEMSIZE[dt] + 3) // 4  # the constant's copy, after the kernel's scratch
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
            zs = [v.q[1] for v in ins] + [kv["q"][1]] + ([kv["tq"][1]] if const else [])
            if name == "mul" and dt == "i16" and any(zs):
                raise self.fail("int16 mul takes zero points 0 (TFLM's 16-bit MUL), not %s" % zs, "q")
        self.scratch += getattr(self, "cwords", 0)
        self.spread_at = self.scratch  # (words) where the spread operands begin
        for i in self.spread:
            from ..graph import ITEMSIZE

            size = 1
            for d in oshape:
                size *= d
            self.scratch += (size * ITEMSIZE[dt] + 3) // 4
        self.out = (oshape, dt, kv.get("q"))

    def records(self, c):
        from ..graph import ITEMSIZE

        a, y = self.x[0], self.y
        if y.dtype == "i32":
            b = [1, 0] + c.ref(self.weight) if len(self.x) == 1 else [0, c.off(self.x[1]), 0, 0]
            if self.swap:
                a, b = self.x[1], [0, c.off(self.x[0]), 0, 0]
            return [c.record(IARITH, [("add", "sub", "mul").index(self.name), self.clamp[0], self.clamp[1], c.off(a),
                                      c.off(y), y.size, self.x[0].size if self.swap else self.bsize] + b)]
        out = []
        if hasattr(self, "bsize"):  # the constant, copied to the end of the scratch
            ob = c.scratch + 4 * (self.scratch - self.cwords)
            out.append(c.record(LOAD, [ob, self.bsize * ITEMSIZE[y.dtype]] + c.ref(self.weight)))
            io = [c.off(a), ob, c.off(y), a.size, self.bsize]
            za, zb = a.q[1] if a.q else 0, self.tq[1] if self.tq is not None else 0
            if self.rev:  # t - x: the constant first
                io[0], io[1], za, zb = ob, io[0], zb, za
        else:
            a, b = self.x
            if self.swap:
                a, b = b, a
            offs = [c.off(a), c.off(b)]
            at = c.scratch + 4 * self.spread_at
            for i in self.spread:  # copied out at the output's shape (zero strides repeat)
                out.append(c.record(MOVE, _spread(self.x[i].shape, y.shape, offs[i], at, ITEMSIZE[y.dtype])))
                offs[i] = at
                at += ((y.size * ITEMSIZE[y.dtype] + 3) // 4) * 4
            io = [offs[0], offs[1], c.off(y), y.size, y.size if 1 in self.spread else b.size]
            za, zb = a.q[1] if a.q else 0, b.q[1] if b.q else 0
        if y.dtype == "f32":
            kind = {"add": FADD, "sub": FSUB, "mul": FMUL}[self.name]
            return out + [c.record(kind, [0, self.act, 0, 0] + io)]
        mq = list(self.mq)
        if self.swap and self.name == "add":
            mq = mq[2:4] + mq[0:2] + mq[4:]
        head = [1, y.q[1], self.clamp[0], self.clamp[1]] + io + [BLOCK, za, zb]
        s = c.scratch
        if self.name == "mul":
            return out + [c.record(MUL16 if y.dtype == "i16" else MUL, head + [s] + mq)]
        wide = y.dtype == "i16"
        kind = (ADD16 if wide else ADD) if self.name == "add" else (SUB16 if wide else SUB)
        return out + [c.record(kind, head + [s, s + 2048] + mq)]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {ADD: 'add', MUL: 'mul', FADD: 'fadd', FMUL: 'fmul', ADD16: 'add16', SUB: 'sub', SUB16: 'sub16',
           FSUB: 'fsub', LOAD: 'load', MUL16: 'mul16'}


def _check(r, E):
    fl = r.kind in (FADD, FMUL, FSUB)
    wide = r.kind in (ADD16, SUB16, MUL16)
    mul = r.kind in (MUL, MUL16)
    n = r.range(9, "x", 1, 1 << 24)
    bc = r.range(10, "x", 1, n)
    if n % bc:
        r.fail("x", "%d elements do not repeat a %d-element input" % (n, bc))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", n * size, size)
    r.region(7, "x", bc * size, size)
    r.region(8, "y", n * size, size)
    if fl:
        r.range(3, "act", 0, 3)
        return
    top = (1 << (8 * size - 1)) - 1
    r.clamp(size)
    r.range(2, "out", 1, 1)
    block = r.range(11, "scratch", 256 if not mul else 1, 256 if not mul else 1 << 16)
    if r.kind == MUL16:  # (TFLM's; the products then fit in int32)
        r.range(3, "zero_point", 0, 0)
        r.range(12, "zero_point", 0, 0)
        r.range(13, "zero_point", 0, 0)
    r.range(12, "zero_point", -top - 1, top)
    r.range(13, "zero_point", -top - 1, top)
    if not mul:
        r.region(14, "scratch", 4 * 512, 4)
        r.region(15, "scratch", 4 * block, 4)
        r.mq(16, 3, "m", left=False)
    else:
        r.region(14, "scratch", 4 * block, 4)
        r.mq(15, 1, "m")


def check(r, E):
    if r.kind == LOAD:
        n = r.range(3, "shape", 1, 1 << 26)
        r.region(2, "y", n)
        r.tensor(4, "t", ("i8", "i16", "f32", "i32", "u8"), n)
        return
    _check(r, E)
    r.inplace = 6


# load record: 2 DO (bytes) 3 N (bytes) 4-5 the tensor (slot, offset): its N bytes to the arena

def load(E, P, k):
    a, s = E.a8, E.s8[P[k + 4]]
    do, so = P[k + 2], P[k + 5]
    for i in range(P[k + 3]):
        a[do + i] = s[so + i]


def add(E, P, k):
    """y = clamp(ZY + mbqm(t1[x1] +- t2[x2], m, s)), in blocks of BLOCK elements."""
    p = rec(P, k)
    kind = p[0] & 255
    W, a32 = E.W, E.a32
    wide = kind in (ADD16, SUB16)
    sign = -1 if kind in (SUB, SUB16) else 1
    es = 2 if wide else 1
    a = E.a16 if wide else E.a8
    head(W, p, es)
    x1, x2, y, n, bc, block, z1, z2 = p[6] // es, p[7] // es, p[8] // es, p[9], p[10], p[11], p[12], p[13]
    t, ao = p[14] // 4, p[15] // 4
    if not wide:
        W[1] = 256
        W[2] = -1  # requant() in raw mode: int32 results into the tables
        for side in (0, 1):
            z = z1 if side == 0 else z2
            for i in range(256):
                a32[ao + i] = (i - 128 - z) << 20
            W[0] = t + 256 * side
            requant(a32, ao, p, 16 + 2 * side, a32, W)
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        if wide:  # both blocks rescaled into T: x1's at T[0:], x2's at T[256:]
            W[1] = m
            W[2] = -1
            for side in (0, 1):
                jj = j
                for q in range(m):
                    if side == 0:
                        a32[ao + q] = (a[x1 + i + q] - z1) << 15
                    else:
                        a32[ao + q] = (a[x2 + jj] - z2) << 15
                        jj += 1
                        if jj == bc:
                            jj = 0
                W[0] = t + 256 * side
                requant(a32, ao, p, 16 + 2 * side, a32, W)
            W[2] = 1
            for q in range(m):
                a32[ao + q] = wrap32(a32[t + q] + sign * a32[t + 256 + q])
                j += 1
                if j == bc:
                    j = 0
        else:
            W[2] = 1
            for q in range(m):
                a32[ao + q] = a32[t + a[x1 + i + q] + 128] + sign * a32[t + a[x2 + j] + 384]
                j += 1
                if j == bc:
                    j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 20, a, W)
        i += m


add16 = sub = sub16 = add  # (one kernel reads the kind)


# mul record (int8; mul16: int16, zero points 0): 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 YO 9 N 10 BC
# 11 BLOCK 12 Z1 13 Z2 14 ACC 15 M 16 S

def mul(E, P, k):
    """y = clamp(ZY + mbqm((x1 - Z1) * (x2 - Z2), m, s)), in blocks."""
    p = rec(P, k)
    es = 2 if p[0] & 255 == MUL16 else 1
    W, a, a32 = E.W, E.a16 if es == 2 else E.a8, E.a32
    head(W, p, es)
    x1, x2, y, n, bc, block, z1, z2 = p[6] // es, p[7] // es, p[8] // es, p[9], p[10], p[11], p[12], p[13]
    ao = p[14] // 4
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            a32[ao + q] = (a[x1 + i + q] - z1) * (a[x2 + j] - z2)
            j += 1
            if j == bc:
                j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 15, a, W)
        i += m


mul16 = mul  # (mul reads the kind)


# fadd / fmul record (f32): 3 ACT 6 X1 7 X2 8 YO 9 N 10 BC (x2 repeats every BC elements)

def fadd(E, P, k):
    _fbinary(E, P, k, 0)


def fsub(E, P, k):
    _fbinary(E, P, k, 1)


def fmul(E, P, k):
    _fbinary(E, P, k, 2)


def _fbinary(E, P, k, op):
    f = E.af
    ao, bo, yo, n, bc = P[k + 6] // 4, P[k + 7] // 4, P[k + 8] // 4, P[k + 9], P[k + 10]
    lo, hi = ACTS[P[k + 3]] or (None, None)
    j = 0
    for i in range(n):
        v = f[ao + i] + f[bo + j] if op == 0 else (f[ao + i] - f[bo + j] if op == 1 else f[ao + i] * f[bo + j])
        if lo is not None and v < lo:
            v = lo
        if hi is not None and v > hi:
            v = hi
        f[yo + i] = v
        j += 1
        if j == bc:
            j = 0
