# tconv: transpose convolution (TFLite's TRANSPOSE_CONV, ONNX's ConvTranspose without groups
# or dilation), NHWC, weights OHWI ([out, kh, kw, C]). The output size is given (size=oh,ow):
# output pixel (oy, ox) sums, over the taps with oy + pad_top - ky = iy * stride (and the same
# for x) inside the input, (x - zero point) x w. int8 (int32 accumulators) and 16x8 (int16
# values, int64 accumulators): TFLite Micro's arithmetic. Float (f32 weights; f16 ones are
# decoded into RAM): the same sums in float, act= fused.
from .._arith import ACTS, mbqm, mbqm64, rec, wrap32
from ..kinds import FTCONV, MAX_DIM, TCONV, TCONV16
from . import Op as Base, act_code, ints


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape, clamp, pairs

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        h, w, c = x.shape
        kh, kw = pairs(kv, "k", None, n)
        sh, sw = pairs(kv, "stride", (1, 1), n)
        oh, ow = pairs(kv, "size", None, n)
        pad = kv.get("pad", (0,))
        if len(pad) == 1:
            pad = pad * 2
        if len(pad) != 2 or not 0 <= pad[0] < kh or not 0 <= pad[1] < kw:
            raise self.fail("pad=top,left: each >= 0 and smaller than the kernel", "pad")
        oc = kv["out"]
        if not 1 <= oc <= 65535:
            raise self.fail("out=%d: must be 1..65535" % oc, "out")
        dt = self.quantized(("i8", "i16"))
        hasb = "b" in kv
        if dt == "f32":
            # the float record (ftconv below): the integer one with ACT for ZY, no requantization
            self.p = ints((oc, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, pad[0], pad[1], 0,
                           1 if hasb else 0))
            self.param("weight", "w", (oc, kh, kw, c), "f32", init)
            if hasb:
                self.param("bias", "b", (oc,), "f32", init)
            self.out = (check_shape((oh, ow, oc), n, "output"), dt, None)
            return
        self.needs("m")
        lo, hi = clamp(kv, n, dt)
        if dt == "i16" and x.q[1] != 0:
            raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
        # the kernel's record from word 2 ("transpose conv record" below)
        self.p = ints((oc, kv["q"][1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, pad[0], pad[1], x.q[1],
                       1 if hasb else 0))
        self.param("weight", "w", (oc, kh, kw, c), "i8", init)
        self.param("requant", "m", (2, oc), "i32", init)
        if hasb:
            self.param("bias", "b", (oc,), "i32", init)
        self.scratch = oc * (2 if dt == "i16" else 1)
        self.out = (check_shape((oh, ow, oc), n, "output"), dt, kv["q"])

    @property
    def macs(self):
        p = self.p
        return p[6] * p[7] * p[8] * p[0] * p[11] * p[12]

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        if self.y.dtype == "f32":
            return [c.record(FTCONV, p + [0] + c.ref(self.weight) + c.ref(getattr(self, "bias", None)))]
        kind = TCONV16 if self.y.dtype == "i16" else TCONV
        return [c.record(kind, p + [c.scratch] + c.ref(self.weight) + c.ref(getattr(self, "bias", None))
                         + c.ref(self.requant))]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {TCONV: 'tconv', TCONV16: 'tconv16', FTCONV: 'ftconv'}


def check(r, E):
    wide = r.kind == TCONV16
    fl = r.kind == FTCONV
    size = 4 if fl else (2 if wide else 1)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    oc = r.range(2, "out", 1, MAX_DIM)
    kh, kw, sh, sw = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"))
    r.range(17, "pad", 0, kh - 1)
    r.range(18, "pad", 0, kw - 1)
    if h * w * c > 1 << 24 or oh * ow * oc > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * oc * size, size)
    if fl:
        r.range(3, "act", 0, 3)
        r.tensor(22, "weight", ("f32",), 4 * oc * kh * kw * c)
        r.bias(24, r.range(20, "b", 0, 1), oc)
        return
    r.clamp(size)
    top = 0 if wide else 127  # (int16 values are symmetric: TFLM's 16x8 kernels take no input offset)
    r.range(19, "zero_point", -top - 1 if top else 0, top)
    hasb = r.range(20, "b", 0, 1)
    r.region(21, "scratch", (8 if wide else 4) * oc, 4)
    r.tensor(22, "weight", ("i8",), oc * kh * kw * c)
    r.mq_tensor(26, oc, E, 7 if wide else 30)
    bias = r.bias(24, hasb, oc, E)
    if wide:  # int64 accumulators: within TFLM's +-2**47
        sums = E.abs_sums(r[22], r[23], oc, kh, kw, c, kh * kw * c, kw * c, c, 1)
        r.bound(bias, sums, oc, 32768, (1 << 47) - 1)


def macs(P, k):  # every input pixel's channels over every tap
    return P[k + 8] * P[k + 9] * P[k + 10] * P[k + 2] * P[k + 13] * P[k + 14]


# transpose conv record (kinds tconv: int8; tconv16: 16x8, int64 accumulators): 2 OC 3 ZY 4 LO
# 5 HI 6 XO 7 YO (bytes) 8 H 9 W 10 C (the input) 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 17 PT
# 18 PL 19 ZX 20 HASB 21 ACC (OC accumulators of 4 or 8 bytes) 22 23 weights (OHWI: [OC, KH,
# KW, C]) 24 25 bias 26 27 requantization. TFLM scatters every input pixel over the output;
# the same sums gathered per output pixel: y(oy, ox, o) = sum over the taps with
# oy + PT - ky = iy * SH (and the same for x) of (x - ZX) * w.

def tconv(E, P, k):
    p = rec(P, k)
    wide = (p[0] & 255) == TCONV16
    es = 2 if wide else 1
    a = E.a16 if wide else E.a8
    w, w0 = E.s8[p[22]], p[23]
    bias, b0 = E.s32[p[24]], p[25] // 4
    mq, m0 = E.s32[p[26]], p[27] // 4
    oc, zy, lo, hi, xo, yo = p[2], p[3], p[4], p[5], p[6] // es, p[7] // es
    h, wd, c, oh, ow, kh, kw, sh, sw, pt, pl, zx, hasb = p[8:21]
    q = yo
    for oy in range(oh):
        for ox in range(ow):
            for o in range(oc):
                s = 0
                for ky in range(kh):
                    ny = oy + pt - ky
                    if ny < 0 or ny % sh:
                        continue
                    iy = ny // sh
                    if iy >= h:
                        continue
                    for kx in range(kw):
                        nx = ox + pl - kx
                        if nx < 0 or nx % sw:
                            continue
                        ix = nx // sw
                        if ix >= wd:
                            continue
                        wi = w0 + ((o * kh + ky) * kw + kx) * c
                        xi = xo + (iy * wd + ix) * c
                        for ci in range(c):
                            s += (a[xi + ci] - zx) * w[wi + ci]
                if hasb:
                    s += bias[b0 + o]
                if wide:
                    r = mbqm64(s, mq[m0 + o], mq[m0 + oc + o])
                else:
                    r = mbqm(wrap32(s), mq[m0 + o], mq[m0 + oc + o])
                r += zy
                a[q] = lo if r < lo else (hi if r > hi else r)
                q += 1


tconv16 = tconv


# transpose conv record (f32, kind ftconv): the int8 tconv record above with 3 ACT
# for ZY, f32 weights (OHWI) at 22 23 and bias at 24 25, no requantization. Output pixel (oy, ox)
# gathers the taps that reach it: oy + PT - ky = iy * SH inside the input (and the same for x).

def ftconv(E, P, k):
    p = [P[k + i] for i in range(26)]
    a = E.af
    oc, h, wd, c, oh, ow, kh, kw, sh, sw, pt, pl = p[2], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], \
        p[16], p[17], p[18]
    xo, q = p[6] // 4, p[7] // 4
    wt, w0 = E.sf[p[22]], p[23] // 4
    bv, b0 = (E.sf[p[24]], p[25] // 4) if p[20] else (None, 0)
    lo, hi = ACTS[p[3]] or (None, None)
    for oy in range(oh):
        for ox in range(ow):
            for o in range(oc):
                s = bv[b0 + o] if bv is not None else 0.0
                for ky in range(kh):
                    ny = oy + pt - ky
                    if ny < 0 or ny % sh or ny // sh >= h:
                        continue
                    for kx in range(kw):
                        nx = ox + pl - kx
                        if nx < 0 or nx % sw or nx // sw >= wd:
                            continue
                        wi = w0 + ((o * kh + ky) * kw + kx) * c
                        xi = xo + ((ny // sh) * wd + nx // sw) * c
                        for ci in range(c):
                            s += wt[wi + ci] * a[xi + ci]
                if lo is not None and s < lo:
                    s = lo
                if hi is not None and s > hi:
                    s = hi
                a[q] = s
                q += 1
