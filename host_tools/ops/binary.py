"""The host's half of add, sub, mul: TFLite's ADD, SUB, MUL (TFLM's rescaling parameters)
(docs/OPS.md): converted from the model into the graph description, with TFLite Micro's Prepare
parameters, for the runtime's room mpy_lazy/ops/binary.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from ..tflite_import import _hwc

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
def _binary(r, op, cls):
    a, b = r.ins[:2]
    if r.data(a) is not None and r.data(b) is not None:
        raise r.err("both operands are constants")
    rev = op == "sub" and r.data(a) is not None  # t - x: the constant first, at the output's shape
    if r.data(a) is not None:
        a, b = b, a  # (add and mul commute, in TFLM's integers too)
    const = r.data(b)
    o = r.options(cls)
    act = r._act(o.FusedActivationFunction() if o is not None else 0)
    if r.tensor(r.outs[0])[2] == "INT32" and not r.tensor(r.outs[0])[3]:
        _int32(r, op, a, b, const, act)
        return
    yq = r.qof(r.outs[0])
    if const is None:
        n = r.emit(op, [r.value(a), r.value(b)])
    else:
        attrs = _constant(r, b, const, rev)
        t = attrs.pop("t")
        n = r.emit(op, [r.value(a)], rev=1 if rev else None, **attrs)
        n.t["t"] = r.add("const", t)
    if yq is None:
        n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
        return
    dt = r.dtof(r.outs[0])
    q1, q2 = (r.qof(b), r.qof(a)) if rev else (r.qof(a), r.qof(b))
    if op == "mul":
        n.attrs["m"] = tflm.mul_params(q1[0], q2[0], yq[0])
    else:
        shift = 15 if dt == "i16" else 20
        params = tflm.add_params if op == "add" else tflm.sub_params
        n.attrs["m"] = params(q1[0], q2[0], yq[0], shift)
    n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)


def _int32(r, op, a, b, const, act):
    """TFLM's unquantized int32 ADD, SUB, MUL: plain integers (ADD ignores the activation)."""
    if const is None:
        n = r.emit(op, [r.value(a), r.value(b)])
    else:
        attrs = _constant(r, b, const)
        t = attrs.pop("t")
        attrs.pop("tq")
        n = r.emit(op, [r.value(a)], **attrs)
        n.t["t"] = r.add("const", t)
    n.attrs["clamp"] = tflm.activation_range(None if op == "add" else act, 1.0, 0, "i32")


def _constant(r, i, c, whole=False):
    """The attributes of a constant second operand (tensor i, values c) of add, sub or mul:
    t (the values broadcast over the output's shape as far as they vary: the output's
    trailing dimensions from the first one along which they vary; `whole`: all of it), shape,
    tq. The kernel repeats them over the rest."""
    _, cshape, typ, scales, _, _ = r.tensor(i)
    xtyp = r.tensor(r.outs[0])[2]
    if typ != xtyp:
        raise r.err("a %s constant with %s activations" % (typ, xtyp))
    if len(scales) > 1:
        raise r.err("a constant operand with %d scales (one per channel): one scale expected" % len(scales))
    yfull = list(r.tensor(r.outs[0])[1])
    ys = _hwc(yfull, r)
    lead = len(yfull) - len(ys)  # (the batch dimension the board's values drop)
    full = np.broadcast_to(c.reshape([1] * (len(yfull) - c.ndim) + list(c.shape)), yfull).reshape(ys)
    aligned = [1] * (len(yfull) - len(cshape)) + list(cshape)
    varies = [d - lead for d in range(len(yfull)) if aligned[d] != 1 and d >= lead]
    k = 0 if whole else varies[0] if varies else len(ys)
    vals = full[(0,) * k] if k else full
    attrs = {"shape": tuple(ys[k:]) or (1,)}
    attrs["tq"] = "%r,%d" % r.qof(i) if typ != "FLOAT32" else None
    return dict(attrs, t=np.ascontiguousarray(vals).reshape(attrs["shape"]))


def op_ADD(r):
    _binary(r, "add", "AddOptions")


def op_SUB(r):
    _binary(r, "sub", "SubOptions")


def op_MUL(r):
    _binary(r, "mul", "MulOptions")


# the tensor types each builtin takes (TFLM's interpreter is the peer: tests/host/test_tflite*.py,
# test_thirdparty.py; int32: unquantized, test_tflite_elem.py's i32_*)
TYPES = {"ADD": "int8 int16 int32 float32", "SUB": "int8 int16 int32 float32", "MUL": "int8 int16 int32 float32"}
