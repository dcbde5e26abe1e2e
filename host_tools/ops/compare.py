"""The host's half of comparisons, logical ops and select: TFLite's EQUAL, NOT_EQUAL, LESS,
LESS_EQUAL, GREATER, GREATER_EQUAL, LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT_V2 (docs/OPS.md),
for the runtime's room mpy_lazy/ops/compare.py: bool outputs and conditions, numpy's
broadcasting, constant operands as `const` lines (host_tools/ops/const.py). int8 comparisons
carry TFLM's rescaled codes of every input code (host_tools.tflm.compare_table). op_<BUILTIN>(r):
r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from .const import constant

# the tensor types each builtin takes (what tests/host/test_tflite_compare.py proves against TFLM)
# (and test_tflite_types.py: int64)
_CMP_TYPES = "int8 int32 float32 bool int64"
TYPES = {"EQUAL": _CMP_TYPES, "NOT_EQUAL": _CMP_TYPES, "LESS": "int8 int32 float32 int64",
         "LESS_EQUAL": "int8 int32 float32 int64", "GREATER": "int8 int32 float32 int64",
         "GREATER_EQUAL": "int8 int32 float32 int64",
         "LOGICAL_AND": "bool", "LOGICAL_OR": "bool", "LOGICAL_NOT": "bool", "SELECT_V2": "int8 int16 float32"}
_NAMES = {"EQUAL": "equal", "NOT_EQUAL": "notequal", "LESS": "less", "LESS_EQUAL": "lessequal",
          "GREATER": "greater", "GREATER_EQUAL": "greaterequal"}


def _types(r, name, i):
    typ = r.tensor(i)[2].lower()
    if typ == "int16" and name in _NAMES:  # (measured: -5 > 0 is true there)
        raise r.err("INT16 %s is not supported: TFLM's int16 comparisons fail (GREATER runs with rescaling "
                    "parameters its Prepare never sets, and gives wrong answers)" % name)
    if typ not in TYPES[name].split():
        raise r.err("%s %s is not supported (TFLM's kernel takes %s)" % (
            r.tensor(i)[2], name, TYPES[name].replace(" ", ", ")))


def _compare(r, name):
    a, b = r.ins[:2]
    _types(r, name, a)
    if r.tensor(a)[2] != r.tensor(b)[2]:
        raise r.err("operands of types %s and %s" % (r.tensor(a)[2], r.tensor(b)[2]))
    if r.data(a) is not None and r.data(b) is not None:
        raise r.err("both operands are constants")
    n = r.emit(_NAMES[name], [constant(r, a), constant(r, b)])
    if r.dtof(a) == "i8":
        try:
            n.t["t"] = r.add("rescaled", np.array([tflm.compare_codes(*r.qof(i)) for i in (a, b)], np.int32))
        except ValueError as e:
            raise r.err(str(e))


def op_EQUAL(r):
    _compare(r, "EQUAL")


def op_NOT_EQUAL(r):
    _compare(r, "NOT_EQUAL")


def op_LESS(r):
    _compare(r, "LESS")


def op_LESS_EQUAL(r):
    _compare(r, "LESS_EQUAL")


def op_GREATER(r):
    _compare(r, "GREATER")


def op_GREATER_EQUAL(r):
    _compare(r, "GREATER_EQUAL")


def _logical(r, name, op):
    for i in r.ins:
        _types(r, name, i)
    if all(r.data(i) is not None for i in r.ins):
        raise r.err("every operand is a constant")
    r.emit(op, [constant(r, i) for i in r.ins])


def op_LOGICAL_AND(r):
    _logical(r, "LOGICAL_AND", "and")


def op_LOGICAL_OR(r):
    _logical(r, "LOGICAL_OR", "or")


def op_LOGICAL_NOT(r):
    _logical(r, "LOGICAL_NOT", "not")


def op_SELECT_V2(r):
    c, a, b = r.ins[:3]
    if r.tensor(c)[2] != "BOOL":
        raise r.err("condition of type %s (bool expected)" % r.tensor(c)[2])
    _types(r, "SELECT_V2", a)
    if r.tensor(a)[2] != r.tensor(b)[2]:
        raise r.err("operands of types %s and %s" % (r.tensor(a)[2], r.tensor(b)[2]))
    if all(r.data(i) is not None for i in r.ins):
        raise r.err("every operand is a constant")
    r.emit("select", [constant(r, i) for i in (c, a, b)])
