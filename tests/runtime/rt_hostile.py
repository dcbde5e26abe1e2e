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
    """Container bytes: tensors named by spans of `strings` (u8, shape (1,), one byte of data
    each), `names` a flat list (offset0, length0, offset1, length1, ...); metadata entries into
    `strings`, `meta` a flat list (key_offset, key_len, value_offset, value_len, ...); `graph`
    (text) is appended to the strings as the value of metadata key 'graph'. reverse: the
    tensors' data in the reverse of table order (valid, but not the packer's).
    Flat lists of small ints and string tables allocated once: a board's 192 KB heap,
    fragmented by thousands of small tuples between growing buffers, finds no 3 KB block."""
    meta = list(meta)
    if graph is not None:
        g = graph.encode()
        ko = len(strings)
        strings = bytes(strings) + b"graph" + g
        meta += [ko, 5, ko + 5, len(g)]
    count = len(names) // 2
    mcount = len(meta) // 4
    toff = 64
    moff = toff + 64 * count
    soff = moff + 16 * mcount
    doff = (soff + len(strings) + alignment - 1) // alignment * alignment
    fsize = doff + alignment * count
    buf = bytearray(fsize)
    for i in range(count):
        at = doff + alignment * (count - 1 - i if reverse else i)
        data = bytes([i & 0xFF])
        struct.pack_into(_ENTRY, buf, toff + 64 * i, names[2 * i], names[2 * i + 1], 4, 1, 1, 0, 0, 0,
                         at, 1, crc32(data) & 0xFFFFFFFF, 0, 0, 0, 0.0, 0, 0xFFFFFFFF, 4)
        buf[at] = data[0]
    for k in range(mcount):
        struct.pack_into("<IIII", buf, moff + 16 * k, meta[4 * k], meta[4 * k + 1], meta[4 * k + 2],
                         meta[4 * k + 3])
    buf[soff : soff + len(strings)] = strings
    struct.pack_into(_HEADER, buf, 0, b"MPYL", 1, 1, 64, 0, fsize, alignment, count, toff, mcount,
                     moff, soff, len(strings), doff, fsize - doff, 0)
    mv = memoryview(buf)
    struct.pack_into("<I", buf, 60, crc32(mv[64:doff], crc32(mv[0:60])) & 0xFFFFFFFF)
    return buf


def _text(nchars, seed, out=None, at=0):
    """nchars random two-byte characters: new bytes, or written into `out` at `at`."""
    rng = Lcg(seed)
    b = bytearray(2 * nchars) if out is None else out
    for i in range(at, at + 2 * nchars, 2):
        c = _CHARS[rng.next() % 64]
        b[i] = c[0]
        b[i + 1] = c[1]
    return bytes(b) if out is None else out


def shared_value(n, bad=False):
    """n metadata entries with distinct ASCII keys whose values all point at one shared
    non-ASCII value of 16 * n bytes (valid UTF-8). The keys and values add up to far more than
    the string table: refused, after work linear in the size. bad: the string table also holds
    one byte of invalid UTF-8 that no entry points at."""
    vo = 1 if bad else 0
    vl = 16 * n
    strings = bytearray(vo + vl + 7 * n)
    if bad:
        strings[0] = 0xFF
    _text(8 * n, 1, strings, vo)
    meta = [0] * (4 * n)
    at = vo + vl
    for k in range(n):
        strings[at : at + 7] = b"k%06d" % k
        meta[4 * k : 4 * k + 4] = (at, 7, vo, vl)
        at += 7
    return container(meta=meta, strings=strings)


def shared_names(n, bad=False, reverse=False):
    """n tensors whose names (254 bytes, near the format's limit, each a different window of
    one shared run of two-byte characters) overlap: a valid container, names sorted. bad: an
    invalid UTF-8 byte no name points at sits in the string table too; reverse: the data in
    the reverse of table order."""
    run = _text(n + 127, 2)
    strings = (b"\xff" if bad else b"") + run
    base = 1 if bad else 0
    # sorted by their bytes: compared in place, by index (n slices of 254 bytes would not fit
    # a board's heap)
    mv = memoryview(strings)
    order = _sort([base + 2 * i for i in range(n)], lambda a, b: bytes(mv[a : a + 254]) < bytes(mv[b : b + 254]))
    # windows of a random run are distinct; drop the rare equal neighbours
    names = []
    for a in order:
        if not names or bytes(mv[names[-2] : names[-2] + 254]) != bytes(mv[a : a + 254]):
            names += [a, 254]
    return container(names=names, strings=strings, reverse=reverse)


def _sort(xs, less):
    """xs sorted by less(a, b) (a merge sort: MicroPython's list.sort has no cmp and a key
    function would keep every key alive)."""
    if len(xs) <= 1:
        return xs
    h = len(xs) // 2
    a, b = _sort(xs[:h], less), _sort(xs[h:], less)
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        if less(b[j], a[i]):
            out.append(b[j])
            j += 1
        else:
            out.append(a[i])
            i += 1
    return out + a[i:] + b[j:]


def distinct_meta(n):
    """A valid container with n metadata entries, each key and value its own non-ASCII bytes
    (the metadata a writer can legitimately put in n x ~40 bytes)."""
    strings = bytearray(25 * n)
    meta = [0] * (4 * n)
    at = 0
    for k in range(n):
        c = _CHARS[k % 64]
        strings[at : at + 9] = b"k%06d" % k + c
        _text(8, k + 3, strings, at + 9)
        meta[4 * k : 4 * k + 4] = (at, 9, at + 9, 16)
        at += 25
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
    strings = bytearray(6 * n)
    names = [0] * (2 * n)
    for i in range(n):
        strings[6 * i : 6 * i + 6] = b"t%05d" % i
        names[2 * i] = 6 * i
        names[2 * i + 1] = 6
    return container(names=names, strings=strings, reverse=reverse)


_CODES = {"f32": (1, "f", 4), "i8": (3, "b", 1), "i32": (7, "i", 4)}


def model(graph, tensors, alignment=16, key="graph"):
    """A container with a model: `graph` (text; under metadata `key`: "layers" for an old
    layer chain) and tensors {name: (dtype, shape, values)}, dtype f32, i8 or i32, values a
    flat list (floats may be nan/inf)."""
    names = sorted(tensors)
    strings = bytearray()
    refs = []
    for name in names:
        b = name.encode()
        refs.append((len(strings), len(b)))
        strings += b
    ko = len(strings)
    g = graph.encode()
    kb = key.encode()
    strings += kb + g
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
    struct.pack_into("<IIII", buf, 64 + 64 * count, ko, len(kb), ko + len(kb), len(g))
    buf[soff : soff + len(strings)] = strings
    head = struct.pack(_HEADER, b"MPYL", 1, 1, 64, 0, fsize, alignment, count, 64, 1,
                       64 + 64 * count, soff, len(strings), doff, fsize - doff, 0)
    buf[0:60] = head[:60]
    struct.pack_into("<I", buf, 60, crc32(buf[64:doff], crc32(buf[0:60])) & 0xFFFFFFFF)
    return bytes(buf)
