# Helpers for the runtime container tests: patch fields of a container (golden bytes) and
# recompute its header CRC, so a test can reach any rule of docs/FORMAT.md. Runs on CPython and
# MicroPython.
import struct
from binascii import crc32

from rt_util import golden

HEADER = {
    "magic": (0, "4s"), "version_major": (4, "B"), "version_minor": (5, "B"),
    "entry_size": (6, "H"), "flags": (8, "I"), "file_size": (12, "I"), "alignment": (16, "I"),
    "tensor_count": (20, "I"), "table_offset": (24, "I"), "meta_count": (28, "I"),
    "meta_offset": (32, "I"), "strings_offset": (36, "I"), "strings_size": (40, "I"),
    "data_offset": (44, "I"), "data_size": (48, "I"), "header_crc": (60, "I"),
}
ENTRY = {
    "name_offset": (0, "I"), "name_len": (4, "H"), "dtype": (6, "B"), "ndim": (7, "B"),
    "shape0": (8, "I"), "shape1": (12, "I"), "shape2": (16, "I"), "shape3": (20, "I"),
    "data_offset": (24, "I"), "nbytes": (28, "I"), "data_crc": (32, "I"), "quant": (36, "B"),
    "quant_axis": (37, "B"), "tensor_flags": (38, "H"), "scale": (40, "f"),
    "zero_point": (44, "i"), "scales_index": (48, "I"), "source_dtype": (52, "B"),
}
META = {"key_offset": (0, "I"), "key_len": (4, "I"), "value_offset": (8, "I"), "value_len": (12, "I")}


def get(buf, field):
    off, fmt = HEADER[field]
    return struct.unpack_from("<" + fmt, buf, off)[0]


def entry_get(buf, i, field):
    off, fmt = ENTRY[field]
    return struct.unpack_from("<" + fmt, buf, get(buf, "table_offset") + i * get(buf, "entry_size") + off)[0]


def fix_crc(buf):
    """Recompute header_crc (FORMAT.md: crc32 of [0, 60) continued over [64, data_offset))."""
    d = get(buf, "data_offset")
    struct.pack_into("<I", buf, 60, crc32(buf[64:d], crc32(buf[0:60])) & 0xFFFFFFFF)
    return buf


def patched(name, header=(), entries=(), meta=(), strings=(), crc=True):
    """A bytearray of golden container `name` with fields changed: header=[(field, value)],
    entries=[(index, field, value)], meta=[(index, field, value)], strings=[(offset in the
    string table, bytes)]; header_crc recomputed unless crc is False (or set explicitly)."""
    buf = bytearray(golden(name + ".mpyl"))
    for field, value in header:
        off, fmt = HEADER[field]
        struct.pack_into("<" + fmt, buf, off, value)
    table, esize = get(buf, "table_offset"), get(buf, "entry_size")
    for i, field, value in entries:
        off, fmt = ENTRY[field]
        struct.pack_into("<" + fmt, buf, table + i * esize + off, value)
    for i, field, value in meta:
        off, fmt = META[field]
        struct.pack_into("<" + fmt, buf, get(buf, "meta_offset") + 16 * i + off, value)
    for off, data in strings:
        start = get(buf, "strings_offset") + off
        buf[start : start + len(data)] = data
    if crc and "header_crc" not in [f for f, _ in header]:
        fix_crc(buf)
    return buf
