# Viper kernels of the elementwise ops, cast, resize, comparisons, logical ops, select and the
# index ops (kinds 44..51, 65, 67, 68, 80, 81, 120; the records and their plain-Python versions:
# ops/elementwise.py, cast.py, resize.py, compare.py, index.py, whose FAST names this module):
# imported only for a program that has such a record. The
# same rules as _viper.py (no allocation, no floats, 31-bit literals).
import micropython

from . import _viper as V
from ._viper import NO_RO, _rdbpot, _srdhm, rq_flush, rq_head, rq_setup


# --- elementwise ops, cast, resize (kinds 44..51; the records: their rooms) -------------------

@micropython.viper
def minmax(E, P, k: int):
    # y = min or max of x1 and x2 (x2 repeating every BC elements, from the arena or a tensor),
    # the stored codes compared: 1-, 2- or 4-byte integers; 8-byte ones (i64) as compare's
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    mx = int(pp[2])
    es = int(pp[3])
    x1 = a + pp[4]
    y = a + pp[5]
    n = int(pp[6])
    bc = int(pp[7])
    x2 = a + pp[9]
    if pp[8]:
        x2 = uint(ptr8(E.B[pp[10]])) + pp[11]
    sg = 1
    sg <<= 31
    i = 0
    j = 0
    while es == 8 and i < n:  # (the pair of words of x1's or x2's element, whole)
        u = int((ptr32(x1)[2 * i + 1] ^ sg) - sg)
        v = int((ptr32(x2)[2 * j + 1] ^ sg) - sg)
        if u == v:
            u = int(ptr32(x1)[2 * i]) - sg
            v = int(ptr32(x2)[2 * j]) - sg
        w = x1 + 8 * i
        if (v > u) if mx else (v < u):
            w = x2 + 8 * j
        ptr32(y)[2 * i] = ptr32(w)[0]
        ptr32(y)[2 * i + 1] = ptr32(w)[1]
        j += 1
        if j == bc:
            j = 0
        i += 1
    while i < n:
        if es == 1:
            u = (ptr8(x1)[i] ^ 0x80) - 0x80
            v = (ptr8(x2)[j] ^ 0x80) - 0x80
        elif es == 2:
            u = (ptr16(x1)[i] ^ 0x8000) - 0x8000
            v = (ptr16(x2)[j] ^ 0x8000) - 0x8000
        else:
            u = int((ptr32(x1)[i] ^ sg) - sg)
            v = int((ptr32(x2)[j] ^ sg) - sg)
        if mx:
            if v > u:
                u = v
        elif v < u:
            u = v
        if es == 1:
            ptr8(y)[i] = u
        elif es == 2:
            ptr16(y)[i] = u
        else:
            ptr32(y)[i] = u
        j += 1
        if j == bc:
            j = 0
        i += 1


@micropython.viper
def cast(E, P, k: int):
    # integer -> integer: sign-extended, or narrowed keeping the low bits
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    src = a + pp[2]
    dst = a + pp[3]
    n = int(pp[4])
    xes = int(pp[5])
    yes = int(pp[6])
    i = 0
    while i < n:
        if xes == 1:
            v = (ptr8(src)[i] ^ 0x80) - 0x80
        elif xes == 2:
            v = (ptr16(src)[i] ^ 0x8000) - 0x8000
        else:
            v = int(ptr32(src)[i])
        if yes == 1:
            ptr8(dst)[i] = v
        elif yes == 2:
            ptr16(dst)[i] = v
        else:
            ptr32(dst)[i] = v
        i += 1


@micropython.viper
def div(E, P, k: int):
    # TFLM's int8 DIV, one element at a time (see ops/elementwise.py's div)
    a = ptr8(E.A)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    tab = ptr32(uint(ptr8(E.B[pp[15]])) + pp[16])
    t = uint(ptr32(E.W)) + 32  # four words of working state: W[8..11]
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    x1 = int(pp[6])
    x2 = int(pp[7])
    y = int(pp[8])
    n = int(pp[9])
    bc = int(pp[10])
    z1 = int((pp[11] ^ sg) - sg)
    z2 = int((pp[12] ^ sg) - sg)
    m = int(pp[13])
    s = int((pp[14] ^ sg) - sg)
    i = 0
    j = 0
    while i < n:
        u = ((a[x1 + i] ^ 0x80) - 0x80) - z1
        v = ((a[x2 + j] ^ 0x80) - 0x80) - z2
        if v < 0:
            u = 0 - u
            v = 0 - v
        w = u
        if w < 0:
            w = -1 - w
        h = 31  # CountLeadingSignBits(u)
        while w:
            h -= 1
            w >>= 1
        e = h - 1 - s
        w = v
        while w:
            e += 1
            w >>= 1
        pt[0] = u << h
        pt[1] = tab[v]
        _srdhm(t)
        pt[0] = pt[2]
        pt[1] = m
        _srdhm(t)
        r = 0
        if e < 32:
            _rdbpot(t, e)
            r = int((pt[2] ^ sg) - sg)
        r += zy
        if r < lo:
            r = lo
        elif r > hi:
            r = hi
        a[y + i] = r
        j += 1
        if j == bc:
            j = 0
        i += 1


@micropython.viper
def resize(E, P, k: int):
    # nearest: a gather of C elements per output pixel (1, 2 or 4 bytes each); bilinear: TFLM's
    # ResizeBilinearInteger on int8 (see ops/resize.py's resize)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    tab = ptr32(uint(ptr8(E.B[pp[11]])) + pp[12])
    mode = int(pp[2])
    es = int(pp[3])
    xo = a + pp[4]
    yo = a + pp[5]
    w = int(pp[7])
    c = int(pp[8])
    oh = int(pp[9])
    ow = int(pp[10])
    sg = 1
    sg <<= 31
    row = w * c
    q = 0
    oy = 0
    if mode == 0:
        while oy < oh:
            r = int(tab[oy]) * row
            ox = 0
            while ox < ow:
                s = r + int(tab[oh + ox]) * c
                ch = 0
                if es == 1:
                    while ch < c:
                        ptr8(yo)[q] = ptr8(xo)[s + ch]
                        q += 1
                        ch += 1
                elif es == 2:
                    while ch < c:
                        ptr16(yo)[q] = ptr16(xo)[s + ch]
                        q += 1
                        ch += 1
                else:
                    while ch < c:
                        ptr32(yo)[q] = ptr32(xo)[s + ch]
                        q += 1
                        ch += 1
                ox += 1
            oy += 1
        return
    x = ptr8(xo)
    d = ptr8(yo)
    half = 1 << 19
    while oy < oh:
        r0 = int(tab[3 * oy]) * row
        r1 = int(tab[3 * oy + 1]) * row
        dy = int((tab[3 * oy + 2] ^ sg) - sg)
        ox = 0
        while ox < ow:
            b = 3 * (oh + ox)
            c0 = int(tab[b]) * c
            c1 = int(tab[b + 1]) * c
            dx = int((tab[b + 2] ^ sg) - sg)
            w00 = (1024 - dy) * (1024 - dx)
            w10 = dy * (1024 - dx)
            w01 = (1024 - dy) * dx
            w11 = dy * dx
            ch = 0
            while ch < c:
                v = ((x[r0 + c0 + ch] ^ 0x80) - 0x80) * w00 + ((x[r1 + c0 + ch] ^ 0x80) - 0x80) * w10 \
                    + ((x[r0 + c1 + ch] ^ 0x80) - 0x80) * w01 + ((x[r1 + c1 + ch] ^ 0x80) - 0x80) * w11
                if v > 0:
                    v = (v + half) >> 20
                else:
                    v = 0 - ((half - v) >> 20)
                d[q] = v
                q += 1
                ch += 1
            ox += 1
        oy += 1


@micropython.viper
def prelu(E, P, k: int):
    # TFLM's int8 PRELU in blocks: the x < ZX products requantized (requant or the assembler),
    # then the table written over the x >= ZX elements (see ops/elementwise.py's prelu)
    a = ptr8(E.A)
    arena = uint(a)
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    accb = arena + pp[18]
    acc = ptr32(accb)
    mq = rec + 48
    rq_head(W, rec)
    al = ptr8(uint(ptr8(E.B[pp[14]])) + pp[15])
    tb = ptr8(uint(ptr8(E.B[pp[16]])) + pp[17])
    sg = 1
    sg <<= 31
    x = int(pp[6])
    y = int(pp[7])
    n = int(pp[8])
    bc = int(pp[9])
    zx = int((pp[10] ^ sg) - sg)
    za = int((pp[11] ^ sg) - sg)
    block = int(pp[19])
    ro = NO_RO
    if V.T:  # requantization in assembler
        ro = V.T.R
        rq_setup(ro, mq, rec)
    i = 0
    j = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        q = 0
        while q < m:
            dd = ((a[x + i + q] ^ 0x80) - 0x80) - zx
            if dd < 0:
                acc[q] = dd * (((al[j] ^ 0x80) - 0x80) - za)
            else:
                acc[q] = 0
            j += 1
            if j == bc:
                j = 0
            q += 1
        wk[0] = y + i
        wk[1] = m
        rq_flush(ro, accb, mq, arena, W)
        q = 0
        while q < m:
            v = (a[x + i + q] ^ 0x80) - 0x80
            if v >= zx:
                a[y + i + q] = tb[v + 128]
            q += 1
        i += m


@micropython.viper
def prelu16(E, P, k: int):
    # TFLM's 16x8 PRELU element by element (see ops/elementwise.py's prelu16): mbqm through
    # _srdhm and _rdbpot on W[8..10] (no int of 2**30 or more in an argument or a result)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = ptr16(E.A)
    t = uint(ptr32(E.W)) + 32
    pt = ptr32(t)
    al = ptr8(uint(ptr8(E.B[pp[16]])) + pp[17])
    sg = 1
    sg <<= 31
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    x = int(pp[6]) >> 1
    y = int(pp[7]) >> 1
    n = int(pp[8])
    bc = int(pp[9])
    zx = int((pp[10] ^ sg) - sg)
    za = int((pp[11] ^ sg) - sg)
    i = 0
    j = 0
    while i < n:
        d = ((a[x + i] ^ 0x8000) - 0x8000) - zx
        if d >= 0:
            m = int(pp[12])
            s = int((pp[13] ^ sg) - sg)
        else:
            d = d * (((al[j] ^ 0x80) - 0x80) - za)
            m = int(pp[14])
            s = int((pp[15] ^ sg) - sg)
        pt[1] = m
        if s > 0:
            pt[0] = d << s  # (wraps to 32 bits in the store, as TFLM's x * (1 << s))
            _srdhm(t)
        else:
            pt[0] = d
            _srdhm(t)
            _rdbpot(t, 0 - s)
        r = int((pt[2] ^ sg) - sg) + zy
        if r < lo:
            r = lo
        elif r > hi:
            r = hi
        a[y + i] = r
        j += 1
        if j == bc:
            j = 0
        i += 1


# --- index ops: gathernd, update (kinds 80, 81; the records: ops/index.py) -------------------

@micropython.viper
def gathernd(E, P, k: int):
    # slice i = the SLICE elements at sum(index[i ND + j] Cj) of the params (arena or tensor);
    # IndexError outside 0..TOTAL - SLICE, each component first within +-TOTAL / Cj
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    sg = 1
    sg <<= 31
    y = ptr8(a + pp[2])
    ix = ptr32(a + pp[3])
    n = int(pp[4])
    nd = int(pp[5])
    size = int(pp[6]) * int(pp[7])  # bytes per slice
    es = int(pp[7])
    total = int(pp[8])
    if int(pp[14]):
        src = ptr8(uint(ptr8(E.B[pp[15]])) + pp[16])
    else:
        src = ptr8(a + pp[15])
    i = 0
    while i < n:
        at = 0
        j = 0
        while j < nd:
            v = int((ix[i * nd + j] ^ sg) - sg)
            c = int(pp[9 + j])
            top = total // c
            if v > top or v < 0 - top:
                raise IndexError
            at += v * c
            j += 1
        if at < 0 or at > total - int(pp[6]):
            raise IndexError
        s = at * es
        d = i * size
        b = 0
        while b < size:
            y[d + b] = src[s + b]
            b += 1
        i += 1


@micropython.viper
def update(E, P, k: int):
    # y = x, then the update at the starts clamped to 0..Dj - Uj (TFLM's DYNAMIC_UPDATE_SLICE)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    sg = 1
    sg <<= 31
    x = ptr8(a + pp[2])
    u = ptr8(a + pp[3])
    st = ptr32(a + pp[4])
    y = ptr8(a + pp[5])
    es = int(pp[6])
    skip = int(pp[7])
    rank = int(pp[8])
    d1 = int(pp[10])
    d2 = int(pp[11])
    u0 = int(pp[12])
    u1 = int(pp[13])
    row = int(pp[14]) * es
    n = int(pp[9]) * d1 * d2 * es
    b = 0
    while b < n:
        y[b] = x[b]
        b += 1
    s0 = 0
    s1 = 0
    s2 = 0
    j = 3 - rank
    while j < 3:
        v = int((st[skip + j - (3 - rank)] ^ sg) - sg)
        top = int(pp[9 + j]) - int(pp[12 + j])
        if v < 0:
            v = 0
        if v > top:
            v = top
        if j == 0:
            s0 = v
        elif j == 1:
            s1 = v
        else:
            s2 = v
        j += 1
    i = 0
    f = 0
    while i < u0:
        j = 0
        while j < u1:
            d = (((s0 + i) * d1 + s1 + j) * d2 + s2) * es
            b = 0
            while b < row:
                y[d + b] = u[f + b]
                b += 1
            f += row
            j += 1
        i += 1


# --- comparisons, logical ops, select (kinds 65, 67, 68; the records: ops/compare.py) ---------

@micropython.viper
def compare(E, P, k: int):
    # y = x1 OP x2 as 1 or 0 (x1, x2 repeating every BC1, BC2 elements): 1-, 2- or 4-byte
    # integers, or i8 codes compared through the table (i32 [2, 256]); 8-byte ones (i64, no
    # 64-bit ints in viper) as their high words (signed), or when those are equal their low words
    # (unsigned: w - 2^31 orders them as signed words do, on 32- and 64-bit machine words)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    op = int(pp[2])
    es = int(pp[3])
    x1 = a + pp[4]
    x2 = a + pp[5]
    y = ptr8(a + pp[6])
    n = int(pp[7])
    bc1 = int(pp[8])
    bc2 = int(pp[9])
    scaled = int(pp[10])
    tab = ptr32(a)
    if scaled:
        tab = ptr32(uint(ptr8(E.B[pp[11]])) + pp[12])
    sg = 1
    sg <<= 31
    i = 0
    i1 = 0
    i2 = 0
    while i < n:
        if es == 1:
            u = (ptr8(x1)[i1] ^ 0x80) - 0x80
            v = (ptr8(x2)[i2] ^ 0x80) - 0x80
            if scaled:
                u = int((tab[u + 128] ^ sg) - sg)
                v = int((tab[v + 384] ^ sg) - sg)
        elif es == 2:
            u = (ptr16(x1)[i1] ^ 0x8000) - 0x8000
            v = (ptr16(x2)[i2] ^ 0x8000) - 0x8000
        elif es == 8:
            u = int((ptr32(x1)[2 * i1 + 1] ^ sg) - sg)
            v = int((ptr32(x2)[2 * i2 + 1] ^ sg) - sg)
            if u == v:
                u = int(ptr32(x1)[2 * i1]) - sg
                v = int(ptr32(x2)[2 * i2]) - sg
        else:
            u = int((ptr32(x1)[i1] ^ sg) - sg)
            v = int((ptr32(x2)[i2] ^ sg) - sg)
        r = 0
        if op == 0:
            if u == v:
                r = 1
        elif op == 1:
            if u != v:
                r = 1
        elif op == 2:
            if u < v:
                r = 1
        elif op == 3:
            if u <= v:
                r = 1
        elif op == 4:
            if u > v:
                r = 1
        elif u >= v:
            r = 1
        y[i] = r
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0
        i += 1


@micropython.viper
def logical(E, P, k: int):
    # y = x1 and x2, x1 or x2, or not x1 (bytes: non-zero is true) as 1 or 0
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    op = int(pp[2])
    x1 = ptr8(a + pp[3])
    x2 = ptr8(a + pp[4])
    y = ptr8(a + pp[5])
    n = int(pp[6])
    bc1 = int(pp[7])
    bc2 = int(pp[8])
    i = 0
    i1 = 0
    i2 = 0
    while i < n:
        u = 0
        if x1[i1]:
            u = 1
        v = 0
        if x2[i2]:
            v = 1
        if op == 0:
            u = u & v
        elif op == 1:
            u = u | v
        else:
            u = 1 - u
        y[i] = u
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0
        i += 1


@micropython.viper
def select(E, P, k: int):
    # y = x1 where the condition's byte is non-zero, else x2: elements of 1, 2 or 4 bytes
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    es = int(pp[2])
    c = ptr8(a + pp[3])
    x1 = a + pp[4]
    x2 = a + pp[5]
    y = a + pp[6]
    n = int(pp[7])
    bcc = int(pp[8])
    bc1 = int(pp[9])
    bc2 = int(pp[10])
    i = 0
    ic = 0
    i1 = 0
    i2 = 0
    while i < n:
        if es == 1:
            if c[ic]:
                ptr8(y)[i] = ptr8(x1)[i1]
            else:
                ptr8(y)[i] = ptr8(x2)[i2]
        elif es == 2:
            if c[ic]:
                ptr16(y)[i] = ptr16(x1)[i1]
            else:
                ptr16(y)[i] = ptr16(x2)[i2]
        elif c[ic]:
            ptr32(y)[i] = ptr32(x1)[i1]
        else:
            ptr32(y)[i] = ptr32(x2)[i2]
        ic += 1
        if ic == bcc:
            ic = 0
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0
        i += 1


# --- squared difference, int8 add_n (kinds 70, 71; the records: ops/arith.py) ----------------

@micropython.viper
def sqdiff(E, P, k: int):
    # i8 / i16: each operand rescaled (MBQMSmallerThanOneExp), the difference squared and
    # requantized; i32: the wrapped square of the wrapped difference
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    t = uint(ptr32(E.W)) + 32  # four words of working state: W[8..11]
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    es = int(pp[2])
    x1 = a + pp[3]
    x2 = a + pp[4]
    y = a + pp[5]
    n = int(pp[6])
    bc1 = int(pp[7])
    bc2 = int(pp[8])
    zy = int((pp[9] ^ sg) - sg)
    lo = int((pp[10] ^ sg) - sg)
    hi = int((pp[11] ^ sg) - sg)
    z1 = int((pp[12] ^ sg) - sg)
    z2 = int((pp[13] ^ sg) - sg)
    ls = int(pp[14])
    m1 = int(pp[15])
    s1 = int((pp[16] ^ sg) - sg)
    m2 = int(pp[17])
    s2 = int((pp[18] ^ sg) - sg)
    m = int(pp[19])
    s = int((pp[20] ^ sg) - sg)
    i = 0
    i1 = 0
    i2 = 0
    while i < n:
        if es == 4:
            d = int(ptr32(x1)[i1]) - int(ptr32(x2)[i2])
            ptr32(y)[i] = d * d  # (the low 32 bits: C's wrapped int32 arithmetic)
        else:
            if es == 1:
                u = (ptr8(x1)[i1] ^ 0x80) - 0x80
                v = (ptr8(x2)[i2] ^ 0x80) - 0x80
            else:
                u = (ptr16(x1)[i1] ^ 0x8000) - 0x8000
                v = (ptr16(x2)[i2] ^ 0x8000) - 0x8000
            pt[0] = (u - z1) << ls
            pt[1] = m1
            _srdhm(t)
            _rdbpot(t, 0 - s1)
            u = int((pt[2] ^ sg) - sg)
            pt[0] = (v - z2) << ls
            pt[1] = m2
            _srdhm(t)
            _rdbpot(t, 0 - s2)
            d = u - int((pt[2] ^ sg) - sg)
            d = d * d
            pt[1] = m
            if s > 0:
                pt[0] = d << s  # (wraps to 32 bits in the store, as TFLM's x * (1 << s))
                _srdhm(t)
            else:
                pt[0] = d
                _srdhm(t)
                _rdbpot(t, 0 - s)
            r = int((pt[2] ^ sg) - sg) + zy
            if r < lo:
                r = lo
            elif r > hi:
                r = hi
            if es == 1:
                ptr8(y)[i] = r
            else:
                ptr16(y)[i] = r
        i1 += 1
        if i1 == bc1:
            i1 = 0
        i2 += 1
        if i2 == bc2:
            i2 = 0
        i += 1


@micropython.viper
def addn(E, P, k: int):
    # TFLM's int8 AddN: acc = (-Z + sum of (x_j - Z)) << 19, clamp(ZY + MBQMSmallerThanOneExp)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = ptr8(E.A)
    t = uint(ptr32(E.W)) + 32
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    kk = int(pp[2])
    z = int((pp[3] ^ sg) - sg)
    zy = int((pp[4] ^ sg) - sg)
    lo = int((pp[5] ^ sg) - sg)
    hi = int((pp[6] ^ sg) - sg)
    y = int(pp[7])
    n = int(pp[8])
    m = int(pp[9])
    s = int((pp[10] ^ sg) - sg)
    i = 0
    while i < n:
        acc = 0 - z
        j = 0
        while j < kk:
            acc += ((a[int(pp[11 + j]) + i] ^ 0x80) - 0x80) - z
            j += 1
        pt[0] = acc << 19  # (wraps to 32 bits in the store)
        pt[1] = m
        _srdhm(t)
        _rdbpot(t, 0 - s)
        r = int((pt[2] ^ sg) - sg) + zy
        if r < lo:
            r = lo
        elif r > hi:
            r = hi
        a[y + i] = r
        i += 1
