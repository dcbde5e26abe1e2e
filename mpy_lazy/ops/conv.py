# conv2d (groups, dilation, asymmetric padding) and depthwise (channel multiplier), NHWC.
#
# Weights in place, in the layout the model came with (key wl): conv2d `ohwi` (TFLite) or `oihw`
# (torch), or `ohwi8` (int8: what mpy-lazy pack writes when the outputs are a multiple of 8:
# [out/8, kh, kw, 8 C/groups], output channel 8 b + j's weight for input channel ci at
# [b, ky, kx, 8 ci + j]: the order in which the assembler conv reads 8 outputs at once);
# depthwise `1hwo` (TFLite) or `o1hw` (torch). The kernels walk them through element strides
# (and output-channel blocks, WB), so no layout is ever copied.
# int8: per-channel requantization multipliers and shifts in tensor m ([2, out] int32), bias
# int32, input zero point from the input value, output q=, fused activation as clamp=.
import array

from .._arith import ACTS, head, mbqm, mbqm64, rec, requant, weights, wrap32
from ..kinds import CONV, CONV16, CONV_U8, DEPTHWISE, DW16, DW_U8, FCONV, FDEPTHWISE, INT32_MAX, MAX_DIM
from . import Op as Base, act_code, ints, wdtype

# int32 accumulators of the int8 kernels (at least one pixel's): they are requantized every
# RP = ACC // OC output pixels, so the scratch, which lies in the arena beside the op's input
# and output, stays small (a whole output row of them added 1-2 KB to the arena's peak; 32
# rather than 64 takes 128 bytes off the digits CNN's peak for 0.1-1.0 more cycles per MAC on
# the Pico: VWW 17.5 -> 18.5, whose early layers have 8 and 16 channels)
ACC = 32


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape, clamp, pairs

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        dw = name == "depthwise"
        shape = x.shape
        if dw and len(shape) == 1:  # a per-channel affine on a vector (a standalone BatchNorm)
            shape = (1, 1, shape[0])
        if len(shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        h, w, c = shape
        kh, kw = pairs(kv, "k", None, n)
        sh, sw = pairs(kv, "stride", (1, 1), n)
        dh, dwid = pairs(kv, "dil", (1, 1), n)
        pad = kv.get("pad", (0,))
        if len(pad) == 1:
            pad = pad * 4
        elif len(pad) == 2:
            pad = (pad[0], pad[1], pad[0], pad[1])
        if len(pad) != 4:
            raise self.fail("pad= takes 1, 2 or 4 integers (top,left,bottom,right)", "pad")
        ext_h, ext_w = dh * (kh - 1) + 1, dwid * (kw - 1) + 1
        for i, v in enumerate(pad):
            if not 0 <= v < (ext_h if i % 2 == 0 else ext_w):
                raise self.fail("pad %s: each must be >= 0 and smaller than the kernel" % (pad,), "pad")
        oh = (h + pad[0] + pad[2] - ext_h) // sh + 1
        ow = (w + pad[1] + pad[3] - ext_w) // sw + 1
        if oh < 1 or ow < 1:
            raise self.fail("kernel %dx%d larger than the padded input %dx%d" % (ext_h, ext_w, h, w), "k")
        if dw:
            mult = kv.get("mult", 1)
            if not 1 <= mult <= 4096:
                raise self.fail("mult=%d: must be 1..4096" % mult, "mult")
            oc, cpg, opg = c * mult, 1, mult
            if kv.get("wl", "1hwo") == "1hwo":
                wshape, ws = (1, kh, kw, oc), (1, kw * oc, oc, 1)
            else:
                wshape, ws = (oc, 1, kh, kw), (kh * kw, kw, 1, 1)
        else:
            oc, g = kv["out"], kv.get("groups", 1)
            if not 1 <= g <= c or c % g or not 1 <= oc <= 65535 or oc % g:
                raise self.fail("out=%d, groups=%d do not divide %d input channels" % (oc, g, c), "groups")
            cpg, opg = c // g, oc // g
            wl = kv.get("wl", "ohwi")
            if wl == "ohwi":
                wshape, ws = (oc, kh, kw, cpg), (kh * kw * cpg, kw * cpg, cpg, 1)
            elif wl == "ohwi8":
                if oc % 8 or g != 1:
                    raise self.fail("wl=ohwi8 needs groups 1 and out a multiple of 8, got %d, groups %d" % (oc, g), "wl")
                wshape, ws = (oc // 8, kh, kw, 8 * cpg), (8 * kh * kw * cpg, 8 * kw * cpg, 8 * cpg, 8)
            else:
                wshape, ws = (oc, cpg, kh, kw), (cpg * kh * kw, kw, 1, kh * kw)
        out_shape = check_shape((oh, ow, oc) if len(x.shape) == 3 else (oc,), n, "output")
        hasb = "b" in kv
        dt = self.quantized(("i8", "i16"))
        q8 = dt != "f32"
        # the kernels' record from word 2 ("conv / depthwise record" below):
        # OC ZY LO HI XO YO H W C OH OW KH KW SH SW DH DW PT PL WSO WSY WSX WSC CPG OPG ZX HASB RP,
        # then (int8) scratch, tensors and WB; record() fills XO, YO (arena offsets) and the
        # float fields. 16x8: ZX is ACC64
        self.wb = 3 if not dw and kv.get("wl") == "ohwi8" else 0
        if self.wb and dt != "i8":
            raise self.fail("wl=ohwi8 is for int8 values (the 16x8 and float kernels read ohwi/oihw)", "wl")
        # legacy uint8 models (TFLite's asymmetric weights): the weights' zero point, subtracted
        # from each weight by the kernels (kinds CONV_U8 / DW_U8; int8 codes, u - 128 of the uint8)
        self.wz = kv.get("wz", 0)
        if self.wz and (dt != "i8" or not -128 <= self.wz <= 127):
            raise self.fail("wz=%d: a weight zero point -128..127, for int8 values" % self.wz, "wz")
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n, dt)
            rp = max(1, min(ow, ACC // oc))
            if dt == "i16" and x.q[1] != 0:
                raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
            zx = (1 if kv.get("acc", "64") == "64" else 0) if dt == "i16" else x.q[1]
            self.p = ints((oc, kv["q"][1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwid, pad[0], pad[1])
                          + ws + (cpg, opg, zx, 1 if hasb else 0, rp))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, oc), "i32", init)
            if hasb:
                self.param("bias", "b", (oc,), "i32", init)
        else:
            self.p = ints((oc, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwid, pad[0], pad[1])
                          + ws + (cpg, opg, 0, 1 if hasb else 0, 0))
            self.param("weight", "w", wshape, "f32", init)
            if hasb:
                self.param("bias", "b", (oc,), "f32", init)
        self.out = (out_shape, dt, kv.get("q"))

    @property
    def macs(self):
        p = self.p
        return p[9] * p[10] * p[0] * p[11] * p[12] * p[23]  # OH OW OC KH KW CPG

    @property
    def scratch(self):
        """int32 words of scratch. int8: RP pixels' accumulators, then one pixel's window
        (conv2d) or a row of C zero points that padded taps read (depthwise in assembler).
        float with f16 weights: one decoded filter (the whole tensor if a filter is not
        contiguous)."""
        p = self.p
        n = p[11] * p[12] * p[23]  # KH KW CPG
        if self.y.dtype == "f32":
            v = self.weight.view
            if v is None or v.dtype != "f16":
                return 0
            return n if p[19] == n else n * p[0]
        window = max(p[11] * p[12], (p[8] + 3) // 4) if self.name == "depthwise" else n
        return p[27] * p[0] * (2 if self.y.dtype == "i16" else 1) + window

    def lag(self):
        """int8: bytes the output may start before its dying input (conv_lag: the same
        rule the program's check enforces, with the outputs the Thumb kernels write early:
        ohwi8's blocks of 8, depthwise's groups of 4)."""
        if self.y.dtype != "i8":
            return None  # (16x8: the planner gives the output its own bytes)
        kind = (DW_U8 if self.wz else DEPTHWISE) if self.name == "depthwise" else (CONV_U8 if self.wz else CONV)
        early = conv_early(kind, self.p[0], self.p[24], self.wb)  # (p[24]: OPG)
        return conv_lag([0, 0] + list(self.p), 0, early)

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        s = c.scratch
        dw = self.name == "depthwise"
        w, b = c.ref(self.weight, self.y.dtype == "f32"), c.ref(getattr(self, "bias", None))
        if self.y.dtype == "i8":
            acc = 4 * p[27] * p[0]
            if self.wz:
                return [c.record(DW_U8 if dw else CONV_U8,
                                 p + [s, s + acc] + w + b + c.ref(self.requant) + [self.wb, self.wz])]
            return [c.record(DEPTHWISE if dw else CONV,
                             p + [s, s + acc] + w + b + c.ref(self.requant) + [self.wb])]
        if self.y.dtype == "i16":
            acc = 8 * p[27] * p[0]
            return [c.record(DW16 if dw else CONV16,
                             p + [s, s + acc] + w + b + c.ref(self.requant))]
        p[2] = wdtype(self.weight)
        return [c.record(FDEPTHWISE if dw else FCONV, p + [0, s] + w + b + [0, 0])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {CONV: 'conv', DEPTHWISE: 'depthwise', FCONV: 'fconv', FDEPTHWISE: 'fdepthwise', CONV16: 'conv16',
           DW16: 'dw16', CONV_U8: 'conv_u8', DW_U8: 'dw_u8'}


def _check(r, E):
    fl = r.kind in (FCONV, FDEPTHWISE)
    wide = r.kind in (CONV16, DW16)
    dw = r.kind in (DEPTHWISE, FDEPTHWISE, DW16, DW_U8)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    oc = r.range(2, "out", 1, MAX_DIM)
    kh, kw, sh, sw, dh, dwd = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"), (17, "dil"), (18, "dil"))
    pt, pl = r.range(19, "pad", 0, MAX_DIM), r.range(20, "pad", 0, MAX_DIM)
    wso, wsy, wsx, wsc = (r.range(i, "wl", 0, 1 << 24) for i in (21, 22, 23, 24))
    cpg, opg = r.dims((25, "groups"), (26, "groups"))
    if oc % opg or (oc // opg) * cpg != c or (dw and (cpg != 1 or c * opg != oc)):
        r.fail("groups", "%d input and %d output channels do not split into groups of %d and %d" % (c, oc, cpg, opg))
    eh, ew = dh * (kh - 1) + 1, dwd * (kw - 1) + 1
    if pt >= eh or pl >= ew:
        r.fail("pad", "%d,%d: smaller than the kernel" % (pt, pl))
    if (oh - 1) * sh - pt + eh > h + eh - 1 or (ow - 1) * sw - pl + ew > w + ew - 1:
        r.fail("oh", "%dx%d outputs reach past the padded input" % (oh, ow))
    if oh * ow * oc > 1 << 24 or h * w * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    wb = r.range(38, "wl", 0, 0 if dw else 3) if r.kind in (CONV, DEPTHWISE, CONV_U8, DW_U8) else 0
    if wb not in (0, 3):
        r.fail("wl", "output channels in blocks of %d (1 or 8)" % (1 << wb))
    if oc % (1 << wb) or (wb and cpg != c):
        r.fail("wl", "%d output channels in blocks of %d (groups 1)" % (oc, 1 << wb))
    n = oc * kh * kw * cpg
    if dw:  # the layouts the compiler writes (mpy_lazy/ops/conv.py), which the kernels assume
        layouts = ((1, kw * oc, oc, 1), (kh * kw, kw, 1, 1))
    elif wb:  # ohwi8: [OC/8, KH, KW, 8 CPG], output o at (o >> 3) WSO + (o & 7)
        layouts = ((8 * kh * kw * cpg, 8 * kw * cpg, 8 * cpg, 8),)
    else:
        layouts = ((kh * kw * cpg, kw * cpg, cpg, 1), (cpg * kh * kw, kw, 1, kh * kw))
    if (wso, wsy, wsx, wsc) not in layouts:
        r.fail("wl", "weight strides %d, %d, %d, %d: not a layout of the weights (ohwi, oihw, ohwi8; 1hwo, o1hw)"
               % (wso, wsy, wsx, wsc))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * oc * size, size)
    if fl:
        wdt = r.range(4, "dtype", 1, 2)
        r.tensor(32, "weight", ("f32" if wdt == 1 else "f16",), n * (4 if wdt == 1 else 2))
        r.range(3, "act", 0, 3)
        r.bias(34, r.range(28, "b", 0, 1), oc)
        if wdt == 2:
            r.region(31, "scratch", 4 * kh * kw * cpg, 4)
        return
    r.clamp(size)
    acc64 = r.range(27, "acc", 0, 1) if wide else 0
    if not wide:
        r.range(27, "zero_point", -128, 127)
    hasb = r.range(28, "b", 0, 1)
    rp = r.range(29, "scratch", 1, ow)
    r.region(30, "scratch", (8 if wide else 4) * rp * oc, 4)
    r.region(31, "scratch", 4 * (max(kh * kw, (c + 3) // 4) if dw else kh * kw * cpg), 4)
    r.tensor(32, "weight", ("i8",), n)
    r.mq_tensor(36, oc, E, 7 if acc64 else 30)
    bias = r.bias(34, hasb, oc, E)
    # int8: every accumulator within int32: |bias| + 128 x sum |w| (the kernels add w x x, |x|
    # <= 128, the input zero point folded into the bias); 16x8 with int64 accumulators: within
    # TFLM's +-2**47 (with int32 ones, TFLM's sum wraps as the kernels' does)
    if wide and not acc64:
        return
    sums = E.abs_sums(r[32], r[33], oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb)
    if r.kind in (CONV_U8, DW_U8):  # |w - WZ| <= |w| + |WZ|
        wz = r.range(39, "wz", -128, 127)
        sums = [s + kh * kw * cpg * abs(wz) for s in sums]
    r.bound(bias, sums, oc, 32768 if wide else 128, (1 << 47) - 1 if wide else INT32_MAX)


def conv_lag(P, k, early=None):
    """Bytes an int8 conv / depthwise output may start before its dying input (the planner's
    rule): the kernels (every path) compute output pixels in raster order and write each
    after reading its window, so no write may reach a byte a later window reads: when pixel
    j's window is read, pixels before j may be written (to yo + j*OC), and the first byte any
    window from j on reads is xo + min(first(j), first of the next output row). The lag is the
    largest j*OC - that, over j. Each term is concave in the row and the column (separable),
    so its maximum is at an end or beside the kink where padding stops: a few candidates.
    The Thumb kernels write part of a pixel's outputs before its window is read for the last
    time: conv8 (WB 3) a block of 8 at a time, OC - 8 of them early; dw4 (depthwise,
    multiplier 1, C a multiple of 4) 4 at a time, OC - 4 early (`early`: those bytes; None:
    from the record at k)."""
    c, oh, ow, oc = P[k + 10], P[k + 11], P[k + 12], P[k + 2]
    if early is None:
        early = conv_early(P[k] & 255, oc, P[k + 26], P[k + 38])
    sh, sw, pt, pl = P[k + 15], P[k + 16], P[k + 19], P[k + 20]
    wc = P[k + 9] * c
    rows = [oy for oy in (0, 1, pt // sh - 1, pt // sh, pt // sh + 1, oh - 2, oh - 1) if 0 <= oy < oh]
    cols = [ox for ox in (0, 1, pl // sw, pl // sw + 1, ow - 1) if 0 <= ox < ow]
    a = max([oy * ow * oc - max(0, oy * sh - pt) * wc for oy in rows])
    b = max([ox * oc - max(0, ox * sw - pl) * c for ox in cols])
    lag = max(0, a + b + early)
    for oy in rows:
        if oy + 1 < oh:  # the next row's first window starts at its first column
            lag = max(lag, (oy * ow + ow - 1) * oc - max(0, (oy + 1) * sh - pt) * wc + early)
    return (lag + 3) // 4 * 4  # the arena's offsets stay word-aligned


def conv_early(kind, oc, opg, wb):
    """Output bytes of a pixel an int8 conv / depthwise may write before it last reads the
    pixel's window (conv_lag)."""
    if kind == CONV and wb:
        return oc - 8
    if kind == DEPTHWISE and opg == 1 and oc % 4 == 0:
        return oc - 4
    return 0


def check(r, E):
    _check(r, E)
    if r.kind in (CONV, DEPTHWISE, CONV_U8, DW_U8):
        r.lag = conv_lag(r.P, r.k)


def macs(P, k):
    return P[k + 11] * P[k + 12] * P[k + 2] * P[k + 13] * P[k + 14] * P[k + 25]


# conv / depthwise record: 2 OC 3 ZY 4 LO 5 HI 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW
# 15 SH 16 SW 17 DH 18 DW 19 PT 20 PL 21 WSO 22 WSY 23 WSX 24 WSC 25 CPG (input channels per
# group; depthwise: 1) 26 OPG (output channels per group; depthwise: the multiplier) 27 ZX
# 28 HASB 29 RP (output pixels per requantization, <= OW) 30 ACC (RP * OC int32) 31 COL (one
# output pixel's window, KH * KW * CPG int32: the viper conv fills it; depthwise: C bytes of
# ZX) 32 33 weights (slot, offset) 34 35 bias 36 37 requantization ([2, OC] int32) 38 WB
# (conv: output channels in blocks of 2**WB, weight (o, ky, kx, ci) at (o >> WB) * WSO +
# (o & 2**WB - 1) + ky * WSY + kx * WSX + ci * WSC: the `ohwi8` layout, WB 3, that the
# assembler conv reads 8 outputs at a time; depthwise: 0)
# conv_u8 / dw_u8 (legacy uint8 models): the same 39 words, then 39 WZ, the weights' zero point
# (int8 codes: TFLite's uint8 zero point - 128): each product is (w - WZ) * x, the bias folded
# with w - WZ. The Thumb kernels leave them to the viper loops.
#
# The input zero point is folded into the bias by the packer (docs/FORMAT.md: bias' = bias -
# ZX * sum(w) over the whole window), so a product is w * x, and a padded position, which adds
# nothing to TFLM's sum of w * (x - ZX), reads ZX.

def conv(E, P, k):
    """Grouped 2-D convolution, RP output pixels at a time: acc = bias + sum w * x over the
    kernel window (x = ZX at padded positions), then requant()."""
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    w, w0 = E.s8[p[32]], p[33]
    bias, b0 = E.s32[p[34]], p[35] // 4
    mq, m0 = E.s32[p[36]], p[37] // 4
    ao = p[30] // 4
    xo, yo, wd, c = p[6], p[7], p[9], p[10]
    h, oh, ow, oc = p[8], p[11], p[12], p[2]
    kh, kw, sh, sw, dh, dw, pt, pl = p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[20]
    wso, wsy, wsx, wsc, cpg, opg, zx, hasb = p[21], p[22], p[23], p[24], p[25], p[26], p[27], p[28]
    wb = p[38]
    wz = p[39] if len(p) > 39 else 0
    kb = p[29] * oc
    xsum = [0] * (oc // opg) if wz else None  # each group's window sum: sum (w - WZ) x = sum w x - WZ sum x
    for oy in range(oh):
        kk = 0
        for ox in range(ow):
            if kk == kb:
                W[0] = yo + (oy * ow + ox) * oc - kk
                W[1] = kk
                requant(a32, ao, mq, m0, a, W)
                kk = 0
            y0 = oy * sh - pt
            x0 = ox * sw - pl
            if wz:
                for g in range(oc // opg):
                    xsum[g] = _window_sum(a, xo, h, wd, c, g * cpg, cpg, y0, x0, kh, kw, dh, dw, zx)
            for o in range(oc):
                s = bias[b0 + o] if hasb else 0
                if wz:
                    s -= wz * xsum[o // opg]
                ci0 = (o // opg) * cpg
                for ky in range(kh):
                    iy = y0 + ky * dh
                    for kx in range(kw):
                        ix = x0 + kx * dw
                        wi = w0 + (o >> wb) * wso + (o & ((1 << wb) - 1)) + ky * wsy + kx * wsx
                        if iy < 0 or iy >= h or ix < 0 or ix >= wd:
                            for ci in range(cpg):
                                s += w[wi] * zx
                                wi += wsc
                            continue
                        xi = xo + (iy * wd + ix) * c + ci0
                        for ci in range(cpg):
                            s += w[wi] * a[xi + ci]
                            wi += wsc
                a32[ao + kk] = s
                kk += 1
        W[0] = yo + (oy + 1) * ow * oc - kk
        W[1] = kk
        requant(a32, ao, mq, m0, a, W)


def _window_sum(a, xo, h, wd, c, ci0, cpg, y0, x0, kh, kw, dh, dw, zx):
    """The sum of one output pixel's window of input channels ci0.. ci0 + CPG - 1, ZX at
    padded positions (conv_u8's weight zero point term)."""
    t = 0
    for ky in range(kh):
        iy = y0 + ky * dh
        for kx in range(kw):
            ix = x0 + kx * dw
            if iy < 0 or iy >= h or ix < 0 or ix >= wd:
                t += zx * cpg
                continue
            xi = xo + (iy * wd + ix) * c + ci0
            for ci in range(cpg):
                t += a[xi + ci]
    return t


def depthwise(E, P, k):
    """Depthwise convolution (CPG 1, OPG = the channel multiplier): conv() with the channel
    loop innermost, as the NHWC layout wants."""
    conv(E, P, k)


conv_u8 = dw_u8 = conv  # (the weights' zero point: the record's 40th word)


def conv16(E, P, k):
    """16x8 conv2d and depthwise: int16 x, int8 w, int64 or int32 accumulators."""
    p = rec(P, k)
    a = E.a16
    w, w0 = E.s8[p[32]], p[33]
    bias, b0 = E.s32[p[34]], p[35] // 4
    mq, m0 = E.s32[p[36]], p[37] // 4
    xo, yo, wd, c = p[6] // 2, p[7] // 2, p[9], p[10]
    h, oh, ow, oc, zy, lo, hi = p[8], p[11], p[12], p[2], p[3], p[4], p[5]
    kh, kw, sh, sw, dh, dw, pt, pl = p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[20]
    wso, wsy, wsx, wsc, cpg, opg, acc64, hasb = p[21], p[22], p[23], p[24], p[25], p[26], p[27], p[28]
    q = yo
    for oy in range(oh):
        for ox in range(ow):
            for o in range(oc):
                s = 0
                ci0 = (o // opg) * cpg
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dw
                        if ix < 0 or ix >= wd:
                            continue
                        wi = w0 + o * wso + ky * wsy + kx * wsx
                        xi = xo + (iy * wd + ix) * c + ci0
                        for ci in range(cpg):
                            s += w[wi] * a[xi + ci]
                            wi += wsc
                if hasb:
                    s += bias[b0 + o]
                r = mbqm64(s, mq[m0 + o], mq[m0 + oc + o]) if acc64 else mbqm(wrap32(s), mq[m0 + o], mq[m0 + oc + o])
                r += zy
                a[q] = lo if r < lo else (hi if r > hi else r)
                q += 1


dw16 = conv16


# fconv / fdepthwise record (f32): 2 OC 3 ACT 4 WDT (1 f32, 2 f16) 6..26 as the int8 record
# (XO YO bytes) 28 HASB 31 FS (f16: one decoded filter, or the whole tensor when a filter is
# not contiguous) 32 33 weights 34 35 bias

def fconv(E, P, k):
    p = [P[k + i] for i in range(38)]
    a = E.af
    h, w, c, oh, ow, oc, kh, kw = p[8], p[9], p[10], p[11], p[12], p[2], p[13], p[14]
    sh, sw, dh, dw, pt, pl = p[15], p[16], p[17], p[18], p[19], p[20]
    wso, wsy, wsx, wsc, cpg, opg = p[21], p[22], p[23], p[24], p[25], p[26]
    xo, yo = p[6] // 4, p[7] // 4
    lo, hi = ACTS[p[3]] or (None, None)
    bv, b0 = (E.sf[p[34]], p[35] // 4) if p[28] else (None, 0)
    n = kh * kw * cpg
    whole = p[4] == 2 and wso != n
    if whole:  # f16, a filter not contiguous (fdepthwise 1hwo): the whole tensor decoded once
        wt, base0 = weights(E, p, 32, oc * n, 0, p[31])
    for o in range(oc):
        if whole:
            wt, base = wt, base0 + o * wso
        elif p[4] == 2:
            wt, base = weights(E, p, 32, n, o * wso, p[31])
        else:
            wt, base = weights(E, p, 32, n, o * wso, 0)
        ci0 = (o // opg) * cpg
        for oy in range(oh):
            y0 = oy * sh - pt
            for ox in range(ow):
                x0 = ox * sw - pl
                s = bv[b0 + o] if bv is not None else 0.0
                for ky in range(kh):
                    iy = y0 + ky * dh
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = x0 + kx * dw
                        if ix < 0 or ix >= w:
                            continue
                        xi = xo + (iy * w + ix) * c + ci0
                        wi = base + ky * wsy + kx * wsx
                        for ci in range(cpg):
                            s += wt[wi] * a[xi + ci]
                            wi += wsc
                if lo is not None and s < lo:
                    s = lo
                if hi is not None and s > hi:
                    s = hi
                a[yo + (oy * ow + ox) * oc + o] = s


fdepthwise = fconv
