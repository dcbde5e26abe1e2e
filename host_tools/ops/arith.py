"""The host's half of SQUARED_DIFFERENCE, FLOOR_DIV, FLOOR_MOD and ADD_N (docs/OPS.md), for the
runtime's room mpy_lazy/ops/arith.py, with TFLite Micro's Prepare parameters (int8 and int16
SQUARED_DIFFERENCE's rescalings, int8 ADD_N's). Constant operands become `const` lines
(host_tools/ops/const.py). op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
from .. import tflm
from .const import constant

# the tensor types each builtin takes (what tests/host/test_tflite_arith.py proves against TFLM)
TYPES = {"SQUARED_DIFFERENCE": "int8 int16 int32 float32", "FLOOR_DIV": "float32", "FLOOR_MOD": "float32",
         "ADD_N": "int8 float32"}


def _types(r, name):
    typ = r.tensor(r.outs[0])[2]
    if typ.lower() not in TYPES[name].split():
        raise r.err("%s %s is not supported (TFLM's kernel takes %s)" % (typ, name, TYPES[name].replace(" ", ", ")))
    for i in r.ins:
        if r.tensor(i)[2] != typ:
            raise r.err("input of type %s, output %s" % (r.tensor(i)[2], typ))


def _multiplier(r, real, left):
    """QuantizeMultiplier (left: any shift) or QuantizeMultiplierSmallerThanOneExp (shift <= 0,
    else TFLM's Prepare aborts: refused) of a real multiplier."""
    m, s = tflm.quantize_multiplier(real)
    if not -31 <= s <= (30 if left else 0):
        raise r.err("the scales give a multiplier %r (shift %d): outside what TFLM's Prepare takes" % (real, s))
    return [m, s]


def op_SQUARED_DIFFERENCE(r):
    _types(r, "SQUARED_DIFFERENCE")
    a, b = r.ins[:2]
    if r.data(a) is not None and r.data(b) is not None:
        raise r.err("both operands are constants")
    n = r.emit("sqdiff", [constant(r, a), constant(r, b)])
    dt = r.dtof(r.outs[0])
    if dt not in ("i8", "i16"):
        return
    (s1, z1), (s2, z2), (so, zo) = r.qof(a), r.qof(b), r.qof(r.outs[0])
    if dt == "i16" and (z1 or z2 or zo):
        raise r.err("zero points %d, %d, %d: TFLM's int16 SQUARED_DIFFERENCE takes 0" % (z1, z2, zo))
    shift = 7 if dt == "i8" else 0
    twice = 2.0 * max(tflm.f32(s1), tflm.f32(s2))
    n.attrs["m"] = tuple(_multiplier(r, tflm.f32(s1) / twice, False) + _multiplier(r, tflm.f32(s2) / twice, False)
                         + _multiplier(r, twice * twice / ((1 << (2 * shift)) * tflm.f32(so)), True))


def _binary(r, name, op):
    _types(r, name)
    a, b = r.ins[:2]
    if r.data(a) is not None and r.data(b) is not None:
        raise r.err("both operands are constants")
    r.emit(op, [constant(r, a), constant(r, b)])


def op_FLOOR_DIV(r):
    _binary(r, "FLOOR_DIV", "floordiv")


def op_FLOOR_MOD(r):
    _binary(r, "FLOOR_MOD", "floormod")


def op_ADD_N(r):
    """float: the inputs added in order (TFLM's sum), a chain of float adds; int8: TFLM's AddN
    (inputs of one quantization, rescaled by one half of 2^20, summed, requantized)."""
    _types(r, "ADD_N")
    shape = r.tensor(r.outs[0])[1]
    for i in r.ins:
        if r.tensor(i)[1] != shape:
            raise r.err("input shape %s, output %s: TFLM's ADD_N takes them equal" % (r.tensor(i)[1], shape))
    xs = [constant(r, i) for i in r.ins]
    if r.dtof(r.outs[0]) == "f32":
        r.emit("addn", xs)
        return
    qs = {r.qof(i) for i in r.ins}
    if len(qs) != 1:
        raise r.err("inputs of quantizations %s: TFLM's ADD_N takes one" % sorted(qs))
    if len(xs) > 8:
        raise r.err("%d inputs: mpy-lazy's int8 ADD_N takes up to 8" % len(xs))
    (s, _), (so, _) = r.qof(r.ins[0]), r.qof(r.outs[0])
    n = r.emit("addn", xs)
    n.attrs["m"] = tuple(_multiplier(r, 2.0 * tflm.f32(s) / ((1 << 20) * tflm.f32(so)), False))
