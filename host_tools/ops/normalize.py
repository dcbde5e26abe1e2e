"""The host's half of logsoftmax, l2norm, l2pool: TFLite's LOG_SOFTMAX, L2_NORMALIZATION and
L2_POOL_2D (docs/OPS.md): converted from the model into the graph description for the runtime's
room mpy_lazy/ops/normalize.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (TFLM's kernels; tests/host/test_tflite_reduce.py)
TYPES = {"LOG_SOFTMAX": "int8 float32", "L2_NORMALIZATION": "int8 float32", "L2_POOL_2D": "float32"}


def _float(r):
    if r.dtof(r.ins[0]) != "f32":
        raise r.err("%s %s is not supported (float32 is)" % (r.tensor(r.ins[0])[2].lower(), r.opname.upper()))
    return r.value(r.ins[0])


def op_LOG_SOFTMAX(r):
    if r.dtof(r.ins[0]) != "i8":
        r.emit("logsoftmax", [_float(r)])
        return
    x = r.value(r.ins[0])
    yq = r.qof(r.outs[0])
    if yq != (0.0625, 127):
        raise r.err("output q=%r,%d: TFLM's int8 LOG_SOFTMAX writes q=16/256,127" % yq)
    m, s, rsd, rls, diff_min = tflm.log_softmax_params(r.qof(r.ins[0])[0])
    if s < 1:
        raise r.err("input scale %r: below TFLM's int8 LOG_SOFTMAX range" % r.qof(r.ins[0])[0])
    n = r.emit("logsoftmax", [x], m=(rsd, rls, diff_min))
    n.t["t"] = r.add("table", np.array(tflm.log_softmax_table(m, s, diff_min), np.int32))


def op_L2_NORMALIZATION(r):
    if r.dtof(r.ins[0]) not in ("f32", "i8"):
        raise r.err("%s L2_NORMALIZATION is not supported (int8 and float32 are)" % r.tensor(r.ins[0])[2].lower())
    x = r.value(r.ins[0])
    o = r.options("L2NormOptions")
    if o is not None and r._act(o.FusedActivationFunction()) is not None:
        raise r.err("a fused activation: TFLM's L2_NORMALIZATION takes none")
    r.emit("l2norm", [x])


def op_L2_POOL_2D(r):
    x = _float(r)
    h, w, c = r.ir.shapes[x]
    o = r.options("Pool2DOptions")
    kh, kw, sh, sw = o.FilterHeight(), o.FilterWidth(), o.StrideH(), o.StrideW()
    pads, oh, ow = r._padding(o.Padding(), h, w, kh, kw, sh, sw, 1, 1)
    r.emit("l2pool", [x], k=(kh, kw), stride=(sh, sw), pad=pads if any(pads) else None,
           act=r._act(o.FusedActivationFunction()))
