# Viper kernels of the integer reductions, cumsum, batch matmul, logsoftmax and l2norm (kinds
# 72, 74, 76, 78; the records and their plain-Python versions: ops/reduce.py, cumsum.py, matmul.py,
# normalize.py, whose FAST names this module): imported only for a program that has such a
# record. The same rules as _viper.py (no allocation, no floats, 31-bit literals).
import micropython

from ._viper import _out16, _rdbpot, _srdhm, requant, rq_head


@micropython.viper
def _arg(x: uint, y: uint, d0: int, d1: int, d2: int, mask: int, es: int, big: int):
    # y[o] = the first index along the one masked axis of the largest (big) or smallest x
    out = ptr32(y)
    outer = d0 * d1
    size = d2
    inner = 1
    if mask == 4:
        outer = 1
        size = d0
        inner = d1 * d2
    elif mask == 2:
        outer = d0
        size = d1
        inner = d2
    o = 0
    i = 0
    while i < outer:
        j = 0
        while j < inner:
            q = i * size * inner + j
            if es == 1:
                best = (ptr8(x)[q] ^ 0x80) - 0x80
            else:
                best = (ptr16(x)[q] ^ 0x8000) - 0x8000
            at = 0
            t = 1
            while t < size:
                q += inner
                if es == 1:
                    v = (ptr8(x)[q] ^ 0x80) - 0x80
                else:
                    v = (ptr16(x)[q] ^ 0x8000) - 0x8000
                if big:
                    if v > best:
                        best = v
                        at = t
                elif v < best:
                    best = v
                    at = t
                t += 1
            out[o] = at
            o += 1
            j += 1
        i += 1


@micropython.viper
def reduce(E, P, k: int):
    # ops/reduce.py's reduce record: sum/mean (FN 0) into int32 accumulators then requantized,
    # max/min (1, 2) on the stored codes from the type's extreme, argmax/argmin (3, 4)
    a = ptr8(E.A)
    arena = uint(a)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    fn = int(pp[6])
    es = int(pp[7])
    x = arena + pp[8]
    d0 = int(pp[10])
    d1 = int(pp[11])
    d2 = int(pp[12])
    mask = int(pp[13])
    if fn >= 3:
        _arg(x, arena + pp[9], d0, d1, d2, mask, es, fn == 3)
        return
    e2 = d2
    if mask & 1:
        e2 = 1
    e1 = d1
    if mask & 2:
        e1 = 1
    e0 = d0
    if mask & 4:
        e0 = 1
    s2 = 1
    if mask & 1:
        s2 = 0
    s1 = e2
    if mask & 2:
        s1 = 0
    s0 = e1 * e2
    if mask & 4:
        s0 = 0
    nout = e0 * e1 * e2
    sg = 1
    sg <<= 31
    acc = ptr32(arena + pp[15])
    y8 = ptr8(arena + pp[9])
    y16 = ptr16(arena + pp[9])
    top = 128
    if es == 2:
        top = 32768
    init = 0
    if fn == 1:
        init = 0 - top
    elif fn == 2:
        init = top - 1
    o = 0
    while o < nout:
        if fn == 0:
            acc[o] = 0
        elif es == 1:
            y8[o] = init
        else:
            y16[o] = init
        o += 1
    q = 0
    i0 = 0
    while i0 < d0:
        i1 = 0
        while i1 < d1:
            o = i0 * s0 + i1 * s1
            i2 = 0
            while i2 < d2:
                if es == 1:
                    v = (ptr8(x)[q] ^ 0x80) - 0x80
                else:
                    v = (ptr16(x)[q] ^ 0x8000) - 0x8000
                q += 1
                if fn == 0:
                    acc[o] = int((acc[o] ^ sg) - sg) + v
                else:
                    if es == 1:
                        cur = (y8[o] ^ 0x80) - 0x80
                    else:
                        cur = (y16[o] ^ 0x8000) - 0x8000
                    if (fn == 1 and v > cur) or (fn == 2 and v < cur):
                        if es == 1:
                            y8[o] = v
                        else:
                            y16[o] = v
                o += s2
                i2 += 1
            i1 += 1
        i0 += 1
    if fn:
        return
    z = int((pp[14] ^ sg) - sg) * (d0 * d1 * d2 // nout)
    o = 0
    while o < nout:
        acc[o] = int((acc[o] ^ sg) - sg) - z
        o += 1
    W = E.W
    wk = ptr32(W)
    rq_head(W, rec)
    wk[6] = es
    wk[0] = int(pp[9]) // es
    wk[1] = nout
    requant(arena + pp[15], rec + 64, arena, W)


@micropython.viper
def cumsum(E, P, k: int):
    # ops/cumsum.py's cumsum record: int32 running sums of (x - ZX) << 19 from -ZX << 19,
    # wrapping, into ACC at each element's index, then requantized at once
    a = ptr8(E.A)
    arena = uint(a)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    x = ptr8(arena + pp[6])
    na = int(pp[8])
    nd = int(pp[9])
    nb = int(pp[10])
    flags = int(pp[11])
    sg = 1
    sg <<= 31
    m32 = (sg << 1) - 1
    zx = int((pp[12] ^ sg) - sg)
    acc = ptr32(arena + pp[13])
    i = 0
    while i < na:
        j = 0
        while j < nb:
            s = (((0 - zx) << 19) & m32 ^ sg) - sg
            t = 0
            while t < nd:
                d = t
                if flags & 2:
                    d = nd - 1 - t
                q = (i * nd + d) * nb + j
                v = ((s + ((((x[q] ^ 0x80) - 0x80) - zx) << 19)) & m32 ^ sg) - sg
                if flags & 1:
                    acc[q] = s
                else:
                    acc[q] = v
                s = v
                t += 1
            j += 1
        i += 1
    W = E.W
    wk = ptr32(W)
    rq_head(W, rec)
    wk[0] = pp[7]
    wk[1] = na * nd * nb
    requant(arena + pp[13], rec + 56, arena, W)


@micropython.viper
def bmm(E, P, k: int):
    # ops/matmul.py's bmm record: int8 sums of (l - ZL)(r - ZR) in int32, requantized one row
    # of N at a time through the work array; int16 (zero points 0): each product added to the
    # int64 accumulator's limbs (W[0], W[1]) and finished by _out16 (TFLM's int64 mbqm)
    a = uint(ptr8(E.A))
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    es = int(pp[6])
    xl = a + pp[7]
    xr = a + pp[9]
    if pp[8]:
        xr = uint(ptr8(E.B[pp[10]])) + pp[11]
    yb = a + pp[12]
    nb = int(pp[13])
    m = int(pp[14])
    kk = int(pp[15])
    n = int(pp[16])
    flags = int(pp[17])
    zl = int((pp[18] ^ sg) - sg)
    zr = int((pp[19] ^ sg) - sg)
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    lm = kk
    lk = 1
    if flags & 1:
        lm = 1
        lk = m
    rk = n
    rn = 1
    if flags & 2:
        rk = 1
        rn = kk
    lb = m * kk
    if flags & 4:
        lb = 0
    rb = kk * n
    if flags & 8:
        rb = 0
    W = E.W
    wk = ptr32(W)
    o = 0
    b = 0
    while b < nb:
        i = 0
        while i < m:
            j = 0
            while j < n:
                li = b * lb + i * lm
                ri = b * rb + j * rn
                t = 0
                s = 0
                if es == 1:
                    pl = ptr8(xl)
                    pr = ptr8(xr)
                    while t < kk:
                        s += (((pl[li] ^ 0x80) - 0x80) - zl) * (((pr[ri] ^ 0x80) - 0x80) - zr)
                        li += lk
                        ri += rk
                        t += 1
                    wk[8] = s
                    wk[0] = 0
                    wk[1] = 1
                    wk[2] = 1
                    wk[3] = zy
                    wk[4] = lo
                    wk[5] = hi
                    wk[6] = 1
                    wk[7] = 0
                    requant(uint(wk) + 32, rec + 80, yb + o, W)
                else:
                    pl16 = ptr16(xl)
                    pr16 = ptr16(xr)
                    wk[0] = 0
                    wk[1] = 0
                    while t < kk:
                        s = ((pl16[li] ^ 0x8000) - 0x8000) * ((pr16[ri] ^ 0x8000) - 0x8000)
                        wk[0] = int(wk[0]) + (s & 0xFFFF)  # limbs += s (inline: a call boxes an int >= 2**30)
                        wk[1] = int((wk[1] ^ sg) - sg) + (s >> 16)
                        li += lk
                        ri += rk
                        t += 1
                    wk[3] = pp[20]
                    wk[4] = pp[21]
                    _out16(W, 1, yb + 2 * o, lo, hi, zy)
                o += 1
                j += 1
            i += 1
        b += 1


@micropython.viper
def _inv_sqrt(t):
    # t[3], t[4] = ops/normalize.py's inv_sqrt(t[3]) (TFLM's GetInvSqrtQuantizedMultiplierExp;
    # 0 <= t[3] < 2**31, given in the buffer: an int argument of 2**30 would be boxed)
    pt = ptr32(t)
    s = int(pt[3])
    if s <= 1:
        sg = 1
        sg <<= 31
        pt[3] = sg - 1
        pt[4] = 0
        return
    shift = 11
    top = 1 << 29
    while s >= top:
        s >>= 2
        shift += 1
    bits = 0
    v = s
    while v:
        bits += 1
        v >>= 1
    pairs = (31 - bits) // 2 - 1
    shift -= pairs
    s <<= 2 * pairs
    h = s >> 1
    half = (h >> 1) + (h & 1)  # rdbpot(h, 1), h > 0
    sg = 1
    sg <<= 31
    big = sg - 1
    h3 = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
    x = 1 << 28
    i = 0
    while i < 5:  # (every product through _srdhm on t[0..2]: no int argument or result of 2**30)
        pt[0] = x
        pt[1] = x
        _srdhm(t)
        pt[0] = pt[2]
        pt[1] = x
        _srdhm(t)
        v = int((pt[2] ^ sg) - sg)
        x3 = v << 6  # Rescale<3> of the Q9.22 cube: saturating << 6
        if v > (1 << 25) - 1:
            x3 = big
        elif v < 1 - (1 << 25):
            x3 = 0 - sg
        pt[0] = h3
        pt[1] = x
        _srdhm(t)
        v = int((pt[2] ^ sg) - sg)
        pt[0] = half
        pt[1] = x3
        _srdhm(t)
        v -= int((pt[2] ^ sg) - sg)
        x = v << 3  # Rescale<3> of Q6.25: saturating << 3
        if v > (1 << 28) - 1:
            x = big
        elif v < 1 - (1 << 28):
            x = 0 - sg
        i += 1
    pt[0] = x
    k = 0x5A82
    pt[1] = (k << 16) | 0x799A  # sqrt(2) / 2 in Q0.31 (built at run time: no 31-bit literal holds it)
    _srdhm(t)
    x = int((pt[2] ^ sg) - sg)
    if shift < 0:
        x <<= 0 - shift
        shift = 0
    pt[3] = x
    pt[4] = 0 - shift


@micropython.viper
def _log(t):
    # t[3] = ops/normalize.py's log_x(t[3]) (Q12.19 in, 2**19 <= x < 2**31; Q5.26 out), every
    # product through _srdhm on t[0..2] (no int argument or result: one of 2**30 or more would
    # be boxed on a 32-bit board); the constants >= 2**30 built from 16-bit halves
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    m32 = (sg << 1) - 1
    big = sg - 1
    x = int((pt[3] ^ sg) - sg)
    one30 = 1
    one30 <<= 30  # (constants >= 2**30 are built at run time: no 31-bit small int holds them)
    k = 0x5A82
    half_sqrt = (k << 16) | 0x799A
    k = 0x6BA2
    ssh = (k << 16) | 0x7E65  # sqrt(sqrt(1/2))
    ha = 0
    while not ((x >> (31 - ha)) & 1):
        ha += 1
    v = x << (ha - 1)  # (no saturation: x has ha leading zeros)
    pt[0] = v
    pt[1] = half_sqrt
    _srdhm(t)
    v = int((pt[2] ^ sg) - sg)
    r_a = v << 1
    if v > one30 - 1:
        r_a = big
    za = ((12 - ha) << 25) + (1 << 23)
    pt[0] = x
    pt[1] = half_sqrt
    _srdhm(t)
    zb = int((pt[2] ^ sg) - sg)
    hb = 0
    while not ((zb >> (31 - hb)) & 1):
        hb += 1
    hb -= 1
    r_b = x << hb
    zb = ((12 - hb) << 25) - (1 << 23)
    r = r_a
    if r_b < r:
        r = r_b
    z = za
    if zb > z:
        z = zb
    p = (r >> 1) + (ssh >> 1) + (((r & 1) + (ssh & 1) + 1) >> 1)  # RoundingHalfSum(r, ssh), both > 0
    q = (((2 * (r - ssh)) & m32) ^ sg) - sg
    pt[0] = q
    pt[1] = q
    _srdhm(t)
    sq = int((pt[2] ^ sg) - sg)
    pt[0] = q
    pt[1] = r
    _srdhm(t)
    num = int((pt[2] ^ sg) - sg)
    pt[0] = q
    pt[1] = sq
    _srdhm(t)
    pt[0] = pt[2]
    pt[1] = 117049297
    _srdhm(t)
    num = ((num + int((pt[2] ^ sg) - sg)) & m32 ^ sg) - sg
    pt[0] = 127690142
    pt[1] = sq
    _srdhm(t)
    d = ((1057819769 + q + int((pt[2] ^ sg) - sg)) & m32 ^ sg) - sg
    pt[0] = p
    pt[1] = d
    _srdhm(t)
    den = int((pt[2] ^ sg) - sg)
    pt[0] = 638450708
    pt[1] = q
    _srdhm(t)
    den = ((den + int((pt[2] ^ sg) - sg)) & m32 ^ sg) - sg
    # one_over_one_plus_x_for_x_in_0_1(den)
    half = (den >> 1) + one30
    if den == 0 - sg:
        half = -1
    pt[0] = half
    pt[1] = -1010580540
    _srdhm(t)
    k = 0x5A5A
    y = ((k << 16) | 0x5A5A) + int((pt[2] ^ sg) - sg)
    lim = (1 << 29) - 1
    i = 0
    while i < 3:
        pt[0] = half
        pt[1] = y
        _srdhm(t)
        pt[0] = y
        pt[1] = (1 << 29) - int((pt[2] ^ sg) - sg)
        _srdhm(t)
        v = int((pt[2] ^ sg) - sg)
        if v > lim:
            v = big
        elif v < 0 - lim:
            v = 0 - sg
        else:
            v = v << 2
        y = ((y + v) & m32 ^ sg) - sg
        i += 1
    if y > one30 - 1:
        y = big
    elif y < 1 - one30:
        y = 0 - sg
    else:
        y = y << 1
    pt[2] = num
    _rdbpot(t, 6)
    pt[0] = int((pt[2] ^ sg) - sg)
    pt[1] = y
    _srdhm(t)
    part = int((pt[2] ^ sg) - sg)
    pt[0] = z
    k = 0x58B9
    pt[1] = (k << 16) | 0x0BFC  # log(2)
    _srdhm(t)
    out = ((int((pt[2] ^ sg) - sg) + part) & m32 ^ sg) - sg
    if out > one30 - 1:
        out = big
    elif out < 1 - one30:
        out = 0 - sg
    else:
        out = out << 1
    pt[3] = out


@micropython.viper
def _log_softmax(E, pp):
    # the norm record's FN 0 (int8 logsoftmax; ops/normalize.py)
    a = ptr8(E.A)
    sg = 1
    sg <<= 31
    m32 = (sg << 1) - 1
    p = ptr32(pp)
    tab = ptr32(uint(ptr8(E.B[p[16]])) + p[17])
    x = int(p[7])
    y = int(p[8])
    rows = int(p[9])
    n = int(p[10])
    rsd = int(p[13])
    rs = 0 - int((p[14] ^ sg) - sg)
    dmin = int((p[15] ^ sg) - sg)
    W = E.W
    wk = ptr32(W)
    i = 0
    while i < rows:
        row = x + i * n
        out = y + i * n
        top = -128
        j = 0
        while j < n:
            v = (a[row + j] ^ 0x80) - 0x80
            if v > top:
                top = v
            j += 1
        s = 0
        j = 0
        while j < n:
            s = ((s + int((tab[top - ((a[row + j] ^ 0x80) - 0x80)] ^ sg) - sg)) & m32 ^ sg) - sg
            j += 1
        wk[3] = s
        _log(W)
        log = int((wk[3] ^ sg) - sg)
        wk[0] = log - sg
        wk[1] = rsd
        _srdhm(W)
        _rdbpot(W, rs)
        floor = int((wk[2] ^ sg) - sg)
        if floor < dmin - 1:
            floor = dmin - 1
        j = 0
        while j < n:
            d = ((a[row + j] ^ 0x80) - 0x80) - top
            if d > floor:
                wk[2] = ((int((tab[256 - d] ^ sg) - sg) - log) & m32 ^ sg) - sg
                _rdbpot(W, 22)
                v = int((wk[2] ^ sg) - sg) + 127
                if v > 127:
                    v = 127
                elif v < -128:
                    v = -128
                a[out + j] = v
            else:
                a[out + j] = -128
            j += 1
        i += 1


@micropython.viper
def norm(E, P, k: int):
    # ops/normalize.py's norm record: FN 0, int8 logsoftmax (above); FN 1, int8 l2norm: per row
    # the sum of squares, its inverse square root (W[3], W[4]), then the row's x - ZX (in ACC)
    # requantized by it, shift + 7
    if ptr32(uint(ptr32(P)) + 4 * k)[6] == 0:
        _log_softmax(E, uint(ptr32(P)) + 4 * k)
        return
    a = ptr8(E.A)
    arena = uint(a)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    x = int(pp[7])
    y = int(pp[8])
    rows = int(pp[9])
    n = int(pp[10])
    zx = int((pp[11] ^ sg) - sg)
    accb = arena + pp[12]
    acc = ptr32(accb)
    W = E.W
    wk = ptr32(W)
    i = 0
    while i < rows:
        s = 0
        j = 0
        while j < n:
            d = ((a[x + i * n + j] ^ 0x80) - 0x80) - zx
            acc[j] = d
            s += d * d
            j += 1
        wk[3] = s
        _inv_sqrt(W)
        wk[8] = wk[3]
        wk[9] = int(wk[4]) + 7
        rq_head(W, rec)
        wk[0] = y + i * n
        wk[1] = n
        requant(accb, uint(wk) + 32, arena, W)
        i += 1
