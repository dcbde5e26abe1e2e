# The graph runner's front end: a model is a graph description (docs/FORMAT.md, "Graph
# description", metadata key `graph`) whose weights are the tensors of a container.
#
#   c = mpy_lazy.open("/rom/kws.mpyl")
#   m = mpy_lazy.model.from_container(c)   # the packed program, read in place (flash), checked;
#   y = m(x)                               # one arena; x: the input, y: a view of the output
#
# A packed model carries its program (mpy_lazy/program.py: every op compiled to a record of
# integers at pack time); from_container() runs it with no per-op object in RAM. Model (this
# module) is the same graph declared from its text: ops with lazy Params (bound by load(),
# owned when written), planned and compiled into a program in RAM by prepare(). The packer
# compiles with it; a board uses it for containers without a program, and for a model whose
# weights you change.
#
# Memory, as in TensorFlow Lite Micro: every activation lives in one preallocated arena at an
# offset planned once over the graph's liveness (values alive at the same time never overlap;
# a reshape shares its input's buffer, an elementwise op may work in place, an int8 conv or
# dense may write over its dying input a few rows behind its reads: Op.lag()); kernel scratch
# lies in the arena too. On int8 models a forward pass allocates nothing.
import array

from . import kernels, param
from .container import ContainerError
from .kinds import BRANCH
from .module import Module, load
from .program import MAGIC, VERSION, Program, f32_bits  # noqa: F401 (Program: model.Program)
from . import program as _program

_PARAMS = ("bias", "initial", "recurrent", "requant", "table", "time", "weight")  # the Param attributes an op may have
_DTYPE_CODE = {"f32": 1, "i8": 3, "u8": 4, "i16": 5, "i32": 7, "i64": 11, "bool": 12}  # docs/FORMAT.md's dtype codes


class Model(Module):
    """A model declared from a graph description: ops in execution order (`ops`), values
    (`values`), graph inputs and outputs. Nothing is bound or allocated until load() and
    prepare() (from_container() does both). init: the Params' init function (Param API),
    used only by params that are never bound."""

    prog = None  # the compiled Program, once prepared
    _changes = -1  # param.changes when it was compiled
    _planned = None  # arena bytes, once planned

    def __init__(self, text, init=None):
        from . import graph  # (here: a stored program runs without it)
        values = {}
        self.ops = []
        self.inputs = []
        self.outputs = []
        self.layouts = []
        self.out_layouts = []
        order = []
        states = {}  # id(a variable's value) -> [the variable's current value] (ops/variable.py)
        for n, op, kv in graph.parse(text):
            if op == "input":
                v = self._input(n, kv)
                self.inputs.append(v)
                self.layouts.append(kv.get("layout", "hwc"))
            elif op == "output":
                v = values.get(kv["x"])
                if v is None:
                    raise graph.fail(n, "output %r is no value defined above" % kv["x"], "x")
                if id(v) in states:
                    raise graph.fail(n, "output %r is a variable: output a read of it" % kv["x"], "x")
                if kv.get("layout", "hwc") == "chw" and len(v.shape) != 3:
                    raise graph.fail(n, "output: layout=chw needs an H,W,C value", "layout")
                self.outputs.append(v)
                self.out_layouts.append(kv.get("layout", "hwc"))
                continue
            else:
                names = kv.get("x", ())  # (a var or a const has no input)
                names = names if isinstance(names, (list, tuple)) else [names]
                ins = []
                for name in names:
                    if name not in values:
                        raise graph.fail(n, "%s: input %r is no value defined above" % (op, name), "x")
                    ins.append(values[name])
                if states or op == "assign":
                    _versions(n, op, ins, states)
                o = kernels.op(op)(graph.NAMES[op], kv, ins, n, init)  # one shared name string
                shape, dtype, q = o.out
                if op not in ("lut", "slice", "reshape") and (dtype == "u8" or "u8" in [v.dtype for v in ins]):
                    raise graph.fail(n, "%s: u8 values (a model's uint8 input or output) are read and written "
                                     "by lut, slice and reshape only" % op, "x")
                v = o.y = graph.Value(kv["y"], shape, dtype, q)
                o.x = tuple(ins)
                if op == "var" or op == "assign":
                    cell = [v] if op == "var" else states[id(ins[0])]
                    cell[0] = v
                    states[id(v)] = cell
                _forget(o, ("out", "kv"))  # what the op needs it keeps as attributes
                self.ops.append(_compact(o))
            if v.name in values:
                raise graph.fail(n, "value %r is defined twice" % v.name, "y")
            values[v.name] = v
            order.append(v)
        if not self.inputs or not self.outputs:
            raise ContainerError("graph: needs at least one input and one output line", None, "graph")
        self.values = order
        self._control(values)
        self._liveness()

    def _control(self, values):
        """The targets of branch, jump and next lines: ops of this description (or its end), a
        next's x a loop line's value (ops/control.py)."""
        from .graph import fail
        loops = [op.y for op in self.ops if op.name == "loop"]
        for i, op in enumerate(self.ops):
            to = getattr(op, "to", None)
            if to is None:
                continue
            if not 0 <= i + to <= len(self.ops) or op.name == "next" and i + to == len(self.ops):
                raise fail(op.n, "%s: goes to op %d of %d" % (op.name, i + to + 1, len(self.ops)),
                           "back" if op.name == "next" else "skip")
            if op.name == "next" and not any(op.x[0] is v for v in loops):
                raise fail(op.n, "next: x=%s is no loop line's value" % op.x[0].name, "x")

    def _input(self, n, kv):
        from . import graph  # (here: a stored program runs without it)
        shape = graph.check_shape(kv["shape"], n)
        dtype = kv.get("dtype", "f32")
        if (dtype not in ("f32", "bool")) != ("q" in kv):
            raise graph.fail(n, "input: an integer input needs q=scale,zero_point, an f32 or bool one has none", "q")
        if "q" in kv:
            graph.zero_point(kv["q"], dtype, n)
        if kv.get("layout") == "chw" and len(shape) != 3:
            raise graph.fail(n, "input: layout=chw needs an H,W,C shape", "layout")
        return graph.Value(kv["y"], shape, dtype, kv.get("q"))

    def _liveness(self):
        """[first, last] op index of each value, in self._life by id(value) until the arena is
        planned (a Value does not keep them: heap is scarce); reshape outputs share their
        input's buffer, an elementwise op whose input dies there works in place; lifetimes
        merged per buffer."""
        end = len(self.ops)
        life = {}
        for v in self.values:
            life[id(v)] = [end, -1]
        for v in self.inputs:
            life[id(v)][0] = 0
        for i, op in enumerate(self.ops):
            life[id(op.y)][0] = i
            for x in op.x:
                life[id(x)][1] = i
        for v in self.outputs:
            life[id(v)][1] = end
        for op in self.ops:
            if getattr(op, "keeps", False):  # state (a variable): alive over every op, overlapped by none
                life[id(op.y)] = [0, end]
        for t in life.values():
            if t[1] < t[0]:  # never read (a dead branch): alive for its own op only
                t[1] = t[0]
        # one pass in op order, linear: an alias points at its buffer's root, whose lifetime
        # takes in the alias's at once (a later op only tests the root's)
        for i, op in enumerate(self.ops):
            if not op.x:  # (a var, a const)
                continue
            x, y = op.x[0], op.y
            r = x.root()
            lr = life[id(r)]
            if (op.name in ("reshape", "assign") and op.alias) or (
                    op.inplace and lr[1] == i and r not in self.inputs and x.dtype == y.dtype
                    and x.size == y.size and not any(v.root() is r for v in op.x[1:])):  # (x * x: x is both)
                y.alias = r
                ly = life[id(y)]
                if ly[1] > lr[1]:
                    lr[1] = ly[1]
        self._life = life

    def named_params(self):
        """[(name, Param)] sorted by name: ops.<i>.weight, .bias, .requant, .table (what
        Module.named_params finds, without walking every attribute of every op)."""
        out = []
        for i, op in enumerate(self.ops):
            for attr in _PARAMS:
                p = getattr(op, attr, None)
                if p is not None:
                    out.append(("ops.%d.%s" % (i, attr), p))
        out.sort()
        return out

    def names(self):
        """{param name: tensor name} for load(). After the first load the ops no longer keep
        the names: a bound param's view has it."""
        out = {}
        for i, op in enumerate(self.ops):
            if "tensors" in op.__dict__:
                for attr, tensor in op.tensors:
                    out["ops.%d.%s" % (i, attr)] = tensor
            else:
                for attr in _PARAMS:
                    p = getattr(op, attr, None)
                    if p is not None and p.view is not None:
                        out["ops.%d.%s" % (i, attr)] = p.view.name
        return out

    def load(self, container, strict=True):
        """Bind the weights from a container (mpy_lazy.load with names()); no init runs."""
        version = getattr(container, "version", None)  # a SafeTensors file has none
        if version is not None and tuple(version) < (1, 1):
            for op in self.ops:
                if op.name in ("conv2d", "depthwise", "linear") and op.y.dtype == "i8":
                    # 1.0 int8 biases lack -z_x * sum(w) (docs/FORMAT.md): wrong numbers, not an error
                    raise ContainerError("container %d.%d: its int8 %s biases are from mpy-lazy before "
                                         "1.1; repack the model" % (tuple(version) + (op.name,)),
                                         None, "version_minor")
        r = load(self, container, strict, rename=self.names())
        if not r["missing"] and not r["mismatched"]:
            for op in self.ops:
                if "tensors" in op.__dict__:
                    _forget(op, ("tensors",))  # every param is bound: its view knows the name
        return r

    def macs(self):
        """Multiply-accumulates of one forward pass."""
        return sum(getattr(op, "macs", 0) for op in self.ops)

    # --- memory -------------------------------------------------------------------------

    def plan(self):
        """Arena byte offsets of every value (graph.plan) and of each op's kernel scratch,
        which lies in the arena alive during its op only (TFLM's scratch buffers): it takes
        room only where no activation is. Returns the arena's size in bytes, bounded before
        anything is allocated."""
        from . import graph  # (here: a stored program runs without it)
        if self._planned is not None:
            return self._planned
        life = dict(self._life)
        scratch, kept = [], []
        for i, op in enumerate(self.ops):
            if op.scratch:
                v = graph.Value("", (4 * op.scratch,), "i8")
                life[id(v)] = (i, i)
                scratch.append((i, v))
            if op.persist:  # alive across calls: overlaps nothing, ever
                v = graph.Value("", (op.persist,), "i8")
                life[id(v)] = (0, len(self.ops))
                kept.append((i, v))
        n = graph.plan(self.values + [v for i, v in scratch + kept], life, 4, self._pairs())
        self._scratch = array.array("i", [-1] * len(self.ops))
        self._state = array.array("i", [-1] * len(self.ops))
        for i, v in scratch:
            self._scratch[i] = v.offset
        for i, v in kept:
            self._state[i] = v.offset
        _program._room(n)
        self._planned = n
        return n

    def _pairs(self):
        """{id(value): (its partner, lag, True if the value is the output)} for each int8 op
        whose output may lie over its dying input, `lag` bytes before it (Op.lag())."""
        pairs = {}
        for i, op in enumerate(self.ops):
            if not op.x:  # (a var, a const)
                continue
            x, y = op.x[0].root(), op.y
            if self._life[id(x)][1] == i and y.alias is None and x not in self.inputs and \
                    x.dtype == y.dtype == "i8":
                lag = op.lag()
                if lag is not None:
                    pairs[id(y)] = (x, lag, True)
                    pairs[id(x)] = (y, lag, False)
        return pairs

    def compile(self, ref=None):
        """The program (array('i'), docs/FORMAT.md "Program") and its tensor slots. ref(param)
        -> [slot, byte offset] of a Param's data (the packer's: its place in the container
        being written); by default every bound Param reads its container in place (one slot
        per container) and an owned one its RAM array (a slot of its own)."""
        from . import graph  # (a description's model has it imported already)

        n = self.plan()
        c = _Compiler(self, ref)
        P = [MAGIC, VERSION, 0, n, len(self.inputs), len(self.outputs), 0]
        for v, layout in zip(self.inputs + self.outputs, self.layouts + self.out_layouts):
            dims = list(v.shape) + [0] * (3 - len(v.shape))
            P += [_DTYPE_CODE[v.dtype], v.root().offset, v.size, v.q[1] if v.q else 0,
                  f32_bits(v.q[0]) if v.q else 0, 1 if layout == "chw" else 0, len(v.shape)] + dims
        P[6] = len(P)
        count = 0
        starts, jumps = [], []
        for i, op in enumerate(self.ops):
            c.line = op.n
            c.scratch = self._scratch[i]
            c.state = self._state[i]
            starts.append(len(P))
            for r in graph.words4(op.records(c)):
                if getattr(op, "to", None) is not None:  # (a control record: its TO set below)
                    jumps.append((len(P), i + op.to))
                P += r
                count += 1
        starts.append(len(P))
        for k, target in jumps:
            P[k + 2 + (P[k] & 255 == BRANCH)] = starts[target] - k
        P[2] = count
        return array.array("i", P), tuple(c.slots)

    def prepare(self, arena=None):
        """Plan the arena, compile the program and check it (once per change of a param: a
        forward pass calls it when a param was bound, written or re-initialized). arena: a
        bytearray of the planned size to use instead of a new one."""
        n = self.plan()
        P, B = self.compile()
        self._life = None if self.prog is not None else self._life
        if arena is None and self.prog is not None:
            arena = self.prog.A  # the arena stays: its views too
        self.prog = Program(P, B, arena if arena is not None and len(arena) >= n else None,
                            io=(self.inputs, self.layouts, self.outputs, self.out_layouts))
        self._changes = param.changes[0]

    def memory(self):
        """{'arena': bytes of the activations and the kernels' scratch (one buffer),
        'scratch': 0 (the scratch is planned into the arena)}."""
        return {"arena": self.plan(), "scratch": 0}

    def clone(self, arrays=False):
        """A copy with every Param cloned (Param.clone semantics) and its own arena."""
        from . import graph  # (here: a stored program runs without it)
        c = Module.clone(self, arrays)
        c.values = [graph.Value(v.name, v.shape, v.dtype, v.q) for v in self.values]
        index = {}
        for a, b in zip(self.values, c.values):
            index[id(a)] = b
        c.inputs = [index[id(v)] for v in self.inputs]
        c.outputs = [index[id(v)] for v in self.outputs]
        for op in c.ops:
            op.x = tuple(index[id(v)] for v in op.x)
            op.y = index[id(op.y)]
        c._liveness()  # the same aliases and lifetimes, for the clone's own values
        c.prog = None
        c._planned = None
        if self.prog is not None:
            c.prepare()
        return c

    # --- running: the compiled program ------------------------------------------------------

    def _ready(self):
        if self.prog is None or self._changes != param.changes[0]:
            self.prepare()  # a param was bound, written or re-initialized
        return self.prog

    def __call__(self, x=None, *more):
        """One forward pass (Program.__call__)."""
        return self._ready()(x, *more)

    @property
    def input(self):
        return self._ready().input

    @property
    def output(self):
        return self._ready().output

    def quantize(self, values, i=0):
        return self._ready().quantize(values, i)

    def tolist(self, i=0):
        return self._ready().tolist(i)

    def dequantize(self, i=0):
        return self._ready().dequantize(i)

    def predict(self, x=None, *more):
        return self._ready().predict(x, *more)

    def reset(self):
        """Program.reset(): the stateful ops (LSTM, SVDF) start again."""
        self._ready().reset()


class _Compiler:
    """What an op's records() reads: value offsets, tensor slots, its scratch, its line."""

    line = 0
    scratch = -1
    state = -1  # the op's persistent state (Op.persist)

    def __init__(self, model, ref):
        self.slots = []
        self._index = {}
        self._ref = ref

    def off(self, v):
        return v.root().offset

    def ref(self, p, f16=False):
        """[slot, offset] of Param p's data ([0, 0] for none). A float param bound to an f16
        tensor is read in place where the kernel decodes f16 (f16=True: weights), else as its
        f32 values decoded once into RAM (the View keeps them; the report counts them)."""
        if p is None:
            return [0, 0]
        if self._ref is not None:
            return list(self._ref(p))
        v = p.view if p.state == "bound" else p.val()  # bound: the View, as stored
        if p.state == "bound" and v.dtype == "f16" and not f16:
            buf, off = _ram(v._array(), "f32"), 0
        elif p.state == "bound" and v.aligned:
            buf, off = v._c._mv, v.info.offset  # in place in its container
        else:
            buf, off = _ram(v.mv if p.state == "bound" else v, p.dtype), 0
        key = id(buf)
        if key not in self._index:
            self._index[key] = len(self.slots)
            self.slots.append(buf)
        return [self._index[key], off]

    def record(self, kind, fields):
        return [kind | (self.line << 8), len(fields) + 2] + list(fields)


def _versions(n, op, ins, states):
    """A variable's value is read and assigned only, in order: `read` and `assign` take its
    current value (the var's, then each assign's) as their first input, no other op takes one."""
    from . import graph  # (here: a stored program runs without it)
    for i, x in enumerate(ins):
        cell = states.get(id(x))
        if cell is not None and (i or op not in ("read", "assign")):
            raise graph.fail(n, "%s: %r is a variable: read it first" % (op, x.name), "x")
        if cell is not None and cell[0] is not x:
            raise graph.fail(n, "%s: %r is a variable's value before its assign (use %r)" % (op, x.name, cell[0].name), "x")
    if op == "assign" and id(ins[0]) not in states:
        raise graph.fail(n, "assign: %r is no variable (a var line's value, or an assign's)" % ins[0].name, "x")


def _ram(a, dtype):
    """A param's RAM array as the kernels read it: its bytes in the stored dtype (f32 for
    floats: a double-float ulab array or numpy's f16 is converted)."""
    if dtype in ("f32", "f16") and getattr(a, "itemsize", 4) != 4:
        return array.array("f", [float(a[i]) for i in range(len(a))])
    return a


def _forget(obj, names):
    """Delete attributes, releasing what they held: MicroPython keeps a deleted attribute's
    value in the instance's table until the slot is reused (the GC still sees it), so each is
    set to None first (measured: 600 B per op on a 32-bit board, the parsed keys kept)."""
    for name in names:
        setattr(obj, name, None)
        delattr(obj, name)


def _compact(obj):
    """A copy of obj in a table of just its attributes: an op's table grew for the keys it
    held while declaring (MicroPython never shrinks one; about 56 bytes per op on a 32-bit
    board)."""
    c = object.__new__(type(obj))
    for k, v in obj.__dict__.items():
        setattr(c, k, v)
    return c


# --- containers -----------------------------------------------------------------------------

def declare(c):
    """The model declared by the container's `graph` metadata (or a `layers` chain, read as a
    graph), nothing bound. Only that one metadata value is read."""
    text = c._meta_get("graph")
    if text is None:
        layers = c._meta_get("layers")
        if layers is None:
            raise ContainerError("container has no 'graph' metadata: it holds weights only "
                                 "(declare the model in code and mpy_lazy.load() it)", None, "graph")
        from .chain import to_graph

        text = to_graph(layers)
    return Model(text)


def from_container(c, strict=True):
    """The model of container c, ready to run: its stored program (checked, read in place,
    one arena), or, for a container without one (packed before mpy-lazy 0.3, or whose bytes
    sit at an address a program cannot be read from in place), the model declared from its
    graph description, bound and compiled in RAM."""
    prog = None
    if _program.NAME in c and tuple(c.version) >= (1, 2) and _aligned(c):
        prog = _program.load(c)
    if prog is not None:
        return prog
    m = declare(c)
    m.load(c, strict)
    try:
        m.prepare()
        return m
    except MemoryError:
        # Declaring leaves the ops' objects spread over the heap (garbage from parsing each line
        # between them, measured on the Pico: 31 ops over 80 KB), so the arena's one block may
        # find no hole big enough while the heap has room. Allocate it first, then declare again.
        n = m.plan()
        m = None
        import gc

        gc.collect()
        arena = bytearray(n or 4)
        m = declare(c)
        m.load(c, strict)
        m.prepare(arena)
        return m


def _aligned(c):
    """Whether the container's first byte is word-aligned (a program's words and the
    weights are read in place), or its address cannot be known (CPython: nothing cares)."""
    from .container import _address

    a = _address(c._mv)
    return a is None or a % 4 == 0
