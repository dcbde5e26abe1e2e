"""Annotated hex dump of a container: every header, table and metadata field, the string table,
padding and each tensor's bytes with decoded values.

    python -m host_tools.hexdump FILE

A documentation and debugging aid: it decodes fields but checks nothing (use `mpy-lazy verify`)."""
import struct
import sys

from .container import ENTRY_FMT, HEADER_FMT, META_FMT, NUMPY_DTYPES

HEADER = ("magic", "version_major", "version_minor", "entry_size", "flags", "file_size",
          "alignment", "tensor_count", "table_offset", "meta_count", "meta_offset",
          "strings_offset", "strings_size", "data_offset", "data_size", "reserved", "header_crc")
ENTRY = ("name_offset", "name_len", "dtype", "ndim", "shape", "data_offset", "nbytes", "data_crc",
         "quant", "quant_axis", "tensor_flags", "scale", "zero_point", "scales_index",
         "source_dtype", "reserved")
DTYPE_NAMES = {1: "f32", 2: "f16", 3: "i8", 4: "u8", 5: "i16", 6: "u16", 7: "i32", 8: "u32",
               9: "f64", 10: "bf16", 11: "i64", 12: "bool", 0: "unknown"}


def _fields(fmt, names):
    """(name, offset, size, struct code) for each field of a struct format; 4I is one field."""
    out, pos, i = [], 0, 0
    codes = []
    j = 1
    while j < len(fmt):
        n = ""
        while fmt[j].isdigit():
            n += fmt[j]
            j += 1
        codes.append((int(n or 1), fmt[j]))
        j += 1
    for count, code in codes:
        size = count if code in "sx" else count * struct.calcsize("<" + code)
        out.append((names[i], pos, size, "<%d%s" % (count, code)))
        pos += size
        i += 1
    # the reserved bytes before header_crc / at the entry end are listed by their own name
    return out


def _hex_lines(data, start, end, label, out, width=16):
    first = True
    pos = start
    while pos < end:
        n = min(width - (pos % width if first and pos % width else 0), end - pos) if first else min(width, end - pos)
        chunk = data[pos:pos + n]
        out.append("%08x  %-48s %s" % (pos, " ".join("%02x" % b for b in chunk), label if first else ""))
        first = False
        pos += n


def _value(code, raw):
    if code.endswith("x"):
        return ""
    v = struct.unpack(code, raw)
    if code.endswith("s"):
        return repr(v[0])
    if len(v) > 1:
        return "[%s]" % ", ".join(str(x) for x in v)
    return repr(v[0]) if isinstance(v[0], float) else str(v[0])


def dump(data):
    out = []
    h = struct.unpack_from(HEADER_FMT, data, 0)
    hd = dict(zip([f for f in HEADER if f != "reserved"], h))
    out.append("== header (64 bytes) ==")
    for name, off, size, code in _fields(HEADER_FMT, HEADER):
        _hex_lines(data, off, off + size, "%-15s %s" % (name, _value(code, data[off:off + size])), out)
    strings_at = hd["strings_offset"]
    names = []
    for i in range(hd["tensor_count"]):
        base = hd["table_offset"] + i * hd["entry_size"]
        e = struct.unpack_from(ENTRY_FMT, data, base)
        name = data[strings_at + e[0]:strings_at + e[0] + e[1]].decode("utf-8", "replace")
        names.append((name, e))
        out.append("== tensor table entry %d: %s ==" % (i, name))
        for fname, off, size, code in _fields(ENTRY_FMT, ENTRY):
            raw = data[base + off:base + off + size]
            note = _value(code, raw)
            if fname in ("dtype", "source_dtype"):
                note += " (%s)" % DTYPE_NAMES.get(int(note), "?")
            _hex_lines(data, base + off, base + off + size, "%-15s %s" % (fname, note), out)
    for i in range(hd["meta_count"]):
        base = hd["meta_offset"] + 16 * i
        ko, kl, vo, vl = struct.unpack_from(META_FMT, data, base)
        key = data[strings_at + ko:strings_at + ko + kl].decode("utf-8", "replace")
        value = data[strings_at + vo:strings_at + vo + vl].decode("utf-8", "replace")
        out.append("== metadata entry %d: %s = %s ==" % (i, key, value))
        for j, fname in enumerate(("key_offset", "key_len", "value_offset", "value_len")):
            _hex_lines(data, base + 4 * j, base + 4 * j + 4, "%-15s %d" % (fname, (ko, kl, vo, vl)[j]), out)
    out.append("== string table (%d bytes) ==" % hd["strings_size"])
    end = strings_at + hd["strings_size"]
    pos = strings_at
    while pos < end:
        n = min(16, end - pos)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in data[pos:pos + n])
        out.append("%08x  %-48s |%s|" % (pos, " ".join("%02x" % b for b in data[pos:pos + n]), text))
        pos += n
    pos = end
    for name, e in names:
        offset, nbytes = e[8], e[9]
        if offset > pos:
            out.append("%08x  (%d zero bytes of padding)" % (pos, offset - pos))
        dtype = DTYPE_NAMES[e[2]]
        shape = list(e[4:4 + e[3]])
        out.append("== data: %s, %s %s, %d bytes at %d ==" % (name, dtype, shape, nbytes, offset))
        _values(data, offset, nbytes, dtype, out)
        pos = offset + nbytes
    if len(data) > pos:
        out.append("%08x  (%d bytes after the tensors)" % (pos, len(data) - pos))
    out.append("%08x  end of file" % len(data))
    return "\n".join(out)


def _values(data, offset, nbytes, dtype, out):
    code = NUMPY_DTYPES[dtype][-2:]
    code = {"f4": "f", "f2": "e", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I"}[code]
    size = struct.calcsize(code)
    per_line = 16 // size * size
    pos = offset
    while pos < offset + nbytes:
        n = min(per_line, offset + nbytes - pos)
        vals = struct.unpack_from("<%d%s" % (n // size, code), data, pos)
        text = ", ".join(("%.7g" % v) if isinstance(v, float) else str(v) for v in vals)
        out.append("%08x  %-48s %s" % (pos, " ".join("%02x" % b for b in data[pos:pos + n]), text))
        pos += n


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m host_tools.hexdump FILE", file=sys.stderr)
        return 2
    with open(argv[0], "rb") as f:
        print(dump(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
