# minimum, maximum, div and prelu: elementwise ops of two operands (TFLite's MINIMUM, MAXIMUM,
# DIV, PRELU). The second operand (a value, or for minimum/maximum a constant tensor t=, for
# prelu the alpha tensor w=; a tensor has `shape`, default one value per channel) has the
# first's shape, one value per channel, or one value: it is repeated over the first.
#
# Integer arithmetic, TFLite Micro's: minimum and maximum compare the stored codes (i8, i16 or
# i32; no requantization: the converter gives inputs and output one quantization); int8 div
# computes TFLM's fixed-point quotient with t= the table of its reciprocals (made at pack
# time), m=M,S the multiplier of scale1 / (scale2 x output scale); int8 prelu: m=M,S,ZA for
# x < z_x (the product (x - z_x)(alpha - ZA) requantized), t= the table of the other half; int16
# prelu (int8 alpha, TFLM's 16x8): m=M1,S1,M2,S2,ZA, both halves requantized per element.
# int32 div (unquantized, q=1.0,0): t= its constant divisors, C's truncated quotient (the iarith
# kind, which add, sub and mul of int32 values use too: ops/binary.py).
import math

from .._arith import ACTS, head, i64, mbqm, micropython, rdbpot, rec, requant, slot_ints, srdhm, wrap32
from ..kinds import DIV, FBINARY, IARITH, INT32_MAX, MINMAX, PRELU, PRELU16
from . import Op as Base, act_code

BLOCK = 256  # prelu's int32 accumulators per requantization call


class Op(Base):
    inplace = True  # (prelu is not: see records)

    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import clamp

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        # the key of a constant second operand (int32 div: t=, its constant divisors)
        const = {"prelu": "w", "div": "t" if x.dtype == "i32" else None}.get(name, "t")
        if len(ins) != (1 if const in kv else 2):
            raise self.fail("takes x=a,b%s" % (" or x=a %s=tensor" % const if const else ""), "x")
        if name == "prelu":
            self.inplace = False
        dt = self.quantized({"div": ("i8", "i32"), "prelu": ("i8", "i16")}.get(name, ("i8", "i16", "i32", "i64")))
        if dt == "i64" and len(ins) != 2:  # (a container stores no i64 tensor: a const value is one)
            raise self.fail("i64 %s takes x=a,b (a constant operand as a const value)" % name, "x")
        if len(ins) == 2:
            other = ins[1].shape
            if "shape" in kv:
                raise self.fail("shape= is the shape of a constant operand", "shape")
        else:
            other = tuple(kv.get("shape", (x.shape[-1],)))
            self.param("weight", const, other, "f32" if dt == "f32" else ("i8" if name == "prelu" else dt), init)
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
        if dt == "i32" and name == "div":
            self.clamp = clamp(kv, n, dt)
        elif dt == "i16" and name == "prelu":
            m = kv.get("m")
            if m is None or len(m) != 5 or not 0 <= m[0] < 2 ** 31 or not 0 <= m[2] < 2 ** 31 \
                    or not -31 <= m[1] <= 30 or not -31 <= m[3] <= 30 or not -128 <= m[4] <= 127:
                raise self.fail("int16 prelu needs m=M1,S1,M2,S2,ZA (M 0..2**31-1, S -31..30, ZA -128..127)", "m")
            if "t" in kv:
                raise self.fail("t= is for int8 prelu", "t")
            self.mult = tuple(m)
            self.clamp = clamp(kv, n, dt)
        elif dt != "f32" and name in ("div", "prelu"):
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
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        es = ITEMSIZE[x.dtype]
        op = getattr(self, "weight", None)
        x2 = [1, 0] + c.ref(op) if op is not None else [0, c.off(self.x[1]), 0, 0]
        if x.dtype == "f32":
            code = {"minimum": 0, "maximum": 1, "div": 2, "prelu": 3}[self.name]
            return [c.record(FBINARY, [code, self.act, c.off(x), c.off(y), y.size, self.bc] + x2)]
        if x.dtype == "i32" and self.name == "div":
            return [c.record(IARITH, [3, self.clamp[0], self.clamp[1], c.off(x), c.off(y), y.size, self.bc] + x2)]
        if self.name in ("minimum", "maximum"):
            return [c.record(MINMAX, [1 if self.name == "maximum" else 0, es, c.off(x), c.off(y), y.size,
                                      self.bc] + x2)]
        head = [1, y.q[1], self.clamp[0], self.clamp[1]]
        if x.dtype == "i16":
            return [c.record(PRELU16, head + [c.off(x), c.off(y), y.size, self.bc, x.q[1], self.mult[4]]
                             + list(self.mult[:4]) + c.ref(self.weight))]
        if self.name == "div":
            return [c.record(DIV, head + [c.off(x), c.off(self.x[1]), c.off(y), y.size, self.bc, x.q[1],
                                          self.x[1].q[1], self.mult[0], self.mult[1]] + c.ref(self.table))]
        return [c.record(PRELU, head + [c.off(x), c.off(y), y.size, self.bc, x.q[1], self.mult[2],
                                        self.mult[0], self.mult[1]] + c.ref(self.weight) + c.ref(self.table)
                         + [c.scratch, BLOCK])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {MINMAX: 'minmax', FBINARY: 'fbinary', DIV: 'div', PRELU: 'prelu', IARITH: 'iarith',
           PRELU16: 'prelu16'}
FAST = '_viper_elem'


_ES_DTYPE = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}


def check_minmax(r, E):
    """minmax (integers) and binary (f32: min, max, div, prelu): 2 OP 3 ES|ACT 4 X1 5 Y 6 N 7 BC
    8 SRC (0: x2 in the arena at 9; 1: a tensor at 10-11)."""
    if r.kind == FBINARY:
        r.range(2, "op", 0, 3)
        r.range(3, "act", 0, 3)
        es, dt = 4, "f32"
    else:
        r.range(2, "op", 0, 1)
        es = 8 if r[3] == 8 else r.es(3)
        dt = _ES_DTYPE[es]
    n, bc = r.broadcast(6)
    r.region(4, "x", n * es, min(es, 4))
    r.region(5, "y", n * es, min(es, 4))
    if r.range(8, "x", 0, 0 if es == 8 else 1):
        r.tensor(10, "t", (dt,), bc * es)
        r.range(9, "x", 0, 0)
    else:
        r.region(9, "x", bc * es, min(es, 4))
        r.absent(10, "t")


def check_div(r, E):
    """int8 div: 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 Y 9 N 10 BC 11 Z1 12 Z2 13 M 14 S 15-16
    reciprocals (i32 [256])."""
    r.clamp()
    r.range(2, "out", 1, 1)
    n, bc = r.broadcast(9)
    r.region(6, "x", n)
    r.region(7, "x", bc)
    r.region(8, "y", n)
    r.range(11, "zero_point", -128, 127)
    r.range(12, "zero_point", -128, 127)
    r.range(13, "m", 0, INT32_MAX)
    r.range(14, "m", -31, 22)  # (the per-element right shift then stays >= 0)
    r.tensor(15, "table", ("i32",), 1024)  # (any int32: the fixed point saturates)


def check_prelu(r, E):
    """int8 prelu: 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 N 9 BC 10 ZX 11 ZA 12 M 13 S (x < ZX)
    14-15 alpha (i8 [BC]) 16-17 table (i8 [256], x >= ZX) 18 ACC (BLOCK int32) 19 BLOCK."""
    r.clamp()
    r.range(2, "out", 1, 1)
    n, bc = r.broadcast(8)
    r.region(6, "x", n)
    r.region(7, "y", n)
    r.range(10, "zero_point", -128, 127)
    r.range(11, "zero_point", -128, 127)
    r.mq(12, 1, "m")
    r.tensor(14, "alpha", ("i8",), bc)
    r.tensor(16, "table", ("i8",), 256)
    block = r.range(19, "scratch", 1, 1 << 16)
    r.region(18, "scratch", 4 * block, 4)


def check_prelu16(r, E):
    """int16 prelu: 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 N 9 BC 10 ZX 11 ZA 12 M1 13 S1 (x >= ZX)
    14 M2 15 S2 (x < ZX) 16-17 alpha (i8 [BC])."""
    r.clamp(2)
    r.range(2, "out", 1, 1)
    n, bc = r.broadcast(8)
    r.region(6, "x", 2 * n, 2)
    r.region(7, "y", 2 * n, 2)
    r.range(10, "zero_point", -32768, 32767)
    r.range(11, "zero_point", -128, 127)
    r.mq(12, 2, "m")
    r.tensor(16, "alpha", ("i8",), bc)


def check_iarith(r, E):
    """int32 add, sub, mul, div: 2 OP 3 LO 4 HI 5 X1 6 Y 7 N 8 BC 9 SRC (0: x2 in the arena at
    10; 1: a tensor at 11-12)."""
    op = r.range(2, "op", 0, 3)
    lo = r.range(3, "clamp", -INT32_MAX - 1, INT32_MAX)
    r.range(4, "clamp", lo, INT32_MAX)
    n, bc = r.broadcast(7)
    r.region(5, "x", 4 * n, 4)
    r.region(6, "y", 4 * n, 4)
    if r.range(9, "x", 0, 1):
        r.range(10, "x", 0, 0)
        r.tensor(11, "t", ("i32",), 4 * bc)
        if op == 3:
            d = E.words(r[11], r[12], bc)
            for i in range(bc):
                if d[i] == 0:
                    r.fail("t", "divisor %d is 0" % i)
    else:
        if op == 3:
            r.fail("x", "int32 div takes constant divisors")
        r.region(10, "x", 4 * bc, 4)
        r.absent(11, "t")


def check(r, E):
    kind = r.kind
    if kind == IARITH:
        check_iarith(r, E)
        r.inplace = 5
    elif kind == PRELU:
        check_prelu(r, E)
    elif kind == PRELU16:
        check_prelu16(r, E)
        r.inplace = 6  # (each element read before it is written)
    elif kind == DIV:
        check_div(r, E)
        r.inplace = 6
    else:
        check_minmax(r, E)
        r.inplace = 4


# minmax record (integers of ES bytes: 1, 2, 4, or 8, i64 as two words, the low first): 2 OP (0
# min, 1 max) 3 ES 4 X1 5 Y (bytes) 6 N 7 BC (x2 repeats every BC elements) 8 SRC (0: x2 in the
# arena at byte 9; 1: the tensor at 10-11; i64: 0). TFLM's MAXIMUM / MINIMUM: the stored codes
# compared, no requantization.

def minmax(E, P, k):
    p = rec(P, k)
    es = p[3]
    if es == 8:
        return _minmax64(E, p)
    a = E.view(es)
    if p[8]:
        b, j0 = slot_ints(E, p[10], es), p[11] // es
    else:
        b, j0 = a, p[9] // es
    x1, y, n, bc, mx = p[4] // es, p[5] // es, p[6], p[7], p[2]
    j = 0
    for i in range(n):
        u, v = a[x1 + i], b[j0 + j]
        a[y + i] = (u if u > v else v) if mx else (u if u < v else v)
        j += 1
        if j == bc:
            j = 0


def _minmax64(E, p):
    a = E.view(4)
    x1, y, n, bc, mx, x2 = p[4] // 4, p[5] // 4, p[6], p[7], p[2], p[9] // 4
    j = 0
    for i in range(n):
        u, v = i64(a, x1 + 2 * i), i64(a, x2 + 2 * j)
        w = x1 + 2 * i if (u >= v if mx else u <= v) else x2 + 2 * j
        a[y + 2 * i], a[y + 2 * i + 1] = a[w], a[w + 1]
        j += 1
        if j == bc:
            j = 0


# div record (int8): 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 Y 9 N 10 BC 11 Z1 12 Z2 13 M 14 S
# 15-16 reciprocals (i32 [256]: t[d] = TFLM's GetReciprocal(d, 31) in Q0.31, made at pack time).
# TFLM's int8 DIV: with a = x1 - Z1, d = x2 - Z2 (signs flipped when d < 0), h = a's redundant
# sign bits and b = d's bits above the first: q = SRDHM(a << h, t[d]), then RDBPOT(SRDHM(q, M),
# h + b - S). TFLM shifts an int32 by 32 or more there for tiny quotients (undefined in C); the
# rounded result, 0, is used instead.

def _bitlen(x):
    """Bits of x >= 0 (0 for 0)."""
    n = 0
    while x:
        n += 1
        x >>= 1
    return n


def div(E, P, k):
    p = rec(P, k)
    a = E.a8
    t, t0 = E.s32[p[15]], p[16] // 4
    zy, lo, hi, x1, x2, y, n, bc, z1, z2, m, s = p[3:15]
    j = 0
    for i in range(n):
        u, v = a[x1 + i] - z1, a[x2 + j] - z2
        if v < 0:
            u, v = -u, -v
        h = 31 - _bitlen(~u if u < 0 else u)  # CountLeadingSignBits (31 for 0)
        e = h + _bitlen(v) - 1 - s
        r = srdhm(srdhm(u << h, t[t0 + v]), m)
        r = rdbpot(r, e) if e < 32 else 0
        r += zy
        a[y + i] = lo if r < lo else (hi if r > hi else r)
        j += 1
        if j == bc:
            j = 0


# prelu record (int8): 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 N 9 BC 10 ZX 11 ZA 12 M 13 S 14-15 alpha
# (i8 [BC], x's channels) 16-17 table (i8 [256]) 18 ACC (BLOCK int32) 19 BLOCK. TFLM's PRELU:
# x >= ZX gives table[x + 128] (its clamp(ZY + mbqm(x - ZX, m1, s1)), made at pack time); x < ZX
# gives clamp(ZY + mbqm((x - ZX)(alpha - ZA), M, S)). The output is written block by block
# before the table fills in the x >= ZX elements: x and y are two buffers.

def prelu(E, P, k):
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    al, a0 = E.s8[p[14]], p[15]
    tab, t0 = E.s8[p[16]], p[17] + 128
    x, y, n, bc, zx, za, ao, block = p[6], p[7], p[8], p[9], p[10], p[11], p[18] // 4, p[19]
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            d = a[x + i + q] - zx
            a32[ao + q] = d * (al[a0 + j] - za) if d < 0 else 0
            j += 1
            if j == bc:
                j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 12, a, W)
        for q in range(m):
            v = a[x + i + q]
            if v >= zx:
                a[y + i + q] = tab[t0 + v]
        i += m


# prelu16 record (int16 x and y, int8 alpha): 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y (bytes) 8 N 9 BC
# 10 ZX 11 ZA 12 M1 13 S1 14 M2 15 S2 16-17 alpha (i8 [BC]). TFLM's 16x8 PRELU, element by
# element: d = x - ZX; clamp(ZY + mbqm(d, M1, S1)) for d >= 0, else clamp(ZY + mbqm(d (alpha -
# ZA), M2, S2)).

def prelu16(E, P, k):
    a = E.a16
    al, a0 = E.s8[P[k + 16]], P[k + 17]
    zy = P[k + 3]
    lo = P[k + 4]
    hi = P[k + 5]
    x = P[k + 6] // 2
    y = P[k + 7] // 2
    n = P[k + 8]
    bc = P[k + 9]
    zx = P[k + 10]
    za = P[k + 11]
    j = 0
    for i in range(n):
        d = a[x + i] - zx
        if d >= 0:
            v = mbqm(d, P[k + 12], P[k + 13]) + zy
        else:
            v = mbqm(d * (al[a0 + j] - za), P[k + 14], P[k + 15]) + zy
        a[y + i] = lo if v < lo else (hi if v > hi else v)
        j += 1
        if j == bc:
            j = 0


# iarith record (int32): 2 OP (0 add, 1 sub, 2 mul, 3 div) 3 LO 4 HI 5 X1 6 Y (bytes) 7 N 8 BC
# (x2 repeats every BC elements) 9 SRC (0: x2 in the arena at byte 10; 1: the i32 tensor at
# 11-12). TFLM's unquantized int32 ADD, SUB, MUL (two's complement wraparound, as the x86 and Arm
# builds give) and DIV (truncated toward zero; constant divisors, none 0; INT32_MIN / -1 wraps),
# clamped to LO..HI (the fused activation's range).

@micropython.native
def iarith(E, P, k):
    a = E.view(4)
    if P[k + 9]:
        b, j0 = E.s32[P[k + 11]], P[k + 12] // 4
    else:
        b, j0 = a, P[k + 10] // 4
    op = P[k + 2]
    lo = P[k + 3]
    hi = P[k + 4]
    x1 = P[k + 5] // 4
    y = P[k + 6] // 4
    n = P[k + 7]
    bc = P[k + 8]
    j = 0
    for i in range(n):
        u, v = a[x1 + i], b[j0 + j]
        if op == 0:
            u += v
        elif op == 1:
            u -= v
        elif op == 2:  # (in 16-bit halves: the product mod 2**32, no int beyond 48 bits)
            u = (u & 0xFFFF) * v + (((u >> 16) * v & 0xFFFF) << 16)
        else:
            q = (u if u >= 0 else -u) // (v if v >= 0 else -v)
            u = q if (u >= 0) == (v >= 0) else -q
        u = wrap32(u)
        a[y + i] = lo if u < lo else (hi if u > hi else u)
        j += 1
        if j == bc:
            j = 0


# binary record (f32): 2 OP (0 min, 1 max, 2 div, 3 prelu: x if x >= 0 else x * alpha) 3 ACT
# 4 X1 5 Y (bytes) 6 N 7 BC (x2 repeats every BC elements) 8 SRC (0: x2 in the arena at byte 9;
# 1: the f32 tensor at 10-11)

def fbinary(E, P, k):
    f = E.af
    op = P[k + 2]
    x1 = P[k + 4] // 4
    y = P[k + 5] // 4
    n = P[k + 6]
    bc = P[k + 7]
    if P[k + 8]:
        b, j0 = E.sf[P[k + 10]], P[k + 11] // 4
    else:
        b, j0 = f, P[k + 9] // 4
    lo, hi = ACTS[P[k + 3]] or (None, None)
    j = 0
    for i in range(n):
        u, v = f[x1 + i], b[j0 + j]
        if op == 0:
            u = u if u < v else v
        elif op == 1:
            u = u if u > v else v
        elif op == 2:
            u = _divide(u, v)
        elif u < 0.0:
            u = u * v
        if lo is not None and u < lo:
            u = lo
        if hi is not None and u > hi:
            u = hi
        f[y + i] = u
        j += 1
        if j == bc:
            j = 0


_NAN, _INF = float("nan"), float("inf")


def _divide(u, v):
    """u / v as IEEE division gives it: +-inf for a non-zero u over zero, NaN for 0 / 0."""
    if v == 0.0:
        if u != u or u == 0.0:
            return _NAN
        return _INF * math.copysign(1.0, u) * math.copysign(1.0, v)
    return u / v
