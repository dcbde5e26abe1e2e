# The graph runner: a model is a graph description (docs/FORMAT.md, "Graph description",
# metadata key `graph`) whose weights are lazy Params bound by name from a container.
#
#   c = mpy_lazy.open("/rom/kws.mpyl")
#   m = mpy_lazy.model.from_container(c)   # declare (parse, check, shapes, Params), load (bind
#                                          # in place), plan (one arena, offsets), prepare ops
#   y = m(x)                               # x: the input values; y: a view of the output
#
# Memory, as in TensorFlow Lite Micro: every activation lives in one preallocated arena at an
# offset planned once over the graph's liveness (values alive at the same time never overlap;
# a reshape shares its input's buffer, an elementwise op may work in place, an int8 conv or
# dense may write over its dying input a few rows behind its reads: Op.lag()); kernel scratch
# lies in the arena too. On int8 models a forward pass allocates nothing.
import array

from . import _pure, backend, graph, kernels, param
from .container import ContainerError
from .graph import Value, fail
from .ops.quant import to_int8
from .module import Module, load
from . import ops as _ops

MAX_ARENA = 1 << 26  # bytes; anything larger is a broken description, not a model for a board
_BUFFERS = (bytes, bytearray, memoryview, array.array)
_PARAMS = ("bias", "requant", "table", "weight")  # the Param attributes an op may have


class Model(Module):
    """A model declared from a graph description: ops in execution order (`ops`), values
    (`values`), graph inputs and outputs. Nothing is bound or allocated until load() and
    prepare() (from_container() does both). init: the Params' init function (Param API),
    used only by params that are never bound."""

    mem = None  # Memory, once planned
    _path = None  # kernel path the ops were prepared for
    _changes = -1  # param.changes when the ops were prepared

    def __init__(self, text, init=None):
        values = {}
        self.ops = []
        self.inputs = []
        self.outputs = []
        self.layouts = []
        order = []
        for n, op, kv in graph.parse(text):
            if op == "input":
                v = self._input(n, kv)
                self.inputs.append(v)
                self.layouts.append(kv.get("layout", "hwc"))
            elif op == "output":
                v = values.get(kv["x"])
                if v is None:
                    raise fail(n, "output %r is no value defined above" % kv["x"], "x")
                self.outputs.append(v)
                continue
            else:
                names = kv["x"] if isinstance(kv["x"], list) else [kv["x"]]
                ins = []
                for name in names:
                    if name not in values:
                        raise fail(n, "%s: input %r is no value defined above" % (op, name), "x")
                    ins.append(values[name])
                o = _ops.get(op)(graph.NAMES[op], kv, ins, n, init)  # one shared name string
                shape, dtype, q = o.out
                v = o.y = Value(kv["y"], shape, dtype, q)
                o.x = tuple(ins)
                _forget(o, ("out", "kv", "n"))  # what the op needs it keeps as attributes
                self.ops.append(_compact(o))
            if v.name in values:
                raise fail(n, "value %r is defined twice" % v.name, "y")
            values[v.name] = v
            order.append(v)
        if not self.inputs or not self.outputs:
            raise ContainerError("graph: needs at least one input and one output line", None, "graph")
        self.values = order
        self._liveness()

    def _input(self, n, kv):
        shape = graph.check_shape(kv["shape"], n)
        dtype = kv.get("dtype", "f32")
        if (dtype == "i8") != ("q" in kv):
            raise fail(n, "input: an i8 input needs q=scale,zero_point, an f32 one has none", "q")
        if kv.get("layout") == "chw" and len(shape) != 3:
            raise fail(n, "input: layout=chw needs an H,W,C shape", "layout")
        return Value(kv["y"], shape, dtype, kv.get("q"))

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
        for t in life.values():
            if t[1] < t[0]:  # never read (a dead branch): alive for its own op only
                t[1] = t[0]
        # one pass in op order, linear: an alias points at its buffer's root, whose lifetime
        # takes in the alias's at once (a later op only tests the root's)
        for i, op in enumerate(self.ops):
            x, y = op.x[0], op.y
            r = x.root()
            lr = life[id(r)]
            if (op.name == "reshape" and op.alias) or (
                    op.inplace and lr[1] == i and r not in self.inputs and x.dtype == y.dtype
                    and x.size == y.size):
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
        """Arena offsets (graph.plan) for both dtypes, the int32 kernel scratch in the int8
        arena; returns (int8 arena bytes, f32 arena elements, f32 scratch elements). Bounded
        before anything is allocated."""
        # kernel scratch lives in the int8 arena, alive during its op only (TFLM's scratch
        # buffers): it takes room only where no activation is. Its offsets are kept in one
        # array (_scratch[i] for op i, -1 for none), not as values (heap is scarce).
        life = dict(self._life)
        scratch = []
        for i, op in enumerate(self.ops):
            if op.scratch:
                v = Value("", (4 * op.scratch,), "i8")
                life[id(v)] = (i, i)
                scratch.append((i, v))
        n8 = graph.plan([v for v in self.values if v.dtype == "i8"] + [v for i, v in scratch], life, 4,
                        self._pairs())
        self._scratch = array.array("i", [-1] * len(self.ops))
        for i, v in scratch:
            self._scratch[i] = v.offset
        scratch = None
        nf = graph.plan([v for v in self.values if v.dtype == "f32"], life, 1)
        nfs = max([op.fscratch for op in self.ops] + [0])
        total = n8 + 4 * (nf + nfs)
        if total > MAX_ARENA:
            raise ContainerError("graph: needs %d bytes of activation memory (more than %d)"
                                 % (total, MAX_ARENA), None, "graph")
        try:
            import gc

            gc.collect()  # mem_free() does not count garbage: declaring and loading leave some
            free = gc.mem_free()
        except (ImportError, AttributeError):
            free = None
        if free is not None and total > free:
            raise ContainerError("graph: needs %d bytes of activation memory, the heap has %d free"
                                 % (total, free), None, "graph")
        return n8, nf, nfs

    def _pairs(self):
        """{id(value): (its partner, lag, True if the value is the output)} for each int8 op
        whose output may lie over its dying input, `lag` bytes before it (Op.lag())."""
        pairs = {}
        for i, op in enumerate(self.ops):
            x, y = op.x[0].root(), op.y
            if self._life[id(x)][1] == i and y.alias is None and x not in self.inputs and \
                    x.dtype == y.dtype == "i8":
                lag = op.lag()
                if lag is not None:
                    pairs[id(y)] = (x, lag, True)
                    pairs[id(x)] = (y, lag, False)
        return pairs

    def prepare(self, a8=None):
        """Plan and allocate the arena and scratch (once), then each op's prepare step. Called
        by from_container(), and by a forward pass after kernels.use() changed the path. a8: a
        bytearray of the planned int8 arena size to use instead of a new one."""
        if self.mem is None:
            mem = Memory(*self.plan(), a8=a8)
            self._io(mem)  # the views stay valid across re-prepares: the arena does not move
            self.mem = mem  # only now: a MemoryError above leaves the model as it was
            self._life = None  # planned: the lifetimes are not needed again
        self.mem.path()
        self._changes = param.changes[0]
        for op, o in zip(self.ops, self._scratch):
            op.prepare(self.mem, memoryview(self.mem.a8)[o: o + 4 * op.scratch] if o >= 0 else None)
        self._path = kernels.path()

    def memory(self):
        """{'arena': bytes of the activations (int8 and f32) and the int8 kernels' scratch,
        'scratch': bytes of the float kernels' scratch}."""
        n8, nf, nfs = self.plan() if self.mem is None else self.mem.planned
        return {"arena": n8 + 4 * nf, "scratch": 4 * nfs}

    def _io(self, mem):
        """Views of the inputs and outputs in the arena, made once (a call returns them)."""
        views = []
        for v in self.inputs + self.outputs:
            if v.dtype == "i8":
                mv = memoryview(mem.a8)[v.offset: v.offset + v.size]
                views.append(backend.typed_view(mv, "i8", v.size))
            else:
                mv = memoryview(mem.af)[4 * v.offset: 4 * (v.offset + v.size)]
                views.append(backend.typed_view(mv, "f32", v.size))
        k = len(self.inputs)
        # move() parameters copying int8 input i from a buffer (transposing C, H, W data)
        self._moves = []
        for v, layout in zip(self.inputs, self.layouts):
            c = v.shape[-1]
            hw = v.size // c
            if layout == "chw":
                self._moves.append(array.array("i", (0, v.offset, c, hw, hw, 1, 1, c)))
            else:
                self._moves.append(array.array("i", (0, v.offset, 1, v.size, 0, 1, 0, 1)))
        self.input = views[0]
        self._in = views[:k]
        self.output = views[k]
        self._out = views[k] if len(self.outputs) == 1 else tuple(views[k:])

    def clone(self, arrays=False):
        """A copy with every Param cloned (Param.clone semantics) and its own arena."""
        c = Module.clone(self, arrays)
        c.values = [Value(v.name, v.shape, v.dtype, v.q) for v in self.values]
        index = {}
        for a, b in zip(self.values, c.values):
            index[id(a)] = b
        c.inputs = [index[id(v)] for v in self.inputs]
        c.outputs = [index[id(v)] for v in self.outputs]
        for op in c.ops:
            op.x = tuple(index[id(v)] for v in op.x)
            op.y = index[id(op.y)]
            p = getattr(op, "p", None)
            if p is not None:  # kernels write into their parameters: each clone its own
                op.p = array.array("i", p)
        c._liveness()  # the same aliases and lifetimes, for the clone's own values
        c.mem = None
        if self.mem is not None:
            c.prepare()
        return c

    # --- running ------------------------------------------------------------------------

    def __call__(self, x=None, *more):
        """One forward pass. x (and one more argument per further input) is the input's
        values in its layout order: ints for an i8 input (a list, or bytes / bytearray /
        array('b') of int8 codes: copied by one kernel call), or floats (quantized with the
        input's q), or `m.input` filled in place (no copy; H, W, C order), or None to run on
        what the inputs hold. The forward pass reuses the input's memory (as TFLite Micro's
        arena does): give the input again for every call. Returns the output view (a tuple for several outputs), which
        the next call overwrites. (One argument: no tuple is made, nothing is allocated.)"""
        if self._path != kernels.path() or self._changes != param.changes[0]:
            self.prepare()  # another kernel path, or a param was bound, written or re-initialized
        if x is not None and x is not self._in[0]:
            self._set(0, x)
        for i in range(len(more)):
            if more[i] is not None and more[i] is not self._in[i + 1]:
                self._set(i + 1, more[i])
        for op in self.ops:
            op.run()
        return self._out

    def _set(self, i, x):
        v = self.inputs[i]
        dst = self._in[i]
        n = v.size
        if len(x) != n:
            raise ValueError("input %r has %d values, the model takes %d" % (v.name, len(x), n))
        chw = self.layouts[i] == "chw"
        c = v.shape[-1]
        hw = n // c
        if v.dtype == "i8" and isinstance(x, _BUFFERS) and _bytewise(x):
            # int8 codes as bytes (or array('b')): one kernel call, no Python loop
            if kernels.i8 is _pure:  # reads items: they must be signed
                x = backend.typed_view(memoryview(x), "i8", n)
            kernels.i8.put(x, self.mem.arena, self._moves[i])
            return
        q = v.q
        for j in range(n):
            k = (j % hw) * c + j // hw if chw else j
            val = x[j]
            if q is not None and not isinstance(val, int):
                val = to_int8(val, q[0], q[1])
            dst[k] = val

    def quantize(self, values, i=0):
        """An int8 input filled from floats: returns m.input (pass it to m())."""
        self._set(i, values)
        return self._in[i]

    def tolist(self, i=0):
        """Output i as a list of its stored values (ints for i8, floats for f32). The views a
        call returns index like arrays (y[j]) but on MicroPython have no len() or iteration
        (uctypes): this makes a list (it allocates)."""
        out = self._out if len(self.outputs) == 1 else self._out[i]
        return [out[j] for j in range(self.outputs[i].size)]

    def dequantize(self, i=0):
        """Output i as a list of floats (real values of an i8 output; it allocates)."""
        v = self.outputs[i]
        vals = self.tolist(i)
        if v.dtype != "i8":
            return vals
        s, z = v.q
        return [s * (q - z) for q in vals]

    def predict(self, x=None, *more):
        """Index of the largest element of the (first) output."""
        y = self(x, *more)
        if len(self.outputs) > 1:
            y = y[0]
        best = 0
        for j in range(1, self.outputs[0].size):
            if y[j] > y[best]:
                best = j
        return best


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


def _bytewise(x):
    """True for buffers of one byte per item (bytes, bytearray, array('b'/'B'), memoryview of
    bytes): an array('i') of codes is a sequence of ints, not raw bytes."""
    if isinstance(x, array.array):
        return backend._typecode(x) in "bB"
    if isinstance(x, memoryview):
        return getattr(x, "itemsize", 1) == 1
    return True


class Memory:
    """The buffers a model's ops run in, allocated once: `arena` (int8 values, a signed view
    of the bytearray `a8`, which also holds the int8 kernels' scratch), `farena` (f32 values,
    over `af`), `fscratch` (f32, shared by the float ops), and on the ndarray path `nd`, the
    f32 arena as a backend array. An int8-only model has no float buffers (None)."""

    nd = None
    af = farena = fscratch = None
    _nds = None

    def __init__(self, n8, nf, nfs, a8=None):
        self.planned = (n8, nf, nfs)
        if a8 is None or len(a8) != (n8 or 1):
            a8 = bytearray(n8 or 1)
        self.a8 = a8
        self.arena = backend.typed_view(memoryview(self.a8), "i8", n8 or 1)
        if nf:
            self.af = bytearray(4 * nf)
            self.farena = backend.typed_view(memoryview(self.af), "f32", nf)
        if nfs:
            self.fscratch = array.array("f", bytes(4 * nfs))

    def path(self):
        """Set `nd` for the current kernel path: the f32 arena as an ndarray (no copy) where
        the backend has float32 ndarrays (numpy, single-float ulab)."""
        self.nd = None
        if kernels.nd() and self.af is not None:
            np = backend.np
            if backend.kind() == "numpy":
                self.nd = np.frombuffer(self.af, dtype=np.float32)
            elif backend.SINGLE_FLOAT:
                self.nd = np.frombuffer(self.af, dtype=np.float)

    def nd_view(self, v):
        """The f32 value v as a flat backend ndarray over the arena (no copy)."""
        return self.nd[v.offset: v.offset + v.size]

    def nd_scratch(self, role, n):
        if self._nds is None:
            self._nds = {}
        a = self._nds.get(role)
        if a is None or a.size < n:
            a = self._nds[role] = backend.np.zeros(n, dtype=self.nd.dtype)
        return a[:n]


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
    """declare(c), bind its weights from c (load), plan the arena and prepare every op."""
    m = declare(c)
    m.load(c, strict)
    try:
        m.prepare()
        return m
    except MemoryError:
        # Declaring leaves the ops' objects spread over the heap (garbage from parsing each line
        # between them, measured on the Pico: 31 ops over 80 KB), so the arena's one block may
        # find no hole big enough while the heap has room. Allocate it first, then declare again.
        n8 = m.plan()[0]
        m = None
        import gc

        gc.collect()
        a8 = bytearray(n8 or 1)
        m = declare(c)
        m.load(c, strict)
        m.prepare(a8)
        return m
