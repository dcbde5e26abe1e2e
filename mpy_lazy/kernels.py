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
if sys.implementation.name == "micropython":
    try:
        from . import _viper
    except Exception:  # a port without the native emitter
        _viper = None
    if _viper is not None:
        try:
            from . import _thumb
        except Exception:  # not an ARM port, or frozen without it (manifest.py thumb=False)
            _thumb = None

i8 = _pure
_path = None
_tables = [None, None]  # the kernel tables of the current path: int8 only, and with floats

_INT8 = ("conv", "depthwise", "dense", "add", "mul", "maxpool", "avgpool", "mean", "lut", "softmax", "move",
         "fill")
_FLOAT = ("conv", "depthwise", "dense", "add", "mul", "maxpool", "avgpool", "mean", "act", "softmax")


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
    _tables[0] = _tables[1] = None
    return name


def path():
    return _path or use()


def table(floats=True):
    """The kernels of the current path by record kind (a tuple; None for no kind). Without
    floats, the float kinds are None (their module is not imported: heap on a board)."""
    path()
    t = _tables[1 if floats else 0]
    if t is None:
        t = [None] * check.KINDS
        for i, name in enumerate(_INT8):
            t[check.CONV + i] = getattr(i8, name)
        if floats:
            from . import _float

            t[check.QUANTIZE] = _float.quantize
            t[check.DEQUANTIZE] = _float.dequantize
            fl = _float
            if _path == "ulab":
                from . import _nd as fl
            for i, name in enumerate(_FLOAT):
                t[check.FCONV + i] = getattr(fl, name, None) or getattr(_float, name)
        t = _tables[1 if floats else 0] = tuple(t)
    return t


def f16(E, slot, first, fs, n):
    """n f16 values from element `first` of slot `slot` decoded into the arena as f32 from
    byte fs: viper bit conversion where it exists (no float made), else struct."""
    if _viper is not None:
        _viper.f16_to_f32(E.B[slot], first, E.A, fs // 4, n)
    else:
        _pure.f16_to_f32(E.B[slot], first, E.af, fs // 4, n)
