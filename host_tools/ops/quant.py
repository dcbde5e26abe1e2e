"""The host's half of quantize, dequantize: TFLite's QUANTIZE (f32 -> int, or a requantization),
DEQUANTIZE (docs/OPS.md): converted from the model into the graph description, with TFLite
Micro's Prepare parameters, for the runtime's room mpy_lazy/ops/quant.py. op_<BUILTIN>(r): r the
reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"QUANTIZE": "int8 int16 int32 float32 uint8", "DEQUANTIZE": "int8 int16 uint8"}


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
    if xd in ("i8", "u8") and yd in ("i8", "u8"):  # int8 -> int8, uint8 <-> int8: a table of the output's
        lo, hi = tflm.RANGE[yd]  # bytes, indexed by the input's byte as int8 + 128 (a uint8 code b at b ^ 128)
        codes = [i ^ 128 if xd == "u8" else i - 128 for i in range(256)]
        ys = [max(lo, min(hi, yq[1] + tflm.mbqm(q - xq[1], m, s))) for q in codes]
        n = r.emit("lut", [x], dtype="u8" if yd == "u8" else None)
        n.t["t"] = r.add("lut", np.array(ys, dtype=np.int64).astype(np.uint8).view(np.int8))
        return
    r.emit("quantize", [x], dtype=yd if yd != "i8" else None, m=(m, s))


def op_DEQUANTIZE(r):
    x = r.value(r.ins[0])
    if r.qof(r.ins[0]) is None:
        raise r.err("DEQUANTIZE of a %s tensor is not supported (of an integer one)" % r.tensor(r.ins[0])[2])
    r.emit("dequantize", [x])
