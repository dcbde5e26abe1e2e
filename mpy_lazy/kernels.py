# Kernel paths: which implementation of the kernels a program's records run on.
#
#   'ulab'   float ops through ulab.numpy on firmware that has it (numpy on CPython); int8 ops
#            as on 'thumb' or 'viper', the best there is (ulab brings nothing to integer work)
#   'thumb'  ARM boards (Cortex-M0+ and up): int8 as on 'viper', with the inner loops of conv,
#            depthwise, dense and requantization in Thumb assembler (_thumb.py)
#   'viper'  stock MicroPython: int8 ops in viper (integer-only native code, no floats), float
#            ops in plain Python
#   'pure'   plain Python everywhere: runs on any port, gives the same integers as 'viper'
#
# Every record kind has a room (mpy_lazy/ops/<room>.py, kinds.ROOM): its check and its reference
# kernel in plain Python (the room's KERNELS names it). A fast path (the room's FAST, default
# _viper, on the viper and thumb paths for the integer kinds; _nd on ulab for the float ones)
# has a kernel of the same name for the kinds it speeds up;
# tests/runtime/test_kernels.py checks both give the same bytes. table() is the tuple of
# kernels by kind that a program calls; it imports only the rooms and fast paths of the kinds
# the program has (heap on a board). use() takes effect on a program's next call.
import sys

from . import backend
from .kinds import FLOATS, KINDS, LENGTH, ROOM

_viper = _thumb = None
unavailable = {}  # kernel path -> why its module did not import, e.g. {"viper": "MemoryError: ..."}


def _unavailable(name, e):
    """Kernel path `name` did not import: record why in `unavailable` (report() shows it) and
    say so in one line on stderr, unless the port simply lacks that path and a faster one
    runs (thumb off ARM: no asm_thumb, or built or frozen without _thumb)."""
    why = "%s: %s" % (type(e).__name__, e)
    unavailable[name] = why
    if name == "thumb" and isinstance(e, (SyntaxError, ImportError)):
        return
    if isinstance(e, SyntaxError):  # "invalid micropython decorator"
        fix = "this port has no native emitter"
    elif isinstance(e, MemoryError):
        fix = "too little heap to compile mpy_lazy/_%s.py here: install the .mpy files (make mpy) or freeze mpy_lazy" % name
    else:
        fix = "install .mpy files built for this board (make mpy) or the .py sources"
    print("mpy_lazy: warning: %s kernels did not load (%s), running %s; %s" % (
        name, why, "plain Python, far slower" if name == "viper" else "viper", fix), file=sys.stderr)


if sys.implementation.name == "micropython":  # never a silent fallback
    try:
        from . import _viper
    except Exception as e:
        _viper = None
        _unavailable("viper", e)
    if _viper is not None:
        try:
            from . import _thumb
        except Exception as e:
            _thumb = None
            _unavailable("thumb", e)

_path = None
_tables = {}  # the kernel tables of the current path, by the kinds they serve


def available():
    """Kernel paths this interpreter can run, best first."""
    paths = ["ulab"] if backend.kind() else []
    if _thumb is not None:
        paths.append("thumb")
    if _viper is not None:
        paths.append("viper")
    paths.append("pure")
    return paths


def use(name=None):
    """Select the kernel path ('ulab', 'thumb', 'viper' or 'pure'; None = the best available)."""
    global _path
    ok = available()
    if name is None:
        name = ok[0]
    if name not in ok:
        raise ValueError("kernel path %r not available here (have %s)" % (name, ", ".join(ok)))
    _path = name
    if _viper is not None:
        _viper.T = _thumb if name in ("thumb", "ulab") else None
    _tables.clear()
    return name


def path():
    return _path or use()


def viper():
    """The viper kernels' module when the current path runs them (else None)."""
    return _viper if path() != "pure" else None


# op name of the graph description -> its room (the module of mpy_lazy/ops holding class Op)
_OPS = {
    "conv2d": "conv", "depthwise": "conv", "linear": "linear", "add": "binary", "sub": "binary", "mul": "binary",
    "tconv": "tconv", "slice": "slice", "transpose": "slice",
    "depth2space": "slice", "space2depth": "slice",
    "maxpool": "pool", "avgpool": "pool", "mean": "mean", "relu": "act", "relu6": "act",
    "clip": "act", "leakyrelu": "act", "sigmoid": "act", "tanh": "act", "lut": "act",
    "reshape": "reshape", "concat": "concat", "pad": "pad", "softmax": "softmax",
    "quantize": "quant", "dequantize": "quant", "lstm": "lstm", "gru": "gru", "svdf": "svdf",
    "hardswish": "act", "hardsigmoid": "act", "gelu": "act", "minimum": "elementwise", "maximum": "elementwise",
    "div": "elementwise", "prelu": "elementwise", "cast": "cast", "resize": "resize", "layernorm": "layernorm",
    "groupnorm": "groupnorm",
    "abs": "act",
    "broadcast": "slice",
    "gathernd": "index", "update": "index",
    "var": "variable", "read": "variable", "assign": "variable",
    "reduce": "reduce",
    "cumsum": "cumsum",
    "batchmatmul": "matmul",
    "logsoftmax": "normalize", "l2norm": "normalize", "l2pool": "normalize",
    "neg": "unary", "sqrt": "unary", "rsqrt": "unary", "square": "unary", "exp": "unary", "log": "unary",
    "sin": "unary", "cos": "unary", "floor": "unary", "ceil": "unary", "round": "unary", "elu": "unary",
    "const": "const",
    "equal": "compare", "notequal": "compare", "less": "compare", "lessequal": "compare", "greater": "compare",
    "greaterequal": "compare", "and": "compare", "or": "compare", "not": "compare", "select": "compare",
    "sqdiff": "arith", "floordiv": "arith", "floormod": "arith", "addn": "arith",
}
_OPS.update({"window": "signal", "fftbits": "signal", "fftscale": "signal", "rfft": "signal", "energy": "signal",
             "filterbank": "signal", "fbsqrt": "signal", "specsub": "signal", "pcan": "signal", "fblog": "signal",
             "delay": "signal",
             "stacker": "signal",
             "framer": "signal",
             "overlap": "signal",
             "irfft": "signal"})
_OPS.update({"branch": "control", "jump": "control", "loop": "control", "next": "control"})


def _room(name):
    return __import__("mpy_lazy.ops." + name, None, None, ("Op",))


def room(kind):
    """The module of mpy_lazy/ops owning record kind `kind` (a kind with a room: kinds.ROOM),
    imported on first use."""
    return _room(ROOM[kind])


def op(name):
    """The Op class of a graph description's op `name` (mpy_lazy/ops/<room>.py), imported on
    first use."""
    return _room(_OPS[name]).Op


def _fast(kind, name):
    """The fast path's kernel `name` for `kind` on the current path, or None."""
    if kind in FLOATS:
        if path() != "ulab":
            return None
        from . import _nd as fast
    else:
        if viper() is None:
            return None
        fast = getattr(room(kind), "FAST", "_viper")
        if fast is None:  # (a kernel with no fast path that reads no typed view)
            return None
        if fast == "_viper_elem":
            from . import _viper_elem as fast
        elif fast == "_viper_recurrent":
            from . import _viper_recurrent as fast
        elif fast == "_viper_reduce":
            from . import _viper_reduce as fast
        elif fast == "_viper_signal":
            from . import _viper_signal as fast
        else:
            fast = _viper
    return getattr(fast, name, None)


def kernel(kind):
    """The kernel of `kind` on the current path: the fast path's where it has one, else the
    room's reference kernel."""
    r = room(kind)
    name = r.KERNELS[kind]
    ref = getattr(r, name)
    f = _fast(kind, name)
    if f is None:
        return ref
    if kind in FLOATS:
        return _unless_declined(f, ref)
    return f


def _unless_declined(f, ref):
    """f, or ref where f declines (returns True: _nd's numpy-only kernels on ulab)."""

    def run(E, P, k):
        if f(E, P, k):
            ref(E, P, k)

    return run


def table(kinds=None):
    """The kernels of the current path by record kind (a tuple of KINDS entries): those of
    `kinds` (a tuple; None: every kind), None for the others, whose modules are not imported."""
    path()
    t = _tables.get(kinds)
    if t is None:
        t = [None] * KINDS
        for kind in range(1, KINDS) if kinds is None else kinds:
            if LENGTH[kind]:
                t[kind] = kernel(kind)
        t = _tables[kinds] = tuple(t)
    return t


def views(kinds):
    """Whether a program of `kinds` needs the typed views the reference kernels read: on the
    pure path, or for an integer kind the fast path lacks."""
    if viper() is None:
        return True
    for kind in kinds:
        r = room(kind)
        if kind not in FLOATS and getattr(r, "FAST", 1) is not None and _fast(kind, r.KERNELS[kind]) is None:
            return True
    return False


def put():
    """The viper move between two buffers on the current path (else None: ops/move.py's)."""
    v = viper()
    return v.put if v is not None else None


def f16(E, slot, first, fs, n):
    """n f16 values from element `first` of slot `slot` decoded into the arena as f32 from
    byte fs: viper bit conversion where it exists (no float made), else struct."""
    if _viper is not None:
        _viper.f16_to_f32(E.B[slot], first, E.A, fs // 4, n)
    else:
        from ._arith import f16_to_f32

        f16_to_f32(E.B[slot], first, E.af, fs // 4, n)


def abs_sums():
    """The weight sums the checks need (check._Env): viper's where it exists."""
    if _viper is not None:
        return _viper.abs_sums
    from ._arith import abs_sums

    return abs_sums


def record_macs(P, k):
    """Multiply-accumulates of the record at k (P checked): its room's macs(), else 0."""
    f = getattr(room(P[k] & 255), "macs", None)
    return f(P, k) if f is not None else 0


def macs(P):
    """Multiply-accumulates of one pass over the program."""
    from .check import records

    total = 0
    for _, k in records(P):
        total += record_macs(P, k)
    return total


def state(P, k):
    """The state the record at k keeps from one call to the next (LSTM, SVDF: TFLM's variable
    tensors), as (arena byte offset, elements, initial value, bytes per element) regions; ()
    for a stateless record (its room has no state()). (P checked.)"""
    f = getattr(room(P[k] & 255), "state", None)
    return f(P, k) if f is not None else ()
