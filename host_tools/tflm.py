"""TensorFlow Lite Micro's integer arithmetic, on the host, exactly: the quantization parameters
its kernels compute in their prepare step (QuantizeMultiplier, the add/mul/mean/softmax/
logistic/tanh/relu parameters) and gemmlowp's fixed-point functions.

mpy-lazy computes these once at pack time and stores integers (multipliers, shifts, lookup
tables) in the container, so the board does no float work and gives TFLM's results bit for
bit. Written from TFLM's and gemmlowp's sources (tensorflow/lite/kernels/internal/
quantization_util.cc, common.h, reference/integer_ops/*.h; gemmlowp fixedpoint/fixedpoint.h),
double-rounding variant (TFLM's default build, which the tflite-micro package uses).
Scalars are Python ints (no overflow); `*_np` versions work on int64 numpy arrays."""
import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def tf_round(x):
    """TfLiteRound / std::round: half away from zero."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def quantize_multiplier(m):
    """(multiplier, shift) with m = multiplier * 2**(shift - 31), multiplier in [2**30, 2**31)."""
    if m == 0.0:
        return 0, 0
    q, shift = math.frexp(m)
    q_fixed = tf_round(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def f32(x):
    """The float32 value of x, as a Python float (TFLite stores scales as float32)."""
    return float(np.float32(x))


# --- gemmlowp fixed point on int32 raw values ---------------------------------------------

def srdhm(a, b):
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    v = ab + (1 << 30 if ab >= 0 else 1 - (1 << 30))
    q = abs(v) >> 31
    return q if v >= 0 else -q


def rdbpot(x, e):
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def wrap32(x):
    """x as a C int32 after overflow (two's complement wrap)."""
    return ((x + (1 << 31)) % (1 << 32)) - (1 << 31)


def mbqm(x, m, s):
    """MultiplyByQuantizedMultiplier (double rounding); `x * (1 << s)` wraps to int32 as TFLM's
    C code does on the hardware it runs on."""
    if s > 0:
        return srdhm(wrap32(x * (1 << s)), m)
    return rdbpot(srdhm(x, m), -s)


def sat_shl(x, e):
    """SaturatingRoundingMultiplyByPOT<e>: a saturating left shift for e > 0, a rounding right
    shift for e < 0."""
    if e <= 0:
        return rdbpot(x, -e)
    t = (1 << (31 - e)) - 1
    if x > t:
        return INT32_MAX
    if x < -t:
        return INT32_MIN
    return x << e


def _exp_quarter(a):
    """exp on [-1/4, 0) in Q0.31."""
    const_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return const_term + srdhm(const_term, x + poly)


_EXP_STEPS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits):
    """gemmlowp's exp for a <= 0 given in Q(integer_bits).(31 - integer_bits); Q0.31 result."""
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter(sat_shl(a_mod, integer_bits))
    remainder = a_mod - a
    for exponent, mult in _EXP_STEPS:
        if integer_bits > exponent and remainder & (1 << (frac + exponent)):
            result = srdhm(result, mult)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0
    if a == 0:
        result = INT32_MAX
    return result


def _newton(a):
    """Shared Newton-Raphson of one_over_one_plus_x / one_minus_x_over_one_plus_x (Q2.29)."""
    half = (a + INT32_MAX + (1 if a + INT32_MAX >= 0 else -1))
    half = half // 2 if half >= 0 else -((-half) // 2)  # RoundingHalfSum(a, One)
    x = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half, x)
        x = wrap32(x + sat_shl(srdhm(x, one_minus), 2))  # (int32 addition: wraps outside (0, 1), as in C)
    return x


def one_over_one_plus_x(a):
    return sat_shl(_newton(a), 1)


def one_minus_x_over_one_plus_x(a):
    return sat_shl(_newton(a) - (1 << 29), 2)


def logistic_fp(a):
    """gemmlowp logistic, input Q4.27, output Q0.31."""
    if a == 0:
        return 1 << 30
    pos = one_over_one_plus_x(exp_on_negative_values(-abs(a), 4))
    return pos if a > 0 else INT32_MAX - pos


def tanh_fp(a):
    """gemmlowp tanh, input Q4.27, output Q0.31."""
    if a == 0:
        return 0
    n = a if a < 0 else -a
    t = one_minus_x_over_one_plus_x(exp_on_negative_values(n, 5))
    return -t if a < 0 else t


def input_radius(integer_bits, left_shift, total_bits=31):
    """CalculateInputRadius."""
    return int(math.floor(((1 << integer_bits) - 1) * float(1 << (total_bits - integer_bits))
                          / float(1 << left_shift)))


# --- per-op parameters (what TFLM's Prepare computes) --------------------------------------

RANGE = {"i8": (-128, 127), "i16": (-32768, 32767), "i32": (INT32_MIN, INT32_MAX), "u8": (0, 255)}


def activation_range(act, scale, zp, dtype="i8"):
    """CalculateActivationRangeQuantized for an integer output dtype: (min, max)."""
    lo, hi = RANGE[dtype]
    if act in ("relu", "relu6", "relu_n1_to_1"):
        lo = max(lo, zp + tf_round(np.float32(0.0) / np.float32(scale)) if act != "relu_n1_to_1"
                 else zp + tf_round(np.float32(-1.0) / np.float32(scale)))
    if act == "relu6":
        hi = min(hi, zp + tf_round(float(np.float32(6.0) / np.float32(scale))))
    elif act == "relu_n1_to_1":
        hi = min(hi, zp + tf_round(float(np.float32(1.0) / np.float32(scale))))
    return lo, hi


def fold_input_zero_point(bias, w, axis, zx):
    """The int32 bias the runtime adds (docs/FORMAT.md): TFLM's bias minus zx * sum(w) over each
    output channel's whole filter, so the kernels multiply int8 by int8 (w * x) and a padded
    position reads zx. Raises ValueError when an accumulator, TFLM's or ours, could leave int32.
    bias: int32 codes (or None), w: int8 codes with the output channels along `axis`."""
    per = np.moveaxis(np.asarray(w, dtype=np.int64), axis, 0).reshape(w.shape[axis], -1)
    b = np.zeros(per.shape[0], np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    folded = b - int(zx) * per.sum(axis=1)
    span = np.abs(per).sum(axis=1)
    lo, hi = per * (-128 - int(zx)), per * (127 - int(zx))  # TFLM's w * (x - zx), x in -128..127
    tflm_lo, tflm_hi = b + np.minimum(lo, hi).sum(axis=1), b + np.maximum(lo, hi).sum(axis=1)
    ours_lo, ours_hi = folded - 128 * span, folded + 128 * span  # (as the board's load check bounds it)
    if min(int(tflm_lo.min()), int(ours_lo.min())) < -2 ** 31 or max(int(tflm_hi.max()), int(ours_hi.max())) > 2 ** 31 - 1:
        raise ValueError("the int32 accumulator could overflow (a filter of %d values)" % per.shape[1])
    return folded.astype(np.int32)


def conv_multipliers(s_in, w_scales, s_out, legacy=False):
    """Per-channel (multipliers, shifts) of conv/depthwise/fully connected. legacy: TFLite's uint8
    kernels' (GetQuantizedConvolutionMultipler: the input and weight scales multiplied in float32,
    then divided in double; one multiplier in 10**5 or so comes out a few units apart)."""
    def product(s):
        return float(np.float32(s_in) * np.float32(s)) if legacy else float(np.float32(s_in)) * float(np.float32(s))
    out = [quantize_multiplier(product(s) / float(np.float32(s_out))) for s in w_scales]
    return [m for m, _ in out], [s for _, s in out]


def add_params(s1, s2, s_out, left_shift=20):
    """(m1, s1, m2, s2, m, s) of TFLM's integer add (left shift 20 for int8, 15 for int16;
    its Prepare computes in double)."""
    s1, s2, s_out = f32(s1), f32(s2), f32(s_out)
    twice = 2 * max(s1, s2)
    m1 = quantize_multiplier(s1 / twice)
    m2 = quantize_multiplier(s2 / twice)
    mo = quantize_multiplier(twice / ((1 << left_shift) * s_out))
    return m1 + m2 + mo


def sub_params(s1, s2, s_out, left_shift=20):
    """(m1, s1, m2, s2, m, s) of TFLM's integer sub: add's (the tflite-micro interpreter
    computes them in double, as for add; measured on TFLM's own sub models)."""
    return add_params(s1, s2, s_out, left_shift)


def requantize_params(s_in, s_out):
    """(multiplier, shift) of TFLM's integer QUANTIZE (a requantization; computed in double)."""
    return quantize_multiplier(float(np.float64(f32(s_in)) / np.float64(f32(s_out))))


def leaky_relu_params(s_in, s_out, alpha):
    """(m_identity, s_identity, m_alpha, s_alpha) of TFLM's LEAKY_RELU, the ratios in double
    (what the tflite-micro interpreter computes: measured on TFLM's own int16 models); a
    negative alpha gives a negative multiplier."""
    s_in, s_out, a = f32(s_in), f32(s_out), f32(alpha)
    ma, sa = quantize_multiplier(s_in * a / s_out)
    mi, si = quantize_multiplier(s_in / s_out)
    return mi, si, ma, sa


def mul_params(s1, s2, s_out):
    return quantize_multiplier(f32(s1) * f32(s2) / f32(s_out))


def mean_params(s_in, s_out, n):
    """TFLM's int8 MEAN: the input/output multiplier with 1/n folded in (QuantizedMeanOrSum)."""
    m, s = quantize_multiplier(f32(s_in) / f32(s_out))
    shift = 63 - (64 - n.bit_length())  # 63 - CountLeadingZeros(uint64 n)
    shift = min(shift, 32, 31 + s)
    m = int((m << shift) // n)
    return m, s - shift


def lut16(input_scale, input_zp, output_scale, output_zp, fn):
    """TFLM's LUTPopulate<int16_t> (tensorflow/lite/kernels/internal/common.h): 513 int16
    samples of fn over the input's range, each corrected by half the interpolation error at
    its midpoint, in float32 arithmetic as TFLM computes it."""
    f = np.float32
    s_in, s_out = f(input_scale), f(output_scale)
    lo, hi = s_in * f(-32768 - input_zp), s_in * f(32767 - input_zp)
    out_lo, out_hi = s_out * f(-32768 - output_zp), s_out * f(32767 - output_zp)
    step = (hi - lo) / f(512)
    half = step / f(2)
    inv = f(65536) / (out_hi - out_lo)

    def rnd(v):
        return f(tf_round(float(v)))

    lut = []
    for i in range(512):
        val, mid, nxt = fn(lo + f(i) * step), fn(lo + f(i) * step + half), fn(lo + f(i + 1) * step)
        sample = rnd(val * inv)
        interp = rnd((nxt * inv + rnd(val * inv)) / f(2))
        bias = rnd((interp - rnd(mid * inv)) / f(2))
        lut.append(int(min(max(sample - bias, f(-32768)), f(32767))))
    lut.append(int(min(max(rnd(fn(hi) * inv), f(-32768)), f(32767))))
    return lut


def softmax16_params(s_in, beta):
    """TFLM's int16 softmax (softmax_common.cc): (multiplier, shift) scaling an input
    difference to [-65535, 0] for [-10, 0], and its two 513-entry tables, exp over [-10, 0]
    then 1 / (1 + x) over [0, 1] (Q0.15)."""
    m = quantize_multiplier(float(np.float32(s_in)) * float(np.float32(beta)) / (10.0 / 65535.0))
    span = np.float32(65535)
    exp = lut16(np.float32(10.0) / span, 32767, np.float32(2.0) / span, 0,
                lambda v: np.float32(math.exp(float(v))))  # (glibc's expf: correctly rounded)
    recip = lut16(np.float32(1.0) / span, -32768, np.float32(2.0) / span, 0,
                  lambda v: np.float32(1.0) / (np.float32(1.0) + v))
    return m, exp + recip
def inv_sqrt(x):
    """TFLM's GetInvSqrtQuantizedMultiplierExp(x, kReverseShift): (multiplier, shift), x >= 0."""
    if x <= 1:
        return INT32_MAX, 0
    shift = 11
    while x >= 1 << 29:
        x //= 4
        shift += 1
    clz = 32 - x.bit_length()
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half_input = sat_shl(x >> 1, -1)  # Q3.28
    half_three = (1 << 28) + (1 << 27)
    v = 1 << 28  # One in Q3.28
    for _ in range(5):
        v3 = sat_shl(srdhm(srdhm(v, v), v), 6)  # Rescale<3> of a Q9 product
        v = sat_shl(srdhm(half_three, v) - srdhm(half_input, v3), 3)
    v = srdhm(v, 1518500250)  # sqrt(2) / 2 in Q0.31
    if shift < 0:
        v <<= -shift
        shift = 0
    return v, -shift


def log_softmax_params(s_in):
    """TFLM's int8 LOG_SOFTMAX Prepare (PreprocessLogSoftmaxScalingExp, beta 1, 5 integer bits):
    (input multiplier, its left shift, reverse scaling divisor, its left shift (<= 0), diff_min)."""
    real = min(f32(s_in) * (1 << 26), float((1 << 31) - 1))
    m, s = quantize_multiplier(real)
    rsd, rls = quantize_multiplier((1 << (31 - s)) / float(m)) if m else (0, 0)
    return m, s, rsd, rls, -input_radius(5, s)


def log_softmax_table(m, s, diff_min):
    """512 int32: for d = 0..255, the Q12.19 exp of the input difference -d (0 where -d <
    diff_min), then its Q5.26 value mbqm(-d, m, s)."""
    q5 = [mbqm(-d, m, s) for d in range(256)]
    exps = [rdbpot(exp_on_negative_values(q5[d], 5), 12) if -d >= diff_min else 0 for d in range(256)]
    return exps + q5


def _sat_pot(x, e):
    """SaturatingRoundingMultiplyByPOTParam, e >= 0."""
    return x if e == 0 else sat_shl(x, e)


def log_x_ge_1(x, in_bits=12, out_bits=5):
    """gemmlowp-style log_x_for_x_greater_than_or_equal_to_1<out_bits>(x in Q(in_bits)): raw
    Q(out_bits) (TFLite's common.h, its constants and steps)."""
    acc_bits = out_bits + 1
    log_2, sqrt_sqrt_half, sqrt_half = 1488522236, 1805811301, 1518500250
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    quarter = rdbpot(536870912, acc_bits)  # Rescale<acc_bits>(1/4)
    ha = 32 - (x & 0xFFFFFFFF).bit_length()  # CountLeadingZeros
    r_a = _sat_pot(srdhm(_sat_pot(x, ha - 1), sqrt_half), 1)
    za_adj = max(INT32_MIN, min(INT32_MAX, _sat_pot(in_bits - ha, 31 - acc_bits) + quarter))
    zb = srdhm(x, sqrt_half)
    hb = 32 - (zb & 0xFFFFFFFF).bit_length() - 1
    r_b = _sat_pot(x, hb)
    zb_adj = max(INT32_MIN, min(INT32_MAX, _sat_pot(in_bits - hb, 31 - acc_bits) - quarter))
    r, z_adj = min(r_a, r_b), max(za_adj, zb_adj)
    total = r + sqrt_sqrt_half
    p = (total + (1 if total >= 0 else -1))
    p = p // 2 if p >= 0 else -((-p) // 2)  # RoundingHalfSum
    q = wrap32(2 * wrap32(r - sqrt_sqrt_half))
    sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, sq), alpha_n))
    denom = wrap32(srdhm(p, wrap32(alpha_i + q + srdhm(alpha_d, sq))) + srdhm(alpha_f, q))
    out = wrap32(srdhm(z_adj, log_2) + srdhm(rdbpot(num, acc_bits), one_over_one_plus_x(denom)))
    return sat_shl(out, acc_bits - out_bits)


def log_softmax_np(x, m, s, rsd, rls, diff_min, table):  # (m, s: in the table)
    """TFLM's int8 LOG_SOFTMAX of the rows of x (the last axis), from its Prepare parameters and
    log_softmax_table."""
    out = np.empty(x.shape, np.int64)
    for i, row in enumerate(x.reshape(-1, x.shape[-1])):
        d = [int(v) - int(row.max()) for v in row]
        log_sum = log_x_ge_1(sum(table[-v] for v in d))
        floor = max(diff_min - 1, mbqm(log_sum + INT32_MIN, rsd, rls))
        out.reshape(-1, x.shape[-1])[i] = [max(-128, min(127, rdbpot(wrap32(table[256 - v] - log_sum), 22) + 127))
                                            if v > floor else -128 for v in d]
    return out


def softmax_table(s_in, beta=1.0):
    """exps[d] for input differences -d, d = 0..255 (Q0.31; 0 where TFLM skips the element):
    TFLM's int8 softmax with 5 integer bits for the scaled difference."""
    real = min(beta * f32(s_in) * (1 << 26), float((1 << 31) - 1))
    mult, shift = quantize_multiplier(real)  # PreprocessSoftmaxScaling (> 1: shift >= 0)
    diff_min = -input_radius(5, shift)
    out = []
    for d in range(256):
        if -d < diff_min:
            out.append(0)
            continue
        scaled = srdhm(-d * (1 << shift), mult)  # MultiplyByQuantizedMultiplierGreaterThanOne
        out.append(exp_on_negative_values(scaled, 5))
    return out


def _frexp_multiplier(scale):
    q, shift = math.frexp(f32(scale) * float(1 << 27))
    return tf_round(q * (1 << 31)), shift


def logistic_table(s_in, z_in):
    """int8 -> int8 table of TFLM's LOGISTIC (output 1/256, -128), index q + 128."""
    mult, shift = _frexp_multiplier(s_in)
    radius = input_radius(4, shift)
    out = []
    for q in range(-128, 128):
        x = q - z_in
        if x <= -radius:
            out.append(-128)
        elif x >= radius:
            out.append(127)
        else:
            v = rdbpot(logistic_fp(mbqm(x, mult, shift)), 23) - 128
            out.append(max(-128, min(127, v)))
    return out


def tanh_table(s_in, z_in):
    """int8 -> int8 table of TFLM's TANH (output 1/128, 0), index q + 128."""
    mult, shift = _frexp_multiplier(s_in)
    radius = input_radius(4, shift)
    out = []
    for q in range(-128, 128):
        x = q - z_in
        if x <= -radius:
            out.append(-128)
        elif x >= radius:
            out.append(127)
        else:
            out.append(max(-128, min(127, rdbpot(tanh_fp(mbqm(x, mult, shift)), 24))))
    return out


def requant_table(s_in, z_in, s_out, z_out, lo=-128, hi=127):
    """int8 -> int8 table of clamp(z_out + mbqm(q - z_in, m, s)), m = s_in / s_out: TFLM's
    int8 RELU (lo = the output zero point) and QUANTIZE int8 -> int8."""
    m, s = quantize_multiplier(f32(s_in) / f32(s_out))
    return [max(lo, min(hi, z_out + mbqm(q - z_in, m, s))) for q in range(-128, 128)]


def float_table(fn, s_in, z_in, s_out, z_out):
    """int8 -> int8 table of a float function (ONNX models): round(fn(real in) / s_out) + z_out."""
    out = []
    for q in range(-128, 128):
        y = fn(f32(s_in) * (q - z_in))
        out.append(max(-128, min(127, tf_round(y / f32(s_out)) + z_out)))
    return out



def inv_sqrt_multiplier(v):
    """GetInvSqrtQuantizedMultiplierExp(v, kReverseShift): (multiplier, left shift) of
    1 / sqrt(v) for an int32 v >= 0 (0 and 1 give INT32_MAX, 0), gemmlowp's Newton-Raphson in
    Q3.28."""
    if v <= 1:
        return INT32_MAX, 0
    shift = 11
    while v >= 1 << 29:
        v //= 4
        shift += 1
    pairs = (31 - v.bit_length()) // 2 - 1  # (CountLeadingZeros - 1) / 2 - 1
    shift -= pairs
    v <<= 2 * pairs
    half = rdbpot(v >> 1, 1)
    x = 1 << 28  # F3::One()
    for _ in range(5):
        x3 = sat_shl(srdhm(srdhm(x, x), x), 6)  # Rescale<3>(x * x * x): F9 -> F3
        x = sat_shl(wrap32(srdhm((1 << 28) + (1 << 27), x) - srdhm(half, x3)), 3)  # F6 -> F3
    x = srdhm(x, 1518500250)  # x sqrt(2) / 2
    if shift < 0:
        x, shift = wrap32(x << -shift), 0
    return x, -shift


def rsqrt_table(s_in, z_in, s_out, z_out):
    """TFLM's int8 RSQRT on every code: clamp(z_out + MBQM(MBQM(1, m_v, s_v + 20), M, S - 20)),
    m_v, s_v the inverse square root multiplier of v = q - z_in, M, S of 1 / (sqrt(s_in) s_out)
    (float32 arithmetic); v = 0 gives 127 (TFLM's "largest output"). TFLM fails its Invoke on
    a code below z_in (a negative real): the table gives 127 there too."""
    scale = 1.0 / float(np.float32(np.sqrt(np.float32(s_in)) * np.float32(s_out)))
    m, s = quantize_multiplier(scale)
    out = []
    for q in range(-128, 128):
        v = q - z_in
        if v <= 0:
            out.append(127)
            continue
        mv, sv = inv_sqrt_multiplier(v)
        y = mbqm(mbqm(1, mv, sv + 20), m, s - 20) + z_out
        out.append(max(-128, min(127, y)))
    return out


def elu_table(s_in, z_in, s_out, z_out):
    """TFLM's int8 ELU table (elu.cc's PopulateLookupTable, float32 arithmetic): round(f(s_in
    (q - z_in)) / s_out) + z_out, f(x) = exp(x) - 1 below 0 (expf, rounded once), else x."""
    f = np.float32
    inv = f(1) / f(s_out)
    out = []
    for q in range(-128, 128):
        x = f(s_in) * f(q - z_in)
        y = f(f(np.exp(np.float64(x))) - f(1)) if x < 0 else x
        r = f(tf_round(float(f(y * inv))))
        out.append(max(-128, min(127, int(f(r + f(z_out))))))
    return out


def compare_codes(scale, zero_point):
    """TFLM's int8 comparisons rescale each operand's code q to MBQMSmallerThanOneExp((q - z)
    << 8, m, s), (m, s) = QuantizeMultiplierSmallerThanOneExp(scale): those of every code
    (-128..127). A scale of 1 or more TFLM's Prepare refuses (its shift would be positive)."""
    m, s = quantize_multiplier(f32(scale))
    if s > 0:
        raise ValueError("an input scale of %r: TFLM's comparisons take scales below 1" % scale)
    return [rdbpot(srdhm((q - zero_point) * 256, m), -s) for q in range(-128, 128)]

# --- recurrent ops (int8 LSTM, SVDF) ---------------------------------------------------------

# TFLM's sigmoid_table_uint16 (tensorflow/lite/kernels/internal/common.h): its int16 Logistic and
# Tanh interpolate in it; the int8 LSTM's table (an i16 tensor, the codes above 32767 wrapped)
SIGMOID16 = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535)

GATE_SCALE = 2.0 ** -12  # an LSTM gate's input, Q3.12
GATE_OUT = 2.0 ** -15  # its output, Q0.15


def lstm_cell_power(cell_scale):
    """TFLM's CheckedLog2 of the cell state's scale: the power of two its tanh assumes."""
    return tf_round(math.log(f32(cell_scale)) / math.log(2.0))


def lstm_params(s_x, w_scales, s_h, r_scales, s_cell, hid):
    """The int8 LSTM's m tensor (16 hid + 6 int32) from TFLM's PrepareGateParametersInteger: the
    input products' multipliers, one per row (each gate's hid rows, gates i, f, c, o), then their
    shifts, then the same for the hidden state's products (each GetQuantizedConvolutionMultipler:
    the scales' float32 product over 2**-12); then the inter-gate products' (CreateInterGateMulParams,
    in double): the multipliers of f x c -> c and i x g -> c, their shifts, and o x tanh(c) -> h's
    multiplier and shift."""
    out = []
    for s_in, scales in ((s_x, w_scales), (s_h, r_scales)):
        ms = [quantize_multiplier(float(np.float32(f32(s_in)) * np.float32(f32(s))) / GATE_SCALE) for s in scales]
        out += [m for m, _ in ms for _ in range(hid)] + [s for _, s in ms for _ in range(hid)]
    fc, ig, oh = (quantize_multiplier(f32(s1) * f32(s2) / f32(s_out)) for s1, s2, s_out in (
        (GATE_OUT, s_cell, s_cell), (GATE_OUT, GATE_OUT, s_cell), (GATE_OUT, GATE_OUT, s_h)))
    return out + [fc[0], ig[0], fc[1], ig[1], oh[0], oh[1]]


def svdf_params(s_x, s_wf, s_state, s_wt, s_out):
    """(m1, s1, m2, s2) of TFLM's integer SVDF: its effective scales computed in float32."""
    e1 = np.float32(f32(s_x)) * np.float32(f32(s_wf)) / np.float32(f32(s_state))
    e2 = np.float32(f32(s_state)) * np.float32(f32(s_wt)) / np.float32(f32(s_out))
    return quantize_multiplier(float(e1)) + quantize_multiplier(float(e2))


# --- vectorized, for the host reference interpreter ----------------------------------------

def srdhm_np(a, b):
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.abs(v) >> 31
    r = np.where(v >= 0, q, -q)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)


def rdbpot_np(x, e):
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def mbqm_np(x, m, s):
    x = np.asarray(x, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    left = np.where(s > 0, s, 0)
    right = np.where(s > 0, 0, -s)
    shifted = ((x << left) + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 wrap, as TFLM's C
    return rdbpot_np(srdhm_np(shifted, m), right)


def mbqm64_np(x, m, s):
    """TFLM's MultiplyByQuantizedMultiplier for int64 accumulators (16x8 ops): the multiplier
    reduced to 16 bits, one rounding shift."""
    x = np.asarray(x, dtype=object)  # the product may pass 2**63 before the shift
    m = np.asarray(m, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF).astype(object)
    total = (15 - s).astype(object)
    return ((x * reduced + (1 << (total - 1))) >> total).astype(np.int64)


# --- elementwise ops and resize (what TFLM's Prepare and kernels compute) ------------------

def _srdhm16(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul on int16."""
    if a == b == -32768:
        return 32767
    ab = a * b
    v = ab + ((1 << 14) if ab >= 0 else 1 - (1 << 14))
    q = abs(v) >> 15
    return q if v >= 0 else -q


def _sdhm16(a, b):
    """TFLM's SaturatingDoublingHighMul (int16, truncating toward zero)."""
    if a == b == -32768:
        return 32767
    ab = a * b
    q = abs(ab) >> 15
    return q if ab >= 0 else -q


def _sat16(v):
    return max(-32768, min(32767, v))


def _down16(m):
    """DownScaleInt32ToInt16Multiplier."""
    return 32767 if m >= INT32_MAX - (1 << 15) else (m + (1 << 15)) >> 16


def hard_swish_table(s_in, z_in, s_out, z_out):
    """int8 -> int8 table of TFLM's HARD_SWISH (reference_ops::HardSwish on int16 fixed point,
    the multipliers from its Prepare, float ratios). ValueError where TFLM's Prepare fails (an
    output multiplier above 1)."""
    hires = np.float32(1.0 / 128.0) * np.float32(s_in)
    m_out, e_out = quantize_multiplier(float(hires / np.float32(s_out)))
    m_rel, e_rel = quantize_multiplier(float(hires / (np.float32(3.0) / np.float32(32768.0))))
    if e_out > 0:
        raise ValueError("the output scale is below 1/128 of the input scale (TFLM refuses it)")
    m_out, m_rel = _down16(m_out), _down16(m_rel)
    out = []
    for q in range(-128, 128):
        hi = (q - z_in) * 128
        pre = _srdhm16(hi, m_out)
        r = hi
        if e_rel > 0:
            r = _sat16(r * (1 << (e_rel - 1)))
        r = _srdhm16(r, m_rel)
        if e_rel > 0:
            r = _sat16(r * 2)
        if e_rel < 0:
            r = rdbpot(r, -e_rel)
        r = (r + (1 << 15)) >> 1
        out.append(max(-128, min(127, rdbpot(_sdhm16(r, pre), -e_out) + z_out)))
    return out


def prelu_params(s_in, s_alpha, s_out):
    """(m1, s1, m2, s2) of TFLM's PRELU: s_in / s_out and s_in x s_alpha / s_out, in double."""
    s_in, s_alpha, s_out = f32(s_in), f32(s_alpha), f32(s_out)
    return quantize_multiplier(s_in / s_out) + quantize_multiplier(s_in * s_alpha / s_out)


def prelu_table(z_in, z_out, m1, s1):
    """int8 -> int8 table of PRELU's x >= z_in half: clamp(z_out + mbqm(x - z_in, m1, s1))."""
    return [max(-128, min(127, z_out + mbqm(q - z_in, m1, s1))) if q >= z_in else z_out for q in range(-128, 128)]


def div_params(s1, s2, s_out):
    """(M, S) of TFLM's int8 DIV: s1 / (s2 x s_out) in double (what the tflite-micro
    interpreter computes: measured on every code pair against it)."""
    return quantize_multiplier(f32(s1) / (f32(s2) * f32(s_out)))


def reciprocal_table():
    """t[d] = TFLM's GetReciprocal(d, 31) for d = 0..255 (Q0.31; d = 0 as TFLM computes it)."""
    out = []
    for d in range(256):
        head = 32 - d.bit_length()  # CountLeadingZeros
        out.append(one_over_one_plus_x(((d << head) & 0xFFFFFFFF) - (1 << 31)) if d else
                   one_over_one_plus_x(-(1 << 31)))
    return out


def div_np(a, b, za, zb, zy, m, s, lo=-128, hi=127):
    """TFLM's int8 DIV on int64 arrays of codes (a / b), where a right shift of 32 or more
    (undefined in TFLM's C) gives the rounded result, 0. b - zb = 0 runs TFLM's arithmetic on
    the reciprocal of 0 as TFLM computes it."""
    t = np.array(reciprocal_table(), np.int64)
    u = np.asarray(a, np.int64) - za
    v = np.asarray(b, np.int64) - zb
    u = np.where(v < 0, -u, u)
    v = np.abs(v)
    bitlen = np.array([i.bit_length() for i in range(256)], np.int64)
    h = 31 - bitlen[np.where(u < 0, ~u, u)]  # CountLeadingSignBits
    e = h + bitlen[v] - 1 - s
    q = srdhm_np(srdhm_np(u << h, t[v]), m)
    r = np.where(e < 32, rdbpot_np(q, np.minimum(e, 31)), 0)
    return np.clip(r + zy, lo, hi)


def nearest_index(out_size, in_size, align_corners, half_pixel):
    """TFLM's GetNearestNeighbor for every output index (its float32 arithmetic)."""
    f = np.float32
    if align_corners and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    else:
        scale = f(in_size) / f(out_size)
    out = []
    for i in range(out_size):
        v = (f(i) + f(0.5 if half_pixel else 0.0)) * scale
        j = tf_round(float(v)) if align_corners else int(math.floor(float(v)))
        j = min(j, in_size - 1)
        out.append(max(0, j) if half_pixel else j)
    return out


def bilinear_table(out_size, in_size, align_corners, half_pixel, integer):
    """(i0, i1, d) per output index: TFLM's ResizeBilinearInteger (integer: d = input * 1024 -
    1024 i0) or its float ResizeBilinear (d = input - i0, float32)."""
    out = []
    if integer:
        if align_corners and out_size > 1:
            scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
        else:
            scale = ((1 << 10) * in_size + out_size // 2) // out_size
        for i in range(out_size):
            v = i * scale + scale // 2 - (1 << 9) if half_pixel else i * scale
            lo = max(int(v / 1024), 0)  # C division: toward zero
            hi = min(int((v + 1023) / 1024), in_size - 1)
            out.append((lo, hi, v - 1024 * lo))
        return out
    f = np.float32
    scale = f(in_size) / f(out_size)
    if align_corners and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    for i in range(out_size):
        v = (f(i) + f(0.5)) * scale - f(0.5) if half_pixel else f(i) * scale
        lo = max(int(math.floor(v)), 0)
        hi = min(int(math.ceil(v)), in_size - 1)
        out.append((lo, hi, float(v - f(lo))))
    return out


def resize_table(shape_in, size, bilinear, align_corners, half_pixel, integer):
    """The `resize` op's i32 table (docs/FORMAT.md) for TFLM's arithmetic."""
    (h, w, _), (oh, ow) = shape_in, size
    if not bilinear:
        return np.array(nearest_index(oh, h, align_corners, half_pixel) +
                        nearest_index(ow, w, align_corners, half_pixel), np.int32)
    rows = bilinear_table(oh, h, align_corners, half_pixel, integer) + \
        bilinear_table(ow, w, align_corners, half_pixel, integer)
    return table_words(rows, integer)


def table_words(rows, integer):
    """(i0, i1, d) rows as the i32 words of a bilinear table (d: an int, or a float's bits)."""
    out = []
    for i0, i1, d in rows:
        out += [i0, i1, d if integer else int(np.float32(d).view(np.int32))]
    return np.array(out, np.int32)
