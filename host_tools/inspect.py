"""`mpy-lazy inspect` and `mpy-lazy verify`, both through the runtime's reader (mpy_lazy.open):
one reader for host and board."""
import json
import mmap
import os

from mpy_lazy.kinds import KINDS

from .container import PackError

DTYPE_SIZE = {"f32": 4, "f16": 2, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4}
QUANT_NAMES = {0: "", 1: "int8/tensor", 2: "int8/channel"}


def open_container(path):
    """(container, buffer) for a file, memory-mapped read-only; ContainerError -> PackError."""
    import mpy_lazy

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as e:
        raise PackError("%s: %s" % (path, e.strerror or e))
    try:
        return mpy_lazy.open(memoryview(buf) if size else buf), buf
    except mpy_lazy.ContainerError as e:
        raise PackError("%s: %s" % (path, e))


def tensor_infos(c):
    """Every tensor's info in table order, the AUX scale tensors included."""
    return [c.info(name) for name in c.names(aux=True)]


def _row(info):
    return {"index": info.index, "name": info.name, "dtype": info.dtype, "shape": list(info.shape),
            "offset": info.offset, "nbytes": info.nbytes, "crc": info.crc, "quant": info.quant,
            "axis": info.axis, "scale": info.scale, "zero_point": info.zero_point,
            "scales": info.scales, "aux": info.aux, "source_dtype": info.source_dtype}


def _values(c, name):
    import mpy_lazy

    try:
        v = c.view(name)
    except KeyError:
        import difflib

        names = c.names(aux=True)
        near = difflib.get_close_matches(name, names, 3)
        hint = "did you mean %s?" % " or ".join(map(repr, near)) if near else \
            "it holds %s" % ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        raise PackError("--values %s: no tensor of that name in the container; %s (`mpy-lazy inspect` lists all %d)"
                        % (name, hint, len(names)))
    except mpy_lazy.ContainerError as e:
        raise PackError("--values %s: %s" % (name, e))
    return {"name": name, "shape": list(v.shape), "values": _flat(v.tolist()),
            "real": [v.real(i) for i in range(v.size)]}


def _flat(x):
    if isinstance(x, (list, tuple)):
        out = []
        for item in x:
            out += _flat(item)
        return out
    return [x]


# Heap a model's objects take on a 32-bit MicroPython board besides its arena and scratch: the
# container object, the op and value objects, the Params bound to flash views, each op's kernel
# parameter array. A least-squares fit over 21 models measured on the emulated Cortex-M3
# (firmware/measure_heap.py --board MPS2_AN385 --fit; docs/FIRMWARE.md): within 23% of every
# measured figure, an estimate, not a bound. On the ulab path a linear op with f16 weights
# decodes them to RAM once (4 bytes per weight), counted apart.
HEAP_BASE = 904
HEAP_PER_OP = 358
HEAP_PER_TENSOR = 148
# A container with a stored program (what `mpy-lazy pack` writes since 0.3: the ops' parameters
# are read from flash) keeps a few objects whatever its size: the Program, its views, and the
# kernel table of its record kinds (kernels.table: one word per kind the runtime has, kept for
# the kernel path). Measured on the emulated M3 (firmware/measure_heap.py --board MPS2_AN385,
# every room imported first, 2026-11-28, KINDS 115): 976-1024 bytes for every int8 model from
# graph_int8 to ResNet-8 (1,140 for VWW), 1,136-1,648 with float values (their views of the
# arena and program); the elementwise kernels no longer add any. The table grows with the
# runtime's kinds: 4 bytes each (it was 60 kinds, and 600 bytes in all, on 2026-11-26).
HEAP_PROGRAM = 540 + 4 * KINDS
HEAP_PROGRAM_FLOAT = 400
# Loading needs more free heap than the model then keeps: open, declare and load make garbage,
# the float (ulab) path makes temporaries, and the arena is one block allocated last. The least
# free heap that loaded and ran each model (same script, --min-free; 9 models on the emulated
# M3, 2026-11-24) lies under 1.8x what it keeps + 6 KB (the large models need up to 1.62x +
# 6 KB, the small ones a fixed margin more than a ratio): "free" is that envelope.
LOAD_FACTOR = 1.8
LOAD_BASE = 6144
# A stored program: checking it (mpy_lazy/check.py, every record against the container) makes
# temporaries after the arena is allocated; the least free heap (measure_heap.py --min-free on
# the emulated Pico, 2026-11-26, blocks filling the rest of the heap) was graph_int8 4.6 KB for
# 0.7 KB kept, ops_float_io 20.2 KB for 5.7 KB, kws 30.6 KB for 10.6 KB, vww 120.7 KB for 46.9 KB
LOAD_FACTOR_PROGRAM = 2.5
LOAD_BASE_PROGRAM = 8192


def _q(v):
    return None if v.q is None else [v.q[0], v.q[1]]


def graph_report(c):
    """For a container with a graph (or an old `layers` chain): the model as the runtime
    declares it on the host (mpy_lazy.model.declare: the board's own parser and checks), its
    op table, the arena and scratch it plans, and the heap a board needs free for it. None for
    weights only; {'error': message} when the description does not declare."""
    import mpy_lazy
    from mpy_lazy import model as _model, program as _program

    meta = dict(c.meta)
    if "graph" not in meta and "layers" not in meta:
        return None
    try:
        m = _model.declare(c)
        m.load(c)  # binds every weight (views, no copy): a missing or misshapen tensor fails here
        mem = m.memory()
    except mpy_lazy.ContainerError as e:
        return {"error": str(e)}
    names = m.names()
    ops = []
    for i, op in enumerate(m.ops):
        y = op.y
        weights = [names["ops.%d.%s" % (i, a)] for a in ("weight", "bias", "requant", "table")
                   if "ops.%d.%s" % (i, a) in names]
        ops.append({"index": i, "op": op.name, "inputs": [v.name for v in op.x], "output": y.name,
                    "shape": list(y.shape), "dtype": y.dtype, "q": _q(y), "macs": getattr(op, "macs", 0),
                    "weights": weights})
    text = meta.get("graph") or ""
    counts = {"ops_count": len(m.ops), "values_count": len(m.values), "params_count": len(names),
              "text_bytes": len(text.encode("utf-8"))}
    f16 = 0
    for op in ops:
        if op["op"] == "linear":
            for t in op["weights"]:
                info = c.info(t)
                if info.dtype == "f16":
                    f16 += 2 * info.nbytes
    stored = _program.NAME in c and tuple(c.version) >= (1, 2)  # (model.from_container runs it)
    if stored:
        objects = HEAP_PROGRAM
        if any(v.dtype == "f32" for v in m.values):
            objects += HEAP_PROGRAM_FLOAT
    else:  # declared and compiled in RAM: objects per op and per bound tensor
        objects = HEAP_BASE + HEAP_PER_OP * counts["ops_count"] + HEAP_PER_TENSOR * counts["params_count"]
    kept = mem["arena"] + mem["scratch"] + objects + f16
    return dict(counts, **{
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype, "q": _q(v), "layout": lay}
                   for v, lay in zip(m.inputs, m.layouts)],
        "outputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype, "q": _q(v)} for v in m.outputs],
        "ops": ops, "macs": m.macs(), "arena": mem["arena"], "scratch": mem["scratch"],
        "heap": {"arena": mem["arena"], "scratch": mem["scratch"], "objects": objects, "f16_decoded": f16,
                 "kept": kept, "free": int(LOAD_FACTOR_PROGRAM * kept) + LOAD_BASE_PROGRAM if stored
                 else int(LOAD_FACTOR * kept) + LOAD_BASE, "program": stored, "estimate": True}})


def inspect(path, as_json=False, values=None):
    c, buf = open_container(path)
    rows = [_row(i) for i in tensor_infos(c)]
    size = len(buf)
    data_bytes = sum(r["nbytes"] for r in rows)
    report = {"file": os.path.basename(path), "file_size": size,
              "alignment": c.alignment, "meta": dict(c.meta), "tensors": rows,
              "totals": {"tensors": len(rows), "params": len(c.names()), "data_bytes": data_bytes,
                         "overhead_bytes": size - data_bytes}}
    report["graph"] = graph_report(c)
    if values:
        report["values"] = [_values(c, name) for name in values]
    if as_json:
        print(json.dumps(report, indent=1))
        return 0
    width = max([len(r["name"]) for r in rows] + [4])
    print("%-*s  %-5s %-16s %10s %10s  %s" % (width, "name", "dtype", "shape", "offset", "bytes", "quant"))
    for r in rows:
        quant = QUANT_NAMES[r["quant"]]
        if r["quant"] == 1:
            quant += " scale=%.6g zp=%d" % (r["scale"], r["zero_point"])
        elif r["quant"] == 2:
            quant += " axis=%d scales=%s" % (r["axis"], r["scales"])
        print("%-*s  %-5s %-16s %10d %10d  %s" % (width, r["name"], r["dtype"],
                                                   "x".join(map(str, r["shape"])) or "scalar",
                                                   r["offset"], r["nbytes"], quant))
    t = report["totals"]
    print("%d tensors (%d parameters + %d scale tensors), %d data bytes, %d bytes total "
          "(%d header/table/padding), alignment %s"
          % (t["tensors"], t["params"], t["tensors"] - t["params"], data_bytes, size,
             t["overhead_bytes"], report["alignment"]))
    for key, value in report["meta"].items():
        if key == "graph" and report["graph"] and "error" not in report["graph"]:
            value = "(%d lines: the op table below)" % len(value.strip().splitlines())
        print("meta %s = %s" % (key, value))
    _print_graph(report["graph"])
    for v in report.get("values", ()):
        print("values %s %s: %s" % (v["name"], v["shape"], v["values"]))
        print("real   %s %s: %s" % (v["name"], v["shape"], v["real"]))
    return 0


def _vtype(v):
    if v["dtype"] == "i8":
        return "i8 q=%.6g,%d" % tuple(v["q"])
    return v["dtype"]


def _print_graph(g):
    if g is None:
        print("no graph: weights only (declare the model in code and bind them with mpy_lazy.load())")
        return
    if "error" in g:
        print("graph: the runtime refuses it: %s" % g["error"])
        return
    print()
    for v in g["inputs"]:
        print("input  %s %s %s%s" % (v["name"], "x".join(map(str, v["shape"])), _vtype(v),
                                     " (layout chw)" if v["layout"] == "chw" else ""))
    rows = [(str(o["index"]), o["op"], "%s -> %s" % (",".join(o["inputs"]), o["output"]),
             "x".join(map(str, o["shape"])), _vtype(o), "{:,}".format(o["macs"]) if o["macs"] else "")
            for o in g["ops"]]
    head = ("#", "op", "inputs -> output", "shape", "dtype", "MACs")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(6)]
    fmt = "%*s  %-*s  %-*s  %-*s  %-*s  %*s"
    for r in [head] + rows:
        print((fmt % (widths[0], r[0], widths[1], r[1], widths[2], r[2], widths[3], r[3], widths[4], r[4],
                      widths[5], r[5])).rstrip())
    for v in g["outputs"]:
        print("output %s %s %s" % (v["name"], "x".join(map(str, v["shape"])), _vtype(v)))
    h = g["heap"]
    n = "{:,}".format
    print("%d ops, %s MACs per inference" % (len(g["ops"]), n(g["macs"])))
    print("arena %s bytes (activations + int8 kernel scratch, one block), float scratch %s bytes"
          % (n(h["arena"]), n(h["scratch"])))
    extra = " + f16 weights the ulab path decodes %s" % n(h["f16_decoded"]) if h["f16_decoded"] else ""
    print("heap on a 32-bit board (estimate): the model keeps ~%s bytes (arena + scratch + objects ~%s%s);"
          % (n(h["kept"]), n(h["objects"]), extra))
    stored = h["program"]
    print("  have ~%s bytes free to load it (%.1fx + %s: %s)"
          % (n(h["free"]), LOAD_FACTOR_PROGRAM if stored else LOAD_FACTOR,
             n(LOAD_BASE_PROGRAM if stored else LOAD_BASE),
             "checking the stored program makes temporaries" if stored else
             "loading makes garbage and the arena needs one block"))


def verify(path, quiet=False):
    import mpy_lazy

    c, _buf = open_container(path)
    try:
        c.verify()
    except mpy_lazy.ContainerError as e:
        raise PackError("%s: %s" % (path, e))
    if not quiet:
        n = len(tensor_infos(c))
        print("%s: OK (structure and %d tensor CRCs)" % (path, n))
    return 0
