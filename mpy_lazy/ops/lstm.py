# lstm: one unidirectional LSTM layer over the rows of a (steps, features) value, batch 1
# (TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM, ONNX's LSTM): y (steps, out) holds the hidden state
# after each step. Gates in the order i, f, c, o (input, forget, cell, output): w [4 out, in]
# and r [4 out, out] hold each gate's `out` rows in that order. TFLite Micro's kernels
# (lstm_eval.h): every gate reads x_t and the previous h; g = act(W x_t + R h + b), act sigmoid
# (tanh for the cell gate); c = f c + i g (clipped to +-clip when clip > 0); h = o tanh(c).
#   float: b [4 out] f32, TFLM's float arithmetic.
#   int8: x, y, h int8 (h has y's q), gates int16 Q3.12 -> Q0.15, the cell state int16 of
#   scale 2**cell; b [2, 4 out] i32 (the input and the recurrent products' biases, the zero
#   points folded in), m [16 out + 6] i32 (multipliers and shifts, per row for the products),
#   t [256] i16 (TFLM's sigmoid table): docs/FORMAT.md "int8 arithmetic".
#   int16 (TFLM's 16x8 LSTM): x, y, h int16 (zero points 0), int8 weights, the products
#   accumulated in int64 (TFLM's int64 biases, within int32 here: b [4 out], no recurrent
#   bias) and requantized by TFLM's int64 MultiplyByQuantizedMultiplier; the rest as int8's.
# The state (h, c) starts at zero (h at its zero point). state=keep: it persists from one call
# to the next, as TFLM's variable tensors do across Invoke() (Program.reset() starts it again,
# TFLM's MicroInterpreter::Reset()); state=zero (the default, ONNX's semantics): every call
# starts from zero.
import math

from .._arith import bits_f32, f32_bits, head, mbqm, mbqm64, rec, sat16, sigmoid, sigmoid16, tanh16, wrap32
from ..kinds import FLSTM, LSTM, LSTM16
from . import Op as Base


def words(nbytes):
    return (nbytes + 3) // 4


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 2:
            raise self.fail("takes a (steps, features) value, not %s" % (x.shape,), "x")
        steps, nin = x.shape
        hid = kv["out"]
        if not 1 <= hid <= 16383:
            raise self.fail("out=%d: the hidden size is 1..16383" % hid, "out")
        dt = self.quantized(("i8", "i16"))
        self.keep = kv.get("state", "zero") == "keep"
        clip = kv.get("clip", 0.0)
        if not clip >= 0:
            raise self.fail("clip=%r: the cell clip is >= 0 (0: none)" % clip, "clip")
        self.dims = (steps, nin, hid)
        if dt != "f32":
            self.needs("m", "t", "cell")
            p = kv["cell"]
            if not -31 <= p <= 2:
                raise self.fail("cell=%d: the cell state's scale is 2**cell, cell -31..2" % p, "cell")
            # TFLM: int16(clip / scale), truncated; -1: no clipping (clip 0)
            self.qclip = min(int(clip * 2.0 ** -p), 32767) if clip > 0 else -1
            s = 12 + p  # TFLM's Tanh(cell_state_scale_power): x * 3 << s, or (x * 3) >> -s rounded
            self.tanh = (3 << s, 0) if s >= 0 else (3, -s)
            self.param("weight", "w", (4 * hid, nin), "i8", init)
            self.param("recurrent", "r", (4 * hid, hid), "i8", init)
            if dt == "i16" and kv["q"][1] != 0:
                raise self.fail("q=%r: a 16x8 lstm's output (and hidden state) is symmetric, zero point 0"
                                % (kv["q"],), "q")
            self.param("bias", "b", ((8 if dt == "i8" else 4) * hid,), "i32", init)
            self.param("requant", "m", (16 * hid + 6,), "i32", init)
            self.param("table", "t", (256,), "i16", init)
        else:
            for key in ("m", "t", "cell"):
                if key in kv:
                    raise self.fail("%s= is for an integer lstm; the input is f32" % key, key)
            self.clip = clip
            self.param("weight", "w", (4 * hid, nin), "f32", init)
            self.param("recurrent", "r", (4 * hid, hid), "f32", init)
            self.param("bias", "b", (4 * hid,), "f32", init)
        self.out = ((steps, hid), dt, kv.get("q"))

    @property
    def macs(self):
        steps, nin, hid = self.dims
        return steps * 4 * hid * (nin + hid)

    def _state_bytes(self):
        hid = self.dims[2]
        if self.y.dtype == "i8":
            return 4 * (words(hid) + words(2 * hid))  # h int8, c int16
        if self.y.dtype == "i16":
            return 8 * words(2 * hid)  # h, c int16
        return 8 * hid

    def _work_bytes(self):
        """The kernel's scratch: int8: x_t and h as int32 columns, 4H int32 accumulators, two
        vectors of 4H int16 (the gates); int16: the same without the columns; float: the four
        gates."""
        _, nin, hid = self.dims
        if self.y.dtype == "i8":
            return 4 * (nin + 9 * hid)
        if self.y.dtype == "i16":
            return 32 * hid
        return 16 * hid

    @property
    def scratch(self):
        return (self._work_bytes() + (0 if self.keep else self._state_bytes())) // 4

    @property
    def persist(self):
        return self._state_bytes() if self.keep else 0

    def lag(self):
        # int8, int16: step t reads x_t whole before it writes y_t, so y may lie over a dying x
        # as long as no later row of x is under y_t: y starting (T - 1)(H - I) elements or more
        # before x
        if self.y.dtype == "f32":
            return None
        return lstm_lag(*self.dims) * (2 if self.y.dtype == "i16" else 1)

    def records(self, c):
        steps, nin, hid = self.dims
        x, y = self.x[0], self.y
        s = c.scratch
        ho = c.state if self.keep else s + self._work_bytes()
        co = ho + {"i8": 4 * words(hid), "i16": 4 * words(2 * hid), "f32": 4 * hid}[y.dtype]
        head = [steps, nin, hid]
        w, r, b = c.ref(self.weight), c.ref(self.recurrent), c.ref(self.bias)
        if y.dtype != "f32":
            kind = LSTM if y.dtype == "i8" else LSTM16
            return [c.record(kind, head + [y.q[1], c.off(x), c.off(y), ho, co, 0 if self.keep else 1,
                                           self.qclip, self.tanh[0], self.tanh[1], s] + w + r + b
                             + c.ref(self.requant) + c.ref(self.table))]

        return [c.record(FLSTM, head + [0, c.off(x), c.off(y), ho, co, 0 if self.keep else 1,
                                        f32_bits(self.clip), 0, 0, s] + w + r + b)]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {LSTM: 'lstm', FLSTM: 'flstm', LSTM16: 'lstm16'}
FAST = '_viper_recurrent'


def _check(r, E):
    fl = r.kind == FLSTM
    steps, nin = r.dims((2, "x"), (3, "x"))
    hid = r.range(4, "out", 1, 16383)
    if steps * nin > 1 << 24 or steps * hid > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    size = 4 if fl else (2 if r.kind == LSTM16 else 1)
    r.region(6, "x", steps * nin * size, size)
    r.region(7, "y", steps * hid * size, size)
    r.region(8, "state", hid * size, size)
    r.region(9, "state", hid * (4 if fl else 2), 4 if fl else 2)
    r.range(10, "state", 0, 1)
    r.tensor(15, "weight", ("f32" if fl else "i8",), 4 * hid * nin * (4 if fl else 1))
    r.tensor(17, "recurrent", ("f32" if fl else "i8",), 4 * hid * hid * (4 if fl else 1))
    if fl:
        clip = bits_f32(r[11])
        if not (clip - clip == 0 and clip >= 0):
            r.fail("clip", "%r is not finite and >= 0" % clip)
        r.region(14, "scratch", 16 * hid, 4)
        r.tensor(19, "bias", ("f32",), 16 * hid)
        return
    wide = r.kind == LSTM16
    if wide:
        r.range(5, "zero_point", 0, 0)  # (TFLM's 16x8 FullyConnected takes symmetric int16)
    else:
        r.range(5, "zero_point", -128, 127)
    r.range(11, "clip", -1, 32767)
    r.range(12, "cell", 1, 3 << 14)  # the tanh input's multiplier: |x * M| < 2**31
    r.range(13, "cell", 0, 31)
    r.region(14, "scratch", 32 * hid if wide else 4 * (nin + 9 * hid), 4)
    r.tensor(19, "bias", ("i32",), (16 if wide else 32) * hid)
    r.tensor(21, "requant", ("i32",), 4 * (16 * hid + 6))
    m = E.words(r[21], r[22], 16 * hid + 6)
    for at, n in ((0, 4 * hid), (8 * hid, 4 * hid), (16 * hid, 2), (16 * hid + 4, 1)):
        top = 7 if wide and at < 16 * hid else 30  # (TFLM's int64 MultiplyByQuantizedMultiplier: 7)
        for i in range(at, at + n):  # n multipliers, then n shifts
            if m[i] < 0 or not -31 <= m[i + n] <= top:
                r.fail("requant", "multiplier %d, shift %d: TFLM takes 0..2**31-1 and -31..%d" % (m[i], m[i + n], top))
    r.tensor(23, "table", ("i16",), 512)
    t = E.halfs(r[23], r[24], 256)
    if t[0] & 0xFFFF < 32768:
        r.fail("table", "entry 0 is %d (TFLM's sigmoid table starts at 32768)" % (t[0] & 0xFFFF))
    for i in range(1, 256):
        if t[i] & 0xFFFF < t[i - 1] & 0xFFFF:
            r.fail("table", "entry %d decreases (a sigmoid table never does)" % i)
    if t[254] & 0xFFFF == 65535:  # (TFLM's is 65534)
        r.fail("table", "entry 254 is 65535: a gate of 32768 the int16 gates cannot hold")


def lstm_lag(steps, nin, hid):
    """Bytes an int8 LSTM's output (T x H) may start before its dying input (T x I): no later
    row of x may lie under y_t when step t writes it."""
    return max(0, (steps - 1) * (hid - nin))


def check(r, E):
    _check(r, E)
    if r.kind != FLSTM:  # step t reads x_t whole before it writes y_t (lag())
        r.lag = lstm_lag(r[2], r[3], r[4]) * (2 if r.kind == LSTM16 else 1)


def macs(P, k):  # every step: four gates over the input and the hidden state
    return P[k + 2] * 4 * P[k + 4] * (P[k + 3] + P[k + 4])


def state(P, k):
    """The hidden and cell state kept across calls (kernels.state)."""
    if P[k] & 255 == LSTM:
        return ((P[k + 8], P[k + 4], P[k + 5], 1), (P[k + 9], P[k + 4], 0, 2))
    if P[k] & 255 == LSTM16:
        return ((P[k + 8], P[k + 4], 0, 2), (P[k + 9], P[k + 4], 0, 2))
    return ((P[k + 8], P[k + 4], 0, 4), (P[k + 9], P[k + 4], 0, 4))


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
# lstm16 record (16x8): the same fields, x, y, h int16 (XO, YO, HO in bytes, ZH 0), S 4H int32
# and 8H int16 (no columns), b [4H] i32 (x's products'; h's have none), the products' shifts
# -31..7. TFLM's lstm_eval (16x8 -> 16, int64 biases): gx = sat16(mbqm64(bx + w x_t)) +
# sat16(mbqm64(r h)) (saturated), then as above, h = clamp16(mbqm(tanh16(c) o)).

def lstm(E, P, k):
    p = rec(P, k)
    a16 = E.a16
    steps, nin, hid, zh, xo, yo, ho, co, flags, qclip, tm, ts = p[2:14]
    co //= 2
    wide = p[0] & 255 == LSTM16
    a, lo, hi, hb = E.a8, -128, 127, 4 * hid  # the values, h's range, where h's biases start
    if wide:
        a, lo, hi, hb = a16, -32768, 32767, -1
        xo, yo, ho = xo // 2, yo // 2, ho // 2
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
            ah = b[b0 + hb + row] if hb >= 0 else 0
            for i in range(hid):
                ah += r[r0 + row * hid + i] * a[ho + i]
            if wide:  # int64 sums, TFLM's int64 MultiplyByQuantizedMultiplier
                gx = mbqm64(ax, m[m0 + row], m[m0 + 4 * hid + row])
                gh = mbqm64(ah, m[m0 + 8 * hid + row], m[m0 + 12 * hid + row])
            else:
                gx = mbqm(wrap32(ax), m[m0 + row], m[m0 + 4 * hid + row])
                gh = mbqm(wrap32(ah), m[m0 + 8 * hid + row], m[m0 + 12 * hid + row])
            v = sat16(sat16(gx) + sat16(gh))
            gate[row] = tanh16(3 * v, t) if 2 * hid <= row < 3 * hid else sigmoid16(3 * v, t)
        e = m0 + 16 * hid  # the inter-gate products': m_fc, m_ig, s_fc, s_ig, m_h, s_h
        for j in range(hid):
            ig, fg, cg, og = gate[j], gate[hid + j], gate[2 * hid + j], gate[3 * hid + j]
            c = sat16(sat16(mbqm(fg * a16[co + j], m[e], m[e + 2])) + sat16(mbqm(ig * cg, m[e + 1], m[e + 3])))
            if qclip >= 0:
                c = -qclip if c < -qclip else (qclip if c > qclip else c)
            a16[co + j] = c
            v = zh + mbqm(tanh16((c * tm + rnd) >> ts, t) * og, m[e + 4], m[e + 5])
            v = lo if v < lo else (hi if v > hi else v)
            a[ho + j] = v
            a[yo + step * hid + j] = v


lstm16 = lstm  # (one kernel: the kind tells the widths)


# flstm record (f32): 2 T 3 I 4 H 6 XO 7 YO 8 HO 9 CO (f32 H each) 10 FLAGS (1: the state starts
# from zero at every call) 11 CLIP (f32; 0 none) 14 S (scratch: the four gates, 4H f32) 15 16 w
# [4H, I] 17 18 r [4H, H] 19 20 b [4H]. TFLM's float LSTM, each intermediate stored as f32 where
# TFLM stores it: gate = act((w x_t + b) + r h), c = f c + i g (clipped), h = o tanh(c).

def flstm(E, P, k):
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
            a[go + row] = math.tanh(v) if 2 * hid <= row < 3 * hid else sigmoid(v)
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
