# Index ops: gathernd (TFLite's GATHER_ND and EMBEDDING_LOOKUP: slices of a params value or a
# constant tensor picked by int32 indices computed on the board; output N slices x their size) and update (TFLite's
# DYNAMIC_UPDATE_SLICE: the operand with a window overwritten by the update, the window's start
# constant (two move records) or int32 values computed on the board, clamped as TFLM clamps).
# Elements of any dtype (the bytes are copied).
from ..kinds import GATHERND, MOVE, UPDATE
from . import Op as Base

MAX_ND = 5  # index components per slice (TFLM's GATHER_ND: 5)


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import ITEMSIZE

        Base.__init__(self, name, kv, ins, n)
        if name == "gathernd":
            return self._gathernd(kv, ins, init, ITEMSIZE)
        if len(ins) not in (2, 3) or (len(ins) == 3) == ("begin" in kv):
            raise self.fail("takes x=operand,update,starts (int32 starts) or x=operand,update begin=", "x")
        x, u = ins[0], ins[1]
        if u.dtype != x.dtype or tuple(u.q or ()) != tuple(x.q or ()):
            raise self.fail("the update is %s %s, the operand %s %s: one dtype and q" % (u.dtype, u.q, x.dtype, x.q), "x")
        nd = len(x.shape)
        if len(u.shape) != nd or any(a > b for a, b in zip(u.shape, x.shape)):
            raise self.fail("update of shape %s for an operand of shape %s" % (u.shape, x.shape), "x")
        if len(ins) == 3:
            s = ins[2]
            if s.dtype != "i32" or s.shape not in ((nd,), (nd + 1,)):
                raise self.fail("starts: an i32 vector of %d (or %d: a batch first) values, got %s %s"
                                % (nd, nd + 1, s.dtype, s.shape), "x")
            self.begin = None
        else:
            b = kv["begin"]
            if len(b) != nd or any(not 0 <= v <= d - e for v, d, e in zip(b, x.shape, u.shape)):
                raise self.fail("begin=%s: one start per axis, 0 <= start <= dim - update's" % (
                    ",".join(map(str, b)),), "begin")
            self.begin = tuple(b)
        self.keeps_q_of(x)
        self.out = (x.shape, x.dtype, x.q)

    def keeps_q_of(self, x):
        """q= optional, and then x's: the op moves x's codes."""
        q = self.kv.get("q")
        if q is not None and (x.q is None or tuple(q) != tuple(x.q)):
            raise self.fail("q= must be the %s's quantization (%s)" % ("params" if self.name == "gathernd" else
                                                                         "operand", x.q,), "q")

    def _gathernd(self, kv, ins, init, itemsize):
        if len(ins) != (1 if "t" in kv else 2):
            raise self.fail("takes x=indices,params or x=indices t=params (a tensor)", "x")
        i = ins[0]
        shape = tuple(kv["shape"])
        if i.dtype != "i32":
            raise self.fail("indices of dtype %s: i32" % i.dtype, "x")
        nd = i.shape[-1]
        if not shape or not 1 <= nd <= min(len(shape), MAX_ND) or len(shape) > 8 or min(shape) < 1:
            raise self.fail("indices of %d components for params of shape %s (1 to %d, at most its axes)"
                            % (nd, shape, MAX_ND), "shape")
        total = 1
        for d in shape:
            total *= d
        if total > 1 << 24:
            raise self.fail("params of shape %s: more than 2^24 elements" % (shape,), "shape")
        if "t" in kv:
            dt = kv.get("dtype", "f32")
            if dt not in ("f32", "i8", "i16", "i32"):
                raise self.fail("a params tensor of dtype %s (f32, i8, i16 or i32)" % dt, "dtype")
            if dt == "f32" and "q" in kv or dt != "f32" and dt != "i32" and "q" not in kv:
                raise self.fail("a %s params tensor takes %s" % (dt, "no q=" if dt == "f32" else "q= (its quantization)"),
                                "q")
            self.param("table", "t", (total,), dt, init)  # (an embedding table)
            q = tuple(kv["q"]) if "q" in kv else ((1.0, 0) if dt == "i32" else None)
        else:
            p = ins[1]
            if p.size != total:
                raise self.fail("shape=%s: %d elements, the params value has %d" % (
                    ",".join(map(str, shape)), total, p.size), "shape")
            dt, q = p.dtype, p.q
            self.table = None
            self.keeps_q_of(p)
        self.es = itemsize[dt]
        self.strides = [0] * nd  # elements between consecutive values of each index component
        size = 1
        for d in shape[nd:]:
            size *= d
        self.slice, self.total, self.nd = size, total, nd
        for j in range(nd - 1, -1, -1):
            self.strides[j] = size
            size *= shape[j]
        n = i.size // nd
        from ..graph import check_shape

        self.out = (check_shape((n, self.slice) if n > 1 else (self.slice,), self.n, "output"), dt, q)

    def records(self, c):
        x, y = self.x, self.y
        if self.name == "gathernd":
            src = [1] + c.ref(self.table) + [0] if self.table is not None else [0, c.off(x[1]), 0, 0]
            return [c.record(GATHERND, [c.off(y), c.off(x[0]), x[0].size // self.nd, self.nd, self.slice,
                                        self.es, self.total] + (self.strides + [0] * MAX_ND)[:MAX_ND] + src)]
        from ..graph import ITEMSIZE

        es = ITEMSIZE[y.dtype]
        xs, us = _three(x[0].shape), _three(x[1].shape)
        if self.begin is None:
            s = x[2]
            return [c.record(UPDATE, [c.off(x[0]), c.off(x[1]), c.off(s), c.off(y), es, s.size - len(x[0].shape),
                                      len(x[0].shape)] + list(xs) + list(us))]
        start = _three(self.begin, 0)
        at = (start[0] * xs[1] + start[1]) * xs[2] + start[2]
        return [_copy(c, c.off(x[0]), c.off(y), xs, xs, es),
                _copy(c, c.off(x[1]), c.off(y) + es * at, us, xs, es)]


def _three(shape, fill=1):
    return (fill,) * (3 - len(shape)) + tuple(shape)


def _copy(c, so, do, shape, within, es):
    """The move record copying a value of 3-D `shape` from byte so to byte do, inside a value
    of 3-D shape `within` there."""
    return c.record(MOVE, [so, do, shape[1], shape[2], shape[2], 1, within[2], 1, es, shape[0],
                           shape[1] * shape[2], within[1] * within[2]])


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {GATHERND: 'gathernd', UPDATE: 'update'}
FAST = '_viper_elem'


def check(r, E):
    es = r.es(7 if r.kind == GATHERND else 6)
    if r.kind == GATHERND:
        n = r.range(4, "x", 0, 1 << 24)
        nd = r.range(5, "x", 1, MAX_ND)
        size = r.range(6, "shape", 1, 1 << 24)
        total = r.range(8, "shape", size, 1 << 24)
        for j in range(nd):
            r.range(9 + j, "shape", 1, total)
        for j in range(nd, MAX_ND):
            r.range(9 + j, "shape", 0, 0)
        if n * size > r.arena // es:
            r.fail("shape", "%d slices of %d elements: more than the arena holds" % (n, size))
        r.region(2, "y", n * size * es, es)
        r.region(3, "x", 4 * n * nd, 4)
        if r[14]:
            r.tensor(15, "params", {1: ("i8",), 2: ("i16",), 4: ("f32", "i32")}[es], total * es)
        else:
            r.region(15, "x", total * es, es)
            r.range(16, "params", 0, 0)
            r.range(17, "params", 0, 0)
        return
    skip = r.range(7, "x", 0, 1)
    rank = r.range(8, "x", 1, 3)
    xs = [r.range(9 + j, "shape", 1, 1 << 24) for j in range(3)]
    us = [r.range(12 + j, "shape", 1, xs[j]) for j in range(3)]
    for j in range(3 - rank):
        if xs[j] != 1:
            r.fail("shape", "axis %d of a %d-axis operand is %d, not 1" % (j, rank, xs[j]))
    if xs[0] * xs[1] * xs[2] > r.arena // es:
        r.fail("shape", "%s: more than the arena holds" % (xs,))
    r.region(2, "x", xs[0] * xs[1] * xs[2] * es, es)
    r.region(3, "x", us[0] * us[1] * us[2] * es, es)
    r.region(4, "x", 4 * (rank + skip), 4)
    r.region(5, "y", xs[0] * xs[1] * xs[2] * es, es)


# gathernd record: 2 YO 3 IO (bytes: the output, the int32 indices) 4 N (slices) 5 ND (index
# components per slice) 6 SLICE (elements per slice) 7 ES (bytes per element) 8 TOTAL (params'
# elements) 9-13 C0..C4 (elements between consecutive values of each component; 0 past ND)
# 14 HAST (1: the params are the tensor at 15-16 (slot, offset); 0: in the arena at byte 15, and
# 16, 17 are 0). Slice i is the SLICE elements from sum(index[i ND + j] x Cj): TFLM's from_pos,
# checked as TFLM checks it (0 <= from_pos <= TOTAL - SLICE, else IndexError, as TFLM's invoke
# fails), each component first within +-TOTAL / Cj (no 32-bit product overflows).

def gathernd(E, P, k):
    yo, io, n, nd, size, es, total = (P[k + i] for i in range(2, 9))
    src, so = (E.s8[P[k + 15]], P[k + 16]) if P[k + 14] else (E.a8, P[k + 15])
    a, ix = E.a8, E.a32
    io //= 4
    for i in range(n):
        at = 0
        for j in range(nd):
            v, c = ix[io + i * nd + j], P[k + 9 + j]
            if not -total <= v * c <= total:
                raise IndexError("gather_nd: slice %d: index %d of component %d is out of range" % (i, v, j))
            at += v * c
        if not 0 <= at <= total - size:
            raise IndexError("gather_nd: slice %d starts at element %d, outside the params' %d" % (i, at, total))
        s, d = so + at * es, yo + i * size * es
        for b in range(size * es):
            a[d + b] = src[s + b]


# update record: 2 XO 3 UO 4 SO 5 YO (bytes: the operand, the update, the int32 starts, the
# output) 6 ES 7 SKIP (1: the starts begin with a batch's, always 0 after clamping) 8 RANK (1..3)
# 9-11 D0..D2 12-14 U0..U2 (the operand's and the update's shapes, 1s before a shorter rank). TFLM:
# y = x, then y[s0 + i, s1 + j, s2 + l] = u[i, j, l] with sj = min(max(0, start j), Dj - Uj).

def update(E, P, k):
    xo, uo, so, yo, es, skip, rank = (P[k + i] for i in range(2, 9))
    d0, d1, d2, u0, u1, u2 = (P[k + i] for i in range(9, 15))
    a = E.a8
    for b in range(d0 * d1 * d2 * es):
        a[yo + b] = a[xo + b]
    st = E.a32
    s = [0, 0, 0]
    for j in range(3 - rank, 3):
        v = st[so // 4 + skip + j - (3 - rank)]
        top = P[k + 9 + j] - P[k + 12 + j]
        s[j] = 0 if v < 0 else top if v > top else v
    for i in range(u0):
        for j in range(u1):
            d = yo + es * (((s[0] + i) * d1 + s[1] + j) * d2 + s[2])
            f = uo + es * ((i * u1 + j) * u2)
            for b in range(u2 * es):
                a[d + b] = a[f + b]
