# The recurrent ops' viper kernels (LSTM, GRU, SVDF): those of mpy_lazy/ops/lstm.py, gru.py and
# svdf.py (the same records, the same integers) as integer-only native code, allocating nothing;
# _viper.py's rules hold here.
# Imported only by a program that has such a record (kernels.table).
import micropython

from . import _viper
from ._viper import requant


@micropython.viper
def _dots(accb: uint, colb: uint, csum: int, wb: uint, n: int, rows: int, bias: uint):
    # acc[o] = bias[o] + sum_i w[o n + i] col[i], o < rows: int8 weights [rows, n] at wb, the
    # input as int32 in col (csum: -128 x its sum, for the weights read unsigned); bias 0: none
    acc = ptr32(accb)
    pb = ptr32(bias)
    o = 0
    while o < rows:
        s = csum
        if bias:  # (0: none)
            s += int(pb[o])
        pw = ptr8(wb + o * n)
        pc = ptr32(colb)
        i = n >> 3
        while i:
            s += ((pw[0] ^ 0x80) * pc[0] + (pw[1] ^ 0x80) * pc[1]
                  + (pw[2] ^ 0x80) * pc[2] + (pw[3] ^ 0x80) * pc[3]
                  + (pw[4] ^ 0x80) * pc[4] + (pw[5] ^ 0x80) * pc[5]
                  + (pw[6] ^ 0x80) * pc[6] + (pw[7] ^ 0x80) * pc[7])
            pw = ptr8(uint(pw) + 8)
            pc = ptr32(uint(pc) + 32)
            i -= 1
        i = n & 7
        while i:
            s += (pw[0] ^ 0x80) * pc[0]
            pw = ptr8(uint(pw) + 1)
            pc = ptr32(uint(pc) + 4)
            i -= 1
        acc[o] = s  # (the store wraps to int32, as TFLM's sums do)
        o += 1


@micropython.viper
def _asm_dots(t, accb: uint, xb: uint, wb: uint, n: int, rows: int, bias: uint):
    # _dots on the int8 input itself, by _thumb.dots (its parameter array T.Q)
    qo = t.Q
    q = ptr32(qo)
    q[0] = wb
    q[1] = xb
    q[2] = n
    q[3] = rows
    q[4] = n
    q[5] = accb
    q[6] = bias
    t.dots(qo)


@micropython.viper
def _dots16(t, yb: uint, xb: uint, wb: uint, n: int, rows: int, bias: uint, mq: uint):
    # y[o] = TFLM's int64 MultiplyByQuantizedMultiplier(bias[o] + sum_i w[o n + i] x[i]) by
    # mq[o], mq[rows + o], saturated to int16, o < rows: int8 weights [rows, n] at wb, int16 x
    # at xb, int32 biases (0: none), int16 y at yb. The sum in int32 chunks of 256 products
    # (|.| < 2**30) gathered into _viper._out16's limbs (t: the work array W), as dense16's.
    tw = ptr32(t)
    sg = 1
    sg <<= 31
    pb = ptr32(bias)
    m = ptr32(mq)
    x = ptr16(xb)
    o = 0
    while o < rows:
        s32 = 0
        if bias:
            s32 = int((pb[o] ^ sg) - sg)
        tw[0] = s32 & 0xFFFF
        tw[1] = s32 >> 16
        s32 = 0
        pw = ptr8(wb + o * n)
        i = 0
        while i < n:
            s32 += ((pw[i] ^ 0x80) - 0x80) * ((x[i] ^ 0x8000) - 0x8000)
            i += 1
            if (i & 255) == 0:
                tw[0] = int(tw[0]) + (s32 & 0xFFFF)
                tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                s32 = 0
        tw[0] = int(tw[0]) + (s32 & 0xFFFF)
        tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
        tw[3] = m[o]
        tw[4] = m[rows + o]
        _viper._out16(t, 1, yb + 2 * o, -32768, 32767, 0)
        o += 1


@micropython.viper
def lstm(E, P, k: int):
    # see _recurrent.lstm. Per step: x_t and h become int32 columns; the 4H rows of w . x_t and
    # of r . h are dot products (_dots) requantized to int16 by requant() with a multiplier per
    # row; the gates are their saturated sums through TFLM's int16 sigmoid or tanh (the table
    # t, inline); f c and i g go through one requant() (two channels, interleaved), o tanh(c)
    # through one more, into h. Seven calls per step: the step's work is the dot products.
    # lstm16 (int16 x, h, y): the products in int64 by _dots16, straight to int16.
    arena = uint(ptr8(E.A))
    B = E.B
    W = E.W
    wk = ptr32(W)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    wide = (int(pp[0]) & 255) == 125  # LSTM16
    es = 1
    lo = -128
    hi = 127
    if wide:
        es = 2
        lo = -32768
        hi = 32767
    sg = 1
    sg <<= 31
    steps = int(pp[2])
    nin = int(pp[3])
    hid = int(pp[4])
    h4 = 4 * hid
    zh = int((pp[5] ^ sg) - sg)
    xo = int(pp[6])
    yo = int(pp[7])
    hb = arena + pp[8]
    h8 = ptr8(hb)
    h16 = ptr16(hb)
    c16 = ptr16(arena + pp[9])
    qclip = int((pp[11] ^ sg) - sg)
    tm = int(pp[12])
    ts = int(pp[13])
    rnd = 0
    if ts:
        rnd = 1 << (ts - 1)
    colx = arena + pp[14]
    colh = colx + 4 * nin
    accb = colh + 4 * hid
    if wide:  # (no int32 columns: _dots16 reads the int16 values)
        accb = colx
    acc = ptr32(accb)
    gb = accb + 4 * h4  # the four gates, int16
    g16 = ptr16(gb)
    tb = gb + 2 * h4  # the hidden state's products, then f c and i g: int16
    t16 = ptr16(tb)
    wb = uint(ptr8(B[pp[15]])) + pp[16]
    rb = uint(ptr8(B[pp[17]])) + pp[18]
    bb = uint(ptr8(B[pp[19]])) + pp[20]
    mq = uint(ptr8(B[pp[21]])) + pp[22]
    tab = ptr16(uint(ptr8(B[pp[23]])) + pp[24])  # (unsigned loads: the table is uint16)
    if int(pp[10]) & 1:
        j = 0
        while j < hid:
            if wide:
                h16[j] = zh
            else:
                h8[j] = zh
            c16[j] = 0
            j += 1
    cx = ptr32(colx)
    ch = ptr32(colh)
    t = _viper.T  # the 'thumb' path: the dot products in assembler (_thumb.dots)
    step = 0
    while step < steps:
        xb = arena + xo + step * nin * es
        x8 = ptr8(xb)
        csx = 0
        csh = 0
        if wide:
            _dots16(W, gb, xb, wb, nin, h4, bb, mq)
            _dots16(W, tb, hb, rb, hid, h4, 0, mq + 8 * h4)
        elif not t:
            i = 0
            while i < nin:
                v = (x8[i] ^ 0x80) - 0x80
                cx[i] = v
                csx += v
                i += 1
            i = 0
            while i < hid:
                v = (h8[i] ^ 0x80) - 0x80
                ch[i] = v
                csh += v
                i += 1
        # the products, requantized per row to int16 (requant()'s header: W[0..7])
        wk[1] = h4
        wk[2] = h4
        wk[3] = 0
        wk[4] = -32768
        wk[5] = 32767
        wk[6] = 2
        wk[7] = 0
        if not wide:
            if t:
                _asm_dots(t, accb, xb, wb, nin, h4, bb)
            else:
                _dots(accb, colx, 0 - (csx << 7), wb, nin, h4, bb)
            wk[0] = 0
            requant(accb, mq, gb, W)
            if t:
                _asm_dots(t, accb, hb, rb, hid, h4, bb + 4 * h4)
            else:
                _dots(accb, colh, 0 - (csh << 7), rb, hid, h4, bb + 4 * h4)
            wk[0] = 0
            requant(accb, mq + 8 * h4, tb, W)
        q = 0
        while q < h4:
            v = ((g16[q] ^ 0x8000) - 0x8000) + ((t16[q] ^ 0x8000) - 0x8000)
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            v = 3 * v
            u = v
            if u < 0:
                u = 0 - u
            if 2 * hid <= q and q < 3 * hid:  # the cell gate: tanh
                uh = u >> 8
                if uh >= 255:
                    r = 0xFFFF << 8
                else:
                    ua = int(tab[uh])
                    r = (ua << 8) + (u & 0xFF) * (int(tab[uh + 1]) - ua)
                if v >= 0:
                    r = r - 8388480  # - 2**23 + 128
                else:
                    r = 8388735 - r  # 2**23 + 127 - r
                g16[q] = r >> 8
            else:  # sigmoid
                uh = u >> 9
                if uh >= 255:
                    r = 0x7FFF << 10
                else:
                    ua = int(tab[uh])
                    r = (ua << 9) + (u & 0x1FF) * (int(tab[uh + 1]) - ua)
                if v >= 0:
                    r += 512
                else:
                    r = 33554943 - r  # 2**25 + 511 - r
                g16[q] = r >> 10
            q += 1
        # c = sat16(sat16(mbqm(f c)) + sat16(mbqm(i g))), clipped; h = clamp8(zh + mbqm(tanh(c) o))
        j = 0
        while j < hid:
            acc[2 * j] = ((g16[hid + j] ^ 0x8000) - 0x8000) * ((c16[j] ^ 0x8000) - 0x8000)
            acc[2 * j + 1] = ((g16[j] ^ 0x8000) - 0x8000) * ((g16[2 * hid + j] ^ 0x8000) - 0x8000)
            j += 1
        wk[0] = 0
        wk[1] = 2 * hid
        wk[2] = 2  # two channels: f c's and i g's multipliers
        requant(accb, mq + 16 * h4, tb, W)
        j = 0
        while j < hid:
            v = ((t16[2 * j] ^ 0x8000) - 0x8000) + ((t16[2 * j + 1] ^ 0x8000) - 0x8000)
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            if qclip >= 0:
                if v < 0 - qclip:
                    v = 0 - qclip
                elif v > qclip:
                    v = qclip
            c16[j] = v
            v = (v * tm + rnd) >> ts
            u = v
            if u < 0:
                u = 0 - u
            uh = u >> 8
            if uh >= 255:
                r = 0xFFFF << 8
            else:
                ua = int(tab[uh])
                r = (ua << 8) + (u & 0xFF) * (int(tab[uh + 1]) - ua)
            if v >= 0:
                r = r - 8388480
            else:
                r = 8388735 - r
            acc[j] = (r >> 8) * ((g16[3 * hid + j] ^ 0x8000) - 0x8000)
            j += 1
        wk[0] = 0
        wk[1] = hid
        wk[2] = 1
        wk[3] = zh
        wk[4] = lo
        wk[5] = hi
        wk[6] = es
        requant(accb, mq + 16 * h4 + 16, hb, W)
        y8 = ptr8(arena + yo + step * hid * es)
        j = 0
        while j < hid * es:
            y8[j] = h8[j]
            j += 1
        step += 1


lstm16 = lstm  # (one kernel: the kind tells the widths)


@micropython.viper
def svdf(E, P, k: int):
    # see _recurrent.svdf: the feature products requantized raw (requant() with OC < 0), saturated to
    # the state's dtype and stored with ZS (the store wraps, as TFLM's cast); the time products
    # summed per unit and requantized to int8
    arena = uint(ptr8(E.A))
    B = E.B
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    f = int(pp[2])
    nin = int(pp[3])
    mem = int(pp[4])
    units = int(pp[5])
    x8 = ptr8(arena + pp[6])
    sb = arena + pp[8]
    s8 = ptr8(sb)
    s16 = ptr16(sb)
    es = int(pp[9])
    zx = int((pp[10] ^ sg) - sg)
    zs = int((pp[11] ^ sg) - sg)
    accb = arena + pp[17]
    acc = ptr32(accb)
    w8 = ptr8(uint(ptr8(B[pp[18]])) + pp[19])
    tb = uint(ptr8(B[pp[20]])) + pp[21]
    t8 = ptr8(tb)
    t16 = ptr16(tb)
    bias = ptr32(uint(ptr8(B[pp[22]])) + pp[23])
    lo = -128
    hi = 127
    if es == 2:
        lo = -32768
        hi = 32767
    n = f * mem
    i = 0
    if es == 2:  # the state moves one step
        while i < n - 1:
            s16[i] = s16[i + 1]
            i += 1
    else:
        while i < n - 1:
            s8[i] = s8[i + 1]
            i += 1
    colb = accb + 4 * (f + units)  # x - ZX as int32, then dot products as linear's
    col = ptr32(colb)
    csum = 0
    i = 0
    while i < nin:
        v = ((x8[i] ^ 0x80) - 0x80) - zx
        col[i] = v
        csum += v
        i += 1
    _dots(accb, colb, 0 - (csum << 7), uint(w8), nin, f, 0)
    wk[0] = 0
    wk[1] = f
    wk[2] = -1  # raw: mbqm(acc, M1, S1) into acc
    wk[7] = 0
    requant(accb, rec + 52, accb, W)
    o = 0
    while o < f:
        v = int((acc[o] ^ sg) - sg)
        if v < lo:
            v = lo
        elif v > hi:
            v = hi
        v += zs
        q = o * mem + mem - 1
        if es == 2:
            s16[q] = v
        else:
            s8[q] = v
        o += 1
    rank = f // units
    u = 0
    while u < units:
        s = int((bias[u] ^ sg) - sg)
        q = u * rank * mem
        end = q + rank * mem  # the unit's filters, one after the other
        if es == 2:
            while q < end:
                s += ((t16[q] ^ 0x8000) - 0x8000) * (((s16[q] ^ 0x8000) - 0x8000) - zs)
                q += 1
        else:
            while q < end:
                s += ((t8[q] ^ 0x80) - 0x80) * (((s8[q] ^ 0x80) - 0x80) - zs)
                q += 1
        acc[u] = s  # (wraps to int32, as TFLM's sums)
        u += 1
    wk[0] = pp[7]  # requant()'s header: int8 out at YO, one channel, ZY, the int8 range
    wk[1] = units
    wk[2] = 1
    wk[3] = pp[12]
    wk[4] = -128
    wk[5] = 127
    wk[6] = 1
    requant(accb, rec + 60, arena, W)


@micropython.viper
def _sigmoid16(v: int, tab) -> int:
    # TFLM's int16 Logistic of v (3 x a Q3.12 input) by the uint16 table at tab: Q0.15
    t = ptr16(tab)
    u = v
    if u < 0:
        u = 0 - u
    uh = u >> 9
    if uh >= 255:
        r = 0x7FFF << 10
    else:
        ua = int(t[uh])
        r = (ua << 9) + (u & 0x1FF) * (int(t[uh + 1]) - ua)
    if v >= 0:
        r += 512
    else:
        r = 33554943 - r  # 2**25 + 511 - r
    return r >> 10


@micropython.viper
def _tanh16(v: int, tab) -> int:
    # TFLM's int16 Tanh of v (3 x a Q3.12 input) by the same table: Q0.15
    t = ptr16(tab)
    u = v
    if u < 0:
        u = 0 - u
    uh = u >> 8
    if uh >= 255:
        r = 0xFFFF << 8
    else:
        ua = int(t[uh])
        r = (ua << 8) + (u & 0xFF) * (int(t[uh + 1]) - ua)
    if v >= 0:
        r = r - 8388480  # - 2**23 + 128
    else:
        r = 8388735 - r  # 2**23 + 127 - r
    return r >> 8


@micropython.viper
def _half(x: int) -> int:
    # rdbpot(x, 15): x / 2**15 rounded half away from zero (TFLM's RoundingDivideByPOT)
    t = 16383
    if x < 0:
        t = 16384
    q = x >> 15
    if (x & 32767) > t:
        q += 1
    return q


@micropython.viper
def gru(E, P, k: int):
    # see ops/gru.py's gru. Per step: x_t and h (int16) become int32 columns; the 3H rows of
    # w . x_t and of r . h are dot products (_dots) requantized to int16 by requant() with a
    # multiplier per row; the gates and the new h follow per unit; y's row is h requantized
    # to int8 by one more requant().
    arena = uint(ptr8(E.A))
    B = E.B
    W = E.W
    wk = ptr32(W)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    sg = 1
    sg <<= 31
    steps = int(pp[2])
    nin = int(pp[3])
    hid = int(pp[4])
    h3 = 3 * hid
    zy = int((pp[5] ^ sg) - sg)
    xo = int(pp[6])
    yo = int(pp[7])
    h16 = ptr16(arena + pp[8])
    colx = arena + pp[10]
    colh = colx + 4 * nin
    accb = colh + 4 * hid
    acc = ptr32(accb)
    gxb = accb + 4 * h3
    gx = ptr16(gxb)
    ghb = gxb + 2 * h3
    gh = ptr16(ghb)
    wb = uint(ptr8(B[pp[11]])) + pp[12]
    rb = uint(ptr8(B[pp[13]])) + pp[14]
    bb = uint(ptr8(B[pp[15]])) + pp[16]
    mq = uint(ptr8(B[pp[17]])) + pp[18]
    tab = uint(ptr8(B[pp[19]])) + pp[20]  # (unsigned loads: the table is uint16)
    if int(pp[9]) & 1:
        j = 0
        while j < hid:
            h16[j] = 0
            j += 1
    cx = ptr32(colx)
    ch = ptr32(colh)
    step = 0
    while step < steps:
        x8 = ptr8(arena + xo + step * nin)
        csx = 0
        i = 0
        while i < nin:
            v = (x8[i] ^ 0x80) - 0x80
            cx[i] = v
            csx += v
            i += 1
        csh = 0
        i = 0
        while i < hid:
            v = (h16[i] ^ 0x8000) - 0x8000
            ch[i] = v
            csh += v
            i += 1
        # the products, requantized per row to int16 Q3.12 (requant()'s header: W[0..7])
        wk[0] = 0
        wk[1] = h3
        wk[2] = h3
        wk[3] = 0
        wk[4] = -32768
        wk[5] = 32767
        wk[6] = 2
        wk[7] = 0
        _dots(accb, colx, 0 - (csx << 7), wb, nin, h3, bb)
        requant(accb, mq, gxb, W)
        _dots(accb, colh, 0 - (csh << 7), rb, hid, h3, bb + 4 * h3)
        wk[0] = 0
        requant(accb, mq + 8 * h3, ghb, W)
        j = 0
        while j < hid:
            v = ((gx[j] ^ 0x8000) - 0x8000) + ((gh[j] ^ 0x8000) - 0x8000)
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            z = int(_sigmoid16(3 * v, tab))
            v = ((gx[hid + j] ^ 0x8000) - 0x8000) + ((gh[hid + j] ^ 0x8000) - 0x8000)
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            r = int(_sigmoid16(3 * v, tab))
            v = ((gx[2 * hid + j] ^ 0x8000) - 0x8000) + int(_half(r * ((gh[2 * hid + j] ^ 0x8000) - 0x8000)))
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            n = int(_tanh16(3 * v, tab))
            v = n + int(_half(z * (((h16[j] ^ 0x8000) - 0x8000) - n)))
            if v < -32768:
                v = -32768
            elif v > 32767:
                v = 32767
            h16[j] = v
            acc[j] = v
            j += 1
        wk[0] = 0
        wk[1] = hid
        wk[2] = 1
        wk[3] = zy
        wk[4] = -128
        wk[5] = 127
        wk[6] = 1
        requant(accb, mq + 16 * h3, arena + yo + step * hid, W)
        step += 1
