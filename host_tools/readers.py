"""Input readers: safetensors, PyTorch state_dict, NumPy .npz/.npy, ONNX initializers.

Each reader lists `Source`s (name, shape, dtype) without reading tensor data; `Source.load()`
returns one tensor as a numpy array (memory-mapped where the format allows). bfloat16 tensors
are returned as their raw uint16 bits (numpy has no bfloat16) and converted while packing.
The reader is chosen by the file's first bytes, not by its extension."""
import json
import os
import re
import stat
import struct
import warnings
import zipfile

import numpy as np

from .atomic import kind as _kind
from .container import PackError

# dtype names used by Source.dtype: numpy's names plus "bfloat16".
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                       "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
                       "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
                       "BOOL": "bool"}


class Source:
    def __init__(self, name, shape, dtype, origin, load):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.origin = origin
        self._load = load

    def load(self):
        try:
            arr = self._load()
        except PackError:
            raise
        except Exception as e:
            raise PackError("tensor %r in %s: cannot read its data: %s" % (self.name, self.origin, _first_line(e)))
        if self.dtype == "bfloat16" and arr.dtype != np.uint16:
            arr = arr.view(np.uint16)
        if tuple(arr.shape) != self.shape:
            raise PackError("tensor %r in %s: data has shape %s, header says %s"
                            % (self.name, self.origin, tuple(arr.shape), self.shape))
        return arr


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _first_line(e):
    text = _ANSI.sub("", str(e)).strip() or type(e).__name__
    return text.splitlines()[0]


class Sources(list):
    """A reader's Sources, with `notes`: one-line remarks for the user (what a checkpoint held
    besides the model's weights), printed by the CLI."""

    notes = ()


def check_input(path):
    """PackError unless `path` is a regular file we can read. Checked on the opened file
    (non-blocking: opening a FIFO for reading would wait for a writer forever) before any
    reader sees it: a FIFO, a device (/dev/zero has no end) or a socket is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise PackError("%s: %s" % (path, e.strerror or e))
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise PackError("%s: input is %s, not a regular file" % (path, _kind(mode)))


def detect(path):
    """'safetensors', 'torch', 'npz', 'npy' or 'onnx', from the file's content."""
    check_input(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise PackError("%s: %s" % (path, e.strerror or e))
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= size - 8:
        return "safetensors"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except Exception as e:  # BadZipFile, OSError, and UnicodeDecodeError etc. from mangled entries
            raise PackError("%s: corrupt zip archive: %s" % (path, e))
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return "torch"
        if names and all(n.endswith(".npy") for n in names):
            return "npz"
        raise PackError("%s: zip archive is neither a torch.save file nor a .npz" % path)
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "torch"  # legacy (pre-zip) torch.save: a pickle stream
    if head[:1] == b"\x08":
        return "onnx"  # ModelProto starts with field 1 (ir_version, a varint)
    if head[4:8] == b"TFL3":
        return "tflite"  # the flatbuffer's file identifier
    raise PackError("%s: unrecognised input format (expected onnx, tflite, safetensors, torch, npz or npy)" % path)


_WHAT = {"torch": "a torch.save file", "onnx": "an ONNX model", "tflite": "a .tflite model",
         "safetensors": "a safetensors file"}


def load_arrays(path, flag):
    """np.load of a .npy or .npz the user gives with `flag` (--calibrate, --input); anything else
    is refused in one line naming what it is (numpy would speak of pickles)."""
    check_input(path)
    if head(path, flag).startswith(b"MPYL"):
        kind = "container"
    else:
        try:
            kind = detect(path)
        except PackError:
            kind = None
    if kind not in ("npy", "npz"):
        raise PackError("%s %s: %s, not a .npy or .npz of numbers (numpy.save(\"x.npy\", array) writes one)"
                        % (flag, path, "an mpy-lazy container" if kind == "container" else
                           _WHAT.get(kind, "not a numpy file")))
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise PackError("%s %s: %s" % (flag, path, _first_line(e)))


def head(path, flag, n=8):
    """The first n bytes of a file; PackError naming `flag` if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError as e:
        raise PackError("%s %s: %s" % (flag, path, e.strerror or e))


def read(path):
    kind = detect(path)
    if kind == "tflite":
        raise PackError("%s: a .tflite model packs as a model (no --weights-only)" % path)
    return {"safetensors": read_safetensors, "torch": read_torch, "npz": read_npz,
            "npy": read_npy, "onnx": read_onnx}[kind](path)


def read_safetensors(path):
    from safetensors import safe_open

    origin = os.path.basename(path)
    try:  # safe_open validates the header (offsets in range, no overlaps) before we trust it
        with safe_open(path, framework="numpy") as f:
            names = list(f.keys())
    except Exception as e:
        raise PackError("%s: not a valid safetensors file: %s" % (path, _first_line(e)))
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    # Map each tensor on its own, only while it is packed: safe_open's numpy get_tensor copies
    # (twice the tensor in RAM) and cannot return bfloat16, and one map of the whole file would
    # keep every page read so far resident.
    sources = []
    for name in names:
        info = header[name]
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"])
        begin, end = info["data_offsets"]
        shape = info["shape"]

        def load(name=name, begin=begin, end=end, dtype=dtype, shape=shape):
            np_dtype = np.dtype(np.uint16 if dtype == "bfloat16" else dtype).newbyteorder("<")
            if end - begin != np_dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise PackError("%s: tensor %r: byte range does not match its shape" % (path, name))
            return np.memmap(path, dtype=np_dtype, mode="r", offset=8 + n + begin, shape=tuple(shape))

        sources.append(Source(name, shape, dtype, origin, load))
    return sources


# keys under which checkpoints keep the model's state_dict (plain torch, the PyTorch tutorials,
# Lightning, common training scripts); the first that holds tensors is packed, alone
_MODEL_KEYS = ("state_dict", "model_state_dict", "model", "model_state", "net", "network", "module")


def _is_optimizer_state(d):
    return isinstance(d, dict) and "state" in d and "param_groups" in d


def _count_tensors(x):
    import torch

    if isinstance(x, torch.Tensor):
        return 1
    if isinstance(x, dict):
        return sum(_count_tensors(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_count_tensors(v) for v in x)
    return 0


def _unpickle_error(path, e):
    """The one-line message for a torch file weights_only loading refuses: a pickled object."""
    text = _ANSI.sub("", str(e))
    m = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if m and m.group(1).startswith("torch.nn."):
        return ("%s: holds a pickled model object (%s, from torch.save(model)), not a state_dict; "
                "mpy-lazy does not unpickle objects (that could run code): save the weights with "
                "torch.save(model.state_dict(), %r) and pack that file"
                % (path, m.group(1).rsplit(".", 1)[-1], os.path.basename(path)))
    if m or "Weights only load failed" in text:
        what = " (%s)" % m.group(1) if m else ""
        return ("%s: holds pickled Python objects%s besides tensors; mpy-lazy loads tensors only "
                "(unpickling objects could run code): save model.state_dict() with torch.save and "
                "pack that file" % (path, what))
    return "%s: cannot load torch file: %s" % (path, _first_line(e))


def read_torch(path):
    import torch

    origin = os.path.basename(path)
    try:
        with warnings.catch_warnings():  # e.g. "pickle protocol 4": the error (or none) says enough
            warnings.simplefilter("ignore")
            try:  # mmap needs the zip format; legacy files load fully
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception:
                obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise PackError(_unpickle_error(path, e))
    sources = Sources()

    def walk(d, prefix):
        for key, value in d.items():
            name = prefix + str(key)
            if isinstance(value, torch.Tensor):
                sources.append(_torch_source(name, value, origin))
            elif isinstance(value, dict) and not _is_optimizer_state(value):
                walk(value, name + ".")
            # other entries of a checkpoint (epoch, optimizer hyper-parameters) are not weights

    if isinstance(obj, torch.Tensor):
        sources.append(_torch_source(os.path.splitext(origin)[0], obj, origin))
    elif isinstance(obj, dict):
        model = None
        for key in _MODEL_KEYS:
            if isinstance(obj.get(key), dict) and _count_tensors(obj[key]):
                model = key
                break
        if model is not None:  # a checkpoint: the model's state_dict, nothing else
            walk(obj[model], "")
            left = [k for k in obj if k != model]
        else:
            walk(obj, "")
            left = [k for k in obj if _is_optimizer_state(obj[k])  # what walk() skips that holds tensors
                    or (isinstance(obj[k], (list, tuple)) and _count_tensors(obj[k]))]
        if left:
            parts = []
            for k in left:
                n = _count_tensors(obj[k])
                kind = " optimizer state" if _is_optimizer_state(obj[k]) or str(k).startswith("optimizer") else ""
                parts.append("%r (%d%s tensor%s)" % (k, n, kind, "" if n == 1 else "s") if n else repr(k))
            sources.notes = ["%s: a training checkpoint: packed %s (%d tensor%s), left out %s"
                             % (origin, "its %r entry" % model if model else "the model's weights",
                                len(sources), "" if len(sources) == 1 else "s", ", ".join(parts))]
    if not sources:
        raise PackError("%s: no tensors found (expected a state_dict)" % path)
    return sources


def _torch_source(name, t, origin):
    import torch

    if t.layout != torch.strided or t.is_quantized:
        dtype = "%s %s" % (t.layout, t.dtype)
    else:
        dtype = str(t.dtype).replace("torch.", "")

    def load():
        x = t.detach().contiguous()
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(np.uint16)
        return x.numpy()

    return Source(name, tuple(t.shape), dtype, origin, load)


def read_npz(path):
    origin = os.path.basename(path)
    try:
        npz = np.load(path, allow_pickle=False)
        sources = []
        for member in npz.zip.namelist():
            with npz.zip.open(member) as m:
                version = np.lib.format.read_magic(m)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _fortran, dtype = read_header(m)
                stored = npz.zip.getinfo(member).file_size - m.tell()
            claimed = dtype.itemsize * int(np.prod(shape, dtype=object))
            if dtype.kind != "O" and claimed > stored:  # before numpy allocates what the header claims
                raise PackError("%s: member %s: its header claims %d bytes of data, it holds %d"
                                % (path, member, claimed, stored))
            key = member[:-4]
            sources.append(Source(key, shape, _numpy_dtype_name(dtype), origin,
                                  lambda key=key: npz[key]))
    except PackError:
        raise
    except Exception as e:
        raise PackError("%s: not a valid .npz file: %s" % (path, _first_line(e)))
    return sources


def read_npy(path):
    origin = os.path.basename(path)
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as e:
        raise PackError("%s: not a valid .npy file: %s" % (path, _first_line(e)))
    name = os.path.splitext(origin)[0]
    return [Source(name, arr.shape, _numpy_dtype_name(arr.dtype), origin, lambda: arr)]


def _numpy_dtype_name(dtype):
    return "bfloat16" if dtype.name == "bfloat16" else (dtype.name if dtype.kind != "V" else str(dtype))


def read_onnx(path):
    import onnx
    from onnx import helper, numpy_helper

    origin = os.path.basename(path)
    try:  # external data is read per tensor by numpy_helper.to_array(base_dir=...)
        model = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise PackError("%s: not a valid ONNX model: %s" % (path, _first_line(e)))
    base_dir = os.path.dirname(os.path.abspath(path))
    sources = []
    for init in model.graph.initializer:
        if init.data_type == onnx.TensorProto.BFLOAT16:
            dtype = "bfloat16"
        else:
            try:
                dtype = _numpy_dtype_name(np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)))
            except Exception:
                dtype = onnx.TensorProto.DataType.Name(init.data_type).lower()
        if init.data_location == onnx.TensorProto.EXTERNAL:
            _bound_external(path, init, dtype)
        sources.append(Source(init.name, tuple(init.dims), dtype, origin,
                              lambda init=init: numpy_helper.to_array(init, base_dir=base_dir)))
    if not sources:
        raise PackError("%s: the ONNX graph has no initializers (no weights to pack)" % path)
    return sources


def _bound_external(path, init, dtype):
    """Make onnx read exactly the tensor's declared size of external data: a missing `length`
    is set to it (onnx would read the file to its end: a 32-byte tensor over a 1 GiB file read
    1 GiB), a different one refused; the data file must be a regular file."""
    info = {e.key: e.value for e in init.external_data}
    itemsize = 2 if dtype == "bfloat16" else (np.dtype(dtype).itemsize if dtype in np.sctypeDict else 0)
    want = int(np.prod(init.dims, dtype=object)) * itemsize
    where = "%s: tensor %r: external data" % (path, init.name)
    if not itemsize:
        return  # an unsupported dtype: refused by name when planned, never read
    if "length" not in info:
        entry = init.external_data.add()
        entry.key, entry.value = "length", str(want)
    else:
        try:
            length = int(info["length"])
        except ValueError:
            raise PackError("%s: length %r is not a number" % (where, info["length"]))
        if length != want:
            raise PackError("%s: length %d, but %s%s takes %d bytes" % (where, length, dtype, list(init.dims), want))
    location = info.get("location", "")
    data = os.path.join(os.path.dirname(os.path.abspath(path)), location)
    if location and os.path.exists(data):
        check_input(data)
