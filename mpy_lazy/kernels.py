# Kernel paths: which implementation of the kernels the ops call.
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
# functions with the same arguments, tests/runtime/test_kernels.py checks they agree). Ops look
# it up at run time (kernels.i8.conv(...)), so use() takes effect on the next forward pass.
import sys

from . import backend
from . import _pure

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
    return name


def path():
    return _path or use()


def nd():
    """True when float ops should use the backend's ndarray kernels (path 'ulab')."""
    return path() == "ulab"


def f16(src, first, dst, n):
    """dst[0:n] (an array('f')) = the f16 values src[first:first + n] (little-endian bytes):
    viper bit conversion where it exists (no float made), else struct."""
    (_viper or _pure).f16_to_f32(src, first, dst, n)
