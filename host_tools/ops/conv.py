"""The host's half of conv2d and depthwise: TFLite's CONV_2D and DEPTHWISE_CONV_2D (docs/OPS.md):
converted from the model into the graph description, with TFLite Micro's Prepare parameters, for
the runtime's room mpy_lazy/ops/conv.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
from . import check_scales, weight_zero_point

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"CONV_2D": "int8 int16 float32", "DEPTHWISE_CONV_2D": "int8 int16 float32"}


def _conv_common(r, depthwise):
    x = r.value(r.ins[0])
    r.x0 = x
    w = r.data(r.ins[1])
    if w is None:
        raise r.err("the filter must be a constant")
    _, _, _, wscales, _, qdim = r.tensor(r.ins[1])
    wz = weight_zero_point(r, r.ins[1])
    check_scales(r, wscales, w)
    bias = r.data(r.ins[2]) if len(r.ins) > 2 and r.ins[2] >= 0 else None
    h, wd, c = r.ir.shapes[x]
    o = r.options("DepthwiseConv2DOptions" if depthwise else "Conv2DOptions")
    kh, kw = w.shape[1], w.shape[2]
    sh, sw = o.StrideH(), o.StrideW()
    dh, dw = o.DilationHFactor(), o.DilationWFactor()
    pads, oh, ow = r._padding(o.Padding(), h, wd, kh, kw, sh, sw, dh, dw)
    extra = dict(k=(kh, kw), stride=(sh, sw), pad=pads if any(pads) else None,
                 dil=(dh, dw) if (dh, dw) != (1, 1) else None, wz=wz or None)
    if depthwise:
        mult = w.shape[3] // c
        extra["mult"] = mult if mult != 1 else None
    else:
        g = c // w.shape[3]
        extra["out"] = w.shape[0]
        extra["groups"] = g if g != 1 else None
    r._weighted("depthwise" if depthwise else "conv2d", r.qof(r.ins[0]), w, wscales, bias,
                   r.qof(r.outs[0]), r._act(o.FusedActivationFunction()), extra)


def op_CONV_2D(r):
    _conv_common(r, False)


def op_DEPTHWISE_CONV_2D(r):
    _conv_common(r, True)
