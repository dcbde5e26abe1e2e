"""The host's half of reshape: TFLite's RESHAPE (docs/OPS.md): converted from the model into the
graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/reshape.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""


def op_RESHAPE(r):
    x = r.value(r.ins[0])
    n = r.emit("reshape", [x])
    n.attrs["shape"] = r.ir.shapes[n.y]
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("int8 RESHAPE with different input and output quantization")
