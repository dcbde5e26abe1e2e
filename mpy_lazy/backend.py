# Array backend, detected once on first use (importing numpy on CPython is slow; MicroPython
# boards pay nothing until an array is needed).
#   'ulab'  : ulab.numpy (boards built with ulab)
#   'numpy' : numpy (CPython)
#   None    : array.array for RAM arrays, uctypes (MicroPython) for zero-copy typed views
import array

DTYPES = (None, "f32", "f16", "i8", "u8", "i16", "u16", "i32", "u32")  # index = FORMAT.md code
ITEMSIZE = {"f32": 4, "f16": 2, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8}
STRUCT = {"f32": "f", "f16": "e", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q"}
# RAM arrays hold f16 as f32: f16 is a storage format, RAM values are for computing.
TYPECODE = {"f32": "f", "f16": "f", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I"}
_NUMPY = {"f32": "<f4", "f16": "<f4", "i8": "i1", "u8": "u1", "i16": "<i2", "u16": "<u2",
          "i32": "<i4", "u32": "<u4"}

_TC_SIZE = {"f": 4, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4}

# ulab's float dtype is the port's float: f32 storage can be viewed in place only on a
# single-precision build (boards); the unix port uses doubles.
SINGLE_FLOAT = 1.0 + 2.0 ** -30 == 1.0

_kind = 0  # 0 = not detected yet
np = None


def kind():
    """'ulab', 'numpy' or None; sets the module global `np` to the backend's numpy module."""
    global _kind, np
    if _kind == 0:
        _kind = None
        try:
            from ulab import numpy

            np, _kind = numpy, "ulab"
        except ImportError:
            try:
                import numpy

                np, _kind = numpy, "numpy"
            except ImportError:
                pass
    return _kind


def ram_itemsize(dtype):
    """Bytes per element of a RAM array holding `dtype` (f16 is held as f32)."""
    return 4 if dtype == "f16" else ITEMSIZE[dtype]


def np_dtype(dtype):
    """Backend dtype for a RAM array of `dtype`, or None when the backend has none (ulab: i32/u32)."""
    k = kind()
    if k == "numpy":
        return np.dtype(_NUMPY[dtype])
    if k == "ulab":
        if dtype in ("f32", "f16"):
            return np.float
        return {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16}.get(dtype)
    return None


def new_array(dtype, n):
    """A zeroed flat RAM array of n elements: backend ndarray where it has the dtype, else
    array.array."""
    t = np_dtype(dtype)
    if t is not None:
        return np.zeros(n, dtype=t)
    return array.array(TYPECODE[dtype], bytes(n * ram_itemsize(dtype)))


def to_array(values, dtype, n):
    """A flat RAM array of `dtype` from an init result (ndarray, array.array, list, iterable).
    The caller hands over ownership: an ndarray of the right type is used as is, not copied."""
    t = np_dtype(dtype)
    if t is not None and kind() == "numpy":
        a = np.asarray(values, dtype=t).reshape(-1)
    elif t is not None:  # ulab: no asarray, reshape of an owned result is enough
        a = values if isinstance(values, np.ndarray) else np.array(values, dtype=t)
        if a.dtype != t:
            a = np.array(a, dtype=t)
        a = a.reshape((a.size,)) if a.ndim != 1 else a
    elif isinstance(values, array.array) and _typecode(values) == TYPECODE[dtype]:
        a = values
    else:
        a = array.array(TYPECODE[dtype], values)
    if len(a) != n:
        raise ValueError("init gave %d elements, the shape needs %d" % (len(a), n))
    return a


def copy_array(a):
    """An independent copy of a RAM array."""
    if isinstance(a, array.array):
        return array.array(_typecode(a), a)
    return a.copy()


def array_nbytes(a):
    if isinstance(a, array.array):
        return len(a) * _TC_SIZE[_typecode(a)]
    return a.size * a.itemsize


def nbytes(b):
    """Bytes of a buffer: bytes/bytearray, memoryview, array.array, ndarray (numpy or ulab:
    ulab's has no .nbytes)."""
    if isinstance(b, array.array):
        return array_nbytes(b)
    if isinstance(b, memoryview):
        return len(b) * getattr(b, "itemsize", 1)
    if hasattr(b, "itemsize"):
        return b.size * b.itemsize
    return len(b)


_UCT = {"f32": "FLOAT32", "i8": "INT8", "u8": "UINT8", "i16": "INT16", "u16": "UINT16",
        "i32": "INT32", "u32": "UINT32", "i64": "INT64"}


def typed_view(mv, dtype, n):
    """Flat indexable of the n stored values of a little-endian buffer (f32 and the int
    dtypes), without a copy: a cast memoryview on CPython, a uctypes array on MicroPython."""
    if hasattr(mv, "cast"):  # CPython
        return mv.cast("B").cast(STRUCT[dtype])
    import uctypes

    layout = {"a": (uctypes.ARRAY | 0, getattr(uctypes, _UCT[dtype]) | n)}
    return uctypes.struct(uctypes.addressof(mv), layout, uctypes.LITTLE_ENDIAN).a


def _typecode(a):
    tc = getattr(a, "typecode", None)
    if tc is None:  # MicroPython's array has no .typecode: read it from repr "array('f', ...)"
        tc = repr(a[:0])[7]
    return tc
