# The kernels and load checks of the elementwise ops, cast, resize, layernorm and groupnorm
# (record kinds 44..53, docs/FORMAT.md): imported only for a program that has such a record (check.py's
# _elem, kernels.table), so a model without them keeps their heap. Integer kernels in plain
# Python (their viper twins: _viper_elem.py), float kernels (named f...), checks (check_...).
import math

from ._pure import head, rdbpot, rec, requant, srdhm
from .check import FBINARY, FCAST, FRESIZE, INT32_MAX, _clamp, _mq


# --- integer kernels ---------------------------------------------------------------------------

def _tensor(E, slot, es):
    """Slot `slot` as signed integers of es bytes (the pure path makes what it lacks)."""
    if es == 1:
        return E.s8[slot]
    if es == 4:
        return E.s32[slot]
    from .program import _slot_view

    return _slot_view(E.B[slot], "i16")


# minmax record (integers of ES bytes): 2 OP (0 min, 1 max) 3 ES 4 X1 5 Y (bytes) 6 N 7 BC (x2
# repeats every BC elements) 8 SRC (0: x2 in the arena at byte 9; 1: the tensor at 10-11).
# TFLM's MAXIMUM / MINIMUM: the stored codes compared, no requantization.

def minmax(E, P, k):
    p = rec(P, k)
    es = p[3]
    a = E.view(es)
    if p[8]:
        b, j0 = _tensor(E, p[10], es), p[11] // es
    else:
        b, j0 = a, p[9] // es
    x1, y, n, bc, mx = p[4] // es, p[5] // es, p[6], p[7], p[2]
    j = 0
    for i in range(n):
        u, v = a[x1 + i], b[j0 + j]
        a[y + i] = (u if u > v else v) if mx else (u if u < v else v)
        j += 1
        if j == bc:
            j = 0


# cast record (integer to integer): 2 XO 3 YO (bytes) 4 N 5 XES 6 YES (bytes per element): TFLM's
# static_cast, a narrowing keeping the low bits (two's complement wrap).

def cast(E, P, k):
    p = rec(P, k)
    xes, yes = p[5], p[6]
    src, dst = E.view(xes), E.view(yes)
    xo, yo = p[2] // xes, p[3] // yes
    bits = 8 * yes
    for i in range(p[4]):
        v = src[xo + i] & ((1 << bits) - 1)
        dst[yo + i] = v - (1 << bits) if v >> (bits - 1) else v


# div record (int8): 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 Y 9 N 10 BC 11 Z1 12 Z2 13 M 14 S
# 15-16 reciprocals (i32 [256]: t[d] = TFLM's GetReciprocal(d, 31) in Q0.31, made at pack time).
# TFLM's int8 DIV: with a = x1 - Z1, d = x2 - Z2 (signs flipped when d < 0), h = a's redundant
# sign bits and b = d's bits above the first: q = SRDHM(a << h, t[d]), then RDBPOT(SRDHM(q, M),
# h + b - S). TFLM shifts an int32 by 32 or more there for tiny quotients (undefined in C); the
# rounded result, 0, is used instead.

def _bitlen(x):
    """Bits of x >= 0 (0 for 0)."""
    n = 0
    while x:
        n += 1
        x >>= 1
    return n


def div(E, P, k):
    p = rec(P, k)
    a = E.a8
    t, t0 = E.s32[p[15]], p[16] // 4
    zy, lo, hi, x1, x2, y, n, bc, z1, z2, m, s = p[3:15]
    j = 0
    for i in range(n):
        u, v = a[x1 + i] - z1, a[x2 + j] - z2
        if v < 0:
            u, v = -u, -v
        h = 31 - _bitlen(~u if u < 0 else u)  # CountLeadingSignBits (31 for 0)
        e = h + _bitlen(v) - 1 - s
        r = srdhm(srdhm(u << h, t[t0 + v]), m)
        r = rdbpot(r, e) if e < 32 else 0
        r += zy
        a[y + i] = lo if r < lo else (hi if r > hi else r)
        j += 1
        if j == bc:
            j = 0


# resize record: 2 MODE (0 nearest, 1 bilinear) 3 ES 4 XO 5 YO (bytes) 6 H 7 W 8 C 9 OH 10 OW
# 11-12 table (i32, made at pack time: OH entries for the rows then OW for the columns; nearest:
# the source index; bilinear: i0, i1, d with d the weight of i1 in 1/1024). Bilinear is int8
# only (TFLM's ResizeBilinearInteger: the four products summed, rounded half away from zero by
# 2**20, cast to int8); nearest copies elements of any size (f32 too).

def resize(E, P, k):
    p = rec(P, k)
    mode, es = p[2], p[3]
    a = E.view(es)
    t, t0 = E.s32[p[11]], p[12] // 4
    xo, q = p[4] // es, p[5] // es
    w, c, oh, ow = p[7], p[8], p[9], p[10]
    if mode == 0:
        for oy in range(oh):
            row = xo + t[t0 + oy] * w * c
            for ox in range(ow):
                s = row + t[t0 + oh + ox] * c
                for ch in range(c):
                    a[q] = a[s + ch]
                    q += 1
        return
    for oy in range(oh):
        r0, r1, dy = xo + t[t0 + 3 * oy] * w * c, xo + t[t0 + 3 * oy + 1] * w * c, t[t0 + 3 * oy + 2]
        for ox in range(ow):
            b = t0 + 3 * (oh + ox)
            c0, c1, dx = t[b] * c, t[b + 1] * c, t[b + 2]
            w00, w10 = (1024 - dy) * (1024 - dx), dy * (1024 - dx)
            w01, w11 = (1024 - dy) * dx, dy * dx
            for ch in range(c):
                v = a[r0 + c0 + ch] * w00 + a[r1 + c0 + ch] * w10 + a[r0 + c1 + ch] * w01 + a[r1 + c1 + ch] * w11
                v = (v + 524288) >> 20 if v > 0 else -((524288 - v) >> 20)
                v &= 255
                a[q] = v - 256 if v > 127 else v
                q += 1


# prelu record (int8): 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 N 9 BC 10 ZX 11 ZA 12 M 13 S 14-15 alpha
# (i8 [BC], x's channels) 16-17 table (i8 [256]) 18 ACC (BLOCK int32) 19 BLOCK. TFLM's PRELU:
# x >= ZX gives table[x + 128] (its clamp(ZY + mbqm(x - ZX, m1, s1)), made at pack time); x < ZX
# gives clamp(ZY + mbqm((x - ZX)(alpha - ZA), M, S)). The output is written block by block
# before the table fills in the x >= ZX elements: x and y are two buffers.

def prelu(E, P, k):
    p = rec(P, k)
    W, a, a32 = E.W, E.a8, E.a32
    head(W, p)
    al, a0 = E.s8[p[14]], p[15]
    tab, t0 = E.s8[p[16]], p[17] + 128
    x, y, n, bc, zx, za, ao, block = p[6], p[7], p[8], p[9], p[10], p[11], p[18] // 4, p[19]
    i = 0
    j = 0
    while i < n:
        m = n - i if n - i < block else block
        for q in range(m):
            d = a[x + i + q] - zx
            a32[ao + q] = d * (al[a0 + j] - za) if d < 0 else 0
            j += 1
            if j == bc:
                j = 0
        W[0] = y + i
        W[1] = m
        requant(a32, ao, p, 12, a, W)
        for q in range(m):
            v = a[x + i + q]
            if v >= zx:
                a[y + i + q] = tab[t0 + v]
        i += m


# --- float kernels -----------------------------------------------------------------------------

def act(fn, v, a, b):
    """_float.act's functions 6 (TFLM's HARD_SWISH), 7 (hardsigmoid: a, b its alpha and beta),
    8 (gelu) and 9 (gelu's tanh form) of one value."""
    if fn == 6:
        return v * (0.0 if v < -3.0 else (6.0 if v > 3.0 else v + 3.0)) / 6.0
    if fn == 7:
        v = a * v + b
        return 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)
    if fn == 8:
        return 0.5 * v * (1.0 + _erf(v * 0.7071067811865476))
    return 0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


def _erf_series(x):
    """erf(x) for ports whose math module lacks it: Abramowitz and Stegun 7.1.26 (|error| <
    1.5e-7, below float32's resolution of GELU's outputs)."""
    s = 1.0 if x >= 0.0 else -1.0
    x = x * s
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * math.exp(-x * x)
    return s * y


_erf = getattr(math, "erf", None) or _erf_series


# binary record (f32): 2 OP (0 min, 1 max, 2 div, 3 prelu: x if x >= 0 else x * alpha) 3 ACT
# 4 X1 5 Y (bytes) 6 N 7 BC (x2 repeats every BC elements) 8 SRC (0: x2 in the arena at byte 9;
# 1: the f32 tensor at 10-11)

def fbinary(E, P, k):
    from ._float import ACTS

    f = E.af
    op, x1, y, n, bc = P[k + 2], P[k + 4] // 4, P[k + 5] // 4, P[k + 6], P[k + 7]
    if P[k + 8]:
        b, j0 = E.sf[P[k + 10]], P[k + 11] // 4
    else:
        b, j0 = f, P[k + 9] // 4
    lo, hi = ACTS[P[k + 3]] or (None, None)
    j = 0
    for i in range(n):
        u, v = f[x1 + i], b[j0 + j]
        if op == 0:
            u = u if u < v else v
        elif op == 1:
            u = u if u > v else v
        elif op == 2:
            u = _divide(u, v)
        elif u < 0.0:
            u = u * v
        if lo is not None and u < lo:
            u = lo
        if hi is not None and u > hi:
            u = hi
        f[y + i] = u
        j += 1
        if j == bc:
            j = 0


_NAN, _INF = float("nan"), float("inf")


def _divide(u, v):
    """u / v as IEEE division gives it: +-inf for a non-zero u over zero, NaN for 0 / 0."""
    if v == 0.0:
        if u != u or u == 0.0:
            return _NAN
        return _INF * math.copysign(1.0, u) * math.copysign(1.0, v)
    return u / v


# cast record (one side f32): 2 XO 3 YO (bytes) 4 N 5 XT 6 YT (dtype codes: 1 f32, 3 i8, 5 i16,
# 7 i32). TFLM's CAST: an integer becomes the nearest f32; an f32 is truncated toward zero and
# saturated to the integer's range, NaN giving 0 (what the tflite-micro interpreter gives).

_CODE_ES = (0, 4, 0, 1, 0, 2, 0, 4)


def fcast(E, P, k):
    xt, yt = P[k + 5], P[k + 6]
    xes, yes = _CODE_ES[xt], _CODE_ES[yt]
    src = E.af if xt == 1 else E.view(xes)
    dst = E.af if yt == 1 else E.view(yes)
    xo, yo, n = P[k + 2] // xes, P[k + 3] // yes, P[k + 4]
    top = (1 << (8 * yes - 1)) - 1
    for i in range(n):
        v = src[xo + i]
        if yt != 1:
            if v != v:
                v = 0
            elif v >= top:
                v = top
            elif v <= -top - 1:
                v = -top - 1
            else:
                v = int(v)
        dst[yo + i] = v


# resize record (f32, bilinear): as the integer one (_pure.resize), d an f32 (its bits) in the
# table: TFLM's float ResizeBilinear, y = sum of the four neighbours weighted (1 - dy)(1 - dx),
# dy (1 - dx), (1 - dy) dx, dy dx.

def fresize(E, P, k):
    from .program import _slot_view

    a = E.af
    t, tf, t0 = _slot_view(E.B[P[k + 11]], "i32"), E.sf[P[k + 11]], P[k + 12] // 4
    xo, q = P[k + 4] // 4, P[k + 5] // 4
    w, c, oh, ow = P[k + 7], P[k + 8], P[k + 9], P[k + 10]
    for oy in range(oh):
        r0, r1, dy = xo + t[t0 + 3 * oy] * w * c, xo + t[t0 + 3 * oy + 1] * w * c, tf[t0 + 3 * oy + 2]
        for ox in range(ow):
            b = t0 + 3 * (oh + ox)
            c0, c1, dx = t[b] * c, t[b + 1] * c, tf[b + 2]
            for ch in range(c):
                a[q] = a[r0 + c0 + ch] * (1.0 - dy) * (1.0 - dx) + a[r1 + c0 + ch] * dy * (1.0 - dx) + \
                    a[r0 + c1 + ch] * (1.0 - dy) * dx + a[r1 + c1 + ch] * dy * dx
                q += 1


# layernorm record (f32): 2 XO 3 YO (bytes) 4 G (groups) 5 N (elements per group) 6 GS 7 ES
# (element strides: from one group to the next, within a group) 8-9 gamma (f32 [N]) 10 HASB
# 11-12 beta 13 EPS (f32 bits). ONNX's LayerNormalization per group: mean, variance (the mean
# of the squared differences), (x - mean) / sqrt(variance + eps) x gamma + beta; sums in
# element order.

def flayernorm(E, P, k):
    a = E.af
    xo, yo, g, n, gs, es = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5], P[k + 6], P[k + 7]
    gam, g0 = E.sf[P[k + 8]], P[k + 9] // 4
    bet, b0 = (E.sf[P[k + 11]], P[k + 12] // 4) if P[k + 10] else (None, 0)
    eps = E.pf[k + 13]
    for gi in range(g):
        x = xo + gi * gs
        s = 0.0
        for j in range(n):
            s += a[x + j * es]
        mean = s / n
        s = 0.0
        for j in range(n):
            d = a[x + j * es] - mean
            s += d * d
        inv = 1.0 / math.sqrt(s / n + eps)
        y = yo + gi * gs
        for j in range(n):
            v = (a[x + j * es] - mean) * inv * gam[g0 + j]
            if bet is not None:
                v += bet[b0 + j]
            a[y + j * es] = v


# groupnorm record (f32): 2 XO 3 YO (bytes) 4 P (pixels) 5 C (channels) 6 CG (channels per
# group, divides C) 7-8 gamma (f32 [C]) 9-10 beta (f32 [C]) 11 EPS (f32 bits). A P,C value's
# channels in C / CG groups of CG consecutive channels (torch's GroupNorm; CG 1: InstanceNorm),
# each group over all its P x CG elements: mean, variance (the mean of the squared
# differences), (x - mean) / sqrt(variance + eps) x gamma[c] + beta[c]; sums in stored order
# (pixel by pixel, the group's channels within a pixel).

def fgroupnorm(E, P, k):
    a = E.af
    xo, yo, p, c, cg = P[k + 2] // 4, P[k + 3] // 4, P[k + 4], P[k + 5], P[k + 6]
    gam, g0, bet, b0 = E.sf[P[k + 7]], P[k + 8] // 4, E.sf[P[k + 9]], P[k + 10] // 4
    eps = E.pf[k + 11]
    n = p * cg
    for c0 in range(0, c, cg):
        s = 0.0
        for i in range(p):
            x = xo + i * c + c0
            for j in range(cg):
                s += a[x + j]
        mean = s / n
        s = 0.0
        for i in range(p):
            x = xo + i * c + c0
            for j in range(cg):
                d = a[x + j] - mean
                s += d * d
        inv = 1.0 / math.sqrt(s / n + eps)
        for i in range(p):
            x, y = xo + i * c + c0, yo + i * c + c0
            for j in range(cg):
                a[y + j] = (a[x + j] - mean) * inv * gam[g0 + c0 + j] + bet[b0 + c0 + j]


# --- checks at load (mpy_lazy/check.py) --------------------------------------------------------

_ES_DTYPE = {1: "i8", 2: "i16", 4: "i32"}
_TYPE_ES = {1: 4, 3: 1, 5: 2, 7: 4}  # FORMAT.md's dtype codes -> bytes per element


def _es(r, i, field="dtype"):
    es = r[i]
    if es not in (1, 2, 4):
        r.fail(field, "%d bytes per element (1, 2 or 4)" % es)
    return es


def _broadcast(r, i):
    """N at field i, BC at i + 1: x2 repeats every BC elements (BC divides N)."""
    n = r.range(i, "x", 1, 1 << 24)
    bc = r.range(i + 1, "x", 1, n)
    if n % bc:
        r.fail("x", "%d elements do not repeat a %d-element input" % (n, bc))
    return n, bc


def check_minmax(r, E):
    """minmax (integers) and binary (f32: min, max, div, prelu): 2 OP 3 ES|ACT 4 X1 5 Y 6 N 7 BC
    8 SRC (0: x2 in the arena at 9; 1: a tensor at 10-11)."""
    if r.kind == FBINARY:
        r.range(2, "op", 0, 3)
        r.range(3, "act", 0, 3)
        es, dt = 4, "f32"
    else:
        r.range(2, "op", 0, 1)
        es = _es(r, 3)
        dt = _ES_DTYPE[es]
    n, bc = _broadcast(r, 6)
    r.region(4, "x", n * es, es)
    r.region(5, "y", n * es, es)
    if r.range(8, "x", 0, 1):
        r.tensor(10, "t", (dt,), bc * es)
        r.range(9, "x", 0, 0)
    else:
        r.region(9, "x", bc * es, es)
        r.absent(10, "t")


def check_cast(r, E):
    """cast: 2 XO 3 YO 4 N 5 6 the input's and output's bytes per element (integers), or dtype
    codes (fcast: one of them f32)."""
    n = r.range(4, "x", 1, 1 << 24)
    if r.kind == FCAST:
        xt, yt = r[5], r[6]
        if xt not in _TYPE_ES or yt not in _TYPE_ES or 1 not in (xt, yt):
            r.fail("dtype", "dtype codes %d, %d (1 f32, 3 i8, 5 i16, 7 i32; one of them f32)" % (xt, yt))
        xes, yes = _TYPE_ES[xt], _TYPE_ES[yt]
    else:
        xes, yes = _es(r, 5), _es(r, 6)
    r.region(2, "x", n * xes, xes)
    r.region(3, "y", n * yes, yes)


def check_div(r, E):
    """int8 div: 2 OC (1) 3 ZY 4 LO 5 HI 6 X1 7 X2 8 Y 9 N 10 BC 11 Z1 12 Z2 13 M 14 S 15-16
    reciprocals (i32 [256])."""
    _clamp(r)
    r.range(2, "out", 1, 1)
    n, bc = _broadcast(r, 9)
    r.region(6, "x", n)
    r.region(7, "x", bc)
    r.region(8, "y", n)
    r.range(11, "zero_point", -128, 127)
    r.range(12, "zero_point", -128, 127)
    r.range(13, "m", 0, INT32_MAX)
    r.range(14, "m", -31, 22)  # (the per-element right shift then stays >= 0)
    r.tensor(15, "table", ("i32",), 1024)  # (any int32: the fixed point saturates)


def check_resize(r, E):
    """resize: 2 MODE (0 nearest, 1 bilinear) 3 ES 4 XO 5 YO 6 H 7 W 8 C 9 OH 10 OW 11-12 table
    (i32: OH rows then OW columns; nearest: an index each; bilinear: i0, i1, d each)."""
    fl = r.kind == FRESIZE
    mode = r.range(2, "mode", 1 if fl else 0, 1)
    es = _es(r, 3)
    if (fl and es != 4) or (mode and not fl and es != 1):
        r.fail("dtype", "%d bytes per element for this mode" % es)
    h, w, c, oh, ow = r.dims((6, "h"), (7, "w"), (8, "c"), (9, "oh"), (10, "ow"))
    if h * w * c > 1 << 24 or oh * ow * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    r.region(4, "x", h * w * c * es, es)
    r.region(5, "y", oh * ow * c * es, es)
    step = 3 if mode else 1
    r.tensor(11, "table", ("i32",), 4 * step * (oh + ow))
    t = E.words(r[11], r[12], step * (oh + ow))
    from .program import bits_f32

    for i in range(oh + ow):
        top = h if i < oh else w
        for j in range(min(step, 2)):
            if not 0 <= t[step * i + j] < top:
                r.fail("table", "entry %d: index %d outside 0..%d" % (step * i + j, t[step * i + j], top - 1))
        if mode:
            d = t[step * i + 2]
            if fl:
                d = bits_f32(d)
                ok = d - d == 0 and -2.0 <= d <= 2.0
            else:  # every weighted sum of int8 stays within int32: |1024 - d| + |d| < 4096
                ok = -1535 <= d <= 2559
            if not ok:
                r.fail("table", "entry %d: weight %r" % (step * i + 2, d))


def check_prelu(r, E):
    """int8 prelu: 2 OC (1) 3 ZY 4 LO 5 HI 6 X 7 Y 8 N 9 BC 10 ZX 11 ZA 12 M 13 S (x < ZX)
    14-15 alpha (i8 [BC]) 16-17 table (i8 [256], x >= ZX) 18 ACC (BLOCK int32) 19 BLOCK."""
    _clamp(r)
    r.range(2, "out", 1, 1)
    n, bc = _broadcast(r, 8)
    r.region(6, "x", n)
    r.region(7, "y", n)
    r.range(10, "zero_point", -128, 127)
    r.range(11, "zero_point", -128, 127)
    _mq(r, 12, 1, "m")
    r.tensor(14, "alpha", ("i8",), bc)
    r.tensor(16, "table", ("i8",), 256)
    block = r.range(19, "scratch", 1, 1 << 16)
    r.region(18, "scratch", 4 * block, 4)


def check_layernorm(r, E):
    """float layernorm: 2 XO 3 YO 4 G (groups) 5 N (elements per group) 6 GS 7 ES (element
    strides of a group and within it) 8-9 gamma (f32 [N]) 10 HASB 11-12 beta 13 EPS (f32 bits)."""
    g, n = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    gs, es = r.range(6, "x", 0, 1 << 24), r.range(7, "x", 0, 1 << 24)
    if g * n > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    last = (g - 1) * gs + (n - 1) * es + 1
    r.region(2, "x", 4 * last, 4)
    r.region(3, "y", 4 * last, 4)
    r.tensor(8, "weight", ("f32",), 4 * n)
    if r.range(10, "b", 0, 1):
        r.tensor(11, "bias", ("f32",), 4 * n)
    else:
        r.absent(11, "bias")
    _eps(r, 13)


def _eps(r, i):
    from .program import bits_f32

    eps = bits_f32(r[i])
    if not (eps - eps == 0 and eps >= 0):
        r.fail("eps", "%r is not finite and >= 0" % eps)


def check_groupnorm(r, E):
    """float groupnorm: 2 XO 3 YO 4 P (pixels) 5 C (channels) 6 CG (channels per group,
    divides C) 7-8 gamma (f32 [C]) 9-10 beta (f32 [C]) 11 EPS (f32 bits)."""
    p, c = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    cg = r.range(6, "groups", 1, c)
    if c % cg:
        r.fail("groups", "%d channels per group do not divide %d channels" % (cg, c))
    if p * c > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    r.region(2, "x", 4 * p * c, 4)
    r.region(3, "y", 4 * p * c, 4)
    r.tensor(7, "weight", ("f32",), 4 * c)
    r.tensor(9, "bias", ("f32",), 4 * c)
    _eps(r, 11)


CHECK = (check_minmax, check_minmax, check_cast, check_cast, check_div, check_resize, check_resize, check_prelu,
         check_layernorm, check_groupnorm)  # by kind - 44
