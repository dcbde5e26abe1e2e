# svdf: TFLite's SVDF (a rank-R singular value decomposition filter over time), int8 as
# TFLite Micro's reference kernel (svdf_common.cc, EvalIntegerSvdfReference). The state holds
# the last `memory` activations of each of the F = out x rank filters (int16, or int8 with
# sdtype=i8; quantization sq=scale,zero_point) and persists from one call to the next, as TFLM's
# variable tensor does across Invoke() (Program.reset() starts it again at its zero point).
# Per call: the state shifts one step left; each filter's newest entry is
# clamp(mbqm(w_f . (x - z_x), m1, s1)) + z_s (stored with the state dtype's wraparound, as
# TFLM's cast); acc_f = t_f . (state_f - z_s); y_u = clamp(z_y + mbqm(b_u + sum of the rank
# filters of unit u, m2, s2)). w [F, in] i8, t [F, memory] of the state's dtype, b [out] i32,
# m=m1,s1,m2,s2. (TFLM applies no fused activation in its integer SVDF: neither does this.)
# float32 (TFLM's EvalFloatSvdfReference): the same steps in float, the newest entry w_f . x,
# y_u = act(b_u + the rank filters' t_f . state_f) (act= none, relu, relu6; b f32 [out]); the
# state starts at 0.
from .._arith import ACTS, mbqm, rec, slot_view, wrap32
from ..kinds import FSVDF, MAX_DIM, SVDF
from . import Op as Base, act_code


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import zero_point

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        units, rank, mem = kv["out"], kv["rank"], kv["memory"]
        for key, v in (("out", units), ("rank", rank), ("memory", mem)):
            if not 1 <= v <= 65535:
                raise self.fail("%s=%d: must be 1..65535" % (key, v), key)
        filters = units * rank
        if filters > 65535 or filters * mem > 1 << 22:
            raise self.fail("%d filters x %d steps of state: too large" % (filters, mem), "memory")
        if self.quantized(("i8",)) == "f32":
            for key in ("sq", "sdtype"):
                if key in kv:
                    raise self.fail("%s= is for an int8 svdf; the input is f32" % key, key)
            self.sdt = "f32"
            if act_code(kv) > 2:
                raise self.fail("act=%s: a float svdf takes none, relu or relu6" % kv["act"], "act")
            self.p = (filters, x.size, mem, units, act_code(kv))
            self.param("weight", "w", (filters, x.size), "f32", init)
            self.param("time", "t", (filters, mem), "f32", init)
            self.param("bias", "b", (units,), "f32", init)
            self.out = ((units,), "f32", None)
            return
        self.needs("m", "sq")
        if "act" in kv:
            raise self.fail("act= is for a float svdf (TFLM's integer SVDF applies none)", "act")
        self.sdt = kv.get("sdtype", "i16")
        zero_point(kv["sq"], self.sdt, n, "sq")
        m = kv["m"]
        if len(m) != 4:
            raise self.fail("m=m1,s1,m2,s2", "m")
        self.p = (filters, x.size, mem, units, x.q[1], kv["sq"][1], kv["q"][1]) + tuple(m)
        self.param("weight", "w", (filters, x.size), "i8", init)
        self.param("time", "t", (filters, mem), self.sdt, init)
        self.param("bias", "b", (units,), "i32", init)
        self.out = ((units,), "i8", kv["q"])

    @property
    def macs(self):
        f, nin, mem = self.p[0], self.p[1], self.p[2]
        return f * (nin + mem)

    @property
    def scratch(self):
        if self.sdt == "f32":
            return 0
        return self.p[0] + self.p[3] + self.p[1]  # int32: the filters' sums, the units', x - z_x

    @property
    def persist(self):
        es = {"i16": 2, "i8": 1, "f32": 4}[self.sdt]
        return (self.p[0] * self.p[2] * es + 3) // 4 * 4

    def records(self, c):
        if self.sdt == "f32":
            f, nin, mem, units, act = self.p
            return [c.record(FSVDF, [f, nin, mem, units, c.off(self.x[0]), c.off(self.y), c.state, act]
                             + c.ref(self.weight) + c.ref(self.time) + c.ref(self.bias))]
        f, nin, mem, units, zx, zs, zy, m1, s1, m2, s2 = self.p
        return [c.record(SVDF, [f, nin, mem, units, c.off(self.x[0]), c.off(self.y), c.state,
                                2 if self.sdt == "i16" else 1, zx, zs, zy, m1, s1, m2, s2, c.scratch]
                         + c.ref(self.weight) + c.ref(self.time) + c.ref(self.bias))]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {SVDF: 'svdf', FSVDF: 'fsvdf'}
FAST = '_viper_recurrent'


def check(r, E):
    if r.kind == FSVDF:
        check_float(r)
        return
    f, nin, mem, units = r.range(2, "out", 1, MAX_DIM), r.range(3, "x", 1, 1 << 24), \
        r.range(4, "memory", 1, MAX_DIM), r.range(5, "out", 1, MAX_DIM)
    if f % units or f * mem > 1 << 22:
        r.fail("rank", "%d filters: not a multiple of %d units, or %d steps of state too many" % (f, units, mem))
    es = r[9]
    if es not in (1, 2):
        r.fail("dtype", "%d bytes per state element (1 or 2)" % es)
    top = (1 << (8 * es - 1)) - 1
    r.region(6, "x", nin)
    r.region(7, "y", units)
    r.region(8, "state", f * mem * es, es)
    r.range(10, "zero_point", -128, 127)
    r.range(11, "sq", -top - 1, top)
    r.range(12, "zero_point", -128, 127)
    r.mq(13, 2, "m")
    r.region(17, "scratch", 4 * (f + units + nin), 4)
    r.tensor(18, "weight", ("i8",), f * nin)
    r.tensor(20, "time", ("i16" if es == 2 else "i8",), f * mem * es)
    r.tensor(22, "bias", ("i32",), 4 * units)


def check_float(r):
    """float svdf: 2 F 3 I 4 M 5 U 6 XO 7 YO 8 SO (F x M f32) 9 ACT 10-11 w f32 [F, I] 12-13 t f32
    [F, M] 14-15 b f32 [U]."""
    f, nin, mem, units = r.range(2, "out", 1, MAX_DIM), r.range(3, "x", 1, 1 << 24), \
        r.range(4, "memory", 1, MAX_DIM), r.range(5, "out", 1, MAX_DIM)
    if f % units or f * mem > 1 << 22:
        r.fail("rank", "%d filters: not a multiple of %d units, or %d steps of state too many" % (f, units, mem))
    r.region(6, "x", 4 * nin, 4)
    r.region(7, "y", 4 * units, 4)
    r.region(8, "state", 4 * f * mem, 4)
    r.range(9, "act", 0, 2)
    r.tensor(10, "weight", ("f32",), 4 * f * nin)
    r.tensor(12, "time", ("f32",), 4 * f * mem)
    r.tensor(14, "bias", ("f32",), 4 * units)


def macs(P, k):
    return P[k + 2] * (P[k + 3] + P[k + 4])


def state(P, k):
    """The activation state kept across calls (kernels.state): float svdf's starts at 0."""
    if P[k] & 255 == FSVDF:
        return ((P[k + 8], P[k + 2] * P[k + 4], 0, 4),)
    return ((P[k + 8], P[k + 2] * P[k + 4], P[k + 11], P[k + 9]),)


# svdf record (int8): 2 F (filters) 3 I 4 M (memory) 5 U (units) 6 XO 7 YO 8 SO (state: F x M
# elements of SES bytes) 9 SES (2 int16, 1 int8) 10 ZX 11 ZS 12 ZY 13 M1 14 S1 15 M2 16 S2
# 17 ACC (F + U + I int32) 18 19 w [F, I] i8 20 21 t [F, M] (SES bytes) 22 23 b [U] i32

def svdf(E, P, k):
    """TFLM's integer SVDF (svdf_common.cc): the state shifts one step; each filter's newest
    entry is clamp(mbqm(w_f . (x - ZX))) + ZS, wrapped to the state's dtype as TFLM's cast;
    y_u = clamp8(ZY + mbqm(b_u + sum over the unit's filters of t_f . (state_f - ZS)))."""
    p = rec(P, k)
    a = E.a8
    f, nin, mem, units, xo, yo, so, es, zx, zs, zy, m1, s1, m2, s2 = p[2:17]
    st = E.a16 if es == 2 else a
    so //= es
    w, w0, b, b0 = E.s8[p[18]], p[19], E.s32[p[22]], p[23] // 4
    tv = _time_view(E.B[p[20]], es)
    t0 = p[21] // es
    lo, hi = (-32768, 32767) if es == 2 else (-128, 127)
    for i in range(f * mem - 1):
        st[so + i] = st[so + i + 1]
    for o in range(f):
        s = 0
        for i in range(nin):
            s += w[w0 + o * nin + i] * (a[xo + i] - zx)
        s = mbqm(wrap32(s), m1, s1)
        s = (lo if s < lo else (hi if s > hi else s)) + zs
        st[so + o * mem + mem - 1] = ((s - lo) & (2 * hi + 1)) + lo  # the cast to the state's dtype
    rank = f // units
    for u in range(units):
        acc = b[b0 + u]
        for o in range(u * rank, (u + 1) * rank):
            for j in range(mem):
                acc += tv[t0 + o * mem + j] * (st[so + o * mem + j] - zs)
        v = zy + mbqm(wrap32(acc), m2, s2)  # (int32 sums wrap, as TFLM's)
        a[yo + u] = -128 if v < -128 else (127 if v > 127 else v)


def _time_view(buf, es):
    return slot_view(buf, "i16" if es == 2 else "i8")


# float svdf record: 2 F 3 I 4 M 5 U 6 XO 7 YO 8 SO (the state: F x M f32) 9 ACT (0 none, 1 relu,
# 2 relu6) 10-11 w f32 [F, I] 12-13 t f32 [F, M] 14-15 b f32 [U]. TFLM's
# EvalFloatSvdfReference: the state shifts one step; filter f's newest entry is w_f . x; y_u =
# act(b_u + the sum over the unit's rank filters of t_f . state_f).

def fsvdf(E, P, k):
    a = E.af
    f, nin, mem, units = P[k + 2], P[k + 3], P[k + 4], P[k + 5]
    xo, yo, so = P[k + 6] // 4, P[k + 7] // 4, P[k + 8] // 4
    lo, hi = ACTS[P[k + 9]] or (None, None)
    w, w0, t, t0 = E.sf[P[k + 10]], P[k + 11] // 4, E.sf[P[k + 12]], P[k + 13] // 4
    b, b0 = E.sf[P[k + 14]], P[k + 15] // 4
    for i in range(f * mem - 1):
        a[so + i] = a[so + i + 1]
    for o in range(f):
        s = 0.0
        wi = w0 + o * nin
        for i in range(nin):
            s += w[wi + i] * a[xo + i]
        a[so + o * mem + mem - 1] = s
    rank = f // units
    for u in range(units):
        acc = b[b0 + u]
        for o in range(u * rank, (u + 1) * rank):
            s = 0.0
            ti, si = t0 + o * mem, so + o * mem
            for j in range(mem):
                s += t[ti + j] * a[si + j]
            acc += s
        if lo is not None and acc < lo:
            acc = lo
        if hi is not None and acc > hi:
            acc = hi
        a[yo + u] = acc
