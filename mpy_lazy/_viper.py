# Viper kernels: the fast path of the int8 and int16 record kinds, the reference kernels of their
# rooms (mpy_lazy/ops/<op>.py: same records, same integers) as integer-only native code;
# imports nothing. Imported by mpy_lazy.kernels on MicroPython only (the decorators do not exist
# on CPython). Viper has no floats; an RP2040 has no FPU: this is the boards' fast path.
#
# Portability rules (the same source runs on 32-bit boards and the 64-bit unix port):
#  - ptr8/ptr16/ptr32 loads are zero-extended on 64-bit: an int8 is sign-extended with
#    ((v ^ 0x80) - 0x80), an int32 that may be negative with ((v ^ SG) - SG), SG = 1 << 31.
#  - no literal outside the 31-bit small ints (SG is built at run time), and no int return
#    values (a large one would be boxed on the heap): results go into buffers.
#  - products stay below 2**31 in magnitude: the 64-bit product of mbqm is assembled from 16-bit
#    pieces, so the same bits come out on both word sizes.
# A kernel allocates nothing: calls between viper functions pass buffers, or addresses as small
# ints (RAM and flash addresses are below 2**30 on the boards, and small ints are 63-bit on the
# 64-bit unix port), which box nothing.
#
# kernel(E, P, k): the record at word k of the program P (mpy_lazy/program.py), E the running
# model (its arena E.A, tensor slots E.B, work array E.W). A record may be in flash: kernels
# only read it; what requant() reads and the kernels update (RQ_Y, RQ_N, the header) is in E.W.
#
# T: mpy_lazy._thumb when kernels.use() picked the 'thumb' path (set there): conv, depthwise,
# dense and requant hand their inner loops to its assembler, one call per output pixel or row,
# through its parameter arrays T.Q and T.R (addresses and counts; allocated once).
import micropython

T = None
NO_RO = None  # rq_flush's ro for requant() (a global: viper gives a local None its own type)



@micropython.viper
def run(E, P, K, end: int):
    # program.Program._loop in viper: K[kind](E, P, k) for each record up to word END, the
    # header's and records' words read as machine words (from Python each read of a program in
    # flash makes an int through its typed view); a control record returns where to go on
    p = ptr32(P)
    k = int(p[6])  # H_FIRST
    while k < end:
        j = K[p[k] & 255](E, P, k)
        if j:  # (viper compares no object with None; a record's word index is never 0)
            k = int(j)
        else:
            k += int(p[k + 1])


@micropython.viper
def requant(pa: ptr32, pm: ptr32, d8: ptr8, pp: ptr32):
    # dst[RQ_Y + i] = clamp(ZY + mbqm(acc[i], m[c], s[c])): int8 or int16 (ES = p[6]); ALT
    # (p[7]): negative accumulators use the second multipliers (negated for ALT 2); OC < 0: raw
    # int32 into dst (see _arith.requant). requant(acc, mq, dst, p): the arguments typed, the
    # first three locals, which viper keeps in registers
    sg = 1
    sg <<= 31
    y = int(pp[0])
    n = int(pp[1])
    oc = int((pp[2] ^ sg) - sg)
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    es = int(pp[6])
    alt = int(pp[7])
    lo -= zy
    hi -= zy
    raw = 0
    if oc < 0:
        raw = 1
        oc = -oc
    wide = 0
    if sg > 0:  # 1 << 31 is positive only on 64-bit words
        wide = 1
    one30 = 1
    one30 <<= 30
    m32 = (sg << 1) - 1  # 0xFFFFFFFF: 2**32 - 1 on 64-bit words, all ones (-1) on 32-bit ones
    d16 = ptr16(uint(d8))
    d32 = ptr32(uint(d8))
    byte = es == 1
    c = 0
    m1 = 0  # (ALT: the first set, kept while an output takes the second)
    ls1 = 0
    rs1 = 0
    mask1 = 0
    m2 = 0
    ls2 = 0
    rs2 = 0
    mask2 = 0
    flip = 0
    while c < oc:  # channel by channel: its multipliers, shifts and rounding masks read once
        m = int(pm[c])
        s = int((pm[oc + c] ^ sg) - sg)
        ls = 0  # the left shift, or the right shift's count, mask and half (rounding)
        rs = 0
        if s > 0:
            ls = s
        else:
            rs = 0 - s
        mask = (1 << rs) - 1
        if alt:  # (one output per channel at RP 1: this set-up is paid per output)
            m1 = m
            ls1 = ls
            rs1 = rs
            mask1 = mask
            m2 = int(pm[2 * oc + c])
            s = int((pm[3 * oc + c] ^ sg) - sg)
            ls2 = 0
            rs2 = 0
            if s > 0:
                ls2 = s
            else:
                rs2 = 0 - s
            mask2 = (1 << rs2) - 1
        i = c
        while i < n:
            x = int((pa[i] ^ sg) - sg)
            if alt:  # this output's set: the second for a negative accumulator
                m = m1
                ls = ls1
                rs = rs1
                mask = mask1
                flip = 0
                if x < 0:
                    m = m2
                    ls = ls2
                    rs = rs2
                    mask = mask2
                    if alt == 2:
                        flip = 1
            if ls:
                x = (((x << ls) & m32) ^ sg) - sg  # wraps to int32 on both word sizes (TFLM's C)
            # srdhm(x, m), m >= 0: TFLM's (x m + nudge) / 2**31 truncated, which is
            # floor((x m + 2**30) / 2**31) for either sign of x m
            if wide:  # 64-bit words: the product fits
                r = (x * m + one30) >> 31
            elif -32768 <= x and x < 32768:  # two products, each within 31 bits (m = mh 2**16 + ml)
                r = (x * (m >> 16) + 0x4000 + ((x * (m & 0xFFFF)) >> 16)) >> 15
            else:  # 32-bit words: |x| * m from 16-bit pieces (every partial product < 2**31)
                neg = 0
                if x < 0:
                    neg = 1
                    x = -x  # -(-2**31) wraps to the bit pattern of 2**31 on 32 bits: the fields below are right
                a0 = x & 0xFFFF
                a1 = (x >> 16) & 0xFFFF
                b0 = m & 0xFFFF
                b1 = (m >> 16) & 0xFFFF
                p00 = a0 * b0
                p01 = a0 * b1
                p10 = a1 * b0
                c0 = (p00 & 0xFFFF) + 0xFFFF * neg  # nudge: 2**30 (product >= 0) or 2**30 - 1
                t = ((p00 >> 16) & 0xFFFF) + (p01 & 0xFFFF) + (p10 & 0xFFFF) + 0x4000 - neg + (c0 >> 16)
                u = (t >> 16) + (p01 >> 16) + (p10 >> 16) + a1 * b1
                r = (u << 1) + ((t >> 15) & 1)
                if neg:
                    r = -r
            if rs:  # rounding divide by 2**rs, half away from zero: the remainder against half the
                # divisor, one more when r < 0 (r >> 31: -1 for a negative int32 on either word size)
                rem = r & mask
                th = (mask >> 1) - (r >> 31)
                r = r >> rs
                if rem > th:
                    r += 1
            if flip and r != 0 - sg:  # (C's int32 negation leaves INT32_MIN so)
                r = 0 - r
            if raw:
                d32[y + i] = r
            else:  # clamp before adding zy: r + zy could wrap around on 32-bit words
                if r < lo:
                    r = lo
                elif r > hi:
                    r = hi
                if byte:
                    d8[y + i] = r + zy
                else:
                    d16[y + i] = r + zy
            i += oc
        c += 1


@micropython.viper
def rq_head(W, rec: uint):
    # the record's requantization header (OC, ZY, LO, HI: words 2..5) into the work array, int8
    # output, one set of multipliers
    wk = ptr32(W)
    pp = ptr32(rec)
    wk[2] = pp[2]
    wk[3] = pp[3]
    wk[4] = pp[4]
    wk[5] = pp[5]
    wk[6] = 1
    wk[7] = 0


@micropython.viper
def conv(E, P, k: int):
    # The window of each output pixel gathered once as int32 (COL), then each output channel a
    # dot product with its filter, 8 products per turn (also for a first layer of 1-3 input
    # channels: measured against a loop over the window's inputs with every output channel
    # at once, 2.6x fewer instructions on KWS's 10x4 first layer, callgrind).
    a = ptr8(E.A)
    arena = uint(a)
    B = E.B
    W = E.W
    wk = ptr32(W)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    w = ptr8(uint(ptr8(B[pp[32]])) + pp[33])
    bias = ptr32(uint(ptr8(B[pp[34]])) + pp[35])
    mq = uint(ptr8(B[pp[36]])) + pp[37]
    accb = arena + pp[30]
    acc = ptr32(accb)
    rq_head(W, uint(pp))
    sg = 1
    sg <<= 31
    xo = int(pp[6])
    yo = int(pp[7])
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    oc = int(pp[2])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    dh = int(pp[17])
    dw = int(pp[18])
    pt = int(pp[19])
    pl = int(pp[20])
    wso = int(pp[21])
    wsy = int(pp[22])
    wsx = int(pp[23])
    wsc = int(pp[24])
    cpg = int(pp[25])
    opg = int(pp[26])
    zx = int((pp[27] ^ sg) - sg)  # folded into the bias: it only fills padded positions
    hasb = int(pp[28])
    wb = int(pp[38])  # 3: weights in blocks of 8 output channels (ohwi8), else 0
    wo = 0x80  # a stored byte b is the weight (b ^ 0x80) - WO: 0x80 + WZ (conv_u8's zero point)
    if int(pp[1]) > 39:
        wo += int((pp[39] ^ sg) - sg)
    bm = (1 << wb) - 1
    kb = int(pp[29]) * oc  # accumulators requantized at once: RP pixels'
    ksize = kh * kw * cpg
    col = ptr32(arena + pp[31])  # int32 scratch: one output pixel's window
    wbase = uint(w)
    accbase = uint(acc)
    t = T
    if wo != 0x80:
        t = NO_RO  # (conv_u8: the viper loops)
    # (conv8 loads weights, biases and multipliers as words: a tensor at an unaligned address,
    # possible in a container from another writer, takes the loops below)
    if (t and hasb and wb == 3 and cpg == c and int((wbase | uint(bias) | mq) & 3) == 0
            and kh * (3 if dw == 1 else kw + 2) <= int(t.QSEG)):
        conv8_rows(E, uint(pp), t)  # 8 outputs per pass, requantized in assembler
        return
    gy = wsy >> wb  # the window's int32 column in the weights' order, without the blocks
    gx = wsx >> wb
    gstep = 4 * (wsc >> wb)  # bytes between a tap's channels in COL
    asm = 0
    ro = NO_RO  # T.R when the requantization runs in assembler
    rows = 0
    if t and hasb and wb == 0:  # assembler dot products over a byte window; requant in assembler
        asm = 1
        if wsc == 1 and dw == 1 and cpg == c and kw * c >= 8:
            rows = 1  # a window row is kw * c contiguous bytes, enough to pay for a call
        qo = t.Q
        q = ptr32(qo)
        ro = t.R
        colb = ptr8(arena + pp[31])
        abase = uint(a)
        biasbase = uint(bias)
        rq_setup(ro, mq, uint(pp))
    oy = 0
    while oy < oh:
        kk = 0
        ox = 0
        while ox < ow:
            if kk == kb:
                wk[0] = yo + (oy * ow + ox) * oc - kk
                wk[1] = kk
                rq_flush(ro, accb, mq, arena, W)
                kk = 0
            y0 = oy * sh - pt
            x0 = ox * sw - pl
            # the window of this output pixel as int32 in the weights' order (ZX at padded
            # positions), once for every output channel: then each output is a plain dot
            g = 0
            while g < oc // opg:
                ci0 = g * cpg
                if asm:
                    # x: the input pixel itself when the window is one in-bounds tap of
                    # contiguous channels (a pointwise conv), else the window gathered as bytes
                    if ksize == cpg and wsc == 1 and 0 <= y0 and y0 < h and 0 <= x0 and x0 < wd:
                        q[1] = abase + xo + (y0 * wd + x0) * c + ci0
                    elif rows and 0 <= y0 and y0 + (kh - 1) * dh < h and 0 <= x0 and x0 + kw <= wd:
                        # an inner pixel: one dot product per window row, read in place (no
                        # gathering), each row adding to the sums the one before left in ACC
                        o = g * opg
                        ky = 0
                        while ky < kh:
                            q[0] = wbase + o * wso + ky * wsy
                            q[1] = abase + xo + ((y0 + ky * dh) * wd + x0) * c
                            q[2] = kw * c
                            q[3] = opg
                            q[4] = wso
                            q[5] = accbase + 4 * (kk + o)
                            if ky:
                                q[6] = accbase + 4 * (kk + o)
                            else:
                                q[6] = biasbase + 4 * o
                            t.dots(qo)
                            ky += 1
                        g += 1
                        continue
                    else:
                        ky = 0
                        while ky < kh:
                            iy = y0 + ky * dh
                            kx = 0
                            while kx < kw:
                                ix = x0 + kx * dw
                                ci_ = ky * wsy + kx * wsx
                                end = ci_ + cpg * wsc
                                if 0 <= iy and iy < h and 0 <= ix and ix < wd:
                                    xi = xo + (iy * wd + ix) * c + ci0
                                    while ci_ < end:
                                        colb[ci_] = a[xi]
                                        ci_ += wsc
                                        xi += 1
                                else:
                                    while ci_ < end:
                                        colb[ci_] = zx
                                        ci_ += wsc
                                kx += 1
                            ky += 1
                        q[1] = uint(colb)
                    o = g * opg
                    q[0] = wbase + o * wso
                    q[2] = ksize
                    q[3] = opg
                    q[4] = wso
                    q[5] = accbase + 4 * (kk + o)
                    q[6] = biasbase + 4 * o
                    t.dots(qo)
                    g += 1
                    continue
                csum = 0  # w * c = (w ^ 0x80) * c - WO * c: the weights' sign costs one sum
                ky = 0
                while ky < kh:
                    iy = y0 + ky * dh
                    kx = 0
                    while kx < kw:
                        ix = x0 + kx * dw
                        pc = ptr32(uint(col) + 4 * (ky * gy + kx * gx))  # (bumped pointers)
                        j = cpg
                        if 0 <= iy and iy < h and 0 <= ix and ix < wd:
                            px = ptr8(uint(a) + xo + (iy * wd + ix) * c + ci0)
                            while j:
                                v = (px[0] ^ 0x80) - 0x80
                                pc[0] = v
                                csum += v
                                px = ptr8(uint(px) + 1)
                                pc = ptr32(uint(pc) + gstep)
                                j -= 1
                        else:
                            while j:
                                pc[0] = zx
                                pc = ptr32(uint(pc) + gstep)
                                j -= 1
                            csum += zx * cpg
                        kx += 1
                    ky += 1
                o = g * opg
                oend = o + opg
                while o < oend:
                    if hasb:
                        acc[kk + o] = bias[o]
                    else:
                        acc[kk + o] = 0
                    o += 1
                o = g * opg
                wk[12] = opg
                wk[13] = ksize
                wk[14] = wso
                wk[15] = wb
                wk[16] = int(accbase + 4 * (kk + o) - uint(col))
                wk[17] = 0 - csum * wo
                dots(wbase + (o >> wb) * wso, col, 0, W)
                g += 1
            kk += oc
            ox += 1
        wk[0] = yo + (oy + 1) * ow * oc - kk
        wk[1] = kk
        rq_flush(ro, accb, mq, arena, W)
        oy += 1



@micropython.viper
def dots(pw: ptr8, pc: ptr32, j: int, W):
    # conv's and dense's dot products: for o < N (W[12]), the accumulator at byte pc + W[16]
    # + 4 o gets W[17] + sum over i < KSIZE (W[13]) of (w ^ 0x80) pc[i], w output o's weight i:
    # its filter at pw + (o >> WB) WSO + (o & 7 if WB) (W[14], W[15]), byte i at i or (WB 3,
    # ohwi8 / oi8) 8 i. (pw, pc and j come first: viper keeps a function's first three locals
    # in registers, the rest in its stack frame: 20% fewer instructions per MAC on x64.)
    wk = ptr32(W)
    sg = 1
    sg <<= 31
    n = int(wk[12])
    ksize = int(wk[13])
    wso = int(wk[14])
    wb = int(wk[15])
    bm = (1 << wb) - 1
    pa = ptr32(uint(pc) + ((wk[16] ^ sg) - sg))
    csum = int(wk[17])
    wbase = uint(pw)
    col = uint(pc)
    o = 0
    while o < n:
        s = int(pa[o]) + csum
        pc = ptr32(col)  # pointers bumped, loads at constant offsets: half the instructions of indexed loads
        pw = ptr8(wbase + (o >> wb) * wso + (o & bm))
        if wb:  # blocked weights: this output's every 8th byte
            j = ksize >> 3
            while j:
                s += ((pw[0] ^ 0x80) * pc[0] + (pw[8] ^ 0x80) * pc[1]
                      + (pw[16] ^ 0x80) * pc[2] + (pw[24] ^ 0x80) * pc[3]
                      + (pw[32] ^ 0x80) * pc[4] + (pw[40] ^ 0x80) * pc[5]
                      + (pw[48] ^ 0x80) * pc[6] + (pw[56] ^ 0x80) * pc[7])
                pw = ptr8(uint(pw) + 64)
                pc = ptr32(uint(pc) + 32)
                j -= 1
            j = ksize & 7
            while j:
                s += (pw[0] ^ 0x80) * pc[0]
                pw = ptr8(uint(pw) + 8)
                pc = ptr32(uint(pc) + 4)
                j -= 1
        else:
            j = ksize >> 3
            while j:
                s += ((pw[0] ^ 0x80) * pc[0] + (pw[1] ^ 0x80) * pc[1]
                      + (pw[2] ^ 0x80) * pc[2] + (pw[3] ^ 0x80) * pc[3]
                      + (pw[4] ^ 0x80) * pc[4] + (pw[5] ^ 0x80) * pc[5]
                      + (pw[6] ^ 0x80) * pc[6] + (pw[7] ^ 0x80) * pc[7])
                pw = ptr8(uint(pw) + 8)
                pc = ptr32(uint(pc) + 32)
                j -= 1
            j = ksize & 7
            while j:
                s += (pw[0] ^ 0x80) * pc[0]
                pw = ptr8(uint(pw) + 1)
                pc = ptr32(uint(pc) + 4)
                j -= 1
        pa[o] = s
        o += 1


conv_u8 = conv  # (WO: the record's 40th word)


@micropython.viper
def rq8_setup(qo, rec: uint, mq: uint):
    # T.Q's requantization part for conv8: MQ, 4 OC, ZY, LO - ZY, HI - ZY, from the record's
    # header (words 2..5 at address rec) and the multipliers at address mq
    q = ptr32(qo)
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    zy = int((pp[3] ^ sg) - sg)
    q[8] = mq
    q[9] = 4 * int(pp[2])
    q[10] = zy
    q[11] = int((pp[4] ^ sg) - sg) - zy
    q[12] = int((pp[5] ^ sg) - sg) - zy


@micropython.viper
def conv8_rows(E, rec: uint, t):
    # conv2d with ohwi8 weights (groups 1) on the assembler's conv8: per output row, the run of
    # pixels whose taps are all inside horizontally in one call (a segment per kernel row, read
    # in place, stepping SW pixels), then each border pixel in a call of its own (its padded
    # taps read a row of zero points: COL's first KW * C bytes)
    a = uint(ptr8(E.A))
    B = E.B
    pp = ptr32(rec)
    qo = t.Q
    q = ptr32(qo)
    xo = a + pp[6]
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    oc = int(pp[2])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    dh = int(pp[17])
    dw = int(pp[18])
    pt = int(pp[19])
    pl = int(pp[20])
    zrow = a + pp[31]
    z = ptr8(zrow)
    zx = int(pp[27])
    i = 0
    while i < kw * c:
        z[i] = zx
        i += 1
    rq8_setup(qo, rec, uint(ptr8(B[pp[36]])) + pp[37])
    q[4] = oc
    q[5] = oc >> 3
    q[6] = uint(ptr8(B[pp[32]])) + pp[33]
    q[7] = uint(ptr8(B[pp[34]])) + pp[35]
    yb = a + pp[7]
    row = wd * c
    lo = (pl + sw - 1) // sw  # the interior columns: lo <= ox < hi
    if lo > ow:
        lo = ow
    hi = 0
    top = wd - 1 - (kw - 1) * dw + pl
    if top >= 0:
        hi = top // sw + 1
    if hi > ow:
        hi = ow
    if hi < lo:
        hi = lo
    oy = 0
    while oy < oh:
        y0 = oy * sh - pt
        ox = 0
        while ox < ow:
            x0 = ox * sw - pl
            npix = 1
            if ox == lo and hi > lo:
                npix = hi - lo
            n = 13  # the next segment's word in Q
            ky = 0
            while ky < kh:
                iy = y0 + ky * dh
                if iy < 0 or iy >= h:
                    q[n] = zrow
                    q[n + 1] = kw * c
                    q[n + 2] = 0
                    n += 3
                else:
                    nl = 0  # taps left of the input, then inside, then right of it
                    if x0 < 0:
                        nl = (dw - 1 - x0) // dw
                        if nl > kw:
                            nl = kw
                    nr = 0
                    if x0 + (kw - 1) * dw >= wd:
                        nr = kw - (wd - x0 + dw - 1) // dw
                        if nr > kw - nl:
                            nr = kw - nl
                    if nl:
                        q[n] = zrow
                        q[n + 1] = nl * c
                        q[n + 2] = 0
                        n += 3
                    kx = nl
                    while kx < kw - nr:
                        q[n] = xo + iy * row + (x0 + kx * dw) * c
                        q[n + 2] = sw * c
                        if dw == 1:
                            q[n + 1] = (kw - nr - nl) * c
                            kx = kw - nr
                        else:
                            q[n + 1] = c
                            kx += 1
                        n += 3
                    if nr:
                        q[n] = zrow
                        q[n + 1] = nr * c
                        q[n + 2] = 0
                        n += 3
                ky += 1
            q[0] = (n - 13) // 3
            q[1] = npix
            q[3] = yb + (oy * ow + ox) * oc
            t.conv8(qo)
            ox += npix
        oy += 1


@micropython.viper
def dw4_rows(E, rec: uint, t):
    # depthwise (1hwo weights, multiplier 1, C a multiple of 4) on the assembler's dw4: one call
    # per output row, its border pixels included: each tap gives the output columns where it
    # lies inside the input (set once per layer, from its kx), outside which dw4 reads C bytes
    # of zero points (COL); a tap in a padded row reads them for every column
    a = uint(ptr8(E.A))
    B = E.B
    pp = ptr32(rec)
    qo = t.Q
    q = ptr32(qo)
    xo = a + pp[6]
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    dh = int(pp[17])
    dw = int(pp[18])
    pt = int(pp[19])
    pl = int(pp[20])
    zrow = a + pp[31]
    z = ptr8(zrow)
    zx = int(pp[27])
    i = 0
    while i < c:
        z[i] = zx
        i += 1
    rq8_setup(qo, rec, uint(ptr8(B[pp[36]])) + pp[37])
    q[0] = kh * kw
    q[1] = ow
    q[2] = zrow
    q[4] = c
    q[5] = c >> 2
    q[6] = uint(ptr8(B[pp[32]])) + pp[33]
    q[7] = uint(ptr8(B[pp[34]])) + pp[35]
    yb = a + pp[7]
    row = wd * c
    step = sw * c
    kx = 0
    while kx < kw:  # the columns lo <= ox < hi where input column ox sw - pl + kx dw is inside
        off = pl - kx * dw
        lo = 0
        if off > 0:
            lo = (off + sw - 1) // sw
        hi = 0
        if wd - 1 + off >= 0:
            hi = (wd - 1 + off) // sw + 1
        if lo > ow:
            lo = ow
        if hi > ow:
            hi = ow
        if hi < lo:
            hi = lo
        n = 13 + 4 * kx
        ky = 0
        while ky < kh:
            q[n + 2] = lo
            q[n + 3] = hi
            n += 4 * kw
            ky += 1
        kx += 1
    oy = 0
    while oy < oh:
        y0 = oy * sh - pt
        n = 13
        ky = 0
        while ky < kh:
            iy = y0 + ky * dh
            p = zrow
            s = 0
            d = 0
            if 0 <= iy and iy < h:
                p = xo + iy * row - pl * c
                s = step
                d = dw * c
            kx = 0
            while kx < kw:
                q[n] = p + kx * d
                q[n + 1] = s
                n += 4
                kx += 1
            ky += 1
        q[3] = yb + oy * ow * c
        t.dw4(qo)
        oy += 1


@micropython.viper
def rq_setup(ro, mq: uint, rec: uint):
    # T.R's fixed part for requant in assembler: OC, MQ, ZY, LO - ZY, HI - ZY (see _thumb), from
    # the record's header (words 2..5 at address rec) and the multipliers at address mq
    r = ptr32(ro)
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    zy = int((pp[3] ^ sg) - sg)
    r[2] = pp[2]
    r[3] = mq
    r[5] = zy
    r[6] = int((pp[4] ^ sg) - sg) - zy
    r[7] = int((pp[5] ^ sg) - sg) - zy


@micropython.viper
def rq_row(ro, accb: uint, arena: uint, y: int, n: int):
    # T.R's per-call part: ACC, N, OUT (addresses) and the channel counter
    r = ptr32(ro)
    r[0] = accb
    r[1] = n
    r[4] = arena + y
    r[8] = 0


@micropython.viper
def rq_flush(ro, accb: uint, mq: uint, arena: uint, W):
    # the accumulators (at address accb) requantized into the arena at W[0] (W[1] of them): in
    # assembler when ro is T.R (set up by rq_setup), else requant()
    if ro:
        wk = ptr32(W)
        rq_row(ro, accb, arena, int(wk[0]), int(wk[1]))
        T.requant(ro)
    else:
        requant(accb, mq, arena, W)


@micropython.viper
def depthwise(E, P, k: int):
    # NHWC: for each output pixel and kernel tap, one pass over the channels, contiguous in
    # the input and (1hwo layout) in the weights, summing into the row of accumulators.
    # Sums wrap mod 2**32 in the stores, which is exact: requant() reads them signed.
    a = ptr8(E.A)
    arena = uint(a)
    B = E.B
    W = E.W
    wk = ptr32(W)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    w = ptr8(uint(ptr8(B[pp[32]])) + pp[33])
    bias = ptr32(uint(ptr8(B[pp[34]])) + pp[35])
    mq = uint(ptr8(B[pp[36]])) + pp[37]
    accb = arena + pp[30]
    acc = ptr32(accb)
    rq_head(W, uint(pp))
    sg = 1
    sg <<= 31
    xo = int(pp[6])
    yo = int(pp[7])
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    oc = int(pp[2])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    dh = int(pp[17])
    dw = int(pp[18])
    pt = int(pp[19])
    pl = int(pp[20])
    wso = int(pp[21])
    wsy = int(pp[22])
    wsx = int(pp[23])
    opg = int(pp[26])
    zx = int((pp[27] ^ sg) - sg)  # folded into the bias: padded taps read it
    wo = 0x80  # a stored byte b is the weight (b ^ 0x80) - WO: 0x80 + WZ (dw_u8's zero point)
    if int(pp[1]) > 39:
        wo += int((pp[39] ^ sg) - sg)
    hasb = int(pp[28])
    kb = int(pp[29]) * oc  # accumulators requantized at once: RP pixels'
    wbase = uint(w)
    abase = uint(a)
    accbase = uint(acc)
    t = T
    if wo != 0x80:
        t = NO_RO  # (dw_u8: the viper loops)
    nt = kh * kw
    # (dw4 loads 4 inputs, 4 weights, the zero points in COL, biases and multipliers as words:
    # every one word-aligned, else the loops below; an int8 value's arena offset need not be)
    if (t and hasb and opg == 1 and wso == 1 and wsx == c and wsy == kw * c and (c & 3) == 0
            and int((wbase | (arena + pp[6]) | (arena + pp[31]) | uint(bias) | mq) & 3) == 0 and nt <= 25):
        dw4_rows(E, uint(pp), t)  # 4 channels per pass, requantized in assembler
        return
    asm = 0
    ro = NO_RO  # T.R when the requantization runs in assembler
    if t and hasb and opg == 1 and wso == 1 and wsx == c and wsy == kw * c and nt <= 64:
        asm = 1  # one assembler call per output pixel: its taps' addresses in T.Q
        qo = t.Q
        q = ptr32(qo)
        ro = t.R
        rq_setup(ro, mq, uint(pp))
        zrow = ptr8(arena + pp[31])  # C bytes of the zero point: what a padded tap reads
        i = 0
        while i < c:
            zrow[i] = zx
            i += 1
        q[1] = wbase
        q[2] = c
        q[3] = nt
        q[4] = uint(bias)
    three = 0  # a 3x3 filter, multiplier 1, 1hwo weights: each channel's nine taps summed at once (dw9)
    inner = 0
    zbase = arena + pp[31]
    if not asm and hasb and kh == 3 and kw == 3 and opg == 1 and wso == 1 and wsx == c and wsy == 3 * c:
        three = 1
        zrow = ptr8(zbase)  # C bytes of the zero point: what a padded tap reads
        i = 0
        while i < c:
            zrow[i] = zx
            i += 1
        wk[12] = c
        wk[13] = wo
    oy = 0
    while oy < oh:
        kk = 0
        ox = 0
        while ox < ow:
            if kk == kb:
                wk[0] = yo + (oy * ow + ox) * oc - kk
                wk[1] = kk
                rq_flush(ro, accb, mq, arena, W)
                kk = 0
            y0 = oy * sh - pt
            x0 = ox * sw - pl
            if three:  # the taps' offsets from the pixel's first input byte in W[18..26]
                pxa = abase + xo + (y0 * wd + x0) * c  # (a border pixel's may lie outside the input)
                edge = 1
                if 0 <= y0 and y0 + 2 * dh < h and 0 <= x0 and x0 + 2 * dw < wd:
                    edge = 0
                if edge or not inner:  # (an inner pixel's offsets are those of the one before)
                    inner = 1 - edge
                    i = 18
                    ky = 0
                    while ky < 3:
                        iy = y0 + ky * dh
                        kx = 0
                        while kx < 3:
                            ix = x0 + kx * dw
                            if 0 <= iy and iy < h and 0 <= ix and ix < wd:
                                wk[i] = (ky * dh * wd + kx * dw) * c
                            else:  # outside the input: the C zero points (ZROW)
                                wk[i] = int(zbase - pxa)
                            i += 1
                            kx += 1
                        ky += 1
                wk[16] = int(accbase + 4 * kk - pxa)
                dw9(wbase, pxa, uint(bias), W)
                kk += oc
                ox += 1
                continue
            if asm:
                q[0] = accbase + 4 * kk
                j = 6
                ky = 0
                while ky < kh:
                    iy = y0 + ky * dh
                    kx = 0
                    while kx < kw:
                        ix = x0 + kx * dw
                        if 0 <= iy and iy < h and 0 <= ix and ix < wd:
                            q[j] = abase + xo + (iy * wd + ix) * c
                        else:
                            q[j] = uint(zrow)
                        j += 1
                        kx += 1
                    ky += 1
                t.dw(qo)
                kk += oc
                ox += 1
                continue
            o = 0
            while o < oc:
                if hasb:
                    acc[kk + o] = bias[o]
                else:
                    acc[kk + o] = 0
                o += 1
            ky = 0
            while ky < kh:
                iy = y0 + ky * dh
                kx = 0
                while kx < kw:
                    ix = x0 + kx * dw
                    wi = ky * wsy + kx * wsx
                    ko = kk
                    if iy < 0 or iy >= h or ix < 0 or ix >= wd:  # padding: x = ZX
                        if zx != 0:
                            o = 0
                            while o < oc:
                                acc[ko] = acc[ko] + ((w[wi] ^ 0x80) - wo) * zx
                                wi += wso
                                ko += 1
                                o += 1
                    else:
                        xi = xo + (iy * wd + ix) * c
                        if opg == 1 and wso == 1:  # the common case: contiguous channels
                            pw = ptr8(wbase + wi)
                            px = ptr8(abase + xi)
                            pa = ptr32(accbase + 4 * ko)
                            j = oc >> 2
                            while j:
                                pa[0] = pa[0] + ((pw[0] ^ 0x80) - wo) * ((px[0] ^ 0x80) - 0x80)
                                pa[1] = pa[1] + ((pw[1] ^ 0x80) - wo) * ((px[1] ^ 0x80) - 0x80)
                                pa[2] = pa[2] + ((pw[2] ^ 0x80) - wo) * ((px[2] ^ 0x80) - 0x80)
                                pa[3] = pa[3] + ((pw[3] ^ 0x80) - wo) * ((px[3] ^ 0x80) - 0x80)
                                pw = ptr8(uint(pw) + 4)
                                px = ptr8(uint(px) + 4)
                                pa = ptr32(uint(pa) + 16)
                                j -= 1
                            j = oc & 3
                            while j:
                                pa[0] = pa[0] + ((pw[0] ^ 0x80) - wo) * ((px[0] ^ 0x80) - 0x80)
                                pw = ptr8(uint(pw) + 1)
                                px = ptr8(uint(px) + 1)
                                pa = ptr32(uint(pa) + 4)
                                j -= 1
                        else:
                            o = 0
                            while o < oc:
                                acc[ko] = acc[ko] + ((w[wi] ^ 0x80) - wo) * ((a[xi + o // opg] ^ 0x80) - 0x80)
                                wi += wso
                                ko += 1
                                o += 1
                    kx += 1
                ky += 1
            kk += oc
            ox += 1
        wk[0] = yo + (oy + 1) * ow * oc - kk
        wk[1] = kk
        rq_flush(ro, accb, mq, arena, W)
        oy += 1



@micropython.viper
def dw9(pw: ptr8, px: ptr8, pb: ptr32, W):
    # depthwise 3x3, multiplier 1, one output pixel: for each of the C (W[12]) channels, the
    # accumulator at byte px + W[16] (+ 4 per channel) = its bias + the nine taps, tap t's
    # weight at pw + t C, its input at px + W[18 + t] (a padded tap's offset points at C bytes
    # of the zero point); WO (W[13]): a weight is (b ^ 0x80) - WO. (pw, px and pb first: viper
    # keeps a function's first three locals in registers.)
    wk = ptr32(W)
    sg = 1
    sg <<= 31
    c = int(wk[12])
    wo = int(wk[13])
    pa = ptr32(uint(px) + ((wk[16] ^ sg) - sg))
    x0 = int((wk[18] ^ sg) - sg)
    x1 = int((wk[19] ^ sg) - sg)
    x2 = int((wk[20] ^ sg) - sg)
    x3 = int((wk[21] ^ sg) - sg)
    x4 = int((wk[22] ^ sg) - sg)
    x5 = int((wk[23] ^ sg) - sg)
    x6 = int((wk[24] ^ sg) - sg)
    x7 = int((wk[25] ^ sg) - sg)
    x8 = int((wk[26] ^ sg) - sg)
    w1 = c
    w2 = 2 * c
    w3 = 3 * c
    w4 = 4 * c
    w5 = 5 * c
    w6 = 6 * c
    w7 = 7 * c
    w8 = 8 * c
    j = c
    while j:
        pa[0] = (pb[0] + ((pw[0] ^ 0x80) - wo) * ((px[x0] ^ 0x80) - 0x80)
                 + ((pw[w1] ^ 0x80) - wo) * ((px[x1] ^ 0x80) - 0x80)
                 + ((pw[w2] ^ 0x80) - wo) * ((px[x2] ^ 0x80) - 0x80)
                 + ((pw[w3] ^ 0x80) - wo) * ((px[x3] ^ 0x80) - 0x80)
                 + ((pw[w4] ^ 0x80) - wo) * ((px[x4] ^ 0x80) - 0x80)
                 + ((pw[w5] ^ 0x80) - wo) * ((px[x5] ^ 0x80) - 0x80)
                 + ((pw[w6] ^ 0x80) - wo) * ((px[x6] ^ 0x80) - 0x80)
                 + ((pw[w7] ^ 0x80) - wo) * ((px[x7] ^ 0x80) - 0x80)
                 + ((pw[w8] ^ 0x80) - wo) * ((px[x8] ^ 0x80) - 0x80))
        pw = ptr8(uint(pw) + 1)
        px = ptr8(uint(px) + 1)
        pb = ptr32(uint(pb) + 4)
        pa = ptr32(uint(pa) + 4)
        j -= 1


dw_u8 = depthwise


@micropython.viper
def dense(E, P, k: int):
    # x converted into the int32 column COL, 256 inputs at a time, each chunk's dot products
    # added to the accumulators (ZX is folded into the bias): a large input (an LSTM's 49 x 80
    # outputs flattened) needs 1 KB of scratch, not 4 bytes per input
    a = ptr8(E.A)
    arena = uint(a)
    B = E.B
    W = E.W
    wk = ptr32(W)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    w = ptr8(uint(ptr8(B[pp[14]])) + pp[15])
    bias = ptr32(uint(ptr8(B[pp[16]])) + pp[17])
    mq = uint(ptr8(B[pp[18]])) + pp[19]
    accb = arena + pp[12]
    acc = ptr32(accb)
    col = ptr32(arena + pp[13])
    rq_head(W, uint(pp))
    xo = int(pp[6])
    n = int(pp[8])
    oc = int(pp[2])
    wso = int(pp[9])
    wsi = int(pp[10])
    hasb = int(pp[11])
    wb = int(pp[20])  # 3: weights in blocks of 8 outputs (oi8), else 0
    bm = (1 << wb) - 1
    wbase = uint(w)
    t = T
    if t and hasb and wb == 3 and int((wbase | uint(bias) | mq) & 3) == 0:  # 8 outputs per pass, requantized there
        qo = t.Q
        q = ptr32(qo)
        rq8_setup(qo, uint(pp), mq)
        q[0] = 1
        q[1] = 1
        q[3] = arena + pp[7]
        q[4] = oc
        q[5] = oc >> 3
        q[6] = wbase
        q[7] = uint(bias)
        q[13] = arena + xo
        q[14] = n
        q[15] = 0
        t.conv8(qo)
        return
    if t and hasb and wsi == 1 and wb == 0:  # [out, in]: every output a dot product in assembler
        qo = t.Q
        q = ptr32(qo)
        q[0] = wbase
        q[1] = uint(a) + xo
        q[2] = n
        q[3] = oc
        q[4] = wso
        q[5] = uint(acc)
        q[6] = uint(bias)
        t.dots(qo)
        ro = t.R
        rq_setup(ro, mq, uint(pp))
        rq_row(ro, accb, arena, int(pp[7]), oc)
        t.requant(ro)
        return
    o = 0
    while o < oc:
        acc[o] = bias[o] if hasb else 0
        o += 1
    c0 = 0
    while c0 < n:  # the input in chunks of at most 256 (kinds.DENSE_COL): COL holds one
        m = n - c0
        if m > 256:
            m = 256
        csum = 0
        i = 0
        while i < m:
            v = (a[xo + c0 + i] ^ 0x80) - 0x80
            col[i] = v
            csum += v
            i += 1
        csum = 0 - (csum << 7)  # w * c = (w ^ 0x80) * c - 128 * c
        if (wsi == 8 and wb == 3) or (wsi == 1 and wb == 0):  # oi8 or [out, in]
            wk[12] = oc
            wk[13] = m
            wk[14] = wso
            wk[15] = wb
            wk[16] = int(uint(acc) - uint(col))
            wk[17] = csum
            dots(wbase + wsi * c0, col, 0, W)
        else:
            o = 0
            while o < oc:
                s = csum
                wi = (o >> wb) * wso + (o & bm) + c0 * wsi
                i = 0
                while i < m:
                    s += (w[wi] ^ 0x80) * col[i]
                    wi += wsi
                    i += 1
                acc[o] += s
                o += 1
        c0 += m
    wk[0] = pp[7]
    wk[1] = oc
    requant(accb, mq, arena, W)


@micropython.viper
def add(E, P, k: int):
    # see ops/binary.py's add: the tables T and the accumulators in the arena, the multipliers inline;
    # kinds add and sub (int8; int16 ones: add16)
    a = ptr8(E.A)
    arena = uint(a)
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    tb = arena + pp[14]
    t = ptr32(tb)
    accb = arena + pp[15]
    acc = ptr32(accb)
    rq_head(W, rec)
    sg = 1
    sg <<= 31
    neg = 0
    if int(pp[0]) & 255 == 28:  # kinds.SUB: the second input's table subtracted
        neg = 1
    x1 = int(pp[6])
    x2 = int(pp[7])
    y = int(pp[8])
    n = int(pp[9])
    bc = int(pp[10])
    block = int(pp[11])
    e = 0 - int((pp[21] ^ sg) - sg)  # the sums' rounding shift
    t8 = T
    if e < 1:
        t8 = NO_RO  # (the assembler's rounding needs a shift of at least 1)
    wk[1] = 256
    wk[2] = -1
    side = 0
    while side < 2:
        z = int((pp[12 + side] ^ sg) - sg)
        q = 0
        while q < 256:
            if t8:  # by the byte read unsigned, as the assembler reads it
                acc[q] = (((q ^ 0x80) - 0x80) - z) << 20
            else:
                acc[q] = (q - 128 - z) << 20
            q += 1
        wk[0] = 256 * side
        requant(accb, rec + 64 + 8 * side, tb, W)
        side += 1
    if t8:  # summed and requantized in assembler, BLOCK at a time
        if neg:
            q = 256
            while q < 512:
                t[q] = 0 - int((t[q] ^ sg) - sg)
                q += 1
        qo = t8.Q
        qa = ptr32(qo)
        qa[0] = n
        qa[1] = arena + x1
        qa[2] = arena + x2
        qa[3] = arena + x2
        qa[4] = arena + x2 + bc
        qa[5] = arena + y
        qa[6] = tb
        qa[7] = accb
        qa[8] = block
        qa[9] = pp[20]
        qa[10] = e
        qa[11] = pp[3]
        qa[12] = pp[4]
        qa[13] = pp[5]
        t8.add8(qo)
        return
    wk[2] = 1
    mq = rec + 80
    ro = NO_RO
    if T:  # the sums' requantization in assembler (the tables' 512 stay above: raw mode)
        ro = T.R
        rq_setup(ro, mq, rec)
    i = 0
    j = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        q = 0
        while q < m:
            v2 = int((t[((a[x2 + j] ^ 0x80) - 0x80) + 384] ^ sg) - sg)
            if neg:
                v2 = 0 - v2
            acc[q] = int((t[((a[x1 + i + q] ^ 0x80) - 0x80) + 128] ^ sg) - sg) + v2
            j += 1
            if j == bc:
                j = 0
            q += 1
        wk[0] = y + i
        wk[1] = m
        rq_flush(ro, accb, mq, arena, W)
        i += m


sub = add  # (the kernel reads the kind)


@micropython.viper
def add16(E, P, k: int):
    # int16 add and sub (kinds add16, sub16; see ops/binary.py's add): per block, each input's
    # (x - Z) << 15 rescaled into T (x1's at T[0:], x2's at T[256:]), then the sum or the
    # difference requantized to int16
    arena = uint(ptr8(E.A))
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    tb = arena + pp[14]
    t = ptr32(tb)
    accb = arena + pp[15]
    acc = ptr32(accb)
    rq_head(W, rec)
    sg = 1
    sg <<= 31
    neg = 0
    if int(pp[0]) & 255 == 29:  # kinds.SUB16
        neg = 1
    x1 = ptr16(arena + pp[6])
    x2 = ptr16(arena + pp[7])
    y = int(pp[8]) >> 1
    n = int(pp[9])
    bc = int(pp[10])
    block = int(pp[11])
    z1 = int((pp[12] ^ sg) - sg)
    z2 = int((pp[13] ^ sg) - sg)
    i = 0
    j = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        wk[1] = m
        wk[2] = -1  # raw: the rescaled inputs into T
        q = 0
        while q < m:
            acc[q] = (((x1[i + q] ^ 0x8000) - 0x8000) - z1) << 15
            q += 1
        wk[0] = 0
        requant(accb, rec + 64, tb, W)
        jj = j
        q = 0
        while q < m:
            acc[q] = (((x2[jj] ^ 0x8000) - 0x8000) - z2) << 15
            jj += 1
            if jj == bc:
                jj = 0
            q += 1
        wk[0] = 256
        requant(accb, rec + 72, tb, W)
        q = 0
        while q < m:
            v2 = int((t[256 + q] ^ sg) - sg)
            if neg:
                v2 = 0 - v2
            acc[q] = int((t[q] ^ sg) - sg) + v2  # (the store wraps to int32, as TFLM's C does)
            j += 1
            if j == bc:
                j = 0
            q += 1
        wk[2] = 1
        wk[6] = 2
        wk[0] = y + i
        requant(accb, rec + 80, arena, W)
        i += m


sub16 = add16


@micropython.viper
def rescale(E, P, k: int):
    # see ops/quant.py's rescale: a block of x - ZI into ACC, requantized with one or two multipliers
    arena = uint(ptr8(E.A))
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    m32 = (sg << 1) - 1
    xes = int(pp[5])
    yes = int(pp[6])
    x8 = ptr8(arena + pp[2])
    x16 = ptr16(arena + pp[2])
    x32 = ptr32(arena + pp[2])
    y = int(pp[3]) // yes
    n = int(pp[4])
    zi = int((pp[7] ^ sg) - sg)
    zo = int((pp[8] ^ sg) - sg)
    lo = int((pp[9] ^ sg) - sg)
    hi = int((pp[10] ^ sg) - sg)
    accb = arena + pp[11]
    acc = ptr32(accb)
    block = int(pp[12])
    wk[2] = 1
    wk[3] = zo
    wk[4] = lo
    wk[5] = hi
    wk[6] = yes
    wk[7] = pp[17]
    mag = 0
    if int(pp[17]) == 3:  # ALT 3: |x - ZI| with the first multiplier (TFLM's int16 ABS)
        mag = 1
        wk[7] = 0
    y32 = ptr32(arena + pp[3])
    if yes == 4:
        wk[2] = -1  # int32 out: raw, then the zero point and the clamp below
    i = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        q = 0
        while q < m:
            if xes == 1:
                v = ((x8[i + q] ^ 0x80) - 0x80)
            elif xes == 2:
                v = ((x16[i + q] ^ 0x8000) - 0x8000)
            else:
                v = int((x32[i + q] ^ sg) - sg)
            v -= zi
            if mag and v < 0:
                v = 0 - v
            acc[q] = v  # (the store wraps to int32, as TFLM's C does)
            q += 1
        wk[0] = y + i
        wk[1] = m
        requant(accb, rec + 52, arena, W)
        if yes == 4:
            q = 0
            while q < m:
                v = int((((y32[i + q] + zo) & m32) ^ sg) - sg)
                if v < lo:
                    v = lo
                elif v > hi:
                    v = hi
                y32[i + q] = v
                q += 1
        i += m


@micropython.viper
def _mbqm64(t):
    # t[5] = TFLM's MultiplyByQuantizedMultiplier(int64 acc, m = t[3], s = t[4]), the
    # accumulator given as 16-bit limbs t[0], t[1] (>= 0) and t[2] (signed): acc = t[2] 2**32 +
    # t[1] 2**16 + t[0]. The multiplier rounded to 15 bits, so every partial product fits 31
    # bits: the same integers on 32- and 64-bit words.
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    m32 = (sg << 1) - 1
    a0 = int(pt[0])
    a1 = int(pt[1])
    a2 = int((pt[2] ^ sg) - sg)
    m = int(pt[3])
    s = int((pt[4] ^ sg) - sg)
    top = 0x7FFF
    top <<= 16
    r = 0x7FFF
    if m < top:
        r = (m + 32768) >> 16
    ts = 15 - s
    c0 = a0 * r
    c1 = a1 * r + (c0 >> 16)
    c0 = c0 & 0xFFFF
    c2 = a2 * r + (c1 >> 16)
    c1 = c1 & 0xFFFF
    b = ts - 1
    if b < 16:
        c0 += 1 << b
    elif b < 32:
        c1 += 1 << (b - 16)
    else:
        c2 += 1 << (b - 32)
    c1 += c0 >> 16
    c0 = c0 & 0xFFFF
    c2 += c1 >> 16
    c1 = c1 & 0xFFFF
    if ts >= 32:
        res = c2 >> (ts - 32)
    elif ts >= 16:
        res = (c2 << (32 - ts)) | (c1 >> (ts - 16))
    else:
        res = (c2 << (32 - ts)) | (c1 << (16 - ts)) | (c0 >> ts)
    pt[5] = ((res & m32) ^ sg) - sg


@micropython.viper
def _out16(t, acc64: int, dst: uint, lo: int, hi: int, zy: int):
    # one 16x8 output: the accumulator (int64: the limbs in t[0], t[1]; int32: t[8]) through
    # TFLM's MultiplyByQuantizedMultiplier by t[3], t[4], plus zy, clamped, stored at the int16
    # at dst. t is the program's work array W. The multiplier, shift and accumulator come in
    # through it, not as arguments: a call boxes an int argument of 2**30 or more on a 32-bit
    # board (a multiplier always is), 16 bytes of heap per output on the Pico.
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    if acc64:
        a0 = int(pt[0])
        a1 = int((pt[1] ^ sg) - sg)
        a1 += a0 >> 16  # normalise: 16-bit limbs, the top one signed
        pt[0] = a0 & 0xFFFF
        pt[1] = a1 & 0xFFFF
        pt[2] = a1 >> 16
        _mbqm64(t)
        r = int((pt[5] ^ sg) - sg)
    else:
        pt[9] = pt[3]
        pt[10] = pt[4]
        _mbqm32(t)
        r = int((pt[11] ^ sg) - sg)
    r += zy
    if r < lo:
        r = lo
    elif r > hi:
        r = hi
    d = ptr16(dst)
    d[0] = r


@micropython.viper
def _mbqm32(W):
    # W[11] = TFLM's MultiplyByQuantizedMultiplier(int32 W[8], W[9], W[10]) (double rounding)
    pw = ptr32(W)
    pw[0] = 0
    pw[1] = 1
    pw[2] = -1  # raw: one int32 result
    pw[3] = 0
    pw[7] = 0
    requant(uint(pw) + 32, uint(pw) + 36, uint(pw) + 44, W)


@micropython.viper
def conv16(E, P, k: int):
    # 16x8 conv2d and depthwise (see ops/conv.py's conv16): per output, the products summed in int32
    # chunks of at most 511 (|w x| <= 2**22), each added into a 64-bit accumulator (TFLM's
    # int64) as 16-bit limbs; or summed in int32 with wrap-around (TFLM's int32 accumulator)
    a = uint(ptr8(E.A))
    B = E.B
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    sg = 1
    sg <<= 31
    w = ptr8(uint(ptr8(B[pp[32]])) + pp[33])
    bias = ptr32(uint(ptr8(B[pp[34]])) + pp[35])
    mq = ptr32(uint(ptr8(B[pp[36]])) + pp[37])
    x = ptr16(a + pp[6])
    yb = a + pp[7]
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    oc = int(pp[2])
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    dh = int(pp[17])
    dw = int(pp[18])
    pt = int(pp[19])
    pl = int(pp[20])
    wso = int(pp[21])
    wsy = int(pp[22])
    wsx = int(pp[23])
    wsc = int(pp[24])
    cpg = int(pp[25])
    opg = int(pp[26])
    acc64 = int(pp[27])
    hasb = int(pp[28])
    t = E.W  # W[0..5]: the accumulator's limbs and _mbqm64's arguments (W[8..11]: _mbqm32's;
    # W[16..31]: a block of 8 outputs' sums as limbs)
    tw = ptr32(t)
    m32 = (sg << 1) - 1
    top = 0x7FFF
    top <<= 16
    col = ptr32(a + pp[31])
    wb = uint(w)
    nwin = kh * kw * c
    fast = 0
    if cpg == c and wsc == 1 and wsx == c and wsy == kw * c:
        fast = 1  # one group, OHWI filters: the window gathered once per pixel, then a dot per output
    blk = 0
    if fast and oc >= 8:
        blk = 1
    q = 0
    oy = 0
    while oy < oh:
        ox = 0
        while ox < ow:
            if fast:  # the pixel's window into COL as int32 (padding: 0, the int16 zero point)
                j = 0
                ky = 0
                while ky < kh:
                    iy = oy * sh - pt + ky * dh
                    kx = 0
                    while kx < kw:
                        ix = ox * sw - pl + kx * dw
                        ci = 0
                        if 0 <= iy and iy < h and 0 <= ix and ix < wd:
                            xi = (iy * wd + ix) * c
                            while ci < c:
                                col[j] = (x[xi + ci] ^ 0x8000) - 0x8000
                                j += 1
                                ci += 1
                        else:
                            while ci < c:
                                col[j] = 0
                                j += 1
                                ci += 1
                        kx += 1
                    ky += 1
            o = 0
            nb = 0  # outputs left whose sums the block below put in W[16..31]
            while o < oc:
                if blk and nb == 0 and o + 8 <= oc:
                    # 8 filters at once, so each column value is loaded once for 8 MACs. Weights
                    # as unsigned bytes w ^ 0x80 = w + 128 (no sign extension per MAC); the
                    # 128 x sum(x) this adds is taken off per chunk of 128 (every partial sum
                    # stays within 2**31 on a 32-bit board). Each sum into two 16-bit limbs.
                    p0 = ptr8(wb + o * wso)
                    p1 = ptr8(uint(p0) + wso)
                    p2 = ptr8(uint(p1) + wso)
                    p3 = ptr8(uint(p2) + wso)
                    p4 = ptr8(uint(p3) + wso)
                    p5 = ptr8(uint(p4) + wso)
                    p6 = ptr8(uint(p5) + wso)
                    p7 = ptr8(uint(p6) + wso)
                    kk = 16
                    while kk < 32:
                        tw[kk] = 0
                        kk += 1
                    j = 0
                    while j < nwin:
                        e = nwin - j
                        if e > 128:
                            e = 128
                        e += j
                        sx = 0
                        s0 = 0
                        s1 = 0
                        s2 = 0
                        s3 = 0
                        s4 = 0
                        s5 = 0
                        s6 = 0
                        s7 = 0
                        while j < e:
                            xv = col[j]
                            sx += xv
                            s0 += (p0[j] ^ 0x80) * xv
                            s1 += (p1[j] ^ 0x80) * xv
                            s2 += (p2[j] ^ 0x80) * xv
                            s3 += (p3[j] ^ 0x80) * xv
                            s4 += (p4[j] ^ 0x80) * xv
                            s5 += (p5[j] ^ 0x80) * xv
                            s6 += (p6[j] ^ 0x80) * xv
                            s7 += (p7[j] ^ 0x80) * xv
                            j += 1
                        sx <<= 7
                        s0 = (((s0 - sx) & m32) ^ sg) - sg  # exact: |sum| < 2**31 (COL loads zero-extend on 64-bit)
                        tw[16] = int(tw[16]) + (s0 & 0xFFFF)
                        tw[17] = int((tw[17] ^ sg) - sg) + (s0 >> 16)
                        s1 = (((s1 - sx) & m32) ^ sg) - sg
                        tw[18] = int(tw[18]) + (s1 & 0xFFFF)
                        tw[19] = int((tw[19] ^ sg) - sg) + (s1 >> 16)
                        s2 = (((s2 - sx) & m32) ^ sg) - sg
                        tw[20] = int(tw[20]) + (s2 & 0xFFFF)
                        tw[21] = int((tw[21] ^ sg) - sg) + (s2 >> 16)
                        s3 = (((s3 - sx) & m32) ^ sg) - sg
                        tw[22] = int(tw[22]) + (s3 & 0xFFFF)
                        tw[23] = int((tw[23] ^ sg) - sg) + (s3 >> 16)
                        s4 = (((s4 - sx) & m32) ^ sg) - sg
                        tw[24] = int(tw[24]) + (s4 & 0xFFFF)
                        tw[25] = int((tw[25] ^ sg) - sg) + (s4 >> 16)
                        s5 = (((s5 - sx) & m32) ^ sg) - sg
                        tw[26] = int(tw[26]) + (s5 & 0xFFFF)
                        tw[27] = int((tw[27] ^ sg) - sg) + (s5 >> 16)
                        s6 = (((s6 - sx) & m32) ^ sg) - sg
                        tw[28] = int(tw[28]) + (s6 & 0xFFFF)
                        tw[29] = int((tw[29] ^ sg) - sg) + (s6 >> 16)
                        s7 = (((s7 - sx) & m32) ^ sg) - sg
                        tw[30] = int(tw[30]) + (s7 & 0xFFFF)
                        tw[31] = int((tw[31] ^ sg) - sg) + (s7 >> 16)
                    nb = 8
                tw[0] = 0
                tw[1] = 0
                s32 = 0
                if hasb:
                    s32 = int((bias[o] ^ sg) - sg)
                if acc64:
                    tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                    tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                    s32 = 0
                if nb:  # this output's sum from the block, as limbs
                    kk = 32 - 2 * nb
                    if acc64:
                        tw[0] = int(tw[0]) + int(tw[kk])
                        tw[1] = int((tw[1] ^ sg) - sg) + int((tw[kk + 1] ^ sg) - sg)
                    else:  # int32 with wrap-around: the limbs recombined modulo 2**32
                        s32 += int(tw[kk]) + (int(tw[kk + 1]) << 16)
                    nb -= 1
                elif fast:  # the filter's KH KW C weights against the column, 256 at a time
                    pw = ptr8(wb + o * wso)
                    j = 0
                    while j < nwin:
                        e = nwin - j
                        if e > 256:
                            e = 256
                        e += j
                        while j < e:
                            s32 += ((pw[j] ^ 0x80) - 0x80) * col[j]
                            j += 1
                        if acc64:  # the chunk's sum (|.| <= 2**30) as int32, into the limbs
                            s32 = ((s32 & m32) ^ sg) - sg
                            tw[0] = int(tw[0]) + (s32 & 0xFFFF)
                            tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                            s32 = 0
                else:
                    ci0 = (o // opg) * cpg
                    ky = 0
                    while ky < kh:
                        iy = oy * sh - pt + ky * dh
                        if 0 <= iy and iy < h:
                            kx = 0
                            while kx < kw:
                                ix = ox * sw - pl + kx * dw
                                if 0 <= ix and ix < wd:
                                    wi = o * wso + ky * wsy + kx * wsx
                                    xi = (iy * wd + ix) * c + ci0
                                    ci = 0
                                    while ci < cpg:
                                        s32 += ((w[wi] ^ 0x80) - 0x80) * ((x[xi + ci] ^ 0x8000) - 0x8000)
                                        wi += wsc
                                        ci += 1
                                        if acc64 and (ci & 255) == 0:  # a chunk of 256 products
                                            tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                                            tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                                            s32 = 0
                                    if acc64:
                                        tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                                        tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                                        s32 = 0
                                kx += 1
                        ky += 1
                if acc64:  # _out16 and _mbqm64 inline: a call per output cost more than its 7 MACs
                    qa0 = int(tw[0])
                    qa1 = int((tw[1] ^ sg) - sg)
                    qa1 += qa0 >> 16  # normalise: 16-bit limbs, the top one signed
                    qa0 = qa0 & 0xFFFF
                    qa2 = qa1 >> 16
                    qa1 = qa1 & 0xFFFF
                    qm = int(mq[o])
                    qr = 0x7FFF
                    if qm < top:
                        qr = (qm + 32768) >> 16
                    qt = 15 - int((mq[oc + o] ^ sg) - sg)
                    qc0 = qa0 * qr
                    qc1 = qa1 * qr + (qc0 >> 16)
                    qc0 = qc0 & 0xFFFF
                    qc2 = qa2 * qr + (qc1 >> 16)
                    qc1 = qc1 & 0xFFFF
                    qb = qt - 1
                    if qb < 16:
                        qc0 += 1 << qb
                    elif qb < 32:
                        qc1 += 1 << (qb - 16)
                    else:
                        qc2 += 1 << (qb - 32)
                    qc1 += qc0 >> 16
                    qc0 = qc0 & 0xFFFF
                    qc2 += qc1 >> 16
                    qc1 = qc1 & 0xFFFF
                    if qt >= 32:
                        qres = qc2 >> (qt - 32)
                    elif qt >= 16:
                        qres = (qc2 << (32 - qt)) | (qc1 >> (qt - 16))
                    else:
                        qres = (qc2 << (32 - qt)) | (qc1 << (16 - qt)) | (qc0 >> qt)
                    qres = (((qres & m32) ^ sg) - sg) + zy
                    if qres < lo:
                        qres = lo
                    elif qres > hi:
                        qres = hi
                    yd = ptr16(yb + 2 * q)
                    yd[0] = qres
                else:
                    tw[3] = mq[o]
                    tw[4] = mq[oc + o]
                    tw[8] = s32
                    _out16(t, acc64, yb + 2 * q, lo, hi, zy)
                q += 1
                o += 1
            ox += 1
        oy += 1


dw16 = conv16


@micropython.viper
def dense16(E, P, k: int):
    # 16x8 fully connected (see ops/linear.py's dense16), accumulated as conv16 does
    a = uint(ptr8(E.A))
    B = E.B
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    sg = 1
    sg <<= 31
    w = ptr8(uint(ptr8(B[pp[14]])) + pp[15])
    bias = ptr32(uint(ptr8(B[pp[16]])) + pp[17])
    mq = ptr32(uint(ptr8(B[pp[18]])) + pp[19])
    x = ptr16(a + pp[6])
    yb = a + pp[7]
    n = int(pp[8])
    oc = int(pp[2])
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    wso = int(pp[9])
    wsi = int(pp[10])
    hasb = int(pp[11])
    acc64 = int(pp[20])
    t = E.W
    tw = ptr32(t)
    o = 0
    while o < oc:
        tw[0] = 0
        tw[1] = 0
        s32 = 0
        if hasb:
            s32 = int((bias[o] ^ sg) - sg)
        if acc64:
            tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
            tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
            s32 = 0
        wi = o * wso
        i = 0
        while i < n:
            s32 += ((w[wi] ^ 0x80) - 0x80) * ((x[i] ^ 0x8000) - 0x8000)
            wi += wsi
            i += 1
            if acc64 and (i & 255) == 0:
                tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
                s32 = 0
        if acc64:
            tw[0] = int(tw[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
            tw[1] = int((tw[1] ^ sg) - sg) + (s32 >> 16)
            s32 = 0
        tw[3] = mq[o]
        tw[4] = mq[oc + o]
        tw[8] = s32
        _out16(t, acc64, yb + 2 * o, lo, hi, zy)
        o += 1


@micropython.viper
def tconv(E, P, k: int):
    # transpose conv, int8 and 16x8 (see ops/tconv.py's tconv): each output gathered from the taps that
    # reach it; int8: (x - ZX) w summed in int32 (wrapping, as TFLM's), requantized one output at
    # a time; 16x8: summed as conv16 does (int64 limbs)
    a = uint(ptr8(E.A))
    B = E.B
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    sg = 1
    sg <<= 31
    wide = 0
    if int(pp[0]) & 255 == 34:  # kinds.TCONV16
        wide = 1
    w = ptr8(uint(ptr8(B[pp[22]])) + pp[23])
    bias = ptr32(uint(ptr8(B[pp[24]])) + pp[25])
    mqa = uint(ptr8(B[pp[26]])) + pp[27]
    mq = ptr32(mqa)
    x8 = ptr8(a + pp[6])
    x16 = ptr16(a + pp[6])
    yb = a + pp[7]
    oc = int(pp[2])
    zy = int((pp[3] ^ sg) - sg)
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    pt = int(pp[17])
    pl = int(pp[18])
    zx = int((pp[19] ^ sg) - sg)
    hasb = int(pp[20])
    accb = a + pp[21]
    acc = ptr32(accb)
    q = 0
    oy = 0
    while oy < oh:
        ox = 0
        while ox < ow:
            o = 0
            while o < oc:
                wk[0] = 0
                wk[1] = 0
                s32 = 0
                if hasb:
                    s32 = int((bias[o] ^ sg) - sg)
                if wide:
                    wk[0] = int(wk[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                    wk[1] = int((wk[1] ^ sg) - sg) + (s32 >> 16)
                    s32 = 0
                ky = 0
                while ky < kh:
                    ny = oy + pt - ky
                    if ny >= 0 and ny % sh == 0 and ny // sh < h:
                        iy = ny // sh
                        kx = 0
                        while kx < kw:
                            nx = ox + pl - kx
                            if nx >= 0 and nx % sw == 0 and nx // sw < wd:
                                ix = nx // sw
                                wi = ((o * kh + ky) * kw + kx) * c
                                xi = (iy * wd + ix) * c
                                ci = 0
                                while ci < c:
                                    if wide:
                                        s32 += ((w[wi + ci] ^ 0x80) - 0x80) * ((x16[xi + ci] ^ 0x8000) - 0x8000)
                                        if (ci & 255) == 255:
                                            wk[0] = int(wk[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                                            wk[1] = int((wk[1] ^ sg) - sg) + (s32 >> 16)
                                            s32 = 0
                                    else:
                                        s32 += ((w[wi + ci] ^ 0x80) - 0x80) * (((x8[xi + ci] ^ 0x80) - 0x80) - zx)
                                    ci += 1
                                if wide:
                                    wk[0] = int(wk[0]) + (s32 & 0xFFFF)  # limbs += s32 (inline: a call boxes an int >= 2**30)
                                    wk[1] = int((wk[1] ^ sg) - sg) + (s32 >> 16)
                                    s32 = 0
                            kx += 1
                    ky += 1
                if wide:
                    wk[3] = mq[o]
                    wk[4] = mq[oc + o]
                    _out16(W, 1, yb + 2 * q, lo, hi, zy)
                else:
                    acc[o] = s32
                q += 1
                o += 1
            if not wide:  # the pixel's OC accumulators requantized to int8
                wk[0] = q - oc
                wk[1] = oc
                wk[2] = oc
                wk[3] = zy
                wk[4] = lo
                wk[5] = hi
                wk[6] = 1
                wk[7] = 0
                requant(accb, mqa, yb, W)
            ox += 1
        oy += 1


tconv16 = tconv


@micropython.viper
def mul(E, P, k: int):
    a = ptr8(E.A)
    arena = uint(a)
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    accb = arena + pp[14]
    acc = ptr32(accb)
    mq = rec + 60
    rq_head(W, rec)
    sg = 1
    sg <<= 31
    x1 = int(pp[6])
    x2 = int(pp[7])
    y = int(pp[8])
    n = int(pp[9])
    bc = int(pp[10])
    block = int(pp[11])
    z1 = int((pp[12] ^ sg) - sg) + 0x80
    z2 = int((pp[13] ^ sg) - sg) + 0x80
    ro = NO_RO
    if T:  # requantization in assembler
        ro = T.R
        rq_setup(ro, mq, rec)
    i = 0
    j = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        q = 0
        while q < m:
            acc[q] = ((a[x1 + i + q] ^ 0x80) - z1) * ((a[x2 + j] ^ 0x80) - z2)
            j += 1
            if j == bc:
                j = 0
            q += 1
        wk[0] = y + i
        wk[1] = m
        rq_flush(ro, accb, mq, arena, W)
        i += m


@micropython.viper
def mul16(E, P, k: int):
    # int16 mul (kind mul16, zero points 0; see ops/binary.py's mul): x1 x2 requantized to int16
    arena = uint(ptr8(E.A))
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    accb = arena + pp[14]
    acc = ptr32(accb)
    rq_head(W, rec)
    x1 = ptr16(arena + pp[6])
    x2 = ptr16(arena + pp[7])
    y = int(pp[8]) >> 1
    n = int(pp[9])
    bc = int(pp[10])
    block = int(pp[11])
    i = 0
    j = 0
    while i < n:
        m = block
        if n - i < block:
            m = n - i
        q = 0
        while q < m:
            acc[q] = ((x1[i + q] ^ 0x8000) - 0x8000) * ((x2[j] ^ 0x8000) - 0x8000)
            j += 1
            if j == bc:
                j = 0
            q += 1
        wk[0] = y + i
        wk[1] = m
        wk[2] = 1
        wk[6] = 2
        requant(accb, rec + 60, arena, W)
        i += m


@micropython.viper
def _pool(E, P, k: int, how: int):
    # how: bit 0 max (else average), bit 1 int16 values (XO, YO in bytes), bit 2 halves up
    # (avgpool_u8: TFLite's uint8 rounding, on sum + 128 n >= 0)
    a = ptr8(E.A)
    a16 = ptr16(E.A)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    is_max = how & 1
    wide = how & 2
    sg = 1
    sg <<= 31
    xo = int(pp[6])
    kk = int(pp[7])
    low = -128
    if wide:
        xo >>= 1
        kk >>= 1
        low = -32768
    h = int(pp[8])
    wd = int(pp[9])
    c = int(pp[10])
    oh = int(pp[11])
    ow = int(pp[12])
    kh = int(pp[13])
    kw = int(pp[14])
    sh = int(pp[15])
    sw = int(pp[16])
    pt = int(pp[19])
    pl = int(pp[20])
    lo = int((pp[4] ^ sg) - sg)
    hi = int((pp[5] ^ sg) - sg)
    oy = 0
    while oy < oh:
        ox = 0
        while ox < ow:
            ch = 0
            while ch < c:
                s = 0
                if is_max:
                    s = low
                n = 0
                ky = 0
                while ky < kh:
                    iy = oy * sh - pt + ky
                    if 0 <= iy and iy < h:
                        kx = 0
                        while kx < kw:
                            ix = ox * sw - pl + kx
                            if 0 <= ix and ix < wd:
                                q = xo + (iy * wd + ix) * c + ch
                                if wide:
                                    v = (a16[q] ^ 0x8000) - 0x8000
                                else:
                                    v = (a[q] ^ 0x80) - 0x80
                                if is_max:
                                    if v > s:
                                        s = v
                                else:
                                    s += v
                                    n += 1
                            kx += 1
                    ky += 1
                if how & 4:
                    s = (s + (n << 7) + (n >> 1)) // n - 128
                elif not is_max:
                    if s > 0:
                        s = (s + n // 2) // n
                    else:
                        s = 0 - ((n // 2 - s) // n)
                if s < lo:
                    s = lo
                elif s > hi:
                    s = hi
                if wide:
                    a16[kk] = s
                else:
                    a[kk] = s
                kk += 1
                ch += 1
            ox += 1
        oy += 1


def maxpool(E, P, k):
    _pool(E, P, k, 1)


def avgpool(E, P, k):
    _pool(E, P, k, 0)


def maxpool16(E, P, k):
    _pool(E, P, k, 3)


def avgpool_u8(E, P, k):
    _pool(E, P, k, 4)


def avgpool16(E, P, k):
    _pool(E, P, k, 2)


@micropython.viper
def mean(E, P, k: int):
    a = ptr8(E.A)
    arena = uint(a)
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    accb = arena + pp[11]
    acc = ptr32(accb)
    rq_head(W, rec)
    sg = 1
    sg <<= 31
    xo = int(pp[6])
    hw = int(pp[8])
    c = int(pp[10])
    zx = int((pp[9] ^ sg) - sg)
    ch = 0
    while ch < c:
        acc[ch] = 0 - zx * hw
        ch += 1
    q = xo
    i = 0
    while i < hw:
        ch = 0
        while ch < c:
            acc[ch] = int((acc[ch] ^ sg) - sg) + ((a[q] ^ 0x80) - 0x80)
            q += 1
            ch += 1
        i += 1
    wk[0] = pp[7]
    wk[1] = c
    requant(accb, rec + 48, arena, W)


@micropython.viper
def load(E, P, k: int):
    # a constant tensor's N bytes into the arena (ops/binary.py's load record)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    d = ptr8(uint(ptr8(E.A)) + pp[2])
    s = ptr8(uint(ptr8(E.B[pp[4]])) + pp[5])
    n = int(pp[3])
    i = 0
    while i < n:
        d[i] = s[i]
        i += 1


@micropython.viper
def lut(E, P, k: int):
    a = ptr8(E.A)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    t = ptr8(uint(ptr8(E.B[pp[9]])) + pp[10])
    xo = int(pp[6])
    yo = int(pp[7])
    n = int(pp[8])
    i = 0
    while i < n:
        a[yo + i] = t[((a[xo + i] ^ 0x80) - 0x80) + 128]
        i += 1


@micropython.viper
def _srdhm(t):
    # t[2] = srdhm(t[0], t[1]) for any int32 t[0], t[1] (gemmlowp): softmax's fixed point
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    x = int((pt[0] ^ sg) - sg)
    m = int((pt[1] ^ sg) - sg)
    if x == m and x == 0 - sg:  # both -2**31 (0 - sg is -2**31 on both word sizes)
        pt[2] = sg - 1
        return
    neg = 0
    if x < 0:
        neg = 1 - neg
        x = 0 - x
    if m < 0:
        neg = 1 - neg
        m = 0 - m
    a0 = x & 0xFFFF
    a1 = (x >> 16) & 0xFFFF
    b0 = m & 0xFFFF
    b1 = (m >> 16) & 0xFFFF
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    c0 = (p00 & 0xFFFF) + 0xFFFF * neg
    t1 = ((p00 >> 16) & 0xFFFF) + (p01 & 0xFFFF) + (p10 & 0xFFFF) + 0x4000 - neg + (c0 >> 16)
    u = (t1 >> 16) + ((p01 >> 16) & 0xFFFF) + ((p10 >> 16) & 0xFFFF) + a1 * b1
    r = (u << 1) + ((t1 >> 15) & 1)
    if neg:
        r = 0 - r
    pt[2] = r


@micropython.viper
def _reciprocal(t):
    # t[0] = sum of exps (Q12.19, 0 < t[0] < 2**28) -> t[0] = 1 / sum as a Q0.31 scale and
    # t[3] = the output exponent (num_bits_over_unit + 23): TFLM's GetReciprocal with
    # gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Newton-Raphson, 3 steps)
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    x = int(pt[0])
    head = 0
    while not ((x >> (31 - head)) & 1):
        head += 1
    pt[3] = 35 - head
    a = (x << head) - sg  # shifted_sum_minus_one, in [0, 2**31) on both word sizes
    one30 = 1
    one30 <<= 30  # constants >= 2**30 are built at run time (no 31-bit small int holds them)
    half = (a >> 1) + one30  # RoundingHalfSum(a, One)
    k = 0x3C3C
    pt[0] = half
    pt[1] = 0 - ((k << 16) | 0x3C3C)  # -32/17 in Q2.29: -1010580540
    _srdhm(t)
    k = 0x5A5A
    x2 = ((k << 16) | 0x5A5A) + int((pt[2] ^ sg) - sg)  # 48/17 in Q2.29: 1515870810
    lim = (1 << 29) - 1
    i = 0
    while i < 3:
        pt[0] = half
        pt[1] = x2
        _srdhm(t)
        pt[0] = x2
        pt[1] = (1 << 29) - int((pt[2] ^ sg) - sg)
        _srdhm(t)
        v = int((pt[2] ^ sg) - sg)
        if v > lim:  # saturating << 2 (Rescale<2>)
            v = sg - 1
        elif v < 0 - lim:
            v = 0 - sg
        else:
            v = v << 2
        x2 = x2 + v
        i += 1
    if x2 > one30 - 1:  # saturating << 1 (Rescale<0> of the Q1.30 half)
        x2 = sg - 1
    elif x2 < 1 - one30:
        x2 = 0 - sg
    else:
        x2 = x2 << 1
    pt[0] = x2


@micropython.viper
def softmax(E, P, k: int):
    # kinds softmax (int8 out) and softmax16 (int16 out: exponent 8 less, offset -32768)
    a = ptr8(E.A)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    wide = 0
    if int(pp[0]) & 255 == 39:  # kinds.SOFTMAX16
        wide = 1
    o16 = ptr16(uint(a))
    e = ptr32(uint(ptr8(E.B[pp[10]])) + pp[11])
    t = uint(ptr32(E.W)) + 32  # four words of working state: W[8..11]
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    xo = int(pp[6])
    yo = int(pp[7])
    if wide:
        yo = yo >> 1  # int16 elements
    n = int(pp[8])
    rows = int(pp[9])
    r = 0
    while r < rows:
        top = -128
        i = 0
        while i < n:
            v = (a[xo + i] ^ 0x80) - 0x80
            if v > top:
                top = v
            i += 1
        total = 0
        i = 0
        while i < n:  # rdbpot(exp, 12); exps are >= 0
            v = int(e[top - ((a[xo + i] ^ 0x80) - 0x80)])
            q = v >> 12
            if (v & 0xFFF) > 0x7FF:
                q += 1
            total += q
            i += 1
        pt[0] = total
        _reciprocal(t)
        scale = int((pt[0] ^ sg) - sg)
        ex = int(pt[3])
        if wide:
            ex -= 8
        i = 0
        while i < n:
            pt[0] = scale
            pt[1] = e[top - ((a[xo + i] ^ 0x80) - 0x80)]
            _srdhm(t)
            if ex > 31:  # (a sum over 2**28: every quotient rounds to 0; no shift by 32 or more)
                pt[2] = 0
            else:
                _rdbpot(t, ex)
            if wide:
                v = int((pt[2] ^ sg) - sg) - 32768
                if v < -32768:
                    v = -32768
                elif v > 32767:
                    v = 32767
                o16[yo + i] = v
            else:
                v = int((pt[2] ^ sg) - sg) - 128
                if v < -128:
                    v = -128
                elif v > 127:
                    v = 127
                a[yo + i] = v
            i += 1
        xo += n
        yo += n
        r += 1


softmax16 = softmax


@micropython.viper
def act16(E, P, k: int):
    # TFLM's int16 Logistic (FN 0) and Tanh (FN 1) (ops/act.py's act16 record): the input scaled
    # to 3 x Q3.12, interpolated in the uint16 sigmoid table
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = ptr16(E.A)
    t = ptr16(uint(ptr8(E.B[pp[8]])) + pp[9])
    tanh = int(pp[2])
    xo = int(pp[3]) >> 1
    yo = int(pp[4]) >> 1
    n = int(pp[5])
    m = int(pp[6])
    s = int(pp[7])
    if m == 0:
        m = 3 << s
        s = 0
    rnd = 0
    if s > 0:
        rnd = 1 << (s - 1)
    i = 0
    while i < n:
        v = (((a[xo + i] ^ 0x8000) - 0x8000) * m + rnd) >> s
        u = v
        if u < 0:
            u = 0 - u
        if tanh:
            uh = u >> 8
            if uh >= 255:
                r = 0xFFFF << 8
            else:
                ua = int(t[uh])
                r = (ua << 8) + (u & 0xFF) * (int(t[uh + 1]) - ua)
            if v >= 0:
                r = r - (1 << 23) + 128
            else:
                r = (1 << 23) + 127 - r
            a[yo + i] = r >> 8
        else:
            uh = u >> 9
            if uh >= 255:
                r = 0x7FFF << 10
            else:
                ua = int(t[uh])
                r = (ua << 9) + (u & 0x1FF) * (int(t[uh + 1]) - ua)
            if v >= 0:
                r = r + 512
            else:
                r = (1 << 25) - r + 511
            a[yo + i] = r >> 10
        i += 1


@micropython.viper
def softmax_i16(E, P, k: int):
    # TFLM's SoftmaxInt16 (ops/softmax.py's record): the differences scaled by requant() in raw
    # mode, a block at a time into ACC, then the exp table; the sum's reciprocal by the second
    # table. Every product fits 31 bits (Q0.15 x Q0.15).
    a = ptr8(E.A)
    arena = uint(a)
    W = E.W
    wk = ptr32(W)
    rec = uint(ptr32(P)) + 4 * k
    pp = ptr32(rec)
    t = ptr16(uint(ptr8(E.B[pp[10]])) + pp[11])
    xo = int(pp[6]) >> 1
    yo = int(pp[7]) >> 1
    n = int(pp[8])
    rows = int(pp[9])
    accb = arena + pp[14]
    acc = ptr32(accb)
    block = int(pp[15])
    x16 = ptr16(arena)
    sg = 1
    sg <<= 31
    wk[2] = -1  # raw int32 results
    wk[3] = 0
    wk[4] = 0
    wk[5] = 0
    wk[6] = 4
    wk[7] = 0
    r = 0
    while r < rows:
        top = -32768
        i = 0
        while i < n:
            v = (x16[xo + i] ^ 0x8000) - 0x8000
            if v > top:
                top = v
            i += 1
        total = 0
        i = 0
        while i < n:
            m = block
            if n - i < block:
                m = n - i
            q = 0
            while q < m:
                acc[q] = ((x16[xo + i + q] ^ 0x8000) - 0x8000) - top
                q += 1
            wk[0] = 0
            wk[1] = m
            requant(accb, rec + 48, accb, W)
            q = 0
            while q < m:
                d = int((acc[q] ^ sg) - sg) + 32767
                if d < -32768:
                    d = -32768
                elif d > 32767:
                    d = 32767
                j = 256 + (d >> 7)
                b = (t[j] ^ 0x8000) - 0x8000
                e = b + (((((t[j + 1] ^ 0x8000) - 0x8000) - b) * (d & 127) + 64) >> 7)
                x16[yo + i + q] = e
                total += e
                q += 1
            i += m
        head = 0
        while head < 32 and not (total >> (31 - head)) & 1:
            head += 1
        d = (((total << (head - 1)) + 8192) >> 14) - 98304
        if d < -32768:
            d = -32768
        elif d > 32767:
            d = 32767
        j = 769 + (d >> 7)  # (the second table: 513 + 256)
        b = (t[j] ^ 0x8000) - 0x8000
        recip = b + (((((t[j + 1] ^ 0x8000) - 0x8000) - b) * (d & 127) + 64) >> 7)
        sh = 31 - head
        rnd = 1 << (sh - 1)
        i = 0
        while i < n:
            v = (((x16[yo + i] ^ 0x8000) - 0x8000) * recip + rnd) >> sh
            if v < 0:
                v = 0
            elif v > 32767:
                v = 32767
            x16[yo + i] = v
            i += 1
        xo += n
        yo += n
        r += 1


@micropython.viper
def _rdbpot(t, e: int):
    # t[2] = rdbpot(t[2], e)
    pt = ptr32(t)
    sg = 1
    sg <<= 31
    x = int((pt[2] ^ sg) - sg)
    mask = (1 << e) - 1
    th = mask >> 1
    if x < 0:
        th += 1
    rem = x & mask
    x = x >> e
    if rem > th:
        x += 1
    pt[2] = x


@micropython.viper
def move(E, P, k: int):
    # the arena's elements dst[DO + p PDS + i DS + j DJ] = src[SO + p PSS + i SS + j SJ] (see
    # ops/move.py's move): bytes, 2-byte or 4-byte elements; strides may be negative
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A))
    sg = 1
    sg <<= 31
    so = a + pp[2]
    do = a + pp[3]
    rows = int(pp[4])
    cols = int(pp[5])
    ss = (int(pp[6]) ^ sg) - sg
    sj = (int(pp[7]) ^ sg) - sg
    ds = (int(pp[8]) ^ sg) - sg
    dj = (int(pp[9]) ^ sg) - sg
    es = int(pp[10])
    planes = int(pp[11])
    pss = (int(pp[12]) ^ sg) - sg
    pds = (int(pp[13]) ^ sg) - sg
    q = 0
    while q < planes:
        i = 0
        while i < rows:
            si = q * pss + i * ss
            di = q * pds + i * ds
            j = 0
            if es == 1:
                s8 = ptr8(so)
                d8 = ptr8(do)
                while j < cols:
                    d8[di] = s8[si]
                    si += sj
                    di += dj
                    j += 1
            elif es == 2:
                s16 = ptr16(so)
                d16 = ptr16(do)
                while j < cols:
                    d16[di] = s16[si]
                    si += sj
                    di += dj
                    j += 1
            else:
                s32 = ptr32(so)
                d32 = ptr32(do)
                while j < cols:
                    d32[di] = s32[si]
                    si += sj
                    di += dj
                    j += 1
            i += 1
        q += 1


@micropython.viper
def put(src, dst, p):
    # move() with the buffers as arguments (no tuple to build: an input copied in per call)
    s = ptr8(src)
    d = ptr8(dst)
    pp = ptr32(p)
    so = int(pp[0])
    do = int(pp[1])
    rows = int(pp[2])
    cols = int(pp[3])
    ss = int(pp[4])
    sj = int(pp[5])
    ds = int(pp[6])
    dj = int(pp[7])
    if T and rows == 1 and sj == 1 and dj == 1:  # one run of bytes: in assembler
        T.copy(uint(d) + do, uint(s) + so, cols)
        return
    i = 0
    while i < rows:
        si = so + i * ss
        di = do + i * ds
        j = 0
        while j < cols:
            d[di] = s[si]
            si += sj
            di += dj
            j += 1
        i += 1


@micropython.viper
def fill(E, P, k: int):
    # N elements of ES bytes of the arena from byte DO set to V (an int8 or int16 code, or 32 bits)
    pp = ptr32(uint(ptr32(P)) + 4 * k)
    a = uint(ptr8(E.A)) + pp[2]
    n = int(pp[3])
    v = int(pp[4])
    es = int(pp[5])
    i = 0
    if es == 1:
        d = ptr8(a)
        while i < n:
            d[i] = v
            i += 1
    elif es == 2:
        d16 = ptr16(a)
        while i < n:
            d16[i] = v
            i += 1
    else:
        d4 = ptr32(a)
        while i < n:
            d4[i] = v
            i += 1


@micropython.viper
def abs_sums(buf, g, out):
    # out[o] = sum |w| over output channel o's filter (see _arith.abs_sums): the load check of
    # every accumulator's range
    w = ptr8(buf)
    pg = ptr32(g)
    po = ptr32(out)
    off = int(pg[0])
    oc = int(pg[1])
    kh = int(pg[2])
    kw = int(pg[3])
    cpg = int(pg[4])
    wso = int(pg[5])
    wsy = int(pg[6])
    wsx = int(pg[7])
    wsc = int(pg[8])
    wb = int(pg[9])
    bm = (1 << wb) - 1
    o = 0
    while o < oc:
        s = 0
        ky = 0
        while ky < kh:
            kx = 0
            while kx < kw:
                wi = off + (o >> wb) * wso + (o & bm) + ky * wsy + kx * wsx
                ci = 0
                while ci < cpg:
                    v = (w[wi] ^ 0x80) - 0x80
                    if v < 0:
                        v = 0 - v
                    s += v
                    wi += wsc
                    ci += 1
                kx += 1
            ky += 1
        po[o] = s
        o += 1


@micropython.viper
def f16_to_f32(src, first: int, dst, d0: int, n: int):
    # dst's f32 element d0 + i = float(src[first + i]) for i < n: IEEE half -> single by bit
    # manipulation, written as raw bits into dst (the arena), so no float is ever made (an
    # RP2040 has no FPU).
    ps = ptr16(src)
    pd = ptr32(uint(ptr32(dst)) + 4 * d0)
    exp_max = 0xFF
    exp_max <<= 23  # 0x7F800000 built at run time: as a literal it is no small int on 32-bit ports
    i = 0
    while i < n:
        h = ps[first + i]
        sign = (h & 0x8000) << 16
        e = (h >> 10) & 0x1F
        m = h & 0x3FF
        if e == 31:
            f = sign | exp_max | (m << 13)
        elif e != 0:
            f = sign | ((e + 112) << 23) | (m << 13)
        elif m == 0:
            f = sign
        else:  # subnormal half: normalise
            e = 113
            while (m & 0x400) == 0:
                m <<= 1
                e -= 1
            f = sign | (e << 23) | ((m & 0x3FF) << 13)
        pd[i] = f
        i += 1

