# A compiled model: the graph as a table of integers (docs/FORMAT.md, "Program"), and the
# runner that walks it. The packer computes the table once (every op's kernel, arena offsets,
# geometry, requantization, the container offsets of its weights) and stores it in the
# container as the tensor `graph.program`; on a board the runner reads it in place, from
# flash, like the weights. What stays in RAM is the arena and this object: no Python object
# per op, per value or per weight (TFLite Micro keeps such metadata in its arena; Edge
# Impulse's EON compiler moves it to flash as constants, as this does).
#
#   prog = program.load(mpy_lazy.open("/rom/kws.mpyl"))   # checks every record, one arena
#   y = prog(x)
#
# A record is [kind | line << 8, length, fields...]: `line` is the graph description's line
# (for messages), `length` the record's words. The fields are the kernel's parameters in the
# layout its room gives (mpy_lazy/ops/<op>.py, docs/OPS.md; shared by the fast paths); a tensor is two
# fields, (slot, offset): the byte offset of its data in buffer B[slot]. A program read from a
# container has one slot, the container; a model declared from text (mpy_lazy.model.Model)
# compiles its own program in RAM, one slot per Param.
#
# Every kernel is kernel(E, P, k): E this object (its arena A, slots B, work array W), P the
# program, k the word index of the record. A kernel allocates nothing on the int8 paths.
import array

from . import backend, check, kernels
from ._arith import bits_f32, f32_bits, slot_view  # noqa: F401 (f32_bits: the compiler's)
from .container import ContainerError
from .kinds import LOOP
from .kinds import (H_FIRST, H_INPUTS, H_MAGIC, H_OUTPUTS, H_RECORDS, H_VERSION, HEADER, IO, IO_DIMS,  # noqa: F401
                    IO_DTYPE, IO_LAYOUT, IO_NDIM, IO_OFF, IO_SCALE, IO_SIZE, IO_ZP, MAGIC, MAX_ARENA, VERSION)

NAME = "graph.program"  # the container tensor holding it
WORK = 32  # int32 words of the shared work array (the requantization header, softmax's state,
# conv16's block of 8 sums)

_BYTES = (bytes, bytearray)
_ITEMSIZE = {"b": 1, "B": 1, "h": 2, "H": 2}  # array typecodes of the integer inputs copied as bytes


class Program:
    """A model ready to run. Call it on an input; it returns the output's view, which the next
    call overwrites. `input`/`output`: views of their arena bytes; `inputs`, `outputs` (graph
    Values: shape, dtype, q), `layouts`, `out_layouts` ('hwc' or 'chw': the caller's order)
    are read from the program's header when asked for (they are not kept: heap is scarce).

    What it keeps: the program P, the tensor slots B, the arena A, the kernel table of the
    current path and the inputs' and outputs' views (and, for the pure and float kernels, the
    typed views they read: made only on those paths)."""

    _path = None  # kernel path the views were made for
    _K = None  # kernels.table() of that path
    _io = None  # a Model's own (inputs, layouts, outputs, out_layouts), else read from P
    _seen = None  # the last array.array input found to hold int8 or int16 codes (see _set)
    _seen_es = 0  # its item size
    _in = None  # the inputs' views, when there are several
    _put = _run = None  # the viper path's put and run loop (None: the Python ones)
    Pmv = None  # the program's bytes, when P is a typed view of them (made for float models)
    # typed views the pure and float kernels read (made by _env for the path that needs them)
    a8 = a16 = a32 = af = pf = s8 = s32 = sf = None
    cache = None  # the ndarray kernels' matrices, per record

    def __init__(self, P, B, arena=None, verify=None, io=None, words=None, raw=None):
        """P: the program (an indexable of int32: a RAM array, or a typed view of the
        container's tensor); B: the tuple of buffers its tensor slots refer to; verify: a
        callable(offset in slot 0) -> (dtype, nbytes) of the container tensor starting there
        (None: the slots are RAM arrays the compiler checked); io: (inputs, layouts, outputs,
        output layouts) to use instead of the header's (a Model's own Values); words: P's
        length (a typed view of flash has no len()); raw: P's bytes (a memoryview) when P is a
        typed view of them. Every record is checked before the arena is allocated
        (mpy_lazy/check.py, with each kind's room)."""
        self.P = P
        self.B = B
        words = len(P) if words is None else words
        n = check.arena_size(P, words)
        if arena is None:  # first, while the heap still has its largest hole
            _room(n)
            arena = bytearray(n or 4)
        elif len(arena) < n:
            raise ValueError("arena of %d bytes, the program needs %d" % (len(arena), n))
        check.program(P, B, kernels.room, verify, words, kernels.abs_sums())  # ContainerError: record, line, field
        if raw is not None and check.has_floats(P):
            self.Pmv = raw
        if io is not None:
            self._io = io
        self._end = words
        self._counts()
        self.A = arena
        self.reset()
        self._views()
        self._env()  # now: a forward pass allocates nothing, the first one included

    # the header's inputs and outputs, read when asked for
    inputs = property(lambda self: self._io[0] if self._io else _io(self.P, HEADER, self.P[H_INPUTS])[0])
    layouts = property(lambda self: self._io[1] if self._io else _io(self.P, HEADER, self.P[H_INPUTS])[1])
    outputs = property(lambda self: self._io[2] if self._io else _io(
        self.P, HEADER + IO * self.P[H_INPUTS], self.P[H_OUTPUTS])[0])
    out_layouts = property(lambda self: self._io[3] if self._io else _io(
        self.P, HEADER + IO * self.P[H_INPUTS], self.P[H_OUTPUTS])[1])

    def _view(self, e):
        """A typed view of the arena bytes of input/output entry e of the header."""
        P = self.P
        dt = _DT[P[e + IO_DTYPE]]
        if dt == "bool":  # (its bytes, 0 or 1)
            dt = "u8"
        n = P[e + IO_SIZE]
        off = P[e + IO_OFF]
        return backend.typed_view(memoryview(self.A)[off: off + n * backend.ITEMSIZE[dt]], dt, n)

    def _views(self):
        """The inputs' and outputs' views of the arena (made once: the arena never moves)."""
        P = self.P
        nin, nout = P[H_INPUTS], P[H_OUTPUTS]
        self.input = self._view(HEADER)
        if nin > 1:
            self._in = tuple([self._view(HEADER + IO * i) for i in range(nin)])
        outs = [self._view(HEADER + IO * (nin + i)) for i in range(nout)]
        self._out = outs[0] if nout == 1 else tuple(outs)
        self._puts = tuple([_puts(P, HEADER + IO * i) for i in range(nin)])

    @property
    def output(self):
        return self._out if self.P[H_OUTPUTS] == 1 else self._out[0]

    def memory(self):
        """{'arena': bytes of activations and kernel scratch (one buffer), 'scratch': 0 (the
        scratch is planned into the arena)}."""
        return {"arena": len(self.A), "scratch": 0}

    def named_params(self):
        """None: a stored program's weights are the container's tensors, read in place
        (mpy_lazy.report lists them as flash)."""
        return []

    def macs(self):
        return kernels.macs(self.P)

    def clone(self, arrays=False):
        """The same program and weights with an arena of its own (arrays: ignored; the
        weights are read-only)."""
        c = object.__new__(Program)
        for k in ("P", "B", "Pmv", "_io", "_end"):
            if k in self.__dict__:
                setattr(c, k, getattr(self, k))
        c._counts()
        c.A = bytearray(len(self.A))
        c.reset()
        c._views()
        c._env()
        return c

    def reset(self):
        """Start the state of the stateful ops again: the hidden and cell state of a .tflite
        LSTM and an SVDF's memory, which persist from one call to the next as TFLite Micro's
        variable tensors do across Invoke() (TFLM's MicroInterpreter::Reset()): zero, int8
        values at their zero point. Done when the program is made; an ONNX LSTM starts from zero
        on every call anyway."""
        A = self.A
        for kind, k in check.records(self.P):
            for off, n, v, es in kernels.state(self.P, k):
                for i in range(off, off + n * es, es):
                    for b in range(es):
                        A[i + b] = (v >> (8 * b)) & 255
            start = getattr(kernels.room(kind), "start", None)
            if start is not None:  # state it writes itself (a variable's initial tensor)
                start(self, self.P, k)

    def _counts(self):
        """C: the iteration count of each WHILE run on the board (ops/control.py), one int per
        loop record (allocated here, once)."""
        n = 0
        for kind, _ in check.records(self.P):
            if kind == LOOP:
                n += 1
        if n:
            self.C = array.array("i", bytes(4 * n))

    # --- running ------------------------------------------------------------------------

    def _env(self):
        """Views the current kernel path needs (made when the path changes, kept; the path is
        recorded last, so a MemoryError here leaves the next call to make them again)."""
        path = kernels.path()
        need_f = check.has_floats(self.P)
        kinds = self._kinds()
        K = kernels.table(kinds)  # (only the rooms and fast paths of these kinds are imported)
        self._path = None
        pure = kernels.views(kinds)
        for name in ("a8", "a16", "a32", "af", "pf", "s8", "s32", "sf", "cache"):
            if name in self.__dict__:  # (the class's None: no instance slot for what a path lacks)
                delattr(self, name)
        if path == "ulab":
            self.cache = {}
        mv = memoryview(self.A)
        words = len(self.A) // 4
        if pure:
            self.a8 = backend.typed_view(mv, "i8", len(self.A))
            self.a16 = backend.typed_view(mv, "i16", len(self.A) // 2)
            self.a32 = backend.typed_view(mv, "i32", words)
            self.s8 = tuple([slot_view(b, "i8") for b in self.B])
            self.s32 = tuple([slot_view(b, "i32") for b in self.B])
        if need_f:
            self.af = backend.typed_view(mv, "f32", words)
            self.pf = slot_view(self.Pmv if self.Pmv is not None else self.P, "f32")
            self.sf = tuple([slot_view(b, "f32") for b in self.B])
        self._K = K
        v = kernels.viper()
        self._put = v.put if v is not None else None  # (None: ops/move.py's, on typed views)
        self._run = v.run if v is not None else None
        self._path = path

    def _kinds(self):
        """The kinds of the program's records, sorted (a tuple)."""
        kinds = []
        for kind, _ in check.records(self.P):
            if kind not in kinds:
                kinds.append(kind)
        kinds.sort()
        return tuple(kinds)

    def f16(self, slot, first, fs, n):
        """n f16 values from element `first` of slot `slot` decoded into the arena as f32 from
        byte fs (the float kernels' f16 weights: _arith.weights)."""
        kernels.f16(self, slot, first, fs, n)

    def __call__(self, x=None, x2=None, x3=None, *more):
        """One forward pass. x (and one more argument per further input): the input's values
        in its layout order: integer codes (bytes, bytearray, array('b') for int8: copied by
        one kernel call; a list), or floats (quantized with the input's q), or `input` filled
        in place, or None to run on what the inputs hold. Returns the output view (a tuple for
        several outputs). The arena is reused: give the input again for every call. (Up to
        three inputs are named parameters: a call allocates no tuple for them.)"""
        # (kept to few locals, as _set is: a bytecode function whose locals and stack exceed 11
        # words gets its frame from the heap, allocated and freed on every call)
        if self._path != kernels.path():
            self._env()
        if x is not None and x is not self.input:
            self._set(0, x)
        if x2 is not None or x3 is not None or more:
            self._set_more(x2, x3, more)
        if self._run is not None:  # the loop in viper: P's words read as machine words
            self._run(self, self.P, self._K, self._end)
        else:
            self._loop()
        return self._out

    def _set_more(self, x2, x3, more):
        if x2 is not None and x2 is not self._in[1]:
            self._set(1, x2)
        if x3 is not None and x3 is not self._in[2]:
            self._set(2, x3)
        for i in range(len(more)):
            if more[i] is not None and more[i] is not self._in[i + 3]:
                self._set(i + 3, more[i])

    def _loop(self):
        K = self._K
        P = self.P
        k = P[H_FIRST]
        end = self._end
        while k < end:  # (a control record returns where to go on: ops/control.py)
            j = K[P[k] & 255](self, P, k)
            k = k + P[k + 1] if j is None else j

    def _set(self, i, x):
        n, planes = self._puts[i]
        if len(x) != n:
            raise ValueError("input %d has %d values, the model takes %d" % (i, len(x), n))
        if planes and ((x is self._seen and len(planes) == self._seen_es) or
                       (len(planes) == 1 and isinstance(x, _BYTES)) or _itemsize(x) == len(planes)):
            if isinstance(x, array.array):
                self._seen = x  # an array's item size is read once per object (reading it allocates)
                self._seen_es = len(planes)
            if self._put is None:
                self._put_ref(x, n, planes)
            else:  # (an item has at most two bytes)
                self._put(x, self.A, planes[0])
                if len(planes) > 1:
                    self._put(x, self.A, planes[1])
        else:
            self._set_values(i, x, n)

    def _put_ref(self, x, n, planes):
        """The integer codes x copied in by the reference kernel, which reads items: signed."""
        from .ops.move import put

        x = backend.typed_view(memoryview(x), "i8", n * len(planes))
        for p in planes:
            put(x, self.view(1), p)

    def _set_values(self, i, x, n):
        """Input i from values one by one: floats (quantized) or ints (range-checked)."""
        P = self.P
        e = HEADER + IO * i
        dt = P[e + IO_DTYPE]
        chw = P[e + IO_LAYOUT] == 1
        c = P[e + IO_DIMS + P[e + IO_NDIM] - 1]
        hw = n // c
        dst = self.input if i == 0 else self._in[i]
        hi = 127 if dt == 3 else (32767 if dt == 5 else (255 if dt == 4 else (1 if dt == 12 else 2147483647)))
        lo = 0 if dt in (4, 12) else -hi - 1
        if dt == 11:  # (i64: constants, as -hi - 1 would be a new big int on every call)
            hi = 9223372036854775807
            lo = -9223372036854775808
        for j in range(n):
            val = x[j]
            if dt != 1:
                if isinstance(val, float):
                    from .ops.quant import to_int  # floats into an integer input (they allocate anyway)

                    val = to_int(val, bits_f32(P[e + IO_SCALE]), P[e + IO_ZP], dt)
                elif val > hi or val < lo:  # the arena's item would wrap: 300 read as 44
                    from ._errors import out_of_range

                    raise out_of_range(i, j, val, hi)
            dst[(j % hw) * c + j // hw if chw else j] = val

    def view(self, es):
        """The arena as signed integers of es bytes (1, 2 or 4): a typed view, made once."""
        name = ("a8", "a16", "", "a32")[es - 1]
        v = getattr(self, name)
        if v is None:
            v = backend.typed_view(memoryview(self.A), ("i8", "i16", "", "i32")[es - 1], len(self.A) // es)
            setattr(self, name, v)
        return v

    def quantize(self, values, i=0):
        """An integer input filled from floats: returns the input's view (pass it to the call)."""
        self._set(i, values)
        return self.input if i == 0 else self._in[i]

    def tolist(self, i=0):
        """Output i as a list of its stored values (ints for integer values, floats for f32),
        in the order the caller gave the input (C, H, W for a model exported from torch). Read
        from the header, as _set() reads it (self.outputs would import the graph module)."""
        P = self.P
        if not 0 <= i < P[H_OUTPUTS]:
            raise IndexError("output %d: the model has %d" % (i, P[H_OUTPUTS]))
        out = self._out if P[H_OUTPUTS] == 1 else self._out[i]
        e = HEADER + IO * (P[H_INPUTS] + i)
        n = P[e + IO_SIZE]
        if P[e + IO_LAYOUT] == 1:  # chw
            c = P[e + IO_DIMS + P[e + IO_NDIM] - 1]
            hw = n // c
            return [out[(j % hw) * c + j // hw] for j in range(n)]
        return [out[j] for j in range(n)]

    def dequantize(self, i=0):
        """Output i as a list of floats (real values of an integer output), in the caller's
        order."""
        vals = self.tolist(i)
        P = self.P
        e = HEADER + IO * (P[H_INPUTS] + i)
        if P[e + IO_DTYPE] in (1, 12):  # f32, bool: no q
            return vals
        s, z = bits_f32(P[e + IO_SCALE]), P[e + IO_ZP]
        return [s * (q - z) for q in vals]

    def predict(self, x=None, *more):
        """Index of the largest element of the (first) output, in the caller's order."""
        y = self(x, *more) if more else self(x)
        if self.P[H_OUTPUTS] > 1:
            y = y[0]
        P = self.P
        e = HEADER + IO * P[H_INPUTS]
        n = P[e + IO_SIZE]
        best = 0
        for j in range(1, n):
            if y[j] > y[best]:
                best = j
        if P[e + IO_LAYOUT] == 1:  # the raw view is H, W, C: the caller counts C, H, W
            c = P[e + IO_DIMS + P[e + IO_NDIM] - 1]
            best = (best % c) * (n // c) + best // c
        return best


_DT = {1: "f32", 3: "i8", 4: "u8", 5: "i16", 7: "i32", 11: "i64", 12: "bool"}  # program dtype codes (FORMAT.md's)
WORK_AREA = array.array("i", bytes(4 * WORK))  # kernels' work array, shared (they run one at a time)
Program.W = WORK_AREA


def _io(P, at, n):
    from .graph import Value  # (a stored program runs without the graph module: heap)

    vals, layouts = [], []
    for i in range(n):
        e = at + IO * i
        nd = P[e + IO_NDIM]
        shape = tuple([P[e + IO_DIMS + j] for j in range(nd)])
        dt = _DT[P[e + IO_DTYPE]]
        q = (bits_f32(P[e + IO_SCALE]), P[e + IO_ZP]) if dt not in ("f32", "bool") else None
        v = Value("", shape, dt, q)
        v.offset = P[e + IO_OFF]
        vals.append(v)
        layouts.append("chw" if P[e + IO_LAYOUT] == 1 else "hwc")
    return vals, layouts


def _room(n):
    """Refuse an arena larger than the bound or than the free heap, before allocating it."""
    if n > MAX_ARENA:
        raise ContainerError("graph: needs %d bytes of activation memory (more than %d)" % (n, MAX_ARENA),
                             None, "graph")
    import gc

    if not hasattr(gc, "mem_free"):  # CPython: no heap to measure (and a collect of a big process is slow)
        return
    gc.collect()
    free = gc.mem_free()
    if n > free:
        raise ContainerError("graph: needs %d bytes of activation memory, the heap has %d free" % (n, free),
                             None, "graph")


def _puts(P, e):
    """(n, planes) of input entry e: its n elements, and for integer codes (int8, uint8, bool:
    one byte; int16: two) the parameters of one put() per byte of an item (little-endian items,
    as the arena's) into the arena in its layout order ([SO, DO, ROWS, COLS, SS, SJ, DS, DJ]:
    ops/move.py's put); floats and int32 have none. Made once: an input then goes in with one
    kernel call per byte plane."""
    n = P[e + IO_SIZE]
    dt = P[e + IO_DTYPE]
    es = 1 if dt in (3, 4, 12) else (2 if dt == 5 else 0)
    chw = P[e + IO_LAYOUT] == 1
    c = P[e + IO_DIMS + P[e + IO_NDIM] - 1]
    hw = n // c
    return n, tuple([array.array("i", (b, P[e + IO_OFF] + b, c if chw else 1, hw if chw else n,
                                       es * hw if chw else 0, es, es if chw else 0, es * c if chw else es))
                     for b in range(es)])


def _itemsize(x):
    """Bytes per item of an array('b'/'B'/'h'/'H') or a memoryview (else 0): the inputs copied
    as bytes."""
    if isinstance(x, array.array):
        return _ITEMSIZE.get(backend._typecode(x), 0)
    if isinstance(x, memoryview):
        return getattr(x, "itemsize", 1)
    return 0


def load(c):
    """The Program stored in container c (its tensor `graph.program`), every record checked
    against the container; None when c holds none."""
    if NAME not in c:
        return None
    info = c.info(NAME)
    if info.dtype != "i32" or len(info.shape) != 1:
        raise ContainerError("tensor %r: a program is a 1-D i32 tensor" % NAME, NAME, "dtype")
    v = c.view(NAME)
    P = backend.typed_view(v.mv, "i32", v.size)
    if v.size > HEADER and P[H_MAGIC] == MAGIC and 2 <= P[H_VERSION] < VERSION:
        return None  # packed before VERSION's records (docs/FORMAT.md): run from the graph
    B = (c._mv,)
    return Program(P, B, verify=c._tensor_at, words=v.size, raw=v.mv)
