"""The host's half of quantize, dequantize: TFLite's QUANTIZE (f32 -> int, or a requantization),
DEQUANTIZE (docs/OPS.md): converted from the model into the graph description, with TFLite
Micro's Prepare parameters, for the runtime's room mpy_lazy/ops/quant.py. op_<BUILTIN>(r): r the
reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm


def op_QUANTIZE(r):
    x = r.value(r.ins[0])
    xq, yq = r.qof(r.ins[0]), r.qof(r.outs[0])
    xd, yd = r.dtof(r.ins[0]), r.dtof(r.outs[0])
    if yq is None:
        raise r.err("QUANTIZE to %s is not supported (int8, int16 and int32 are)" % r.tensor(r.outs[0])[2])
    if xq is None:
        r.emit("quantize", [x], dtype=yd if yd != "i8" else None)
        return
    m, s = tflm.requantize_params(xq[0], yq[0])
    if xd == yd == "i8":  # an int8 -> int8 requantization: a table
        n = r.emit("lut", [x])
        n.t["t"] = r.add("lut", np.array([max(-128, min(127, yq[1] + tflm.mbqm(q - xq[1], m, s)))
                                             for q in range(-128, 128)], dtype=np.int8))
        return
    r.emit("quantize", [x], dtype=yd if yd != "i8" else None, m=(m, s))


def op_DEQUANTIZE(r):
    x = r.value(r.ins[0])
    if r.qof(r.ins[0]) is None:
        raise r.err("DEQUANTIZE of a %s tensor is not supported (of an integer one)" % r.tensor(r.ins[0])[2])
    r.emit("dequantize", [x])
