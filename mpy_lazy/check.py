# The records of a program (mpy_lazy/program.py, docs/FORMAT.md "Program"), checked before
# anything runs: every value a kernel assumes (arena offsets and extents, geometry, tensor
# regions and their dtypes, zero points, clamps, multipliers and shifts, table sizes, the
# int32 range of every accumulator) is checked here, against the arena and the container's
# table. A kernel then cannot read or write outside its buffers nor compute a wrapped number;
# anything else is a ContainerError naming the record's graph line, its op and its field.
#
# A record is [kind | line << 8, length, fields...]; its layout (field indices) and its own
# checks are in the room of its kind (mpy_lazy/ops/<room>.py: check(r, E), with the _Rec
# helpers below); this module is the generic part (arena regions, overlaps, which bytes hold
# values, the header), and gets the rooms from its caller (program(): `room`, kind -> module),
# so it imports no room. No object per op is kept.
from . import backend
from ._arith import bits_f32
from .container import ContainerError
from .kinds import (H_ARENA, H_FIRST, H_INPUTS, H_MAGIC, H_OUTPUTS, H_RECORDS, H_VERSION, HEADER, INT32_MAX, IO,
                    IO_DIMS, IO_DTYPE, IO_LAYOUT, IO_NDIM, IO_OFF, IO_SCALE, IO_SIZE, IO_ZP, KINDS, LENGTH,
                    FLOATS, MAGIC, MAX_ARENA, MAX_DIM, MAX_RECORDS, NAMES, VERSION, word)



_IO_ITEM = (0, 4, 0, 1, 1, 2, 0, 4, 0, 0, 0, 8, 1)  # bytes per element by input/output dtype code


class _Rec:
    """One record being checked: P, its start k, the arena size, the slots. A room's check
    may set `lag` (an int8 conv, dense or LSTM: its output may start that many bytes or more
    before its input) or `inplace` (the record word of the input an elementwise output may be
    written over): see overlaps()."""

    lag = None
    inplace = None

    def __init__(self, P, k, arena, B, verify):
        self.P, self.k, self.arena, self.B, self.verify = P, k, arena, B, verify
        self.line = P[k] >> 8
        self.kind = P[k] & 255
        self.spans = []  # (word index, start, end, field) of every arena region checked

    def __getitem__(self, i):
        return self.P[self.k + i]

    def fail(self, field, msg):
        raise ContainerError("graph line %d: %s: %s: %s" % (self.line, word(NAMES, self.kind), field, msg),
                             field, "program")

    def range(self, i, field, lo, hi):
        v = self[i]
        if not lo <= v <= hi:
            self.fail(field, "%d is outside %d..%d" % (v, lo, hi))
        return v

    def dims(self, *fields):
        """Each (index, name) a dimension 1..65535."""
        return [self.range(i, name, 1, MAX_DIM) for i, name in fields]

    def region(self, i, field, nbytes, align=1, back=0):
        """Arena bytes [P[i] + back, P[i] + back + nbytes) inside the arena (back <= 0: a move
        that walks an axis backwards from P[i]), the offset a multiple of align."""
        off = self[i] + back
        if off < 0 or nbytes < 0 or off + nbytes > self.arena or off % align:
            self.fail(field, "%d bytes at %d do not fit the %d-byte arena (alignment %d)"
                      % (nbytes, off, self.arena, align))
        if nbytes:
            self.spans.append((i, off, off + nbytes, field))
        return off

    def overlaps(self):
        """Regions of one record overlap only as the planner lays them out (so every kernel
        path computes the same thing): an input and the output share bytes only at the same
        offset for an elementwise op (its first input: `inplace`), or with the output at least
        `lag` bytes before the input for an int8 conv, depthwise, dense (ops/conv.py's conv_lag)
        or LSTM (ops/lstm.py's lstm_lag); scratch shares bytes with nothing."""
        spans = self.spans
        for a in range(len(spans)):
            ia, sa, ea, fa = spans[a]
            for b in range(a + 1, len(spans)):
                ib, sb, eb, fb = spans[b]
                if sa >= eb or sb >= ea or fa == fb == "x":
                    continue
                if fa == "x" and fb == "y" and _may_share(self, ia, sa, sb) or \
                        fa == "y" and fb == "x" and _may_share(self, ib, sb, sa):
                    continue
                self.fail(fb, "its %d bytes at %d overlap the %s's at %d" % (eb - sb, sb, fa, sa))

    def absent(self, i, field):
        """Tensor fields at i of an absent tensor: (0, 0)."""
        if self[i] or self[i + 1]:
            self.fail(field, "slot %d offset %d given for a tensor the record has none of" % (self[i], self[i + 1]))

    def tensor(self, i, field, dtypes, nbytes):
        """Tensor fields (slot, offset) at i: a tensor of one of `dtypes` holding exactly
        nbytes (a container's), or a RAM slot of at least nbytes (a compiled model's). Returns
        the dtype."""
        slot, off = self[i], self[i + 1]
        if not 0 <= slot < len(self.B):
            self.fail(field, "slot %d: the program has %d" % (slot, len(self.B)))
        if self.verify is not None:
            if slot != 0:
                self.fail(field, "slot %d: a stored program refers to its container (slot 0)" % slot)
            got = self.verify(off)
            if got is None:
                self.fail(field, "no tensor starts at byte %d of the container" % off)
            if got[0] not in dtypes or got[1] != nbytes:
                self.fail(field, "the tensor at %d is %s, %d bytes; this op reads %s, %d bytes"
                          % (off, got[0], got[1], "/".join(dtypes), nbytes))
            return got[0]
        b = self.B[slot]
        have = backend.nbytes(b)
        if off < 0 or off + nbytes > have:
            self.fail(field, "%d bytes at %d do not fit slot %d (%d bytes)" % (nbytes, off, slot, have))
        return dtypes[0]

    # --- the fields many records have -------------------------------------------------------

    def clamp(self, es=1):
        """The requantization header's zero point and clamp (words 3..5) for es-byte outputs."""
        top = (1 << (8 * es - 1)) - 1
        zy = self.range(3, "zero_point", -top - 1, top)
        lo = self.range(4, "clamp", -top - 1, top)
        hi = self.range(5, "clamp", lo, top)
        return zy, lo, hi

    def mq(self, i, n, field, left=True):
        """n multipliers then n shifts at record word i (inline): TFLM's ranges."""
        for c in range(n):
            m, s = self[i + 2 * c], self[i + 2 * c + 1]
            if not 0 <= m <= INT32_MAX or not -31 <= s <= (30 if left else 0):
                self.fail(field, "multiplier %d, shift %d: TFLM takes 0..2**31-1 and -31..%d"
                          % (m, s, 30 if left else 0))

    def mq_tensor(self, i, oc, E, top=30):
        """Per-channel requantization tensor [2, OC] at fields i: multipliers 0..2**31-1, shifts
        -31..top (30; 7 for TFLM's int64 MultiplyByQuantizedMultiplier): values from a file."""
        self.tensor(i, "requant", ("i32",), 8 * oc)
        mq = E.words(self[i], self[i + 1], 2 * oc)
        for c in range(oc):
            if mq[c] < 0 or not -31 <= mq[oc + c] <= top:
                self.fail("requant", "channel %d: multiplier %d, shift %d (TFLM takes 0..2**31-1 and -31..%d)"
                          % (c, mq[c], mq[oc + c], top))

    def bound(self, bias, sums, oc, xmax, limit):
        """Every output channel's accumulator within -limit - 1 .. limit: bias +- xmax x sum |w|
        (a bias of -2**31 over zero weights: TFLM's dead channels)."""
        for o in range(oc):
            b = bias[o] if bias is not None else 0
            if b + xmax * sums[o] > limit or b - xmax * sums[o] < -limit - 1:
                self.fail("bias", "channel %d: bias %d + %d x %d (the weights' sum) can leave the accumulator's range"
                          % (o, b, xmax, sums[o]))

    def bias(self, i, present, n, E=None):
        """A bias of n elements at fields i (slot, offset) when `present` (else both 0): f32,
        or with E int32, whose values it returns (None when absent)."""
        if not present:
            self.absent(i, "bias")
            return None
        self.tensor(i, "bias", ("i32" if E else "f32",), 4 * n)
        return E.words(self[i], self[i + 1], n) if E else None

    def es(self, i, field="dtype"):
        """Bytes per element at word i: 1, 2 or 4."""
        es = self[i]
        if es not in (1, 2, 4):
            self.fail(field, "%d bytes per element (1, 2 or 4)" % es)
        return es

    def broadcast(self, i):
        """N at field i, BC at i + 1: x2 repeats every BC elements (BC divides N)."""
        n = self.range(i, "x", 1, 1 << 24)
        bc = self.range(i + 1, "x", 1, n)
        if n % bc:
            self.fail("x", "%d elements do not repeat a %d-element input" % (n, bc))
        return n, bc

    def operand(self, i, bci, n, es, align=0):
        """An operand at word i of es-byte elements repeating every BC (word bci) of the N
        output elements (BC divides N), aligned to align bytes (default es)."""
        bc = self.range(bci, "x", 1, n)
        if n % bc:
            self.fail("x", "%d elements do not repeat a %d-element input" % (n, bc))
        self.region(i, "x", bc * es, align or es)

    def f32(self, i):
        """The f32 field at word i."""
        return bits_f32(self[i])

    def eps(self, i):
        eps = bits_f32(self[i])
        if not (eps - eps == 0 and eps >= 0):
            self.fail("eps", "%r is not finite and >= 0" % eps)


class _Env:
    """What the checks read from the slots: int32 words and per-channel weight sums (sums:
    the function computing them, _arith.abs_sums or its viper twin)."""

    def __init__(self, B, sums=None):
        self.B = B
        self.sums = sums

    def words(self, slot, off, n):
        return backend.typed_view(memoryview(self.B[slot])[off: off + 4 * n], "i32", n)

    def halfs(self, slot, off, n):
        return backend.typed_view(memoryview(self.B[slot])[off: off + 2 * n], "i16", n)

    def abs_sums(self, slot, off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb=0):
        """sum |w| over each output channel's filter (int8 weights)."""
        import array

        sums = self.sums
        if sums is None:
            from ._arith import abs_sums as sums
        out = array.array("i", bytes(4 * oc))
        geo = array.array("i", (off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb))
        sums(self.B[slot], geo, out)
        return out


def _may_share(r, i, x, y):
    """Whether input region (word i, offset x) may overlap the output at offset y: as the
    room's check allows (r.lag: an output at least that many bytes before the input; r.inplace:
    the record word of the input an elementwise output may be written over, same offset)."""
    if r.lag is not None:
        return y + r.lag <= x
    return x == y and r.inplace == i


def _bad(msg, field="program"):
    raise ContainerError("program: %s" % msg, field, "program")


def arena_size(P, total):
    """The arena size in bytes of a program of `total` words, from its checked header (so
    the arena can be allocated before anything else)."""
    if total < HEADER or P[H_MAGIC] != MAGIC:
        _bad("not a program (magic)")
    if P[H_VERSION] != VERSION:
        _bad("version %d, this runtime reads %d: repack the model" % (P[H_VERSION], VERSION), "version")
    arena = P[H_ARENA]
    if not 0 <= arena <= MAX_ARENA or arena % 4:
        _bad("arena of %d bytes (a multiple of 4, at most %d)" % (arena, MAX_ARENA), "arena")
    return arena


def program(P, B, room, verify=None, total=None, sums=None):
    """Check a whole program of `total` words (header, inputs/outputs, every record);
    returns its arena size in bytes. room: kind -> the module of mpy_lazy/ops whose check(r, E)
    checks that kind's records (kernels.room); verify: see Program; sums: see _Env."""
    if total is None:
        total = len(P)
    bad = _bad
    arena = arena_size(P, total)
    n, nin, nout = P[H_RECORDS], P[H_INPUTS], P[H_OUTPUTS]
    if not 0 <= n <= MAX_RECORDS or not 1 <= nin <= 16 or not 1 <= nout <= 16:
        bad("%d records, %d inputs, %d outputs" % (n, nin, nout), "records")
    first = HEADER + IO * (nin + nout)
    if P[H_FIRST] != first or first > total:
        bad("first record at %d, expected %d" % (P[H_FIRST], first), "records")
    for i in range(nin + nout):
        e = HEADER + IO * i
        dt, off, size, nd = P[e + IO_DTYPE], P[e + IO_OFF], P[e + IO_SIZE], P[e + IO_NDIM]
        if dt not in (1, 3, 4, 5, 7, 11, 12) or not 1 <= nd <= 3 or P[e + IO_LAYOUT] not in (0, 1):
            bad("input/output %d: dtype %d, %d dimensions, layout %d" % (i, dt, nd, P[e + IO_LAYOUT]), "io")
        count = 1
        for j in range(nd):
            d = P[e + IO_DIMS + j]
            if not 1 <= d <= MAX_DIM:
                bad("input/output %d: dimension %d" % (i, d), "io")
            count *= d
        item = _IO_ITEM[dt]
        if count != size or off < 0 or off % item or off + size * item > arena:
            bad("input/output %d: %d elements at %d do not fit the %d-byte arena" % (i, size, off, arena), "io")
        if P[e + IO_LAYOUT] == 1 and nd != 3:
            bad("input/output %d: layout chw needs H, W, C" % i, "io")
        if dt not in (1, 12):
            s = bits_f32(P[e + IO_SCALE])
            top = 255 if dt == 4 else (1 << (8 * item - 1)) - 1
            if not (s - s == 0 and s > 0) or not (0 if dt == 4 else -top - 1) <= P[e + IO_ZP] <= top:
                bad("input/output %d: q=%r,%d" % (i, s, P[e + IO_ZP]), "io")
    # the arena bytes that hold values: the inputs', then each record's output; a record's
    # scratch leaves its bytes undefined (each kernel path uses it its own way), and a record
    # may read defined bytes only, so every path computes from the same numbers
    defined = []
    for i in range(nin):
        e = HEADER + IO * i
        defined = _span_add(defined, P[e + IO_OFF], P[e + IO_OFF] + P[e + IO_SIZE] * _IO_ITEM[P[e + IO_DTYPE]])
    E = _Env(B, sums)
    k = first
    for _ in range(n):
        if k + 2 > total:
            bad("record at word %d runs past the end (%d words)" % (k, total), "records")
        kind = P[k] & 255
        if not 0 < kind < KINDS or not LENGTH[kind]:
            bad("record at word %d: unknown kind %d" % (k, kind), "kind")
        if P[k + 1] != LENGTH[kind] or k + LENGTH[kind] > total:
            bad("record at word %d (%s): %d words, expected %d" % (k, word(NAMES, kind), P[k + 1], LENGTH[kind]),
                "records")
        r = _Rec(P, k, arena, B, verify)
        r.total = total  # (control records check their targets against the whole program)
        room(kind).check(r, E)
        r.overlaps()
        for _, start, end, field in r.spans:
            if field == "x" and not _span_covered(defined, start, end):
                r.fail("x", "reads bytes %d..%d that no input or earlier record wrote" % (start, end))
        for _, start, end, field in r.spans:
            if field == "scratch":
                defined = _span_remove(defined, start, end)
        for _, start, end, field in r.spans:
            if field == "y":
                defined = _span_add(defined, start, end)
        k += LENGTH[kind]
    if k != total:
        bad("%d words after the last record" % (total - k), "records")
    for i in range(nin, nin + nout):
        e = HEADER + IO * i
        if not _span_covered(defined, P[e + IO_OFF], P[e + IO_OFF] + P[e + IO_SIZE] * _IO_ITEM[P[e + IO_DTYPE]]):
            bad("output %d: bytes no record wrote" % (i - nin), "io")
    return arena


# sets of arena bytes as sorted lists of disjoint [start, end) spans

def _span_add(spans, s, e):
    out = []
    for a, b in spans:
        if b < s or a > e:
            out.append((a, b))
        else:
            s, e = min(a, s), max(b, e)
    out.append((s, e))
    out.sort()
    return out


def _span_remove(spans, s, e):
    out = []
    for a, b in spans:
        if b <= s or a >= e:
            out.append((a, b))
        else:
            if a < s:
                out.append((a, s))
            if b > e:
                out.append((e, b))
    return out


def _span_covered(spans, s, e):
    for a, b in spans:
        if a <= s and e <= b:
            return True
    return s >= e


def records(P):
    """(kind, word index) of every record (P checked)."""
    out = []
    k = P[H_FIRST]
    for _ in range(P[H_RECORDS]):
        out.append((P[k] & 255, k))
        k += P[k + 1]
    return out


def has_floats(P):
    """Whether any record computes on or moves f32 values (the float kernels' views are made
    only then)."""
    for kind, k in records(P):
        if kind in FLOATS:
            return True
    return False
