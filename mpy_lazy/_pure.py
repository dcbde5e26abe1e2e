# Kernels in plain Python: run on every port and on CPython. The int8 kernels take exactly the
# arguments of their viper twins in _viper.py and give the same integers (TFLite Micro's
# arithmetic: int32 accumulation, fixed-point requantization, saturation to int8).
#
# int8 kernels: kernel(b, p). b is a tuple of buffers (the int8 arena first), p an array('i')
# of parameters written once by the op's prepare step. Every int8 kernel's p starts with the
# requantization header read by requant():
#   0 RQ_Y  first output index of the block (set by the kernel)   3 ZY  output zero point
#   1 RQ_N  elements in the block (set by the kernel)               4 LO  clamp low  (int8)
#   2 OC    channels: element i uses multiplier/shift [i % OC]      5 HI  clamp high (int8)
# The rest of p is the kernel's own (indices below). Activations are NHWC: element (y, x, c) of
# an H x W x C value at offset (y * W + x) * C + c. Weights are addressed through element
# strides (WSO, WSY, WSX, WSC for output channel, kernel row, kernel column, input channel), so
# OHWI (TFLite), OIHW (torch/ONNX) and IO/OI dense layouts run without a transposed copy.
#
# Float kernels work on array('f') arenas (or any indexable of floats) with the same layouts.


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

def requant(acc, mq, dst, p):
    """dst[RQ_Y + i] = clamp(ZY + mbqm(acc[i], m[c], s[c])) for i < RQ_N, c = i % OC; mq holds
    OC multipliers then OC shifts. dst is the int8 arena, or with OC < 0 an array('i') that
    gets the bare mbqm() results (channel count -OC; used for lookup tables)."""
    y, n, oc, zy, lo, hi = p[0], p[1], p[2], p[3], p[4], p[5]
    raw = oc < 0
    if raw:
        oc = -oc
    c = 0
    for i in range(n):
        v = mbqm(acc[i], mq[c], mq[oc + c])
        c += 1
        if c == oc:
            c = 0
        if raw:
            dst[y + i] = v
            continue
        v += zy
        dst[y + i] = lo if v < lo else (hi if v > hi else v)


# conv / depthwise p: 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 17 DH 18 DW
# 19 PT 20 PL 21 WSO 22 WSY 23 WSX 24 WSC 25 CPG (input channels per group; depthwise: 1)
# 26 OPG (output channels per group; depthwise: the multiplier) 27 ZX 28 HASB 29 RP (output
# pixels per requantization: RP <= OW)
# b = (arena, w, bias, mq, acc, col): acc holds RP output pixels (RP * OC int32), col one output
# pixel's window (KH * KW * CPG int32; the viper conv fills it, so each output is a dot).
#
# The input zero point is folded into the bias by the packer (docs/FORMAT.md: bias' = bias -
# ZX * sum(w) over the whole window), so a product is w * x, and a padded position, which adds
# nothing to TFLM's sum of w * (x - ZX), reads ZX.

def conv(b, p):
    """Grouped 2-D convolution, RP output pixels at a time: acc = bias + sum w * x over the
    kernel window (x = ZX at padded positions), then requant()."""
    a, w, bias, mq, acc = b[0], b[1], b[2], b[3], b[4]
    xo, yo, wd, c = p[6], p[7], p[9], p[10]
    h, oh, ow, oc = p[8], p[11], p[12], p[2]
    kh, kw, sh, sw, dh, dw, pt, pl = p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[20]
    wso, wsy, wsx, wsc, cpg, opg, zx, hasb = p[21], p[22], p[23], p[24], p[25], p[26], p[27], p[28]
    kb = p[29] * oc
    for oy in range(oh):
        k = 0
        for ox in range(ow):
            if k == kb:
                p[0] = yo + (oy * ow + ox) * oc - k
                p[1] = k
                requant(acc, mq, a, p)
                k = 0
            y0 = oy * sh - pt
            x0 = ox * sw - pl
            for o in range(oc):
                s = bias[o] if hasb else 0
                ci0 = (o // opg) * cpg
                for ky in range(kh):
                    iy = y0 + ky * dh
                    for kx in range(kw):
                        ix = x0 + kx * dw
                        wi = o * wso + ky * wsy + kx * wsx
                        if iy < 0 or iy >= h or ix < 0 or ix >= wd:
                            for ci in range(cpg):
                                s += w[wi] * zx
                                wi += wsc
                            continue
                        xi = xo + (iy * wd + ix) * c + ci0
                        for ci in range(cpg):
                            s += w[wi] * a[xi + ci]
                            wi += wsc
                acc[k] = s
                k += 1
        p[0] = yo + (oy + 1) * ow * oc - k
        p[1] = k
        requant(acc, mq, a, p)


def depthwise(b, p):
    """Depthwise convolution (CPG 1, OPG = the channel multiplier): conv() with the channel
    loop innermost, as the NHWC layout wants."""
    conv(b, p)


# dense p: 6 XO 7 YO 8 NIN 9 WSO 10 WSI 11 HASB; b = (arena, w, bias, mq, acc, col): col holds
# NIN int32 (the viper dense converts the input into it once). ZX is folded into the bias.

def dense(b, p):
    """Fully connected: acc[o] = bias[o] + sum_i w[o * WSO + i * WSI] * x[i]."""
    a, w, bias, mq, acc = b[0], b[1], b[2], b[3], b[4]
    xo, n, oc, wso, wsi, hasb = p[6], p[8], p[2], p[9], p[10], p[11]
    for o in range(oc):
        s = bias[o] if hasb else 0
        wi = o * wso
        for i in range(n):
            s += w[wi] * a[xo + i]
            wi += wsi
        acc[o] = s
    p[0] = p[7]
    p[1] = oc
    requant(acc, mq, a, p)


# add p: 6 X1 7 X2 8 YO 9 N 10 BC (x2 repeats every BC elements: BC = N, or C for a per-channel
# x2) 11 BLOCK (acc size, >= 256) 12 Z1 13 Z2; b = (arena, t, acc, mq1, mq2, mq): t holds 512
# int32, the rescaled values of every int8 code of x1 then x2 (TFLM's add: mbqm((q - Z) << 20,
# m_i, s_i)), built by the kernel at each call in shared scratch.

def add(b, p):
    """y = clamp(ZY + mbqm(t1[x1] + t2[x2], m, s)), in blocks of BLOCK elements."""
    a, t, acc, mq1, mq2, mq = b
    x1, x2, y, n, bc, block, z1, z2 = p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]
    oc = p[2]
    p[1] = 256
    p[2] = -1  # requant() in raw mode: int32 results into t
    for side in (0, 1):
        z = z1 if side == 0 else z2
        for k in range(256):
            acc[k] = (k - 128 - z) << 20
        p[0] = 256 * side
        requant(acc, mq1 if side == 0 else mq2, t, p)
    p[2] = oc
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for k in range(m):
            acc[k] = t[a[x1 + i + k] + 128] + t[a[x2 + j] + 384]
            j += 1
            if j == bc:
                j = 0
        p[0] = y + i
        p[1] = m
        requant(acc, mq, a, p)
        i += m


# mul p: 6 X1 7 X2 8 YO 9 N 10 BC 11 BLOCK 12 Z1 13 Z2; b = (arena, mq, acc)

def mul(b, p):
    """y = clamp(ZY + mbqm((x1 - Z1) * (x2 - Z2), m, s)), in blocks."""
    a, mq, acc = b
    x1, x2, y, n, bc, block, z1, z2 = p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for k in range(m):
            acc[k] = (a[x1 + i + k] - z1) * (a[x2 + j] - z2)
            j += 1
            if j == bc:
                j = 0
        p[0] = y + i
        p[1] = m
        requant(acc, mq, a, p)
        i += m


# pool p: 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 19 PT 20 PL (17, 18 unused)
# b = (arena,)

def maxpool(b, p):
    """Max over the in-bounds part of each window, clamped to [LO, HI]."""
    a = b[0]
    xo, yo, h, wd, c, oh, ow = p[6], p[7], p[8], p[9], p[10], p[11], p[12]
    kh, kw, sh, sw, pt, pl, lo, hi = p[13], p[14], p[15], p[16], p[19], p[20], p[4], p[5]
    k = yo
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                m = -128
                for ky in range(kh):
                    iy = oy * sh - pt + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx
                        if 0 <= ix < wd:
                            v = a[xo + (iy * wd + ix) * c + ch]
                            if v > m:
                                m = v
                a[k] = lo if m < lo else (hi if m > hi else m)
                k += 1


def avgpool(b, p):
    """Mean over the in-bounds part of each window (TFLM: rounded half away from zero,
    same scale in and out), clamped to [LO, HI]."""
    a = b[0]
    xo, yo, h, wd, c, oh, ow = p[6], p[7], p[8], p[9], p[10], p[11], p[12]
    kh, kw, sh, sw, pt, pl, lo, hi = p[13], p[14], p[15], p[16], p[19], p[20], p[4], p[5]
    k = yo
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                s = 0
                n = 0
                for ky in range(kh):
                    iy = oy * sh - pt + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx
                        if 0 <= ix < wd:
                            s += a[xo + (iy * wd + ix) * c + ch]
                            n += 1
                if s > 0:
                    s = (s + n // 2) // n
                else:
                    s = -((-s + n // 2) // n)
                a[k] = lo if s < lo else (hi if s > hi else s)
                k += 1


# mean p: 6 XO 7 YO 8 HW (pixels) 9 ZX 10 C; b = (arena, mq, acc): acc holds C sums, mq one
# multiplier and shift (OC 1)

def mean(b, p):
    """Per channel: clamp(ZY + mbqm(sum(x) - ZX * HW, m, s)) (TFLM's MEAN over H, W)."""
    a, mq, acc = b
    xo, hw, zx, c = p[6], p[8], p[9], p[10]
    for ch in range(c):
        acc[ch] = -zx * hw
    k = xo
    for _ in range(hw):
        for ch in range(c):
            acc[ch] += a[k]
            k += 1
    p[0] = p[7]
    p[1] = c
    requant(acc, mq, a, p)


# lut p: 6 XO 7 YO 8 N; b = (arena, table): table is 256 int8, indexed by x + 128

def lut(b, p):
    a, t = b
    xo, yo = p[6], p[7]
    for i in range(p[8]):
        a[yo + i] = t[a[xo + i] + 128]


# softmax p: 6 XO 7 YO 8 N (depth) 9 ROWS; b = (arena, exps, t) with exps[d] = TFLM's
# exp_on_negative_values for the input difference -d in Q0.31 (0 where TFLM skips it), made at
# pack time, and t = array('i', 4) of working space.

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


def softmax(b, p):
    """TFLM's int8 softmax: output zero point -128, scale 1/256."""
    a, exps = b[0], b[1]
    xo, yo, n = p[6], p[7], p[8]
    for r in range(p[9]):
        top = -128
        for i in range(n):
            v = a[xo + i]
            if v > top:
                top = v
        total = 0
        for i in range(n):
            total += rdbpot(exps[top - a[xo + i]], 12)
        head = _clz32(total)
        bits = 12 - head
        scale = one_over_one_plus_x(((total << head) & 0xFFFFFFFF) - 2147483648)
        e = bits + 23
        for i in range(n):
            v = rdbpot(srdhm(scale, exps[top - a[xo + i]]), e) - 128
            a[yo + i] = -128 if v < -128 else (127 if v > 127 else v)
        xo += n
        yo += n


# --- f16 -------------------------------------------------------------------------------------

def f16_to_f32(src, first, dst, n):
    """dst[i] = the f16 value src[first + i] (little-endian bytes), i < n."""
    import struct

    i = 0
    while i < n:
        m = n - i if n - i < 32 else 32  # bounded temporary tuples
        vals = struct.unpack_from("<%de" % m, src, 2 * (first + i))
        for j in range(m):
            dst[i + j] = vals[j]
        i += m


# --- moves (any element type: the int8 arena or a float arena) -----------------------------

def move(b, p):
    """dst[DO + i * DS + j * DJ] = src[SO + i * SS + j * SJ] for i < ROWS, j < COLS: copies,
    concatenation, padding and layout transposes. p = [SO, DO, ROWS, COLS, SS, SJ, DS, DJ],
    b = (src, dst)."""
    put(b[0], b[1], p)


def put(s, d, p):
    """move() with the buffers as arguments (no tuple to build)."""
    so, do, rows, cols, ss, sj, ds, dj = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    for i in range(rows):
        si = so + i * ss
        di = do + i * ds
        for _ in range(cols):
            d[di] = s[si]
            si += sj
            di += dj


def fill(b, p):
    """dst[DO + i] = V for i < N; p = [DO, N, V], b = (dst,)."""
    d = b[0]
    do, v = p[0], p[2]
    for i in range(p[1]):
        d[do + i] = v
