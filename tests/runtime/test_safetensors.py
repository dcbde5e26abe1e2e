# A plain .safetensors file read in place by mpy_lazy.open() (mpy_lazy/safetensors.py): values,
# zero-copy views where aligned and reported RAM copies where not, Params and a graph model on
# it, and every hostile header refused with a ContainerError naming the field. The files are
# written here byte by byte (tests/host/test_safetensors.py checks this writer against the
# safetensors library, and the reader against files the library wrote). CPython and MicroPython.
import struct

import mpy_lazy
from mpy_lazy import ContainerError, Module, Param, load
from rt_util import IS_MICROPYTHON, Lcg, raises, small_board

FMT = {"F32": "f", "F16": "e", "I8": "b", "U8": "B", "I16": "h", "U16": "H", "I32": "i", "U32": "I",
       "F64": "d", "I64": "q"}
SIZE = {"F32": 4, "F16": 2, "I8": 1, "U8": 1, "I16": 2, "U16": 2, "I32": 4, "U32": 4, "F64": 8, "I64": 8,
        "BF16": 2}


def quote(s):
    out = '"'
    for ch in s:
        if ch in '"\\':
            out += "\\" + ch
        elif ord(ch) < 0x20:
            out += "\\u%04x" % ord(ch)
        else:
            out += ch
    return out + '"'


def build(tensors, meta=None, pad=8, lead=0):
    """safetensors bytes of tensors [(name, dtype, shape, values)], in the library's layout:
    data sorted by dtype size (largest first) then name, header padded with spaces so the
    data starts at a multiple of `pad` (pad=1: no padding), `lead` extra spaces before that."""
    order = sorted(tensors, key=lambda t: (-SIZE[t[1]], t[0]))
    data = b""
    entries = []
    for name, dtype, shape, vals in order:
        raw = struct.pack("<%d%s" % (len(vals), FMT[dtype]), *vals) if dtype in FMT else bytes(vals)
        entries.append("%s:{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%d,%d]}" % (
            quote(name), dtype, ",".join(str(d) for d in shape), len(data), len(data) + len(raw)))
        data += raw
    if meta is not None:
        entries.insert(0, '"__metadata__":{%s}' % ",".join("%s:%s" % (quote(k), quote(v)) for k, v in meta))
    header = ("{" + ",".join(entries) + "}").encode("utf-8") + b" " * lead
    header += b" " * (-(8 + len(header)) % pad)
    return struct.pack("<Q", len(header)) + header + data


def raw_file(header, data=b""):
    """A file around a header written by hand (bytes or str)."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack("<Q", len(header)) + header + data


ALL = [
    ("f32", "F32", (2, 3), [0.5, -1.25, 2.0, 0.0, 3.5, -0.75]),
    ("f16", "F16", (4,), [1.5, -2.0, 0.25, 65504.0]),
    ("i8", "I8", (3,), [-128, 0, 127]),
    ("u8", "U8", (2,), [0, 255]),
    ("i16", "I16", (2,), [-32768, 32767]),
    ("u16", "U16", (1,), [65535]),
    ("i32", "I32", (2, 1), [-2147483648, 2147483647]),
    ("u32", "U32", (), [4294967295]),
    ("empty", "F32", (0, 3), []),
]


def address(mv):
    if IS_MICROPYTHON:
        import uctypes

        return uctypes.addressof(mv)
    import numpy as np

    return np.frombuffer(mv, "u1").__array_interface__["data"][0] if len(mv) else None


def test_reads_in_place():
    data = build(ALL, meta=[("format", "pt"), ("note", "caf\u00e9 \"q\"")])
    c = mpy_lazy.open(data)
    assert type(c).__name__ == "SafeTensors" and c.format == "safetensors"
    assert c.names() == [t[0] for t in sorted(ALL, key=lambda t: (-SIZE[t[1]], t[0]))]
    assert len(c) == len(ALL) and c.count() == len(ALL) and "f16" in c and "nope" not in c
    assert c.meta == {"format": "pt", "note": "caf\u00e9 \"q\""}
    raises(KeyError, c.view, "nope")
    base = address(memoryview(data))
    for name, dtype, shape, vals in ALL:
        v = c.view(name)
        assert v.shape == shape and v.size == len(vals) and v.tolist() == vals, name
        info = c.info(name)
        assert info.shape == shape and info.quant == 0 and info.source_dtype == dtype
        assert info.nbytes == v.nbytes == SIZE[dtype] * len(vals)
        assert v.aligned and v.ram_bytes == 0
        if vals:
            assert address(v.mv) == base + info.offset  # in place: no copy
            assert [v.array()[i] for i in range(len(vals))] == vals
            assert address(v.mv) % SIZE[dtype] == 0
        v.check()
    assert c.verify() == 0  # the format has no checksums


def test_params_and_report_read_flash():
    class Net(Module):
        def __init__(self):
            self.f32 = Param((2, 3))
            self.f16 = Param((4,))
            self.i8 = Param((3,), "i8")
            self.i32 = Param((2, 1), "i32")

    data = build([t for t in ALL if t[0] in ("f32", "f16", "i8", "i32")])
    m = Net()
    r = load(m, mpy_lazy.open(data))
    assert r["bound"] == 4
    rep = mpy_lazy.report(m, show=False)
    assert rep["flash"] == 24 + 8 + 3 + 8 and rep["ram"] == 0
    assert m.f32[1] == -1.25 and m.f16[3] == 65504.0 and m.i8[0] == -128 and m.i32[1] == 2147483647
    m.f32[0] = 9.0  # copy-on-write: the file is not written
    assert mpy_lazy.open(data).view("f32")[0] == 0.5
    e = raises(ContainerError, load, Net(), mpy_lazy.open(build([ALL[0]])))
    assert e.field == "load" and len(e.missing) == 3


def test_unaligned_tensors_are_copied_and_reported():
    seen = False
    for lead in range(8):
        data = build([ALL[0], ALL[2]], pad=1, lead=lead)
        c = mpy_lazy.open(data)
        f, b = c.view("f32"), c.view("i8")
        assert f.tolist() == ALL[0][3] and b.tolist() == ALL[2][3]
        assert b.aligned and b.ram_bytes == 0  # int8: any address will do
        if not f.aligned:
            seen = True
            assert f.ram_bytes == f.nbytes == 24 and [f.array()[i] for i in range(6)] == ALL[0][3]

            class One(Module):
                def __init__(self):
                    self.f32 = Param((2, 3))

            m = One()
            load(m, c, strict=False)
            r = mpy_lazy.report(m, show=False)
            assert (r["flash"], r["ram"]) == (0, 24) and r["params"][0]["note"] == "unaligned: RAM copy"
    assert seen


def test_dtypes_the_board_does_not_compute_with():
    data = build([("w", "F32", (2,), [1.0, 2.0]), ("pos", "I64", (2,), [0, 1]), ("d", "F64", (1,), [0.5]),
                  ("bf", "BF16", (2,), [0, 0x3F, 0x80, 0x3F])])
    c = mpy_lazy.open(data)
    assert sorted(c.names()) == ["bf", "d", "pos", "w"]
    assert c.info("pos").dtype == "i64" and c.info("bf").dtype == "bf16" and c.info("bf").shape == (2,)
    e = raises(ContainerError, c.view, "bf")
    assert e.field == "dtype" and e.tensor == "bf" and "BF16" in str(e)

    class W(Module):
        def __init__(self):
            self.w = Param((2,))
            self.pos = Param((2,))

    e = raises(ContainerError, load, W(), c)
    assert len(e.mismatched) == 1 and "pos" in e.mismatched[0] and "i64" in e.mismatched[0]
    m = W()
    r = load(m, c, strict=False)
    assert r["bound"] == 1 and m.w[1] == 2.0


def test_escaped_names_and_lookups():
    names = ["a\nb", "t\u00e9", "q\"", "z\\", "\U0001f600", "", "b.0.weight"]
    data = build([(n, "I8", (1,), [i]) for i, n in enumerate(names)])
    c = mpy_lazy.open(data)
    assert sorted(c.names()) == sorted(names)
    for i, n in enumerate(names):
        assert c.view(n).tolist() == [i] and c.info(n).name == n
    # an escape that spells an ASCII name is the same name
    hdr = '{"\\u0061":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}'
    assert mpy_lazy.open(raw_file(hdr, b"\x05")).view("a")[0] == 5
    pair = '{"\\ud83d\\ude00":{"dtype":"I8","shape":[],"data_offsets":[0,1]}}'
    assert mpy_lazy.open(raw_file(pair, b"\x07")).view("\U0001f600")[0] == 7


def test_graph_model_from_safetensors_metadata():
    """A safetensors file whose metadata holds a graph description runs as a model."""
    from mpy_lazy import model

    w = [0.5, -1.0, 0.25, 2.0, 1.5, 0.0, -0.5, 1.0]
    b = [0.1, -0.2]
    graph = "input y=x shape=4\nlinear x=x y=o w=fc.w b=fc.b out=2 act=relu\noutput x=o"
    data = build([("fc.w", "F32", (2, 4), w), ("fc.b", "F32", (2,), b)], meta=[("graph", graph)])
    m = model.from_container(mpy_lazy.open(data))
    x = [1.0, 2.0, -1.0, 0.5]
    f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
    want = [max(0.0, sum(f32(w[4 * o + i]) * x[i] for i in range(4)) + f32(b[o])) for o in range(2)]
    got = m(x)
    assert abs(got[0] - want[0]) < 1e-6 and abs(got[1] - want[1]) < 1e-6
    assert mpy_lazy.report(m, show=False)["ram"] == 0


GOOD = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
HOSTILE = [
    # (file bytes, field)
    (b"\x02\x00\x00\x00\x00\x00\x00\x00{", "length"),
    (struct.pack("<Q", 100) + b"{}", "header_size"),
    (struct.pack("<Q", 1 << 63) + b"{}      ", "header_size"),
    (raw_file(" " + GOOD, bytes(8)), "magic"),  # byte 8 is not '{': not a safetensors file
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}', bytes(8)), "header"),
    (raw_file('{"w" {"dtype":"F32"}}', bytes(8)), "header"),
    (raw_file('{"w\x01":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file(b'{"w\xc0\xaf":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w\\x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w\\ud800":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[123456789012345678901],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}}', bytes(8)), "shape"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}', bytes(8)), "key"),
    (raw_file('{"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "dtype"),
    (raw_file('{"w":{"shape":[2],"data_offsets":[0,8]}}', bytes(8)), "dtype"),
    (raw_file('{"w":{"dtype":"F32","data_offsets":[0,8]}}', bytes(8)), "shape"),
    (raw_file('{"w":{"dtype":"F32","shape":[2]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}', bytes(8)), "dtype"),
    (raw_file('{"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}}', bytes(8)), "header"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,9]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[4294967296,0],"data_offsets":[0,0]}}', bytes(8)), "shape"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
              '"v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)), "data_offsets"),
    (raw_file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
              '"w":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}', bytes(8)), "name"),
    (raw_file('{"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},'
              '"\\u0061":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}}', bytes(2)), "name"),
    (raw_file('{"__metadata__":{"k":1},' + GOOD[1:], bytes(8)), "header"),
    (raw_file('{"__metadata__":{"k":"a","k":"b"},' + GOOD[1:], bytes(8)), "__metadata__"),
    (raw_file('{"__metadata__":{},"__metadata__":{},' + GOOD[1:], bytes(8)), "__metadata__"),
    (raw_file('{"__metadata__":nul,' + GOOD[1:], bytes(8)), "header"),
    (raw_file(GOOD, bytes(9)), "data_offsets"),  # a byte after the last tensor
    (raw_file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)), "data_offsets"),  # a hole
]


def test_hostile_headers_are_refused_cleanly():
    assert mpy_lazy.open(raw_file(GOOD, bytes(8))).view("w").tolist() == [0.0, 0.0]
    assert mpy_lazy.open(raw_file('{"__metadata__":null,' + GOOD[1:] + "\n  ", bytes(8))).meta == {}
    assert len(mpy_lazy.open(raw_file("{}"))) == 0
    for k, (data, field) in enumerate(HOSTILE):
        e = raises(ContainerError, mpy_lazy.open, data)
        assert e.field == field, (k, field, str(e))
        assert str(e).startswith("safetensors: ") or field == "magic", (k, str(e))


def test_mutated_headers_never_escape():
    """Bytes of a valid file flipped at random: open() accepts the file (every view then lies
    inside it and reads) or raises ContainerError; nothing else."""
    base = build(ALL, meta=[("a", "b")])
    n = struct.unpack_from("<Q", base, 0)[0]
    rng = Lcg(12)
    opened = 0
    for _ in range(60 if small_board() else 400):
        buf = bytearray(base)
        for _ in range(rng.int(1, 4)):
            i = rng.int(0, 8 + n - 1)
            buf[i] = rng.pick(b'{}[]",:0129 eE-\\u"abFI') if rng.chance(2) else rng.int(0, 255)
        try:
            c = mpy_lazy.open(bytes(buf))
        except ContainerError:
            continue
        opened += 1
        for name in c.names():
            info = c.info(name)
            assert info.offset + info.nbytes <= len(buf)
            try:
                c.view(name).tolist()
            except ContainerError as e:
                assert e.field == "dtype"
        c.meta
    assert opened > 0
