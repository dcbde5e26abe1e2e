# Kernels in plain Python: run on every port and on CPython. The int8 kernels give exactly the
# integers of their viper twins in _viper.py (TFLite Micro's arithmetic: int32 accumulation,
# fixed-point requantization, saturation to int8).
#
# A kernel is kernel(E, P, k): P the program (mpy_lazy/program.py), k the index of the op's
# record in it, E the running model: E.W its work array (int32, RAM), and the typed views this
# path reads: E.a8 / E.a32 the arena as int8 / int32, E.s8[s] / E.s32[s] tensor slot s as int8 /
# int32. Offsets in records are bytes; an int32 at byte offset o is element o // 4.
#
# Every int8 record holds the requantization header at words 2..5, which requant() reads (the
# kernels copy it into E.W, a RAM array, with the block's position: the record may be flash):
#   W[0] RQ_Y  first output index of the block        W[3] ZY  output zero point
#   W[1] RQ_N  elements in the block                  W[4] LO  clamp low
#   W[2] OC    channels: element i uses multiplier/shift [i % OC]   W[5] HI  clamp high
#   W[6] ES    bytes per output element (1 int8, 2 int16)
#   W[7] ALT   0; 1: a negative accumulator uses the second OC multipliers and shifts (mq[2 OC:]),
#              2: the same, negated (TFLM's leaky relu: identity above 0, alpha below)
# The rest of a record is the kernel's own (indices below; check.py checks every one). Activations
# are NHWC: element (y, x, c) of an H x W x C value at offset (y * W + x) * C + c. Weights are
# addressed through element strides (WSO, WSY, WSX, WSC for output channel, kernel row, kernel
# column, input channel), so OHWI (TFLite), OIHW (torch/ONNX) and IO/OI dense layouts run
# without a transposed copy.


def rec(P, k):
    """The record at k as a list (the pure path's one allocation per op)."""
    return [P[k + i] for i in range(P[k + 1])]


def head(W, p, es=1, alt=0):
    """Copy the record's requantization header (OC, ZY, LO, HI) into the work array."""
    W[2], W[3], W[4], W[5], W[6], W[7] = p[2], p[3], p[4], p[5], es, alt


# --- TFLite Micro's fixed-point arithmetic (gemmlowp), on Python ints ---------------------

def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul of two int32."""
    if a == b == -2147483648:
        return 2147483647
    ab = a * b
    v = ab + (1073741824 if ab >= 0 else -1073741823)
    q = (-v if v < 0 else v) >> 31  # C division: truncate toward zero
    return -q if v < 0 else q


def rdbpot(x, e):
    """RoundingDivideByPOT: x / 2**e rounded half away from zero, 0 <= e <= 31."""
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def mbqm(x, m, s):
    """MultiplyByQuantizedMultiplier: x * m * 2**(s - 31), TFLM's double rounding. A left
    shift wraps to int32, as TFLM's `x * (1 << s)` does on the hardware it runs on."""
    if s > 0:
        return srdhm(((x << s) + 2147483648) % 4294967296 - 2147483648, m)
    return rdbpot(srdhm(x, m), -s)


# --- int8 -----------------------------------------------------------------------------------

def requant(acc, ao, mq, mo, dst, W):
    """dst[RQ_Y + i] = clamp(ZY + mbqm(acc[ao + i], m[c], s[c])) for i < RQ_N, c = i % OC;
    mq[mo:] holds OC multipliers then OC shifts (ALT: then OC more of each, for negative
    accumulators). dst is the arena as int8 or int16 (ES), or with OC < 0 an int32 array that
    gets the bare mbqm() results (channel count -OC; add's tables)."""
    y, n, oc, zy, lo, hi, alt = W[0], W[1], W[2], W[3], W[4], W[5], W[7]
    raw = oc < 0
    if raw:
        oc = -oc
    c = 0
    for i in range(n):
        x = acc[ao + i]
        if alt and x < 0:
            v = mbqm(x, mq[mo + 2 * oc + c], mq[mo + 3 * oc + c])
            if alt == 2 and v != -2147483648:  # (C's int32 negation leaves INT32_MIN so)
                v = -v
        else:
            v = mbqm(x, mq[mo + c], mq[mo + oc + c])
        c += 1
        if c == oc:
            c = 0
        if raw:
            dst[y + i] = v
            continue
        v += zy
        dst[y + i] = lo if v < lo else (hi if v > hi else v)


# conv / depthwise record: 2 OC 3 ZY 4 LO 5 HI 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW
# 15 SH 16 SW 17 DH 18 DW 19 PT 20 PL 21 WSO 22 WSY 23 WSX 24 WSC 25 CPG (input channels per
# group; depthwise: 1) 26 OPG (output channels per group; depthwise: the multiplier) 27 ZX
# 28 HASB 29 RP (output pixels per requantization, <= OW) 30 ACC (RP * OC int32) 31 COL (one
# output pixel's window, KH * KW * CPG int32: the viper conv fills it; depthwise: C bytes of
# ZX) 32 33 weights (slot, offset) 34 35 bias 36 37 requantization ([2, OC] int32) 38 WB
# (conv: output channels in blocks of 2**WB, weight (o, ky, kx, ci) at (o >> WB) * WSO +
# (o & 2**WB - 1) + ky * WSY + kx * WSX + ci * WSC: the `ohwi8` layout, WB 3, that the
# assembler conv reads 8 outputs at a time; depthwise: 0)
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
    kb = p[29] * oc
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
            for o in range(oc):
                s = bias[b0 + o] if hasb else 0
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


def depthwise(E, P, k):
    """Depthwise convolution (CPG 1, OPG = the channel multiplier): conv() with the channel
    loop innermost, as the NHWC layout wants."""
    conv(E, P, k)


# 16x8 conv / depthwise record (kinds conv16, dw16): the conv record with int16 values (XO, YO
# in bytes), 27 ACC64 (1: TFLM's int64 accumulator and its int64 MultiplyByQuantizedMultiplier,
# for int64 biases; 0: int32 ones, for int32 biases; ZX is 0) and ACC holding RP * OC
# accumulators of 8 bytes.

def mbqm64(x, m, s):
    """TFLM's MultiplyByQuantizedMultiplier(int64 x, m, s): the multiplier rounded to 16 bits,
    one rounding shift (its result cast to int32)."""
    r = (m + 32768) >> 16 if m < 0x7FFF0000 else 0x7FFF
    t = 15 - s
    return wrap32((x * r + (1 << (t - 1))) >> t)


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


# transpose conv record (kinds tconv: int8; tconv16: 16x8, int64 accumulators): 2 OC 3 ZY 4 LO
# 5 HI 6 XO 7 YO (bytes) 8 H 9 W 10 C (the input) 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 17 PT
# 18 PL 19 ZX 20 HASB 21 ACC (OC accumulators of 4 or 8 bytes) 22 23 weights (OHWI: [OC, KH,
# KW, C]) 24 25 bias 26 27 requantization. TFLM scatters every input pixel over the output;
# the same sums gathered per output pixel: y(oy, ox, o) = sum over the taps with
# oy + PT - ky = iy * SH (and the same for x) of (x - ZX) * w.

def tconv(E, P, k):
    from .check import TCONV16

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


# add / sub record (kinds add, sub: int8; add16, sub16: int16): 2 OC (1) 3 ZY 4 LO 5 HI 6 X1
# 7 X2 8 YO (bytes) 9 N 10 BC (x2 repeats every BC elements: BC = N, or C for a per-channel x2)
# 11 BLOCK (256) 12 Z1 13 Z2 14 T (512 int32) 15 ACC (BLOCK int32) 16 M1 17 S1 18 M2 19 S2
# 20 M 21 S (inline, each pair a one-channel mq). TFLM's add and sub: each input rescaled,
# (q - Z) << 20 (int8) or << 15 (int16) through mbqm(., m_i, s_i), then the sum or difference
# through mbqm(., m, s). int8: T holds the rescaled value of every code of x1, then of x2, built
# at each call; int16: T holds a block of each.

def wrap32(v):
    return ((v + 2147483648) & 4294967295) - 2147483648


def add(E, P, k):
    """y = clamp(ZY + mbqm(t1[x1] +- t2[x2], m, s)), in blocks of BLOCK elements."""
    from .check import ADD16, SUB, SUB16

    p = rec(P, k)
    kind = p[0] & 255
    W, a32 = E.W, E.a32
    wide = kind in (ADD16, SUB16)
    sign = -1 if kind in (SUB, SUB16) else 1
    es = 2 if wide else 1
    a = E.a16 if wide else E.a8
    head(W, p, es)
    x1, x2, y, n, bc, block, z1, z2 = p[6] // es, p[7] // es, p[8] // es, p[9], p[10], p[11], p[12], p[13]
    t, ao = p[14] // 4, p[15] // 4
    if not wide:
        W[1] = 256
        W[2] = -1  # requant() in raw mode: int32 results into the tables
        for side in (0, 1):
            z = z1 if side == 0 else z2
            for i in range(256):
                a32[ao + i] = (i - 128 - z) << 20
            W[0] = t + 256 * side
            requant(a32, ao, p, 16 + 2 * side, a32, W)
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        if wide:  # both blocks rescaled into T: x1's at T[0:], x2's at T[256:]
            W[1] = m
            W[2] = -1
            for side in (0, 1):
                jj = j
                for q in range(m):
                    if side == 0:
                        a32[ao + q] = (a[x1 + i + q] - z1) << 15
                    else:
                        a32[ao + q] = (a[x2 + jj] - z2) << 15
                        jj += 1
                        if jj == bc:
                            jj = 0
                W[0] = t + 256 * side
                requant(a32, ao, p, 16 + 2 * side, a32, W)
            W[2] = 1
            for q in range(m):
                a32[ao + q] = wrap32(a32[t + q] + sign * a32[t + 256 + q])
                j += 1
                if j == bc:
                    j = 0
        else:
            W[2] = 1
            for q in range(m):
                a32[ao + q] = a32[t + a[x1 + i + q] + 128] + sign * a32[t + a[x2 + j] + 384]
                j += 1
                if j == bc:
                    j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 20, a, W)
        i += m


add16 = sub = sub16 = add  # (one kernel reads the kind)


# rescale record: 2 XO 3 YO (bytes) 4 N 5 XES 6 YES (bytes per input / output element: 1, 2, 4)
# 7 ZI 8 ZO 9 LO 10 HI 11 ACC (BLOCK int32) 12 BLOCK 13 M1 14 S1 15 M2 16 S2 17 ALT: y =
# clamp(ZO + mbqm(x - ZI, M1, S1)), or for x - ZI < 0 with ALT, +-mbqm(x - ZI, M2, S2): TFLM's
# integer QUANTIZE (requantize), RELU, RELU6 and LEAKY_RELU of int16 values.

def rescale(E, P, k):
    p = rec(P, k)
    W, a32 = E.W, E.a32
    xes, yes = p[5], p[6]
    src = E.a8 if xes == 1 else (E.a16 if xes == 2 else a32)
    dst = E.a8 if yes == 1 else (E.a16 if yes == 2 else a32)
    xo, yo, n, zi = p[2] // xes, p[3] // yes, p[4], p[7]
    ao, block = p[11] // 4, p[12]
    W[2], W[3], W[4], W[5], W[6], W[7] = 1, p[8], p[9], p[10], yes, p[17]
    if yes == 4:
        W[2] = -1  # int32 out: raw, then the zero point and the clamp here
    i = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            a32[ao + q] = wrap32(src[xo + i + q] - zi)
        W[0] = yo + i
        W[1] = m
        requant(a32, ao, p, 13, dst, W)
        if yes == 4:
            for q in range(m):
                v = wrap32(dst[yo + i + q] + p[8])
                dst[yo + i + q] = p[9] if v < p[9] else (p[10] if v > p[10] else v)
        i += m


# mul record: 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 YO 9 N 10 BC 11 BLOCK 12 Z1 13 Z2 14 ACC 15 M 16 S

def mul(E, P, k):
    """y = clamp(ZY + mbqm((x1 - Z1) * (x2 - Z2), m, s)), in blocks."""
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    x1, x2, y, n, bc, block, z1, z2 = p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]
    ao = p[14] // 4
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            a32[ao + q] = (a[x1 + i + q] - z1) * (a[x2 + j] - z2)
            j += 1
            if j == bc:
                j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 15, a, W)
        i += m


# pool record: 2 C 3 ZY 4 LO 5 HI 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW
# (17, 18 unused) 19 PT 20 PL

def maxpool(E, P, k):
    """Max over the in-bounds part of each window, clamped to [LO, HI]."""
    _pool(E, P, k, True)


def avgpool(E, P, k):
    """Mean over the in-bounds part of each window (TFLM: rounded half away from zero,
    same scale in and out), clamped to [LO, HI]."""
    _pool(E, P, k, False)


def _pool(E, P, k, is_max):
    p = rec(P, k)
    a = E.a8
    xo, yo, h, wd, c, oh, ow = p[6], p[7], p[8], p[9], p[10], p[11], p[12]
    kh, kw, sh, sw, pt, pl, lo, hi = p[13], p[14], p[15], p[16], p[19], p[20], p[4], p[5]
    q = yo
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                s = -128 if is_max else 0
                n = 0
                for ky in range(kh):
                    iy = oy * sh - pt + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx
                        if 0 <= ix < wd:
                            v = a[xo + (iy * wd + ix) * c + ch]
                            if is_max:
                                if v > s:
                                    s = v
                            else:
                                s += v
                                n += 1
                if not is_max:
                    if s > 0:
                        s = (s + n // 2) // n
                    else:
                        s = -((-s + n // 2) // n)
                a[q] = lo if s < lo else (hi if s > hi else s)
                q += 1


# mean record: 2 OC (1) 3 ZY 4 LO 5 HI 6 XO 7 YO 8 HW (pixels) 9 ZX 10 C 11 ACC (C int32) 12 M 13 S

def mean(E, P, k):
    """Per channel: clamp(ZY + mbqm(sum(x) - ZX * HW, m, s)) (TFLM's MEAN over H, W)."""
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    xo, hw, zx, c, ao = p[6], p[8], p[9], p[10], p[11] // 4
    for ch in range(c):
        a32[ao + ch] = -zx * hw
    q = xo
    for _ in range(hw):
        for ch in range(c):
            a32[ao + ch] += a[q]
            q += 1
    W[0] = p[7]
    W[1] = c
    requant(a32, ao, p, 12, a, W)


# lut record: 6 XO 7 YO 8 N 9 10 table (256 int8, indexed by x + 128)

def lut(E, P, k):
    p = rec(P, k)
    a = E.a8
    t, t0 = E.s8[p[9]], p[10] + 128
    xo, yo = p[6], p[7]
    for i in range(p[8]):
        a[yo + i] = t[t0 + a[xo + i]]


# softmax record: 6 XO 7 YO 8 N (depth) 9 ROWS 10 11 exps (256 int32): exps[d] = TFLM's
# exp_on_negative_values for the input difference -d in Q0.31 (0 where TFLM skips it), made at
# pack time.

def one_over_one_plus_x(a):
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0.31 in, Q0.31 out)."""
    s = a + 2147483647  # RoundingHalfSum(a, One): (s + sign(s)) / 2, truncated toward zero
    half = (s + 1) // 2 if s >= 0 else -((1 - s) // 2)
    x = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        one_minus = 536870912 - srdhm(half, x)
        x = x + _sat_shl(srdhm(x, one_minus), 2)
    return _sat_shl(x, 1)


def _sat_shl(x, e):
    """SaturatingRoundingMultiplyByPOT<e> for e > 0: x << e, saturated to int32."""
    t = (1 << (31 - e)) - 1
    if x > t:
        return 2147483647
    if x < -t:
        return -2147483648
    return x << e


def _clz32(x):
    n = 0
    while n < 32 and not (x >> (31 - n)) & 1:
        n += 1
    return n


def softmax(E, P, k):
    """TFLM's int8 softmax: output zero point -128, scale 1/256; kind softmax16: an int16
    output, zero point -32768, scale 1/65536."""
    from .check import SOFTMAX16

    p = rec(P, k)
    a = E.a8
    wide = (p[0] & 255) == SOFTMAX16
    o = E.a16 if wide else a
    lo, hi = (-32768, 32767) if wide else (-128, 127)
    exps, e0 = E.s32[p[10]], p[11] // 4
    xo, yo, n = p[6], p[7] // (2 if wide else 1), p[8]
    for _ in range(p[9]):
        top = -128
        for i in range(n):
            v = a[xo + i]
            if v > top:
                top = v
        total = 0
        for i in range(n):
            total += rdbpot(exps[e0 + top - a[xo + i]], 12)
        head_ = _clz32(total)
        bits = 12 - head_
        scale = one_over_one_plus_x(((total << head_) & 0xFFFFFFFF) - 2147483648)
        e = bits + (15 if wide else 23)  # TFLM: 31 - the output's bits
        for i in range(n):
            v = rdbpot(srdhm(scale, exps[e0 + top - a[xo + i]]), e) + lo
            o[yo + i] = lo if v < lo else (hi if v > hi else v)
        xo += n
        yo += n


softmax16 = softmax  # (one kernel reads the kind)


# --- moves (elements of 1, 2 or 4 bytes in the arena) --------------------------------------
# move record: 2 SO 3 DO (bytes) 4 ROWS 5 COLS 6 SS 7 SJ 8 DS 9 DJ (element strides) 10 ES
# (bytes per element: 1, 2 or 4) 11 PLANES 12 PSS 13 PDS (plane strides). fill record: 2 DO 3 N
# 4 V (an int8 or int16 code, or 32 bits) 5 ES.

def move(E, P, k):
    """dst[DO + p * PDS + i * DS + j * DJ] = src[SO + p * PSS + i * SS + j * SJ] for p < PLANES,
    i < ROWS, j < COLS, element by element (ES bytes each): copies, concatenation, padding,
    slices and transposes."""
    p = rec(P, k)
    a = E.view(1)
    so, do, rows, cols, ss, sj, ds, dj, es, planes, pss, pds = p[2:14]
    for q in range(planes):
        for i in range(rows):
            si = so + es * (q * pss + i * ss)
            di = do + es * (q * pds + i * ds)
            for _ in range(cols):
                for b in range(es):
                    a[di + b] = a[si + b]
                si += es * sj
                di += es * dj


def put(s, d, p):
    """dst[DO + i * DS + j * DJ] = src[SO + i * SS + j * SJ]; p = [SO, DO, ROWS, COLS, SS, SJ,
    DS, DJ] (elements): a move between two buffers (an input copied in per call)."""
    so, do, rows, cols, ss, sj, ds, dj = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    for i in range(rows):
        si = so + i * ss
        di = do + i * ds
        for _ in range(cols):
            d[di] = s[si]
            si += sj
            di += dj


def fill(E, P, k):
    """dst[DO + i] = V for i < N, ES bytes each (little-endian): padding."""
    p = rec(P, k)
    a = E.view(1)
    do, n, v, es = p[2], p[3], p[4], p[5]
    for b in range(es):
        c = (v >> (8 * b)) & 255
        if c > 127:
            c -= 256
        for i in range(do + b, do + es * n, es):
            a[i] = c


# --- checks at load (mpy_lazy/check.py) ------------------------------------------------------

def abs_sums(buf, g, out):
    """out[o] = sum |w| over output channel o's filter: int8 weights in buf at byte g[0], OC
    g[1], KH g[2], KW g[3], CPG g[4], strides g[5..8] (WSO, WSY, WSX, WSC), WB g[9]."""
    off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]
    for o in range(oc):
        s = 0
        for ky in range(kh):
            for kx in range(kw):
                wi = off + (o >> wb) * wso + (o & ((1 << wb) - 1)) + ky * wsy + kx * wsx
                for _ in range(cpg):
                    v = int(buf[wi])
                    if v > 127:
                        v -= 256
                    s += v if v >= 0 else -v
                    wi += wsc
        out[o] = s


# --- f16 -------------------------------------------------------------------------------------

def f16_to_f32(src, first, dst, d0, n):
    """dst[d0 + i] = the f16 value src[first + i] (little-endian bytes), i < n."""
    import struct

    i = 0
    while i < n:
        m = n - i if n - i < 32 else 32  # bounded temporary tuples
        vals = struct.unpack_from("<%de" % m, src, 2 * (first + i))
        for j in range(m):
            dst[d0 + i + j] = vals[j]
        i += m

