"""The host's half of linear: TFLite's FULLY_CONNECTED (docs/OPS.md): converted from the model into
the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/linear.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from ..ir import Node
from . import check_scales, declare, weight_zero_point

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"FULLY_CONNECTED": "int8 int16 float32"}


def op_FULLY_CONNECTED(r):
    x = r.value(r.ins[0])
    r.x0 = x
    w = r.data(r.ins[1])
    if w is None or w.ndim != 2:
        raise r.err("the weights must be a constant 2-D tensor")
    o = r.options("FullyConnectedOptions")
    if o is not None and o.WeightsFormat() != 0:
        raise r.err("shuffled weights are not supported")
    _, oshape, _, _, _, _ = r.tensor(r.outs[0])
    rows = int(np.prod(oshape[:-1]))
    _, _, _, wscales, _, _ = r.tensor(r.ins[1])
    wz = weight_zero_point(r, r.ins[1])
    check_scales(r, wscales, w)
    bias = r.data(r.ins[2]) if len(r.ins) > 2 and r.ins[2] >= 0 else None
    if oshape[-1] != w.shape[0]:  # TFLM takes the output's last dimension as the output depth
        raise r.err("output of shape %s for %d units" % (list(oshape), w.shape[0]))
    xq, yq = r.qof(r.ins[0]), r.qof(r.outs[0])
    if xq is not None and len(wscales) == 1 and bias is not None:  # TFLM's GetQuantizedConvolutionMultipler
        bscales = r.tensor(r.ins[2])[3]
        diff = abs(float(np.float32(xq[0])) * float(np.float32(wscales[0])) -
                   (float(np.float32(bscales[0])) if len(bscales) else 0.0))
        if diff / float(np.float32(yq[0])) > 0.02:
            raise r.err("bias scale differs from input x weight scale by %.3g output steps (TFLM takes "
                           "<= 0.02)" % (diff / float(np.float32(yq[0]))))
    act = r._act(o.FusedActivationFunction() if o is not None else 0)
    out, n_in = int(w.shape[0]), int(w.shape[1])
    if rows > 1 or wz:  # TFLM's batched FC: rows of n_in values, each through the weights; on the board
        # a 1x1 convolution over (rows, 1, n_in), the same integers (its per-channel requantization
        # of the per-tensor multiplier); a legacy uint8 model's too (conv2d takes the weights' zero point)
        size = int(np.prod(r.ir.shapes[x]))
        if size != rows * n_in:
            raise r.err("input of %d values for %d rows of %d (output shape %s)" % (size, rows, n_in, list(oshape)))
        r.x0 = _as(r, x, ".rows", (rows, 1, n_in))
        n = r._weighted("conv2d", r.qof(r.ins[0]), w.reshape(out, 1, 1, n_in), wscales, bias, r.qof(r.outs[0]),
                        act, dict(k=(1, 1), stride=(1, 1), out=out, wz=wz or None))
        flat = (rows, 1, out)
    else:
        n = r._weighted("linear", r.qof(r.ins[0]), w, wscales, bias, r.qof(r.outs[0]), act, dict(out=out))
        flat = (out,)
    if r.ir.shapes[n.y] != flat:  # keep_num_dims ((1, out), (1, H, W, out)) and the rows' shape
        y = n.y
        n.y = declare(r, y + ".flat", flat, y)
        r.ir.nodes.append(Node("reshape", [n.y], y, r.what, shape=r.ir.shapes[y]))


def _as(r, x, suffix, shape):
    """x reshaped to `shape` (a new value)."""
    v = declare(r, x + suffix, shape, x)
    r.ir.nodes.append(Node("reshape", [x], v, r.what, shape=shape))
    return v
