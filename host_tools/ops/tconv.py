"""The host's half of tconv: TFLite's TRANSPOSE_CONV (docs/OPS.md): converted from the model into
the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/tconv.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from . import HYBRID, check_scales

# the tensor types taken (proven against TFLM's interpreter: tests/host/test_tflite*.py; 16x8 with an
# int64 bias, or an int16 one, which TFLM widens to int64)
TYPES = {
    "TRANSPOSE_CONV": "int8 int16 float32",
}


def op_TRANSPOSE_CONV(r):
    # inputs: output_shape (int32 [4]: a constant, or a model input: the output tensor's
    # shape is static, so it is read from there), weights OHWI, input, bias (optional)
    shape_t, w_t, x_t = r.ins[0], r.ins[1], r.ins[2]
    x = r.value(x_t)
    w = r.data(w_t)
    if w is None:
        raise r.err("the filter must be a constant")
    _, _, _, wscales, wzps, _ = r.tensor(w_t)
    if any(wzps):
        raise r.err("weights with a non-zero zero point")
    check_scales(r, wscales, w)
    bias = r.data(r.ins[3]) if len(r.ins) > 3 and r.ins[3] >= 0 else None
    o = r.options("TransposeConvOptions")
    _, oshape, _, _, _, _ = r.tensor(r.outs[0])
    if len(oshape) != 4 or oshape[0] != 1:
        raise r.err("the output must be 1, H, W, C")
    oh, ow, oc = int(oshape[1]), int(oshape[2]), int(oshape[3])
    kh, kw = int(w.shape[1]), int(w.shape[2])
    sh, sw = o.StrideH(), o.StrideW()
    pads, _, _ = r._padding(o.Padding(), oh, ow, kh, kw, sh, sw, 1, 1)  # TFLM: from the output's size
    act = r._act(o.FusedActivationFunction() if hasattr(o, "FusedActivationFunction") else 0)
    xq, yq = r.qof(x_t), r.qof(r.outs[0])
    if yq is None and w.dtype == np.int8:
        raise r.err(HYBRID)
    if yq is None:  # float: TFLM's reference TransposeConv, its fused activation within float32's range
        if w.dtype != np.float32 or bias is not None and bias.dtype != np.float32:
            raise r.err("a float TRANSPOSE_CONV with %s weights and a %s bias (float32 expected)"
                        % (w.dtype, None if bias is None else bias.dtype))
        if act == "relu_n1_to_1":
            raise r.err("fused activation RELU_N1_TO_1 on a float TRANSPOSE_CONV is not supported")
        n = r.emit("tconv", [x], out=oc, k=(kh, kw), stride=(sh, sw) if (sh, sw) != (1, 1) else None,
                   pad=(pads[0], pads[1]) if any(pads[:2]) else None, size=(oh, ow), act=act or "finite")
        n.t["w"] = r.add("weight", w)
        if bias is not None:
            n.t["b"] = r.add("bias", bias)
        return
    if w.dtype != np.int8:
        raise r.err("quantized model with %s weights (only int8 weights are supported)" % w.dtype)
    dt = r.dtof(r.outs[0])
    n = r.emit("tconv", [x], out=oc, k=(kh, kw), stride=(sh, sw) if (sh, sw) != (1, 1) else None,
                  pad=(pads[0], pads[1]) if any(pads[:2]) else None, size=(oh, ow))
    scales = list(wscales) if len(wscales) > 1 else list(wscales) * oc
    n.t["w"] = r.add("weight", w)
    r.ir.wquant[n.t["w"]] = (np.asarray(scales, np.float32), 0)
    if bias is not None:
        if dt == "i8" and bias.dtype != np.int32 or dt == "i16" and bias.dtype not in (np.int64, np.int16):
            raise r.err("a %s bias (int32 for int8, int64 or int16 for 16x8 expected)" % bias.dtype)
        if np.any(np.abs(bias.astype(np.int64)) > 2 ** 31 - 1):
            raise r.err("a bias beyond int32: not supported (the container stores int32)")
        n.t["b"] = r.add("bias", bias.astype(np.int32))
    mult, shift = tflm.conv_multipliers(xq[0], scales, yq[0])
    r._check_shifts(shift, 7 if dt == "i16" else 30)
    n.t["m"] = r.add("requant", np.array([mult, shift], dtype=np.int32))
    n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)
