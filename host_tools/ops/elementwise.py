"""The host's half of minimum, maximum, div, prelu: TFLite's MINIMUM, MAXIMUM, DIV, PRELU
(docs/OPS.md): converted from the model into the graph description, with TFLite Micro's Prepare
parameters, for the runtime's room mpy_lazy/ops/elementwise.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from .const import constant


def _operands(r, commutes):
    """(activation, other): other a value name, or (constant codes, their shape attr)."""
    a, b = r.ins[:2]
    if r.data(a) is not None and commutes:
        a, b = b, a
    if r.data(a) is not None:
        raise r.err("the first operand must be an activation")
    x = r.value(a)
    c = r.data(b)
    if c is None:
        y = r.value(b)
        sx, sy = r.ir.shapes[x], r.ir.shapes[y]
        if int(np.prod(sx)) < int(np.prod(sy)):
            if not commutes:
                raise r.err("only the second operand may be broadcast")
            x, y, sx, sy = y, x, sy, sx
        if sy != sx and int(np.prod(sy)) not in (1, sx[-1]):
            raise r.err("shapes %s and %s: equal, one per channel or one value" % (sx, sy))
        return x, y
    if r.dtof(b) != r.dtof(a) and (r.opname, r.dtof(b), r.dtof(a)) != ("prelu", "i8", "i16"):  # (16x8 PRELU)
        raise r.err("a %s constant with a %s activation" % (r.tensor(b)[2], r.tensor(a)[2]))
    shape = r.ir.shapes[x]
    if c.size == 1:
        return x, (c.reshape(1), (1,))
    if c.size == shape[-1] and c.shape[-1] == c.size:
        return x, (c.reshape(-1), None)
    if c.size == int(np.prod(shape)):
        return x, (c.reshape(shape), shape)
    raise r.err("a constant of shape %s over %s: one value, one per channel or the same shape"
                   % (list(c.shape), list(shape)))


def _minmax(r, op):
    x, other = _operands(r, True)
    if r.dtof(r.ins[0]) == "i64" and not isinstance(other, str):  # (int64: a const value)
        r.emit(op, [x, constant(r, r.ins[1])])
        return
    if isinstance(other, str):
        r.emit(op, [x, other])
        return
    n = r.emit(op, [x], shape=other[1])
    n.t["t"] = r.add("const", other[0])


def op_MINIMUM(r):
    _minmax(r, "minimum")


def op_MAXIMUM(r):
    _minmax(r, "maximum")


def op_DIV(r):
    if r.tensor(r.outs[0])[2] == "INT32" and not r.tensor(r.outs[0])[3]:
        _div32(r)
        return
    x, y = _operands(r, False)
    if not isinstance(y, str):
        raise r.err("a constant divisor is not supported (the converter makes it a MUL)")
    o = r.options("DivOptions")
    act = r._act(o.FusedActivationFunction() if o is not None else 0)
    n = r.emit("div", [x, y])
    yq = r.qof(r.outs[0])
    if yq is None:
        n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
        return
    if r.dtof(r.outs[0]) != "i8":
        raise r.err("%s DIV is not supported (float32 and int8 are)" % r.tensor(r.outs[0])[2])
    (s1, _), (s2, _) = r.qof(r.ins[0]), r.qof(r.ins[1])
    n.attrs["m"] = tflm.div_params(s1, s2, yq[0])
    if n.attrs["m"][1] > 22:
        raise r.err("a DIV multiplier above 2**22 is not supported")
    n.t["t"] = r.add("recip", np.array(tflm.reciprocal_table(), np.int32))
    n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1])


def _div32(r):
    """TFLM's unquantized int32 DIV (C's quotient, truncated toward zero) by constants."""
    x, other = _operands(r, False)
    if isinstance(other, str):
        raise r.err("int32 DIV by a computed value is not supported (by constants it is)")
    if np.any(other[0] == 0):
        raise r.err("int32 DIV by a constant 0 (undefined in C: TFLM traps)")
    o = r.options("DivOptions")
    act = r._act(o.FusedActivationFunction() if o is not None else 0)
    n = r.emit("div", [x], shape=other[1], clamp=tflm.activation_range(act, 1.0, 0, "i32"))
    n.t["t"] = r.add("const", other[0].astype(np.int32))


def op_PRELU(r):
    x, alpha = _operands(r, False)
    if isinstance(alpha, str):
        raise r.err("alpha must be a constant")
    codes, shape = alpha
    yq = r.qof(r.outs[0])
    n = r.emit("prelu", [x], shape=shape)
    n.t["w"] = r.add("alpha", codes)
    if yq is None:
        return
    dt = r.dtof(r.outs[0])
    if dt not in ("i8", "i16"):
        raise r.err("%s PRELU is not supported (float32, int8 and int16 are)" % r.tensor(r.outs[0])[2])
    xq, aq = r.qof(r.ins[0]), r.qof(r.ins[1])
    m1, s1, m2, s2 = tflm.prelu_params(xq[0], aq[0], yq[0])
    if dt == "i16":  # TFLM's 16x8 PRELU: int8 alpha, both halves requantized per element
        if r.dtof(r.ins[1]) != "i8":
            raise r.err("a %s alpha: TFLM's int16 PRELU takes int8" % r.tensor(r.ins[1])[2])
        n.attrs["m"] = (m1, s1, m2, s2, aq[1])
        return
    n.attrs["m"] = (m2, s2, aq[1])
    n.t["t"] = r.add("lut", np.array(tflm.prelu_table(xq[1], yq[1], m1, s1), np.int8))


# the tensor types each builtin takes (TFLM's interpreter the peer: tests/host/test_tflite_elem.py)
TYPES = {"MINIMUM": "int8 int16 int32 float32 int64", "MAXIMUM": "int8 int16 int32 float32 int64", "DIV": "int8 int32 float32",
         "PRELU": "int8 int16 float32"}
