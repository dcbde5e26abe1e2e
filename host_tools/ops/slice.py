"""The host's half of slice, transpose, depth2space, space2depth: TFLite's STRIDED_SLICE, SLICE,
SPLIT, SPLIT_V, UNPACK, TRANSPOSE, DEPTH_TO_SPACE, SPACE_TO_DEPTH, REVERSE_V2, BROADCAST_TO,
SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, GATHER (docs/OPS.md): converted from
the model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's
room mpy_lazy/ops/slice.py. An op of several outputs (SPLIT, SPLIT_V, UNPACK) becomes one slice
per output; GATHER of constant indices, one slice per run of consecutive indices and a
concat of them. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from ..ir import Node
from . import declare

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {
    "STRIDED_SLICE": "int8 int16 int32 float32 bool", "SLICE": "int8 int16 int32 float32 bool",
    "SPLIT": "int8 int16 int32 float32", "SPLIT_V": "int8 int16 int32 float32", "UNPACK": "int8 int16 int32 float32",
    "TRANSPOSE": "int8 int16 float32", "DEPTH_TO_SPACE": "int8 float32", "SPACE_TO_DEPTH": "int8 float32",
    "GATHER": "int8 float32",
    "REVERSE_V2": "int8 int16 int32 float32 bool uint8 int64",
    "SPACE_TO_BATCH_ND": "int8 float32",
    "BATCH_TO_SPACE_ND": "int8 float32",
    "BROADCAST_TO": "int8 int16 int32 float32",
    "BROADCAST_ARGS": "int32 int64",
}


def _axis(r, i, rank):
    """The constant axis in input i (negative from the end), checked against rank."""
    a = r.data(i)
    if a is None or a.size != 1:
        raise r.err("the axis must be a constant of one element")
    a = int(a.reshape(-1)[0])
    if not -rank <= a < rank:
        raise r.err("axis %d outside the input's %d dimensions" % (a, rank))
    return a % rank


def _mid(r, like, name, shape):
    """A value `name` of `shape` between two nodes of one op, of `like`'s dtype and q."""
    r.ir.shapes[name] = tuple(shape)
    for table in (r.ir.q, r.ir.dtypes):
        if like in table:
            table[name] = table[like]
    return name


def _chain(r, x, steps, y):
    """Nodes [(op, attrs, shape)] from value x, the last one's output y (its shape the output's)."""
    for k, (op, attrs, shape) in enumerate(steps):
        out = y if k == len(steps) - 1 else _mid(r, x, "%s.%d" % (y, k), shape)
        r.ir.nodes.append(Node(op, [x], out, r.what, **attrs))
        x = out


def piece(r, x, shape, out, begin, end, stride=None):
    """Output tensor `out` = x[begin:end:stride] (x of TFLite shape `shape`, every axis given; a
    negative stride walks the axis backwards from begin down to end + 1, end >= -1):
    a slice of the board's value (a leading batch 1 left out), reshaped (no copy) where the
    output's shape is another (UNPACK's dropped axis, a leading 1)."""
    stride = stride or [1] * len(shape)
    lead = len(shape) - len(r.ir.shapes[x])  # (a batch of 1, and 5-D's leading 1s: the board's values have none)
    begin, end, stride = begin[lead:], end[lead:], stride[lead:]
    if any(hi <= lo if s > 0 else lo <= hi for lo, hi, s in zip(begin, end, stride)):
        raise r.err("an empty slice")
    y = r.define(out)
    if x in r.ir.q and r.ir.q.get(y) != r.ir.q[x]:
        raise r.err("output %s quantized %s, the input %s: the op moves codes, both need one" % (
            y, r.ir.q.get(y), r.ir.q[x]))
    natural = tuple((hi - lo + s - 1) // s if s > 0 else (lo - hi - s - 1) // -s for lo, hi, s in zip(begin, end, stride))
    attrs = dict(begin=tuple(begin), end=tuple(end), stride=tuple(stride) if any(s != 1 for s in stride) else None)
    if natural == tuple(r.ir.shapes[y]):
        r.ir.nodes.append(Node("slice", [x], y, r.what, **{k: v for k, v in attrs.items() if v is not None}))
        return
    _chain(r, x, [("slice", {k: v for k, v in attrs.items() if v is not None}, natural),
                  ("reshape", dict(shape=tuple(r.ir.shapes[y])), r.ir.shapes[y])], y)


def _split(r, x, shape, axis, sizes):
    """One slice per output: `sizes` along `axis`, in order."""
    if len(r.outs) != len(sizes):
        raise r.err("%d outputs for %d pieces" % (len(r.outs), len(sizes)))
    at = 0
    for out, n in zip(r.outs, sizes):
        want = list(shape)
        want[axis] = n
        if list(r.tensor(out)[1]) != want:  # (TFLM's kernel trusts them: refused here)
            raise r.err("output of shape %s, the piece is %s" % (list(r.tensor(out)[1]), want))
        begin, end = [0] * len(shape), list(shape)
        begin[axis], end[axis] = at, at + n
        piece(r, x, shape, out, begin, end)
        at += n


def op_SPLIT(r):
    x = r.value(r.ins[1])
    shape = r.tensor(r.ins[1])[1]
    axis = _axis(r, r.ins[0], len(shape))
    o = r.options("SplitOptions")
    n = o.NumSplits() if o is not None else 0
    if n < 1 or shape[axis] % n:
        raise r.err("num_splits %d does not divide axis %d (size %d)" % (n, axis, shape[axis]))
    _split(r, x, shape, axis, [shape[axis] // n] * n)


def op_SPLIT_V(r):
    x = r.value(r.ins[0])
    shape = r.tensor(r.ins[0])[1]
    sizes = r.data(r.ins[1])
    if sizes is None:
        raise r.err("size_splits must be a constant")
    sizes = [int(v) for v in sizes.reshape(-1)]
    axis = _axis(r, r.ins[2], len(shape))
    if sizes.count(-1) == 1:  # (TFLM's Prepare: one size inferred from the others)
        sizes[sizes.index(-1)] = shape[axis] - sum(v for v in sizes if v != -1)
    if any(v < 1 for v in sizes) or sum(sizes) != shape[axis]:
        raise r.err("size_splits %s: sizes >= 1 adding up to axis %d's %d" % (sizes, axis, shape[axis]))
    _split(r, x, shape, axis, sizes)


def op_UNPACK(r):
    x = r.value(r.ins[0])
    shape = r.tensor(r.ins[0])[1]
    o = r.options("UnpackOptions")
    axis = o.Axis() if o is not None else 0
    if not -len(shape) <= axis < len(shape):
        raise r.err("axis %d outside the input's %d dimensions" % (axis, len(shape)))
    axis %= len(shape)
    num = o.Num() if o is not None else 0
    if num != shape[axis] or len(r.outs) != num:
        raise r.err("num %d and %d outputs for axis %d of size %d" % (num, len(r.outs), axis, shape[axis]))
    for k, out in enumerate(r.outs):
        want = list(shape[:axis]) + list(shape[axis + 1:])
        if list(r.tensor(out)[1]) != want:
            raise r.err("output %d of shape %s, the piece is %s" % (k, list(r.tensor(out)[1]), want))
        begin, end = [0] * len(shape), list(shape)
        begin[axis], end[axis] = k, k + 1
        piece(r, x, shape, out, begin, end)


def op_SLICE(r):
    x = r.value(r.ins[0])
    shape = r.tensor(r.ins[0])[1]
    begin, size = r.data(r.ins[1]), r.data(r.ins[2])
    if begin is None or size is None or begin.size != len(shape) or size.size != len(shape):
        raise r.err("begin and size must be constants of %d elements" % len(shape))
    b, e = [], []
    for d, (lo, n) in enumerate(zip(begin.reshape(-1), size.reshape(-1))):
        lo, n = int(lo), int(n)
        n = shape[d] - lo if n == -1 else n  # (TFLM: -1, to the end)
        if not 0 <= lo or n < 1 or lo + n > shape[d]:
            raise r.err("axis %d: begin %d, size %d outside its %d" % (d, lo, n, shape[d]))
        b.append(lo)
        e.append(lo + n)
    if list(r.tensor(r.outs[0])[1]) != [hi - lo for lo, hi in zip(b, e)]:
        raise r.err("output of shape %s for a slice of shape %s" % (list(r.tensor(r.outs[0])[1]),
                                                                    [hi - lo for lo, hi in zip(b, e)]))
    piece(r, x, shape, r.outs[0], b, e)

def op_STRIDED_SLICE(r):
    x = r.value(r.ins[0])
    begin, end, strides = (r.data(i) for i in r.ins[1:4])
    if begin is None or end is None or strides is None:
        raise r.err("begin, end and strides must be constants")
    o = r.options("StridedSliceOptions")
    _, shape, _, _, _, _ = r.tensor(r.ins[0])
    nd = len(shape)
    if o is not None and (o.EllipsisMask() or o.NewAxisMask() or (o.Offset() if hasattr(o, "Offset") else 0)):
        raise r.err("ellipsis and new-axis masks and offset are not supported")
    bm, em, sm = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) if o is not None else (0, 0, 0)
    b, e, st, want = [], [], [], []
    for d in range(nd):
        size, s_ = int(shape[d]), int(strides[d])
        if s_ == 0 or s_ < 0 and sm & (1 << d):
            raise r.err("axis %d: stride %d%s is not supported" % (d, s_, " with shrink_axis" if s_ else ""))
        if s_ > 0:
            lo = 0 if bm & (1 << d) else int(begin[d])
            hi = size if em & (1 << d) else int(end[d])
            lo = max(0, min(size, lo + size if lo < 0 else lo))  # TFLM's StartForAxis / StopForAxis
            hi = max(0, min(size, hi + size if hi < 0 else hi))
        else:  # (backwards: from lo down to hi + 1, both clamped to -1..size - 1)
            lo = size - 1 if bm & (1 << d) else int(begin[d])
            hi = -1 if em & (1 << d) else int(end[d])
            lo = max(-1, min(size - 1, lo + size if lo < 0 and not bm & (1 << d) else lo))
            hi = max(-1, min(size - 1, hi + size if hi < 0 and not em & (1 << d) else hi))
            b.append(lo)
            e.append(hi)
            st.append(s_)
            want.append((lo - hi - s_ - 1) // -s_ if lo > hi else 0)
            continue
        if sm & (1 << d):  # (TFLM: one element at begin, the axis left out of the output)
            lo = int(begin[d]) + size if int(begin[d]) < 0 else int(begin[d])
            if not 0 <= lo < size:
                raise r.err("axis %d: shrink at %d outside its %d" % (d, int(begin[d]), size))
            hi, s_ = lo + 1, 1
        else:
            want.append((hi - lo + s_ - 1) // s_ if hi > lo else 0)
        b.append(lo)
        e.append(hi)
        st.append(s_)
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's Prepare compares them)
        raise r.err("output of shape %s for a slice of shape %s" % (list(r.tensor(r.outs[0])[1]), want))
    piece(r, x, shape, r.outs[0], b, e, st)


def op_TRANSPOSE(r):
    x = r.value(r.ins[0])
    perm = r.data(r.ins[1])
    shape = r.tensor(r.ins[0])[1]
    if perm is None or perm.dtype != np.int32:  # (TFLM reads the permutation as int32 whatever its type)
        raise r.err("the permutation must be a constant int32")
    perm = [int(v) for v in perm.reshape(-1)]
    if sorted(perm) != list(range(len(shape))) or len(shape) > 5:
        raise r.err("perm %s: a permutation of the input's %d dimensions (up to 5, as TFLM's)" % (perm, len(shape)))
    want = [shape[d] for d in perm]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's kernel trusts it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("output quantized %s, the input %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(r.ins[0])))
    # the axes that move: axes of 1 left out, and input axes that stay neighbours in the
    # output merged (the elements' order is row-major either way)
    kept = [d for d in perm if shape[d] > 1]
    groups = []  # runs of input axes, in output order
    for d in kept:
        if groups and d > groups[-1][-1] and all(shape[e] == 1 for e in range(groups[-1][-1] + 1, d)):
            groups[-1].append(d)
        else:
            groups.append([d])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])  # the groups in input order
    sizes = [int(np.prod([shape[d] for d in groups[g]])) for g in order]
    if order == sorted(order):  # nothing moves: the bytes stay
        n = r.emit("reshape", [x])
        n.attrs["shape"] = r.ir.shapes[n.y]
        return
    tperm = tuple(order.index(g) for g in range(len(groups)))
    y = r.define(r.outs[0])
    moved = tuple(sizes[i] for i in tperm)
    steps = []
    if len(groups) <= 3:
        if tuple(r.ir.shapes[x]) != tuple(sizes):
            steps.append(("reshape", dict(shape=tuple(sizes)), sizes))
        steps.append(("transpose", dict(perm=tperm), moved))
    else:  # 4 or 5 groups (the board's values have 3): one 3-D transpose per output group,
        # each moving the next one to the end, after those placed: (rest before, it, rest after
        # + placed) -> (rest before, rest after + placed, it)
        rest, placed = list(range(len(groups))), []
        for g in tperm:
            p = rest.index(g)
            after = rest[p + 1:] + placed
            if after:
                view = (_prod(sizes, rest[:p]), sizes[g], _prod(sizes, after))
                steps.append(("reshape", dict(shape=view), view))
                steps.append(("transpose", dict(perm=(0, 2, 1)), (view[0], view[2], view[1])))
            rest.remove(g)
            placed.append(g)
    if tuple(r.ir.shapes[y]) != tuple(steps[-1][2]):
        steps.append(("reshape", dict(shape=tuple(r.ir.shapes[y])), r.ir.shapes[y]))
    _chain(r, x, steps, y)


def _prod(sizes, which):
    return int(np.prod([sizes[i] for i in which]))


def op_REVERSE_V2(r):
    x = r.value(r.ins[0])
    shape = r.tensor(r.ins[0])[1]
    axes = r.data(r.ins[1])
    if axes is None or axes.ndim != 1 or axes.dtype != np.int32:
        raise r.err("the axes must be a constant int32 vector")
    axes = sorted(int(a) + len(shape) if a < 0 else int(a) for a in axes)
    if any(not 0 <= a < len(shape) for a in axes) or len(set(axes)) != len(axes):
        raise r.err("axes %s outside the input's %d dimensions" % (axes, len(shape)))
    if axes and axes[-1] - axes[0] != len(axes) - 1:  # (TFLM's kernel refuses them too)
        raise r.err("axes %s: not contiguous" % axes)
    if list(r.tensor(r.outs[0])[1]) != list(shape):
        raise r.err("output of shape %s for an input of shape %s" % (list(r.tensor(r.outs[0])[1]), list(shape)))
    backwards = [d in axes and n > 1 for d, n in enumerate(shape)]
    piece(r, x, shape, r.outs[0], [n - 1 if b else 0 for n, b in zip(shape, backwards)],
          [-1 if b else n for n, b in zip(shape, backwards)], [-1 if b else 1 for b in backwards])


def op_BROADCAST_TO(r):
    shape = r._broadcast_shape(r.tensor(r.ins[0])[1])
    c = r.data(r.ins[0])
    if c is not None:  # a constant: broadcast here, a constant for the ops after it (ADD's operand...)
        r.folded[(r.prefix, r.outs[0])] = np.ascontiguousarray(np.broadcast_to(c, shape))
        return
    x = r.value(r.ins[0])
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("output quantized %s, the input %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(r.ins[0])))
    n = r.emit("broadcast", [x])
    n.attrs["shape"] = tuple(r.ir.shapes[n.y])  # (the board's: a batch of 1 left out)


def op_BROADCAST_ARGS(r):
    raise r.err("the shapes must be constants or computed from static shapes (SHAPE): "
                "the board computes no shapes")


def _batch_space(r, crops_name):
    """SPACE_TO_BATCH_ND's and BATCH_TO_SPACE_ND's input, block and paddings (crops), checked
    as TFLM's Prepare checks them: 3-D (B, W, C), or 4-D (B, H, W, C) whose blocks are all 1
    (other 4-D forms have a batch beyond 1 on one side, which the board's values lack)."""
    shape = r.tensor(r.ins[0])[1]
    block, pads = r.data(r.ins[1]), r.data(r.ins[2])
    if not 3 <= len(shape) <= 4:
        raise r.err("input shape %s: the op takes 3 or 4 dimensions" % (shape,))
    n = len(shape) - 2
    if block is None or pads is None or block.shape != (n,) or pads.shape != (n, 2):
        raise r.err("block_shape and %s must be constants of shapes [%d] and [%d, 2]" % (crops_name, n, n))
    block, pads = [int(v) for v in block], [[int(a), int(b)] for a, b in pads]
    if any(b < 1 for b in block) or any(v < 0 for p in pads for v in p):
        raise r.err("block_shape %s, %s %s: blocks >= 1, sizes >= 0" % (block, crops_name, pads))
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("output quantized %s, the input %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(r.ins[0])))
    return shape, block, pads


def op_SPACE_TO_BATCH_ND(r):
    x = r.value(r.ins[0])
    shape, block, pads = _batch_space(r, "paddings")
    padded = [n + a + b for n, (a, b) in zip(shape[1:-1], pads)]
    if shape[0] != 1 or any(n % b for n, b in zip(padded, block)):
        raise r.err("input shape %s padded by %s to %s: batch 1 and sizes multiples of block_shape %s"
                    % (shape, pads, padded, block))
    want = [int(np.prod(block))] + [n // b for n, b in zip(padded, block)] + [shape[-1]]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's kernel trusts it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    if any(v for p in pads for v in p):
        raise r.err("paddings %s: TFLM's kernel pads with a value it never sets (its "
                    "SpaceToBatchParams.output_offset: the arena's bytes), so no answer is TFLM's" % pads)
    y = r.define(r.outs[0])
    steps = []
    if len(shape) == 3 and block[0] > 1:  # (W', C) as (W' / b, b, C), then (b, W' / b, C)
        steps.append(("reshape", dict(shape=(want[1], block[0], shape[-1])), (want[1], block[0], shape[-1])))
        steps.append(("transpose", dict(perm=(1, 0, 2)), tuple(want)))
    if tuple(r.ir.shapes[y]) != (steps[-1][2] if steps else r.ir.shapes[x]) or not steps:
        steps.append(("reshape", dict(shape=tuple(r.ir.shapes[y])), r.ir.shapes[y]))
    _chain(r, x, steps, y)


def op_BATCH_TO_SPACE_ND(r):
    x = r.value(r.ins[0])
    shape, block, crops = _batch_space(r, "crops")
    full = [n * b for n, b in zip(shape[1:-1], block)]
    want = [shape[0] // int(np.prod(block))] + [n - a - b for n, (a, b) in zip(full, crops)] + [shape[-1]]
    if shape[0] != int(np.prod(block)) or any(n < 1 for n in want):
        raise r.err("input shape %s, block_shape %s, crops %s: a batch of block_shape's product, crops "
                    "smaller than the sizes" % (shape, block, crops))
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's kernel trusts it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    y = r.define(r.outs[0])
    steps = []
    if len(shape) == 3 and block[0] > 1:  # (b, w, C) as (w, b, C), then (w b, C)
        steps.append(("transpose", dict(perm=(1, 0, 2)), (shape[1], block[0], shape[2])))
        steps.append(("reshape", dict(shape=(full[0], shape[2])), (full[0], shape[2])))
    size = tuple(full) + (shape[-1],)
    if any(v for c in crops for v in c):
        begin = tuple(a for a, _ in crops) + (0,)
        steps.append(("slice", dict(begin=begin, end=tuple(n - b for n, (_, b) in zip(full, crops)) + (shape[-1],)),
                      tuple(want[1:])))
        size = tuple(want[1:])
    if tuple(r.ir.shapes[y]) != size or not steps:
        steps.append(("reshape", dict(shape=tuple(r.ir.shapes[y])), r.ir.shapes[y]))
    _chain(r, x, steps, y)


def op_DEPTH_TO_SPACE(r):
    _blocks(r, "depth2space", "DepthToSpaceOptions")


def op_SPACE_TO_DEPTH(r):
    _blocks(r, "space2depth", "SpaceToDepthOptions")


def _blocks(r, op, options):
    x = r.value(r.ins[0])
    o = r.options(options)
    b = o.BlockSize() if o is not None else 0
    shape = r.tensor(r.ins[0])[1]
    if len(shape) != 4 or shape[0] != 1:
        raise r.err("input shape %s: the op takes 1, H, W, C" % (shape,))
    _, h, w, c = shape
    if b < 1 or (c % (b * b) if op == "depth2space" else h % b or w % b):
        raise r.err("block_size %d for input shape %s" % (b, shape))
    want = [1, h * b, w * b, c // (b * b)] if op == "depth2space" else [1, h // b, w // b, c * b * b]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's Prepare computes it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("output quantized %s, the input %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(r.ins[0])))
    r.emit(op, [x], block=b)


def op_GATHER(r):
    """TFLM's GATHER of constant int32 indices: y[b, o, c, i] = x[b, o, indices[b, c], i] (b the
    batch_dims leading axes, o the axes before `axis`, i those after)."""
    x = r.value(r.ins[0])
    _, shape, typ, _, _, _ = r.tensor(r.ins[0])
    shape = list(shape)
    if typ not in ("INT8", "FLOAT32"):
        raise r.err("%s values: TFLM's GATHER takes float32 and int8" % typ.lower())
    idx = r.data(r.ins[1])
    if idx is None:
        raise r.err("indices computed on the board are not supported (constant indices are)")
    o = r.options("GatherOptions")
    axis, bd = (o.Axis(), o.BatchDims()) if o is not None else (0, 0)
    axis += len(shape) if axis < 0 else 0
    bd += idx.ndim if bd < 0 else 0
    if not (0 <= bd <= axis < len(shape) and bd <= idx.ndim and list(idx.shape[:bd]) == shape[:bd]):
        raise r.err("axis %d, batch_dims %d for input shape %s and indices %s (TFLM's Prepare refuses it)"
                    % (axis, bd, shape, list(idx.shape)))
    if idx.size == 0 or idx.min() < 0 or idx.max() >= shape[axis]:
        raise r.err("indices outside 0..%d (axis %d of shape %s): TFLM reads outside the input"
                    % (shape[axis] - 1, axis, shape))
    want = shape[:axis] + list(idx.shape[bd:]) + shape[axis + 1:]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM sets the output's shape: a model's other one misleads)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    batches = int(np.prod(shape[:bd]))
    outer, n, inner = int(np.prod(shape[bd:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    y = r.define(r.outs[0])
    if x in r.ir.q and r.ir.q.get(y) != r.ir.q[x]:
        raise r.err("output quantized %s, the input %s: GATHER moves codes, both need one" % (r.ir.q.get(y), r.ir.q[x]))
    view = declare(r, y + ".x", (batches * outer, n, inner), x)
    r.ir.nodes.append(Node("reshape", [x], view, r.what, shape=r.ir.shapes[view]))
    ids = idx.reshape(batches, -1).astype(np.int64)
    count = ids.shape[1]
    parts = []
    for b in range(batches):
        pieces, k = [], 0
        while k < count:  # a run of consecutive indices: one slice
            e = k + 1
            while e < count and ids[b, e] == ids[b, e - 1] + 1:
                e += 1
            v = declare(r, "%s.%d.%d" % (y, b, k), (outer, e - k, inner), x)
            r.ir.nodes.append(Node("slice", [view], v, r.what, begin=(b * outer, int(ids[b, k]), 0),
                                   end=((b + 1) * outer, int(ids[b, k]) + e - k, inner)))
            pieces.append(v)
            k = e
        parts.append(pieces[0] if len(pieces) == 1 else _join(r, pieces, "%s.%d" % (y, b), (outer, count, inner), 1, x))
    whole = parts[0] if batches == 1 else _join(r, parts, y + ".b", (batches * outer, count, inner), 0, x)
    r.ir.nodes.append(Node("reshape", [whole], y, r.what, shape=tuple(r.ir.shapes[y])))


def _join(r, xs, v, shape, axis, like):
    declare(r, v, shape, like)
    r.ir.nodes.append(Node("concat", xs, v, r.what, axis=axis))
    return v
