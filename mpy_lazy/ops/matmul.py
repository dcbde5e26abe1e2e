# batchmatmul: B products of an M x K matrix and a K x N one (TFLite's BATCH_MATMUL; TFLM's
# batch_matmul.cc): `size=B,M,K,N`; x=lhs,rhs (two values) or x=lhs w=rhs (a constant tensor,
# tq= its quantization); `adj=ax,ay`: 1 when that operand is stored transposed (lhs K x M, rhs
# N x K); `bcast=bl,br`: 1 when that operand is one matrix for every batch (its batch
# dimensions broadcast). The output, B x M x N in that order, has `shape`.
#
# Integer arithmetic, TFLite Micro's: int8, sum((l - z_l)(r - z_r)) in int32, then z_y +
# mbqm(sum, m=M,S) (s_l s_r / s_y), saturated; int16 (16x16, zero points 0): the sum in int64,
# through TFLM's int64 MultiplyByQuantizedMultiplier (_arith.mbqm64). Float: each product and
# each partial sum rounded to float32 (one float32 word of scratch), in k's order.
from .._arith import mbqm, mbqm64, rec, slot_ints
from ..kinds import BMM, FBMM, INT32_MAX
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        size = kv["size"]
        if len(size) != 4 or any(not 1 <= d <= 65535 for d in size):
            raise self.fail("size=B,M,K,N, each 1..65535", "size")
        b, m, k, nn = self.size = tuple(size)
        adj, bc = tuple(kv.get("adj", (0, 0))), tuple(kv.get("bcast", (0, 0)))
        if len(adj) != 2 or len(bc) != 2 or any(v not in (0, 1) for v in adj + bc):
            raise self.fail("adj= and bcast= take two 0/1 flags (lhs, rhs)", "adj")
        self.flags = adj[0] | adj[1] << 1 | bc[0] << 2 | bc[1] << 3
        const = "w" in kv
        if len(ins) != (1 if const else 2):
            raise self.fail("takes x=lhs,rhs or x=lhs w=rhs", "x")
        dt = self.quantized(("i8", "i16"))
        if ins[0].size != (1 if bc[0] else b) * m * k:
            raise self.fail("lhs %s: %d elements, size=%s needs %d" % (ins[0].shape, ins[0].size, list(size),
                                                                        (1 if bc[0] else b) * m * k), "x")
        rsize = (1 if bc[1] else b) * k * nn
        if const:
            self.param("weight", "w", (rsize,), dt, init)
        elif ins[1].size != rsize:
            raise self.fail("rhs %s: %d elements, size=%s needs %d" % (ins[1].shape, ins[1].size, list(size), rsize),
                            "x")
        shape = tuple(kv.get("shape", (b, m, nn)))
        total = 1
        for d in shape:
            total *= d
        if total != b * m * nn:
            raise self.fail("shape=%s: %d elements, the product has %d" % (list(shape), total, b * m * nn), "shape")
        if dt == "f32":
            for key in ("tq",):
                if key in kv:
                    raise self.fail("%s= is for integer values" % key, key)
            self.scratch = 1
        else:
            mq = kv.get("m")
            if mq is None or len(mq) != 2 or not 0 <= mq[0] < 2 ** 31 or not -31 <= mq[1] <= 30:
                raise self.fail("integer batchmatmul needs m=multiplier,shift (0..2**31-1, -31..30)", "m")
            self.mq = tuple(mq)
            self.rq = tuple(kv["tq"]) if const else ins[1].q
            if const and "tq" not in kv:
                raise self.fail("an integer constant rhs needs tq=", "tq")
            if dt == "i16" and (ins[0].q[1] or self.rq[1] or kv["q"][1]):
                raise self.fail("int16 batchmatmul takes zero points 0 (TFLM's)", "q")
            if dt == "i8" and 255 * 255 * k > INT32_MAX or dt == "i16" and k > 32767:
                raise self.fail("a depth of %d can leave the accumulator" % k, "size")
        self.out = (shape, dt, kv.get("q"))

    def records(self, c):
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        w = getattr(self, "weight", None)
        rhs = [1, 0] + c.ref(w) if w is not None else [0, c.off(self.x[1]), 0, 0]
        geo = list(self.size) + [self.flags]
        if x.dtype == "f32":
            return [c.record(FBMM, [c.off(x)] + rhs + [c.off(y)] + geo + [c.scratch])]
        lo, hi = (-128, 127) if x.dtype == "i8" else (-32768, 32767)
        return [c.record(BMM, [1, y.q[1], lo, hi, ITEMSIZE[x.dtype], c.off(x)] + rhs + [c.off(y)] + geo
                         + [x.q[1], self.rq[1], self.mq[0], self.mq[1]])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {BMM: 'bmm', FBMM: 'fbmm'}
FAST = '_viper_reduce'


def check(r, E):
    fl = r.kind == FBMM
    g = 8 if fl else 13  # (B, M, K, N, FLAGS)
    b, m, k, n = r.dims((g, "size"), (g + 1, "size"), (g + 2, "size"), (g + 3, "size"))
    flags = r.range(g + 4, "flags", 0, 15)
    es = 4 if fl else r.range(6, "dtype", 1, 2)
    lsize = (1 if flags & 4 else b) * m * k
    rsize = (1 if flags & 8 else b) * k * n
    if max(lsize, rsize, b * m * n) > 1 << 24:
        r.fail("size", "more than 2**24 elements")
    x = g - 6  # XL, then SRC XR SLOT OFF, then Y
    r.region(x, "x", lsize * es, es)
    if r.range(x + 1, "x", 0, 1):
        r.range(x + 2, "x", 0, 0)
        r.tensor(x + 3, "weight", (("f32",), ("i8",), ("i16",))[0 if fl else es], rsize * es)
    else:
        r.region(x + 2, "x", rsize * es, es)
        r.absent(x + 3, "weight")
    r.region(x + 5, "y", b * m * n * es, es)
    if fl:
        r.region(13, "scratch", 4, 4)
        return
    r.range(2, "out", 1, 1)
    r.clamp(es)
    if es == 1:
        r.range(18, "zero_point", -128, 127)
        r.range(19, "zero_point", -128, 127)
        if 255 * 255 * k > INT32_MAX:
            r.fail("size", "a depth of %d can leave int32" % k)
    else:
        r.range(3, "zero_point", 0, 0)
        r.range(18, "zero_point", 0, 0)
        r.range(19, "zero_point", 0, 0)
        r.range(15, "size", 1, 32767)
    r.mq(20, 1, "m")


def _geometry(b, m, k, n, flags):
    """Element steps: lhs per batch, per m, per k; rhs per batch, per k, per n."""
    lm, lk = (1, m) if flags & 1 else (k, 1)
    rk, rn = (1, k) if flags & 2 else (n, 1)
    return 0 if flags & 4 else m * k, lm, lk, 0 if flags & 8 else k * n, rk, rn


# bmm record (integers): 2 OC (1) 3 ZY 4 LO 5 HI 6 ES (1 int8, 2 int16) 7 XL (lhs, bytes) 8 SRC
# (0: rhs in the arena at 9; 1: the tensor at 10-11) 9 XR 10-11 rhs tensor 12 Y 13 B 14 M 15 K
# 16 N 17 FLAGS (1 lhs stored K x M, 2 rhs stored N x K, 4 one lhs for every batch, 8 one rhs)
# 18 ZL 19 ZR 20 M 21 S. y[b, i, j] = clamp(ZY + mbqm(sum_k (l[b, i, k] - ZL)(r[b, k, j] - ZR))):
# int8 in int32; int16 (zero points 0) in int64, TFLM's int64 mbqm.

def bmm(E, P, k):
    p = rec(P, k)
    es = p[6]
    a = E.view(es)
    if p[8]:
        rv, r0 = slot_ints(E, p[10], es), p[11] // es
    else:
        rv, r0 = a, p[9] // es
    x0, y0 = p[7] // es, p[12] // es
    nb, m, kk, n, flags, zl, zr, zy, lo, hi = p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[3], p[4], p[5]
    lb, lm, lk, rb, rk, rn = _geometry(nb, m, kk, n, flags)
    o = y0
    for b in range(nb):
        for i in range(m):
            for j in range(n):
                s = 0
                li, ri = x0 + b * lb + i * lm, r0 + b * rb + j * rn
                for t in range(kk):
                    s += (a[li] - zl) * (rv[ri] - zr)
                    li += lk
                    ri += rk
                v = zy + (mbqm(s, p[20], p[21]) if es == 1 else mbqm64(s, p[20], p[21]))
                a[o] = lo if v < lo else (hi if v > hi else v)
                o += 1


# fbmm record (f32): 2 XL 3 SRC 4 XR 5-6 rhs tensor 7 Y 8 B 9 M 10 K 11 N 12 FLAGS (as bmm's)
# 13 TMP (one f32 word: each product rounded to float32 there before it is added)

def fbmm(E, P, k):
    f = E.af
    if P[k + 3]:
        rv, r0 = E.sf[P[k + 5]], P[k + 6] // 4
    else:
        rv, r0 = f, P[k + 4] // 4
    x0, o, tmp = P[k + 2] // 4, P[k + 7] // 4, P[k + 13] // 4
    nb, m, kk, n = P[k + 8], P[k + 9], P[k + 10], P[k + 11]
    lb, lm, lk, rb, rk, rn = _geometry(nb, m, kk, n, P[k + 12])
    for b in range(nb):
        for i in range(m):
            for j in range(n):
                f[o] = 0.0
                li, ri = x0 + b * lb + i * lm, r0 + b * rb + j * rn
                for t in range(kk):
                    f[tmp] = f[li] * rv[ri]
                    f[o] = f[o] + f[tmp]
                    li += lk
                    ri += rk
                o += 1
