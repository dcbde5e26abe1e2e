"""The host's half of control flow: TFLite's IF and WHILE, whose branches and loop body are
subgraphs of the model (TFLM's if.cc and while.cc invoke them). Computed at pack time where the
condition is: an IF whose condition is a constant becomes the ops of its branch, inline; a WHILE
whose condition depends only on constants (a counted loop: its counter starts at a constant and
steps by one) is unrolled, its body's ops inline once per iteration, the counter's arithmetic and
comparisons computed here (tflite_import.FOLDABLE). Each inlined subgraph's values are named apart
(a prefix per copy) and planned into the one arena like any other. A condition computed on the
board (a branch or a loop the runtime would take or repeat) is refused: the runtime has no
branching records yet. The comparisons and logic ops (LESS, EQUAL, LOGICAL_AND, ...) of constants
are computed at pack time; on values computed on the board they run there (ops/compare.py)."""
import numpy as np


MAX_UNROLL = 256  # iterations of one WHILE unrolled at pack time (each one is its body's ops again)
MAX_DEPTH = 16  # subgraphs inlined within one another (a branch calling its own subgraph never ends)
TYPES = {"IF": "int8 float32", "WHILE": "int8 float32"}


def _args(r, tensors):
    """The caller's tensors as a subgraph's arguments: a constant's value, else its value name."""
    out = []
    for i in tensors:
        d = r.data(i)
        out.append(d if d is not None else r.value(i))
    return out


def _inline(r, index, args, role):
    """Convert subgraph `index` here, its inputs bound to args; its outputs (values or constants)."""
    if not 0 < index < r.model.SubgraphsLength():
        raise r.err("%s subgraph %d: the model has subgraphs 0..%d" % (role, index, r.model.SubgraphsLength() - 1))
    saved = (r.sg, r.prefix, r.what, r.op, r.ins, r.outs, r.opname, r.opidx)
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
    """A condition known at pack time: its one bool."""
    if isinstance(v, str):
        raise r.err("%s is computed on the board: IF and WHILE run when their condition is known at pack "
                    "time (a constant; a counted loop), the runtime has no branching records yet" % what)
    if v.size != 1:
        raise r.err("%s has %d elements (one bool expected)" % (what, v.size))
    return bool(v.reshape(-1)[0])


def op_IF(r):
    """TFLM's IF: the then branch's outputs if the condition holds, else the else branch's."""
    o = r.options("IfOptions")
    if o is None or not r.ins:
        raise r.err("IF needs its options (the branches' subgraphs) and a condition input")
    args = _args(r, r.ins)
    index = o.ThenSubgraphIndex() if _flag(r, args[0], "its condition") else o.ElseSubgraphIndex()
    _bind(r, r.outs, _inline(r, index, args[1:], "then" if index == o.ThenSubgraphIndex() else "else"))


def op_WHILE(r):
    """TFLM's WHILE: while cond(vars): vars = body(vars), unrolled (the condition known each time)."""
    o = r.options("WhileOptions")
    if o is None:
        raise r.err("WHILE needs its options (the condition's and the body's subgraphs)")
    args = _args(r, r.ins)
    for n in range(MAX_UNROLL + 1):
        go = _inline(r, o.CondSubgraphIndex(), args, "condition")
        if len(go) != 1:
            raise r.err("its condition subgraph has %d outputs (one bool expected)" % len(go))
        if not _flag(r, go[0], "its condition"):
            break
        if n == MAX_UNROLL:
            raise r.err("runs more than %d iterations: too many to unroll" % MAX_UNROLL)
        args = _args_of(_inline(r, o.BodySubgraphIndex(), args, "body"), len(args), r)
    _bind(r, r.outs, args)


def _args_of(results, n, r):
    if len(results) != n:
        raise r.err("its body gives %d values for %d loop variables" % (len(results), n))
    return results

