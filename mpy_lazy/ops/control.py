# control: TFLite's IF and WHILE whose condition is computed on the board (TFLM's if.cc and
# while.cc invoke a branch's or the body's subgraph). The host lays a subgraph's ops out in the
# program in line (host_tools/ops/control.py) and these records move the runner past them or
# back to them; the values an IF or a WHILE hands from one subgraph to the next (its outputs,
# its loop variables) are variables (ops/variable.py: one arena buffer written by each branch,
# each iteration).
#
#   branch x=c y=b skip=N        c's first byte 0 (false): go on N ops further (past the then
#                                branch); else with the next op
#   jump y=j skip=N              go on N ops further (from the end of the then branch past the else)
#   loop y=l                     a WHILE starts: its iteration count 0
#   next x=l y=n back=N max=M    the count + 1; more than M: RuntimeError (a loop that does not
#                                end: TFLM has no bound, a board must not hang); else go back N ops
#
# y of these lines is a placeholder value no record writes (every line names one). A loop's
# count lives in the Program (E.C, one int per loop, allocated at load): no record's arena
# bytes can reset it, so every loop ends.
from ..kinds import BRANCH, H_FIRST, H_RECORDS, JUMP, LENGTH, LOOP, NEXT
from . import Op as Base

MAX_ITERATIONS = 1 << 30


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        if name == "branch":
            if len(ins) != 1 or ins[0].dtype != "bool":
                raise self.fail("x= one bool value (the condition)", "x")
            self.to = 1 + self._count(kv, "skip", 0)
        elif name == "jump":
            if ins:
                raise self.fail("takes no input", "x")
            self.to = 1 + self._count(kv, "skip", 0)
        elif name == "loop":
            if ins:
                raise self.fail("takes no input", "x")
        else:  # next
            if len(ins) != 1 or ins[0].dtype != "bool":  # (a loop line's: Model checks it)
                raise self.fail("x= a loop line's value", "x")
            self.to = -self._count(kv, "back", 1)
            self.most = kv["max"]
            if not 1 <= self.most <= MAX_ITERATIONS:
                raise self.fail("max=%d outside 1..%d" % (self.most, MAX_ITERATIONS), "max")
        self.out = ((1,), "bool", None)

    def _count(self, kv, key, lo):
        v = kv[key]
        if not lo <= v <= 4096:
            raise self.fail("%s=%d outside %d..4096" % (key, v, lo), key)
        return v

    def records(self, c):
        # a jump's TO (words from this record to its target's) is set by the compiler once
        # every op's records are placed (Model.compile: `to`, ops from this one)
        if self.name == "branch":
            return [c.record(BRANCH, [c.off(self.x[0]), 0])]
        if self.name == "jump":
            return [c.record(JUMP, [0])]
        if self.name == "loop":
            c.loops = getattr(c, "loops", []) + [self.y]
            return [c.record(LOOP, [len(c.loops) - 1])]
        return [c.record(NEXT, [0, _index(c, self.x[0]), self.most])]


def _index(c, v):
    """The count of the loop whose line made value v (its records come first)."""
    for i, u in enumerate(c.loops):
        if u is v:
            return i


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {BRANCH: 'branch', JUMP: 'jump', LOOP: 'loop', NEXT: 'next'}
FAST = None  # no fast path: the kernels read one byte or one count


def starts(P, total):
    """The word index of every record, in order, as far as they have known kinds (a record
    after this one not checked yet: the program is refused when its turn comes)."""
    out = []
    k = P[H_FIRST]
    for _ in range(P[H_RECORDS]):
        if not 0 <= k < total or (P[k] & 255) >= len(LENGTH) or not LENGTH[P[k] & 255]:
            break
        out.append(k)
        k += LENGTH[P[k] & 255]
    return out


def _target(r, i, forward):
    """Field i, TO: the target a record's start (or the program's end) forward of this record
    (backward: at or before it, for next)."""
    at = starts(r.P, r.total)
    to = r[i]
    t = r.k + to
    if forward and to <= 0 or not forward and to > 0 or not (t in at or forward and t == _end(r.P, at)):
        r.fail("to", "%d words from word %d: not the start of a record %s it"
               % (to, r.k, "after" if forward else "before"))
    return t, at


def _end(P, at):
    return at[-1] + LENGTH[P[at[-1]] & 255] if at else P[H_FIRST]


def check(r, E):
    kind = r.kind
    if kind == BRANCH:
        r.region(2, "x", 1)
        _target(r, 3, True)
    elif kind == JUMP:
        _target(r, 2, True)
    elif kind == LOOP:
        at = starts(r.P, r.total)
        r.range(2, "loop", 0, sum(1 for k in at if r.P[k] & 255 == LOOP) - 1)  # (Program.C's index)
        for k in at:  # one loop record per count
            if k < r.k and r.P[k] & 255 == LOOP and r.P[k + 2] == r[2]:
                r.fail("loop", "count %d is another loop's (at word %d)" % (r[2], k))
    else:  # NEXT: back to the record after its own loop record; the loops nest
        t, at = _target(r, 2, False)
        r.range(4, "max", 1, MAX_ITERATIONS)
        i = at.index(t)
        if i == 0 or r.P[at[i - 1]] & 255 != LOOP or r.P[at[i - 1] + 2] != r[3]:
            r.fail("to", "goes back to word %d: not the record after the loop record of count %d" % (t, r[3]))
        for k in at:  # a count has one next; a next between goes back no further than here
            if k != r.k and r.P[k] & 255 == NEXT and (r.P[k + 3] == r[3] or t <= k < r.k and k + r.P[k + 2] < t):
                r.fail("to", "loops that do not nest (the next at word %d)" % k)


# branch record: 2 C (the condition's arena byte) 3 TO (words to the record run when it is 0).
# jump record: 2 TO. loop record: 2 I (its count, E.C[I]). next record: 2 TO (< 0: back to the
# record after the loop record) 3 I 4 MAX. A kernel returns the word index of the record to run
# next, or None for the one after it (Program.__call__).

def branch(E, P, k):
    """The condition's first byte 0 (false): on TO words further; else the next record."""
    if not E.A[P[k + 2]]:
        return k + P[k + 3]


def jump(E, P, k):
    return k + P[k + 2]


def loop(E, P, k):
    E.C[P[k + 2]] = 0


def next(E, P, k):  # noqa: A001 (the op's name)
    """One more iteration: back TO words, unless it would be the MAX + 1st."""
    i = P[k + 3]
    n = E.C[i] + 1
    if n > P[k + 4]:
        E.C[i] = 0
        raise RuntimeError("graph line %d: next: more than %d iterations (a WHILE that does not end?)"
                           % (P[k] >> 8, P[k + 4]))
    E.C[i] = n
    return k + P[k + 2]
