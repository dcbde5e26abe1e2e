# The records of a program (mpy_lazy/program.py, docs/FORMAT.md "Program"), checked before
# anything runs: every value a kernel assumes (arena offsets and extents, geometry, tensor
# regions and their dtypes, zero points, clamps, multipliers and shifts, table sizes, the
# int32 range of every accumulator) is checked here, against the arena and the container's
# table. A kernel then cannot read or write outside its buffers nor compute a wrapped number;
# anything else is a ContainerError naming the record's graph line, its op and its field.
#
# The record layouts (field indices) are those of the kernels in mpy_lazy/_pure.py; a record is
# [kind | line << 8, length, fields...]. This module is imported with the runner: its
# functions are the whole cost (no object per op is kept).
from .container import ContainerError

CONV, DEPTHWISE, DENSE, ADD, MUL, MAXPOOL, AVGPOOL, MEAN, LUT, SOFTMAX = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
MOVE, FILL, QUANTIZE, DEQUANTIZE = 11, 12, 13, 14
FCONV, FDEPTHWISE, FDENSE, FADD, FMUL, FMAXPOOL, FAVGPOOL, FMEAN, FACT, FSOFTMAX = range(16, 26)
RESCALE, ADD16, SUB, SUB16, CONV16, DW16, DENSE16, TCONV, TCONV16, FSUB = range(26, 36)
# recurrent ops (kinds 36..39; 40..43 reserved), elementwise ops, cast, resize, norms (44..53)
LSTM, FLSTM, SVDF, SOFTMAX16 = range(36, 40)
MINMAX, FBINARY, CAST, FCAST, DIV, RESIZE, FRESIZE, PRELU, FLAYERNORM, FGROUPNORM = range(44, 54)
FTCONV = 54
KINDS = 60  # kinds are 1..KINDS-1
DENSE_COL = 256  # int8 dense: the viper kernel converts the input to int32 this many at a time
# elementwise kinds that may write their output over their first input (same offset): the
# record word of that input (the planner's in-place ops: mpy_lazy/model.py)
_INPLACE = {ADD: 6, SUB: 6, MUL: 6, ADD16: 6, SUB16: 6, FADD: 6, FMUL: 6, FSUB: 6, LUT: 6, FACT: 3, RESCALE: 2,
            MINMAX: 4, FBINARY: 4, DIV: 6, FLAYERNORM: 2, FGROUPNORM: 2}
# name and record length of each kind (index = kind)
NAMES = ("", "conv2d", "depthwise", "linear", "add", "mul", "maxpool", "avgpool", "mean", "lut", "softmax",
         "move", "fill", "quantize", "dequantize", "", "conv2d", "depthwise", "linear", "add", "mul", "maxpool",
         "avgpool", "mean", "act", "softmax", "rescale", "add", "sub", "sub", "conv2d", "depthwise", "linear",
         "tconv", "tconv", "sub", "lstm", "lstm", "svdf", "softmax", "", "", "", "") \
    + ("minmax", "binary", "cast", "cast", "div", "resize", "resize", "prelu", "layernorm", "groupnorm") \
    + ("tconv", "", "", "", "", "")
LENGTH = (0, 39, 39, 21, 22, 17, 21, 21, 14, 11, 12, 14, 6, 8, 8, 0, 38, 38, 20, 11, 11, 21, 21, 14, 8, 7,
          18, 22, 22, 22, 38, 38, 21, 28, 28, 11, 25, 21, 24, 12, 0, 0, 0, 0) \
    + (12, 12, 7, 7, 17, 13, 13, 20, 14, 12) + (26, 0, 0, 0, 0, 0)
INT32_MAX = 2147483647
MAX_DIM = 65535


class _Rec:
    """One record being checked: P, its start k, the arena size, the slots."""

    def __init__(self, P, k, arena, B, verify):
        self.P, self.k, self.arena, self.B, self.verify = P, k, arena, B, verify
        self.line = P[k] >> 8
        self.kind = P[k] & 255
        self.spans = []  # (word index, start, end, field) of every arena region checked

    def __getitem__(self, i):
        return self.P[self.k + i]

    def fail(self, field, msg):
        raise ContainerError("graph line %d: %s: %s: %s" % (self.line, NAMES[self.kind], field, msg),
                             field, "program")

    def range(self, i, field, lo, hi):
        v = self[i]
        if not lo <= v <= hi:
            self.fail(field, "%d is outside %d..%d" % (v, lo, hi))
        return v

    def dims(self, *fields):
        """Each (index, name) a dimension 1..65535."""
        return [self.range(i, name, 1, MAX_DIM) for i, name in fields]

    def region(self, i, field, nbytes, align=1):
        """Arena bytes [P[i], P[i] + nbytes) inside the arena, the offset a multiple of align."""
        off = self[i]
        if off < 0 or nbytes < 0 or off + nbytes > self.arena or off % align:
            self.fail(field, "%d bytes at %d do not fit the %d-byte arena (alignment %d)"
                      % (nbytes, off, self.arena, align))
        if nbytes:
            self.spans.append((i, off, off + nbytes, field))
        return off

    def overlaps(self):
        """Regions of one record overlap only as the planner lays them out (so every kernel
        path computes the same thing): an input and the output share bytes only at the same
        offset for an elementwise op (its first input), or with the output at least `lag`
        bytes before the input for an int8 conv, depthwise, dense (conv_lag) or LSTM
        (lstm_lag); scratch shares bytes with nothing."""
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
        have = _nbytes(b)
        if off < 0 or off + nbytes > have:
            self.fail(field, "%d bytes at %d do not fit slot %d (%d bytes)" % (nbytes, off, slot, have))
        return dtypes[0]


def _nbytes(b):
    from . import backend

    return backend.nbytes(b)


def _clamp(r, es=1):
    top = (1 << (8 * es - 1)) - 1
    zy = r.range(3, "zero_point", -top - 1, top)
    lo = r.range(4, "clamp", -top - 1, top)
    hi = r.range(5, "clamp", lo, top)
    return zy, lo, hi


def _mq(r, i, n, field, left=True):
    """n multipliers then n shifts at record word i (inline): TFLM's ranges."""
    for c in range(n):
        m, s = r[i + 2 * c], r[i + 2 * c + 1]
        if not 0 <= m <= INT32_MAX or not -31 <= s <= (30 if left else 0):
            r.fail(field, "multiplier %d, shift %d: TFLM takes 0..2**31-1 and -31..%d" % (m, s, 30 if left else 0))


def _mq_tensor(r, i, oc, E, top=30):
    """Per-channel requantization tensor [2, OC] at fields i: multipliers 0..2**31-1, shifts
    -31..top (30; 7 for TFLM's int64 MultiplyByQuantizedMultiplier): values from a file."""
    r.tensor(i, "requant", ("i32",), 8 * oc)
    mq = E.words(r[i], r[i + 1], 2 * oc)
    for c in range(oc):
        if mq[c] < 0 or not -31 <= mq[oc + c] <= top:
            r.fail("requant", "channel %d: multiplier %d, shift %d (TFLM takes 0..2**31-1 and -31..%d)"
                   % (c, mq[c], mq[oc + c], top))


def _conv(r, E):
    fl = r.kind in (FCONV, FDEPTHWISE)
    wide = r.kind in (CONV16, DW16)
    dw = r.kind in (DEPTHWISE, FDEPTHWISE, DW16)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    oc = r.range(2, "out", 1, MAX_DIM)
    kh, kw, sh, sw, dh, dwd = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"), (17, "dil"), (18, "dil"))
    pt, pl = r.range(19, "pad", 0, MAX_DIM), r.range(20, "pad", 0, MAX_DIM)
    wso, wsy, wsx, wsc = (r.range(i, "wl", 0, 1 << 24) for i in (21, 22, 23, 24))
    cpg, opg = r.dims((25, "groups"), (26, "groups"))
    if oc % opg or (oc // opg) * cpg != c or (dw and (cpg != 1 or c * opg != oc)):
        r.fail("groups", "%d input and %d output channels do not split into groups of %d and %d" % (c, oc, cpg, opg))
    eh, ew = dh * (kh - 1) + 1, dwd * (kw - 1) + 1
    if pt >= eh or pl >= ew:
        r.fail("pad", "%d,%d: smaller than the kernel" % (pt, pl))
    if (oh - 1) * sh - pt + eh > h + eh - 1 or (ow - 1) * sw - pl + ew > w + ew - 1:
        r.fail("oh", "%dx%d outputs reach past the padded input" % (oh, ow))
    if oh * ow * oc > 1 << 24 or h * w * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    wb = r.range(38, "wl", 0, 0 if dw else 3) if r.kind in (CONV, DEPTHWISE) else 0
    if wb not in (0, 3):
        r.fail("wl", "output channels in blocks of %d (1 or 8)" % (1 << wb))
    if oc % (1 << wb) or (wb and cpg != c):
        r.fail("wl", "%d output channels in blocks of %d (groups 1)" % (oc, 1 << wb))
    n = oc * kh * kw * cpg
    if dw:  # the layouts the compiler writes (mpy_lazy/ops/conv.py), which the kernels assume
        layouts = ((1, kw * oc, oc, 1), (kh * kw, kw, 1, 1))
    elif wb:  # ohwi8: [OC/8, KH, KW, 8 CPG], output o at (o >> 3) WSO + (o & 7)
        layouts = ((8 * kh * kw * cpg, 8 * kw * cpg, 8 * cpg, 8),)
    else:
        layouts = ((kh * kw * cpg, kw * cpg, cpg, 1), (cpg * kh * kw, kw, 1, kh * kw))
    if (wso, wsy, wsx, wsc) not in layouts:
        r.fail("wl", "weight strides %d, %d, %d, %d: not a layout of the weights (ohwi, oihw, ohwi8; 1hwo, o1hw)"
               % (wso, wsy, wsx, wsc))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * oc * size, size)
    if fl:
        wdt = r.range(4, "dtype", 1, 2)
        r.tensor(32, "weight", ("f32" if wdt == 1 else "f16",), n * (4 if wdt == 1 else 2))
        r.range(3, "act", 0, 3)
        if r.range(28, "b", 0, 1):
            r.tensor(34, "bias", ("f32",), 4 * oc)
        else:
            r.absent(34, "bias")
        if wdt == 2:
            r.region(31, "scratch", 4 * kh * kw * cpg, 4)
        return
    _clamp(r, size)
    acc64 = r.range(27, "acc", 0, 1) if wide else 0
    if not wide:
        r.range(27, "zero_point", -128, 127)
    hasb = r.range(28, "b", 0, 1)
    rp = r.range(29, "scratch", 1, ow)
    r.region(30, "scratch", (8 if wide else 4) * rp * oc, 4)
    r.region(31, "scratch", 4 * (max(kh * kw, (c + 3) // 4) if dw else kh * kw * cpg), 4)
    r.tensor(32, "weight", ("i8",), n)
    _mq_tensor(r, 36, oc, E, 7 if acc64 else 30)
    bias = None
    if hasb:
        r.tensor(34, "bias", ("i32",), 4 * oc)
        bias = E.words(r[34], r[35], oc)
    else:
        r.absent(34, "bias")
    # int8: every accumulator within int32: |bias| + 128 x sum |w| (the kernels add w x x, |x|
    # <= 128, the input zero point folded into the bias); 16x8 with int64 accumulators: within
    # TFLM's +-2**47 (with int32 ones, TFLM's sum wraps as the kernels' does)
    if wide and not acc64:
        return
    sums = E.abs_sums(r[32], r[33], oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb)
    _bound(r, bias, sums, oc, 32768 if wide else 128, (1 << 47) - 1 if wide else INT32_MAX)


def _bound(r, bias, sums, oc, xmax, limit):
    """Every output channel's accumulator within +-limit: |bias| + xmax x sum |w|."""
    for o in range(oc):
        b = bias[o] if bias is not None else 0
        if (b if b >= 0 else -b) + xmax * sums[o] > limit:
            r.fail("bias", "channel %d: bias %d + %d x %d (the weights' sum) can leave the accumulator's range"
                   % (o, b, xmax, sums[o]))


def _dense(r, E):
    fl = r.kind == FDENSE
    wide = r.kind == DENSE16
    n, oc = r.range(8, "x", 1, 1 << 24), r.range(2, "out", 1, MAX_DIM)
    wso, wsi = r.range(9, "wl", 0, 1 << 24), r.range(10, "wl", 0, 1 << 24)
    wb = r.range(20, "wl", 0, 3) if r.kind == DENSE else 0
    if wb not in (0, 3):
        r.fail("wl", "outputs in blocks of %d (1 or 8)" % (1 << wb))
    if oc % (1 << wb):
        r.fail("wl", "%d outputs in blocks of %d" % (oc, 1 << wb))
    if (wso, wsi) not in (((8 * n, 8),) if wb else ((n, 1), (1, oc))):
        r.fail("wl", "weight strides %d, %d: not a layout of the weights (oi, io, oi8)" % (wso, wsi))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", n * size, size)
    r.region(7, "y", oc * size, size)
    if fl:
        wdt = r.range(4, "dtype", 1, 2)
        r.tensor(14, "weight", ("f32" if wdt == 1 else "f16",), n * oc * (4 if wdt == 1 else 2))
        r.range(3, "act", 0, 3)
        if r.range(11, "b", 0, 1):
            r.tensor(16, "bias", ("f32",), 4 * oc)
        else:
            r.absent(16, "bias")
        if wdt == 2:
            r.region(13, "scratch", 4 * (oc if wsi != 1 else n), 4)
        return
    _clamp(r, size)
    acc64 = r.range(20, "acc", 0, 1) if wide else 0
    hasb = r.range(11, "b", 0, 1)
    r.region(12, "scratch", (8 if wide else 4) * oc, 4)
    r.region(13, "scratch", 4 * (n if wide else min(n, DENSE_COL)), 4)
    r.tensor(14, "weight", ("i8",), n * oc)
    _mq_tensor(r, 18, oc, E, 7 if acc64 else 30)
    bias = None
    if hasb:
        r.tensor(16, "bias", ("i32",), 4 * oc)
        bias = E.words(r[16], r[17], oc)
    else:
        r.absent(16, "bias")
    if wide and not acc64:
        return
    sums = E.abs_sums(r[14], r[15], oc, 1, 1, n, wso, 0, 0, wsi, wb)
    _bound(r, bias, sums, oc, 32768 if wide else 128, (1 << 47) - 1 if wide else INT32_MAX)


def _binary(r, E):
    fl = r.kind in (FADD, FMUL, FSUB)
    wide = r.kind in (ADD16, SUB16)
    n = r.range(9, "x", 1, 1 << 24)
    bc = r.range(10, "x", 1, n)
    if n % bc:
        r.fail("x", "%d elements do not repeat a %d-element input" % (n, bc))
    size = 4 if fl else (2 if wide else 1)
    r.region(6, "x", n * size, size)
    r.region(7, "x", bc * size, size)
    r.region(8, "y", n * size, size)
    if fl:
        r.range(3, "act", 0, 3)
        return
    top = (1 << (8 * size - 1)) - 1
    _clamp(r, size)
    r.range(2, "out", 1, 1)
    block = r.range(11, "scratch", 256 if r.kind != MUL else 1, 256 if r.kind != MUL else 1 << 16)
    r.range(12, "zero_point", -top - 1, top)
    r.range(13, "zero_point", -top - 1, top)
    if r.kind != MUL:
        r.region(14, "scratch", 4 * 512, 4)
        r.region(15, "scratch", 4 * block, 4)
        _mq(r, 16, 3, "m", left=False)
    else:
        r.region(14, "scratch", 4 * block, 4)
        _mq(r, 15, 1, "m")


def _pool(r, E):
    fl = r.kind in (FMAXPOOL, FAVGPOOL)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    kh, kw, sh, sw = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"))
    pt, pl = r.range(19, "pad", 0, kh - 1), r.range(20, "pad", 0, kw - 1)
    if (oh - 1) * sh - pt >= h or (ow - 1) * sw - pl >= w:
        r.fail("oh", "a window lies wholly in the padding (nothing to pool)")
    if h * w * c > 1 << 24 or oh * ow * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    size = 4 if fl else 1
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * c * size, size)
    r.range(2, "c", c, c)
    r.range(17, "dil", 1, 1)
    r.range(18, "dil", 1, 1)
    if fl:
        r.range(3, "act", 0, 3)
    else:
        _clamp(r)


def _mean(r, E):
    fl = r.kind == FMEAN
    hw, c = r.range(8, "x", 1, 1 << 24), r.range(10, "c", 1, MAX_DIM)
    if hw * c > 1 << 24:
        r.fail("x", "more than 2**24 elements")
    size = 4 if fl else 1
    r.region(6, "x", hw * c * size, size)
    r.region(7, "y", c * size, size)
    if fl:
        return
    _clamp(r)
    r.range(2, "out", 1, 1)
    r.range(9, "zero_point", -128, 127)
    if 255 * hw > INT32_MAX:
        r.fail("x", "the sums of %d pixels can leave int32" % hw)
    r.region(11, "scratch", 4 * c, 4)
    _mq(r, 12, 1, "m")


def _lut(r, E):
    n = r.range(8, "x", 1, 1 << 24)
    r.region(6, "x", n)
    r.region(7, "y", n)
    r.tensor(9, "table", ("i8",), 256)


def _softmax(r, E):
    n, rows = r.range(8, "x", 1, 511), r.range(9, "x", 1, 1 << 24)
    r.region(6, "x", n * rows)
    es = 2 if r.kind == SOFTMAX16 else 1
    r.region(7, "y", n * rows * es, es)
    r.tensor(10, "table", ("i32",), 1024)
    t = E.words(r[10], r[11], 256)
    for d in range(256):
        if t[d] < 0:
            r.fail("table", "entry %d is negative" % d)


def _move(r, E):
    es = r[10]
    if es not in (1, 2, 4):
        r.fail("size", "%d bytes per element (1, 2 or 4)" % es)
    planes, rows, cols = (r.range(i, "shape", 0, 1 << 24) for i in (11, 4, 5))
    if planes * rows * cols > r.arena // es:  # (zero strides would make it loop on one element)
        r.fail("shape", "%d x %d x %d elements: more than the arena holds" % (planes, rows, cols))
    if planes and rows and cols:
        for o, s_plane, s_row, s_col, field in ((2, 12, 6, 7, "x"), (3, 13, 8, 9, "y")):
            sp, ss, sj = (r.range(i, field, 0, 1 << 24) for i in (s_plane, s_row, s_col))
            last = (planes - 1) * sp + (rows - 1) * ss + (cols - 1) * sj + 1
            r.region(o, field, last * es, es)


def _fill(r, E):
    es = r[5]
    if es not in (1, 2, 4):
        r.fail("size", "%d bytes per element (1, 2 or 4)" % es)
    n = r.range(3, "shape", 0, 1 << 24)
    r.region(2, "y", n * es, es)
    if es < 4:
        r.range(4, "zero_point", -(1 << (8 * es - 1)), (1 << (8 * es - 1)) - 1)


def _quant(r, E):
    n = r.range(4, "x", 1, 1 << 24)
    q = r.kind == QUANTIZE
    es = r[7]
    if es not in (1, 2, 4):
        r.fail("dtype", "%d bytes per integer (1, 2 or 4)" % es)
    r.region(2, "x", n * (4 if q else es), 4 if q else es)
    r.region(3, "y", n * (es if q else 4), es if q else 4)
    r.range(5, "zero_point", -(1 << (8 * es - 1)), (1 << (8 * es - 1)) - 1)
    from .program import bits_f32

    s = bits_f32(r[6])
    if not (s - s == 0 and s > 0):
        r.fail("q", "scale %r is not finite and > 0" % s)


def _act(r, E):
    fn = r.range(2, "op", 0, 9)
    n = r.range(5, "x", 1, 1 << 24)
    r.region(3, "x", 4 * n, 4)
    r.region(4, "y", 4 * n, 4)
    from .program import bits_f32

    a, b = bits_f32(r[6]), bits_f32(r[7])
    if a - a != 0 or b - b != 0 or (fn == 2 and not a <= b):
        r.fail("lo", "%r, %r: finite, lo <= hi" % (a, b))


def _fsoftmax(r, E):
    n, rows = r.range(4, "x", 1, 1 << 24), r.range(5, "x", 1, 1 << 24)
    r.region(2, "x", 4 * n * rows, 4)
    r.region(3, "y", 4 * n * rows, 4)
    from .program import bits_f32

    b = bits_f32(r[6])
    if b - b != 0:
        r.fail("beta", "%r is not finite" % b)


def _rescale(r, E):
    xes, yes = r[5], r[6]
    if xes not in (1, 2, 4) or yes not in (1, 2, 4):
        r.fail("dtype", "%d and %d bytes per element (1, 2 or 4)" % (xes, yes))
    n = r.range(4, "x", 1, 1 << 24)
    r.region(2, "x", n * xes, xes)
    r.region(3, "y", n * yes, yes)
    xtop, ytop = (1 << (8 * xes - 1)) - 1, (1 << (8 * yes - 1)) - 1
    r.range(7, "zero_point", -xtop - 1, xtop)
    r.range(8, "zero_point", -ytop - 1, ytop)
    lo = r.range(9, "clamp", -ytop - 1, ytop)
    r.range(10, "clamp", lo, ytop)
    block = r.range(12, "scratch", 1, 1 << 16)
    r.region(11, "scratch", 4 * block, 4)
    _mq(r, 13, 2, "m")
    r.range(17, "alt", 0, 2)


def _tconv(r, E):
    wide = r.kind == TCONV16
    fl = r.kind == FTCONV
    size = 4 if fl else (2 if wide else 1)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    oc = r.range(2, "out", 1, MAX_DIM)
    kh, kw, sh, sw = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"))
    r.range(17, "pad", 0, kh - 1)
    r.range(18, "pad", 0, kw - 1)
    if h * w * c > 1 << 24 or oh * ow * oc > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * oc * size, size)
    if fl:
        r.range(3, "act", 0, 3)
        r.tensor(22, "weight", ("f32",), 4 * oc * kh * kw * c)
        if r.range(20, "b", 0, 1):
            r.tensor(24, "bias", ("f32",), 4 * oc)
        else:
            r.absent(24, "bias")
        return
    _clamp(r, size)
    top = 0 if wide else 127  # (int16 values are symmetric: TFLM's 16x8 kernels take no input offset)
    r.range(19, "zero_point", -top - 1 if top else 0, top)
    hasb = r.range(20, "b", 0, 1)
    r.region(21, "scratch", (8 if wide else 4) * oc, 4)
    r.tensor(22, "weight", ("i8",), oc * kh * kw * c)
    _mq_tensor(r, 26, oc, E, 7 if wide else 30)
    bias = None
    if hasb:
        r.tensor(24, "bias", ("i32",), 4 * oc)
        bias = E.words(r[24], r[25], oc)
    else:
        r.absent(24, "bias")
    if wide:  # int64 accumulators: within TFLM's +-2**47
        sums = E.abs_sums(r[22], r[23], oc, kh, kw, c, kh * kw * c, kw * c, c, 1)
        _bound(r, bias, sums, oc, 32768, (1 << 47) - 1)


def _recurrent(r, E):
    """The checks of kinds 36..38 (mpy_lazy/_recurrent.py: imported for a program that has them)."""
    from . import _recurrent

    _recurrent.check(r, E)


def _elem(r, E):
    """The checks of kinds 44..53 (mpy_lazy/_elem.py: imported for a program that has them)."""
    from . import _elem

    _elem.CHECK[r.kind - MINMAX](r, E)


_CHECK = (None, _conv, _conv, _dense, _binary, _binary, _pool, _pool, _mean, _lut, _softmax, _move, _fill,
          _quant, _quant, None, _conv, _conv, _dense, _binary, _binary, _pool, _pool, _mean, _act, _fsoftmax,
          _rescale, _binary, _binary, _binary, _conv, _conv, _dense, _tconv, _tconv, _binary, _recurrent,
          _recurrent, _recurrent, _softmax, None, None, None, None) \
    + (_elem,) * 10 + (_tconv, None, None, None, None, None)


class _Env:
    """What the checks read from the slots: int32 words and per-channel weight sums."""

    def __init__(self, B):
        self.B = B

    def words(self, slot, off, n):
        from . import backend

        return backend.typed_view(memoryview(self.B[slot])[off: off + 4 * n], "i32", n)

    def halfs(self, slot, off, n):
        from . import backend

        return backend.typed_view(memoryview(self.B[slot])[off: off + 2 * n], "i16", n)

    def abs_sums(self, slot, off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb=0):
        """sum |w| over each output channel's filter (int8 weights), in viper where it exists."""
        from . import kernels

        import array

        out = array.array("i", bytes(4 * oc))
        geo = array.array("i", (off, oc, kh, kw, cpg, wso, wsy, wsx, wsc, wb))
        (kernels._viper or kernels._pure).abs_sums(self.B[slot], geo, out)
        return out


def _may_share(r, i, x, y):
    """Whether input region (word i, offset x) may overlap the output at offset y."""
    kind = r.kind
    if kind in (CONV, DEPTHWISE):
        return y + conv_lag(r.P, r.k) <= x
    if kind == DENSE:  # oi8 (WB 3): the assembler writes a block of 8 once it is summed
        return y + (r[2] - 8 if r[20] else 0) <= x
    if kind == LSTM:  # step t reads x_t whole before it writes y_t (mpy_lazy/ops/lstm.py: lag)
        return y + lstm_lag(r[2], r[3], r[4]) <= x
    return x == y and _INPLACE.get(kind) == i


def lstm_lag(steps, nin, hid):
    """Bytes an int8 LSTM's output (T x H) may start before its dying input (T x I): no later
    row of x may lie under y_t when step t writes it."""
    return max(0, (steps - 1) * (hid - nin))


def conv_lag(P, k, early=None):
    """Bytes an int8 conv / depthwise output may start before its dying input (the planner's
    rule): the kernels (every path) compute output pixels in raster order and write each
    after reading its window, so no write may reach a byte a later window reads: when pixel
    j's window is read, pixels before j may be written (to yo + j*OC), and the first byte any
    window from j on reads is xo + min(first(j), first of the next output row). The lag is the
    largest j*OC - that, over j. Each term is concave in the row and the column (separable),
    so its maximum is at an end or beside the kink where padding stops: a few candidates.
    The Thumb kernels write part of a pixel's outputs before its window is read for the last
    time: conv8 (WB 3) a block of 8 at a time, OC - 8 of them early; dw4 (depthwise,
    multiplier 1, C a multiple of 4) 4 at a time, OC - 4 early (`early`: those bytes; None:
    from the record at k)."""
    c, oh, ow, oc = P[k + 10], P[k + 11], P[k + 12], P[k + 2]
    if early is None:
        early = conv_early(P[k] & 255, oc, P[k + 26], P[k + 38])
    sh, sw, pt, pl = P[k + 15], P[k + 16], P[k + 19], P[k + 20]
    wc = P[k + 9] * c
    rows = [oy for oy in (0, 1, pt // sh - 1, pt // sh, pt // sh + 1, oh - 2, oh - 1) if 0 <= oy < oh]
    cols = [ox for ox in (0, 1, pl // sw, pl // sw + 1, ow - 1) if 0 <= ox < ow]
    a = max([oy * ow * oc - max(0, oy * sh - pt) * wc for oy in rows])
    b = max([ox * oc - max(0, ox * sw - pl) * c for ox in cols])
    lag = max(0, a + b + early)
    for oy in rows:
        if oy + 1 < oh:  # the next row's first window starts at its first column
            lag = max(lag, (oy * ow + ow - 1) * oc - max(0, (oy + 1) * sh - pt) * wc + early)
    return (lag + 3) // 4 * 4  # the arena's offsets stay word-aligned


def conv_early(kind, oc, opg, wb):
    """Output bytes of a pixel an int8 conv / depthwise may write before it last reads the
    pixel's window (conv_lag)."""
    if kind == CONV and wb:
        return oc - 8
    if kind == DEPTHWISE and opg == 1 and oc % 4 == 0:
        return oc - 4
    return 0


def _bad(msg, field="program"):
    raise ContainerError("program: %s" % msg, field, "program")


def arena_size(P, total):
    """The arena size in bytes of a program of `total` words, from its checked header (so
    the arena can be allocated before anything else)."""
    from .program import H_ARENA, H_MAGIC, H_VERSION, HEADER, MAGIC, MAX_ARENA, VERSION

    if total < HEADER or P[H_MAGIC] != MAGIC:
        _bad("not a program (magic)")
    if P[H_VERSION] != VERSION:
        _bad("version %d, this runtime reads %d: repack the model" % (P[H_VERSION], VERSION), "version")
    arena = P[H_ARENA]
    if not 0 <= arena <= MAX_ARENA or arena % 4:
        _bad("arena of %d bytes (a multiple of 4, at most %d)" % (arena, MAX_ARENA), "arena")
    return arena


def program(P, B, verify=None, total=None):
    """Check a whole program of `total` words (header, inputs/outputs, every record);
    returns its arena size in bytes. verify: see Program."""
    from .program import (H_FIRST, H_INPUTS, H_OUTPUTS, H_RECORDS, HEADER, IO, IO_DIMS, IO_DTYPE, IO_LAYOUT,
                          IO_NDIM, IO_OFF, IO_SCALE, IO_SIZE, IO_ZP, MAX_RECORDS, bits_f32)

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
        if dt not in (1, 3, 5, 7) or not 1 <= nd <= 3 or P[e + IO_LAYOUT] not in (0, 1):
            bad("input/output %d: dtype %d, %d dimensions, layout %d" % (i, dt, nd, P[e + IO_LAYOUT]), "io")
        count = 1
        for j in range(nd):
            d = P[e + IO_DIMS + j]
            if not 1 <= d <= MAX_DIM:
                bad("input/output %d: dimension %d" % (i, d), "io")
            count *= d
        item = (0, 4, 0, 1, 0, 2, 0, 4)[dt]
        if count != size or off < 0 or off % item or off + size * item > arena:
            bad("input/output %d: %d elements at %d do not fit the %d-byte arena" % (i, size, off, arena), "io")
        if P[e + IO_LAYOUT] == 1 and nd != 3:
            bad("input/output %d: layout chw needs H, W, C" % i, "io")
        if dt != 1:
            s = bits_f32(P[e + IO_SCALE])
            top = (1 << (8 * item - 1)) - 1
            if not (s - s == 0 and s > 0) or not -top - 1 <= P[e + IO_ZP] <= top:
                bad("input/output %d: q=%r,%d" % (i, s, P[e + IO_ZP]), "io")
    # the arena bytes that hold values: the inputs', then each record's output; a record's
    # scratch leaves its bytes undefined (each kernel path uses it its own way), and a record
    # may read defined bytes only, so every path computes from the same numbers
    defined = []
    for i in range(nin):
        e = HEADER + IO * i
        defined = _span_add(defined, P[e + IO_OFF], P[e + IO_OFF] + P[e + IO_SIZE] * (0, 4, 0, 1, 0, 2, 0, 4)[P[e + IO_DTYPE]])
    E = _Env(B)
    k = first
    for _ in range(n):
        if k + 2 > total:
            bad("record at word %d runs past the end (%d words)" % (k, total), "records")
        kind = P[k] & 255
        if not 0 < kind < KINDS or not LENGTH[kind]:
            bad("record at word %d: unknown kind %d" % (k, kind), "kind")
        if P[k + 1] != LENGTH[kind] or k + LENGTH[kind] > total:
            bad("record at word %d (%s): %d words, expected %d" % (k, NAMES[kind], P[k + 1], LENGTH[kind]), "records")
        r = _Rec(P, k, arena, B, verify)
        _CHECK[kind](r, E)
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
        if not _span_covered(defined, P[e + IO_OFF], P[e + IO_OFF] + P[e + IO_SIZE] * (0, 4, 0, 1, 0, 2, 0, 4)[P[e + IO_DTYPE]]):
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
    from .program import H_FIRST, H_RECORDS

    out = []
    k = P[H_FIRST]
    for _ in range(P[H_RECORDS]):
        out.append((P[k] & 255, k))
        k += P[k + 1]
    return out


def record_macs(P, k):
    """Multiply-accumulates of the record at k."""
    kind = P[k] & 255
    if kind in (CONV, DEPTHWISE, FCONV, FDEPTHWISE, CONV16, DW16):
        return P[k + 11] * P[k + 12] * P[k + 2] * P[k + 13] * P[k + 14] * P[k + 25]
    if kind in (DENSE, FDENSE, DENSE16):
        return P[k + 8] * P[k + 2]
    if kind in (TCONV, TCONV16, FTCONV):  # every input pixel's channels over every tap
        return P[k + 8] * P[k + 9] * P[k + 10] * P[k + 2] * P[k + 13] * P[k + 14]
    if kind in (LSTM, FLSTM):  # every step: four gates over the input and the hidden state
        return P[k + 2] * 4 * P[k + 4] * (P[k + 3] + P[k + 4])
    if kind == SVDF:
        return P[k + 2] * (P[k + 3] + P[k + 4])
    return 0


def macs(P):
    """Multiply-accumulates of one pass over the program."""
    total = 0
    for _, k in records(P):
        total += record_macs(P, k)
    return total


def has_floats(P):
    """Whether any record computes on or moves f32 values (the float kernels' views are made
    only then)."""
    for kind, k in records(P):
        if FCONV <= kind <= FSOFTMAX or kind in (QUANTIZE, DEQUANTIZE, FSUB, FTCONV, FBINARY, FCAST, FRESIZE,
                                                  FLAYERNORM, FGROUPNORM, FLSTM):
            return True
    return False


def state(P, k):
    """The state the record at k keeps from one call to the next (LSTM, SVDF: TFLM's variable
    tensors), as (arena byte offset, elements, initial value, bytes per element) regions; ()
    for a stateless record. (P checked.)"""
    kind = P[k] & 255
    if kind == LSTM:
        return ((P[k + 8], P[k + 4], P[k + 5], 1), (P[k + 9], P[k + 4], 0, 2))
    if kind == FLSTM:
        return ((P[k + 8], P[k + 4], 0, 4), (P[k + 9], P[k + 4], 0, 4))
    if kind == SVDF:
        return ((P[k + 8], P[k + 2] * P[k + 4], P[k + 11], P[k + 9]),)
    return ()
