# Hostile containers for the reliability tests (issue 13), built from scratch with struct so
# they run on CPython and MicroPython alike: string tables shared by many names or metadata
# entries ("metadata amplification"; each builder takes a size knob n and returns bytes growing
# linearly in n), and models with chosen weights (non-finite ones included).
import struct
from binascii import crc32

from rt_util import Lcg

_HEADER = "<4sBBHIIIIIIIIIII8xI"
_ENTRY = "<IHBB4IIIIBBHfiIB11x"
# two-byte characters (U+00C0..U+00FF): valid UTF-8 that the reader cannot take the ASCII fast path on
_CHARS = [bytes([0xC3, 0x80 + k]) for k in range(64)]


def container(names=(), meta=(), strings=b"", alignment=4, graph=None, reverse=False):
    """Container bytes: tensors named by (offset, length) spans of `strings` (u8, shape (1,),
    one byte of data each), metadata entries (key_offset, key_len, value_offset, value_len) into
    `strings`; `graph` (text) is appended to the strings as the value of metadata key 'graph'.
    reverse: the tensors' data in the reverse of table order (valid, but not the packer's)."""
    strings = bytearray(strings)
    meta = list(meta)
    if graph is not None:
        ko = len(strings)
        strings += b"graph" + graph.encode()
        meta.append((ko, 5, ko + 5, len(graph.encode())))
    count = len(names)
    toff = 64
    moff = toff + 64 * count
    soff = moff + 16 * len(meta)
    doff = (soff + len(strings) + alignment - 1) // alignment * alignment
    fsize = doff + alignment * count
    body = bytearray(fsize - 64)
    for i in range(count):
        off, n = names[i]
        data = bytes([i & 0xFF])
        at = doff + alignment * (count - 1 - i if reverse else i)
        struct.pack_into(_ENTRY, body, toff - 64 + 64 * i, off, n, 4, 1, 1, 0, 0, 0,
                         at, 1, crc32(data) & 0xFFFFFFFF, 0, 0, 0, 0.0, 0, 0xFFFFFFFF, 4)
        body[at - 64] = data[0]
    for k in range(len(meta)):
        struct.pack_into("<IIII", body, moff - 64 + 16 * k, *meta[k])
    body[soff - 64 : soff - 64 + len(strings)] = strings
    head = struct.pack(_HEADER, b"MPYL", 1, 1, 64, 0, fsize, alignment, count, toff, len(meta),
                       moff, soff, len(strings), doff, fsize - doff, 0)
    crc = crc32(body[: doff - 64], crc32(head[:60])) & 0xFFFFFFFF
    return head[:60] + struct.pack("<I", crc) + bytes(body)


def _text(nchars, seed):
    rng = Lcg(seed)
    b = bytearray()
    for _ in range(nchars):
        b += _CHARS[rng.next() % 64]
    return bytes(b)


def shared_value(n, bad=False):
    """n metadata entries with distinct ASCII keys whose values all point at one shared
    non-ASCII value of 16 * n bytes (valid UTF-8). The keys and values add up to far more than
    the string table: refused, after work linear in the size. bad: the string table also holds
    one byte of invalid UTF-8 that no entry points at."""
    value = _text(8 * n, 1)
    strings = bytearray(b"\xff" if bad else b"") + value
    vo = len(strings) - len(value)
    meta = []
    for k in range(n):
        key = b"k%06d" % k
        meta.append((len(strings), len(key), vo, len(value)))
        strings += key
    return container(meta=meta, strings=strings)


def shared_names(n, bad=False, reverse=False):
    """n tensors whose names (254 bytes, near the format's limit, each a different window of
    one shared run of two-byte characters) overlap: a valid container, names sorted. bad: an
    invalid UTF-8 byte no name points at sits in the string table too; reverse: the data in
    the reverse of table order."""
    run = _text(n + 127, 2)
    strings = (b"\xff" if bad else b"") + run
    base = 1 if bad else 0
    spans = [(base + 2 * i, 254) for i in range(n)]
    spans.sort(key=lambda s: strings[s[0] : s[0] + s[1]])
    # windows of a random run are distinct; drop the rare equal neighbours
    out = []
    for s in spans:
        if not out or strings[out[-1][0] : out[-1][0] + 254] != strings[s[0] : s[0] + 254]:
            out.append(s)
    return container(names=out, strings=strings, reverse=reverse)


def distinct_meta(n):
    """A valid container with n metadata entries, each key and value its own non-ASCII bytes
    (the metadata a writer can legitimately put in n x ~40 bytes)."""
    strings = bytearray()
    meta = []
    for k in range(n):
        key = b"k%06d" % k + _CHARS[k % 64]
        value = _text(8, k + 3)
        meta.append((len(strings), len(key), len(strings) + len(key), len(value)))
        strings += key + value
    return container(meta=meta, strings=strings)


def long_graph(n):
    """A valid container with a model: a chain of n relu ops over a float input, its graph
    text the only metadata."""
    lines = ["input y=v0 shape=4"]
    for i in range(n):
        lines.append("relu x=v%d y=v%d" % (i, i + 1))
    lines.append("output x=v%d" % n)
    return container(graph="\n".join(lines))


def many_tensors(n, reverse=False):
    """n one-byte tensors with short ASCII names (sorted), their data in table order or
    reversed: what costs is the check that no two tensors overlap."""
    strings = bytearray()
    names = []
    for i in range(n):
        name = b"t%05d" % i
        names.append((len(strings), len(name)))
        strings += name
    return container(names=names, strings=strings, reverse=reverse)


_CODES = {"f32": (1, "f", 4), "i8": (3, "b", 1), "i32": (7, "i", 4)}


def model(graph, tensors, alignment=16):
    """A container with a model: `graph` (text) and tensors {name: (dtype, shape, values)},
    dtype f32, i8 or i32, values a flat list (floats may be nan/inf)."""
    names = sorted(tensors)
    strings = bytearray()
    refs = []
    for name in names:
        b = name.encode()
        refs.append((len(strings), len(b)))
        strings += b
    ko = len(strings)
    g = graph.encode()
    strings += b"graph" + g
    count = len(names)
    soff = 64 + 64 * count + 16
    doff = (soff + len(strings) + alignment - 1) // alignment * alignment
    pos, datas = doff, []
    for name in names:
        dtype, shape, values = tensors[name]
        code, fmt, size = _CODES[dtype]
        data = struct.pack("<%d%s" % (len(values), fmt), *values)
        datas.append((pos, data))
        pos = (pos + len(data) + alignment - 1) // alignment * alignment
    fsize = datas[-1][0] + len(datas[-1][1]) if datas else doff
    buf = bytearray(fsize)
    for i in range(count):
        dtype, shape, values = tensors[names[i]]
        dims = list(shape) + [0] * (4 - len(shape))
        at, data = datas[i]
        struct.pack_into(_ENTRY, buf, 64 + 64 * i, refs[i][0], refs[i][1], _CODES[dtype][0],
                         len(shape), dims[0], dims[1], dims[2], dims[3], at, len(data),
                         crc32(data) & 0xFFFFFFFF, 0, 0, 0, 0.0, 0, 0xFFFFFFFF, _CODES[dtype][0])
        buf[at : at + len(data)] = data
    struct.pack_into("<IIII", buf, 64 + 64 * count, ko, 5, ko + 5, len(g))
    buf[soff : soff + len(strings)] = strings
    head = struct.pack(_HEADER, b"MPYL", 1, 1, 64, 0, fsize, alignment, count, 64, 1,
                       64 + 64 * count, soff, len(strings), doff, fsize - doff, 0)
    buf[0:60] = head[:60]
    struct.pack_into("<I", buf, 60, crc32(buf[64:doff], crc32(buf[0:60])) & 0xFFFFFFFF)
    return bytes(buf)
