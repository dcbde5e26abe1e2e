"""The host's half of slice, transpose: TFLite's STRIDED_SLICE, TRANSPOSE (docs/OPS.md): converted
from the model into the graph description, with TFLite Micro's Prepare parameters, for the
runtime's room mpy_lazy/ops/slice.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""


def op_STRIDED_SLICE(r):
    x = r.value(r.ins[0])
    begin, end, strides = (r.data(i) for i in r.ins[1:4])
    if begin is None or end is None or strides is None:
        raise r.err("begin, end and strides must be constants")
    o = r.options("StridedSliceOptions")
    _, shape, _, _, _, _ = r.tensor(r.ins[0])
    nd = len(shape)
    if o is not None and (o.EllipsisMask() or o.NewAxisMask() or o.ShrinkAxisMask()
                          or (o.Offset() if hasattr(o, "Offset") else 0)):
        raise r.err("ellipsis, new-axis, shrink-axis masks and offset are not supported")
    bm, em = (o.BeginMask(), o.EndMask()) if o is not None else (0, 0)
    b, e, st = [], [], []
    for d in range(nd):
        size, s_ = int(shape[d]), int(strides[d])
        if s_ < 1:
            raise r.err("negative or zero strides are not supported")
        lo = 0 if bm & (1 << d) else int(begin[d])
        hi = size if em & (1 << d) else int(end[d])
        lo = max(0, min(size, lo + size if lo < 0 else lo))  # TFLM's StartForAxis / StopForAxis
        hi = max(0, min(size, hi + size if hi < 0 else hi))
        b.append(lo)
        e.append(hi)
        st.append(s_)
    b0, e0, st0 = list(b), list(e), list(st)
    if nd > 1 and int(shape[0]) == 1:  # the batch: the board's values have none
        if (b[0], e[0]) != (0, 1):
            raise r.err("a slice of the batch dimension")
        b, e, st = b[1:], e[1:], st[1:]
    if any(hi <= lo for lo, hi in zip(b, e)):
        raise r.err("an empty slice")
    want = [(hi - lo + s_ - 1) // s_ for lo, hi, s_ in zip(b0, e0, st0)]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's Prepare compares them)
        raise r.err("output of shape %s for a slice of shape %s" % (list(r.tensor(r.outs[0])[1]), want))
    r.emit("slice", [x], begin=tuple(b), end=tuple(e), stride=tuple(st) if any(v != 1 for v in st) else None)


def op_TRANSPOSE(r):
    x = r.value(r.ins[0])
    perm = r.data(r.ins[1])
    if perm is None:
        raise r.err("the permutation must be a constant")
    perm = [int(v) for v in perm.reshape(-1)]
    _, shape, _, _, _, _ = r.tensor(r.ins[0])
    if len(perm) == 4 and int(shape[0]) == 1 and perm[0] == 0:  # the batch stays first
        perm = [v - 1 for v in perm[1:]]
    elif len(perm) == 4:
        raise r.err("a transpose that moves the batch dimension")
    r.emit("transpose", [x], perm=tuple(perm))
