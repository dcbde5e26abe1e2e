"""Regenerate the golden containers in tests/golden/ (the only way they are made).

    python tests/golden/make_golden.py          # rewrite tests/golden/*.mpyl and *.json
    python tests/golden/make_golden.py --check  # exit 1 if the packer's output drifted

Inputs are defined here, written to a temp dir under fixed names and packed with the real CLI;
metadata is deterministic (tool_version is pinned with --meta). Each <name>.json lists the
header fields, every tensor's table fields and its values (flat, row-major): `values` as stored
(int8 codes, f16 decoded) and `real` (dequantized). Host and runtime tests both read them."""
import json
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

TOOL_VERSION = "golden"
HEADER_FIELDS = ("magic", "version_major", "version_minor", "entry_size", "flags", "file_size",
                 "alignment", "tensor_count", "table_offset", "meta_count", "meta_offset",
                 "strings_offset", "strings_size", "data_offset", "data_size", "header_crc")
DTYPE_NAMES = {1: "f32", 2: "f16", 3: "i8", 4: "u8", 5: "i16", 6: "u16", 7: "i32", 8: "u32"}
SOURCE_NAMES = dict(DTYPE_NAMES)
SOURCE_NAMES.update({9: "f64", 10: "bf16", 11: "i64", 12: "bool", 0: None})
NUMPY = {"f32": "<f4", "f16": "<f2", "i8": "i1", "u8": "u1", "i16": "<i2", "u16": "<u2",
         "i32": "<i4", "u32": "<u4"}


def f32(*rows):
    return np.array(rows, dtype=np.float32)


# name -> (input file name, {tensor: array}, extra pack arguments)
GOLDEN = {
    "tiny": ("tiny.safetensors", {
        "fc.weight": f32([0.5, -1.25, 2.0, 0.0], [1.5, 3.0, -0.75, 0.25], [-2.0, 0.125, 1.0, -0.5]),
        "fc.bias": f32(0.1, -0.2, 0.3),
        "temperature": np.array(2.5, dtype=np.float32),
    }, []),
    "f16": ("f16.safetensors", {
        "fc.weight": f32([0.1, -0.2, 0.3], [1000.5, -3.14159, 1e-3]),
        "fc.bias": f32(0.5, -65504.0),
    }, ["--quantize", "f16"]),
    "int8": ("int8.safetensors", {
        "fc.weight": f32([0.5, -1.0, 0.25], [0.0, 0.75, -0.3], [1.27, -0.01, 0.6], [0.2, 0.4, -0.8]),
        "fc.bias": f32(0.1, 0.2, -0.3, 0.4),
    }, ["--quantize", "int8"]),
    "int8_channel": ("int8_channel.safetensors", {
        "fc.weight": f32([0.5, -1.0, 0.25, 0.125], [0.0, 0.0, 0.0, 0.0], [12.7, -3.0, 0.6, 5.5]),
        "fc.bias": f32(1.0, -1.0, 0.5),
        "conv.weight": np.linspace(-1.0, 2.0, 8, dtype=np.float32).reshape(2, 1, 2, 2),
    }, ["--quantize", "int8-channel"]),
    "align64": ("align64.safetensors", {
        "a": f32(1.0, 2.0, 3.0),
        "b": np.arange(25, dtype=np.float64).reshape(5, 5) / 4,  # packed as f32, source f64
        "c": np.array([7, -8, 9], dtype=np.int32),
    }, ["--align", "64"]),
    "ints": ("ints.npz", {
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "u8": np.array([0, 1, 254, 255], dtype=np.uint8),
        "i16": np.array([[-32768, -2], [3, 32767]], dtype=np.int16),
        "u16": np.array([0, 1, 65535], dtype=np.uint16),
        "i32": np.array([-2147483648, -5, 6, 2147483647], dtype=np.int32),
        "u32": np.array([0, 7, 4294967295], dtype=np.uint32),
        "i64": np.array([[-3, 4], [5, -6]], dtype=np.int64),  # packed as i32, source i64
        "flags": np.array([True, False, True], dtype=bool),  # packed as u8, source bool
        "count": np.array(42, dtype=np.int32),
    }, []),
}


# --- containers with a model: a graph description (--graph) or an old `layers` chain --------
# Tiny on purpose (a few hundred bytes of weights): tests/runtime computes their outputs with
# plain Python from the .json values and compares what mpy_lazy.model runs.

def _ramp(n, mul, mod, off, dtype):
    """Deterministic integers ((i * mul) % mod - off), no RNG: the same on every numpy."""
    return ((np.arange(n, dtype=np.int64) * mul) % mod - off).astype(dtype)


def _quantize_multiplier(real):
    """TFLite's QuantizeMultiplier: real = m * 2**(shift - 31), m in [2**30, 2**31)."""
    import math

    m, e = math.frexp(real)
    q = int(round(m * (1 << 31)))
    if q == 1 << 31:
        q, e = q // 2, e + 1
    return q, e


def _requant(s_in, w_scales, s_out):
    """The [2, out] int32 `m` tensor of an int8 conv/linear: multipliers, then shifts."""
    pairs = [_quantize_multiplier(s_in * s / s_out) for s in w_scales]
    return np.array([[p[0] for p in pairs], [p[1] for p in pairs]], dtype=np.int32)


GRAPH_INT8 = """input y=x shape=4,4,2 dtype=i8 q=0.05,-3
conv2d x=x y=c w=conv.w b=conv.b m=conv.m out=3 k=3 stride=2 pad=1 q=0.1,5 clamp=-123,127
linear x=c y=o w=fc.w b=fc.b m=fc.m out=4 wl=oi q=0.2,-10
output x=o"""

GRAPH_FLOAT = """input y=x shape=5,5,2 layout=chw
conv2d x=x y=c w=conv.w b=conv.b out=3 k=3 pad=1 wl=oihw act=relu
depthwise x=c y=d w=dw.w b=dw.b k=3 pad=1
add x=c,d y=s
maxpool x=s y=p k=2
reshape x=p y=f shape=-1 order=chw
linear x=f y=o w=fc.w b=fc.b out=4 wl=io
softmax x=o y=out
output x=out"""

LAYERS = """input shape=1,5,5
conv2d w=c.w b=c.b in=1 out=2 k=3 stride=1 pad=1
relu
maxpool k=2
flatten
linear w=fc.w b=fc.b in=8 out=3
softmax"""

_FLOAT_GRAPH_TENSORS = {
    "conv.w": (np.linspace(-1.0, 1.0, 54, dtype=np.float32) * np.float32(0.7)).reshape(3, 2, 3, 3)[:, :, ::-1, :].copy(),
    "conv.b": f32(0.1, -0.2, 0.05),
    "dw.w": np.cos(np.arange(27, dtype=np.float32)).astype(np.float32).reshape(1, 3, 3, 3),
    "dw.b": f32(-0.1, 0.0, 0.3),
    "fc.w": (np.sin(np.arange(48, dtype=np.float32) * 0.7) * 0.5).astype(np.float32).reshape(12, 4),
    "fc.b": f32(0.01, -0.02, 0.03, -0.04),
}

# name -> (input file name, {tensor: array}, extra pack arguments), as GOLDEN; the graph
# description of each is in GRAPHS (packed with --graph)
MODELS = {
    "graph_int8": ("graph_int8.npz", {
        "conv.w": _ramp(54, 37, 255, 127, np.int8).reshape(3, 3, 3, 2),  # ohwi
        "conv.b": np.array([1000, -2000, 300], dtype=np.int32),
        "conv.m": _requant(0.05, (0.01, 0.02, 0.005), 0.1),
        "fc.w": _ramp(48, 53, 256, 128, np.int8).reshape(4, 12),
        "fc.b": np.array([-500, 0, 250, 7000], dtype=np.int32),
        "fc.m": _requant(0.1, (0.004, 0.003, 0.009, 0.001), 0.2),
    }, []),
    "graph_f32": ("graph_f32.npz", _FLOAT_GRAPH_TENSORS, []),
    "graph_f16": ("graph_f16.npz", _FLOAT_GRAPH_TENSORS, ["--quantize", "f16"]),
    "layers": ("layers.npz", {
        "c.w": np.linspace(-0.9, 1.1, 18, dtype=np.float32).reshape(2, 1, 3, 3),
        "c.b": f32(0.05, -0.1),
        "fc.w": (np.cos(np.arange(24, dtype=np.float32)) * 0.8).astype(np.float32).reshape(3, 8),
        "fc.b": f32(0.2, -0.1, 0.0),
    }, ["--meta", "layers=" + LAYERS]),
}
GRAPHS = {"graph_int8": GRAPH_INT8, "graph_f32": GRAPH_FLOAT, "graph_f16": GRAPH_FLOAT}
GOLDEN.update(MODELS)


def write_input(path, tensors):
    if path.endswith(".npz"):
        np.savez(path, **tensors)
    else:
        from safetensors.numpy import save_file

        save_file(tensors, path)


def describe(data):
    """The JSON description of a container, decoded field by field from its bytes."""
    h = dict(zip(HEADER_FIELDS, struct.unpack_from("<4sBBHIIIIIIIIIII8xI", data, 0)))
    h["magic"] = h["magic"].decode()
    strings = data[h["strings_offset"]:h["strings_offset"] + h["strings_size"]]
    meta = {}
    for i in range(h["meta_count"]):
        ko, kl, vo, vl = struct.unpack_from("<IIII", data, h["meta_offset"] + 16 * i)
        meta[strings[ko:ko + kl].decode()] = strings[vo:vo + vl].decode()
    raw = []
    for i in range(h["tensor_count"]):
        f = struct.unpack_from("<IHBB4IIIIBBHfiIB11x", data, h["table_offset"] + h["entry_size"] * i)
        raw.append(f)
    names = [strings[f[0]:f[0] + f[1]].decode() for f in raw]
    tensors = []
    for i, f in enumerate(raw):
        dtype, ndim = DTYPE_NAMES[f[2]], f[3]
        shape = list(f[4:4 + ndim])
        offset, nbytes, crc, quant, axis, flags, scale, zp, scales_index, source = f[8:]
        values = np.frombuffer(data, NUMPY[dtype], count=int(np.prod(shape)), offset=offset)
        real = values.astype(np.float64)
        if quant == 1:
            real = scale * (real - zp)
        elif quant == 2:
            s = raw[scales_index]
            scales = np.frombuffer(data, "<f4", count=s[4], offset=s[8]).astype(np.float64)
            real = (real.reshape(shape[0], -1) * scales[:, None]).reshape(-1)
        tensors.append({
            "index": i, "name": names[i], "dtype": dtype, "shape": shape, "offset": offset,
            "nbytes": nbytes, "crc": crc, "quant": quant, "axis": axis, "flags": flags,
            "aux": bool(flags & 1), "scale": scale, "zero_point": zp,
            "scales_index": None if scales_index == 0xFFFFFFFF else scales_index,
            "scales": names[scales_index] if quant == 2 else None,
            "source_dtype": SOURCE_NAMES[source],
            "values": [v.item() for v in values], "real": [float(v) for v in real],
        })
    return {"header": h, "meta": meta, "tensors": tensors}


def build(out_dir):
    """Pack every golden container into out_dir (with its .json); returns the file names."""
    from host_tools.cli import main

    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (input_name, tensors, args) in GOLDEN.items():
            src = os.path.join(tmp, input_name)
            write_input(src, tensors)
            if name in GRAPHS:
                with open(os.path.join(tmp, name + ".graph"), "w") as f:
                    f.write(GRAPHS[name] + "\n")
                args = args + ["--graph", name + ".graph"]
            out = os.path.join(out_dir, name + ".mpyl")
            cwd = os.getcwd()
            os.chdir(tmp)  # relative input path: `source` metadata holds just the file name
            try:
                rc = main(["pack", input_name, "-o", out, "-q", "--meta",
                           "tool_version=" + TOOL_VERSION] + args)
            finally:
                os.chdir(cwd)
            if rc != 0:
                raise SystemExit("packing %s failed" % name)
            with open(out, "rb") as f:
                desc = describe(f.read())
            with open(os.path.join(out_dir, name + ".json"), "w") as f:
                json.dump(desc, f, indent=1)
                f.write("\n")
            made += [name + ".mpyl", name + ".json"]
    return made


def main(argv):
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            drifted = []
            for fname in build(tmp):
                with open(os.path.join(tmp, fname), "rb") as a, open(os.path.join(HERE, fname), "rb") as b:
                    if a.read() != b.read():
                        drifted.append(fname)
        if drifted:
            print("golden files drifted: %s" % ", ".join(drifted))
            return 1
        print("golden files match")
        return 0
    for fname in build(HERE):
        print("wrote tests/golden/" + fname)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
