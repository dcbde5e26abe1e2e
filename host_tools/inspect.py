"""`mpy-lazy inspect` and `mpy-lazy verify`, both through the runtime's reader (mpy_lazy.open):
one reader for host and board."""
import json
import mmap
import os

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
    except (KeyError, mpy_lazy.ContainerError) as e:
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


def inspect(path, as_json=False, values=None):
    c, buf = open_container(path)
    rows = [_row(i) for i in tensor_infos(c)]
    size = len(buf)
    data_bytes = sum(r["nbytes"] for r in rows)
    report = {"file": os.path.basename(path), "file_size": size,
              "alignment": c.alignment, "meta": dict(c.meta), "tensors": rows,
              "totals": {"tensors": len(rows), "params": len(c.names()), "data_bytes": data_bytes,
                         "overhead_bytes": size - data_bytes}}
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
        print("meta %s = %s" % (key, value))
    for v in report.get("values", ()):
        print("values %s %s: %s" % (v["name"], v["shape"], v["values"]))
        print("real   %s %s: %s" % (v["name"], v["shape"], v["real"]))
    return 0


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
