"""The host's half of constant values: TFLite's FILL and ZEROS_LIKE, and `constant()`, the
`const` line of a constant operand of a comparison, a logical op or SELECT_V2 (docs/OPS.md),
for the runtime's room mpy_lazy/ops/const.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
import numpy as np

from ..ir import Node
from ..tflite_import import _hwc

# the tensor types each builtin takes (what tests/host/test_tflite_compare.py proves against TFLM)
TYPES = {"FILL": "int8 int32 float32", "ZEROS_LIKE": "int8 int32 float32 int64"}


def _line(r, y, shape, dt, q, values=None, number=None):
    """Emit `const y=... shape=...` holding `values` (an array of the value's shape) or the
    repeated `number`."""
    n = Node("const", [], y, r.what, shape=tuple(shape), dtype=dt if dt != "f32" else None)
    if values is not None:
        arr = np.ascontiguousarray(values.reshape(shape))
        if dt == "i64":  # (its words: a container holds no int64 tensor)
            arr = arr.astype("<i8").view("<i4").reshape(tuple(shape[:-1]) + (2 * shape[-1],))
        n.t["t"] = r.add("const", arr.astype(np.uint8) if dt == "bool" else arr)
    elif dt == "f32":
        n.attrs["value"] = float(number)
    else:
        n.attrs["code"] = int(number)
    r.ir.shapes[y] = tuple(shape)
    if q is not None:
        r.ir.q[y] = q
    if dt not in ("f32", "i8"):
        r.ir.dtypes[y] = dt
    r.ir.nodes.append(n)
    return n


def constant(r, i):
    """The value name of operand tensor i: its activation, or for a constant a `const` line
    (one value repeated by a fill record, else the tensor loaded into the arena)."""
    c = r.data(i)
    if c is None:
        return r.value(i)
    dt = "bool" if c.dtype == np.bool_ else r.dtof(i)
    if dt not in ("f32", "i8", "i16", "i32", "bool", "i64"):
        raise r.err("a constant of type %s" % r.tensor(i)[2])
    shape = _hwc(list(c.shape), r) if c.ndim else (1,)
    y = r.prefix + "t%d" % i  # (an inlined subgraph's tensor i is another)
    if y in r.ir.shapes:  # (the same constant read twice)
        return y
    q = r.qof(i) if dt not in ("f32", "bool") else None
    flat = c.reshape(-1)
    if flat.size and np.all(flat == flat[0]) and (dt != "f32" or np.isfinite(flat[0])) and \
            (dt != "i64" or flat[0] in (0, -1)):  # (an i64 fill writes words)
        _line(r, y, shape, dt, q, number=flat[0])
    else:
        _line(r, y, shape, dt, q, values=c)
    return y


def _filled(r, number):
    y = r.outs[0]
    _, shape, typ, _, _, _ = r.tensor(y)
    dt = r.dtof(y)
    if dt not in ("f32", "i8", "i32") and (dt, r.opname) != ("i64", "zeros_like"):
        raise r.err("%s %s is not supported (TFLM's kernel takes %s)" % (
            typ, r.opname.upper(), TYPES[r.opname.upper()].replace(" ", ", ")))
    shape = _hwc(shape, r)
    if dt == "f32" and not np.isfinite(number):  # (the description's numbers are finite)
        _line(r, r.prefix + "t%d" % y, shape, dt, None, values=np.full(shape, number, np.float32))
        return
    _line(r, r.prefix + "t%d" % y, shape, dt, r.qof(y), number=number)


def op_ZEROS_LIKE(r):
    """TFLM's ZEROS_LIKE: code 0 (whatever the zero point), of the input's shape."""
    _filled(r, 0)


def op_FILL(r):
    """TFLM's FILL: the value's code (or float) repeated; the dims a constant (checked)."""
    v = r.data(r.ins[1])
    if v is None:
        raise r.err("a value computed on the board: FILL's value must be a constant")
    if v.size != 1:
        raise r.err("value of %d elements: FILL's value is a scalar" % v.size)
    if r.tensor(r.ins[1])[2] != r.tensor(r.outs[0])[2]:
        raise r.err("value of type %s, output %s" % (r.tensor(r.ins[1])[2], r.tensor(r.outs[0])[2]))
    dims = [int(d) for d in r.data(r.ins[0]).reshape(-1)]
    if dims != list(r.tensor(r.outs[0])[1]):
        raise r.err("dims %s, output shape %s: TFLM's FILL takes them equal" % (dims, list(r.tensor(r.outs[0])[1])))
    _filled(r, v.reshape(-1)[0])
