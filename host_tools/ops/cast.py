"""The host's half of cast: TFLite's CAST (docs/OPS.md): converted from the model into the graph
description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/cast.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
from . import INT


def op_CAST(r):
    x = r.value(r.ins[0])
    types = [r.tensor(t)[2] for t in (r.ins[0], r.outs[0])]
    for t in types:
        if t not in ("FLOAT32", "UINT32") + tuple(INT) and (t, types[0]) != ("BOOL", "BOOL"):
            raise r.err("CAST %s %s is not supported (float32, int8, int16, int32; uint32 to or from integers; "
                        "from bool)" % ("to" if t == types[1] else "of", t))
    if "UINT32" in types and "FLOAT32" in types:  # (the board holds uint32 as int32 bits)
        raise r.err("CAST between uint32 and float32 is not supported (uint32 to or from integers is)")
    r.emit("cast", [x], dtype=r.dtof(r.outs[0]))


# the tensor types CAST takes (to and from each other; uint32 to and from the integers only; bool
# into any of the others, as TFLM's kernel: tests/host/test_tflite_elem.py, test_tflite_types.py,
# micro_speech's front ends in test_thirdparty.py)
TYPES = {"CAST": "int8 int16 int32 float32 bool uint32"}
