# Comparisons, logical ops and select (TFLite's EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER,
# GREATER_EQUAL, LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT_V2): elementwise ops whose output or
# condition is a bool value (one byte per element, 0 or 1). The operands broadcast as numpy's
# do: one whose shape, leading 1s aside, is the output's trailing dimensions is repeated (every
# BC elements); any other is first copied out at the output's shape by a move record into the
# op's scratch (as add's). A constant operand is a `const` value (ops/const.py).
#
# Comparisons take f32, i32 and bool values (the numbers compared), and i8 with `t=`, an i32
# tensor [2, 256] made at pack time: each operand's codes rescaled as TFLM's comparisons rescale
# them (MultiplyByQuantizedMultiplierSmallerThanOneExp((q - z) << 8, its scale's multiplier)),
# compared. select copies elements of 1, 2 or 4 bytes (i8, i16, f32, i32, bool): TFLM's
# select does not requantize, nor does this.
from .._arith import i64, rec
from ..kinds import COMPARE, FCOMPARE, LOGICAL, SELECT
from . import Op as Base

CMP = {"equal": 0, "notequal": 1, "less": 2, "lessequal": 3, "greater": 4, "greaterequal": 5}
LOGIC = {"and": 0, "or": 1, "not": 2}


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        want = 3 if name == "select" else (1 if name == "not" else 2)
        if len(ins) != want:
            raise self.fail("takes %d input%s (x=%s)" % (want, "s" if want > 1 else "",
                                                          ",".join("abc"[:want])), "x")
        data = ins[1:] if name == "select" else ins
        dt = data[0].dtype
        for v in data:
            if v.dtype != dt:
                raise self.fail("inputs mix %s and %s" % (dt, v.dtype), "x")
        if name == "select" and ins[0].dtype != "bool":
            raise self.fail("the condition (the first input) is %s, not bool" % ins[0].dtype, "x")
        if name in LOGIC and dt != "bool":
            raise self.fail("takes bool values, not %s" % dt, "x")
        if name in CMP and dt not in ("f32", "i8", "i32", "bool", "i64"):
            raise self.fail("compares f32, i8, i32, i64 or bool values, not %s" % dt, "x")
        if name == "select" and dt == "u8":
            raise self.fail("u8 values (a model's uint8 input or output) are read by lut only", "x")
        if name == "select" and dt == "i64":  # (its record copies elements of 1, 2 or 4 bytes)
            raise self.fail("selects elements of 1, 2 or 4 bytes, not i64", "x")
        if (dt == "i8" and name in CMP) != ("t" in kv):
            raise self.fail("t= (the rescaled codes, i32 [2, 256]) is for i8 comparisons", "t")
        if "t" in kv:
            self.param("table", "t", (2, 256), "i32", init)
        q = kv.get("q")
        if q is not None and (name != "select" or data[0].q is None):
            raise self.fail("q= is for a select of integer values", "q")
        oshape = self.operands()
        if name == "select":
            self.out = (oshape, dt, q or data[0].q)
        else:
            self.out = (oshape, "bool", None)

    def records(self, c):
        from ..graph import ITEMSIZE

        y, xs = self.y, self.x
        out, offs, bcs = self.operand_fields(c)
        if self.name == "select":
            return out + [c.record(SELECT, [ITEMSIZE[y.dtype]] + offs + [c.off(y), y.size] + bcs)]
        if self.name == "not":
            offs, bcs = offs * 2, bcs * 2
        if self.name in LOGIC:
            return out + [c.record(LOGICAL, [LOGIC[self.name]] + offs + [c.off(y), y.size] + bcs)]
        op = CMP[self.name]
        dt = xs[0].dtype
        if dt == "f32":
            return out + [c.record(FCOMPARE, [op] + offs + [c.off(y), y.size] + bcs)]
        table = c.ref(self.table) if dt == "i8" else [0, 0]
        return out + [c.record(COMPARE, [op, ITEMSIZE[dt]] + offs + [c.off(y), y.size] + bcs
                               + [1 if dt == "i8" else 0] + table)]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {COMPARE: 'compare', FCOMPARE: 'fcompare', LOGICAL: 'logical', SELECT: 'select'}
FAST = '_viper_elem'


def check(r, E):
    kind = r.kind
    if kind == SELECT:  # 2 ES 3 C 4 X1 5 X2 6 Y 7 N 8 BCC 9 BC1 10 BC2
        es = r.es(2)
        n = r.range(7, "x", 1, 1 << 24)
        r.operand(3, 8, n, 1)
        r.operand(4, 9, n, es)
        r.operand(5, 10, n, es)
        r.region(6, "y", n * es, es)
        return
    if kind == COMPARE:  # 2 OP 3 ES 4 X1 5 X2 6 Y 7 N 8 BC1 9 BC2 10 SCALE 11-12 table
        r.range(2, "op", 0, 5)
        es, at = (8 if r[3] == 8 else r.es(3)), 4
        if r.range(10, "t", 0, 1):
            r.range(3, "dtype", 1, 1)
            r.tensor(11, "table", ("i32",), 2048)
        else:
            r.absent(11, "table")
    else:  # fcompare, logical: 2 OP 3 X1 4 X2 5 Y 6 N 7 BC1 8 BC2
        r.range(2, "op", 0, 5 if kind == FCOMPARE else 2)
        es, at = (4 if kind == FCOMPARE else 1), 3
    n = r.range(at + 3, "x", 1, 1 << 24)
    r.operand(at, at + 4, n, es, min(es, 4))
    r.operand(at + 1, at + 5, n, es, min(es, 4))
    r.region(at + 2, "y", n)


def _cmp(op, u, v):
    if op == 0:
        return u == v
    if op == 1:
        return u != v
    if op == 2:
        return u < v
    if op == 3:
        return u <= v
    if op == 4:
        return u > v
    return u >= v


# compare record (integers): 2 OP (0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=) 3 ES (1, 2, 4 or 8 bytes:
# i64, two words, the low first) 4 X1 5 X2 6 Y (bytes) 7 N 8 BC1 9 BC2 (each input repeats every BC
# elements) 10 SCALE (1: i8, each code q of input k compared as table[k][q + 128]) 11-12 table
# (i32 [2, 256]). y: 1 or 0.

def compare(E, P, k):
    p = rec(P, k)
    op, es, x1, x2, y, n, bc1, bc2 = p[2:10]
    if es == 8:
        return _compare64(E, p)
    a, o = E.view(es), E.a8
    x1, x2 = x1 // es, x2 // es
    t = E.s32[p[11]] if p[10] else None
    t0, t1 = p[12] // 4 + 128, p[12] // 4 + 384
    i1 = i2 = 0
    for i in range(n):
        u, v = a[x1 + i1], a[x2 + i2]
        if t is not None:
            u, v = t[t0 + u], t[t1 + v]
        o[y + i] = 1 if _cmp(op, u, v) else 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


def _compare64(E, p):
    op, _, x1, x2, y, n, bc1, bc2 = p[2:10]
    a, o = E.view(4), E.a8
    x1, x2 = x1 // 4, x2 // 4
    i1 = i2 = 0
    for i in range(n):
        o[y + i] = 1 if _cmp(op, i64(a, x1 + 2 * i1), i64(a, x2 + 2 * i2)) else 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


# fcompare record (f32): 2 OP 3 X1 4 X2 5 Y (bytes) 6 N 7 BC1 8 BC2. NaN compares unequal to
# everything (IEEE's, as TFLM's C++).

def fcompare(E, P, k):
    f, o = E.af, E.view(1)
    op, x1, x2, y, n, bc1, bc2 = P[k + 2], P[k + 3] // 4, P[k + 4] // 4, P[k + 5], P[k + 6], P[k + 7], P[k + 8]
    i1 = i2 = 0
    for i in range(n):
        o[y + i] = 1 if _cmp(op, f[x1 + i1], f[x2 + i2]) else 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


# logical record (bool): 2 OP (0 and, 1 or, 2 not: of x1) 3 X1 4 X2 5 Y 6 N 7 BC1 8 BC2. A
# non-zero byte is true; y: 1 or 0.

def logical(E, P, k):
    p = rec(P, k)
    op, x1, x2, y, n, bc1, bc2 = p[2:9]
    a = E.a8
    i1 = i2 = 0
    for i in range(n):
        u, v = a[x1 + i1] != 0, a[x2 + i2] != 0
        a[y + i] = 1 if (u and v if op == 0 else (u or v if op == 1 else not u)) else 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


# select record: 2 ES (bytes per element) 3 C (bool) 4 X1 5 X2 6 Y 7 N 8 BCC 9 BC1 10 BC2:
# y = x1 where the condition's byte is non-zero, else x2 (their bytes copied).

def select(E, P, k):
    p = rec(P, k)
    es, c, x1, x2, y, n, bcc, bc1, bc2 = p[2:11]
    a, b = E.a8, E.view(es)
    x1, x2, y = x1 // es, x2 // es, y // es
    ic = i1 = i2 = 0
    for i in range(n):
        b[y + i] = b[x1 + i1] if a[c + ic] else b[x2 + i2]
        ic += 1
        if ic == bcc:
            ic = 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0
