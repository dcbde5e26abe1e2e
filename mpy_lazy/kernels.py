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
# `i8` is the module holding the int8 kernels for the current path (_viper or _pure: the same
# functions on the same records, tests/runtime/test_kernels.py checks they agree); table() is
# the tuple of kernels by record kind (mpy_lazy/check.py) that a program calls. use() takes
# effect on a program's next call.
import sys

from . import _pure, backend, check

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

i8 = _pure
_path = None
_tables = [None] * 8  # the kernel tables of the current path: [floats + 2 x elem + 4 x recurrent]

# the integer kernels by record kind (mpy_lazy/check.py), and the float ones
_INT = ((check.CONV, "conv"), (check.DEPTHWISE, "depthwise"), (check.DENSE, "dense"), (check.ADD, "add"),
        (check.MUL, "mul"), (check.MAXPOOL, "maxpool"), (check.AVGPOOL, "avgpool"), (check.MEAN, "mean"),
        (check.LUT, "lut"), (check.SOFTMAX, "softmax"), (check.MOVE, "move"), (check.FILL, "fill"),
        (check.RESCALE, "rescale"), (check.ADD16, "add16"), (check.SUB, "sub"), (check.SUB16, "sub16"),
        (check.CONV16, "conv16"), (check.DW16, "dw16"), (check.DENSE16, "dense16"), (check.TCONV, "tconv"),
        (check.TCONV16, "tconv16"), (check.SOFTMAX16, "softmax16"))
# the recurrent ops' kernels: in modules of their own, imported for the programs that use them
_RECURRENT = ((check.LSTM, "lstm"), (check.SVDF, "svdf"))
RECURRENT_KINDS = (check.LSTM, check.FLSTM, check.SVDF)
_FLOAT = ((check.FCONV, "conv"), (check.FDEPTHWISE, "depthwise"), (check.FDENSE, "dense"), (check.FADD, "add"),
          (check.FMUL, "mul"), (check.FMAXPOOL, "maxpool"), (check.FAVGPOOL, "avgpool"), (check.FMEAN, "mean"),
          (check.FACT, "act"), (check.FSOFTMAX, "softmax"), (check.FSUB, "sub"), (check.QUANTIZE, "quantize"),
          (check.DEQUANTIZE, "dequantize"), (check.FTCONV, "tconv"))

_pure_kinds = [None]  # the kinds of the current path whose kernel is _pure's


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
    global _path, i8
    ok = available()
    if name is None:
        name = ok[0]
    if name not in ok:
        raise ValueError("kernel path %r not available here (have %s)" % (name, ", ".join(ok)))
    _path = name
    i8 = _viper if (_viper is not None and name != "pure") else _pure
    if _viper is not None:
        _viper.T = _thumb if name in ("thumb", "ulab") else None
    for i in range(8):
        _tables[i] = None
    _pure_kinds[0] = None
    return name


def path():
    return _path or use()


def table(floats=True, elem=False, recurrent=False):
    """The kernels of the current path by record kind (a tuple; None for no kind). Without
    floats, the float kinds are None (their module is not imported: heap on a board); without
    elem, kinds 44..53 too; without recurrent, the recurrent kinds (LSTM, SVDF). An integer kind
    the path's module lacks runs on _pure's kernel (pure_kinds() lists them)."""
    path()
    slot = (1 if floats else 0) + (2 if elem else 0) + (4 if recurrent else 0)
    t = _tables[slot]
    if t is None:
        t = [None] * check.KINDS
        pure = []
        for kind, name in _INT:
            f = getattr(i8, name, None)
            if f is None:
                f = getattr(_pure, name)
            if i8 is _pure or f is getattr(_pure, name):
                pure.append(kind)
            t[kind] = f
        if recurrent:
            from . import _recurrent

            rec = _recurrent
            if i8 is _viper:
                from . import _viper_recurrent as rec
            for kind, name in _RECURRENT:
                t[kind] = getattr(rec, name)
        _pure_kinds[0] = tuple(pure)
        if floats:
            from . import _float

            fl = _float
            if _path == "ulab":
                from . import _nd as fl
            for kind, name in _FLOAT:
                t[kind] = getattr(fl, name, None) or getattr(_float, name)
            if recurrent:
                t[check.FLSTM] = _float.lstm
        if elem:  # kinds 44..53: integer kernels of _viper_elem (viper paths) or _elem, float ones of _elem
            from . import _elem

            ints = _elem
            if i8 is not _pure and _viper is not None:
                from . import _viper_elem as ints
            for kind, name in ((check.MINMAX, "minmax"), (check.CAST, "cast"), (check.DIV, "div"),
                               (check.RESIZE, "resize"), (check.PRELU, "prelu")):
                t[kind] = getattr(ints, name)
            for kind, name in ((check.FBINARY, "fbinary"), (check.FCAST, "fcast"), (check.FRESIZE, "fresize"),
                               (check.FLAYERNORM, "flayernorm"), (check.FGROUPNORM, "fgroupnorm")) if floats else ():
                t[kind] = getattr(_elem, name)
        t = _tables[slot] = tuple(t)
    return t


def pure_kinds():
    """The integer kinds table() serves with _pure's kernels (they read typed views)."""
    table(False)
    return _pure_kinds[0]


def f16(E, slot, first, fs, n):
    """n f16 values from element `first` of slot `slot` decoded into the arena as f32 from
    byte fs: viper bit conversion where it exists (no float made), else struct."""
    if _viper is not None:
        _viper.f16_to_f32(E.B[slot], first, E.A, fs // 4, n)
    else:
        _pure.f16_to_f32(E.B[slot], first, E.af, fs // 4, n)
