# A plain .safetensors file read in place (docs/RUNTIME.md, "Safetensors files"): what
# mpy_lazy.open() returns for one. Same table API as a Container (names, info, view, meta, in,
# len), same Views, so load(), Params and the graph runner take it as they take a container.
#
# Format (huggingface/safetensors): 8 bytes little-endian u64 N, N bytes of UTF-8 JSON (starts
# with '{', may end in spaces), then the byte buffer. The JSON maps each tensor name to
# {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (offsets in the buffer) and
# may hold "__metadata__": {str: str}.
#
# Trusts nothing, as the container reader: the header is parsed by a strict JSON reader of that
# schema alone (no json module: its verdicts differ between CPython and MicroPython, and it
# would build the whole header as objects on the heap), in one pass, linear in N; every count,
# number and offset is checked against the bytes that exist before it is used; any fault is a
# ContainerError naming the tensor and the field. Per tensor only a record of 7 integers (and
# its dims) is kept; names and metadata are read from the header in place when asked for.
import array
import struct

from .backend import ITEMSIZE
from .container import ContainerError, View, _address, utf8

MAX_HEADER = 100000000  # bytes of JSON, as the safetensors library's own limit
MAX_NDIM = 8
# file dtype -> (name in mpy-lazy, itemsize); the first 8 are the ones the runtime reads
_DTYPES = (("F32", "f32", 4), ("F16", "f16", 2), ("I8", "i8", 1), ("U8", "u8", 1), ("I16", "i16", 2),
           ("U16", "u16", 2), ("I32", "i32", 4), ("U32", "u32", 4), ("F64", "f64", 8), ("I64", "i64", 8),
           ("U64", "u64", 8), ("BF16", "bf16", 2), ("BOOL", "bool", 1), ("F8_E4M3", "f8_e4m3", 1),
           ("F8_E5M2", "f8_e5m2", 1))
_REC = 7  # per tensor: name start, name length (raw, in the header), dtype index, ndim, dims
# index in _dims, begin, end
_WS = b" \t\n\r"


def looks_like(buf):
    """True when buf is not an mpy-lazy container and its byte 8 is '{': a safetensors file
    (or a broken one: SafeTensors then says what is wrong with it)."""
    try:
        mv = memoryview(buf)
        return (len(mv) >= 9 and len(bytes(mv[0:1])) == 1 and bytes(mv[0:4]) != b"MPYL"
                and mv[8] == 0x7B)
    except (TypeError, ValueError, NotImplementedError):
        return False


def _fail(field, detail, tensor=None):
    where = "" if tensor is None else "tensor %r: " % tensor
    raise ContainerError("safetensors: %s%s: %s" % (where, field, detail), tensor, field)


class _Info:
    """TensorInfo of a safetensors tensor: the same attributes (never quantized, no CRC)."""

    crc = None
    quant = 0
    axis = 0
    aux = False
    scale = 0.0
    zero_point = 0
    scales_index = 0xFFFFFFFF
    scales = None

    def __init__(self, name, index, dtype, shape, offset, nbytes, source):
        self.name, self.index, self.dtype, self.shape = name, index, dtype, shape
        self.offset, self.nbytes, self.source_dtype = offset, nbytes, source

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return "<TensorInfo %s %s%s %d bytes at %d>" % (self.name, self.dtype, self.shape, self.nbytes, self.offset)


class _Json:
    """Reads the JSON of [pos, end) of mv: the values a safetensors header holds."""

    tensor = None  # the tensor being read, for error messages

    def __init__(self, mv, pos, end):
        self.mv, self.pos, self.end = mv, pos, end

    def fail(self, detail):
        _fail("header", "JSON byte %d: %s" % (self.pos - 8, detail))

    def peek(self):
        mv, i, end = self.mv, self.pos, self.end
        while i < end and mv[i] in _WS:
            i += 1
        self.pos = i
        return mv[i] if i < end else -1

    def expect(self, c):
        if self.peek() != c:
            self.fail("expected %r" % chr(c))
        self.pos += 1

    def more(self, close):
        """After an item of an object or array: True if a ',' follows, False at `close`."""
        c = self.peek()
        self.pos += 1
        if c == 0x2C:
            return True
        if c != close:
            self.pos -= 1
            self.fail("expected ',' or %r" % chr(close))
        return False

    def string(self):
        """(start, end, text): the raw bytes [start, end) between the quotes; text is the
        decoded str when the string has escapes, else None (its raw bytes are its UTF-8)."""
        self.expect(0x22)
        mv, end = self.mv, self.end
        i = start = self.pos
        escaped = wide = False
        while True:
            if i >= end:
                self.fail("unterminated string")
            c = mv[i]
            if c == 0x22:
                break
            if c == 0x5C:
                escaped = True
                i += 6 if i + 1 < end and mv[i + 1] == 0x75 else 2  # \uXXXX or \x
            elif c < 0x20:
                self.pos = i
                self.fail("control character in a string")
            else:
                wide = wide or c >= 0x80
                i += 1
        self.pos = i + 1
        raw = bytes(mv[start:i])
        if wide and utf8(raw) is None:
            self.pos = start
            self.fail("string is not valid UTF-8")
        return start, i, _unescape(raw, self) if escaped else None

    def integer(self):
        c = self.peek()
        mv, i, end = self.mv, self.pos, self.end
        start, v = i, 0
        while i < end and 0x30 <= mv[i] <= 0x39 and i - start < 20:
            v = v * 10 + mv[i] - 0x30
            i += 1
        if i == start:
            self.fail("expected a non-negative integer" if c != 0x2D else "negative number")
        if i < end and mv[i] in b"0123456789.eE" or mv[start] == 0x30 and i - start > 1:
            self.fail("not an integer of at most 20 digits without leading zeros")
        self.pos = i
        return v

    def integers(self, key, most):
        self.expect(0x5B)
        out = []
        if self.peek() == 0x5D:
            self.pos += 1
            return out
        while True:
            if len(out) == most:
                _fail(key, "more than %d numbers" % most, self.tensor)
            out.append(self.integer())
            if not self.more(0x5D):
                return out

    def text(self):
        s, e, t = self.string()
        return t if t is not None else str(bytes(self.mv[s:e]), "utf-8")


def _unescape(raw, j):
    """The str of a JSON string's raw bytes with escapes (RFC 8259); lone surrogates refused."""
    out = []
    i, n, k = 0, len(raw), 0
    while i < n:
        c = raw[i]
        if c != 0x5C:
            i += 1
            continue
        out.append(str(raw[k:i], "utf-8"))
        e = raw[i + 1] if i + 1 < n else 0
        if e == 0x75:
            cp = _hex(raw, i + 2, j)
            i += 6
            if 0xD800 <= cp < 0xDC00 and i + 1 < n and raw[i] == 0x5C and raw[i + 1] == 0x75:
                lo = _hex(raw, i + 2, j)
                if 0xDC00 <= lo < 0xE000:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + lo - 0xDC00
                    i += 6
            if 0xD800 <= cp < 0xE000:
                j.fail("lone surrogate in a \\u escape")
            out.append(chr(cp))
        else:
            x = b'"\\/bfnrt'.find(bytes([e]))
            if x < 0:
                j.fail("bad escape")
            out.append('"\\/\b\f\n\r\t'[x])
            i += 2
        k = i
    out.append(str(raw[k:], "utf-8"))
    return "".join(out)


def _hex(raw, i, j):
    if i + 4 > len(raw):
        j.fail("short \\u escape")
    v = 0
    for k in range(i, i + 4):
        c = raw[k] | 0x20
        d = c - 0x30 if 0x30 <= c <= 0x39 else (c - 0x57 if 0x61 <= c <= 0x66 else -1)
        if d < 0:
            j.fail("bad \\u escape")
        v = v * 16 + d
    return v


def _heapsort(idx, key):
    """Sort the list idx by key[idx[k]], in place, in O(n log n) whatever the order (a list's
    sort on MicroPython is a quicksort that goes quadratic on sorted input)."""
    n = len(idx)
    for k in range(1, n):
        if key[idx[k]] < key[idx[k - 1]]:
            break
    else:
        return  # already sorted (the usual case)

    def sift(root, last):
        while True:
            child = 2 * root + 1
            if child > last:
                return
            if child < last and key[idx[child]] < key[idx[child + 1]]:
                child += 1
            if not key[idx[root]] < key[idx[child]]:
                return
            idx[root], idx[child] = idx[child], idx[root]
            root = child

    for start in range(n // 2 - 1, -1, -1):
        sift(start, n - 1)
    for last in range(n - 1, 0, -1):
        idx[0], idx[last] = idx[last], idx[0]
        sift(0, last - 1)


class SafeTensors:
    """A .safetensors file read in place from a buffer (bytes, a frozen bytes constant, a
    memoryview of a file on vfs.VfsRom, mmap on CPython). Nothing is copied: a View is made in
    place when the tensor's address is a multiple of its itemsize, else (like a container
    placed unaligned) its bytes are copied once to RAM and report() counts them. Tensors of
    dtypes the runtime does not compute with (F64, I64, U64, BF16, BOOL, F8_*) are listed,
    with their dtype in lower case, and refused by view(). The format has no checksums:
    check() and verify() check nothing."""

    format = "safetensors"

    def __init__(self, buf):
        mv = memoryview(buf)
        if hasattr(mv, "toreadonly"):  # CPython: views cannot write into the caller's buffer
            if mv.format != "B" or mv.ndim != 1:
                mv = mv.cast("B")
            mv = mv.toreadonly()
        total = len(mv)
        if total > 0xFFFFFFFF:
            _fail("length", "%d bytes: more than 4 GiB" % total)
        if total < 10:
            _fail("length", "%d bytes, a safetensors file has at least 10" % total)
        (n,) = struct.unpack_from("<Q", mv, 0)
        if n > total - 8:
            _fail("header_size", "%d bytes of JSON but only %d bytes follow (truncated?)" % (n, total - 8))
        if n > MAX_HEADER:
            _fail("header_size", "%d bytes of JSON, more than %d" % (n, MAX_HEADER))
        if mv[8] != 0x7B:
            _fail("header", "does not start with '{'")
        self._mv = mv
        self._n = n
        self.data_offset = 8 + n
        self._parse(_Json(mv, 8, 8 + n), total - 8 - n)

    def _parse(self, j, size):
        recs, dims = array.array("I"), array.array("I")
        esc = {}  # index -> name, for names written with escapes
        meta = None
        seen_meta = False
        j.expect(0x7B)
        if j.peek() == 0x7D:
            j.pos += 1
        else:
            while True:
                s, e, text = j.string()
                j.expect(0x3A)
                if text is None and e - s == 12 and bytes(self._mv[s:e]) == b"__metadata__":
                    if seen_meta:
                        _fail("__metadata__", "appears twice")
                    seen_meta = True
                    if j.peek() == 0x6E and bytes(self._mv[j.pos : j.pos + 4]) == b"null":
                        j.pos += 4  # none, as the library reads it
                    else:
                        meta = self._metadata(j)
                else:
                    i = len(recs) // _REC
                    if text is not None:
                        esc[i] = text
                    self._tensor(j, s, e, text, recs, dims, size)
                if not j.more(0x7D):
                    break
        if j.peek() != -1:
            j.fail("bytes after the JSON object (only spaces may pad it)")
        self._recs, self._dims, self._esc, self._meta_span = recs, dims, esc, meta
        self._count = count = len(recs) // _REC
        # names: sorted once (lookups binary-search them), and unique
        keys = [self._key(i) for i in range(count)]
        order = list(range(count))
        _heapsort(order, keys)
        for k in range(1, count):
            if keys[order[k]] == keys[order[k - 1]]:
                _fail("name", "appears twice", self._name(order[k]))
        del keys
        self._order = array.array("I", order)
        # offsets: the tensors cover the data exactly, one after the other (the safetensors
        # library's rule: no overlap, no hole, nothing after the last one)
        spans = [(recs[_REC * i + 5], recs[_REC * i + 6]) for i in range(count)]
        _heapsort(order, spans)
        top = 0
        for i in order:
            b, e = spans[i]
            if b != top:
                _fail("data_offsets", "[%d, %d) %s" % (b, e, "overlaps the tensor before it" if b < top else
                                                         "leaves a hole after byte %d" % top), self._name(i))
            top = e
        if top != size:
            _fail("data_offsets", "the tensors end at byte %d of the %d bytes of data" % (top, size))

    def _metadata(self, j):
        start = j.pos
        seen = {}
        j.expect(0x7B)
        if j.peek() == 0x7D:
            j.pos += 1
            return start, j.pos
        while True:
            s, e, text = j.string()
            key = bytes(self._mv[s:e]) if text is None else text.encode()
            if key in seen:
                _fail("__metadata__", "key %r appears twice" % str(key, "utf-8"))
            seen[key] = True
            j.expect(0x3A)
            if j.peek() != 0x22:
                j.fail("__metadata__ values are strings")
            j.string()
            if not j.more(0x7D):
                return start, j.pos

    def _tensor(self, j, s, e, text, recs, dims, size):
        name = text if text is not None else str(bytes(self._mv[s:e]), "utf-8")
        got = {}
        j.expect(0x7B)
        if j.peek() != 0x7D:
            while True:
                key = j.text()
                if key not in ("dtype", "shape", "data_offsets"):
                    _fail("key", "unknown key %r (dtype, shape, data_offsets)" % key[:32], name)
                if key in got:
                    _fail(key, "appears twice", name)
                j.expect(0x3A)
                j.tensor = name
                got[key] = j.text() if key == "dtype" else j.integers(key, MAX_NDIM if key == "shape" else 2)
                if not j.more(0x7D):
                    break
        else:
            j.pos += 1
        for key in ("dtype", "shape", "data_offsets"):
            if key not in got:
                _fail(key, "missing", name)
        code = 0
        while code < len(_DTYPES) and _DTYPES[code][0] != got["dtype"]:
            code += 1
        if code == len(_DTYPES):
            _fail("dtype", "unknown dtype %r" % got["dtype"][:16], name)
        shape, offs = got["shape"], got["data_offsets"]
        if len(offs) != 2:
            _fail("data_offsets", "%d numbers, not [begin, end]" % len(offs), name)
        begin, end = offs
        if not begin <= end <= size:
            _fail("data_offsets", "[%d, %d) is outside the %d bytes of data" % (begin, end, size), name)
        nbytes = _DTYPES[code][2]
        for d in shape:
            if d > 0xFFFFFFFF:
                _fail("shape", "dimension %d is too large" % d, name)
            nbytes *= d
            if nbytes > size:  # cannot match: stop before the product grows without bound
                break
        if nbytes != end - begin:
            _fail("data_offsets", "%d bytes, but %s %s needs %d" % (end - begin, got["dtype"], shape, nbytes), name)
        recs.extend((s, e - s, code, len(shape), len(dims), begin, end))
        for d in shape:
            dims.append(d)

    # --- the table API (as Container's) ---------------------------------------------------

    def _key(self, i):
        """UTF-8 bytes of tensor i's name."""
        t = self._esc.get(i)
        if t is not None:
            return t.encode("utf-8")
        r = _REC * i
        s = self._recs[r]
        return bytes(self._mv[s : s + self._recs[r + 1]])

    def _name(self, i):
        t = self._esc.get(i)
        return t if t is not None else str(self._key(i), "utf-8")

    def _find(self, name):
        key = name.encode("utf-8") if isinstance(name, str) else None
        lo, hi = 0, self._count
        while key is not None and lo < hi:  # binary search, names compared in place
            mid = (lo + hi) // 2
            i = self._order[mid]
            k = self._key(i) if i in self._esc else None
            if k is None:
                r = _REC * i
                c = _compare(self._mv, self._recs[r], self._recs[r + 1], key)
            else:
                c = 0 if k == key else (-1 if k < key else 1)
            if c == 0:
                return i
            if c < 0:
                lo = mid + 1
            else:
                hi = mid
        raise KeyError(name)

    def _shape(self, i):
        r = _REC * i
        d = self._recs[r + 4]
        return tuple(self._dims[d : d + self._recs[r + 3]])

    def __contains__(self, name):
        try:
            self._find(name)
            return True
        except KeyError:
            return False

    def __len__(self):
        return self._count

    def count(self, aux=False):
        return self._count

    def names(self, aux=False):
        """Tensor names in the header's order."""
        return [self._name(i) for i in range(self._count)]

    def info(self, name):
        return self._info(self._find(name), name)

    def _info(self, i, name=None):
        r = _REC * i
        f, dtype, size = _DTYPES[self._recs[r + 2]]
        begin, end = self._recs[r + 5], self._recs[r + 6]
        return _Info(name if name is not None else self._name(i), i, dtype, self._shape(i),
                     self.data_offset + begin, end - begin, f)

    def view(self, name):
        """Read-only View of tensor `name` (zero-copy where its address is aligned)."""
        return self._view(self._find(name))

    def _view(self, i):
        r = _REC * i
        dtype = _DTYPES[self._recs[r + 2]][1]
        if dtype not in ITEMSIZE or dtype == "i64":  # (i64: an arena value's type only, no tensor's)
            _fail("dtype", "%s tensors cannot be read on the board (convert the file with "
                  "mpy-lazy pack)" % _DTYPES[self._recs[r + 2]][0], self._name(i))
        off = self.data_offset + self._recs[r + 5]
        mv = self._mv[off : self.data_offset + self._recs[r + 6]]
        base = _address(mv)
        if base is None or base % ITEMSIZE[dtype] == 0:
            return View(self, i, dtype, mv)
        mv = memoryview(bytearray(mv))  # unaligned loads fault on some cores: a RAM copy
        if hasattr(mv, "toreadonly"):
            mv = mv.toreadonly()
        v = View(self, i, dtype, mv)
        v.aligned = False
        return v

    def check(self, name):
        """Nothing to check: the format has no checksums (the name must exist)."""
        self._find(name)

    def _check(self, i):
        pass

    def verify(self):
        """How many tensors had a checksum checked: none, the format has none."""
        return 0

    @property
    def meta(self):
        """The __metadata__ strings as a dict (decoded on each call; {} if there are none)."""
        out = {}
        span = self._meta_span
        if span is not None:
            j = _Json(self._mv, span[0], span[1])
            j.expect(0x7B)
            while j.peek() == 0x22:
                key = j.text()
                j.expect(0x3A)
                out[key] = j.text()
                j.more(0x7D)
        return out

    def _meta_get(self, key):
        return self.meta.get(key)

    def __repr__(self):
        return "<SafeTensors %d tensors, data at %d>" % (self._count, self.data_offset)


def _compare(mv, s, n, key):
    """-1, 0 or 1 as the n bytes at mv[s:] sort before, equal or after `key`."""
    k = len(key)
    for j in range(n if n < k else k):
        a, b = mv[s + j], key[j]
        if a != b:
            return -1 if a < b else 1
    return 0 if n == k else (-1 if n < k else 1)
