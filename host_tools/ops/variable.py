"""The host's half of variable: TFLite's resource variables (docs/OPS.md), for the runtime's room
mpy_lazy/ops/variable.py. A streaming model keeps state in them: VAR_HANDLE names a variable,
READ_VARIABLE copies it out, ASSIGN_VARIABLE copies a value in, and CALL_ONCE runs an init
subgraph on the first invoke (its ASSIGN_VARIABLEs of constants give each variable its initial
value). declare() reads every variable of the model before its ops are converted: a `var` line
each (its dtype, shape and q from the values read and assigned, its initial value the one the
init subgraph assigns), then each READ_VARIABLE becomes `read`, each ASSIGN_VARIABLE `assign`
(whose output names the variable's new value) and VAR_HANDLE and CALL_ONCE nothing."""
import numpy as np

from ..container import PackError
from ..ir import Node
from . import INT

OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
TYPES = {"VAR_HANDLE": "int8 float32", "READ_VARIABLE": "int8 float32", "ASSIGN_VARIABLE": "int8 float32",
         "CALL_ONCE": "int8 float32"}


def _key(r, sg, op):
    """A VAR_HANDLE's variable: (container, shared name), as TFLM's MicroResourceVariables finds it."""
    o = r.tfl.VarHandleOptions()
    t = op.BuiltinOptions()
    if t is None:
        raise r.err("VAR_HANDLE without its options (the variable's shared name)")
    o.Init(t.Bytes, t.Pos)
    return (o.Container() or b"").decode("utf-8", "replace"), (o.SharedName() or b"").decode("utf-8", "replace")


def _ops(r, sg):
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        code = r.model.OperatorCodes(op.OpcodeIndex())
        yield k, r.names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "CUSTOM"), op


def _init(r, index, what):
    """{variable: numpy array} the init subgraph `index` of CALL_ONCE assigns: VAR_HANDLEs and
    ASSIGN_VARIABLEs of constants only (what the converter writes for tf.Variable's initial value)."""
    if not 0 < index < r.model.SubgraphsLength():
        raise r.err("%s: init subgraph %d: the model has subgraphs 0..%d" % (what, index, r.model.SubgraphsLength() - 1))
    sg = r.model.Subgraphs(index)
    handles, values = {}, {}
    for k, name, op in _ops(r, sg):
        where = "%s: init subgraph %d, operator %d (%s)" % (what, index, k, name)
        if name == "VAR_HANDLE" and op.OutputsLength() == 1:
            handles[op.Outputs(0)] = _key(r, sg, op)
            continue
        if name != "ASSIGN_VARIABLE" or op.InputsLength() != 2 or op.Inputs(0) not in handles:
            raise r.err("%s: an init subgraph computing with %s is not supported (VAR_HANDLE and "
                        "ASSIGN_VARIABLE of constants are)" % (where, name))
        t = sg.Tensors(op.Inputs(1))
        b = r.model.Buffers(t.Buffer())
        if b is None or not b.DataLength():
            raise r.err("%s: assigns a computed value; the initial value must be a constant" % where)
        typ = r.types.get(t.Type(), str(t.Type()))
        dt = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "FLOAT32": np.float32}.get(typ)
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        if dt is None or b.DataLength() != int(np.prod(shape)) * np.dtype(dt).itemsize:
            raise r.err("%s: an initial value of type %s, %d bytes for shape %s" % (where, typ, b.DataLength(), shape))
        q = t.Quantization()
        scales = list(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else []
        zps = [int(z) for z in q.ZeroPointAsNumpy()] if q is not None and q.ZeroPointLength() else []
        qv = (float(np.float32(scales[0])), zps[0] if zps else 0) if typ in INT and scales else None
        values[handles[op.Inputs(0)]] = (np.frombuffer(b.DataAsNumpy().tobytes(), dt).reshape(-1), typ, qv)
    return values


def declare(r, ops):
    """The model's variables as `var` lines, before its ops: each one's dtype, shape and q from its
    reads and assigns (equal everywhere: TFLM copies bytes), its initial value from CALL_ONCE."""
    r.handles, r.variables, r.spec = {}, {}, {}
    first = {}  # variable -> the tensor of its first read or assign (its dtype, shape, q)
    init = {}
    for k, name, op in ops:
        what = "%s: operator %d (%s)" % (r.path, k, name)
        if name == "CALL_ONCE":
            if any(n in ("READ_VARIABLE", "ASSIGN_VARIABLE") for _, n, _ in ops[:k]):
                raise PackError("%s: CALL_ONCE after a variable is used: TFLM would read its zero point first; "
                                "mpy-lazy takes the init subgraph first" % what)
            o = r.tfl.CallOnceOptions()
            o.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
            r.what = what
            init.update(_init(r, o.InitSubgraphIndex(), what))
        elif name == "VAR_HANDLE":
            r.what = what
            r.handles[op.Outputs(0)] = _key(r, r.sg, op)
        elif name in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            h = op.Inputs(0)
            if h not in r.handles:
                raise PackError("%s: input 0 (tensor %d) is no VAR_HANDLE's output" % (what, h))
            first.setdefault(r.handles[h], (op.Outputs(0) if name == "READ_VARIABLE" else op.Inputs(1), what))
    for var in init:
        if var not in first:
            raise PackError("%s: CALL_ONCE: the init subgraph assigns variable %r, which the model never "
                            "reads nor assigns" % (r.path, var[1]))
    for j, (var, (i, what)) in enumerate(first.items()):
        r.what = what
        _, shape, typ, _, _, _ = r.tensor(i)
        if typ not in ("INT8", "INT16", "INT32", "FLOAT32"):
            raise r.err("a variable of type %s (int8, int16, int32 and float32 are supported)" % typ)
        name = "var%d" % j
        r.ir.shapes[name] = tuple(_shape(r, shape))
        q = r.qof(i)
        dt = INT.get(typ, "f32")
        if q is not None:
            r.ir.q[name] = q
            if dt != "i8":
                r.ir.dtypes[name] = dt
        n = Node("var", [], name, "%s: variable %r" % (r.path, var[1]), shape=r.ir.shapes[name],
                 dtype=dt if dt != "f32" else None)
        if var in init:
            v, ityp, iq = init[var]
            if ityp != typ or v.size != int(np.prod(shape)) or (iq != q and dt != "i32"):
                raise r.err("variable %r: its initial value is %s%s q=%s, its reads and assigns %s%s q=%s"
                            % (var[1], ityp, [v.size], iq, typ, list(shape), q))
            n.t["t"] = r.ir.add_tensor("%s.init" % name, v.reshape(r.ir.shapes[name]))
        r.ir.nodes.append(n)
        r.variables[var] = name
        r.spec[var] = (typ, list(shape), q)


def _shape(r, shape):
    from ..tflite_import import _hwc

    return _hwc(shape, r)


def _check(r, i, var):
    """Tensor i (read into or assigned from variable var) has the variable's dtype, shape and q."""
    typ, shape, q = r.spec[var]
    _, s, t, _, _, _ = r.tensor(i)
    if t != typ or list(s) != shape or r.qof(i) != q:
        raise r.err("tensor %d is %s%s q=%s, variable %r is %s%s q=%s (TFLM copies its bytes)"
                    % (i, t, list(s), r.qof(i), var[1], typ, shape, q))


def _main(r):
    if r.prefix:  # (declare() reads the main subgraph's variables)
        raise r.err("a resource variable inside an IF or WHILE subgraph is not supported")


def op_VAR_HANDLE(r):
    """Nothing on the board: declare() made its variable's `var` line."""
    _main(r)


def op_CALL_ONCE(r):
    """Nothing on the board: declare() computed what its init subgraph assigns."""
    _main(r)


def op_READ_VARIABLE(r):
    _main(r)
    var = r.handles[r.ins[0]]
    r.emit("read", [r.variables[var]])
    _check(r, r.outs[0], var)


def op_ASSIGN_VARIABLE(r):
    _main(r)
    var = r.handles[r.ins[0]]
    cur = r.variables[var]
    _check(r, r.ins[1], var)
    new = "%s.%d" % (cur.split(".")[0], r.opidx + 1)
    r.ir.shapes[new] = r.ir.shapes[cur]
    for table in (r.ir.q, r.ir.dtypes):
        if cur in table:
            table[new] = table[cur]
    r.ir.nodes.append(Node("assign", [cur, r.value(r.ins[1])], new, r.what))
    r.variables[var] = new
