"""The host's half of control flow: TFLite's IF and WHILE, whose branches and loop body are
subgraphs of the model (TFLM's if.cc and while.cc invoke them). Computed at pack time where the
condition is: an IF whose condition is a constant becomes the ops of its branch, inline; a WHILE
whose condition depends only on constants (a counted loop: its counter starts at a constant and
steps by one) is unrolled, its body's ops inline once per iteration, the counter's arithmetic and
comparisons computed here (tflite_import.FOLDABLE). Each inlined subgraph's values are named apart
(a prefix per copy) and planned into the one arena like any other.

A condition computed on the board runs there (the runtime's room mpy_lazy/ops/control.py): an IF
becomes `branch` (past the then branch when false), the then branch's ops, `jump` (past the else
branch), the else branch's ops; a WHILE becomes `loop`, the condition's ops, `branch` (out when
false), the body's ops and `next` (back to the condition), its first iterations unrolled here as
long as their conditions are known. The values handed from one subgraph to the next (an IF's
outputs, a WHILE's loop variables) are variables (`var`, `assign`, `read`: one arena buffer that
each branch and each iteration writes). A WHILE runs at most MAX_ITERATIONS times on the board:
one more raises RuntimeError naming its line (TFLM has no bound; a board must not hang)."""
import numpy as np

from ..ir import Node

MAX_ITERATIONS = 1 << 16  # of a WHILE run on the board (its `next` record's MAX)
MAX_UNROLL = 256  # iterations of one WHILE unrolled at pack time (each one is its body's ops again)
MAX_DEPTH = 16  # subgraphs inlined within one another (a branch calling its own subgraph never ends)
TYPES = {"IF": "int8 float32", "WHILE": "int8 int32 float32"}


def _args(r, tensors):
    """The caller's tensors as a subgraph's arguments: a constant's value, else its value name."""
    out = []
    for i in tensors:
        d = r.data(i)
        out.append(d if d is not None else r.value(i))
    return out


def _inline(r, index, args, role, caller=()):
    """Convert subgraph `index` here, its inputs bound to args; its outputs (values or constants).
    caller: the op's tensors passed as those inputs (TFLM copies their bytes into the subgraph's
    tensors, which read them with their own type and quantization: these must be the same)."""
    if not 0 < index < r.model.SubgraphsLength():
        raise r.err("%s subgraph %d: the model has subgraphs 0..%d" % (role, index, r.model.SubgraphsLength() - 1))
    mine = [r.tensor(i)[2:5] for i in caller]
    saved = (r.sg, r.prefix, r.what, r.op, r.ins, r.outs, r.opname, r.opidx)
    r.sg = r.model.Subgraphs(index)
    for j, (typ, scales, zps) in enumerate(mine[:r.sg.InputsLength()]):
        a = (typ, [float(x) for x in scales], zps)
        t = r.tensor(r.sg.Inputs(j))
        b = (t[2], [float(x) for x in t[3]], t[4])
        if a != b:
            r.sg = saved[0]
            raise r.err("tensor %d (%s, scales %s, zero points %s) into the %s subgraph's input %d (%s, %s, %s): "
                        "TFLM copies the bytes, read with the subgraph's quantization; they must agree"
                        % ((caller[j],) + a + (role, j) + b))
    r.depth = getattr(r, "depth", 0) + 1
    if r.depth > MAX_DEPTH:
        raise r.err("subgraphs within subgraphs more than %d deep (a branch that calls its own subgraph?)" % MAX_DEPTH)
    r.inlined = getattr(r, "inlined", 0) + 1
    if r.inlined > 64 * MAX_UNROLL:
        raise r.err("more than %d subgraph copies: too large to inline" % (64 * MAX_UNROLL))
    where = "%s (subgraph %d, %s) " % (r.what.split(": ", 1)[1], index, role)
    sg = r.model.Subgraphs(index)
    if sg.InputsLength() != len(args):
        raise r.err("%s subgraph %d takes %d inputs, given %d" % (role, index, sg.InputsLength(), len(args)))
    r.sg, r.prefix = sg, "s%d_%d_" % (index, r.inlined)
    ops = r.operators(where)  # (checked as a model: its inputs bound after)
    for j, a in enumerate(args):
        i = sg.Inputs(j)
        if isinstance(a, str):
            r.alias[r.prefix + "t%d" % i] = a
        else:
            r.folded[(r.prefix, i)] = a
    r.convert(ops, where)
    outs = [sg.Outputs(j) for j in range(sg.OutputsLength())]
    r.what = "%s: %soutputs" % (r.path, where)
    res = _args(r, outs)
    r.sg, r.prefix, r.what, r.op, r.ins, r.outs, r.opname, r.opidx = saved
    r.depth -= 1
    return res


def _bind(r, outs, results):
    """The op's outputs are the subgraph's: a constant's value, or the same value."""
    if len(outs) != len(results):
        raise r.err("%d outputs, its subgraph gives %d" % (len(outs), len(results)))
    for i, v in zip(outs, results):
        if isinstance(v, str):
            r.alias[r.prefix + "t%d" % i] = v
        else:
            r.folded[(r.prefix, i)] = v


def _flag(r, v, what):
    """A condition: its one bool, or None when the board computes it."""
    if isinstance(v, str):
        if r.ir.dtypes.get(v) != "bool":
            raise r.err("%s is not a bool value" % what)
        return None
    if v.size != 1:
        raise r.err("%s has %d elements (one bool expected)" % (what, v.size))
    return bool(v.reshape(-1)[0])


def op_IF(r):
    """TFLM's IF: the then branch's outputs if the condition holds, else the else branch's."""
    o = r.options("IfOptions")
    if o is None or not r.ins:
        raise r.err("IF needs its options (the branches' subgraphs) and a condition input")
    shape = list(r.tensor(r.ins[0])[1])
    if len(shape) and int(np.prod(shape)) != 1:  # (TFLM's Prepare: NumElements(cond) == 1)
        raise r.err("its condition of shape %s: one bool expected" % shape)
    args = _args(r, r.ins)
    flag = _flag(r, args[0], "its condition")
    if flag is None:
        return _if_board(r, o, args)
    index = o.ThenSubgraphIndex() if flag else o.ElseSubgraphIndex()
    _bind(r, r.outs, _inline(r, index, args[1:], "then" if index == o.ThenSubgraphIndex() else "else", r.ins[1:]))


def op_WHILE(r):
    """TFLM's WHILE: while cond(vars): vars = body(vars), unrolled while the condition is known,
    then (a condition the board computes) run there."""
    o = r.options("WhileOptions")
    if o is None:
        raise r.err("WHILE needs its options (the condition's and the body's subgraphs)")
    args = _args(r, r.ins)
    for n in range(MAX_UNROLL + 1):
        mark = len(r.ir.nodes)
        go = _inline(r, o.CondSubgraphIndex(), args, "condition", r.ins)
        if len(go) != 1:
            raise r.err("its condition subgraph has %d outputs (one bool expected)" % len(go))
        flag = _flag(r, go[0], "its condition")
        if flag is None:  # from here on the board: the condition's ops again, inside the loop
            del r.ir.nodes[mark:]
            return _while_board(r, o, args)
        if not flag:
            break
        if n == MAX_UNROLL:
            raise r.err("runs more than %d iterations: too many to unroll" % MAX_UNROLL)
        args = _args_of(_inline(r, o.BodySubgraphIndex(), args, "body", r.ins), len(args), r)
    _bind(r, r.outs, args)


# --- on the board -------------------------------------------------------------------------

def _spec(r, i):
    """(shape, dtype, q) of tensor i of the IF or WHILE as a variable holds it."""
    from ..tflite_import import _hwc

    _, shape, typ, _, _, _ = r.tensor(i)
    dt = r.dtof(i)
    if typ not in ("INT8", "INT16", "INT32", "FLOAT32"):
        raise r.err("tensor %d of type %s: the values an IF or WHILE computed on the board hands on are "
                    "int8, int16, int32 or float32" % (i, typ))
    board = _hwc(shape, r)
    if board is None:
        raise r.err("tensor %d of shape %s: more dimensions than the board's values hold" % (i, list(shape)))
    return board, dt, r.qof(i) if dt != "f32" else None


def _declare(r, name, spec):
    shape, dt, q = spec
    r.ir.shapes[name] = tuple(shape)
    if q is not None:
        r.ir.q[name] = q
    if dt not in ("f32", "i8"):
        r.ir.dtypes[name] = dt
    return name


def _mark(r, op, name, xs=(), **attrs):
    """A control line: its placeholder value (one bool no record writes)."""
    r.ir.shapes[name] = (1,)
    r.ir.dtypes[name] = "bool"
    n = Node(op, list(xs), name, r.what, **attrs)
    r.ir.nodes.append(n)
    return n


def _value(r, v, spec, name):
    """Value name of a subgraph's result: itself, or a `const` line of a constant's."""
    if isinstance(v, str):
        return v
    from .const import _line

    shape, dt, q = spec
    _line(r, name, shape, dt, q, values=np.asarray(v).reshape(shape))
    return name


def _vars(r, base, specs, values):
    """One variable per spec, assigned its first value: the current names."""
    cur = []
    for j, (spec, v) in enumerate(zip(specs, values)):
        name = _declare(r, "%s.v%d" % (base, j), spec)
        shape, dt, _ = spec
        r.ir.nodes.append(Node("var", [], name, r.what, shape=tuple(shape), dtype=dt if dt != "f32" else None))
        cur.append(_assign(r, name, _value(r, v, spec, "%s.c%d" % (base, j)) if v is not None else None))
    return cur


def _assign(r, cur, v):
    """The variable's bytes = value v's (None: nothing); the name of its new value."""
    if v is None:
        return cur
    if tuple(r.ir.shapes[v]) != tuple(r.ir.shapes[cur]) or r.ir.q.get(v) != r.ir.q.get(cur) \
            or r.ir.dtypes.get(v) != r.ir.dtypes.get(cur):
        raise r.err("a subgraph's result of shape %s, %s q=%s for a value of shape %s, %s q=%s (TFLM copies "
                    "its bytes)" % (r.ir.shapes[v], r.ir.dtypes.get(v, "int8/f32"), r.ir.q.get(v),
                                    r.ir.shapes[cur], r.ir.dtypes.get(cur, "int8/f32"), r.ir.q.get(cur)))
    new = "%s.a%d" % (cur, len(r.ir.nodes))
    r.ir.shapes[new] = r.ir.shapes[cur]
    for table in (r.ir.q, r.ir.dtypes):
        if cur in table:
            table[new] = table[cur]
    r.ir.nodes.append(Node("assign", [cur, v], new, r.what))
    return new


def _results(r, base, specs, cur, results, tag):
    if len(results) != len(cur):
        raise r.err("%d values, its %s subgraph gives %d" % (len(cur), tag, len(results)))
    return [_assign(r, c, _value(r, v, s, "%s.%s%d" % (base, tag[0], j)))
            for j, (c, v, s) in enumerate(zip(cur, results, specs))]


def _outputs(r, cur):
    """The op's outputs: reads of the variables."""
    if len(r.outs) != len(cur):
        raise r.err("%d outputs for %d values" % (len(r.outs), len(cur)))
    for i, c in zip(r.outs, cur):
        y = r.define(i)
        r.ir.nodes.append(Node("read", [c], y, r.what))


def _if_board(r, o, args):
    """branch (to the else branch when false), then's ops, jump (past else), else's ops."""
    base = "%sif%d_%d" % (r.prefix, r.opidx, len(r.ir.nodes))
    specs = [_spec(r, i) for i in r.outs]
    cur = _vars(r, base + ".if", specs, [None] * len(specs))
    b = _mark(r, "branch", base + ".b", [args[0]])
    cur = _results(r, base, specs, cur, _inline(r, o.ThenSubgraphIndex(), args[1:], "then", r.ins[1:]), "then")
    j = _mark(r, "jump", base + ".j")
    b.attrs["skip"] = r.ir.nodes.index(j) - r.ir.nodes.index(b)
    cur = _results(r, base, specs, cur, _inline(r, o.ElseSubgraphIndex(), args[1:], "else", r.ins[1:]), "else")
    j.attrs["skip"] = len(r.ir.nodes) - 1 - r.ir.nodes.index(j)
    _outputs(r, cur)


def _while_board(r, o, args):
    """The loop variables' first values; loop; reads; the condition's ops; branch (out when
    false); the body's ops on the reads; assigns; next (back to the reads)."""
    base = "%swhile%d_%d" % (r.prefix, r.opidx, len(r.ir.nodes))
    specs = [_spec(r, i) for i in r.ins]
    cur = _vars(r, base + ".w", specs, args)
    loop = _mark(r, "loop", base + ".l")
    top = len(r.ir.nodes)
    reads = []
    for j, c in enumerate(cur):
        y = _declare(r, "%s.r%d" % (base, j), specs[j])
        r.ir.nodes.append(Node("read", [c], y, r.what))
        reads.append(y)
    go = _inline(r, o.CondSubgraphIndex(), reads, "condition", r.ins)
    if len(go) != 1:
        raise r.err("its condition subgraph has %d outputs (one bool expected)" % len(go))
    if _flag(r, go[0], "its condition") is not None:  # (a constant here: the loop runs on, or not at all)
        go = [_value(r, np.asarray(go[0]).reshape(1).astype(np.bool_), ((1,), "bool", None), base + ".go")]
    b = _mark(r, "branch", base + ".b", go)
    cur = _results(r, base, specs, cur, _inline(r, o.BodySubgraphIndex(), reads, "body", r.ins), "body")
    nxt = _mark(r, "next", base + ".n", [loop.y], back=len(r.ir.nodes) - top, max=MAX_ITERATIONS)
    b.attrs["skip"] = r.ir.nodes.index(nxt) - r.ir.nodes.index(b)
    _outputs(r, cur)


def _args_of(results, n, r):
    if len(results) != n:
        raise r.err("its body gives %d values for %d loop variables" % (len(results), n))
    return results

