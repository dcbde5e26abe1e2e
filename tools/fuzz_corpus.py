"""Seeded corpus of valid and mutated containers for fuzzing the runtime reader (CPython only).

    python tools/fuzz_corpus.py --count 10000 --seed 1 -o corpus.bin   # length-prefixed records

Valid containers are laid out by the packer's own writer (host_tools.container.Layout, the
code `mpy-lazy pack` uses), with random names (UTF-8, unsorted now and then), every dtype,
ndim 0..4, int8 per-tensor and per-channel quantization, alignments 4..4096 and metadata. Each
one is then mutated: bit flips, truncation, header/entry/metadata fields set to boundary
values, huge counts, overlapping or misaligned tensors, unknown dtypes, bad UTF-8, duplicate
names, version and flag bumps, unsorted tables; the header CRC is recomputed after most
mutations (so the deeper rules are reached) and left stale after the others.
The same seed always gives the same bytes."""
import os
import random
import struct
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from host_tools.container import FLAG_AUX, Entry, Layout  # noqa: E402

DTYPES = ("f32", "f16", "i8", "u8", "i16", "u16", "i32", "u32")
# (offset, struct code) of every field; ENTRY offsets are relative to the entry
HEADER = {"magic": (0, "4s"), "version_major": (4, "B"), "version_minor": (5, "B"),
          "entry_size": (6, "H"), "flags": (8, "I"), "file_size": (12, "I"),
          "alignment": (16, "I"), "tensor_count": (20, "I"), "table_offset": (24, "I"),
          "meta_count": (28, "I"), "meta_offset": (32, "I"), "strings_offset": (36, "I"),
          "strings_size": (40, "I"), "data_offset": (44, "I"), "data_size": (48, "I"),
          "reserved": (52, "Q"), "header_crc": (60, "I")}
ENTRY = {"name_offset": (0, "I"), "name_len": (4, "H"), "dtype": (6, "B"), "ndim": (7, "B"),
         "shape0": (8, "I"), "shape1": (12, "I"), "shape2": (16, "I"), "shape3": (20, "I"),
         "data_offset": (24, "I"), "nbytes": (28, "I"), "data_crc": (32, "I"), "quant": (36, "B"),
         "quant_axis": (37, "B"), "tensor_flags": (38, "H"), "scale": (40, "f"),
         "zero_point": (44, "i"), "scales_index": (48, "I"), "source_dtype": (52, "B")}
META = {"key_offset": (0, "I"), "key_len": (4, "I"), "value_offset": (8, "I"), "value_len": (12, "I")}
_BITS = {"B": 8, "H": 16, "I": 32, "i": 32, "Q": 64}
_NAME_PARTS = ("fc", "conv", "weight", "bias", ".", ".", "_", "0", "1", "12", "layers", "é", "ß",
               "中", "🙂", "#scales", "a", "b", "Z")
_FLOATS = (0.0, -0.0, 1.0, -1.0, 1e-45, 3.4e38, float("inf"), float("-inf"), float("nan"), 0.5)
# byte sequences every UTF-8 check must refuse (MicroPython's own decoder accepts the first three)
BAD_UTF8 = (b"\xc0\xae", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3", b"\x80", b"\xff",
            b"\xe2\x82", b"\xf8\x88\x80\x80\x80", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf")


def get(buf, table, field, base=0):
    off, code = table[field]
    if base + off + struct.calcsize("<" + code) > len(buf):
        return 0
    return struct.unpack_from("<" + code, buf, base + off)[0]


def put(buf, table, field, value, base=0):
    """Set a field if it lies inside buf (integers wrap to the field's width)."""
    off, code = table[field]
    if base + off + struct.calcsize("<" + code) > len(buf):
        return
    if code in _BITS:
        value &= (1 << _BITS[code]) - 1
        if code == "i" and value >= 1 << 31:
            value -= 1 << 32
    struct.pack_into("<" + code, buf, base + off, value)


def fix_crc(buf):
    """Recompute header_crc over whatever bytes are there (FORMAT.md rule 5)."""
    if len(buf) >= 64:
        d = get(buf, HEADER, "data_offset")
        put(buf, HEADER, "header_crc", zlib.crc32(buf[64:d], zlib.crc32(buf[0:60])))
    return buf


# --- valid containers ---------------------------------------------------------------------

def _name(rng, taken):
    while True:
        if rng.random() < 0.03:
            name = rng.choice("abcé") * rng.randint(100, 127)  # long names, up to 254 bytes
        else:
            name = "".join(rng.choice(_NAME_PARTS) for _ in range(rng.randint(1, 5)))
        if name not in taken and len(name.encode()) <= 247:  # room for "#scales"
            taken.add(name)
            return name


def _data(rng, e):
    if e.dtype == "f32":  # finite floats (scales stay positive)
        lo = 0.01 if e.flags & FLAG_AUX else -4.0
        return struct.pack("<%df" % e.size, *[rng.uniform(lo, 4.0) for _ in range(e.size)])
    return rng.randbytes(e.nbytes)


def random_container(rng):
    """A valid container (bytes) written by the packer's Layout, with random contents."""
    taken = set()
    entries = []
    for _ in range(rng.choice((0, 1, 1, 2, 3, 3, 4, 5, 8))):
        ndim = rng.choice((0, 1, 1, 2, 2, 3, 4))
        shape = tuple(rng.choice((1, 1, 2, 3, 4, 5, 7, 16)) for _ in range(ndim))
        dtype = rng.choice(DTYPES)
        quant = 0
        if dtype == "i8" and rng.random() < 0.6:
            quant = 2 if ndim and rng.random() < 0.5 else 1
        e = Entry(_name(rng, taken), dtype, shape, rng.choice(("f32", "f64", "bf16", dtype, "")),
                  quant, rng.randrange(ndim) if quant == 2 else 0)
        if quant == 1:
            e.scale = rng.choice((1.0, 0.5, 0.0078125, 3.0e-5))
            e.zero_point = rng.randint(-128, 127)
        entries.append(e)
        if quant == 2:
            aux = Entry(e.name + "#scales", "f32", (shape[e.axis],), "f32", flags=FLAG_AUX)
            taken.add(aux.name)
            aux.parent = e
            entries.append(aux)
    if rng.random() < 0.9:  # the packer sorts; the format does not require it
        entries.sort(key=lambda x: x.name.encode())
    index = {e.name: i for i, e in enumerate(entries)}
    for e in entries:
        if e.quant == 2:
            e.scales_index = index[e.name + "#scales"]
    meta = [("format", "mpy-lazy/1.0"), ("source", "fuzz")]
    # now and then many entries (amplification needs entries to share bytes: m_meta_share)
    for k in range(rng.choice((0, 0, 1, 3, 0, 1, 3, 24))):
        meta.append(("k%d%s" % (k, rng.choice(("", "é", "🙂"))), rng.choice(("", "v", "ünï", "x" * 40, "ß中" * 12))))
    layout = Layout(entries, meta, rng.choice((4, 8, 16, 16, 16, 32, 64, 256, 4096)))
    buf = bytearray(layout.file_size)
    for e in entries:
        data = _data(rng, e)
        e.crc = zlib.crc32(data)
        buf[e.offset : e.offset + e.nbytes] = data
    buf[: layout.data_offset] = layout.metadata_bytes()
    return bytes(buf)


# --- mutations ----------------------------------------------------------------------------

def _boundaries(rng, buf, old):
    fsize = get(buf, HEADER, "file_size")
    align = get(buf, HEADER, "alignment") or 16
    doff = get(buf, HEADER, "data_offset")
    return (0, 1, 2, 3, 4, 63, 64, 65, align - 1, align, align + 1, 255, 256, 0x7FFF, 0xFFFF,
            0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, fsize, fsize - 1, fsize + 1, len(buf), len(buf) + 1,
            doff, doff - align, doff + align, old - 1, old + 1, old ^ (1 << rng.randrange(32)),
            rng.getrandbits(32))


def _set_value(rng, buf, table, field, base=0):
    code = table[field][1]
    if code == "f":
        put(buf, table, field, rng.choice(_FLOATS), base)
    elif code == "4s":
        put(buf, table, field, rng.choice((b"MPYl", b"\0\0\0\0", b"LYPM")), base)
    else:
        put(buf, table, field, rng.choice(_boundaries(rng, buf, get(buf, table, field, base))), base)


def _entry_base(rng, buf):
    count = get(buf, HEADER, "tensor_count")
    n = min(count, 64) or 1
    return get(buf, HEADER, "table_offset") + rng.randrange(n) * get(buf, HEADER, "entry_size")


def _entry_bases(buf):
    toff, es = get(buf, HEADER, "table_offset"), get(buf, HEADER, "entry_size")
    n = min(get(buf, HEADER, "tensor_count"), 64)
    return [toff + i * es for i in range(n) if toff + (i + 1) * es <= len(buf)]


def m_bitflip(rng, buf):
    end = get(buf, HEADER, "data_offset")
    end = end if 64 < end <= len(buf) and rng.random() < 0.8 else len(buf)
    for _ in range(rng.choice((1, 1, 2, 3, 8)) if end else 0):
        buf[rng.randrange(end)] ^= 1 << rng.randrange(8)
    return buf


def m_truncate(rng, buf):
    return buf[: rng.randrange(len(buf))] if buf else buf


def m_shrink(rng, buf):
    """Truncate and make the header agree (file_size, data_size): tensors fall off the end."""
    n = rng.randrange(64, len(buf)) if len(buf) > 64 else len(buf)
    buf = buf[:n]
    put(buf, HEADER, "file_size", n)
    put(buf, HEADER, "data_size", n - get(buf, HEADER, "data_offset"))
    return buf


def m_grow(rng, buf):
    extra = rng.choice((1, 3, 16, 4096))
    buf += rng.randbytes(extra) if rng.random() < 0.5 else bytes(extra)
    if rng.random() < 0.5:  # claim the new bytes too
        put(buf, HEADER, "file_size", len(buf))
        put(buf, HEADER, "data_size", len(buf) - get(buf, HEADER, "data_offset"))
    return buf


def m_header_field(rng, buf):
    _set_value(rng, buf, HEADER, rng.choice(list(HEADER)))
    return buf


def m_entry_field(rng, buf):
    _set_value(rng, buf, ENTRY, rng.choice(list(ENTRY)), _entry_base(rng, buf))
    return buf


def m_meta_field(rng, buf):
    n = max(1, min(get(buf, HEADER, "meta_count"), 64))
    _set_value(rng, buf, META, rng.choice(list(META)), get(buf, HEADER, "meta_offset") + 16 * rng.randrange(n))
    return buf


def m_huge_count(rng, buf):
    field = rng.choice(("tensor_count", "meta_count", "strings_size"))
    put(buf, HEADER, field, rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 0x04000000, 0x10000000,
                                        get(buf, HEADER, field) + 1)))
    return buf


def m_overlap(rng, buf):
    bases = _entry_bases(buf)
    if len(bases) >= 2:
        a, b = rng.sample(bases, 2)
        shift = rng.choice((0, 0, get(buf, HEADER, "alignment")))
        put(buf, ENTRY, "data_offset", get(buf, ENTRY, "data_offset", b) + shift, a)
    return buf


def m_misalign(rng, buf):
    bases = _entry_bases(buf)
    if bases:
        base = rng.choice(bases)
        put(buf, ENTRY, "data_offset", get(buf, ENTRY, "data_offset", base) + rng.randint(1, 3), base)
    return buf


def m_dtype(rng, buf):
    bases = _entry_bases(buf)
    if bases:
        put(buf, ENTRY, "dtype", rng.choice((0, 9, 10, 12, 128, 255) + tuple(range(1, 9))), rng.choice(bases))
    return buf


def m_bad_utf8(rng, buf):
    bases = _entry_bases(buf)
    soff = get(buf, HEADER, "strings_offset")
    if bases:  # inside a tensor name
        base = rng.choice(bases)
        pos = soff + get(buf, ENTRY, "name_offset", base) + rng.randrange(max(1, get(buf, ENTRY, "name_len", base)))
    else:  # anywhere in the string table (metadata)
        pos = soff + rng.randrange(max(1, get(buf, HEADER, "strings_size")))
    bad = rng.choice(BAD_UTF8)[: max(0, len(buf) - pos)]
    buf[pos : pos + len(bad)] = bad
    return buf


def m_duplicate_name(rng, buf):
    bases = _entry_bases(buf)
    if len(bases) >= 2:
        a, b = rng.sample(bases, 2)
        put(buf, ENTRY, "name_offset", get(buf, ENTRY, "name_offset", b), a)
        put(buf, ENTRY, "name_len", get(buf, ENTRY, "name_len", b), a)
    return buf


def m_swap_entries(rng, buf):
    """Swap two table entries: unsorted names, scales_index now pointing elsewhere."""
    bases = _entry_bases(buf)
    if len(bases) >= 2:
        a, b = rng.sample(bases, 2)
        buf[a : a + 64], buf[b : b + 64] = buf[b : b + 64], buf[a : a + 64]
    return buf


def m_version_flags(rng, buf):
    field = rng.choice(("version_major", "version_minor", "flags", "entry_size", "reserved"))
    put(buf, HEADER, field, rng.choice((0, 1, 2, 255, 1 << rng.randrange(32), 65, 128, 0xFFFF)))
    return buf


def m_tensor_flags(rng, buf):
    bases = _entry_bases(buf)
    if bases:
        put(buf, ENTRY, rng.choice(("tensor_flags", "quant", "quant_axis", "source_dtype")),
            rng.choice((0, 1, 2, 3, 4, 0x8000, 0xFFFF, 255)), rng.choice(bases))
    return buf


def _strings(buf):
    return get(buf, HEADER, "strings_offset"), get(buf, HEADER, "strings_size")


def _window(rng, buf):
    """(offset, length) of a random span of the string table (a window other spans may share)."""
    _, ssize = _strings(buf)
    a = rng.randrange(ssize + 1) if ssize else 0
    return a, rng.randrange(ssize - a + 1) if ssize > a else 0


def m_meta_share(rng, buf):
    """Metadata amplification: many entries point at the same bytes (one value, one key, or
    overlapping windows) so that a reader validating per entry would do quadratic work."""
    n = min(get(buf, HEADER, "meta_count"), 4096)
    moff = get(buf, HEADER, "meta_offset")
    what = rng.randrange(4)
    shared = _window(rng, buf)
    for k in range(n):
        base = moff + 16 * k
        if what == 0:  # every value the same span
            put(buf, META, "value_offset", shared[0], base)
            put(buf, META, "value_len", shared[1], base)
        elif what == 1:  # every value a window starting one byte further
            put(buf, META, "value_offset", shared[0] + k, base)
            put(buf, META, "value_len", max(0, shared[1] - k), base)
        elif what == 2:  # keys overlapping windows (mostly distinct, some equal)
            put(buf, META, "key_offset", shared[0] + k // 2, base)
            put(buf, META, "key_len", max(1, shared[1] // 2), base)
        else:  # random windows
            w = _window(rng, buf)
            put(buf, META, rng.choice(("value_offset", "key_offset")), w[0], base)
            put(buf, META, rng.choice(("value_len", "key_len")), w[1], base)
    return buf


def m_name_share(rng, buf):
    """Tensor names pointing at shared / overlapping bytes of the string table."""
    bases = _entry_bases(buf)
    if bases:
        off = rng.randrange(max(1, get(buf, HEADER, "strings_size")))
        n = rng.choice((1, 7, 64, 254, 255))
        for k, base in enumerate(bases):
            put(buf, ENTRY, "name_offset", off + (k * rng.choice((0, 1, 2))), base)
            put(buf, ENTRY, "name_len", n, base)
    return buf


_NONFINITE = (float("nan"), float("inf"), float("-inf"), -float("nan"), 3.4e38, 1e-45)


def m_nonfinite(rng, buf):
    """NaN / Inf (and the f32 extremes) written into an f32 or f16 tensor's data, its data CRC
    recomputed (the values are what changes, the container stays valid) or not."""
    bases = [b for b in _entry_bases(buf) if get(buf, ENTRY, "dtype", b) in (1, 2)]
    if bases:
        base = rng.choice(bases)
        off, nbytes = get(buf, ENTRY, "data_offset", base), get(buf, ENTRY, "nbytes", base)
        f16 = get(buf, ENTRY, "dtype", base) == 2
        step = 2 if f16 else 4
        count = nbytes // step
        if off + nbytes <= len(buf) and count:
            for _ in range(rng.choice((1, 2, count))):
                at = off + step * rng.randrange(count)
                struct.pack_into("<e" if f16 else "<f", buf, at, rng.choice(_NONFINITE[:4] if f16 else _NONFINITE))
            if rng.random() < 0.8:
                put(buf, ENTRY, "data_crc", zlib.crc32(buf[off : off + nbytes]), base)
    return buf


def m_splice(rng, buf):
    """Copy a random run of bytes over another place (entries over headers, strings over tables)."""
    if len(buf) > 8:
        n = rng.randint(1, min(64, len(buf) // 2))
        src, dst = rng.randrange(len(buf) - n), rng.randrange(len(buf) - n)
        buf[dst : dst + n] = buf[src : src + n]
    return buf


MUTATIONS = (m_bitflip, m_bitflip, m_truncate, m_shrink, m_grow, m_header_field, m_header_field,
             m_entry_field, m_entry_field, m_entry_field, m_meta_field, m_huge_count, m_overlap,
             m_misalign, m_dtype, m_bad_utf8, m_duplicate_name, m_swap_entries, m_version_flags,
             m_tensor_flags, m_splice, m_meta_share, m_meta_share, m_name_share, m_nonfinite)


def mutate(rng, data):
    """One mutated copy of `data` (1 to 3 mutations; header CRC recomputed 3 times in 4)."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        buf = rng.choice(MUTATIONS)(rng, buf)
    if rng.random() < 0.75:
        fix_crc(buf)
    return bytes(buf)


def corpus(count, seed):
    """`count` inputs: every 20th a valid container as written, the others mutated."""
    rng = random.Random(seed)
    base = random_container(rng)
    for i in range(count):
        if i % 5 == 0:
            base = random_container(rng)
        yield base if i % 20 == 0 else mutate(rng, base)


def sweep(data):
    """Deterministic companion of corpus(): every header, table-entry and metadata field of
    container `data` set to each boundary value (header CRC recomputed; for header fields also
    left stale), every truncation, and every truncation whose header agrees (file_size,
    data_size)."""
    size, doff, align = len(data), get(data, HEADER, "data_offset"), get(data, HEADER, "alignment")
    ints = sorted(set((0, 1, 2, 3, 4, 63, 64, 65, align - 1, align, align + 1, 0x7FFF, 0xFFFF,
                       0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, size - 1, size, size + 1, doff - align,
                       doff, doff + align)))
    toff, es = get(data, HEADER, "table_offset"), get(data, HEADER, "entry_size")
    moff = get(data, HEADER, "meta_offset")
    places = [(HEADER, 0)]
    places += [(ENTRY, toff + i * es) for i in range(get(data, HEADER, "tensor_count"))]
    places += [(META, moff + 16 * k) for k in range(get(data, HEADER, "meta_count"))]
    for table, base in places:
        for field, (_, code) in table.items():
            if field == "header_crc":
                continue
            values = _FLOATS if code == "f" else (b"MPYl", b"\0\0\0\0") if code == "4s" else ints
            for value in values:
                buf = bytearray(data)
                put(buf, table, field, value, base)
                if table is HEADER:
                    yield bytes(buf)
                yield bytes(fix_crc(buf))
    for n in range(size):
        yield data[:n]
    for n in range(64, size):
        buf = bytearray(data[:n])
        put(buf, HEADER, "file_size", n)
        put(buf, HEADER, "data_size", n - doff)
        yield bytes(fix_crc(buf))


def write_records(path, inputs):
    """Length-prefixed records (u32 little-endian length, then the bytes); returns the count."""
    n = 0
    with open(path, "wb") as f:
        for data in inputs:
            f.write(struct.pack("<I", len(data)))
            f.write(data)
            n += 1
    return n


def read_records(path):
    with open(path, "rb") as f:
        while True:
            head = f.read(4)
            if len(head) < 4:
                return
            yield f.read(struct.unpack("<I", head)[0])


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args(argv)
    n = write_records(args.output, corpus(args.count, args.seed))
    print("wrote %d inputs to %s" % (n, args.output))


if __name__ == "__main__":
    main()


# --- graph descriptions -------------------------------------------------------------------
# Containers holding a model: small graphs (every op, float and int8) with consistent weights,
# then their description mutated (ops, keys, names, numbers at their limits, lines deleted,
# repeated, swapped, truncated) and now and then their tensors (shapes, bytes). The runtime
# must refuse each with ContainerError or build a model that runs (tools/fuzz.py).

BASE_GRAPHS = (
    """input y=x shape=6,5,3 dtype=i8 q=0.05,-3
conv2d x=x y=a w=c1.w b=c1.b m=c1.m out=4 k=3 pad=1 stride=1,2 q=0.1,2
depthwise x=a y=b w=dw.w b=dw.b m=dw.m k=3 pad=1 q=0.08,-1 clamp=-100,120
conv2d x=b y=c w=c2.w m=c2.m out=4 k=1 groups=2 wl=oihw q=0.1,2
add x=a,c y=s q=0.15,0 m=1518500250,-1,1288490189,-2,1431655765,-19 clamp=0,127
lut x=s y=r t=lut.t q=0.15,0
maxpool x=r y=p k=2 q=0.15,0
avgpool x=p y=p2 k=2 stride=1 pad=1 q=0.15,0
mean x=p2 y=g q=0.1,-5 m=1503238554,-3
reshape x=g y=v shape=4
linear x=v y=o w=fc.w b=fc.b m=fc.m out=6 q=0.2,3
softmax x=o y=sm q=0.00390625,-128 t=sm.t
output x=sm""",
    """input y=x shape=4,4,2
input y=s shape=4 dtype=i8 q=0.01,0
quantize x=x y=q q=0.02,3
pad x=q y=qp pad=1,1,0,0 q=0.02,3
depthwise x=qp y=d w=dw.w m=dw.m k=2 mult=2 wl=1hwo q=0.03,-2
mul x=d,s y=mm q=0.05,1 m=1503238554,-7
concat x=mm,mm y=cat q=0.05,1
maxpool x=cat y=mp k=3 stride=2 pad=1,1,1,1 q=0.05,1 clamp=-20,100
reshape x=mp y=fl shape=-1 order=chw q=0.05,1
dequantize x=fl y=f
output x=f
output x=mm""",
    """input y=x shape=5,4,2 layout=chw
input y=z shape=3
pad x=x y=xp pad=1,0,0,1
conv2d x=xp y=a w=c.w out=3 k=2,3 dil=2,1 stride=1,2 b=c.b act=relu6
clip x=a y=a2 lo=-0.5 hi=0.75
mul x=z,a2 y=mz
sigmoid x=mz y=sg
tanh x=a y=th
concat x=sg,th y=cat
avgpool x=cat y=mp k=2 pad=1 stride=1
reshape x=mp y=flat shape=-1 order=chw
linear x=flat y=o w=fc.w out=3 wl=io act=relu
leakyrelu x=o y=l alpha=0.1
softmax x=l y=sm beta=0.5
output x=sm
output x=th""",
    """input y=x shape=6,6,3
conv2d x=x y=a w=c1.w b=c1.b out=4 k=3 pad=1 act=relu
depthwise x=a y=b w=dw.w k=3 pad=1,1,1,1 wl=o1hw mult=1
add x=a,b y=s act=relu
relu6 x=s y=r
maxpool x=r y=p k=2
mean x=p y=g
reshape x=g y=v shape=4
relu x=v y=w
linear x=w y=o w=fc.w b=fc.b out=5
output x=o""",
    """input y=x shape=6,5,3 dtype=i16 q=0.001,0
conv2d x=x y=a w=c.w b=c.b m=c.m out=4 k=3 pad=1 q=0.002,0
depthwise x=a y=d w=d.w m=d.m k=3 pad=1 acc=32 q=0.002,0
add x=a,d y=s q=0.003,0 m=1518500250,-1,1288490189,-2,1431655765,-14
sub x=s,a y=u q=0.003,0 m=1518500250,-1,1288490189,-2,1431655765,-14 clamp=-30000,30000
leakyrelu x=u y=l alpha=0.1 q=0.003,0 m=1073741824,1,1717986918,-3
slice x=l y=sl begin=0,1,0 end=6,5,4 stride=2,1,1
transpose x=sl y=t perm=1,0,2
quantize x=t y=q8 q=0.05,-3 dtype=i8 m=1518500250,-5
tconv x=q8 y=tc w=t.w b=t.b m=t.m out=2 k=2 size=8,6 stride=2 q=0.1,0
linear x=t y=h w=h.w m=h.m out=5 q=0.004,0
dequantize x=tc y=f
output x=f
output x=h""",
)
BASE_LAYERS = """input shape=1,5,5
conv2d w=c.w b=c.b in=1 out=2 k=3 stride=1 pad=1
relu
maxpool k=2
flatten
linear w=fc.w b=fc.b in=8 out=3
softmax"""

GRAPH_NUMBERS = ("0", "1", "-1", "2", "3", "127", "128", "-128", "-129", "255", "256", "4095", "4096", "4097",
                 "65535", "65536", "16777216", "16777217", "2147483647", "2147483648", "-2147483648",
                 "4294967296", "1e38", "1e39", "1e-45", "-0.0", "0.0", "nan", "inf", "-inf", "0x10", "1_0",
                 "", "1,1", "1,1,1", "1,1,1,1", "1,1,1,1,1", ",".join(["1"] * 9), "-1,-1", "3,-1",
                 "3000", "30000", "1000000000", "4096,4096,1", "65535,65535", "1e-45,0", "3.4e38,127",
                 "1.1754944e-38,-128", "3.5e38,0", "1e-45,-128")
# one element of a list (q=scale,zp; m=multipliers,shifts; pad=t,l,b,r; shape=...) at a limit
GRAPH_ELEMENTS = ("0", "1", "-1", "127", "-128", "128", "-129", "4096", "4097", "65535", "65536",
                  "2147483647", "-2147483648", "30", "31", "-31", "-32", "1e-45", "1.1754944e-38",
                  "3.4e38", "3.5e38", "1e308", "nan", "inf", "1000000000", "3000")
GRAPH_WORDS = ("x", "y", "a", "b", "zz", "x,x", "x,y", "a,a,a", "", "f32", "i8", "i16", "hwc", "chw", "nchw",
               "ohwi", "oihw", "1hwo", "o1hw", "oi", "io", "none", "relu", "relu6", "gelu", "é", "\x00", "#")


def _graph_ops():
    from mpy_lazy.graph import OPS

    return sorted(OPS)


def _graph_keys():
    from mpy_lazy.graph import OPS

    keys = set()
    for req, opt in OPS.values():
        keys.update(req)
        keys.update(opt)
    return sorted(keys)


def graph_tensors(rng, text, layers=False):
    """{name: (dtype, shape, bytes)}: values for every tensor the description names, by the
    role of the param that takes it (weights, biases, requantization tensors with TFLM-range
    multipliers and shifts, lut tables, softmax exp tables)."""
    import numpy as np

    from mpy_lazy.chain import to_graph
    from mpy_lazy.model import Model

    m = Model(to_graph(text) if layers else text)
    names = m.names()
    out = {}
    for pname, p in m.named_params():
        attr = pname.split(".")[-1]
        n = p.size
        if p.dtype == "f32":
            vals = np.array([rng.uniform(-1, 1) for _ in range(n)], dtype=np.float32)
        elif p.dtype == "i8":
            vals = np.array([rng.randint(-128, 127) for _ in range(n)], dtype=np.int8)
        elif attr == "bias":
            vals = np.array([rng.randint(-3000, 3000) for _ in range(n)], dtype=np.int32)
        elif attr == "requant":
            oc = n // 2
            vals = np.array([rng.randint(1 << 30, (1 << 31) - 1) for _ in range(oc)]
                            + [rng.randint(-12, -4) for _ in range(oc)], dtype=np.int32)
        else:  # softmax exp table: exp(-d k) in Q0.31, 0 beyond a diff_min
            k = rng.choice((0.01, 0.06, 0.3))
            cut = rng.randint(10, 255)
            vals = np.array([0 if d > cut else min((1 << 31) - 1, int(2.718281828 ** (-d * k) * (1 << 31)))
                             for d in range(256)], dtype=np.int32)
        out[names[pname]] = (p.dtype, p.shape, vals.tobytes())
    return out


def graph_container(tensors, meta, alignment=16):
    """Container bytes (the packer's Layout) with `tensors` {name: (dtype, shape, bytes)}."""
    entries = [Entry(name, dt, shape, dt) for name, (dt, shape, _) in sorted(tensors.items(), key=lambda kv: kv[0].encode())]
    layout = Layout(entries, [("format", "mpy-lazy/1.0")] + list(meta), alignment)
    buf = bytearray(layout.file_size)
    for e in entries:
        data = tensors[e.name][2]
        data = (data + bytes(e.nbytes))[:e.nbytes]
        e.crc = zlib.crc32(data)
        buf[e.offset: e.offset + e.nbytes] = data
    buf[: layout.data_offset] = layout.metadata_bytes()
    return bytes(buf)


def _lines(text):
    return text.split("\n")


def _set_graph_value(rng, text, numbers_only, choices):
    """One key=value of one line given a value from `choices` (only numeric values if asked)."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    toks = lines[i].split(" ")
    spots = [k for k, t in enumerate(toks)
             if "=" in t and (not numbers_only or t.split("=", 1)[1][:1] in "-0123456789.")]
    if spots:
        k = rng.choice(spots)
        toks[k] = toks[k].split("=", 1)[0] + "=" + rng.choice(choices)
        lines[i] = " ".join(toks)
    return "\n".join(lines)


def g_number(rng, text):
    """A number (or list of numbers) of one key set to a limit."""
    return _set_graph_value(rng, text, True, GRAPH_NUMBERS)


def g_word(rng, text):
    """A name or word value replaced (dangling names, duplicate outputs, bad enums)."""
    return _set_graph_value(rng, text, False, GRAPH_WORDS)


def g_op(rng, text):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    toks = lines[i].split(" ")
    toks[0] = rng.choice(_graph_ops() + ["frob", "", "#", "conv2D"])
    lines[i] = " ".join(toks)
    return "\n".join(lines)


def g_key(rng, text):
    """A key dropped, repeated, or added (any op's key, with a number or a word)."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    toks = lines[i].split(" ")
    what = rng.randrange(3)
    if what == 0 and len(toks) > 1:
        del toks[rng.randrange(1, len(toks))]
    elif what == 1 and len(toks) > 1:
        toks.append(toks[rng.randrange(1, len(toks))])
    else:
        toks.append(rng.choice(_graph_keys()) + "=" + rng.choice(GRAPH_NUMBERS + GRAPH_WORDS))
    lines[i] = " ".join(toks)
    return "\n".join(lines)


def g_lines(rng, text):
    """A line deleted, repeated or two swapped."""
    lines = _lines(text)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    what = rng.randrange(3)
    if what == 0 and len(lines) > 1:
        del lines[i]
    elif what == 1:
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def g_chars(rng, text):
    """Truncated, or a separator / whitespace / comment character put somewhere."""
    if rng.random() < 0.3:
        return text[: rng.randrange(len(text) + 1)]
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice((",", "=", " ", "  ", "\t", "\r", "\n", "#", "-", "9", "é", ",,")) + text[i:]


def g_element(rng, text):
    """One element of a comma-separated list (or of a single number) set to a limit: a q= scale
    of 1e-45 with a real zero point, one requantization shift of 31, one pad of 4096."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    toks = lines[i].split(" ")
    spots = [k for k, t in enumerate(toks) if "=" in t and t.split("=", 1)[1][:1] in "-0123456789."]
    if spots:
        k = rng.choice(spots)
        key, val = toks[k].split("=", 1)
        parts = val.split(",")
        parts[rng.randrange(len(parts))] = rng.choice(GRAPH_ELEMENTS)
        toks[k] = key + "=" + ",".join(parts)
        lines[i] = " ".join(toks)
    return "\n".join(lines)


GRAPH_MUTATIONS = (g_number, g_number, g_number, g_word, g_word, g_op, g_key, g_key, g_lines, g_chars,
                   g_element, g_element)


def mutate_tensors(rng, tensors):
    """One tensor's shape changed (load must refuse it), or its bytes randomised."""
    tensors = dict(tensors)
    name = rng.choice(sorted(tensors))
    dt, shape, data = tensors[name]
    if rng.random() < 0.5 and shape:
        shape = list(shape)
        k = rng.randrange(len(shape))
        shape[k] = max(1, shape[k] + rng.choice((-1, 1)))
        shape = tuple(shape) if rng.random() < 0.8 or len(shape) == 4 else tuple(shape) + (1,)
    elif dt == "f32" and rng.random() < 0.5:  # non-finite weights (pack refuses them; verify reports them)
        vals = list(struct.unpack("<%df" % (len(data) // 4), data))
        for _ in range(rng.choice((1, 2, len(vals)))):
            vals[rng.randrange(len(vals))] = rng.choice(_NONFINITE)
        data = struct.pack("<%df" % len(vals), *vals)
    else:
        data = rng.randbytes(len(data))
    tensors[name] = (dt, shape, data)
    return tensors


def graph_corpus(count, seed):
    """`count` containers with a model: the base graphs as written (every 10th), the others
    with their description mutated (1 to 3 times; the tensors too, 1 in 8)."""
    rng = random.Random(seed)
    bases = [(text, graph_tensors(rng, text), "graph") for text in BASE_GRAPHS]
    bases.append((BASE_LAYERS, graph_tensors(rng, BASE_LAYERS, layers=True), "layers"))
    for i in range(count):
        text, tensors, key = bases[i % len(bases)]
        if i % 10 >= len(bases):
            for _ in range(rng.choice((1, 1, 2, 3))):
                text = rng.choice(GRAPH_MUTATIONS)(rng, text)
            if rng.random() < 0.125:
                tensors = mutate_tensors(rng, tensors)
        meta = [(key, text)]
        if rng.random() < 0.25:  # the runner is fed NaN / Inf inputs (tools/fuzz.py)
            meta.append(("fuzz", "nonfinite"))
        try:
            yield graph_container(tensors, meta)
        except UnicodeEncodeError:  # a lone surrogate cannot be written: not a container
            yield graph_container(tensors, [(key, "")])


def graph_sweep(text):
    """Deterministic companion of graph_corpus(): for base description `text`, every number
    of every line set to each limit, every op replaced by each op, every line deleted."""
    rng = random.Random(0)
    tensors = graph_tensors(rng, text)
    lines = _lines(text)
    for i, line in enumerate(lines):
        toks = line.split(" ")
        for k, t in enumerate(toks):
            if "=" in t and t.split("=", 1)[1][:1] in "-0123456789.":
                for v in GRAPH_NUMBERS:
                    new = toks[:k] + [t.split("=", 1)[0] + "=" + v] + toks[k + 1:]
                    yield graph_container(tensors, [("graph", "\n".join(lines[:i] + [" ".join(new)] + lines[i + 1:]))])
        for op in _graph_ops():
            if op != toks[0]:
                yield graph_container(tensors, [("graph", "\n".join(lines[:i] + [" ".join([op] + toks[1:])] + lines[i + 1:]))])
        yield graph_container(tensors, [("graph", "\n".join(lines[:i] + lines[i + 1:]))])


# --- stored programs ------------------------------------------------------------------------
# Packed models (goldens, .tflite fixtures and third-party int16 models, packed by the packer)
# whose stored program (the AUX tensor graph.program, docs/FORMAT.md "Program") has words set
# to limits, record kinds and lengths changed, records swapped, tensor references moved; the
# program's data CRC and the header CRC are recomputed, so the runtime's record checks
# (mpy_lazy/check.py) are what must refuse them (tools/fuzz.py program_verdict).

PROGRAM_SOURCES = ("tests/golden/graph_int8.mpyl", "tests/golden/graph_f32.mpyl",
                   "tests/golden/tflite/digits_cnn_int8.tflite", "tests/golden/tflite/ops_int8.tflite",
                   "tests/golden/tflite/ops_float_io.tflite") + tuple(
    "tests/golden/thirdparty/tflite-micro/%s.tflite" % n for n in (
        "hello_world_int8", "seanet_add16", "seanet_conv15", "seanet_leaky_relu18", "seanet_pad0",
        "seanet_quantize1", "seanet_strided_slice0", "seanet_sub1",
        "keyword_scrambled", "mnist_lstm_int8", "mnist_lstm_float", "seanet_transpose_conv4")) + tuple(
    "tests/golden/tflite/%s.tflite" % n for n in ("elem_int8", "elem_f32", "resize_int8", "resize_f32", "cast_f32")) + (
    "tests/golden/legacy/mnv1_025_fc.tflite",)  # (a legacy uint8 layer: conv_u8)
# the record kinds from 42 on (issue 29): control flow, state variables, the signal library, the
# legacy uint8 ops, and the small models tools/fuzz_bases.py picks from the tests (one op each)
PROGRAM_SOURCES += tuple("tests/golden/tflite/%s.tflite" % n for n in ("cond_f32", "while_f32", "stream_f32",
                                                                        "stream_int8")) + (
    "tests/golden/thirdparty/tflite-micro/audio_preprocessor_int8.tflite",
    "tests/golden/thirdparty/tflite-micro/audio_preprocessor_float.tflite", "tests/golden/legacy/ops_u8.tflite")
FUZZ_BASES = "tests/golden/fuzz/bases"
PROGRAM_SOURCES += tuple(sorted(os.path.join(FUZZ_BASES, n) for n in os.listdir(os.path.join(ROOT, FUZZ_BASES))))
PROGRAM_VALUES = (0, 1, -1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 127, 128, -128, -129, 255, 256, 32767, 32768,
                  -32768, 65535, 65536, 1 << 24, (1 << 24) + 1, 2147483647, -2147483648, 1 << 30)


def program_bases():
    """[(container bytes, program byte offset, words, record starts, entry base)]."""
    import tempfile

    from host_tools import cli

    out = []
    with tempfile.TemporaryDirectory(prefix="mpyl-fuzz-programs-") as tmp:
        for src in PROGRAM_SOURCES:
            path = os.path.join(ROOT, src)
            if src.endswith((".tflite", ".onnx")):
                dst = os.path.join(tmp, os.path.basename(src) + ".mpyl")
                if cli.main(["pack", path, "-o", dst, "-q"]) != 0:
                    raise RuntimeError("cannot pack " + src)
                path = dst
            with open(path, "rb") as f:
                data = f.read()
            out.append(_program_base(data))
    return out


def _program_base(data):
    from mpy_lazy import open as open_container
    from mpy_lazy.kinds import H_FIRST, H_RECORDS
    from mpy_lazy.program import NAME

    c = open_container(data)
    info = c.info(NAME)
    words = list(struct.unpack_from("<%di" % (info.nbytes // 4), data, info.offset))
    starts, k = [], words[H_FIRST]
    for _ in range(words[H_RECORDS]):
        starts.append(k)
        k += words[k + 1]
    toff, es = get(data, HEADER, "table_offset"), get(data, HEADER, "entry_size")
    entry = next(toff + i * es for i in range(get(data, HEADER, "tensor_count"))
                 if get(data, ENTRY, "data_offset", toff + i * es) == info.offset)
    return bytes(data), info.offset, len(words), starts, entry


def _word(buf, off, i, value=None):
    if value is None:
        return struct.unpack_from("<i", buf, off + 4 * i)[0]
    value &= 0xFFFFFFFF
    struct.pack_into("<I", buf, off + 4 * i, value)


def p_word(rng, buf, off, n, starts):
    """One word of a record (or of the header and input/output entries) set to a limit or
    moved by a little."""
    i = rng.randrange(n) if rng.random() < 0.3 or not starts else rng.choice(starts) + rng.randrange(2, 12)
    i = min(i, n - 1)
    old = _word(buf, off, i)
    _word(buf, off, i, rng.choice(PROGRAM_VALUES + (old + 1, old - 1, old * 2, old + 4, old - 4, -old)))


def p_kind(rng, buf, off, n, starts):
    """A record's kind changed (its line kept): another kind reads the same fields."""
    from mpy_lazy.kinds import KINDS

    if starts:
        k = rng.choice(starts)
        _word(buf, off, k, (_word(buf, off, k) & ~255) | rng.randrange(0, KINDS + 1))


def p_length(rng, buf, off, n, starts):
    if starts:
        k = rng.choice(starts)
        _word(buf, off, k + 1, rng.choice((0, 1, 2, _word(buf, off, k + 1) + rng.choice((-1, 1)), 1 << 20)))


def p_swap(rng, buf, off, n, starts):
    """Two words swapped (within a record, or across records)."""
    i, j = rng.randrange(n), rng.randrange(n)
    a, b = _word(buf, off, i), _word(buf, off, j)
    _word(buf, off, i, b)
    _word(buf, off, j, a)


def p_header(rng, buf, off, n, starts):
    """A header word (records, arena, inputs, outputs, first record) or an input/output entry
    word set to a limit."""
    i = rng.randrange(min(n, 7 + 10 * 4))
    _word(buf, off, i, rng.choice(PROGRAM_VALUES + (_word(buf, off, i) + rng.choice((-1, 1)),)))


def p_tensor(rng, buf, off, n, starts, tensor_offsets=()):
    """A tensor reference (slot, byte offset) moved to another tensor, off by a little, or
    another slot."""
    if not starts:
        return
    k = rng.choice(starts)
    length = _word(buf, off, k + 1)
    spots = [i for i in range(k + 2, min(k + length, n) - 1) if _word(buf, off, i) == 0
             and _word(buf, off, i + 1) in tensor_offsets]
    if spots:
        i = rng.choice(spots)
        what = rng.randrange(3)
        if what == 0:
            _word(buf, off, i + 1, rng.choice(tensor_offsets))
        elif what == 1:
            _word(buf, off, i + 1, _word(buf, off, i + 1) + rng.choice((-4, -1, 1, 4, 16)))
        else:
            _word(buf, off, i, rng.choice((1, -1, 2)))


PROGRAM_MUTATIONS = (p_word, p_word, p_word, p_word, p_kind, p_length, p_swap, p_header, p_tensor, p_tensor)


def program_corpus(count, seed):
    """`count` packed models, the bases in turn: every base as packed in the first round and
    every 10th round, the others with 1 to 3 program mutations (CRCs recomputed: the data CRC
    of graph.program and the header CRC)."""
    rng = random.Random(seed)
    bases = program_bases()
    offsets = []
    for data, _, _, _, _ in bases:
        toff, es = get(data, HEADER, "table_offset"), get(data, HEADER, "entry_size")
        offsets.append(tuple(get(data, ENTRY, "data_offset", toff + i * es)
                             for i in range(get(data, HEADER, "tensor_count"))))
    for i in range(count):
        b = i % len(bases)
        data, off, n, starts, entry = bases[b]
        buf = bytearray(data)
        if i // len(bases) % 10:
            for _ in range(rng.choice((1, 1, 2, 3))):
                fn = rng.choice(PROGRAM_MUTATIONS)
                if fn is p_tensor:
                    fn(rng, buf, off, n, starts, offsets[b])
                else:
                    fn(rng, buf, off, n, starts)
        put(buf, ENTRY, "data_crc", zlib.crc32(bytes(buf[off: off + 4 * n])), entry)
        yield bytes(fix_crc(buf))
