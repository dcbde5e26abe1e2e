"""The host's half of each op, one module per op as the runtime's rooms are (mpy_lazy/ops/,
docs/OPS.md): op_<BUILTIN>(r) converts one TFLite operator into its line of the graph
description and its tensors, computing the integer parameters as TensorFlow Lite Micro's
Prepare does (host_tools.tflm). r is the reader (host_tools.tflite_import._Reader): the
operator's tensors (ins, outs, value, data, tensor, qof, dtof, options), emit() for its graph
line, add() for a tensor, err() for its refusal, and the helpers several ops share (_weighted,
_padding, _act, _check_shifts). tflite_import.ROOMS maps each supported builtin to its module.
Below: what the ops share with the reader."""
import numpy as np

INT = {"INT8": "i8", "INT16": "i16", "INT32": "i32", "UINT8": "u8"}  # quantized activation types
# (uint8: a model input or output QUANTIZE turns into int8 and back, tflite_check.UINT8)
HYBRID = ("hybrid model (float activations with int8 weights): TFLite Micro does not run these either; "
          "convert with full-integer quantization or float weights")


def declare(r, v, shape, like):
    """Declare value v of `shape` with the quantization and dtype of value `like` (a view or a
    piece of it on the way to the op's output)."""
    r.ir.shapes[v] = tuple(shape)
    for table in (r.ir.q, r.ir.dtypes):
        if like in table:
            table[v] = table[like]
    return v


def weight_zero_point(r, i):
    """The zero point the kernels subtract from weight tensor i: 0, or a legacy uint8 model's
    uint8 weights' one (as int8: TFLite's uint8 zero point - 128; tflite_import reads those
    models as int8)."""
    zps = r.tensor(i)[4]
    if not any(zps):
        return 0
    if r.legacy and r.tensor(i, raw=True)[2] == "UINT8":
        if len(set(zps)) > 1:
            raise r.err("uint8 weights with %d zero points (TFLite's uint8 kernels take one per tensor)" % len(zps))
        return zps[0]
    raise r.err("weights with a non-zero zero point")


def check_scales(r, scales, w):
    if w.dtype == np.int8 and (not len(scales) or not all(np.isfinite(s) and s > 0 for s in scales)):
        raise r.err("int8 weights need finite scales > 0")
