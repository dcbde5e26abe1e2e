"""The host's half of reduce: TFLite's SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL, ARG_MAX, ARG_MIN, and MEAN
over other axes than an image's height and width (host_tools/ops/mean.py) (docs/OPS.md):
converted from the model into the graph description, with TFLite Micro's Prepare parameters,
for the runtime's room mpy_lazy/ops/reduce.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from ..ir import Node

# the tensor types mpy-lazy takes for each builtin (TFLM's kernels; tests/host/test_tflite_reduce.py):
# the input's (ARG_MAX and ARG_MIN write int32 indices)
TYPES = {"SUM": "int8 int16 float32", "REDUCE_MAX": "int8 float32", "REDUCE_MIN": "int8 float32",
         "ARG_MAX": "int8 float32", "ARG_MIN": "int8 float32",
         "REDUCE_ALL": "bool"}


def reduce(r, fn):
    """One reduce op over the operator's constant axes (TFLite's, batch included); a reshape
    after it when the output drops the reduced dimensions."""
    x = r.value(r.ins[0])
    if fn == "all" and r.tensor(r.ins[0])[2] != "BOOL":  # (bool into the others: tflite_check refuses it)
        raise r.err("a %s input: TFLM's REDUCE_ALL takes bool" % r.tensor(r.ins[0])[2])
    if fn in ("argmax", "argmin") and r.tensor(r.outs[0])[2] != "INT32":
        raise r.err("an output of type %s: TFLM's %s writes int32 indices" % (r.tensor(r.outs[0])[2], r.opname.upper()))
    shape = r.tensor(r.ins[0])[1]
    rt = r.ir.shapes[x]
    drop = len(shape) - len(rt)  # 1 when the board's value has no batch dimension
    axes = sorted({int(a) % len(shape) for a in np.asarray(r.data(r.ins[1])).reshape(-1)})
    axes = [a - drop for a in axes if a >= drop]  # (the batch is 1: reducing it changes no value)
    kept = tuple(1 if d in axes else s for d, s in enumerate(rt))
    n = Node("reduce", [x], None, r.what, fn=fn, axes=axes or None)
    y = r.define(r.outs[0])
    xq, yq = r.qof(r.ins[0]), r.qof(r.outs[0])
    if fn in ("max", "min") and xq is not None and tuple(xq) != tuple(yq):
        raise r.err("input q=%r,%d, output q=%r,%d: TFLM's int8 %s takes one quantization"
                    % (xq[0], xq[1], yq[0], yq[1], r.opname.upper()))
    if fn in ("sum", "mean") and xq is not None:
        count = int(np.prod([rt[a] for a in axes], dtype=np.int64))
        n.attrs["m"] = tflm.mean_params(xq[0], yq[0], count) if fn == "mean" else \
            tflm.quantize_multiplier(tflm.f32(xq[0]) / tflm.f32(yq[0]))
    if tuple(r.ir.shapes[y]) == kept:
        n.y = y
        r.ir.nodes.append(n)
        return
    n.y = y + ".reduce"
    r.ir.shapes[n.y] = kept
    for table in (r.ir.q, r.ir.dtypes):
        if y in table:
            table[n.y] = table[y]
    r.ir.nodes.append(n)
    r.ir.nodes.append(Node("reshape", [n.y], y, r.what, shape=r.ir.shapes[y]))


def op_SUM(r):
    reduce(r, "sum")


def op_REDUCE_MAX(r):
    reduce(r, "max")


def op_REDUCE_MIN(r):
    reduce(r, "min")


def op_ARG_MAX(r):
    reduce(r, "argmax")


def op_ARG_MIN(r):
    reduce(r, "argmin")


def op_REDUCE_ALL(r):
    reduce(r, "all")
