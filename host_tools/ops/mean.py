"""The host's half of mean: TFLite's MEAN over H and W of an int8 image (docs/OPS.md): converted
from the model into the graph description, with TFLite Micro's Prepare parameters, for the
runtime's room mpy_lazy/ops/mean.py; over any other axes, int16 and float32 (TFLM's order of
float32 additions), the general reduction (host_tools/ops/reduce.py). op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
from .. import tflm
from ..ir import Node
from .reduce import reduce

# the tensor types mpy-lazy takes for each builtin (TFLM's kernels; tests/host/test_tflite_reduce.py)
TYPES = {"MEAN": "int8 int16 float32"}


def op_MEAN(r):
    x = r.value(r.ins[0])
    axes = r.data(r.ins[1])
    _, shape, _, _, _, _ = r.tensor(r.ins[0])
    if len(shape) != 4 or sorted(int(a) % 4 for a in axes.reshape(-1)) != [1, 2] or r.dtof(r.ins[0]) != "i8":
        reduce(r, "mean")
        return
    o = r.options("ReducerOptions")
    keep = o.KeepDims() if o is not None else False
    h, w, c = r.ir.shapes[x]
    yq = r.qof(r.outs[0])
    n = Node("mean", [x], None, r.what)
    if yq is not None:
        n.attrs["m"] = tflm.mean_params(r.qof(r.ins[0])[0], yq[0], h * w)
    y = r.define(r.outs[0])
    if keep:
        n.y = y
        r.ir.nodes.append(n)
        return
    n.y = y + ".mean"
    r.ir.shapes[n.y] = (1, 1, c)
    if yq is not None:
        r.ir.q[n.y] = yq
    r.ir.nodes.append(n)
    r.ir.nodes.append(Node("reshape", [n.y], y, r.what, shape=r.ir.shapes[y]))
