"""`mpy-lazy pack`: inputs -> one container, streaming one tensor at a time.

Layout (offsets, sizes) is computed from names, shapes and dtypes first; then each tensor is
read, converted/quantized in chunks, CRC'd and written at its offset in a temp file; finally the
header and tables (which need the CRCs and scales) are written at the start."""
import os
import sys
import zlib

import numpy as np

from . import __version__
from .atomic import atomic_output, check_output
from .container import (FLAG_AUX, MAX_NAME, MAX_NDIM, NUMPY_DTYPES, QUANT_CHANNEL, QUANT_NONE,
                        QUANT_TENSOR, U32_MAX, Entry, Layout, PackError)
from .readers import read

QUANT_MODES = ("none", "f16", "int8", "int8-channel")
FORMAT_NAME = "mpy-lazy/1.2"
CHUNK_ELEMENTS = 1 << 20  # work in ~4 MB pieces: bounded RAM, cache-friendly numpy passes
PROGRESS_MIN_BYTES = 4 << 20
_FLOATS = ("float32", "float64", "float16", "bfloat16")
# source dtype -> (storage dtype when not quantized, FORMAT.md source code name)
_PLAIN = {"float32": ("f32", "f32"), "float64": ("f32", "f64"), "bfloat16": ("f32", "bf16"),
          "float16": ("f16", "f16"), "int8": ("i8", "i8"), "uint8": ("u8", "u8"),
          "int16": ("i16", "i16"), "uint16": ("u16", "u16"), "int32": ("i32", "i32"),
          "uint32": ("u32", "u32"), "int64": ("i32", "i64"), "bool": ("u8", "bool")}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
MAX_BYTES = 512 << 20  # default limit on the tensors' total unpacked size (--max-bytes): 32 x the largest board flash


def parse_size(text):
    """--max-bytes value: bytes, or with a K/M/G suffix (powers of 1024)."""
    t = str(text).strip().upper().rstrip("B") or "x"
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1], 1)
    try:
        n = int(t[:-1] if mult > 1 else t)
    except ValueError:
        raise PackError("--max-bytes %r: expected a size such as 4G, 512M or 1000000" % text)
    if n < 1:
        raise PackError("--max-bytes %r: must be positive" % text)
    return n * mult


def unpacked_bytes(sources):
    """Bytes the tensors take once read (what reading them puts in memory), from the headers."""
    total = 0
    for s in sources:
        n = 1
        for d in s.shape:
            n *= int(d)
        total += n * (_src_itemsize(s) if s.dtype in _PLAIN else 8)
    return total


def select(sources, include=(), exclude=(), renames=()):
    """Filter by regex on the input names, then rename (literal prefix OLD -> NEW)."""
    out = []
    for s in sources:
        if include and not any(r.search(s.name) for r in include):
            continue
        if any(r.search(s.name) for r in exclude):
            continue
        for old, new in renames:
            if s.name.startswith(old):
                s.name = new + s.name[len(old):]
        out.append(s)
    return out


def plan(sources, quantize):
    """Sources -> table entries sorted by name, each with `.src` (or AUX `.parent`)."""
    entries = []
    seen = {}
    for s in sources:
        where = "tensor %r in %s" % (s.name, s.origin)
        if s.dtype not in _PLAIN:
            raise PackError("%s: unsupported dtype %s" % (where, s.dtype))
        _check_name(s.name, where)
        if len(s.shape) > MAX_NDIM:
            raise PackError("%s: %d dimensions, at most %d are supported" % (where, len(s.shape), MAX_NDIM))
        if any(d < 1 for d in s.shape):
            raise PackError("%s: shape %s has a zero dimension" % (where, s.shape))
        if any(d > U32_MAX for d in s.shape):
            raise PackError("%s: dimension larger than 2**32-1" % where)
        dtype, source = _PLAIN[s.dtype]
        is_float = s.dtype in _FLOATS
        quant = QUANT_NONE
        axis = 0
        scales = getattr(s, "scales", None)  # int8 codes quantized already: (scales, axis)
        if scales is not None:
            dtype, quant, axis, source = "i8", QUANT_CHANNEL, scales[1], "f32"
        elif quantize == "f16" and is_float:
            dtype = "f16"
        elif quantize in ("int8", "int8-channel") and is_float and len(s.shape) >= 2:
            dtype = "i8"
            quant = QUANT_TENSOR if quantize == "int8" else QUANT_CHANNEL
        e = Entry(s.name, dtype, s.shape, source, quant, axis, flags=FLAG_AUX if getattr(s, "aux", False) else 0)
        e.src = s
        new = [e]
        if scales is not None:
            e.scales = np.asarray(scales[0], dtype="<f4")
        if quant == QUANT_CHANNEL:
            aux = Entry(s.name + "#scales", "f32", (s.shape[axis],), "f32", flags=FLAG_AUX)
            _check_name(aux.name, where + " (its scales tensor %r)" % aux.name)
            aux.parent = e
            new.append(aux)
        for x in new:
            if x.nbytes > U32_MAX:
                raise PackError("%s: %d bytes, more than a container entry can hold (4 GiB)" % (where, x.nbytes))
            if x.name in seen:
                raise PackError("duplicate tensor name %r (in %s and %s)" % (x.name, seen[x.name], s.origin))
            seen[x.name] = s.origin
            entries.append(x)
    entries.sort(key=lambda x: x.name.encode("utf-8"))
    index = {e.name: i for i, e in enumerate(entries)}
    for e in entries:
        if e.quant == QUANT_CHANNEL:
            e.scales_index = index[e.name + "#scales"]
    return entries


def _check_name(name, where):
    n = len(name.encode("utf-8", "surrogatepass"))
    if n == 0:
        raise PackError("%s: empty tensor name" % where)
    if n > MAX_NAME:
        raise PackError("%s: name is %d bytes in UTF-8, at most %d are allowed" % (where, n, MAX_NAME))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise PackError("%s: name is not valid UTF-8" % where)


def metadata(inputs, quantize, extra=()):
    meta = [["format", FORMAT_NAME], ["tool_version", __version__],
            ["source", ",".join(os.path.basename(p) for p in inputs)], ["quantize", quantize]]
    for key, value in extra:
        if key == "format":
            raise PackError("--meta: the key 'format' is reserved")
        if not key:
            raise PackError("--meta: empty key")
        for item in meta:
            if item[0] == key:
                item[1] = value
                break
        else:
            meta.append([key, value])
    return [tuple(m) for m in meta]


def pack(inputs, output, quantize="none", alignment=16, include=(), exclude=(), renames=(),
         meta=(), quiet=False, sources=None, label=None, allow_nonfinite=False,
         max_bytes=MAX_BYTES, notes=None):
    """Pack `inputs` (or the given `sources`: a graph's tensors, in their stored form) into
    `output`; returns (entries, layout). Entries of converted floats carry `.error`, the max
    abs quantization error. `label` is the metadata's `quantize` value (default: quantize).
    Float weights must be finite unless allow_nonfinite; the tensors' total unpacked size
    must be at most max_bytes (checked from the headers, before any tensor is read). The
    readers' remarks (what a checkpoint left out) are appended to `notes`."""
    if quantize not in QUANT_MODES:
        raise PackError("unknown --quantize %r (choose from %s)" % (quantize, ", ".join(QUANT_MODES)))
    if alignment < 4 or alignment > 4096 or alignment & (alignment - 1):
        raise PackError("--align %d: must be a power of two from 4 to 4096" % alignment)
    if not inputs:
        raise PackError("no input files")
    check_output(output)
    if sources is None:
        sources = []
        for path in inputs:
            got = read(path)
            if notes is not None:
                notes.extend(getattr(got, "notes", ()))
            sources += got
        sources = select(sources, include, exclude, renames)
    if not sources:
        raise PackError("no tensors selected from %s" % ", ".join(inputs))
    total = unpacked_bytes(sources)
    if total > max_bytes:
        raise PackError("%s: the tensors unpack to %d bytes, more than --max-bytes %d (raise it to "
                        "pack them anyway)" % (", ".join(inputs), total, max_bytes))
    entries = plan(sources, quantize)
    for e in entries:
        e.allow_nonfinite = allow_nonfinite
    layout = Layout(entries, metadata(inputs, label or quantize, meta), alignment)
    if layout.file_size > U32_MAX:
        raise PackError("%s: the container would be %d bytes, more than 4 GiB" % (output, layout.file_size))
    total = sum(e.size * _src_itemsize(e.src) for e in entries if hasattr(e, "src"))
    bar = _progress(total, quiet)
    try:
        # overflow is detected and reported per tensor; numpy's warnings would only add noise
        with np.errstate(all="ignore"), atomic_output(output) as f:
            f.seek(layout.data_offset)
            pos = layout.data_offset
            for e in entries:
                f.write(bytes(e.offset - pos))
                crc = _Sink(f)
                if hasattr(e, "parent"):  # a per-channel scales tensor
                    crc(e.parent.scales)
                    e.error = None
                else:
                    e.error = _emit(e, crc, bar)
                e.crc = crc.value
                pos = e.offset + e.nbytes
            assert pos == layout.file_size
            f.seek(0)
            f.write(layout.metadata_bytes())
    finally:
        if bar is not None:
            bar.close()
    return entries, layout


def _src_itemsize(s):
    return 2 if s.dtype == "bfloat16" else np.dtype(s.dtype).itemsize


def _progress(total, quiet):
    if quiet or total < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                desc="packing", leave=False)


class _Sink:
    """Writes array bytes to the output and keeps the running CRC-32."""

    def __init__(self, f):
        self.f = f
        self.value = 0

    def __call__(self, arr):
        arr = np.ascontiguousarray(arr)
        self.value = zlib.crc32(arr, self.value)
        self.f.write(arr)


def _chunks(arr, rows=False):
    """C-contiguous pieces of `arr`: flat slices, or (with rows) whole slices along axis 0
    as a 2-D (rows, rest) array for per-channel work."""
    if rows:
        flat = arr.reshape(arr.shape[0], -1)
        step = max(1, CHUNK_ELEMENTS // flat.shape[1])
        for i in range(0, flat.shape[0], step):
            yield np.ascontiguousarray(flat[i:i + step])
    else:
        flat = arr.reshape(-1)
        for i in range(0, flat.shape[0], CHUNK_ELEMENTS):
            yield np.ascontiguousarray(flat[i:i + CHUNK_ELEMENTS])


def _emit(e, out, bar):
    s = e.src
    arr = s.load()
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    where = "tensor %r in %s" % (s.name, s.origin)
    if getattr(s, "scales", None) is not None:  # int8 codes already
        sc = np.asarray(s.scales[0], dtype=np.float64)
        if not (np.isfinite(sc) & (sc > 0)).all():
            raise PackError("%s: its per-channel scales are not all finite and > 0" % where)
        out(arr.astype(np.int8))
        _advance(bar, arr)
        return None
    if e.quant == QUANT_TENSOR:
        return _emit_int8_tensor(e, arr, out, bar, where)
    if e.quant == QUANT_CHANNEL:
        return _emit_int8_channel(e, arr, out, bar, where)
    target = NUMPY_DTYPES[e.dtype]
    error = 0.0 if (e.dtype == "f16" and s.dtype != "float16") else None
    for c in _chunks(arr):
        if s.dtype in _FLOATS:
            x = _as_float(c, s.dtype, where)
            if not getattr(e, "allow_nonfinite", True):
                _refuse_nonfinite(x, where)
            y = x.astype(target, copy=False)
            if y is not x:
                if not np.isfinite(y).all() and (np.isfinite(y) != np.isfinite(x)).any():
                    raise PackError("%s: a value is outside the %s range" % (where, e.dtype))
                if error is not None:
                    error = max(error, float(np.max(np.abs(y.astype(np.float32) - x), initial=0.0)))
        elif s.dtype == "int64":
            if c.size and (c.min() < _INT32_MIN or c.max() > _INT32_MAX):
                raise PackError("%s: int64 values do not fit in int32" % where)
            y = c.astype(target)
        else:
            y = c.astype(target, copy=False)
        out(y)
        _advance(bar, c)
    return error


def _as_float(c, dtype, where):
    """A chunk of any float source as the float32 values that get stored (f64 range-checked)."""
    if dtype == "bfloat16":
        return (c.astype("<u4") << 16).view("<f4")
    if dtype == "float64":
        x = c.astype(np.float32)
        if not np.isfinite(x).all() and (np.isfinite(x) != np.isfinite(c)).any():
            raise PackError("%s: a float64 value is outside the float32 range" % where)
        return x
    return c.astype("<f4", copy=False)


def _advance(bar, c):
    if bar is not None:
        bar.update(c.nbytes)


def _refuse_nonfinite(x, where):
    """PackError when a float chunk holds NaN or +-Inf (pack refuses them by default)."""
    ok = np.isfinite(x)
    if not ok.all():
        bad = x[~ok]
        raise PackError("%s: %d NaN and %d Inf values; pack refuses non-finite weights (a model "
                        "computes NaN from them): fix the model, or add --allow-nonfinite to store "
                        "them as they are" % (where, int(np.isnan(bad).sum()), int(np.isinf(bad).sum())))


def _check_finite(m, where):
    if not np.all(np.isfinite(m)):
        raise PackError("%s: NaN or Inf values cannot be quantized to int8" % where)


def _quantize(x, scale):
    """int8 codes of x (symmetric) and the max abs error of the dequantized values."""
    y = x / scale
    np.rint(y, out=y)
    np.clip(y, -127, 127, out=y)
    q = y.astype(np.int8)
    np.multiply(y, scale, out=y)
    np.subtract(x, y, out=y)
    return q, float(np.max(np.abs(y, out=y), initial=0.0))


def _emit_int8_tensor(e, arr, out, bar, where):
    m = 0.0
    for c in _chunks(arr):
        x = _as_float(c, e.src.dtype, where)
        cm = float(np.max(np.abs(x), initial=0.0))  # NaN propagates through max
        _check_finite(cm, where)
        m = max(m, cm)
    scale = np.float32(m / 127.0) if m > 0 else np.float32(1.0)
    e.scale = float(scale)
    error = 0.0
    for c in _chunks(arr):
        q, err = _quantize(_as_float(c, e.src.dtype, where), scale)
        error = max(error, err)
        out(q)
        _advance(bar, c)
    return error


def _emit_int8_channel(e, arr, out, bar, where):
    rowmax = []
    for c in _chunks(arr, rows=True):
        m = np.max(np.abs(_as_float(c, e.src.dtype, where)), axis=1)
        _check_finite(m, where)
        rowmax.append(m)
    m = np.concatenate(rowmax)
    scales = np.where(m > 0, m / np.float32(127.0), np.float32(1.0)).astype("<f4")
    e.scales = scales
    error = 0.0
    row = 0
    for c in _chunks(arr, rows=True):
        n = c.shape[0]
        q, err = _quantize(_as_float(c, e.src.dtype, where), scales[row:row + n, None])
        row += n
        error = max(error, err)
        out(q)
        _advance(bar, c)
    return error
