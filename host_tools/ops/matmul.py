"""The host's half of batchmatmul: TFLite's BATCH_MATMUL (docs/OPS.md): converted from the model
into the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/matmul.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (TFLM's kernel; tests/host/test_tflite_reduce.py)
TYPES = {"BATCH_MATMUL": "int8 int16 float32"}


def op_BATCH_MATMUL(r):
    li, ri = r.ins[:2]
    if r.data(li) is not None:
        raise r.err("a constant left-hand side is not supported (the right-hand side may be one)")
    x = r.value(li)
    ls, rs, ys = (list(r.tensor(i)[1]) for i in (li, ri, r.outs[0]))
    if len(ls) < 2 or len(rs) < 2:
        raise r.err("operands of shapes %s and %s: matrices (2 dimensions or more)" % (ls, rs))
    o = r.options("BatchMatMulOptions")
    ax, ay = (bool(o.AdjX()), bool(o.AdjY())) if o is not None else (False, False)
    rank = max(len(ls), len(rs))
    le, re_ = [1] * (rank - len(ls)) + ls, [1] * (rank - len(rs)) + rs
    try:
        batch = list(np.broadcast_shapes(tuple(le[:-2]), tuple(re_[:-2])))
    except ValueError:
        raise r.err("batch dimensions %s and %s do not broadcast" % (le[:-2], re_[:-2]))
    m, k = (le[-1], le[-2]) if ax else (le[-2], le[-1])
    k2, n = (re_[-1], re_[-2]) if ay else (re_[-2], re_[-1])
    if k != k2 or ys != batch + [m, n]:
        raise r.err("shapes %s x %s (adj_x %d, adj_y %d) give %s, the output is %s"
                    % (ls, rs, ax, ay, batch + [m, n] if k == k2 else "nothing", ys))
    bcast = []
    for side in (le[:-2], re_[:-2]):
        if side == batch:
            bcast.append(0)
        elif all(d == 1 for d in side):
            bcast.append(1)
        else:
            raise r.err("batch dimensions %s over %s: one operand's batches all its own or all shared"
                        % (side, batch))
    b = int(np.prod(batch, dtype=np.int64))
    xs = [x]
    c = r.data(ri)
    if c is None:
        xs.append(r.value(ri))
    elif r.dtof(ri) != r.dtof(li):
        raise r.err("a %s constant with a %s activation" % (r.tensor(ri)[2], r.tensor(li)[2]))
    n_ = r.emit("batchmatmul", xs, size=(b, m, k, n), adj=(int(ax), int(ay)) if ax or ay else None,
                bcast=tuple(bcast) if any(bcast) else None)
    n_.attrs["shape"] = r.ir.shapes[n_.y]
    if c is not None:
        n_.t["w"] = r.add("rhs", c.reshape(-1))
    yq = r.qof(r.outs[0])
    if yq is None:
        return
    lq, rq = r.qof(li), r.qof(ri)
    if r.dtof(li) == "i16" and (lq[1] or rq[1] or yq[1]):
        raise r.err("int16 zero points %d, %d, %d: TFLM's int16 BATCH_MATMUL takes 0" % (lq[1], rq[1], yq[1]))
    (mult,), (shift,) = tflm.conv_multipliers(lq[0], [rq[0]], yq[0])
    r._check_shifts([shift], 30)
    n_.attrs["m"] = (mult, shift)
    if c is not None:
        n_.attrs["tq"] = "%r,%d" % rq
