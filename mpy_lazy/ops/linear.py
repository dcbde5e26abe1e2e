# linear (fully connected): y = W x + b over the input read flat (in NHWC order, as TFLite's
# FULLY_CONNECTED reads a 4-D input). W is [out, in] (wl=oi: torch, TFLite), [in, out]
# (wl=io: ONNX MatMul) or, int8 with out a multiple of 8, [out/8, 8 in] (wl=oi8: what mpy-lazy
# pack writes, the order in which the assembler kernel reads 8 outputs at once), read in place
# through strides.
from .._arith import ACTS, head, mbqm, mbqm64, rec, requant, weights, wrap32
from ..kinds import DENSE, DENSE16, DENSE_COL, FDENSE, INT32_MAX, MAX_DIM
from . import Op as Base, act_code, ints, wdtype


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import clamp

        Base.__init__(self, name, kv, ins, n)
        n_in, n_out = ins[0].size, kv["out"]
        if not 1 <= n_out <= 65535:
            raise self.fail("out=%d: must be 1..65535" % n_out, "out")
        wl = kv.get("wl", "oi")
        t = wl == "io"
        hasb = "b" in kv
        wshape = (n_in, n_out) if t else (n_out, n_in)
        dt = self.quantized(("i8", "i16"))
        q8 = dt != "f32"
        self.wb = 0
        if wl == "oi8":
            if n_out % 8 or dt != "i8":
                raise self.fail("wl=oi8 is for int8 values and out a multiple of 8 (out=%d, %s)" % (n_out, dt), "wl")
            self.wb = 3
            wshape = (n_out // 8, 8 * n_in)
        # the kernels' record from word 2 ("dense record" below): OC ZY LO HI XO YO
        # NIN WSO WSI HASB, then (int8) scratch, tensors and WB; record() fills XO, YO
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n, dt)
            if dt == "i16" and ins[0].q[1] != 0:
                raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
            self.acc64 = 1 if kv.get("acc", "64") == "64" and dt == "i16" else 0
            ws = (8 * n_in, 8) if self.wb else (1, n_out) if t else (n_in, 1)
            self.p = ints((n_out, kv["q"][1], lo, hi, 0, 0, n_in) + ws + (1 if hasb else 0,))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, n_out), "i32", init)
            if hasb:
                self.param("bias", "b", (n_out,), "i32", init)
        else:
            self.p = ints((n_out, act_code(kv), 0, 0, 0, 0, n_in, 1 if t else n_in, n_out if t else 1,
                           1 if hasb else 0))
            self.param("weight", "w", wshape, "f32", init)
            if hasb:
                self.param("bias", "b", (n_out,), "f32", init)
        self.out = ((n_out,), dt, kv.get("q"))

    @property
    def macs(self):
        return self.p[6] * self.p[0]

    @property
    def scratch(self):
        """int32 words. int8: the accumulators, then the input as int32 (at most
        DENSE_COL of it at a time). float with f16 weights: one decoded row."""
        p = self.p
        if self.y.dtype == "i8":
            return p[0] + min(p[6], DENSE_COL)
        if self.y.dtype != "f32":
            return p[0] * 2 + p[6]
        v = self.weight.view
        if v is None or v.dtype != "f16":
            return 0
        return p[6] if p[8] == 1 else p[0]

    def lag(self):
        # int8: every accumulator is summed before the first output is written (the float
        # loop writes as it goes); oi8: the assembler writes 8 outputs at a time, each block
        # once it is summed, so the last block's reads come after OC - 8 writes
        if self.y.dtype != "i8":
            return None
        return self.p[0] - 8 if self.wb else 0

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        s = c.scratch
        w, b = c.ref(self.weight, self.y.dtype == "f32"), c.ref(getattr(self, "bias", None))
        if self.y.dtype == "i8":
            return [c.record(DENSE, p + [s, s + 4 * p[0]] + w + b + c.ref(self.requant) + [self.wb])]
        if self.y.dtype == "i16":
            return [c.record(DENSE16, p + [s, s + 8 * p[0]] + w + b + c.ref(self.requant) + [self.acc64])]
        p[2] = wdtype(self.weight)
        return [c.record(FDENSE, p + [0, s] + w + b + [0, 0])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {DENSE: 'dense', FDENSE: 'fdense', DENSE16: 'dense16'}


def _check(r, E):
    fl = r.kind == FDENSE
    wide = r.kind == DENSE16
    n, oc = r.range(8, "x", 1, 1 << 24), r.range(2, "out", 1, MAX_DIM)
    wso, wsi = r.range(9, "wl", 0, 1 << 24), r.range(10, "wl", 0, 1 << 24)
    wb = r.range(20, "wl", 0, 3) if r.kind == DENSE else 0
    if wb not in (0, 3):
        r.fail("wl", "outputs in blocks of %d (1 or 8)" % (1 << wb))
    if oc % (1 << wb):
        r.fail("wl", "%d outputs in blocks of %d" % (oc, 1 << wb))
    if (wso, wsi) not in (((8 * n, 8),) if wb else ((n, 1), (1, oc))):
        r.fail("wl", "weight strides %d, %d: not a layout of the weights (oi, io, oi8)" % (wso, wsi))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", n * size, size)
    r.region(7, "y", oc * size, size)
    if fl:
        wdt = r.range(4, "dtype", 1, 2)
        r.tensor(14, "weight", ("f32" if wdt == 1 else "f16",), n * oc * (4 if wdt == 1 else 2))
        r.range(3, "act", 0, 3)
        r.bias(16, r.range(11, "b", 0, 1), oc)
        if wdt == 2:
            r.region(13, "scratch", 4 * (oc if wsi != 1 else n), 4)
        return
    r.clamp(size)
    acc64 = r.range(20, "acc", 0, 1) if wide else 0
    hasb = r.range(11, "b", 0, 1)
    r.region(12, "scratch", (8 if wide else 4) * oc, 4)
    r.region(13, "scratch", 4 * (n if wide else min(n, DENSE_COL)), 4)
    r.tensor(14, "weight", ("i8",), n * oc)
    r.mq_tensor(18, oc, E, 7 if acc64 else 30)
    bias = r.bias(16, hasb, oc, E)
    if wide and not acc64:
        return
    sums = E.abs_sums(r[14], r[15], oc, 1, 1, n, wso, 0, 0, wsi, wb)
    r.bound(bias, sums, oc, 32768 if wide else 128, (1 << 47) - 1 if wide else INT32_MAX)


def check(r, E):
    _check(r, E)
    if r.kind == DENSE:  # oi8 (WB 3): the assembler writes a block of 8 once it is summed
        r.lag = r[2] - 8 if r[20] else 0


def macs(P, k):
    return P[k + 8] * P[k + 2]


# dense record: 2 OC 3 ZY 4 LO 5 HI 6 XO 7 YO 8 NIN 9 WSO 10 WSI 11 HASB 12 ACC (OC int32)
# 13 COL (min(NIN, 256) int32: the viper dense converts the input into it, 256 at a time) 14 15
# weights 16 17 bias 18 19 requantization 20 WB (as conv's: weight (o, i) at (o >> WB) * WSO +
# (o & 2**WB - 1) + i * WSI; `oi8`: WB 3). ZX is folded into the bias.

def dense(E, P, k):
    """Fully connected: acc[o] = bias[o] + sum_i w[(o >> WB) * WSO + (o & 2**WB - 1) + i * WSI] x[i]."""
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    w, w0 = E.s8[p[14]], p[15]
    bias, b0 = E.s32[p[16]], p[17] // 4
    xo, n, oc, wso, wsi, hasb, wb = p[6], p[8], p[2], p[9], p[10], p[11], p[20]
    ao = p[12] // 4
    for o in range(oc):
        s = bias[b0 + o] if hasb else 0
        wi = w0 + (o >> wb) * wso + (o & ((1 << wb) - 1))
        for i in range(n):
            s += w[wi] * a[xo + i]
            wi += wsi
        a32[ao + o] = s
    W[0] = p[7]
    W[1] = oc
    requant(a32, ao, E.s32[p[18]], p[19] // 4, a, W)


# 16x8 dense record (kind dense16): the dense record with int16 values, 20 ACC64.

def dense16(E, P, k):
    p = rec(P, k)
    a = E.a16
    w, w0 = E.s8[p[14]], p[15]
    bias, b0 = E.s32[p[16]], p[17] // 4
    mq, m0 = E.s32[p[18]], p[19] // 4
    xo, yo, n, oc, zy, lo, hi = p[6] // 2, p[7] // 2, p[8], p[2], p[3], p[4], p[5]
    wso, wsi, hasb, acc64 = p[9], p[10], p[11], p[20]
    for o in range(oc):
        s = bias[b0 + o] if hasb else 0
        wi = w0 + o * wso
        for i in range(n):
            s += w[wi] * a[xo + i]
            wi += wsi
        r = mbqm64(s, mq[m0 + o], mq[m0 + oc + o]) if acc64 else mbqm(wrap32(s), mq[m0 + o], mq[m0 + oc + o])
        r += zy
        a[yo + o] = lo if r < lo else (hi if r > hi else r)


# fdense record (f32): 2 OC 3 ACT 4 WDT 6 XO 7 YO 8 NIN 9 WSO 10 WSI 11 HASB 13 FS (f16: one row)
# 14 15 weights 16 17 bias

def fdense(E, P, k):
    p = [P[k + i] for i in range(20)]
    a = E.af
    n_in, n_out, wsi = p[8], p[2], p[10]
    xo, yo = p[6] // 4, p[7] // 4
    lo, hi = ACTS[p[3]] or (None, None)
    bv, b0 = (E.sf[p[16]], p[17] // 4) if p[11] else (None, 0)
    if wsi == 1:  # [out, in]: a dot product per output
        for o in range(n_out):
            wt, base = weights(E, p, 14, n_in, o * n_in, p[13])
            s = bv[b0 + o] if bv is not None else 0.0
            for i in range(n_in):
                s += wt[base + i] * a[xo + i]
            a[yo + o] = s
    else:  # [in, out]: accumulate one input row at a time
        for o in range(n_out):
            a[yo + o] = bv[b0 + o] if bv is not None else 0.0
        for i in range(n_in):
            xi = a[xo + i]
            wt, base = weights(E, p, 14, n_out, i * n_out, p[13])
            for o in range(n_out):
                a[yo + o] += wt[base + o] * xi
    if lo is not None or hi is not None:
        for o in range(n_out):
            s = a[yo + o]
            if lo is not None and s < lo:
                a[yo + o] = lo
            elif hi is not None and s > hi:
                a[yo + o] = hi
