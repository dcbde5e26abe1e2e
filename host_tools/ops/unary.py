"""The host's half of the float functions of one operand: TFLite's NEG, SQRT, RSQRT, SQUARE, EXP,
LOG, SIN, COS, FLOOR, CEIL, ROUND, ELU (docs/OPS.md), for the runtime's room mpy_lazy/ops/unary.py.
TFLM runs them on float32; RSQRT and ELU on int8 too, which become 256-entry lut tables of
TFLM's own arithmetic (host_tools.tflm.rsqrt_table, elu_table). op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types each builtin takes (what tests/host/test_tflite_unary.py proves against TFLM)
TYPES = {"NEG": "float32", "SQRT": "float32", "RSQRT": "int8 float32", "SQUARE": "float32", "EXP": "float32",
         "LOG": "float32", "SIN": "float32", "COS": "float32", "FLOOR": "float32", "CEIL": "float32",
         "ROUND": "float32", "ELU": "int8 float32"}


def _unary(r, op, table=None):
    x = r.value(r.ins[0])
    dt = r.dtof(r.ins[0])
    if dt == "f32":
        r.emit(op, [x])
        return
    if table is None or dt != "i8":
        raise r.err("%s %s is not supported (TFLM's kernel takes %s)" % (
            r.tensor(r.ins[0])[2], op.upper(), TYPES[op.upper()].replace(" ", ", ")))
    n = r.emit("lut", [x])
    n.t["t"] = r.add("lut", np.array(table(*(r.qof(r.ins[0]) + r.qof(r.outs[0]))), np.int8))


def op_NEG(r):
    _unary(r, "neg")


def op_SQRT(r):
    _unary(r, "sqrt")


def op_RSQRT(r):
    def table(si, zi, so, zo):
        _, s = tflm.quantize_multiplier(1.0 / float(np.float32(np.sqrt(np.float32(si)) * np.float32(so))))
        if not -11 <= s <= 30:  # (s - 20 is TFLM's right shift: beyond 31 it is undefined)
            raise r.err("input scale %r, output scale %r: the multiplier 1 / (sqrt(s_in) s_out) has shift %d, "
                        "outside -11..30" % (si, so, s))
        return tflm.rsqrt_table(si, zi, so, zo)
    _unary(r, "rsqrt", table)


def op_SQUARE(r):
    _unary(r, "square")


def op_EXP(r):
    _unary(r, "exp")


def op_LOG(r):
    _unary(r, "log")


def op_SIN(r):
    _unary(r, "sin")


def op_COS(r):
    _unary(r, "cos")


def op_FLOOR(r):
    _unary(r, "floor")


def op_CEIL(r):
    _unary(r, "ceil")


def op_ROUND(r):
    _unary(r, "round")


def op_ELU(r):
    _unary(r, "elu", tflm.elu_table)
