# Arithmetic the ops' reference kernels share (mpy_lazy/ops/<op>.py): TFLite Micro's fixed-point
# helpers (gemmlowp's, on Python ints), requantization of a block, the records' f32 fields,
# typed views of the tensor slots, f16 weights. Imports nothing above it (backend only).
#
# The requantization header of an int8 record (words 2..5), which requant() reads from the
# work array E.W (the kernels copy it there with the block's position: the record may be
# flash):
#   W[0] RQ_Y  first output index of the block        W[3] ZY  output zero point
#   W[1] RQ_N  elements in the block                  W[4] LO  clamp low
#   W[2] OC    channels: element i uses multiplier/shift [i % OC]   W[5] HI  clamp high
#   W[6] ES    bytes per output element (1 int8, 2 int16)
#   W[7] ALT   0; 1: a negative accumulator uses the second OC multipliers and shifts (mq[2 OC:]),
#              2: the same, negated (TFLM's leaky relu: identity above 0, alpha below)
import array

from . import backend

try:  # reference kernels marked @micropython.native compile to machine code on MicroPython: no
    import micropython  # heap for their frames (0 B per inference), the same integers
except ImportError:  # CPython: plain functions

    class micropython:
        @staticmethod
        def native(f):
            return f

def rec(P, k):
    """The record at k as a list (the pure path's one allocation per op)."""
    return [P[k + i] for i in range(P[k + 1])]


def head(W, p, es=1, alt=0):
    """Copy the record's requantization header (OC, ZY, LO, HI) into the work array."""
    W[2], W[3], W[4], W[5], W[6], W[7] = p[2], p[3], p[4], p[5], es, alt


# --- TFLite Micro's fixed-point arithmetic (gemmlowp), on Python ints ---------------------

def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul of two int32."""
    if a == b == -2147483648:
        return 2147483647
    ab = a * b
    v = ab + (1073741824 if ab >= 0 else -1073741823)
    q = (-v if v < 0 else v) >> 31  # C division: truncate toward zero
    return -q if v < 0 else q


def rdbpot(x, e):
    """RoundingDivideByPOT: x / 2**e rounded half away from zero, 0 <= e <= 31."""
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def mbqm(x, m, s):
    """MultiplyByQuantizedMultiplier: x * m * 2**(s - 31), TFLM's double rounding. A left
    shift wraps to int32, as TFLM's `x * (1 << s)` does on the hardware it runs on."""
    if s > 0:
        return srdhm(((x << s) + 2147483648) % 4294967296 - 2147483648, m)
    return rdbpot(srdhm(x, m), -s)


# --- TFLM's int16 activations (the int8 LSTM's and GRU's gates) and its float logistic -----

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


def sigmoid(v):
    """The logistic function as TFLM's reference Logistic (float; math imported here: the
    integer programs never need it)."""
    import math

    if v > 16.619047164916992:  # TFLM's reference Logistic
        return 1.0
    if v < -9.0:
        return math.exp(v)
    return 1.0 / (1.0 + math.exp(-v))


# 16x8 conv / depthwise record (kinds conv16, dw16): the conv record with int16 values (XO, YO
# in bytes), 27 ACC64 (1: TFLM's int64 accumulator and its int64 MultiplyByQuantizedMultiplier,
# for int64 biases; 0: int32 ones, for int32 biases; ZX is 0) and ACC holding RP * OC
# accumulators of 8 bytes.

def mbqm64(x, m, s):
    """TFLM's MultiplyByQuantizedMultiplier(int64 x, m, s): the multiplier rounded to 16 bits,
    one rounding shift (its result cast to int32)."""
    r = (m + 32768) >> 16 if m < 0x7FFF0000 else 0x7FFF
    t = 15 - s
    return wrap32((x * r + (1 << (t - 1))) >> t)


# add / sub record (kinds add, sub: int8; add16, sub16: int16): 2 OC (1) 3 ZY 4 LO 5 HI 6 X1
# 7 X2 8 YO (bytes) 9 N 10 BC (x2 repeats every BC elements: BC = N, or C for a per-channel x2)
# 11 BLOCK (256) 12 Z1 13 Z2 14 T (512 int32) 15 ACC (BLOCK int32) 16 M1 17 S1 18 M2 19 S2
# 20 M 21 S (inline, each pair a one-channel mq). TFLM's add and sub: each input rescaled,
# (q - Z) << 20 (int8) or << 15 (int16) through mbqm(., m_i, s_i), then the sum or difference
# through mbqm(., m, s). int8: T holds the rescaled value of every code of x1, then of x2, built
# at each call; int16: T holds a block of each.

def wrap32(v):
    return ((v + 2147483648) & 4294967295) - 2147483648


def requant(acc, ao, mq, mo, dst, W):
    """dst[RQ_Y + i] = clamp(ZY + mbqm(acc[ao + i], m[c], s[c])) for i < RQ_N, c = i % OC;
    mq[mo:] holds OC multipliers then OC shifts (ALT: then OC more of each, for negative
    accumulators). dst is the arena as int8 or int16 (ES), or with OC < 0 an int32 array that
    gets the bare mbqm() results (channel count -OC; add's tables)."""
    y, n, oc, zy, lo, hi, alt = W[0], W[1], W[2], W[3], W[4], W[5], W[7]
    raw = oc < 0
    if raw:
        oc = -oc
    c = 0
    for i in range(n):
        x = acc[ao + i]
        if alt and x < 0:
            v = mbqm(x, mq[mo + 2 * oc + c], mq[mo + 3 * oc + c])
            if alt == 2 and v != -2147483648:  # (C's int32 negation leaves INT32_MIN so)
                v = -v
        else:
            v = mbqm(x, mq[mo + c], mq[mo + oc + c])
        c += 1
        if c == oc:
            c = 0
        if raw:
            dst[y + i] = v
            continue
        v += zy
        dst[y + i] = lo if v < lo else (hi if v > hi else v)


# --- f32 and f16 ---------------------------------------------------------------------------

_F32 = array.array("f", (0.0,))
_I32 = array.array("i", (0,))


def f32_bits(x):
    """The int32 holding float x as binary32 (records keep floats so)."""
    _F32[0] = x
    return array.array("i", bytes(_F32))[0]


def bits_f32(v):
    _I32[0] = v
    return array.array("f", bytes(_I32))[0]


FLT_MAX = (2.0 - 2.0 ** -23) * 2.0 ** 127  # (exact in float32; a parsed literal may round to inf)
# the act field: none, relu, relu6, finite -> (lo, hi)
ACTS = (None, (0.0, FLT_MAX), (0.0, 6.0), (-FLT_MAX, FLT_MAX))  # (relu: TFLite's max too)


def f16_to_f32(src, first, dst, d0, n):
    """dst[d0 + i] = the f16 value src[first + i] (little-endian bytes), i < n."""
    import struct

    i = 0
    while i < n:
        m = n - i if n - i < 32 else 32  # bounded temporary tuples
        vals = struct.unpack_from("<%de" % m, src, 2 * (first + i))
        for j in range(m):
            dst[d0 + i + j] = vals[j]
        i += m


def weights(E, p, wi, n_f, first, fs):
    """(indexable, base) of n_f weights from element `first` of the weight tensor at fields
    wi (slot, offset): in place for f32, decoded into the scratch at byte fs for f16."""
    slot, off = p[wi], p[wi + 1]
    if p[4] == 1:
        return E.sf[slot], off // 4 + first
    E.f16(slot, off // 2 + first, fs, n_f)
    return E.af, fs // 4


# --- tensor slots ----------------------------------------------------------------------------

def slot_view(b, dtype):
    """A typed view of a whole buffer (a slot, or the program), or the buffer itself when it
    is a RAM array of that type already."""
    if isinstance(b, array.array) and backend._typecode(b) == backend.TYPECODE[dtype]:
        return b
    size = backend.ITEMSIZE[dtype]
    n = backend.nbytes(b) // size
    mv = memoryview(b)
    if hasattr(mv, "cast"):  # CPython casts whole items only
        mv = mv.cast("B")[: n * size]
    return backend.typed_view(mv, dtype, n)


def i64(a, j):
    """The int64 at word j of the i32 view a (its low word first; a big int on a board)."""
    return a[j + 1] * 4294967296 + (a[j] & 4294967295)


def slot_ints(E, slot, es):
    """Slot `slot` as signed integers of es bytes (the pure path makes what it lacks)."""
    if es == 1:
        return E.s8[slot]
    if es == 4:
        return E.s32[slot]
    return slot_view(E.B[slot], "i16")


def abs_sums(buf, g, out):
    """out[o] = sum |w| over output channel o's filter: int8 weights in buf at byte g[0], OC
    g[1], KH g[2], KW g[3], CPG g[4], strides g[5..8] (WSO, WSY, WSX, WSC), WB g[9]."""
    off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]
    for o in range(oc):
        s = 0
        for ky in range(kh):
            for kx in range(kw):
                wi = off + (o >> wb) * wso + (o & ((1 << wb) - 1)) + ky * wsy + kx * wsx
                for _ in range(cpg):
                    v = int(buf[wi])
                    if v > 127:
                        v -= 256
                    s += v if v >= 0 else -v
                    wi += wsc
        out[o] = s
