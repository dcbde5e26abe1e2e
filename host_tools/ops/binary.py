"""The host's half of add, sub, mul: TFLite's ADD, SUB, MUL (TFLM's rescaling parameters)
(docs/OPS.md): converted from the model into the graph description, with TFLite Micro's Prepare
parameters, for the runtime's room mpy_lazy/ops/binary.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
from .. import tflm


def _binary(r, op, cls):
    xs = []
    for i in r.ins[:2]:
        if r.data(i) is not None:
            raise r.err("constant operands are not supported")
        xs.append(r.value(i))
    o = r.options(cls)
    act = r._act(o.FusedActivationFunction() if o is not None else 0)
    yq = r.qof(r.outs[0])
    n = r.emit(op, xs)
    if yq is None:
        n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
        return
    dt = r.dtof(r.outs[0])
    q1, q2 = r.qof(r.ins[0]), r.qof(r.ins[1])
    if op == "mul":
        n.attrs["m"] = tflm.mul_params(q1[0], q2[0], yq[0])
    else:
        shift = 15 if dt == "i16" else 20
        params = tflm.add_params if op == "add" else tflm.sub_params
        n.attrs["m"] = params(q1[0], q2[0], yq[0], shift)
    n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)


def op_ADD(r):
    _binary(r, "add", "AddOptions")


def op_SUB(r):
    _binary(r, "sub", "SubOptions")


def op_MUL(r):
    _binary(r, "mul", "MulOptions")
