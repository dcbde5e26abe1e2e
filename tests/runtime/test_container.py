# Reading the golden containers (tests/golden/*.mpyl, expected contents in the .json files):
# header, metadata, tensor table, zero-copy views, raw and real values, CRCs.
import mpy_lazy
from mpy_lazy.container import utf8
from rt_util import golden, golden_json, raises, crc32, IS_MICROPYTHON, GOLDEN_DIR

GOLDEN = ("tiny", "f16", "int8", "int8_channel", "ints", "align64")


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(b))


def test_golden_header_and_meta():
    for g in GOLDEN:
        j = golden_json(g + ".json")
        c = mpy_lazy.open(golden(g + ".mpyl"))
        h = j["header"]
        assert c.version == (h["version_major"], h["version_minor"])
        assert c.file_size == h["file_size"] and c.alignment == h["alignment"]
        assert c.data_offset == h["data_offset"]
        assert len(c) == h["tensor_count"]
        assert c.meta == j["meta"], (g, c.meta)


def test_golden_tensors():
    for g in GOLDEN:
        j = golden_json(g + ".json")
        c = mpy_lazy.open(golden(g + ".mpyl"))
        tensors = j["tensors"]
        assert c.names(aux=True) == [t["name"] for t in tensors]
        assert c.names() == [t["name"] for t in tensors if not t["aux"]]
        for t in tensors:
            info = c.info(t["name"])
            assert info.index == t["index"] and info.dtype == t["dtype"]
            assert info.shape == tuple(t["shape"]) and info.offset == t["offset"]
            assert info.nbytes == t["nbytes"] and info.crc == t["crc"]
            assert info.quant == t["quant"] and info.axis == t["axis"] and info.aux == t["aux"]
            assert close(info.scale, t["scale"]) and info.zero_point == t["zero_point"]
            assert info.scales == t["scales"] and info.source_dtype == t["source_dtype"]
            v = c.view(t["name"])
            assert v.shape == info.shape and v.dtype == info.dtype and v.nbytes == info.nbytes
            assert v.size == len(t["values"]) and v.aligned
            assert v.tolist() == t["values"], (g, t["name"])
            assert [v[i] for i in range(v.size)] == t["values"]
            assert v[-1] == t["values"][-1]
            for i in range(v.size):
                assert close(v.real(i), t["real"][i], 1e-6), (g, t["name"], i)
            d = v.dequantize()
            assert len(d) == v.size
            for i in range(v.size):
                assert close(d[i], t["real"][i], 1e-6), (g, t["name"], i, d[i])
            c.check(t["name"])
        assert c.verify() == len(tensors)


def test_view_is_zero_copy_and_read_only():
    data = bytearray(golden("tiny.mpyl"))
    before = crc32(data)
    c = mpy_lazy.open(data)
    v = c.view("fc.weight")
    # the view's bytes are the buffer's bytes: a change to the buffer shows through
    data[448:452] = b"\x00\x00\x80\x3f"  # 1.0
    assert v[0] == 1.0
    data[448:452] = golden("tiny.mpyl")[448:452]
    assert crc32(data) == before

    def write():
        v[0] = 2.0

    raises(TypeError, write)
    if not IS_MICROPYTHON:
        assert v.mv.readonly
        a = v.array()
        assert not a.flags.writeable
        raises(ValueError, a.__setitem__, 0, 2.0)


def test_view_keeps_buffer_alive():
    import gc

    c = mpy_lazy.open(bytes(golden("tiny.mpyl")))
    v = c.view("fc.weight")
    del c
    gc.collect()
    junk = [bytearray(600) for _ in range(20)]  # reuse any freed memory
    assert v.tolist() == golden_json("tiny.json")["tensors"][1]["values"]
    assert v.name == "fc.weight"
    del junk


def test_array_backend():
    c = mpy_lazy.open(golden("ints.mpyl"))
    j = golden_json("ints.json")
    for t in j["tensors"]:
        a = c.view(t["name"]).array()  # a uctypes array has no len()
        assert [int(a[i]) for i in range(len(t["values"]))] == t["values"], t["name"]
    c = mpy_lazy.open(golden("f16.mpyl"))
    v = c.view("fc.weight")
    a = v.array()
    assert [float(a[i]) for i in range(v.size)] == v.tolist()
    if IS_MICROPYTHON:  # no f16 type: decoded once into a RAM f32 array, and reported
        assert v.ram_bytes == 4 * v.size
        assert v.array() is a
    else:  # numpy has float16: a zero-copy view
        assert v.ram_bytes == 0


def test_unaligned_buffer_falls_back_to_ram_copy():
    data = golden("int8.mpyl")
    seen_unaligned = False
    for shift in range(4):
        buf = bytearray(shift) + data
        c = mpy_lazy.open(memoryview(buf)[shift:])
        b = c.view("fc.bias")  # f32
        w = c.view("fc.weight")  # i8: any address is aligned
        assert w.aligned and w.ram_bytes == 0
        assert b.tolist() == [0.10000000149011612, 0.20000000298023224, -0.30000001192092896, 0.4000000059604645]
        assert [b.array()[i] for i in range(4)] == b.tolist()
        if not b.aligned:
            seen_unaligned = True
            assert b.ram_bytes == b.nbytes == 16
    assert seen_unaligned


def test_open_path():
    path = GOLDEN_DIR + "/tiny.mpyl"
    if not IS_MICROPYTHON:  # CPython maps the file (mmap)
        c = mpy_lazy.open(path)
        assert c.view("temperature")[0] == 2.5 and c.verify() == 3
        return
    if path.startswith("/rom/"):  # a board: the golden files are on the mounted vfs.VfsRom
        import os
        import uctypes

        c = mpy_lazy.open(path)
        assert c.view("temperature")[0] == 2.5 and c.verify() == 3
        start = uctypes.addressof(memoryview(open(path, "rb")))
        assert uctypes.addressof(c.view("temperature").mv) == start + c.info("temperature").offset
        # the not-mappable case on a board: littlefs (the harness's RAM disk at /tmp)
        path = "/tmp/mpy_lazy_open_path_test.mpyl"
        with open(path, "wb") as f:
            f.write(golden("tiny.mpyl"))
        try:
            e = raises(mpy_lazy.ContainerError, mpy_lazy.open, path)
        finally:
            os.remove(path)
    else:  # posix vfs
        e = raises(mpy_lazy.ContainerError, mpy_lazy.open, path)
    # cannot be mapped: say so and point at Stream
    assert e.field == "path" and "Stream" in str(e) and path in str(e)


def test_open_missing_path_names_it_and_what_is_there():
    """A missing file: an OSError (ENOENT) naming the path and listing its directory (MicroPython's
    own said `[Errno 2] ENOENT`, no path: issue 32, a script opening /rom/model.mpyl when the
    image holds another name)."""
    import os

    path = GOLDEN_DIR + "/model.mpyl"
    e = raises(OSError, mpy_lazy.open, path)
    first = sorted(os.listdir(GOLDEN_DIR))[0]
    assert e.args[0] == 2 and path + ": no such file (%s holds %s, " % (GOLDEN_DIR, first) in str(e), str(e)
    e = raises(OSError, mpy_lazy.open, GOLDEN_DIR + "/no-such-dir/m.mpyl")
    assert e.args[0] == 2 and GOLDEN_DIR + "/no-such-dir/m.mpyl: no such file" in str(e), str(e)


def test_unknown_name_is_key_error():
    c = mpy_lazy.open(golden("tiny.mpyl"))
    raises(KeyError, c.view, "fc.nope")
    raises(KeyError, c.info, "")
    assert "fc.bias" in c and "fc" not in c


def test_memoryview_and_bytes_sources():
    data = golden("int8_channel.mpyl")
    for src in (data, bytearray(data), memoryview(data), memoryview(bytearray(data))):
        c = mpy_lazy.open(src)
        assert c.names() == ["conv.weight", "fc.bias", "fc.weight"]
        assert c.view("fc.weight").scales().tolist() == c.view("fc.weight#scales").tolist()
        assert c.view("fc.bias").scales() is None


def test_utf8_validator_same_verdict_everywhere():
    good = [b"", b"abc", b"a\x00b", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80",
            b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\xed\x9f\xbf"]
    bad = [b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
           b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"a\xc3(", b"\xf0\x9f\x98"]
    for b in good:
        assert utf8(b) == str(b, "utf-8"), b
    for b in bad:
        assert utf8(b) is None, b


def test_typed_array_buffer():
    import array

    data = golden("tiny.mpyl")
    a = array.array("i", bytes(data[:496]))  # 124 int32 items holding the first 496 bytes
    if IS_MICROPYTHON:  # a memoryview of it indexes items, not bytes: refused
        raises(TypeError, mpy_lazy.open, memoryview(a))
    else:  # CPython casts it to bytes
        raises(mpy_lazy.ContainerError, mpy_lazy.open, a)  # 496 < file_size 500
        b = array.array("i", bytes(data) + bytes(4 - len(data) % 4))
        assert mpy_lazy.open(b).view("temperature")[0] == 2.5
