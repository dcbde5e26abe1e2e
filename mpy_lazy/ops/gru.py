# gru: one unidirectional GRU layer over the rows of a (steps, features) value, batch 1 (ONNX's
# GRU with linear_before_reset=1, torch's nn.GRU): y (steps, out) holds the hidden state after
# each step. Gates in the order z, r, n (update, reset, new): w [3 out, in] and r [3 out, out]
# hold each gate's `out` rows in that order, b [6 out] the input products' biases then the
# hidden state's. Per step: z = sigmoid(Wz x + bxz + Rz h + bhz), r likewise,
# n = tanh(Wn x + bxn + r (Rn h + bhn)), h = n + z (h - n) = (1 - z) n + z h.
#   float: b f32, f32 arithmetic.
#   int8 (TFLite has no GRU kernel: built as TFLM's integer LSTM is): x, y int8, every product
#   requantized per row to int16 Q3.12 (sat16(mbqm(b + w x)) and sat16(mbqm(b + r h))), the gates
#   through TFLM's int16 sigmoid / tanh (Q0.15, the table t); the hidden state int16 Q0.15 (a
#   GRU's h stays in [-1, 1], so Q0.15 covers it whole, and the recurrent products read it at
#   16 bits, not at y's 8); y is h requantized to int8. b [6 out] i32 (x's zero point folded
#   into the first 3 out), m [12 out + 2] i32 (per row: the x products' multipliers, their
#   shifts, the h products' multipliers, their shifts; then h -> y's multiplier and shift),
#   t [256] i16 (TFLM's sigmoid table): docs/FORMAT.md "int8 arithmetic".
# The state h starts at zero. state=keep: it persists from one call to the next (Program.reset()
# starts it again); state=zero (the default, ONNX's semantics): every call starts from zero.
import math

from .._arith import mbqm, rdbpot, rec, sat16, sigmoid, sigmoid16, tanh16, wrap32
from ..kinds import FGRU, GRU
from . import Op as Base

MAX_HID8 = 512  # int8: 127 x 32767 x H stays within int32 (the recurrent products read h at 16 bits)


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 2:
            raise self.fail("takes a (steps, features) value, not %s" % (x.shape,), "x")
        steps, nin = x.shape
        hid = kv["out"]
        dt = self.quantized(("i8",))
        top = MAX_HID8 if dt == "i8" else 16383
        if not 1 <= hid <= top:
            raise self.fail("out=%d: the hidden size is 1..%d" % (hid, top), "out")
        self.keep = kv.get("state", "zero") == "keep"
        self.dims = (steps, nin, hid)
        if dt == "i8":
            self.needs("m", "t")
            self.param("weight", "w", (3 * hid, nin), "i8", init)
            self.param("recurrent", "r", (3 * hid, hid), "i8", init)
            self.param("bias", "b", (6 * hid,), "i32", init)
            self.param("requant", "m", (12 * hid + 2,), "i32", init)
            self.param("table", "t", (256,), "i16", init)
        else:
            if "t" in kv:
                raise self.fail("t= is for an int8 gru; the input is f32", "t")
            self.param("weight", "w", (3 * hid, nin), "f32", init)
            self.param("recurrent", "r", (3 * hid, hid), "f32", init)
            self.param("bias", "b", (6 * hid,), "f32", init)
        self.out = ((steps, hid), dt, kv.get("q"))

    @property
    def macs(self):
        steps, nin, hid = self.dims
        return steps * 3 * hid * (nin + hid)

    def _state_bytes(self):
        hid = self.dims[2]
        return (2 * hid + 3) // 4 * 4 if self.y.dtype == "i8" else 4 * hid

    def _work_bytes(self):
        return work_bytes(self.y.dtype == "i8", self.dims[1], self.dims[2])

    @property
    def scratch(self):
        return (self._work_bytes() + (0 if self.keep else self._state_bytes())) // 4

    @property
    def persist(self):
        return self._state_bytes() if self.keep else 0

    def records(self, c):
        steps, nin, hid = self.dims
        x, y = self.x[0], self.y
        s = c.scratch
        ho = c.state if self.keep else s + self._work_bytes()
        fields = [steps, nin, hid, y.q[1] if y.dtype == "i8" else 0, c.off(x), c.off(y), ho,
                  0 if self.keep else 1, s] + c.ref(self.weight) + c.ref(self.recurrent) + c.ref(self.bias)
        if y.dtype == "i8":
            return [c.record(GRU, fields + c.ref(self.requant) + c.ref(self.table))]
        return [c.record(FGRU, fields)]


def work_bytes(int8, nin, hid):
    """The kernel's scratch: int8: x_t and h as int32 columns, 3H int32 accumulators, the x and
    the h products as int16 (3H each); float: the x and the h products (3H f32 each)."""
    return 4 * (nin + 4 * hid) + 12 * hid if int8 else 24 * hid


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {GRU: 'gru', FGRU: 'fgru'}
FAST = '_viper_recurrent'


def check(r, E):
    fl = r.kind == FGRU
    steps, nin = r.dims((2, "x"), (3, "x"))
    hid = r.range(4, "out", 1, 16383 if fl else MAX_HID8)
    if steps * nin > 1 << 24 or steps * hid > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    size = 4 if fl else 1
    r.range(5, "zero_point", 0 if fl else -128, 0 if fl else 127)
    r.region(6, "x", steps * nin * size, size)
    r.region(7, "y", steps * hid * size, size)
    r.region(8, "state", hid * (4 if fl else 2), 4 if fl else 2)
    r.range(9, "state", 0, 1)
    r.region(10, "scratch", work_bytes(not fl, nin, hid), 4)
    dt = ("f32",) if fl else ("i8",)
    r.tensor(11, "weight", dt, 3 * hid * nin * size)
    r.tensor(13, "recurrent", dt, 3 * hid * hid * size)
    r.tensor(15, "bias", ("f32",) if fl else ("i32",), 24 * hid)
    if fl:
        return
    r.tensor(17, "requant", ("i32",), 4 * (12 * hid + 2))
    m = E.words(r[17], r[18], 12 * hid + 2)
    for at, n in ((0, 3 * hid), (6 * hid, 3 * hid), (12 * hid, 1)):
        for i in range(at, at + n):  # n multipliers, then n shifts
            if m[i] < 0 or not -31 <= m[i + n] <= 30:
                r.fail("requant", "multiplier %d, shift %d: TFLM takes 0..2**31-1 and -31..30" % (m[i], m[i + n]))
    r.tensor(19, "table", ("i16",), 512)
    t = E.halfs(r[19], r[20], 256)
    if t[0] & 0xFFFF < 32768:
        r.fail("table", "entry 0 is %d (TFLM's sigmoid table starts at 32768)" % (t[0] & 0xFFFF))
    for i in range(1, 256):
        if t[i] & 0xFFFF < t[i - 1] & 0xFFFF:
            r.fail("table", "entry %d decreases (a sigmoid table never does)" % i)
    if t[254] & 0xFFFF == 65535:  # (TFLM's is 65534; as ops/lstm.py's check)
        r.fail("table", "entry 254 is 65535: a gate of 32768 the int16 gates cannot hold")


def macs(P, k):  # every step: three gates over the input and the hidden state
    return P[k + 2] * 3 * P[k + 4] * (P[k + 3] + P[k + 4])


def state(P, k):
    """The hidden state kept across calls (kernels.state): int16 (int8 gru) or f32."""
    return ((P[k + 8], P[k + 4], 0, 2 if P[k] & 255 == GRU else 4),)


# gru record (int8): 2 T (steps) 3 I (input features) 4 H (hidden size) 5 ZY (y's zero point)
# 6 XO 7 YO 8 HO (h: H int16, Q0.15) 9 FLAGS (1: the state starts from zero at every call)
# 10 S (scratch: I + H int32 columns, 3H int32 accumulators, 3H + 3H int16) 11 12 w [3H, I]
# 13 14 r [3H, H] 15 16 b [6H] i32 (x's then h's products) 17 18 m [12H + 2] i32 (per row, gates
# z r n: the x products' multipliers, their shifts, the h products' multipliers, their shifts;
# then h -> y's multiplier and shift) 19 20 t [256] i16 (TFLM's sigmoid_table_uint16). Per step:
# gx = sat16(mbqm(bx + w x_t)), gh = sat16(mbqm(bh + r h)) (Q3.12); z, r = sigmoid16(3 sat16(gx +
# gh)); n = tanh16(3 sat16(gx_n + rdbpot(r gh_n, 15))); h = sat16(n + rdbpot(z (h - n), 15));
# y = clamp8(ZY + mbqm(h, my, sy)).

def gru(E, P, k):
    p = rec(P, k)
    a, a16 = E.a8, E.a16
    steps, nin, hid, zy, xo, yo, ho, flags = p[2:10]
    ho //= 2
    w, w0, r, r0 = E.s8[p[11]], p[12], E.s8[p[13]], p[14]
    b, b0, m, m0 = E.s32[p[15]], p[16] // 4, E.s32[p[17]], p[18] // 4
    t8, t0 = E.s8[p[19]], p[20]
    t = [(t8[t0 + 2 * i] & 255) | (t8[t0 + 2 * i + 1] & 255) << 8 for i in range(256)]
    h3 = 3 * hid
    if flags & 1:
        for j in range(hid):
            a16[ho + j] = 0
    gx, gh = [0] * h3, [0] * h3
    for step in range(steps):
        x0 = xo + step * nin
        for row in range(h3):
            ax = b[b0 + row]
            for i in range(nin):
                ax += w[w0 + row * nin + i] * a[x0 + i]
            ah = b[b0 + h3 + row]
            for i in range(hid):
                ah += r[r0 + row * hid + i] * a16[ho + i]
            gx[row] = sat16(mbqm(wrap32(ax), m[m0 + row], m[m0 + h3 + row]))
            gh[row] = sat16(mbqm(wrap32(ah), m[m0 + 2 * h3 + row], m[m0 + 3 * h3 + row]))
        for j in range(hid):
            z = sigmoid16(3 * sat16(gx[j] + gh[j]), t)
            rg = sigmoid16(3 * sat16(gx[hid + j] + gh[hid + j]), t)
            n = tanh16(3 * sat16(gx[2 * hid + j] + rdbpot(rg * gh[2 * hid + j], 15)), t)
            h = sat16(n + rdbpot(z * (a16[ho + j] - n), 15))
            a16[ho + j] = h
            v = zy + mbqm(h, m[m0 + 4 * h3], m[m0 + 4 * h3 + 1])
            a[yo + step * hid + j] = -128 if v < -128 else (127 if v > 127 else v)


# fgru record (f32): 2 T 3 I 4 H 6 XO 7 YO 8 HO (h: f32 H) 9 FLAGS 10 S (scratch: the x and the h
# products, 3H f32 each) 11 12 w [3H, I] 13 14 r [3H, H] 15 16 b [6H]. Each product and gate is
# stored as f32 (a board's float).

def fgru(E, P, k):
    p = rec(P, k)
    a = E.af
    steps, nin, hid = p[2], p[3], p[4]
    xo, yo, ho, go = p[6] // 4, p[7] // 4, p[8] // 4, p[10] // 4
    w, w0, r, r0, b, b0 = E.sf[p[11]], p[12] // 4, E.sf[p[13]], p[14] // 4, E.sf[p[15]], p[16] // 4
    h3 = 3 * hid
    if p[9] & 1:
        for j in range(hid):
            a[ho + j] = 0.0
    for step in range(steps):
        x0 = xo + step * nin
        for row in range(h3):
            s = 0.0
            wi = w0 + row * nin
            for i in range(nin):
                s += a[x0 + i] * w[wi + i]
            a[go + row] = s + b[b0 + row]
            s = 0.0
            ri = r0 + row * hid
            for i in range(hid):
                s += a[ho + i] * r[ri + i]
            a[go + h3 + row] = s + b[b0 + h3 + row]
        for j in range(hid):
            z = sigmoid(a[go + j] + a[go + h3 + j])
            rg = sigmoid(a[go + hid + j] + a[go + h3 + hid + j])
            a[go + 2 * hid + j] = math.tanh(a[go + 2 * hid + j] + rg * a[go + h3 + 2 * hid + j])
            n = a[go + 2 * hid + j]
            a[ho + j] = n + z * (a[ho + j] - n)
            a[yo + step * hid + j] = a[ho + j]
