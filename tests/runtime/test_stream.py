# mpy_lazy.Stream: the fallback for files that cannot be mapped (FAT, littlefs, posix): reads the
# header and tables only, then one tensor (or a chunk of one) at a time into a caller buffer.
import struct

import mpy_lazy
from rt_util import golden, golden_json, raises, GOLDEN_DIR
from rt_container import patched

TMP = "/tmp/mpy_lazy_stream_test.mpyl"


def write(data):
    with open(TMP, "wb") as f:
        f.write(data)
    return TMP


def test_stream_table_api_matches_container():
    for g in ("tiny", "int8_channel", "ints"):
        c = mpy_lazy.open(golden(g + ".mpyl"))
        with mpy_lazy.Stream(GOLDEN_DIR + "/" + g + ".mpyl") as s:
            assert s.names() == c.names() and s.names(aux=True) == c.names(aux=True)
            assert s.meta == c.meta and len(s) == len(c)
            for n in c.names(aux=True):
                a, b = s.info(n), c.info(n)
                assert (a.dtype, a.shape, a.offset, a.nbytes, a.crc, a.scales) == \
                    (b.dtype, b.shape, b.offset, b.nbytes, b.crc, b.scales)
            assert s.verify() == len(c)


def test_readinto_whole_and_chunks():
    j = golden_json("tiny.json")["tensors"][1]  # fc.weight, 48 bytes
    s = mpy_lazy.Stream(GOLDEN_DIR + "/tiny.mpyl")
    buf = bytearray(48)
    assert s.readinto("fc.weight", buf) == 48
    assert list(struct.unpack("<12f", buf)) == j["values"]
    got = bytearray()
    chunk = bytearray(20)  # a caller-sized buffer smaller than the tensor
    off = 0
    while True:
        n = s.readinto("fc.weight", chunk, off)
        if not n:
            break
        got += chunk[:n]
        off += n
    assert got == buf
    big = bytearray(100)  # a larger buffer gets just the tensor
    assert s.readinto("temperature", big) == 4 and struct.unpack_from("<f", big)[0] == 2.5
    raises(ValueError, s.readinto, "fc.weight", chunk, 49)
    raises(KeyError, s.readinto, "nope", chunk)
    s.check("fc.weight", bytearray(7))
    s.close()


def test_stream_refuses_bad_files():
    e = raises(mpy_lazy.ContainerError, mpy_lazy.Stream, write(b"MPYL"))
    assert e.field == "length"
    e = raises(mpy_lazy.ContainerError, mpy_lazy.Stream, write(patched("tiny", entries=[(1, "ndim", 5)])))
    assert e.field == "ndim" and e.tensor == "fc.weight"
    e = raises(mpy_lazy.ContainerError, mpy_lazy.Stream, write(golden("tiny.mpyl")[:-2]))
    assert e.field == "file_size"
    buf = bytearray(golden("tiny.mpyl"))
    buf[499] ^= 1  # temperature's data
    s = mpy_lazy.Stream(write(buf))
    s.check("fc.weight")
    e = raises(mpy_lazy.ContainerError, s.verify)
    assert e.field == "data_crc" and e.tensor == "temperature"
    s.close()
