# reduce: sum, mean, max, min over any axes of a value, and the index of the largest or
# smallest element along one axis (TFLite's SUM, MEAN, REDUCE_MAX, REDUCE_MIN, ARG_MAX,
# ARG_MIN; TFLM's reduce_common.cc and arg_min_max.cc). `axes` are dimensions of x's shape
# (none: every output element is one input element); the output has x's shape with those
# dimensions 1 (a reshape after it drops them). fn=argmax/argmin: one axis, an i32 output.
#
# Integer arithmetic, TFLite Micro's: sum and mean add the codes in int32, subtract ZX times
# the count and requantize with m=M,S (s_x / s_y; mean: TFLM's 1/count folded in at pack
# time, host_tools.tflm.mean_params) to the output's q; max and min compare the stored codes
# (the output has x's q), starting from the type's extreme value as TFLM does; argmax/argmin
# keep the first index of the strictly largest/smallest element. fn=all (TFLite's REDUCE_ALL):
# bool values (bytes 0 or 1), true where every element is: the min record over those bytes.
from .._arith import ACTS, head, rec, requant
from ..kinds import FREDUCE, INT32_MAX, REDUCE
from . import Op as Base

FNS = ("sum", "mean", "max", "min", "argmax", "argmin", "all")
_INT_FN = {"sum": 0, "mean": 0, "max": 1, "min": 2, "argmax": 3, "argmin": 4, "all": 2}
FLT_MAX = ACTS[3][1]


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import RANGE

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        fn = self.fn = kv["fn"]
        if fn not in FNS:
            raise self.fail("fn=%s: one of %s" % (fn, ", ".join(FNS)), "fn")
        axes = list(kv.get("axes", ()))
        for a in axes:
            if not 0 <= a < len(x.shape) or axes.count(a) > 1:
                raise self.fail("axes=%s: distinct dimensions of the input %s" % (axes, x.shape), "axes")
        if fn in ("argmax", "argmin") and len(axes) != 1:
            raise self.fail("%s takes one axis" % fn, "axes")
        self.axes = axes
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        count = 1
        for a in axes:
            count *= x.shape[a]
        self.count = count
        if (fn == "all") != (x.dtype == "bool"):
            raise self.fail("all takes bool values, the others numbers (x is %s)" % x.dtype, "x")
        if fn == "all":
            if "q" in kv or "m" in kv:
                raise self.fail("all has no q= or m= (bool values)", "q")
            self.out = (shape, "bool", None)
            return
        arg = fn in ("argmax", "argmin")
        if x.dtype == "f32" or arg:
            if "m" in kv:
                raise self.fail("m= is for integer sum and mean", "m")
        if arg:
            if x.dtype not in ("f32", "i8", "i16"):
                raise self.fail("takes f32, i8 or i16 values, not %s" % x.dtype, "x")
            q = kv.get("q", (1.0, 0))
            if tuple(q) != (1.0, 0):
                raise self.fail("the index output has q=1.0,0", "q")
            self.out = (shape, "i32", (1.0, 0))
            return
        dt = self.quantized(("i8", "i16"))
        if dt == "f32":
            self.out = (shape, dt, None)
            return
        if fn in ("max", "min"):
            if tuple(kv["q"]) != tuple(x.q):
                raise self.fail("q= must be the input's quantization (max and min compare codes)", "q")
        else:
            m = kv.get("m")
            if m is None or len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                raise self.fail("integer %s needs m=multiplier,shift (0..2**31-1, -31..30)" % fn, "m")
            lo, hi = RANGE[dt]
            if (hi - lo) * count > INT32_MAX:
                raise self.fail("the sums of %d elements can leave int32" % count, "axes")
            self.mq = tuple(m)
            self.scratch = 1
            for d in shape:
                self.scratch *= d
        self.out = (shape, dt, kv["q"])

    def records(self, c):
        from ..graph import ITEMSIZE, RANGE

        x, y = self.x[0], self.y
        dims = [1] * (3 - len(x.shape)) + list(x.shape)
        mask = 0
        for a in self.axes:
            mask |= 4 >> (a + 3 - len(x.shape))
        if x.dtype == "f32":
            return [c.record(FREDUCE, [FNS.index(self.fn), c.off(x), c.off(y)] + dims + [mask])]
        fn = _INT_FN[self.fn]
        zy, zx, acc, m = 0, 0, 0, (0, 0)
        lo, hi = RANGE[x.dtype] if fn < 3 else (0, 0)
        if fn == 0:
            zy, zx, acc, m = y.q[1], x.q[1], c.scratch, self.mq
        return [c.record(REDUCE, [1, zy, lo, hi, fn, ITEMSIZE[x.dtype], c.off(x), c.off(y)] + dims
                         + [mask, zx, acc, m[0], m[1]])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {REDUCE: 'reduce', FREDUCE: 'freduce'}
FAST = '_viper_reduce'


def _geometry(r, d, m):
    """Dims at words d..d+2 and the reduced-axes mask at m: (elements, outputs, reduced count)."""
    d0, d1, d2 = r.dims((d, "x"), (d + 1, "x"), (d + 2, "x"))
    n = d0 * d1 * d2
    if n > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    mask = r.range(m, "axes", 0, 7)
    nout = 1
    for j, dj in enumerate((d0, d1, d2)):
        if not mask & (4 >> j):
            nout *= dj
    return n, nout, n // nout, mask


def check(r, E):
    if r.kind == FREDUCE:  # 2 FN 3 X 4 Y 5-7 D0 D1 D2 8 MASK
        fn = r.range(2, "fn", 0, 5)
        n, nout, _, mask = _geometry(r, 5, 8)
        if fn >= 4 and mask not in (1, 2, 4):
            r.fail("axes", "mask %d: argmax and argmin take one axis" % mask)
        r.region(3, "x", 4 * n, 4)
        r.region(4, "y", 4 * nout, 4)
        return
    # reduce: 2 OC (1) 3 ZY 4 LO 5 HI 6 FN 7 ES 8 X 9 Y 10-12 D0 D1 D2 13 MASK 14 ZX 15 ACC 16 M 17 S
    fn = r.range(6, "fn", 0, 4)
    es = r.range(7, "dtype", 1, 2)
    n, nout, count, mask = _geometry(r, 10, 13)
    r.region(8, "x", es * n, es)
    if fn >= 3:
        if mask not in (1, 2, 4):
            r.fail("axes", "mask %d: argmax and argmin take one axis" % mask)
        r.region(9, "y", 4 * nout, 4)
        return
    r.region(9, "y", es * nout, es)
    if fn != 0:
        return
    r.range(2, "out", 1, 1)
    r.clamp(es)
    top = (1 << (8 * es - 1))
    r.range(14, "zero_point", -top, top - 1)
    if (2 * top - 1) * count > INT32_MAX:
        r.fail("x", "the sums of %d elements can leave int32" % count)
    r.region(15, "scratch", 4 * nout, 4)
    r.mq(16, 1, "m")


def _steps(d0, d1, d2, mask):
    """The output index step of each input dimension (0 for a reduced one)."""
    e2 = 1 if mask & 1 else d2
    e1 = 1 if mask & 2 else d1
    return 0 if mask & 4 else e1 * e2, 0 if mask & 2 else e2, 0 if mask & 1 else 1


def _arg(a, x, y, y0, d0, d1, d2, mask, big):
    """y[y0 + o] = the first index along the one masked axis of the largest (big) or smallest a[...]."""
    if mask == 4:
        outer, size, inner = 1, d0, d1 * d2
    elif mask == 2:
        outer, size, inner = d0, d1, d2
    else:
        outer, size, inner = d0 * d1, d2, 1
    o = 0
    for i in range(outer):
        for j in range(inner):
            q = x + i * size * inner + j
            best, at = a[q], 0
            for t in range(1, size):
                q += inner
                v = a[q]
                if (v > best) if big else (v < best):
                    best, at = v, t
            y[y0 + o] = at
            o += 1


# reduce record (integers): 2 OC (1) 3 ZY 4 LO 5 HI 6 FN (0 sum/mean: requantized; 1 max; 2 min;
# 3 argmax; 4 argmin) 7 ES (x's bytes per element: 1 i8, 2 i16) 8 X 9 Y (bytes) 10-12 D0 D1 D2
# (x's shape, padded in front with 1s) 13 MASK (bit 2: D0 reduced, bit 1: D1, bit 0: D2)
# 14 ZX 15 ACC (int32 per output) 16 M 17 S. y has x's shape with the reduced dimensions 1: ES
# bytes per element (FN 0..2; FN 0 requantized to ZY, clamped to LO..HI), int32 (FN 3, 4).

def reduce(E, P, k):
    p = rec(P, k)
    fn, es = p[6], p[7]
    a = E.view(es)
    x, y = p[8] // es, p[9]
    d0, d1, d2, mask = p[10], p[11], p[12], p[13]
    if fn >= 3:
        _arg(a, x, E.view(4), y // 4, d0, d1, d2, mask, fn == 3)
        return
    s0, s1, s2 = _steps(d0, d1, d2, mask)
    nout = (d0 if s0 else 1) * (d1 if s1 else 1) * (d2 if s2 else 1)
    if fn == 0:
        out, o0 = E.view(4), p[15] // 4
        for o in range(nout):
            out[o0 + o] = 0
    else:
        out, o0 = a, y // es
        top = (1 << (8 * es - 1))
        init = -top if fn == 1 else top - 1
        for o in range(nout):
            out[o0 + o] = init
    q = x
    for i0 in range(d0):
        for i1 in range(d1):
            o = o0 + i0 * s0 + i1 * s1
            for i2 in range(d2):
                v = a[q]
                q += 1
                if fn == 0:
                    out[o] += v
                elif fn == 1:
                    if v > out[o]:
                        out[o] = v
                elif v < out[o]:
                    out[o] = v
                o += s2
    if fn:
        return
    z = p[14] * (d0 * d1 * d2 // nout)
    for o in range(nout):
        out[o0 + o] -= z
    W = E.W
    head(W, p, es)
    W[0] = y // es
    W[1] = nout
    requant(out, o0, p, 16, a, W)


# freduce record (f32): 2 FN (0 sum, 1 mean, 2 max, 3 min, 4 argmax, 5 argmin) 3 X 4 Y (bytes)
# 5-7 D0 D1 D2 8 MASK (as reduce's). TFLM's float reductions in its order: each output adds (or
# compares) its inputs in x's order, in float32 (the f32 arena rounds every partial sum); max
# starts from -FLT_MAX, min from FLT_MAX; the mean divides the sum by the count; argmax/argmin
# write int32 indices.

def freduce(E, P, k):
    f = E.af
    fn, x, y = P[k + 2], P[k + 3] // 4, P[k + 4] // 4
    d0, d1, d2, mask = P[k + 5], P[k + 6], P[k + 7], P[k + 8]
    if fn >= 4:
        _arg(f, x, E.view(4), y, d0, d1, d2, mask, fn == 4)
        return
    s0, s1, s2 = _steps(d0, d1, d2, mask)
    nout = (d0 if s0 else 1) * (d1 if s1 else 1) * (d2 if s2 else 1)
    init = 0.0 if fn < 2 else (-FLT_MAX if fn == 2 else FLT_MAX)
    for o in range(nout):
        f[y + o] = init
    q = x
    for i0 in range(d0):
        for i1 in range(d1):
            o = y + i0 * s0 + i1 * s1
            for i2 in range(d2):
                v = f[q]
                q += 1
                if fn < 2:
                    f[o] = f[o] + v
                elif fn == 2:
                    if v > f[o]:
                        f[o] = v
                elif v < f[o]:
                    f[o] = v
                o += s2
    if fn == 1:
        count = float(d0 * d1 * d2 // nout)
        for o in range(nout):
            f[y + o] = f[y + o] / count
