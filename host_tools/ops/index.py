"""The host's half of the index ops: TFLite's GATHER_ND, EMBEDDING_LOOKUP and
DYNAMIC_UPDATE_SLICE (docs/OPS.md): converted from the model into the graph description, with
TFLite Micro's Prepare checks, for the runtime's room mpy_lazy/ops/index.py (gathernd, update).
op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from ..ir import Node
from .slice import _mid

# the tensor types taken for each builtin converted here (proven against TFLM's interpreter:
# tests/host/test_tflite_moves2.py)
TYPES = {
    "GATHER_ND": "int8 float32",
    "EMBEDDING_LOOKUP": "int8 float32",  # (and an int8 table to float32: TFLM's hybrid form)
    "DYNAMIC_UPDATE_SLICE": "int8 int16 int32 float32",
}
_DT = {np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32", np.dtype(np.float32): "f32"}


def _gather(r, params, indices, nd, want, hybrid=None):
    """Output = the slices of `params` (TFLite shape `pshape`) picked by the int32 index
    tuples of activation `indices` (nd components each): a gathernd of flat output, then the
    output's shape (a reshape: no copy). hybrid: the scale of an int8 table whose codes are
    dequantized to a float32 output (EMBEDDING_LOOKUP's hybrid form)."""
    pshape = r.tensor(params)[1]
    if r.tensor(indices)[2] != "INT32":
        raise r.err("indices of type %s (TFLM's take int32)" % r.tensor(indices)[2])
    if list(r.tensor(r.outs[0])[1]) != list(want):  # (TFLM's Prepare sets it: a declared other one is a damaged model)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), list(want)))
    if r.qof(r.outs[0]) != r.qof(params) and hybrid is None:
        raise r.err("output quantized %s, the params %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(params)))
    if r.data(indices) is not None:
        return _gather_constant(r, params, r.data(indices).reshape(-1, nd), pshape, want, hybrid)
    i = r.value(indices)
    if r.ir.shapes[i][-1] != nd:  # (EMBEDDING_LOOKUP's ids: index tuples of one component)
        tuples = (int(np.prod(r.ir.shapes[i])) // nd, nd)
        r.ir.nodes.append(Node("reshape", [i], _mid(r, i, "%s.i" % i, tuples), r.what, shape=tuples))
        i = "%s.i" % i
    data = r.data(params)
    y = r.define(r.outs[0])
    n = int(np.prod(r.tensor(indices)[1], dtype=np.int64)) // nd  # (index tuples)
    size = int(np.prod(want, dtype=np.int64)) // n
    slices = (n, size) if n > 1 else (size,)  # (gathernd's output: N slices x their size)
    flat = _mid(r, y, "%s.g" % y, slices)
    if hybrid is not None:  # (the codes, then their float32 values)
        codes, flat = flat, _mid(r, y, "%s.f" % y, slices)
        r.ir.q[codes] = (hybrid, 0)
    if data is None:
        n = Node("gathernd", [i, r.value(params)], flat, r.what, shape=tuple(pshape))
    else:
        if data.dtype not in _DT:
            raise r.err("params of type %s" % data.dtype)
        n = Node("gathernd", [i], flat, r.what, shape=tuple(pshape), dtype=_DT[data.dtype])
        n.t["t"] = r.add("params", data.reshape(-1))
    if hybrid is not None:
        n.y = codes
        r.ir.nodes.append(n)
        n = Node("dequantize", [codes], flat, r.what)
    r.ir.nodes.append(n)
    r.ir.nodes.append(Node("reshape", [flat], y, r.what, shape=tuple(r.ir.shapes[y])))


def _gather_constant(r, params, idx, pshape, want, hybrid):
    """Constant index tuples: TFLM's flat positions computed here; with constant params too the
    output is a constant (for the ops after it), else slices of the flat params, consecutive
    ones merged, joined by a concat (the board moves them: no index kernel)."""
    size = int(np.prod(pshape[idx.shape[1]:], dtype=np.int64))
    strides = [int(np.prod(pshape[j + 1:], dtype=np.int64)) for j in range(idx.shape[1])]
    total = int(np.prod(pshape, dtype=np.int64))
    runs = []  # [start, end) element runs of the flat params
    for k, row in enumerate(idx):
        at = sum(int(v) * c for v, c in zip(row, strides))
        if not 0 <= at <= total - size:
            raise r.err("index tuple %d %s starts at element %d, outside the params' %d (TFLM's invoke fails)"
                        % (k, [int(v) for v in row], at, total))
        if runs and runs[-1][1] == at:
            runs[-1][1] = at + size
        else:
            runs.append([at, at + size])
    data = r.data(params)
    if data is not None and hybrid is None:
        r.folded[(r.prefix, r.outs[0])] = np.concatenate([data.reshape(-1)[a:b] for a, b in runs]).reshape(want)
        return
    if data is not None:
        raise r.err("constant ids into a constant int8 table to float32: not supported")
    x = r.value(params)
    y = r.define(r.outs[0])
    flat = _mid(r, x, "%s.flat" % y, (total,))
    r.ir.nodes.append(Node("reshape", [x], flat, r.what, shape=(total,)))
    pieces = []
    for k, (a, b) in enumerate(runs):
        pieces.append(_mid(r, x, "%s.p%d" % (y, k), (b - a,)))
        r.ir.nodes.append(Node("slice", [flat], pieces[-1], r.what, begin=(a,), end=(b,)))
    joined = _mid(r, x, "%s.j" % y, (len(idx) * size,))
    r.ir.nodes.append(Node("concat", pieces, joined, r.what) if len(pieces) > 1 else
                      Node("reshape", pieces, joined, r.what, shape=(len(idx) * size,)))
    r.ir.nodes.append(Node("reshape", [joined], y, r.what, shape=tuple(r.ir.shapes[y])))


def op_GATHER_ND(r):
    params, indices = r.ins[0], r.ins[1]
    pshape, ishape = r.tensor(params)[1], r.tensor(indices)[1]
    if r.tensor(params)[2] not in ("INT8", "FLOAT32"):  # (TFLM's Prepare)
        raise r.err("params of type %s (TFLM's GATHER_ND takes int8 and float32)" % r.tensor(params)[2])
    nd = ishape[-1] if ishape else 0
    if not pshape or not ishape or not 1 <= nd <= min(len(pshape), 5):
        raise r.err("indices of shape %s for params of shape %s: 1 to 5 components, at most the params' rank"
                    % (ishape, pshape))
    _gather(r, params, indices, nd, list(ishape[:-1]) + list(pshape[nd:]))


def op_EMBEDDING_LOOKUP(r):
    ids, value = r.ins[0], r.ins[1]
    vshape, ishape = r.tensor(value)[1], r.tensor(ids)[1]
    vt, yt = r.tensor(value)[2], r.tensor(r.outs[0])[2]
    if vt not in ("INT8", "FLOAT32") or yt != vt and (vt, yt) != ("INT8", "FLOAT32"):  # (TFLM's Prepare)
        raise r.err("value of type %s, output %s (int8 or float32, both one, or an int8 value to float32)" % (vt, yt))
    if len(ishape) != 1 or len(vshape) < 2:
        raise r.err("ids of shape %s, value %s: a vector of ids, a value of 2 or more dimensions" % (ishape, vshape))
    hybrid = None
    if yt != vt:  # (TFLM's hybrid form: the codes times the value's scale, its zero point 0)
        q = r.qof(value)
        if r.data(value) is None or q is None or q[1] != 0:
            raise r.err("an int8 value to float32 needs a constant table of zero point 0 (TFLM's Prepare), got %s"
                        % (q,))
        hybrid = q[0]
    _gather(r, value, ids, 1, [ishape[0]] + list(vshape[1:]), hybrid)


def op_DYNAMIC_UPDATE_SLICE(r):
    operand, upd, starts = r.ins[0], r.ins[1], r.ins[2]
    xs, us, ss = (r.tensor(i)[1] for i in (operand, upd, starts))
    if r.tensor(upd)[2] != r.tensor(operand)[2] or r.qof(upd) != r.qof(operand):
        raise r.err("update %s %s, operand %s %s: one type and quantization" % (
            r.tensor(upd)[2], r.qof(upd), r.tensor(operand)[2], r.qof(operand)))
    if len(us) != len(xs) or any(a > b for a, b in zip(us, xs)) or ss != [len(xs)]:
        raise r.err("operand %s, update %s, start indices %s: one rank, the update no larger, one start per axis"
                    % (xs, us, ss))
    if list(r.tensor(r.outs[0])[1]) != list(xs) or r.qof(r.outs[0]) != r.qof(operand):
        raise r.err("output of shape %s quantized %s: the operand's %s %s" % (
            list(r.tensor(r.outs[0])[1]), r.qof(r.outs[0]), xs, r.qof(operand)))
    x, u = r.value(operand), r.value(upd)
    lead = len(xs) - len(r.ir.shapes[x])  # (the operand's batch of 1, left out on the board)
    if r.ir.shapes[u] != tuple(us[lead:]):  # (the update's too: the same rank)
        mid = _mid(r, u, "%s.r" % u, us[lead:])
        r.ir.nodes.append(Node("reshape", [u], mid, r.what, shape=tuple(us[lead:])))
        u = mid
    c = r.data(starts)
    if c is None:
        if r.tensor(starts)[2] != "INT32":
            raise r.err("start indices of type %s computed on the board (int32 are)" % r.tensor(starts)[2])
        r.emit("update", [x, u, r.value(starts)])
        return
    c = [int(v) for v in c.reshape(-1)]  # (TFLM's clamping, here)
    begin = [min(max(0, v), d - e) for v, d, e in zip(c, xs, us)]
    r.emit("update", [x, u], begin=tuple(begin[lead:]))
