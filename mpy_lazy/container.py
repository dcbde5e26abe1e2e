# Reader for the mpy-lazy container, format v1.0 (docs/FORMAT.md, "Rules a reader enforces").
#
# Trusts nothing: every count, offset and length is checked against the bytes that exist before
# it is used, so a bad file raises ContainerError (never IndexError, never a view outside the
# buffer) and the work done is bounded by the buffer size, not by a count read from the file.
# Per-tensor state is not kept after open(): entries are re-read (already validated) on demand,
# so an open container costs a few hundred bytes of heap whatever its size.
import struct
from binascii import crc32

from . import backend
from .backend import DTYPES, ITEMSIZE, STRUCT

try:
    import uctypes
except ImportError:
    uctypes = None

_HEADER = "<4sBBHIIIIIIIIIII8xI"
_ENTRY = "<IHBB4IIIIBBHfiIB11x"
_META = "<IIII"
_AUX = 1
_NO_INDEX = 0xFFFFFFFF
_SOURCE = DTYPES + ("f64", "bf16", "i64", "bool")  # source_dtype codes 1..12
_UCTYPES = {"f32": "FLOAT32", "i8": "INT8", "u8": "UINT8", "i16": "INT16", "u16": "UINT16",
            "i32": "INT32", "u32": "UINT32"}


class ContainerError(ValueError):
    """A container breaks a rule of docs/FORMAT.md (or a model does not match one, see load()).

    `tensor` is the tensor's name (its table index while the name is not yet known, None for
    the header), `field` the FORMAT.md field that is wrong."""

    def __init__(self, msg, tensor=None, field=None):
        super().__init__(msg)
        self.tensor = tensor
        self.field = field


def _fail(field, detail, tensor=None, where=None):
    if where is not None:
        pass
    elif tensor is None:
        where = "header"
    elif isinstance(tensor, int):
        where = "tensor #%d" % tensor
    else:
        where = "tensor %r" % tensor
    raise ContainerError("%s: %s: %s" % (where, field, detail), tensor, field)


def _char(b, i, n):
    """How many continuation bytes the UTF-8 character starting at b[i] has (1..3), if a valid
    (RFC 3629) character starts there and ends before index n; else -1."""
    c = b[i]
    lo, hi = 0x80, 0xBF
    if 0xC2 <= c <= 0xDF:
        k = 1
    elif 0xE0 <= c <= 0xEF:
        k = 2
        if c == 0xE0:
            lo = 0xA0  # no overlong forms
        elif c == 0xED:
            hi = 0x9F  # no surrogates
    elif 0xF0 <= c <= 0xF4:
        k = 3
        if c == 0xF0:
            lo = 0x90
        elif c == 0xF4:
            hi = 0x8F  # nothing above U+10FFFF
    else:
        return -1
    if i + k >= n or not lo <= b[i + 1] <= hi:
        return -1
    for j in range(i + 2, i + k + 1):
        if not 0x80 <= b[j] <= 0xBF:
            return -1
    return k


def utf8(b):
    """The str of bytes `b` if they are valid UTF-8 (RFC 3629), else None.

    MicroPython's own decoder accepts overlong forms, surrogates and code points above
    U+10FFFF; this gives the same verdict as CPython on both interpreters."""
    try:
        s = str(b, "utf-8")
    except UnicodeError:
        return None
    n = len(b)
    if len(s) == n:  # pure ASCII (every accepted non-ASCII sequence shortens the str)
        return s
    i = 0
    while i < n:
        if b[i] < 0x80:
            i += 1
            continue
        k = _char(b, i, n)
        if k < 0:
            return None
        i += k + 1
    return s


_CHUNK = 128  # string table bytes checked at a time for the all-ASCII fast path


def _scan(mv, s, n):
    """Validate the string table (n bytes at mv[s:]) once, in one pass: None when it is valid
    UTF-8 as a whole (what every writer produces: then a span of it is valid exactly when it
    starts and ends on a character boundary), else a bytearray of n marks: 0 for a byte that
    starts a valid character (ASCII included), 1 for a continuation byte of one, 2 for any
    other byte. The names and metadata that point into the table, however many and however
    they overlap, are then checked in O(1) each (_span_ok), not byte by byte: the work is linear
    in the table's size (issue 13: n entries sharing one value used to cost n x its length)."""
    marks = None
    i = 0
    while i < n:
        end = i + _CHUNK if i + _CHUNK < n else n
        try:
            if len(str(bytes(mv[s + i : s + end]), "utf-8")) == end - i:
                i = end  # all ASCII: marks stay 0
                continue
        except UnicodeError:
            pass
        while i < end:
            if mv[s + i] < 0x80:
                i += 1
                continue
            k = _char(mv, s + i, s + n)
            if k < 0:
                if marks is None:  # the first bad byte: mark the (valid) bytes before it
                    marks = bytearray(n)
                    for j in range(i):
                        if 0x80 <= mv[s + j] <= 0xBF:
                            marks[j] = 1
                marks[i] = 2
                i += 1
                continue
            if marks is not None:
                for j in range(i + 1, i + k + 1):
                    marks[j] = 1
            i += k + 1
    return marks


def _span_ok(mv, s, n, marks, a, b):
    """Bytes [a, b) of the string table (n bytes at mv[s:], marks from _scan) are valid UTF-8:
    the same verdict as utf8() on them, in O(1) lines."""
    if a == b:
        return True
    if marks is None:  # a valid table: no character cut at either end
        return not 0x80 <= mv[s + a] <= 0xBF and (b == n or not 0x80 <= mv[s + b] <= 0xBF)
    return marks[a] == 0 and marks.find(b"\x02", a, b) < 0 and (b == n or marks[b] != 1)


def _overlap(starts, ends, lo, hi):
    """(a, b): two tensors whose bytes [starts[i], ends[i]) overlap, b starting no earlier than
    a, or None. Every range lies in [lo, hi] and holds at least one byte. Linear work whatever
    the order: one pass when the tensors are in table order (as the packer writes them), else a
    bucket pass (no sort of the whole list: MicroPython's sort is a quicksort pivoting on the
    last element, quadratic on sorted input)."""
    n = len(starts)
    k = 1
    while k < n and ends[k - 1] <= starts[k]:
        k += 1
    if k >= n:
        return None
    # n buckets of w bytes; starts in one bucket are sorted by insertion. The ones that do not
    # repeat lie at distinct multiples of the alignment, so a bucket holds at most w / 4 + 1 of
    # them and the insertions cost at most (hi - lo) / 4 + 2n steps in all.
    w = (hi - lo) // n + 1
    first = [0] * (n + 1)
    for i in range(n):
        first[(starts[i] - lo) // w + 1] += 1
    for b in range(n):
        first[b + 1] += first[b]
    fill = first[:]
    order = [0] * n
    for i in range(n):
        b = (starts[i] - lo) // w
        j = fill[b]
        fill[b] = j + 1
        s = starts[i]
        while j > first[b] and starts[order[j - 1]] > s:  # insertion into the bucket's run
            order[j] = order[j - 1]
            j -= 1
        if j > first[b] and starts[order[j - 1]] == s:
            return order[j - 1], i
        order[j] = i
    for k in range(1, n):
        a, b = order[k - 1], order[k]
        if starts[b] < ends[a]:
            return a, b
    return None


class TensorInfo:
    """One tensor-table entry, decoded. Fields as in FORMAT.md; `dtype` is the storage dtype
    name, `scales` the name of the per-channel scales tensor (or None), `size` the element
    count, `index` the table index, `aux` the AUX flag, `axis` the quant_axis.

    The fields are read from the (validated) entry when asked for: an info costs three
    attributes, which matters when load() makes one per tensor on a board."""

    scales = None  # set for per-channel tensors

    def __init__(self, name, index, table):
        self.name = name
        self.index = index
        self._t = table

    def _u(self, fmt, off):
        t = self._t
        return struct.unpack_from(fmt, t._mv, t._toff + self.index * t._esize + off)

    dtype = property(lambda self: DTYPES[self._u("<B", 6)[0]])
    shape = property(lambda self: self._u("<%dI" % self._u("<B", 7)[0], 8))
    offset = property(lambda self: self._u("<I", 24)[0])
    nbytes = property(lambda self: self._u("<I", 28)[0])
    crc = property(lambda self: self._u("<I", 32)[0])
    quant = property(lambda self: self._u("<B", 36)[0])
    axis = property(lambda self: self._u("<B", 37)[0])
    aux = property(lambda self: bool(self._u("<H", 38)[0] & _AUX))
    scale = property(lambda self: self._u("<f", 40)[0])
    zero_point = property(lambda self: self._u("<i", 44)[0])
    scales_index = property(lambda self: self._u("<I", 48)[0])
    source_dtype = property(lambda self: _SOURCE[self._u("<B", 52)[0]] if self._u("<B", 52)[0] < len(_SOURCE) else None)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return "<TensorInfo %s %s%s %d bytes at %d>" % (
            self.name, self.dtype, self.shape, self.nbytes, self.offset)


class _Table:
    """Header, tensor table, metadata and strings of a container (shared by Container and
    Stream). `_mv` holds at least bytes [0, data_offset). Instance attributes are kept few
    (each costs heap on MicroPython): header fields the hot paths do not need are read from
    the (validated) header bytes on demand."""

    _meta = None  # metadata dict, decoded on first use
    _index = None  # name -> table index, only when the names are not sorted
    _ascending = None  # whether the data offsets ascend in table order (Container._tensor_at)

    def _header(self, mv, total):
        # rules 1-4: only the header and the source length are needed
        if total < 64 or len(mv) < 64:
            _fail("length", "%d bytes, a container has at least 64" % total)
        (magic, major, minor, esize, flags, fsize, align, count, toff, mcount, moff, soff,
         ssize, doff, dsize, hcrc) = struct.unpack_from(_HEADER, mv, 0)
        if magic != b"MPYL":
            _fail("magic", "%r is not b'MPYL'" % magic)
        if major != 1:
            _fail("version_major", "%d.%d, this reader reads 1.x" % (major, minor))
        if flags:
            _fail("flags", "unknown feature bits 0x%x" % flags)
        if fsize > total:
            _fail("file_size", "%d but only %d bytes are there (truncated?)" % (fsize, total))
        if not 4 <= align <= 4096 or align & (align - 1):
            _fail("alignment", "%d is not a power of two in 4..4096" % align)
        if esize < 64:
            _fail("entry_size", "%d < 64" % esize)
        if toff < 64:
            _fail("table_offset", "%d < 64" % toff)
        if doff % align:
            _fail("data_offset", "%d is not a multiple of alignment %d" % (doff, align))
        if doff > fsize:
            _fail("data_offset", "%d is past file_size %d" % (doff, fsize))
        if dsize != fsize - doff:
            _fail("data_size", "%d != file_size - data_offset = %d" % (dsize, fsize - doff))
        # counts are checked against the room they need before anything is multiplied or read
        regions = []
        for field, start, cnt, size, cnt_field in (
            ("table_offset", toff, count, esize, "tensor_count"),
            ("meta_offset", moff, mcount, 16, "meta_count"),
            ("strings_offset", soff, ssize, 1, "strings_size"),
        ):
            if not 64 <= start <= doff:
                _fail(field, "%d is outside [64, data_offset %d]" % (start, doff))
            if cnt > (doff - start) // size:
                _fail(cnt_field, "%d x %d bytes from %d do not fit before data_offset %d"
                      % (cnt, size, start, doff))
            if cnt:
                for other, s, e in regions:
                    if start < e and s < start + cnt * size:
                        _fail(field, "overlaps the %s region" % other)
                regions.append((field, start, start + cnt * size))
        self._mv = mv  # version, alignment, file_size, data_offset are read from it
        self._esize, self._count, self._toff = esize, count, toff
        self._mcount, self._moff, self._soff, self._ssize = mcount, moff, soff, ssize

    @property
    def version(self):
        return struct.unpack_from("<BB", self._mv, 4)

    @property
    def file_size(self):
        return struct.unpack_from("<I", self._mv, 12)[0]

    @property
    def alignment(self):
        return struct.unpack_from("<I", self._mv, 16)[0]

    @property
    def data_offset(self):
        return struct.unpack_from("<I", self._mv, 44)[0]

    def _tables(self, mv):
        # rules 5-7; mv holds [0, data_offset)
        self._mv = mv
        doff = self.data_offset
        crc = crc32(mv[64:doff], crc32(mv[0:60])) & 0xFFFFFFFF
        stored = struct.unpack_from("<I", mv, 60)[0]
        if crc != stored:
            _fail("header_crc", "0x%08x stored, 0x%08x computed" % (stored, crc))
        count = self._count
        soff, ssize = self._soff, self._ssize
        marks = _scan(mv, soff, ssize)  # every string below is checked against it in O(1)
        starts, ends, per_channel = [], [], []
        prev, ordered = None, True
        for i in range(count):
            e = self._entry(i)
            name_b = self._name_bytes(i, e)
            if not _span_ok(mv, soff, ssize, marks, e[0], e[0] + e[1]):
                _fail("name", "not valid UTF-8", i)
            name = str(name_b, "utf-8")
            if ordered and prev is not None and not prev < name_b:
                ordered = False  # the packer sorts names; any other order needs a dict
            prev = name_b
            self._check_entry(name, e, i, count, doff)
            if e[11] == 2:
                per_channel.append(i)
            starts.append(e[8])
            ends.append(e[8] + e[9])
        if not ordered:
            index = {}
            for i in range(count):
                name = str(self._name_bytes(i, self._entry(i)), "utf-8")
                if name in index:
                    _fail("name", "duplicate name", name)
                index[name] = i
            self._index = index
        pair = _overlap(starts, ends, doff, self.file_size)
        if pair:
            _fail("data_offset", "overlaps tensor %r" % self._name(pair[0]), self._name(pair[1]))
        del starts, ends
        for i in per_channel:
            self._check_scales(i)
        seen = {}
        total = 0
        for k in range(self._mcount):
            ko, kl, vo, vl = self._meta_refs(k)
            where = "metadata #%d" % k
            if not _span_ok(mv, soff, ssize, marks, ko, ko + kl):
                _fail("key", "not valid UTF-8", where=where)
            key = str(bytes(mv[soff + ko : soff + ko + kl]), "utf-8")
            if not _span_ok(mv, soff, ssize, marks, vo, vo + vl):
                _fail("value", "not valid UTF-8", where="metadata %r" % key)
            if not key:
                _fail("key", "empty metadata key", where=where)
            if key in seen:
                _fail("key", "duplicate metadata key %r" % key, where=where)
            seen[key] = True
            # keys and values share no bytes (rule 7), so decoding all of them (c.meta) costs
            # at most the table's size: entries pointing at one long value are refused here
            total += kl + vl
            if total > ssize:
                _fail("strings_size", "metadata keys and values add up to more than the %d bytes "
                      "of the string table (they share bytes)" % ssize, where=where)

    def _entry(self, i):
        return struct.unpack_from(_ENTRY, self._mv, self._toff + i * self._esize)

    def _name_bytes(self, i, e):
        off, n = e[0], e[1]
        if not 1 <= n <= 255:
            _fail("name_len", "%d is not in 1..255" % n, i)
        if off > self._ssize - n:
            _fail("name_offset", "%d + name_len %d is past strings_size %d" % (off, n, self._ssize), i)
        start = self._soff + off
        return bytes(self._mv[start : start + n])

    def _name(self, i):
        return str(self._name_bytes(i, self._entry(i)), "utf-8")

    def _check_entry(self, name, e, i, count, doff):
        code, ndim = e[2], e[3]
        if not 1 <= code <= 8:
            _fail("dtype", "unknown dtype code %d" % code, name)
        if ndim > 4:
            _fail("ndim", "%d > 4" % ndim, name)
        n = 1
        for k in range(4):
            d = e[4 + k]
            if k < ndim and d < 1:
                _fail("shape", "dimension %d is 0" % k, name)
            if k >= ndim and d:
                _fail("shape", "unused dimension %d is %d, not 0" % (k, d), name)
            if k < ndim:
                n *= d
        dtype = DTYPES[code]
        if e[9] != n * ITEMSIZE[dtype]:
            _fail("nbytes", "%d != %d elements x %d bytes" % (e[9], n, ITEMSIZE[dtype]), name)
        off = e[8]
        if off % self.alignment:
            _fail("data_offset", "%d is not a multiple of alignment %d" % (off, self.alignment), name)
        if off < doff or off > self.file_size - e[9]:
            _fail("data_offset", "[%d, %d) is outside the data section [%d, %d)"
                  % (off, off + e[9], doff, self.file_size), name)
        if e[13] & ~_AUX:
            _fail("tensor_flags", "unknown bits 0x%x" % e[13], name)
        quant, axis, scale, zp, sidx = e[11], e[12], e[14], e[15], e[16]
        if quant == 0:
            if axis or scale or zp or sidx != _NO_INDEX:
                _fail("quant", "unquantized tensor with quant_axis/scale/zero_point/scales_index set", name)
        elif quant == 1:
            if dtype != "i8":
                _fail("dtype", "int8 per-tensor quantization needs dtype i8, not %s" % dtype, name)
            if not (scale - scale == 0 and scale > 0):  # finite and > 0 (inf - inf is nan)
                _fail("scale", "%r is not finite and > 0" % scale, name)
            if not -128 <= zp <= 127:
                _fail("zero_point", "%d is not in -128..127" % zp, name)
            if axis or sidx != _NO_INDEX:
                _fail("quant", "per-tensor quantization with quant_axis/scales_index set", name)
        elif quant == 2:
            if dtype != "i8":
                _fail("dtype", "int8 per-channel quantization needs dtype i8, not %s" % dtype, name)
            if axis >= ndim:
                _fail("quant_axis", "%d but ndim is %d" % (axis, ndim), name)
            if scale or zp:
                _fail("quant", "per-channel quantization with scale/zero_point set", name)
            if sidx >= count or sidx == i:
                _fail("scales_index", "%d is not another tensor's index" % sidx, name)
        else:
            _fail("quant", "unknown quantization %d" % quant, name)

    def _check_scales(self, i):
        e = self._entry(i)
        s = self._entry(e[16])
        name = self._name(i)
        if s[2] != 1 or s[3] != 1 or s[4] != e[4 + e[12]] or not s[13] & _AUX:
            _fail("scales_index", "tensor %r is not an AUX f32 vector of %d scales"
                  % (self._name(e[16]), e[4 + e[12]]), name)

    def _meta_refs(self, k):
        """(key_offset, key_len, value_offset, value_len) of metadata entry k, inside the table."""
        ko, kl, vo, vl = struct.unpack_from(_META, self._mv, self._moff + 16 * k)
        if ko > self._ssize - kl or vo > self._ssize - vl:
            _fail("key" if ko > self._ssize - kl else "value", "outside the string table",
                  where="metadata #%d" % k)
        return ko, kl, vo, vl

    def _meta_entry(self, k):
        """(key, value) of metadata entry k (validated at open: decoded, not checked again)."""
        ko, kl, vo, vl = self._meta_refs(k)
        mv, s = self._mv, self._soff
        return str(bytes(mv[s + ko : s + ko + kl]), "utf-8"), str(bytes(mv[s + vo : s + vo + vl]), "utf-8")

    @property
    def meta(self):
        """Metadata as a dict str -> str (decoded on first use)."""
        if self._meta is None:
            m = {}
            for k in range(self._mcount):
                key, value = self._meta_entry(k)
                m[key] = value
            self._meta = m
        return self._meta

    def _meta_get(self, key):
        """One metadata value (None if absent), without decoding and keeping the whole dict."""
        if self._meta is not None:
            return self._meta.get(key)
        want = key.encode("utf-8")
        mv, s = self._mv, self._soff
        for k in range(self._mcount):
            ko, kl, vo, vl = self._meta_refs(k)
            if kl == len(want) and bytes(mv[s + ko : s + ko + kl]) == want:  # no other key decoded
                return str(bytes(mv[s + vo : s + vo + vl]), "utf-8")
        return None

    def _find(self, name):
        if self._index is not None:
            i = self._index.get(name)
        else:  # names are sorted (checked at open): binary search on their UTF-8 bytes
            key = name.encode("utf-8") if isinstance(name, str) else None
            i, lo, hi = None, 0, self._count
            while key is not None and lo < hi:
                mid = (lo + hi) // 2
                c = self._compare(mid, key)
                if c == 0:
                    i = mid
                    break
                if c < 0:
                    lo = mid + 1
                else:
                    hi = mid
        if i is None:
            raise KeyError(name)
        return i

    def _compare(self, i, key):
        """-1, 0 or 1 as tensor i's name sorts before, equals or after `key` (bytes), read in
        place: no entry decoded, no name copied (load() looks up every tensor)."""
        off, n = struct.unpack_from("<IH", self._mv, self._toff + i * self._esize)
        mv, s, k = self._mv, self._soff + off, len(key)
        for j in range(n if n < k else k):
            a, b = mv[s + j], key[j]
            if a != b:
                return -1 if a < b else 1
        return 0 if n == k else (-1 if n < k else 1)

    def __contains__(self, name):
        try:
            self._find(name)
            return True
        except KeyError:
            return False

    def __len__(self):
        return self._count

    def count(self, aux=False):
        """How many tensors (AUX scale tensors only if aux=True), no names decoded."""
        if aux:
            return self._count
        n = 0
        for i in range(self._count):
            if not self._mv[self._toff + i * self._esize + 38] & _AUX:  # tensor_flags, low byte
                n += 1
        return n

    def names(self, aux=False):
        """Tensor names in table order; AUX (quantization scale) tensors only if aux=True."""
        out = []
        for i in range(self._count):
            e = self._entry(i)
            if aux or not e[13] & _AUX:
                out.append(str(self._name_bytes(i, e), "utf-8"))
        return out

    def info(self, name):
        """TensorInfo of tensor `name` (KeyError if there is none)."""
        return self._info(self._find(name), name)

    def _info(self, i, name=None):
        t = TensorInfo(name if name is not None else self._name(i), i, self)
        if t.quant == 2:
            t.scales = self._name(t.scales_index)
        return t


class Container(_Table):
    """A container read in place from a buffer (bytes, bytearray, memoryview, frozen bytes,
    memoryview of a file on vfs.VfsRom). Nothing is copied; views keep the buffer alive."""

    def __init__(self, buf):
        mv = memoryview(buf)
        if hasattr(mv, "toreadonly"):  # CPython: views cannot write into the caller's buffer
            if mv.format != "B" or mv.ndim != 1:
                mv = mv.cast("B")
            mv = mv.toreadonly()
        elif len(mv) and len(bytes(mv[0:1])) != 1:  # MicroPython: a typed array's memoryview
            raise TypeError("a container buffer must be bytes-like, not an array of items")
        self._header(mv, len(mv))
        self._tables(mv[: self.file_size])

    def view(self, name):
        """Read-only zero-copy View of tensor `name`."""
        return self._view(self._find(name))

    def _view(self, i):
        base = self._toff + i * self._esize
        dtype = DTYPES[self._mv[base + 6]]
        off, n = struct.unpack_from("<II", self._mv, base + 24)  # data_offset, nbytes
        mv = self._mv[off : off + n]
        base = _address(mv)
        if base is None or base % ITEMSIZE[dtype] == 0:
            return View(self, i, dtype, mv)
        # unaligned loads fault on some cores: use an aligned RAM copy
        mv = memoryview(bytearray(mv))
        if hasattr(mv, "toreadonly"):
            mv = mv.toreadonly()
        v = View(self, i, dtype, mv)
        v.aligned = False
        return v

    def _tensor_at(self, off):
        """(dtype, nbytes) of the tensor whose data starts at byte `off`, or None: how a
        program's records (mpy_lazy/program.py) are checked against the table. A binary
        search over the data offsets, which the writer puts in table order (a container
        whose offsets are not ascending answers None: its program is refused)."""
        if self._ascending is None:
            prev, ok = -1, True
            for i in range(self._count):
                o = struct.unpack_from("<I", self._mv, self._toff + i * self._esize + 24)[0]
                if o <= prev:
                    ok = False
                    break
                prev = o
            self._ascending = ok
        if not self._ascending:
            return None
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            base = self._toff + mid * self._esize
            o = struct.unpack_from("<I", self._mv, base + 24)[0]
            if o == off:
                return DTYPES[self._mv[base + 6]], struct.unpack_from("<I", self._mv, base + 28)[0]
            if o < off:
                lo = mid + 1
            else:
                hi = mid
        return None

    def check(self, name):
        """Check the CRC-32 of tensor `name`; ContainerError on mismatch."""
        self._check(self._find(name))

    def _check(self, i):
        e = self._entry(i)
        crc = crc32(self._mv[e[8] : e[8] + e[9]]) & 0xFFFFFFFF
        if crc != e[10]:
            _fail("data_crc", "0x%08x stored, 0x%08x computed" % (e[10], crc), self._name(i))

    def verify(self):
        """Check the CRC-32 of every tensor; returns how many were checked."""
        for i in range(self._count):
            self._check(i)
        return self._count


def _address(mv):
    """Address of the first byte of mv, or None where it cannot be known (then nothing that
    reads it cares about alignment: struct, pure Python)."""
    if uctypes:
        return uctypes.addressof(mv)
    if backend.kind() == "numpy" and len(mv):
        return backend.np.frombuffer(mv, "u1").__array_interface__["data"][0]
    return None


class View:
    """Read-only view of one tensor's bytes, in place in the container buffer (or in an aligned
    RAM copy when the buffer address is unaligned for the dtype: `aligned` is then False).

    v[i] is the raw stored value of flat element i (f16 decoded to float), real(i) its
    dequantized value. Everything the public methods hand out is read-only or a copy (issue 13:
    no public path writes to flash): array() is a read-only array (numpy, flags.writeable False,
    on CPython; a ReadOnlyArray on MicroPython, whose uctypes and ulab arrays would write
    straight through), buffer() a read-only memoryview or a copy.

    `mv` (a memoryview of exactly the tensor's bytes) and `_array()` (the zero-copy typed
    array, writable on MicroPython) are the kernels' internal access, not public API: on
    MicroPython `mv` is writable when the container buffer is a bytearray.

    Four instance attributes (a bound Param holds one View): everything else is read from
    the container's table on demand."""

    aligned = True  # set False on the instance for an unaligned-fallback copy
    _decoded = None  # f16 decoded to f32 by array() where the backend lacks f16
    _ro = None  # the ReadOnlyArray array() hands out on MicroPython, once made
    _real = None  # the RealView of a quantized tensor a float Param's val() hands out, once made

    def __init__(self, container, index, dtype, mv):
        self._c = container
        self.index = index
        self.dtype = dtype
        self.mv = mv

    @property
    def info(self):
        return self._c._info(self.index)

    @property
    def name(self):
        return self._c._name(self.index)

    @property
    def shape(self):
        return tuple(self.info.shape)

    @property
    def nbytes(self):
        return len(self.mv)

    @property
    def size(self):
        return len(self.mv) // ITEMSIZE[self.dtype]

    @property
    def ram_bytes(self):
        """Heap bytes this view holds: its unaligned-fallback copy and decoded f16 array."""
        n = 0 if self.aligned else len(self.mv)
        if self._decoded is not None:
            n += backend.array_nbytes(self._decoded)
        return n

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        n = self.size
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index %d out of range for %d elements" % (i, n))
        return struct.unpack_from("<" + STRUCT[self.dtype], self.mv, i * ITEMSIZE[self.dtype])[0]

    def tolist(self):
        """Raw stored values, flat."""
        return list(struct.unpack_from("<%d%s" % (self.size, STRUCT[self.dtype]), self.mv, 0))

    def real(self, i):
        """Dequantized value of flat element i."""
        q = self[i]
        info = self.info
        if info.quant == 1:
            return info.scale * (q - info.zero_point)
        if info.quant == 2:
            return self._scales()[self._channel(i, info)] * q
        return q

    def scales(self):
        """View of the per-channel scales tensor, or None."""
        info = self.info
        return self._c._view(info.scales_index) if info.quant == 2 else None

    def _scales(self):
        s = self.scales()
        return struct.unpack_from("<%df" % s.size, s.mv, 0)

    def _channel(self, i, info):
        inner = 1
        for d in info.shape[info.axis + 1 :]:
            inner *= d
        return (i // inner) % info.shape[info.axis]

    def check(self):
        """CRC-32 of this tensor (ContainerError on mismatch)."""
        self._c._check(self.index)

    def buffer(self):
        """The tensor's bytes, read-only: a read-only memoryview in place where the interpreter
        enforces it (CPython; MicroPython when the container buffer itself is read-only: bytes,
        a frozen bytes constant, a ROMFS file), else (MicroPython over a bytearray) a read-only
        memoryview of a copy."""
        mv = self.mv
        if hasattr(mv, "toreadonly"):
            return mv  # CPython: Container made it read-only
        try:  # asks for a writable buffer and writes nothing (a zero-length slice assignment
            struct.pack_into("<", mv, 0)  # moves bytes onto themselves: a fault on flash)
        except TypeError:
            return mv  # a read-only memoryview
        return memoryview(bytes(mv))

    def array(self):
        """Flat typed array of the stored values, zero-copy and read-only: numpy with
        flags.writeable False on CPython; on MicroPython a ReadOnlyArray (indexing, len,
        iteration, tolist(); item assignment raises TypeError) over the ulab or uctypes array
        that reads the container in place. Where the backend has no f16 the values are decoded
        once into a RAM f32 array (counted in ram_bytes). The result keeps this View alive."""
        if self._ro is not None:
            return self._ro
        a = self._array()
        if backend.kind() == "numpy" or isinstance(a, memoryview):
            return a  # read-only already (CPython)
        from ._readonly import ReadOnlyArray  # imported on first use: heap is scarce

        self._ro = ReadOnlyArray(a, self)  # made once per View
        return self._ro

    def _array(self):
        """array() without the read-only wrapper: the kernels' zero-copy access (on MicroPython
        its items write straight to the container: never hand it out). Keep the View alive
        while using it: ulab and uctypes arrays hold no reference to it."""
        k = backend.kind()
        dt = self.dtype
        if k == "numpy":
            a = backend.np.frombuffer(self.mv, "<f2" if dt == "f16" else backend._NUMPY[dt])
            a.flags.writeable = False
            return a
        if dt == "f16" or (k == "ulab" and dt == "f32" and not backend.SINGLE_FLOAT):
            if self._decoded is None:
                self._decoded = self.dequantize() if dt == "f16" else self._decode_f32()
            return self._decoded
        if k == "ulab" and backend.np_dtype(dt) is not None:
            return backend.np.frombuffer(self.mv, dtype=backend.np_dtype(dt))
        if uctypes:
            layout = {"a": (uctypes.ARRAY | 0, getattr(uctypes, _UCTYPES[dt]) | self.size)}
            return uctypes.struct(uctypes.addressof(self.mv), layout, uctypes.LITTLE_ENDIAN).a
        return self.mv.cast(STRUCT[dt])

    def _decode_f32(self):  # ulab built with double floats: f32 storage needs a RAM copy
        out = backend.new_array("f32", self.size)
        for i in range(self.size):
            out[i] = self[i]
        return out

    def dequantize(self, out=None):
        """Real values as a new (or the given) flat RAM f32 array: f16 decoded, int8 scaled.
        The kernels' dequant helper and what Param.mut() copies a bound float param into."""
        info = self.info
        n = info.size
        if out is None:
            out = backend.new_array("f32", n)
        if backend.kind() == "numpy":
            np = backend.np
            q = self.array().astype(np.float32)
            if info.quant == 1:
                q = (q - info.zero_point) * np.float32(info.scale)
            elif info.quant == 2:
                s = np.frombuffer(self.scales().mv, "<f4")
                shp = [1] * len(info.shape)
                shp[info.axis] = len(s)
                q = (q.reshape(info.shape) * s.reshape(shp)).reshape(-1)
            out[:] = q
            return out
        fmt = STRUCT[info.dtype]
        step = ITEMSIZE[info.dtype]
        scales = self._scales() if info.quant == 2 else None
        # ulab stores an int into a float array through a C int: on a 32-bit port an i32/u32
        # value outside the 31-bit small ints raises OverflowError, so hand it a float
        wide = not info.quant and fmt in "iI"
        i = 0
        while i < n:
            m = min(32, n - i)  # decode in chunks: bounded temporary tuples
            vals = struct.unpack_from("<%d%s" % (m, fmt), self.mv, i * step)
            for j in range(m):
                q = vals[j]
                if info.quant == 1:
                    q = info.scale * (q - info.zero_point)
                elif scales is not None:
                    q = scales[self._channel(i + j, info)] * q
                elif wide:
                    q = float(q)
                out[i + j] = q
            i += m
        return out

    def __repr__(self):
        return "<View %s %s%s%s>" % (self.name, self.dtype, self.shape, "" if self.aligned else " RAM copy")


class Stream(_Table):
    """Streaming fallback for a container in a file that cannot be mapped (FAT, littlefs,
    posix): same table API (names, info, meta, in), reads the header and tables only (the bytes
    before data_offset) and then one tensor, or a chunk of one, at a time into a caller buffer."""

    def __init__(self, path):
        f = open(path, "rb")
        try:
            size = f.seek(0, 2)
            f.seek(0)
            self._f = f
            self._header(memoryview(self._read(0, 64) if size >= 64 else b""), size)
            self._tables(memoryview(self._read(0, self.data_offset)))
        except BaseException:
            f.close()
            raise

    def _read(self, pos, n):
        buf = bytearray(n)
        self._readinto(pos, memoryview(buf))
        return buf

    def _readinto(self, pos, mv):
        self._f.seek(pos)
        got = 0
        while got < len(mv):
            k = self._f.readinto(mv[got:])
            if not k:
                _fail("file_size", "file ended at %d, expected %d more bytes" % (pos + got, len(mv) - got))
            got += k

    def readinto(self, name, buf, offset=0):
        """Read tensor `name`'s bytes from byte `offset` into buf (as many as fit); returns the
        count read (0 at the end)."""
        e = self._entry(self._find(name))
        if not 0 <= offset <= e[9]:
            raise ValueError("offset %d outside 0..%d" % (offset, e[9]))
        n = min(len(buf), e[9] - offset)
        self._readinto(e[8] + offset, memoryview(buf)[:n])
        return n

    def check(self, name, buf=None):
        """CRC-32 check of tensor `name`, reading through buf (default: 256 bytes)."""
        self._check(self._find(name), buf)

    def _check(self, i, buf=None):
        e = self._entry(i)
        buf = memoryview(buf or bytearray(256))
        crc, pos, end = 0, e[8], e[8] + e[9]
        while pos < end:
            m = min(len(buf), end - pos)
            self._readinto(pos, buf[:m])
            crc = crc32(buf[:m], crc)
            pos += m
        if crc & 0xFFFFFFFF != e[10]:
            _fail("data_crc", "0x%08x stored, 0x%08x computed" % (e[10], crc & 0xFFFFFFFF), self._name(i))

    def verify(self, buf=None):
        buf = buf or bytearray(256)
        for i in range(self._count):
            self._check(i, buf)
        return self._count

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _map(path):
    try:
        f = open(path, "rb")
    except OSError as e:  # MicroPython's names no path: "[Errno 2] ENOENT"
        from ._errors import missing  # imported on a failed open only: heap is scarce

        raise OSError(e.args[0], missing(path, e.args[0]))
    try:
        try:
            return memoryview(f)  # vfs.VfsRom: the file's bytes in place
        except TypeError:
            pass
        try:
            import mmap
        except ImportError:
            mmap = None
        if mmap:
            try:
                return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            except ValueError:  # empty file
                return b""
        raise ContainerError(
            "%s: cannot be mapped: its filesystem gives no memoryview(file) (only vfs.VfsRom "
            "does); put it in a ROMFS image (mpy-lazy romfs) or read it with "
            "mpy_lazy.Stream(path)" % path, None, "path")
    finally:
        f.close()
