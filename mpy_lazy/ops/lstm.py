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
# The state (h, c) starts at zero (h at its zero point). state=keep: it persists from one call
# to the next, as TFLM's variable tensors do across Invoke() (Program.reset() starts it again,
# TFLM's MicroInterpreter::Reset()); state=zero (the default, ONNX's semantics): every call
# starts from zero.
from .. import check
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
        dt = self.quantized(("i8",))
        self.keep = kv.get("state", "zero") == "keep"
        clip = kv.get("clip", 0.0)
        if not clip >= 0:
            raise self.fail("clip=%r: the cell clip is >= 0 (0: none)" % clip, "clip")
        self.dims = (steps, nin, hid)
        if dt == "i8":
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
            self.param("bias", "b", (8 * hid,), "i32", init)
            self.param("requant", "m", (16 * hid + 6,), "i32", init)
            self.param("table", "t", (256,), "i16", init)
        else:
            for key in ("m", "t", "cell"):
                if key in kv:
                    raise self.fail("%s= is for an int8 lstm; the input is f32" % key, key)
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
        return 8 * hid

    def _work_bytes(self):
        """The kernel's scratch: int8: x_t and h as int32 columns, 4H int32 accumulators, two
        vectors of 4H int16 (the gates); float: the four gates."""
        _, nin, hid = self.dims
        if self.y.dtype == "i8":
            return 4 * (nin + 9 * hid)
        return 16 * hid

    @property
    def scratch(self):
        return (self._work_bytes() + (0 if self.keep else self._state_bytes())) // 4

    @property
    def persist(self):
        return self._state_bytes() if self.keep else 0

    def lag(self):
        # int8: step t reads x_t whole before it writes y_t, so y may lie over a dying x as long
        # as no later row of x is under y_t: y starting (T - 1)(H - I) bytes or more before x
        return check.lstm_lag(*self.dims) if self.y.dtype == "i8" else None

    def records(self, c):
        steps, nin, hid = self.dims
        x, y = self.x[0], self.y
        s = c.scratch
        ho = c.state if self.keep else s + self._work_bytes()
        co = ho + (4 * words(hid) if y.dtype == "i8" else 4 * hid)
        head = [steps, nin, hid]
        w, r, b = c.ref(self.weight), c.ref(self.recurrent), c.ref(self.bias)
        if y.dtype == "i8":
            return [c.record(check.LSTM, head + [y.q[1], c.off(x), c.off(y), ho, co, 0 if self.keep else 1,
                                                 self.qclip, self.tanh[0], self.tanh[1], s] + w + r + b
                             + c.ref(self.requant) + c.ref(self.table))]
        from ..program import f32_bits

        return [c.record(check.FLSTM, head + [0, c.off(x), c.off(y), ho, co, 0 if self.keep else 1,
                                              f32_bits(self.clip), 0, 0, s] + w + r + b)]
