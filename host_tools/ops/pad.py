"""The host's half of pad: TFLite's PAD (docs/OPS.md): converted from the model into the graph
description, with TFLite Micro's Prepare parameters, for the runtime's room mpy_lazy/ops/pad.py.
op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""


def op_PAD(r):
    x = r.value(r.ins[0])
    p = r.data(r.ins[1])
    if p is None or p.shape != (4, 2) or p[0].any() or p[3].any():
        raise r.err("only constant padding of height and width of an NHWC tensor is supported")
    yq, xq = r.qof(r.outs[0]), r.qof(r.ins[0])
    if yq != xq:
        raise r.err("int8 PAD with different input and output quantization")
    r.emit("pad", [x], pad=(int(p[1, 0]), int(p[2, 0]), int(p[1, 1]), int(p[2, 1])))
