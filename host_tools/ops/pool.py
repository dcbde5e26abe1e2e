"""The host's half of maxpool, avgpool: TFLite's MAX_POOL_2D, AVERAGE_POOL_2D (docs/OPS.md):
converted from the model into the graph description, with TFLite Micro's Prepare parameters, for
the runtime's room mpy_lazy/ops/pool.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"AVERAGE_POOL_2D": "int8 int16 float32", "MAX_POOL_2D": "int8 int16 float32"}


def _pool(r, op):
    x = r.value(r.ins[0])
    h, w, c = r.ir.shapes[x]
    o = r.options("Pool2DOptions")
    kh, kw, sh, sw = o.FilterHeight(), o.FilterWidth(), o.StrideH(), o.StrideW()
    pads, oh, ow = r._padding(o.Padding(), h, w, kh, kw, sh, sw, 1, 1)
    act = r._act(o.FusedActivationFunction())
    n = r.emit(op, [x], k=(kh, kw), stride=(sh, sw), pad=pads if any(pads) else None)
    if op == "avgpool" and r.tensor(r.ins[0], raw=True)[2] == "UINT8":  # (a legacy uint8 model: TFLite's
        n.attrs["round"] = "up"  # uint8 kernel rounds the mean half up, TFLM's int8 one away from zero)
    yq = r.qof(r.outs[0])
    if yq is None:
        n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
    else:
        if yq != r.qof(r.ins[0]):
            raise r.err("integer pooling with different input and output quantization")
        n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], r.dtof(r.outs[0]))


def op_AVERAGE_POOL_2D(r):
    _pool(r, "avgpool")


def op_MAX_POOL_2D(r):
    _pool(r, "maxpool")
