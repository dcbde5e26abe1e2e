"""The host's half of reshape: TFLite's RESHAPE, SQUEEZE, EXPAND_DIMS (and SHAPE, always computed
at pack time) (docs/OPS.md): converted from the model into the graph description, with TFLite
Micro's Prepare parameters, for the runtime's room mpy_lazy/ops/reshape.py. op_<BUILTIN>(r): r
the reader (host_tools.tflite_import)."""

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {
    "RESHAPE": "int8 int16 int32 float32", "SQUEEZE": "int8 int16 int32 float32",
    "EXPAND_DIMS": "int8 int16 float32", "SHAPE": "int8 int16 int32 float32"
}


def op_RESHAPE(r):
    x = r.value(r.ins[0])
    n = r.emit("reshape", [x])
    n.attrs["shape"] = r.ir.shapes[n.y]
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("int8 RESHAPE with different input and output quantization")


def op_SHAPE(r):  # (always computed at pack time: tflite_import._fold)
    raise r.err("not computed")


def op_SQUEEZE(r):
    shape = r.tensor(r.ins[0])[1]
    o = r.options("SqueezeOptions")
    dims = [int(d) for d in o.SqueezeDimsAsNumpy()] if o is not None and o.SqueezeDimsLength() else []
    if any(not -len(shape) <= d < len(shape) for d in dims):
        raise r.err("squeeze_dims %s outside the input's %d dimensions" % (dims, len(shape)))
    dims = {d % len(shape) for d in dims} or {d for d, n in enumerate(shape) if n == 1}
    if any(shape[d] != 1 for d in dims):
        raise r.err("squeeze_dims %s of shape %s: a dimension is not 1" % (sorted(dims), shape))
    _same(r, [n for d, n in enumerate(shape) if d not in dims])


def op_EXPAND_DIMS(r):
    shape = r.tensor(r.ins[0])[1]
    a = r.data(r.ins[1])
    if a is None or a.size != 1:
        raise r.err("the axis must be a constant of one element")
    a = int(a.reshape(-1)[0])
    if not -len(shape) - 1 <= a <= len(shape):
        raise r.err("axis %d outside -%d..%d" % (a, len(shape) + 1, len(shape)))
    a %= len(shape) + 1
    _same(r, list(shape[:a]) + [1] + list(shape[a:]))


def _same(r, want):
    """The output's shape is `want` (TFLM's kernels copy the bytes, trusting it): a reshape."""
    if list(r.tensor(r.outs[0])[1]) != want:
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    op_RESHAPE(r)
