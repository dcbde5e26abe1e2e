# Squared difference, floor division and modulo, and the sum of several values (TFLite's
# SQUARED_DIFFERENCE, FLOOR_DIV, FLOOR_MOD, ADD_N). Two operands broadcast as numpy's do (the
# Op base's operands(): one repeats, or is copied out at the output's shape first).
#
# float32 (TFLM's reference kernels): sqdiff (a - b) rounded to f32, squared; floordiv
# floor(a / b) of the doubles, rounded to f32 (a board without doubles divides in float32);
# floormod fmod(a, b), plus b where its sign is not b's; addn the inputs added in order (a
# chain of float adds, ops/binary.py). Integers: sqdiff on i8 and i16 (TFLM's: each operand
# rescaled, MBQMSmallerThanOneExp((x - z) << LS, m, s) with LS 7 for i8, 0 for i16, the
# difference squared, requantized with m, s, clamped: m=m1,s1,m2,s2,m,s) and i32 (the wrapped
# square of the wrapped difference); int8 addn (TFLM's AddN: acc = (-z + sum of (x_j - z))
# << 19, clamp(z_y + MBQMSmallerThanOneExp(acc, m, s)): m=m,s, up to 8 inputs of one q).
import math

from .._arith import mbqm, rdbpot, rec, srdhm, wrap32
from ..kinds import ADDN, FARITH, SQDIFF
from . import Op as Base

FN = {"sqdiff": 0, "floordiv": 1, "floormod": 2}
MAX_ADDN = 8  # inputs of an int8 addn (one record)


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import clamp

        Base.__init__(self, name, kv, ins, n)
        if name == "addn":
            if len(ins) < 2:
                raise self.fail("takes two inputs or more (x=a,b,...)", "x")
            for v in ins:
                if v.shape != ins[0].shape:
                    raise self.fail("inputs of one shape (%s, %s)" % (ins[0].shape, v.shape), "x")
        elif len(ins) != 2:
            raise self.fail("takes two inputs (x=a,b)", "x")
        dt = self.quantized(("i8", "i16", "i32") if name == "sqdiff" else (("i8",) if name == "addn" else ()))
        oshape = self.operands() if name != "addn" else ins[0].shape
        want = {"sqdiff": 6, "addn": 2}.get(name, 0) if dt in ("i8", "i16") else 0
        m = kv.get("m", ())
        if len(m) != want:
            raise self.fail("m= takes %d integers here" % want if want else "m= is for int8 and int16 sqdiff, "
                            "int8 addn", "m")
        for i in range(0, want, 2):
            if not 0 <= m[i] < 2 ** 31 or not -31 <= m[i + 1] <= (30 if i == want - 2 and name == "sqdiff" else 0):
                raise self.fail("m=%s: multipliers 0..2**31-1, shifts -31..0 (the last one of sqdiff: ..30)"
                                % (m,), "m")
        self.mult = tuple(m)
        if name == "addn" and dt == "i8":
            if len(ins) > MAX_ADDN:
                raise self.fail("%d inputs: an int8 addn takes up to %d" % (len(ins), MAX_ADDN), "x")
            for v in ins:
                if tuple(v.q) != tuple(ins[0].q):
                    raise self.fail("int8 inputs of one q (TFLM's ADD_N): %s, %s" % (ins[0].q, v.q), "x")
        if dt in ("i16",) and any(v.q[1] for v in ins) or dt == "i16" and kv["q"][1]:
            raise self.fail("int16 sqdiff takes zero points 0 (TFLM's)", "q")
        if dt != "f32":
            self.clamp = clamp(kv, n, dt)
        self.out = (oshape, dt, kv.get("q", (1.0, 0) if dt == "i32" else None))

    def records(self, c):
        from ..graph import ITEMSIZE

        y, xs = self.y, self.x
        if self.name == "addn":
            if y.dtype == "f32":  # a chain of float adds into y (act 0: no clamp, as TFLM's AddN)
                from ..kinds import FADD

                out = []
                prev = c.off(xs[0])
                for v in xs[1:]:
                    out.append(c.record(FADD, [0, 0, 0, 0, prev, c.off(v), c.off(y), y.size, y.size]))
                    prev = c.off(y)
                return out
            offs = [c.off(v) for v in xs] + [0] * (MAX_ADDN - len(xs))
            return [c.record(ADDN, [len(xs), xs[0].q[1], y.q[1], self.clamp[0], self.clamp[1], c.off(y), y.size,
                                    self.mult[0], self.mult[1]] + offs)]
        out, offs, bcs = self.operand_fields(c)
        if y.dtype == "f32":
            return out + [c.record(FARITH, [FN[self.name]] + offs + [c.off(y), y.size] + bcs)]
        es = ITEMSIZE[y.dtype]
        if es == 4:  # (i32: the numbers themselves)
            return out + [c.record(SQDIFF, [es] + offs + [c.off(y), y.size] + bcs + [0] * 12)]
        return out + [c.record(SQDIFF, [es] + offs + [c.off(y), y.size] + bcs
                               + [y.q[1], self.clamp[0], self.clamp[1], xs[0].q[1], xs[1].q[1]]
                               + [7 if es == 1 else 0] + list(self.mult))]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {FARITH: 'farith', SQDIFF: 'sqdiff', ADDN: 'addn'}
FAST = '_viper_elem'


def check(r, E):
    kind = r.kind
    if kind == ADDN:  # 2 K 3 Z 4 ZY 5 LO 6 HI 7 Y 8 N 9 M 10 S 11-18 X
        k = r.range(2, "x", 2, MAX_ADDN)
        r.range(3, "zero_point", -128, 127)
        r.range(4, "zero_point", -128, 127)
        lo = r.range(5, "clamp", -128, 127)
        r.range(6, "clamp", lo, 127)
        n = r.range(8, "x", 1, 1 << 24)
        r.region(7, "y", n)
        r.mq(9, 1, "m", False)
        for j in range(MAX_ADDN):
            if j < k:
                r.region(11 + j, "x", n)
            else:
                r.range(11 + j, "x", 0, 0)
        return
    if kind == FARITH:  # 2 OP 3 X1 4 X2 5 Y 6 N 7 BC1 8 BC2
        r.range(2, "op", 0, 2)
        es, at = 4, 3
    else:  # sqdiff: 2 ES 3 X1 4 X2 5 Y 6 N 7 BC1 8 BC2 9 ZY 10 LO 11 HI 12 Z1 13 Z2 14 LS 15-20 m
        es, at = r.es(2), 3
        top = (1 << (8 * es - 1)) - 1
        if es < 4:
            for i in (9, 12, 13):
                r.range(i, "zero_point", -top - 1 if es == 1 else 0, top if es == 1 else 0)
            lo = r.range(10, "clamp", -top - 1, top)
            r.range(11, "clamp", lo, top)
            r.range(14, "shift", 7 if es == 1 else 0, 7 if es == 1 else 0)
            r.mq(15, 2, "m", False)
            r.mq(19, 1, "m")
        else:
            for i in range(9, 21):
                r.range(i, "m", 0, 0)
    n = r.range(at + 3, "x", 1, 1 << 24)
    r.operand(at, at + 4, n, es)
    r.operand(at + 1, at + 5, n, es)
    r.region(at + 2, "y", n * es, es)


# farith record (f32): 2 OP (0 sqdiff, 1 floordiv, 2 floormod) 3 X1 4 X2 5 Y (bytes) 6 N 7 BC1
# 8 BC2 (each input repeats every BC elements)

_INF, _NAN = float("inf"), float("nan")
# FLT_MAX + half its ulp: a float32 rounds anything above to inf. Parsed at import: as a literal
# the firmware freezer packs it as a float32 constant and fails (on float32 boards it is inf)
_TOP = float("3.4028235677973366e38")


def farith(E, P, k):
    f = E.af
    op, x1, x2, y, n, bc1, bc2 = P[k + 2], P[k + 3] // 4, P[k + 4] // 4, P[k + 5] // 4, P[k + 6], P[k + 7], P[k + 8]
    i1 = i2 = 0
    for i in range(n):
        u, v = f[x1 + i1], f[x2 + i2]
        if op == 0:  # (a - b) rounded to float32 first, as TFLM's float difference
            f[y + i] = _fit(u - v)
            u = f[y + i]
            u = u * u
        elif op == 1:
            u = _floordiv(u, v)
        else:
            u = _floormod(u, v)
        f[y + i] = _fit(u)
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


def _fit(v):
    return _INF if v > _TOP else (-_INF if v < -_TOP else v)


def _floordiv(u, v):
    """floor(u / v) (TFLM: of the doubles); IEEE's infinities and NaN for v = 0."""
    if v == 0.0:
        return _NAN if u == 0.0 or u != u else _INF * math.copysign(1.0, u) * math.copysign(1.0, v)
    q = u / v
    if q - q != 0.0 or q == 0.0:  # (inf, nan; and a signed zero kept)
        return q
    return float(math.floor(q))


def _floormod(u, v):
    """fmod(u, v), plus v where it is not zero and its sign is not v's."""
    if v == 0.0 or u - u != 0.0 or v != v:
        return _NAN
    if v - v != 0.0:  # (fmod(u, inf) = u)
        t = u
    else:
        t = math.fmod(u, v)
    return t + v if t != 0.0 and (v < 0.0) != (t < 0.0) else t


# sqdiff record (integers): 2 ES (1, 2, 4) 3 X1 4 X2 5 Y 6 N 7 BC1 8 BC2 9 ZY 10 LO 11 HI 12 Z1
# 13 Z2 14 LS (7 for i8, 0 for i16) 15-20 m1 s1 m2 s2 m s (i32: ES 4, the rest 0: y = (x1 -
# x2)^2, wrapped to 32 bits, as TFLM's int32 arithmetic)

def sqdiff(E, P, k):
    p = rec(P, k)
    es, x1, x2, y, n, bc1, bc2, zy, lo, hi, z1, z2, ls, m1, s1, m2, s2, m, s = p[2:21]
    a = E.view(es)
    x1, x2, y = x1 // es, x2 // es, y // es
    i1 = i2 = 0
    for i in range(n):
        u, v = a[x1 + i1], a[x2 + i2]
        if es == 4:
            a[y + i] = wrap32(wrap32(u - v) * wrap32(u - v))
        else:
            d = rdbpot(srdhm((u - z1) << ls, m1), -s1) - rdbpot(srdhm((v - z2) << ls, m2), -s2)
            d = mbqm(d * d, m, s) + zy
            a[y + i] = lo if d < lo else (hi if d > hi else d)
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0


# addn record (int8): 2 K (inputs, 2..8) 3 Z (their zero point) 4 ZY 5 LO 6 HI 7 Y 8 N 9 M 10 S
# (<= 0) 11-18 X (K offsets, then 0s). TFLM's AddN: acc = (-Z + sum of (x_j - Z)) << 19 (its
# inputs' rescaling by one half of 2^20, exact), wrapped to 32 bits; y = clamp(ZY +
# RDBPOT(SRDHM(acc, M), -S)).

def addn(E, P, k):
    p = rec(P, k)
    kk, z, zy, lo, hi, y, n, m, s = p[2:11]
    a = E.a8
    for i in range(n):
        acc = -z
        for j in range(kk):
            acc += a[p[11 + j] + i] - z
        d = rdbpot(srdhm(wrap32(acc << 19), m), -s) + zy
        a[y + i] = lo if d < lo else (hi if d > hi else d)
