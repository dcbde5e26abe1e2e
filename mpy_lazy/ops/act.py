# Elementwise activations. Float: relu, relu6, clip (lo, hi), leakyrelu (alpha), sigmoid, tanh,
# hardswish, hardsigmoid (alpha, beta: ONNX's), gelu (approx=tanh: its tanh form), abs. int16:
# leakyrelu, abs (m=multiplier,shift: TFLM's ABS, clamp(zo + mbqm(|x - zi|))), relu and relu6
# (clamp(zo + mbqm(x - zi)) to clamp=lo,hi; m default 2**30,1: x itself), rescale records;
# sigmoid and tanh (q 1/32768, 0; m=multiplier,shift scaling x to 3 x Q3.12, t= TFLM's uint16
# sigmoid table [256]), act16 records: TFLM's int16 LOGISTIC and TANH.
# int8: lut, a 256-entry table made at pack time by running TFLite Micro's own integer
# arithmetic (or the float function, for ONNX models) on every input code, so any elementwise
# int8 function (relu with requantization, relu6, sigmoid, tanh, leaky relu, requantize) is one
# table lookup and bit-exact by construction. It also reads and writes u8 values (a model's
# uint8 input or output: TFLM's uint8 <-> int8 QUANTIZE), as bytes: the table is indexed by
# the input byte read as int8, plus 128, and holds the output's bytes. All may run in place.
import math

from .._arith import bits_f32, f32_bits, rec, sigmoid16, tanh16
from ..kinds import ACT16, FACT, LUT, RESCALE
from . import Op as Base

_FN = {"relu": 0, "relu6": 1, "clip": 2, "leakyrelu": 3, "sigmoid": 4, "tanh": 5, "hardswish": 6, "hardsigmoid": 7,
       "gelu": 8, "abs": 10}


class Op(Base):
    inplace = True

    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        dt = x.dtype
        if name == "lut":
            from ..graph import zero_point

            dt = kv.get("dtype", "i8")
            if x.dtype not in ("i8", "u8") or dt not in ("i8", "u8"):
                raise self.fail("lut maps an i8 or u8 value to an i8 or u8 one", "dtype" if "dtype" in kv else "x")
            zero_point(kv["q"], dt, n)
            self.param("table", "t", (256,), "i8", init)
        elif name in ("sigmoid", "tanh") and x.dtype != "f32":
            self.quantized(("i16",))  # (an int8 one is a lut)
            q, m = kv["q"], kv.get("m")
            if x.q[1] or q[1] or abs(q[0] * 32768 - 1) > 1e-6:
                raise self.fail("an int16 %s takes zero point 0 and outputs q=3.0517578125e-05,0 (1/32768)" % name, "q")
            if "t" not in kv or m is None or len(m) != 2 or not 0 <= m[0] <= 32767 or not 0 <= m[1] <= 31:
                raise self.fail("an int16 %s needs m=multiplier,shift (0..32767, 0..31) and t= (the sigmoid table)"
                                % name, "m")
            self.mult = tuple(m)
            self.param("table", "t", (256,), "i16", init)
        elif name in ("relu", "relu6") and x.dtype != "f32":
            from ..graph import clamp

            self.quantized(("i16",))  # (an int8 one is a lut)
            m = kv.get("m", (1 << 30, 1))
            if len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                raise self.fail("m=multiplier,shift (0..2**31-1, -31..30)", "m")
            self.mult = tuple(m) * 2
            self.lohi = clamp(kv, n, "i16")
            self.scratch = 256
        elif name == "abs" and x.dtype != "f32":
            self.quantized(("i16",))  # (an int8 one is a lut)
            m = kv.get("m")
            if m is None or len(m) != 2 or not 0 <= m[0] < 2 ** 31 or not -31 <= m[1] <= 30:
                raise self.fail("an int16 abs needs m=multiplier,shift (0..2**31-1, -31..30)", "m")
            self.mult = tuple(m) * 2
            self.scratch = 256
        elif name == "leakyrelu" and x.dtype == "i16":
            # TFLM's int16 LEAKY_RELU: m=m_identity,s_identity,m_alpha,s_alpha (m_alpha < 0 for
            # alpha < 0); an int8 one is a lut
            self.quantized(("i16",))
            m = kv.get("m")
            if m is None or len(m) != 4 or not 0 <= m[0] < 2 ** 31 or not -2 ** 31 < m[2] < 2 ** 31 or \
                    not -31 <= m[1] <= 30 or not -31 <= m[3] <= 30:
                raise self.fail("an int16 leakyrelu needs m=m_identity,s_identity,m_alpha,s_alpha", "m")
            self.mult = tuple(m)
            self.scratch = 256
        else:
            self.float_only()
            if name == "clip" and not kv["lo"] <= kv["hi"]:
                raise self.fail("clip needs lo <= hi", "lo")
            if name == "clip":
                self.arg = (kv["lo"], kv["hi"])
            elif name == "hardsigmoid":
                self.arg = (kv.get("alpha", 0.2), kv.get("beta", 0.5))
            else:
                self.arg = (kv.get("alpha", 0.0), 0.0)
            self.fn = 9 if name == "gelu" and kv.get("approx") == "tanh" else _FN[name]
        self.out = (x.shape, dt, kv.get("q"))

    def records(self, c):
        x, y = self.x[0], self.y
        if self.name == "lut":
            return [c.record(LUT, [0, 0, 0, 0, c.off(x), c.off(y), y.size] + c.ref(self.table))]
        if x.dtype == "i16" and self.name in ("sigmoid", "tanh"):
            return [c.record(ACT16, [1 if self.name == "tanh" else 0, c.off(x), c.off(y), y.size] + list(self.mult)
                             + c.ref(self.table))]
        if x.dtype == "i16":  # leakyrelu, abs (ALT 3: the magnitude), relu, relu6 (ALT 0)
            m1, s1, m2, s2 = self.mult
            alt = {"abs": 3, "relu": 0, "relu6": 0}.get(self.name, 2 if m2 < 0 else 1)
            lo, hi = getattr(self, "lohi", (-32768, 32767))
            return [c.record(RESCALE, [c.off(x), c.off(y), y.size, 2, 2, x.q[1], y.q[1], lo, hi,
                                        c.scratch, 256, m1, s1, -m2 if m2 < 0 else m2, s2, alt])]

        return [c.record(FACT, [self.fn, c.off(x), c.off(y), y.size, f32_bits(self.arg[0]),
                                f32_bits(self.arg[1])])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {LUT: 'lut', FACT: 'fact', ACT16: 'act16'}


def _check_lut(r, E):
    n = r.range(8, "x", 1, 1 << 24)
    r.region(6, "x", n)
    r.region(7, "y", n)
    r.tensor(9, "table", ("i8",), 256)


def _check_act(r, E):
    fn = r.range(2, "op", 0, 10)
    n = r.range(5, "x", 1, 1 << 24)
    r.region(3, "x", 4 * n, 4)
    r.region(4, "y", 4 * n, 4)
    a, b = bits_f32(r[6]), bits_f32(r[7])
    if a - a != 0 or b - b != 0 or (fn == 2 and not a <= b):
        r.fail("lo", "%r, %r: finite, lo <= hi" % (a, b))


def _check_act16(r, E):
    r.range(2, "op", 0, 1)
    n = r.range(5, "x", 1, 1 << 24)
    r.region(3, "x", 2 * n, 2)
    r.region(4, "y", 2 * n, 2)
    r.range(6, "m", 0, 32767)
    r.range(7, "m", 0, 31)
    r.tensor(8, "table", ("i16",), 512)


def check(r, E):
    if r.kind == ACT16:
        _check_act16(r, E)
        r.inplace = 3
    elif r.kind == LUT:
        _check_lut(r, E)
        r.inplace = 6
    else:
        _check_act(r, E)
        r.inplace = 3


# lut record: 6 XO 7 YO 8 N 9 10 table (256 bytes, indexed by x + 128, x the input byte as int8)

def lut(E, P, k):
    p = rec(P, k)
    a = E.a8
    t, t0 = E.s8[p[9]], p[10] + 128
    xo, yo = p[6], p[7]
    for i in range(p[8]):
        a[yo + i] = t[t0 + a[xo + i]]


# act16 record: 2 FN (0 sigmoid, 1 tanh) 3 XO 4 YO (bytes) 5 N 6 M 7 S 8 9 table (TFLM's uint16
# sigmoid table [256]): v = (x M + 2**(S-1)) >> S (M 0: 3 x 2**S, S 0), then TFLM's int16
# Logistic / Tanh of v (3 x Q3.12) by the table, Q0.15 out.

def act16(E, P, k):
    a, t8 = E.a16, E.s8[P[k + 8]]
    t0 = P[k + 9]
    t = [(t8[t0 + 2 * i] & 255) | (t8[t0 + 2 * i + 1] & 255) << 8 for i in range(256)]
    xo, yo, n, m, s = P[k + 3] // 2, P[k + 4] // 2, P[k + 5], P[k + 6], P[k + 7]
    if m == 0:
        m, s = 3 << s, 0
    rnd = 1 << (s - 1) if s > 0 else 0
    f = tanh16 if P[k + 2] else sigmoid16
    for i in range(n):
        a[yo + i] = f((a[xo + i] * m + rnd) >> s, t)


# fact record: 2 FN (0 relu, 1 relu6, 2 clip, 3 leakyrelu, 4 sigmoid, 5 tanh, 6 hardswish, 7
# hardsigmoid, 8 gelu, 9 gelu's tanh approximation, 10 abs) 3 XO 4 YO 5 N 6 A 7 B (f32: clip's lo and
# hi, leakyrelu's alpha, hardsigmoid's alpha and beta)

def fact(E, P, k):
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
        elif fn == 10:
            v = -v if v < 0.0 else v
        else:  # hardswish, hardsigmoid, gelu
            v = _act_more(fn, v, lo, hi)
        a[yo + i] = v


def _act_more(fn, v, a, b):
    """fact's functions 6 (TFLM's HARD_SWISH), 7 (hardsigmoid: a, b its alpha and beta),
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
