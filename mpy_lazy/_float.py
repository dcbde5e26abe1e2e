# Float kernels in plain Python loops (every port; the 'viper' and 'pure' paths: viper has no
# floats). Same calling convention as the int8 kernels (_pure.py): kernel(E, P, k), the record
# at word k of program P. Values are f32 in the arena, at byte offsets (element offset // 4 of
# E.af); float fields of a record are read through E.pf (the program seen as f32); f32 weights
# through E.sf[slot], f16 weights decoded a filter or a row at a time into the record's scratch
# (kernels.f16). The float kernels box floats (most ports allocate a float object per value):
# float models allocate per inference; int8 models are the boards' fast path.
import math

from . import kernels

FLT_MAX = (2.0 - 2.0 ** -23) * 2.0 ** 127  # (exact in float32; a parsed literal may round to inf)
# the act field: none, relu, relu6, finite -> (lo, hi)
ACTS = (None, (0.0, FLT_MAX), (0.0, 6.0), (-FLT_MAX, FLT_MAX))  # (relu: TFLite's max too)


def _weights(E, p, wi, n_f, first, fs):
    """(indexable, base) of n_f weights from element `first` of the weight tensor at fields
    wi (slot, offset): in place for f32, decoded into the scratch at byte fs for f16."""
    slot, off = p[wi], p[wi + 1]
    if p[4] == 1:
        return E.sf[slot], off // 4 + first
    kernels.f16(E, slot, off // 2 + first, fs, n_f)
    return E.af, fs // 4


# conv / depthwise record (f32): 2 OC 3 ACT 4 WDT (1 f32, 2 f16) 6..26 as the int8 record
# (XO YO bytes) 28 HASB 31 FS (f16: one decoded filter, or the whole tensor when a filter is
# not contiguous) 32 33 weights 34 35 bias

def conv(E, P, k):
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
    if whole:  # f16, a filter not contiguous (depthwise 1hwo): the whole tensor decoded once
        wt, base0 = _weights(E, p, 32, oc * n, 0, p[31])
    for o in range(oc):
        if whole:
            wt, base = wt, base0 + o * wso
        elif p[4] == 2:
            wt, base = _weights(E, p, 32, n, o * wso, p[31])
        else:
            wt, base = _weights(E, p, 32, n, o * wso, 0)
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


depthwise = conv


# dense record (f32): 2 OC 3 ACT 4 WDT 6 XO 7 YO 8 NIN 9 WSO 10 WSI 11 HASB 13 FS (f16: one row)
# 14 15 weights 16 17 bias

def dense(E, P, k):
    p = [P[k + i] for i in range(20)]
    a = E.af
    n_in, n_out, wsi = p[8], p[2], p[10]
    xo, yo = p[6] // 4, p[7] // 4
    lo, hi = ACTS[p[3]] or (None, None)
    bv, b0 = (E.sf[p[16]], p[17] // 4) if p[11] else (None, 0)
    if wsi == 1:  # [out, in]: a dot product per output
        for o in range(n_out):
            wt, base = _weights(E, p, 14, n_in, o * n_in, p[13])
            s = bv[b0 + o] if bv is not None else 0.0
            for i in range(n_in):
                s += wt[base + i] * a[xo + i]
            a[yo + o] = s
    else:  # [in, out]: accumulate one input row at a time
        for o in range(n_out):
            a[yo + o] = bv[b0 + o] if bv is not None else 0.0
        for i in range(n_in):
            xi = a[xo + i]
            wt, base = _weights(E, p, 14, n_out, i * n_out, p[13])
            for o in range(n_out):
                a[yo + o] += wt[base + o] * xi
    if lo is not None or hi is not None:
        for o in range(n_out):
            s = a[yo + o]
            if lo is not None and s < lo:
                a[yo + o] = lo
            elif hi is not None and s > hi:
                a[yo + o] = hi


# transpose conv record (f32, kind ftconv): the int8 tconv record (mpy_lazy/_pure.py) with 3 ACT
# for ZY, f32 weights (OHWI) at 22 23 and bias at 24 25, no requantization. Output pixel (oy, ox)
# gathers the taps that reach it: oy + PT - ky = iy * SH inside the input (and the same for x).

def tconv(E, P, k):
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


# add / mul record (f32): 3 ACT 6 X1 7 X2 8 YO 9 N 10 BC (x2 repeats every BC elements)

def add(E, P, k):
    _binary(E, P, k, 0)


def sub(E, P, k):
    _binary(E, P, k, 1)


def mul(E, P, k):
    _binary(E, P, k, 2)


def _binary(E, P, k, op):
    f = E.af
    ao, bo, yo, n, bc = P[k + 6] // 4, P[k + 7] // 4, P[k + 8] // 4, P[k + 9], P[k + 10]
    lo, hi = ACTS[P[k + 3]] or (None, None)
    j = 0
    for i in range(n):
        v = f[ao + i] + f[bo + j] if op == 0 else (f[ao + i] - f[bo + j] if op == 1 else f[ao + i] * f[bo + j])
        if lo is not None and v < lo:
            v = lo
        if hi is not None and v > hi:
            v = hi
        f[yo + i] = v
        j += 1
        if j == bc:
            j = 0


# pool record (f32): 2 C 3 ACT 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 19 PT 20 PL

def maxpool(E, P, k):
    _pool(E, P, k, True)


def avgpool(E, P, k):
    _pool(E, P, k, False)


def _pool(E, P, k, is_max):
    p = [P[k + i] for i in range(21)]
    a = E.af
    h, w, c, oh, ow, kh, kw, sh, sw, pt, pl = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], p[16], p[19], p[20]
    xo, q = p[6] // 4, p[7] // 4
    lo, hi = ACTS[p[3]] or (None, None)
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                s = None
                cnt = 0
                for ky in range(kh):
                    iy = oy * sh - pt + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx
                        if 0 <= ix < w:
                            v = a[xo + (iy * w + ix) * c + ch]
                            if is_max:
                                if s is None or v > s:
                                    s = v
                            else:
                                s = v if s is None else s + v
                                cnt += 1
                if not is_max:
                    s = s / cnt
                if lo is not None and s < lo:
                    s = lo
                if hi is not None and s > hi:
                    s = hi
                a[q] = s
                q += 1


# mean record (f32): 6 XO 7 YO 8 HW 10 C

def mean(E, P, k):
    a = E.af
    xo, yo, hw, c = P[k + 6] // 4, P[k + 7] // 4, P[k + 8], P[k + 10]
    for ch in range(c):
        s = 0.0
        q = xo + ch
        for _ in range(hw):
            s += a[q]
            q += c
        a[yo + ch] = s / hw


# act record: 2 FN (0 relu, 1 relu6, 2 clip, 3 leakyrelu, 4 sigmoid, 5 tanh, 6 hardswish, 7
# hardsigmoid, 8 gelu, 9 gelu's tanh approximation) 3 XO 4 YO 5 N 6 A 7 B (f32: clip's lo and
# hi, leakyrelu's alpha, hardsigmoid's alpha and beta)

def act(E, P, k):
    a = E.af
    fn, xo, yo, n = P[k + 2], P[k + 3] // 4, P[k + 4] // 4, P[k + 5]
    lo, hi = E.pf[k + 6], E.pf[k + 7]
    for i in range(n):
        v = a[xo + i]
        if fn == 0:
            v = v if v > 0.0 else 0.0
        elif fn == 1:
            v = 0.0 if v < 0.0 else (6.0 if v > 6.0 else v)
        elif fn == 2:
            v = lo if v < lo else (hi if v > hi else v)
        elif fn == 3:
            v = v if v >= 0.0 else v * lo
        elif fn == 4:
            v = 1.0 / (1.0 + math.exp(-v)) if v >= 0.0 else math.exp(v) / (1.0 + math.exp(v))
        elif fn == 5:
            v = math.tanh(v)
        else:  # hardswish, hardsigmoid, gelu: _elem.act (imported by the first such record)
            from ._elem import act

            v = act(fn, v, lo, hi)
        a[yo + i] = v


# softmax record (f32): 2 XO 3 YO 4 N (depth) 5 ROWS 6 BETA (f32)

def softmax(E, P, k):
    a = E.af
    xo, yo, n, rows = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5]
    beta = E.pf[k + 6]
    neg = beta < 0  # then the largest (x - top) * beta is at the smallest x
    for _ in range(rows):
        top = a[xo]
        for i in range(1, n):
            if (a[xo + i] < top) if neg else (a[xo + i] > top):
                top = a[xo + i]
        s = 0.0
        for i in range(n):
            e = math.exp((a[xo + i] - top) * beta)
            a[yo + i] = e
            s += e
        for i in range(n):
            a[yo + i] = a[yo + i] / s
        xo += n
        yo += n


# quantize record: 2 XO (f32) 3 YO (integer) 4 N 5 ZY 6 SCALE (f32) 7 ES (bytes per integer: 1,
# 2, 4); dequantize: 2 XO (integer) 3 YO (f32) 4 N 5 ZX 6 SCALE 7 ES

def quantize(E, P, k):
    from .ops.quant import to_int

    es = P[k + 7]
    f, a = E.af, E.view(es)
    xo, yo, n, z = P[k + 2] // 4, P[k + 3] // es, P[k + 4], P[k + 5]
    s = E.pf[k + 6]
    code = (0, 3, 5, 0, 7)[es]
    for i in range(n):
        a[yo + i] = to_int(f[xo + i], s, z, code)


def dequantize(E, P, k):
    es = P[k + 7]
    f, a = E.af, E.view(es)
    xo, yo, n, z = P[k + 2] // es, P[k + 3] // 4, P[k + 4], P[k + 5]
    s = E.pf[k + 6]
    for i in range(n):
        f[yo + i] = s * (a[xo + i] - z)


# lstm record (f32): 2 T 3 I 4 H 6 XO 7 YO 8 HO 9 CO (f32 H each) 10 FLAGS (1: the state starts
# from zero at every call) 11 CLIP (f32; 0 none) 14 S (scratch: the four gates, 4H f32) 15 16 w
# [4H, I] 17 18 r [4H, H] 19 20 b [4H]. TFLM's float LSTM, each intermediate stored as f32 where
# TFLM stores it: gate = act((w x_t + b) + r h), c = f c + i g (clipped), h = o tanh(c).

def _sigmoid(v):
    if v > 16.619047164916992:  # TFLM's reference Logistic
        return 1.0
    if v < -9.0:
        return math.exp(v)
    return 1.0 / (1.0 + math.exp(-v))


def lstm(E, P, k):
    p = [P[k + i] for i in range(21)]
    a = E.af
    steps, nin, hid = p[2], p[3], p[4]
    xo, yo, ho, co, go = p[6] // 4, p[7] // 4, p[8] // 4, p[9] // 4, p[14] // 4
    clip = E.pf[k + 11]
    w, w0, r, r0, b, b0 = E.sf[p[15]], p[16] // 4, E.sf[p[17]], p[18] // 4, E.sf[p[19]], p[20] // 4
    if p[10] & 1:
        for j in range(hid):
            a[ho + j] = 0.0
            a[co + j] = 0.0
    for step in range(steps):
        x0 = xo + step * nin
        for row in range(4 * hid):
            s = 0.0
            wi = w0 + row * nin
            for i in range(nin):
                s += a[x0 + i] * w[wi + i]
            a[go + row] = s + b[b0 + row]
            s = 0.0
            ri = r0 + row * hid
            for i in range(hid):
                s += a[ho + i] * r[ri + i]
            a[go + row] = a[go + row] + s
            v = a[go + row]
            a[go + row] = math.tanh(v) if 2 * hid <= row < 3 * hid else _sigmoid(v)
        for j in range(hid):
            a[co + j] = a[go + hid + j] * a[co + j]
            a[go + j] = a[go + j] * a[go + 2 * hid + j]
            c = a[co + j] + a[go + j]
            if clip > 0.0:
                c = -clip if c < -clip else (clip if c > clip else c)
            a[co + j] = c
            a[go + 2 * hid + j] = math.tanh(a[co + j])
            a[ho + j] = a[go + 2 * hid + j] * a[go + 3 * hid + j]
            a[yo + step * hid + j] = a[ho + j]
