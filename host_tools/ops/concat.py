"""The host's half of concat: TFLite's CONCATENATION and PACK (docs/OPS.md): converted from the
model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/concat.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from ..ir import Node
from . import declare

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"CONCATENATION": "int8 int16 int32 float32 bool int64", "PACK": "int8 int16 int32 float32 int64"}


def op_CONCATENATION(r):
    o = r.options("ConcatenationOptions")
    if r._act(o.FusedActivationFunction()) is not None:
        raise r.err("a fused activation on CONCATENATION is not supported")
    shape = r.tensor(r.ins[0])[1]
    if not -len(shape) <= o.Axis() < len(shape):
        raise r.err("axis %d outside the inputs' %d dimensions" % (o.Axis(), len(shape)))
    if any(r.data(i) is not None for i in r.ins):
        _padding(r, o.Axis() % len(shape))
        return
    _concat(r, o.Axis() % len(shape))


def _padding(r, axis):
    """One activation between constants of one value along the last axis (micro_speech's
    energy bins outside the filter bank, zeroed): pad, with that value."""
    yshape = list(r.tensor(r.outs[0])[1])
    consts = [r.data(i) for i in r.ins]
    acts = [k for k, c in enumerate(consts) if c is None]
    values = {int(v) for c in consts if c is not None for v in np.asarray(c).ravel()}
    if len(acts) != 1 or len(values) != 1 or axis != len(yshape) - 1 or r.dtof(r.outs[0]) == "f32":
        raise r.err("constant inputs are supported as one integer value before and after one activation, "
                    "along the last axis")
    if r.qof(r.ins[acts[0]]) != r.qof(r.outs[0]):
        raise r.err("integer inputs with another quantization than the output")
    before = sum(c.shape[-1] for c in consts[:acts[0]])
    after = sum(c.shape[-1] for c in consts[acts[0] + 1:])
    rank = len(r.ir.shapes[r.value(r.ins[acts[0]])])
    pad = [0] * (2 * rank)
    pad[rank - 1], pad[2 * rank - 1] = before, after
    r.emit("pad", [r.value(r.ins[acts[0]])], pad=tuple(pad), code=values.pop())


def op_PACK(r):
    o = r.options("PackOptions")
    shape = r.tensor(r.ins[0])[1]
    axis = o.Axis() if o is not None else 0
    if not -len(shape) - 1 <= axis <= len(shape):
        raise r.err("axis %d outside -%d..%d" % (axis, len(shape) + 1, len(shape)))
    if o is not None and o.ValuesCount() != len(r.ins):
        raise r.err("values_count %d for %d inputs" % (o.ValuesCount(), len(r.ins)))
    axis %= len(shape) + 1
    for i in r.ins:
        if list(r.tensor(i)[1]) != list(shape):
            raise r.err("inputs of shapes %s and %s: PACK stacks one shape" % (list(shape), list(r.tensor(i)[1])))
    want = list(shape[:axis]) + [len(r.ins)] + list(shape[axis:])
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's kernel trusts it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    _concat(r, axis, stacked=True)


def _concat(r, axis, stacked=False):
    """The inputs joined along TFLite axis `axis` of the output: the board's concat along its
    last axis directly; another axis as a concat of (outer, along, inner) views (reshapes, no
    copy: each dimension within the board's 65535) along axis 1, reshaped to the output."""
    yq = r.qof(r.outs[0])
    for i in r.ins:
        if r.qof(i) != yq:
            raise r.err("integer inputs with another quantization than the output")
    xs = [r.value(i) for i in r.ins]
    yshape = list(r.tensor(r.outs[0])[1])
    if not stacked and axis == len(yshape) - 1:
        r.emit("concat", xs)
        return
    outer, inner = _size(yshape[:axis]), _size(yshape[axis + 1:])
    y = r.define(r.outs[0])
    views = []
    for k, x in enumerate(xs):  # (one view per input, an input given twice too)
        v = declare(r, "%s.%d" % (y, k), (outer, _size(r.ir.shapes[x]) // (outer * inner), inner), x)
        r.ir.nodes.append(Node("reshape", [x], v, r.what, shape=r.ir.shapes[v]))
        views.append(v)
    mid = declare(r, "%s.c" % y, (outer, _size(r.ir.shapes[y]) // (outer * inner), inner), y)
    r.ir.nodes.append(Node("concat", views, mid, r.what, axis=1))
    r.ir.nodes.append(Node("reshape", [mid], y, r.what, shape=tuple(r.ir.shapes[y])))


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _copy_q(r, src, dst):
    for table in (r.ir.q, r.ir.dtypes):
        if src in table:
            table[dst] = table[src]


