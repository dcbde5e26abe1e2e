"""The host's half of concat: TFLite's CONCATENATION (docs/OPS.md): converted from the model into
the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/concat.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""


def op_CONCATENATION(r):
    xs = [r.value(i) for i in r.ins]
    o = r.options("ConcatenationOptions")
    _, shape, _, _, _, _ = r.tensor(r.ins[0])
    if not -len(shape) <= o.Axis() < len(shape) or o.Axis() % len(shape) != len(shape) - 1:
        raise r.err("only concatenation along the last (channel) axis is supported")
    if r._act(o.FusedActivationFunction()) is not None:
        raise r.err("a fused activation on CONCATENATION is not supported")
    yq = r.qof(r.outs[0])
    for i in r.ins:
        if r.qof(i) != yq:
            raise r.err("int8 inputs with another quantization than the output")
    r.emit("concat", xs)
