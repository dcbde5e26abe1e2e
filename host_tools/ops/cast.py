"""The host's half of cast: TFLite's CAST (docs/OPS.md): converted from the model into the graph
description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/cast.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
from . import INT

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"CAST": "int8 int16 int32 float32"}


def op_CAST(r):
    x = r.value(r.ins[0])
    for t in (r.ins[0], r.outs[0]):
        if r.tensor(t)[2] not in ("FLOAT32",) + tuple(INT):
            raise r.err("CAST of %s is not supported (float32, int8, int16, int32)" % r.tensor(t)[2])
    r.emit("cast", [x], dtype=r.dtof(r.outs[0]))
