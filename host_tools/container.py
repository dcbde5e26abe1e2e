"""The container's fixed layout (docs/FORMAT.md) and the writer.

Only the writer lives here; reading a container on the host goes through the runtime
(`mpy_lazy.open`), so there is a single reader."""
import struct
import zlib

MAGIC = b"MPYL"
VERSION = (1, 2)
HEADER_FMT = "<4sBBHIIIIIIIIIII8xI"
ENTRY_FMT = "<IHBB4IIIIBBHfiIB11x"
META_FMT = "<IIII"
HEADER_SIZE = 64
ENTRY_SIZE = 64
META_SIZE = 16
U32_MAX = 0xFFFFFFFF
NO_INDEX = 0xFFFFFFFF
FLAG_AUX = 1
MAX_NAME = 255
MAX_NDIM = 4

QUANT_NONE, QUANT_TENSOR, QUANT_CHANNEL = 0, 1, 2

# Storage dtype codes, their numpy (little-endian) dtype strings and source-only codes.
DTYPES = {"f32": 1, "f16": 2, "i8": 3, "u8": 4, "i16": 5, "u16": 6, "i32": 7, "u32": 8}
NUMPY_DTYPES = {"f32": "<f4", "f16": "<f2", "i8": "i1", "u8": "u1", "i16": "<i2",
                "u16": "<u2", "i32": "<i4", "u32": "<u4"}
ITEMSIZE = {"f32": 4, "f16": 2, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4}
SOURCE_DTYPES = dict(DTYPES, f64=9, bf16=10, i64=11, bool=12)

assert struct.calcsize(HEADER_FMT) == HEADER_SIZE and struct.calcsize(ENTRY_FMT) == ENTRY_SIZE


class PackError(Exception):
    """An expected failure (bad input, bad option): the CLI prints it as one line."""


def align_up(n, alignment):
    return (n + alignment - 1) // alignment * alignment


class Entry:
    """One tensor-table entry; `crc`, `scale` are filled in while the data is written."""

    def __init__(self, name, dtype, shape, source_dtype=0, quant=QUANT_NONE, axis=0, flags=0):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.source_dtype = source_dtype
        self.quant = quant
        self.axis = axis
        self.flags = flags
        self.scale = 0.0
        self.zero_point = 0
        self.scales_index = NO_INDEX
        self.offset = 0
        self.crc = 0
        n = 1
        for d in self.shape:
            n *= d
        self.size = n
        self.nbytes = n * ITEMSIZE[dtype]

    def pack(self, name_offset, name_len):
        shape = list(self.shape) + [0] * (MAX_NDIM - len(self.shape))
        return struct.pack(ENTRY_FMT, name_offset, name_len, DTYPES[self.dtype], len(self.shape),
                           *shape, self.offset, self.nbytes, self.crc, self.quant, self.axis,
                           self.flags, self.scale, self.zero_point, self.scales_index,
                           SOURCE_DTYPES.get(self.source_dtype, 0))


class Layout:
    """Where everything goes, computed from names, shapes and dtypes before any data is read."""

    def __init__(self, entries, meta, alignment):
        self.entries = entries
        self.alignment = alignment
        strings = bytearray()
        self.name_refs = []
        for e in entries:
            b = e.name.encode("utf-8")
            self.name_refs.append((len(strings), len(b)))
            strings += b
        self.meta_refs = []
        for key, value in meta:
            k, v = key.encode("utf-8"), value.encode("utf-8")
            self.meta_refs.append((len(strings), len(k), len(strings) + len(k), len(v)))
            strings += k + v
        self.strings = bytes(strings)
        self.table_offset = HEADER_SIZE
        self.meta_offset = self.table_offset + len(entries) * ENTRY_SIZE
        self.strings_offset = self.meta_offset + len(meta) * META_SIZE
        self.data_offset = align_up(self.strings_offset + len(self.strings), alignment)
        pos = self.data_offset
        for e in entries:
            e.offset = pos
            pos = align_up(pos + e.nbytes, alignment)
        # The last tensor is not padded: the file ends right after its bytes.
        self.file_size = entries[-1].offset + entries[-1].nbytes if entries else self.data_offset

    def metadata_bytes(self):
        """Header, both tables, strings and padding: bytes [0, data_offset), CRC included."""
        body = bytearray()
        for e, (off, n) in zip(self.entries, self.name_refs):
            body += e.pack(off, n)
        for ref in self.meta_refs:
            body += struct.pack(META_FMT, *ref)
        body += self.strings
        body += bytes(self.data_offset - HEADER_SIZE - len(body))
        head = struct.pack(HEADER_FMT, MAGIC, VERSION[0], VERSION[1], ENTRY_SIZE, 0,
                           self.file_size, self.alignment, len(self.entries), self.table_offset,
                           len(self.meta_refs), self.meta_offset, self.strings_offset,
                           len(self.strings), self.data_offset,
                           self.file_size - self.data_offset, 0)
        crc = zlib.crc32(body, zlib.crc32(head[:60]))
        return head[:60] + struct.pack("<I", crc) + bytes(body)
