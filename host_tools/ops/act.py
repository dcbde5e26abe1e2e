"""The host's half of elementwise activations: TFLite's LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU,
HARD_SWISH, ABS (int8: a 256-entry table of TFLM's own integer results) (docs/OPS.md): converted from
the model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's
room mpy_lazy/ops/act.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {
    "LOGISTIC": "int8 int16 float32", "TANH": "int8 int16 float32", "RELU": "int8 int16 float32", "RELU6": "int8 int16 float32",
    "LEAKY_RELU": "int8 int16 float32", "HARD_SWISH": "int8 float32", "ABS": "int8 int16 float32"
}


def _lut(r, table, float_op, **attrs):
    x = r.value(r.ins[0])
    if r.qof(r.ins[0]) is None:
        r.emit(float_op, [x], **attrs)
        return
    n = r.emit("lut", [x])
    n.t["t"] = r.add("lut", np.array(table(), dtype=np.int8))


def _checked_log2(x):
    """TFLM's CheckedLog2 (float32): (whether x is a power of two within 1e-3 of its log2, the
    log2 rounded)."""
    f = np.float32
    l2 = f(np.log(f(x))) * (f(1.0) / f(np.log(f(2.0))))
    rounded = tflm.tf_round(float(l2))
    return abs(float(l2 - f(rounded))) < 1e-3, rounded


def _act16(r, op, pot_shifts):
    """TFLM's int16 LOGISTIC and TANH (logistic_common.cc, tanh.cc Prepare): zero points 0, the
    output Q0.15; the input scaled to 3 x Q3.12 by a multiplier <= 32767 and a right shift
    (a power-of-two scale: by 3 x 2**shift)."""
    (si, zi), (so, zo) = r.qof(r.ins[0]), r.qof(r.outs[0])
    if zi or zo or _checked_log2(so) != (True, -15):
        raise r.err("int16 %s: zero points 0 and an output scale of 1/32768 (TFLM's Prepare)" % r.opname.upper())
    pot, l2 = _checked_log2(si)
    shift = 12 + l2
    if pot and shift in pot_shifts:
        mult, shift = 3 << shift, 0
    else:
        m, shift = float(np.float32(si)) * 4096.0 * 3.0, 0
        while m <= 32767.0 / 2.0 and shift <= 30:
            shift += 1
            m *= 2.0
        mult = int(m)
    if mult > 32767:
        raise r.err("int16 input scale %r: TFLM's multiplier %d passes 32767 (its products overflow)" % (si, mult))
    n = r.emit(op, [r.value(r.ins[0])], m=(mult, shift))
    n.t["t"] = r.add("sigmoid", np.array(tflm.SIGMOID16, dtype=np.int32).astype(np.uint16).view(np.int16))


def op_LOGISTIC(r):
    if r.dtof(r.ins[0]) == "i16":
        return _act16(r, "sigmoid", (0,))
    _lut(r, lambda: tflm.logistic_table(*r.qof(r.ins[0])), "sigmoid")


def op_TANH(r):
    if r.dtof(r.ins[0]) == "i16":
        return _act16(r, "tanh", (0, 1))
    _lut(r, lambda: tflm.tanh_table(*r.qof(r.ins[0])), "tanh")


def op_RELU(r):
    if r.dtof(r.ins[0]) == "i16":  # TFLM's ReluQuantized<int16_t>: zero points 0
        (si, zi), (so, zo) = r.qof(r.ins[0]), r.qof(r.outs[0])
        if zi or zo:
            raise r.err("int16 zero points %d, %d: TFLM's int16 RELU takes 0" % (zi, zo))
        m = tflm.quantize_multiplier(float(np.float32(si) / np.float32(so)))
        r.emit("relu", [r.value(r.ins[0])], m=m, clamp=(0, 32767))
        return

    def table():
        (si, zi), (so, zo) = r.qof(r.ins[0]), r.qof(r.outs[0])
        m, s = tflm.quantize_multiplier(float(np.float32(si) / np.float32(so)))
        return [max(zo, min(127, zo + tflm.mbqm(q - zi, m, s))) for q in range(-128, 128)]
    _lut(r, table, "relu")


def op_RELU6(r):
    if r.dtof(r.ins[0]) == "i16":  # TFLM's Relu6Quantized<int16_t>: x clamped to its zero and six
        si, zi = r.qof(r.ins[0])
        six = max(-32768, min(32767, tflm.tf_round(float(np.float32(6.0) / np.float32(si))) + zi))
        if r.qof(r.outs[0]) != (si, zi):
            raise r.err("an int16 RELU6 keeps its input's quantization (TFLM's clamps the codes)")
        r.emit("relu6", [r.value(r.ins[0])], clamp=(max(-32768, min(zi, six)), six))
        return

    def table():
        si, zi = r.qof(r.ins[0])
        six = max(-128, min(127, tflm.tf_round(float(np.float32(6.0) / np.float32(si))) + zi))
        return [min(max(q, zi), six) for q in range(-128, 128)]
    _lut(r, table, "relu6")


def op_LEAKY_RELU(r):
    o = r.options("LeakyReluOptions")
    alpha = float(o.Alpha())
    if r.dtof(r.ins[0]) == "i16":
        x = r.value(r.ins[0])
        (si, _), (so, _) = r.qof(r.ins[0]), r.qof(r.outs[0])
        r.emit("leakyrelu", [x], alpha=alpha, m=tflm.leaky_relu_params(si, so, alpha))
        return

    def table():
        (si, zi), (so, zo) = r.qof(r.ins[0]), r.qof(r.outs[0])
        mi, s_i, ma, sa = tflm.leaky_relu_params(si, so, alpha)
        out = []
        for q in range(-128, 128):
            v = q - zi
            v = tflm.mbqm(v, mi, s_i) if v >= 0 else (tflm.mbqm(v, abs(ma), sa) * (-1 if ma < 0 else 1))
            out.append(max(-128, min(127, zo + v)))
        return out
    _lut(r, table, "leakyrelu", alpha=alpha)


def _abs_multiplier(r):
    """TFLM's ABS: (multiplier, shift) of input scale / output scale, None for equal scales
    (then no rescaling: |x - zi| + zo)."""
    (si, _), (so, _) = r.qof(r.ins[0]), r.qof(r.outs[0])
    if np.float32(si) == np.float32(so):
        return None
    return tflm.quantize_multiplier(float(np.float32(si) / np.float32(so)))


def op_ABS(r):
    if r.dtof(r.ins[0]) == "i16":
        if r.qof(r.ins[0])[1] or r.qof(r.outs[0])[1]:
            raise r.err("int16 zero points %d, %d: TFLM's int16 ABS takes 0" % (r.qof(r.ins[0])[1], r.qof(r.outs[0])[1]))
        r.emit("abs", [r.value(r.ins[0])], m=_abs_multiplier(r) or (1 << 30, 1))  # (mbqm(v, 2**30, 1) = v)
        return

    def table():
        (_, zi), (_, zo) = r.qof(r.ins[0]), r.qof(r.outs[0])
        ms = _abs_multiplier(r)
        return [max(-128, min(127, zo + (abs(q - zi) if ms is None else tflm.mbqm(abs(q - zi), *ms))))
                for q in range(-128, 128)]
    _lut(r, table, "abs")


def op_HARD_SWISH(r):
    def table():
        try:
            return tflm.hard_swish_table(*(r.qof(r.ins[0]) + r.qof(r.outs[0])))
        except ValueError as e:
            raise r.err(str(e))
    _lut(r, table, "hardswish")
