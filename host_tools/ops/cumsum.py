"""The host's half of cumsum: TFLite's CUMSUM (docs/OPS.md): converted from the model into the
graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/cumsum.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (TFLM's kernel; tests/host/test_tflite_reduce.py)
TYPES = {"CUMSUM": "int8 float32"}


def op_CUMSUM(r):
    x = r.value(r.ins[0])
    shape = r.tensor(r.ins[0])[1]
    drop = len(shape) - len(r.ir.shapes[x])
    axis = np.asarray(r.data(r.ins[1])).reshape(-1)
    if axis.size != 1 or not -len(shape) <= int(axis[0]) < len(shape):
        raise r.err("axis %s for a %d-D input (one axis)" % (axis.tolist(), len(shape)))
    axis = int(axis[0]) % len(shape)
    if axis < drop:
        raise r.err("a running sum over the batch dimension is not supported")
    o = r.options("CumsumOptions")
    exclusive, reverse = (bool(o.Exclusive()), bool(o.Reverse())) if o is not None else (False, False)
    n = r.emit("cumsum", [x], axis=axis - drop, exclusive=int(exclusive) or None, reverse=int(reverse) or None)
    xq, yq = r.qof(r.ins[0]), r.qof(r.outs[0])
    if xq is None:
        return
    m, s = tflm.quantize_multiplier(2 * tflm.f32(xq[0]) / ((1 << 20) * tflm.f32(yq[0])))
    if s > 0:
        raise r.err("output scale %r below 2 x the input's / 2**20: TFLM's multiplier must be below one" % yq[0])
    n.attrs["m"] = (m, s)
