# The recurrent ops (LSTM, SVDF): the checks of their records and their plain-Python kernels
# (the specification of the integers, as _pure.py is for the other ops; mpy_lazy/_viper_recurrent.py
# has their viper twins). Imported only by a program that has such a record (mpy_lazy/check.py,
# kernels.table): a model without one keeps its heap.
from .check import FLSTM, MAX_DIM, SVDF, _mq
from ._pure import mbqm, rec, wrap32


def check(r, E):
    """The record checks (mpy_lazy/check.py) of kinds lstm, float lstm and svdf."""
    (_svdf if r.kind == SVDF else _lstm)(r, E)


def _lstm(r, E):
    fl = r.kind == FLSTM
    steps, nin = r.dims((2, "x"), (3, "x"))
    hid = r.range(4, "out", 1, 16383)
    if steps * nin > 1 << 24 or steps * hid > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    size = 4 if fl else 1
    r.region(6, "x", steps * nin * size, size)
    r.region(7, "y", steps * hid * size, size)
    r.region(8, "state", hid * size, size)
    r.region(9, "state", hid * (4 if fl else 2), 4 if fl else 2)
    r.range(10, "state", 0, 1)
    r.tensor(15, "weight", ("f32" if fl else "i8",), 4 * hid * nin * size)
    r.tensor(17, "recurrent", ("f32" if fl else "i8",), 4 * hid * hid * size)
    if fl:
        from .program import bits_f32

        clip = bits_f32(r[11])
        if not (clip - clip == 0 and clip >= 0):
            r.fail("clip", "%r is not finite and >= 0" % clip)
        r.region(14, "scratch", 16 * hid, 4)
        r.tensor(19, "bias", ("f32",), 16 * hid)
        return
    r.range(5, "zero_point", -128, 127)
    r.range(11, "clip", -1, 32767)
    r.range(12, "cell", 1, 3 << 14)  # the tanh input's multiplier: |x * M| < 2**31
    r.range(13, "cell", 0, 31)
    r.region(14, "scratch", 4 * (nin + 9 * hid), 4)
    r.tensor(19, "bias", ("i32",), 32 * hid)
    r.tensor(21, "requant", ("i32",), 4 * (16 * hid + 6))
    m = E.words(r[21], r[22], 16 * hid + 6)
    for at, n in ((0, 4 * hid), (8 * hid, 4 * hid), (16 * hid, 2), (16 * hid + 4, 1)):
        for i in range(at, at + n):  # n multipliers, then n shifts
            if m[i] < 0 or not -31 <= m[i + n] <= 30:
                r.fail("requant", "multiplier %d, shift %d: TFLM takes 0..2**31-1 and -31..30" % (m[i], m[i + n]))
    r.tensor(23, "table", ("i16",), 512)
    t = E.halfs(r[23], r[24], 256)
    if t[0] & 0xFFFF < 32768:
        r.fail("table", "entry 0 is %d (TFLM's sigmoid table starts at 32768)" % (t[0] & 0xFFFF))
    for i in range(1, 256):
        if t[i] & 0xFFFF < t[i - 1] & 0xFFFF:
            r.fail("table", "entry %d decreases (a sigmoid table never does)" % i)


def _svdf(r, E):
    f, nin, mem, units = r.range(2, "out", 1, MAX_DIM), r.range(3, "x", 1, 1 << 24), \
        r.range(4, "memory", 1, MAX_DIM), r.range(5, "out", 1, MAX_DIM)
    if f % units or f * mem > 1 << 22:
        r.fail("rank", "%d filters: not a multiple of %d units, or %d steps of state too many" % (f, units, mem))
    es = r[9]
    if es not in (1, 2):
        r.fail("dtype", "%d bytes per state element (1 or 2)" % es)
    top = (1 << (8 * es - 1)) - 1
    r.region(6, "x", nin)
    r.region(7, "y", units)
    r.region(8, "state", f * mem * es, es)
    r.range(10, "zero_point", -128, 127)
    r.range(11, "sq", -top - 1, top)
    r.range(12, "zero_point", -128, 127)
    _mq(r, 13, 2, "m")
    r.region(17, "scratch", 4 * (f + units + nin), 4)
    r.tensor(18, "weight", ("i8",), f * nin)
    r.tensor(20, "time", ("i16" if es == 2 else "i8",), f * mem * es)
    r.tensor(22, "bias", ("i32",), 4 * units)
    # (the accumulators wrap around int32 as TFLM's do: the kernels give its numbers whatever
    # the weights)


# lstm record (int8): 2 T (steps) 3 I (input features) 4 H (hidden size) 5 ZH (h's zero point)
# 6 XO 7 YO 8 HO (h: H int8) 9 CO (c: H int16) 10 FLAGS (1: the state starts from zero at every
# call) 11 QCLIP (the cell clip, -1 none) 12 TM 13 TS (the cell's tanh input: (c TM + round) >>
# TS) 14 S (scratch: I + H int32 columns, 4H int32 accumulators, 8H int16) 15 16 w [4H, I]
# 17 18 r [4H, H] 19 20 b [8H] i32 (x's then h's products) 21 22 m [16H + 6] i32 (per row, gates
# i f c o: the x products' multipliers, their shifts, the h products' multipliers, their shifts;
# then f c's and i g's multipliers, their shifts, o tanh(c)'s multiplier and shift)
# 23 24 t [256] i16 (TFLM's sigmoid_table_uint16). TFLM's lstm_eval (8x8 -> 16): every gate
# gx = sat16(mbqm(bx + w x_t)) + sat16(mbqm(bh + r h)) (saturated), sigmoid16 or tanh16 of it;
# c = sat16(sat16(mbqm(f c)) + sat16(mbqm(i g))), clipped; h = clamp8(ZH + mbqm(tanh16(c) o)).

def sat16(v):
    return -32768 if v < -32768 else (32767 if v > 32767 else v)


def sigmoid16(v, t):
    """TFLM's int16 Logistic of v = 3 x (Q3.12 input) by the table: Q0.15 out."""
    u = -v if v < 0 else v
    uh = u >> 9
    if uh >= 255:
        r = 0x7FFF << 10
    else:
        ua = t[uh]
        r = (ua << 9) + (u & 0x1FF) * (t[uh + 1] - ua)
    r = r + 512 if v >= 0 else (1 << 25) - r + 511
    return r >> 10


def tanh16(v, t):
    """TFLM's int16 Tanh of v (the input already scaled to 3 x Q3.12) by the table: Q0.15."""
    u = -v if v < 0 else v
    uh = u >> 8
    if uh >= 255:
        r = 0xFFFF << 8
    else:
        ua = t[uh]
        r = (ua << 8) + (u & 0xFF) * (t[uh + 1] - ua)
    r = r - (1 << 23) + 128 if v >= 0 else (1 << 23) + 127 - r
    return r >> 8


def lstm(E, P, k):
    p = rec(P, k)
    a, a16 = E.a8, E.a16
    steps, nin, hid, zh, xo, yo, ho, co, flags, qclip, tm, ts = p[2:14]
    co //= 2
    w, w0, r, r0 = E.s8[p[15]], p[16], E.s8[p[17]], p[18]
    b, b0, m, m0 = E.s32[p[19]], p[20] // 4, E.s32[p[21]], p[22] // 4
    t8, t0 = E.s8[p[23]], p[24]
    t = [(t8[t0 + 2 * i] & 255) | (t8[t0 + 2 * i + 1] & 255) << 8 for i in range(256)]
    rnd = 1 << (ts - 1) if ts else 0
    if flags & 1:
        for j in range(hid):
            a[ho + j] = zh
            a16[co + j] = 0
    gate = [0] * (4 * hid)
    for step in range(steps):
        x0 = xo + step * nin
        for row in range(4 * hid):
            ax = b[b0 + row]
            for i in range(nin):
                ax += w[w0 + row * nin + i] * a[x0 + i]
            ah = b[b0 + 4 * hid + row]
            for i in range(hid):
                ah += r[r0 + row * hid + i] * a[ho + i]
            v = sat16(sat16(mbqm(wrap32(ax), m[m0 + row], m[m0 + 4 * hid + row]))
                      + sat16(mbqm(wrap32(ah), m[m0 + 8 * hid + row], m[m0 + 12 * hid + row])))
            gate[row] = tanh16(3 * v, t) if 2 * hid <= row < 3 * hid else sigmoid16(3 * v, t)
        e = m0 + 16 * hid  # the inter-gate products': m_fc, m_ig, s_fc, s_ig, m_h, s_h
        for j in range(hid):
            ig, fg, cg, og = gate[j], gate[hid + j], gate[2 * hid + j], gate[3 * hid + j]
            c = sat16(sat16(mbqm(fg * a16[co + j], m[e], m[e + 2])) + sat16(mbqm(ig * cg, m[e + 1], m[e + 3])))
            if qclip >= 0:
                c = -qclip if c < -qclip else (qclip if c > qclip else c)
            a16[co + j] = c
            v = zh + mbqm(tanh16((c * tm + rnd) >> ts, t) * og, m[e + 4], m[e + 5])
            v = -128 if v < -128 else (127 if v > 127 else v)
            a[ho + j] = v
            a[yo + step * hid + j] = v


# svdf record (int8): 2 F (filters) 3 I 4 M (memory) 5 U (units) 6 XO 7 YO 8 SO (state: F x M
# elements of SES bytes) 9 SES (2 int16, 1 int8) 10 ZX 11 ZS 12 ZY 13 M1 14 S1 15 M2 16 S2
# 17 ACC (F + U + I int32) 18 19 w [F, I] i8 20 21 t [F, M] (SES bytes) 22 23 b [U] i32

def svdf(E, P, k):
    """TFLM's integer SVDF (svdf_common.cc): the state shifts one step; each filter's newest
    entry is clamp(mbqm(w_f . (x - ZX))) + ZS, wrapped to the state's dtype as TFLM's cast;
    y_u = clamp8(ZY + mbqm(b_u + sum over the unit's filters of t_f . (state_f - ZS)))."""
    p = rec(P, k)
    a = E.a8
    f, nin, mem, units, xo, yo, so, es, zx, zs, zy, m1, s1, m2, s2 = p[2:17]
    st = E.a16 if es == 2 else a
    so //= es
    w, w0, b, b0 = E.s8[p[18]], p[19], E.s32[p[22]], p[23] // 4
    tv = _time_view(E.B[p[20]], es)
    t0 = p[21] // es
    lo, hi = (-32768, 32767) if es == 2 else (-128, 127)
    for i in range(f * mem - 1):
        st[so + i] = st[so + i + 1]
    for o in range(f):
        s = 0
        for i in range(nin):
            s += w[w0 + o * nin + i] * (a[xo + i] - zx)
        s = mbqm(wrap32(s), m1, s1)
        s = (lo if s < lo else (hi if s > hi else s)) + zs
        st[so + o * mem + mem - 1] = ((s - lo) & (2 * hi + 1)) + lo  # the cast to the state's dtype
    rank = f // units
    for u in range(units):
        acc = b[b0 + u]
        for o in range(u * rank, (u + 1) * rank):
            for j in range(mem):
                acc += tv[t0 + o * mem + j] * (st[so + o * mem + j] - zs)
        v = zy + mbqm(wrap32(acc), m2, s2)  # (int32 sums wrap, as TFLM's)
        a[yo + u] = -128 if v < -128 else (127 if v > 127 else v)


def _time_view(buf, es):
    from .program import _slot_view

    return _slot_view(buf, "i16" if es == 2 else "i8")
