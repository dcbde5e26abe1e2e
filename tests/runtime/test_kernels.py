# The int8 kernels (mpy_lazy/_pure.py, mpy_lazy/_viper.py) and the kernel-path switch
# (mpy_lazy/kernels.py). Every kernel runs on seeded pseudo-random geometry, parameters and
# data (rt_util.Lcg: the same cases on CPython and MicroPython) with edge values mixed in, and
# its whole arena is compared against the plain-integer formula written out in this file
# (TFLite Micro's reference kernels, gemmlowp's fixed point from rt_util). On MicroPython the
# viper twin runs the same cases and must give the same bytes as _pure; on CPython (no viper)
# _pure is checked against the formula alone. A kernel runs one record (the program's format,
# mpy_lazy/program.py) in an Env: the arena (values and the kernel's scratch), the tensor slot
# holding its weights, the work array.
import array
import math
import struct
import sys

from rt_util import (INT32_MAX, INT32_MIN, IS_MICROPYTHON, Lcg, c_div, raises, ref_mbqm, ref_rdbpot,
                     ref_one_over_one_plus_x, ref_requant, ref_softmax_row, ref_srdhm, small_board,
                     weight_index)

from mpy_lazy import _pure, backend, check, kernels
from mpy_lazy.program import WORK, _slot_view

_viper = kernels._viper
_thumb = kernels._thumb


class _Viper:
    """_viper's kernels with the assembler inner loops on (the 'thumb' path) or off ('viper'),
    whatever path kernels.use() last picked."""

    def __init__(self, asm):
        self.asm = asm

    def __getattr__(self, name):
        f = getattr(_viper, name)
        asm = self.asm

        def call(*args):
            saved = _viper.T
            _viper.T = asm
            try:
                return f(*args)
            finally:
                _viper.T = saved

        return call


IMPLS = [("pure", _pure)] + ([("viper", _Viper(None))] if _viper is not None else []) \
    + ([("thumb", _Viper(_thumb))] if _thumb is not None else [])
CASES = 8 if small_board() else 40  # random cases per kernel test
VECTORS = 400 if small_board() else 4000  # fixed-point vectors

EDGE_M = (0, 1, 1 << 30, (1 << 30) + 1, 1518500250, INT32_MAX - 1, INT32_MAX)
EDGE_ACC = (INT32_MIN, INT32_MIN + 1, INT32_MIN + 2, -(1 << 30) - 1, -(1 << 30), -65536, -256, -129, -128,
            -2, -1, 0, 1, 2, 127, 128, 255, 65535, 1 << 30, (1 << 30) + 1, INT32_MAX - 1, INT32_MAX)


def bitlen(v):
    v = -v if v < 0 else v
    n = 0
    while v:
        v >>= 1
        n += 1
    return n


def i8s(r, n, zp=0):
    """n int8 values, with the edges -128/127 (and the zero point) now and then."""
    out = []
    for _ in range(n):
        k = r.next() % 16
        out.append(-128 if k == 0 else 127 if k == 1 else zp if k == 2 else r.int(-128, 127))
    return out


def multiplier(r):
    return r.pick(EDGE_M) if r.chance(4) else r.int(1 << 30, INT32_MAX)


def shift(r, bound):
    """A shift for accumulators of magnitude <= bound: mostly one that lands near the int8
    range, now and then -31 or the largest positive shift for which bound << s fits int32."""
    top = 0
    while (bound << (top + 1)) <= INT32_MAX and top < 30:
        top += 1
    k = r.next() % 8
    if k == 0:
        return -31
    if k == 1:
        return top
    s = 7 - bitlen(bound) + r.int(-3, 3)
    return -31 if s < -31 else (top if s > top else s)


def mq_for(r, oc, bound):
    """Per-channel multipliers then shifts (the kernels' `mq`), for |acc| <= bound."""
    return [multiplier(r) for _ in range(oc)] + [shift(r, bound) for _ in range(oc)]


def head(r, oc):
    """(zy, lo, hi): an output zero point (edges included) and a clamp (mostly the int8 range)."""
    zy = r.pick((-128, 127, 0, r.int(-128, 127), r.int(-128, 127)))
    lo, hi = -128, 127
    if r.chance(3):
        lo = r.int(-128, 127)
        hi = r.int(lo, 127)
    return zy, lo, hi


class Arena:
    """An int8 arena: garbage, then the regions asked for (each after a random gap), then
    garbage, then the kernel's int32 scratch regions (words, word-aligned, garbage too: a
    kernel must not read what it did not write); `expected` starts as a copy and gets the
    outputs the formula computes (the scratch is not compared)."""

    def __init__(self, r, sizes, scratch=()):
        self.offsets = []
        n = r.int(0, 5)
        for size in sizes:
            self.offsets.append(n)
            n += size + r.int(0, 5)
        n += r.int(0, 5)
        self.size = n
        self.scratch = []
        n = (n + 3) // 4 * 4
        for words in scratch:
            self.scratch.append(n)
            n += 4 * words
        self.init = i8s(r, n)
        self.expected = list(self.init[: self.size])

    def put(self, off, vals):
        for i in range(len(vals)):
            self.init[off + i] = vals[i]
            self.expected[off + i] = vals[i]

    def fresh(self):
        return bytearray(array.array("b", self.init))


class Slot:
    """Tensors laid out in one buffer as in a container (each word-aligned): offsets for a
    record's (slot, offset) fields."""

    def __init__(self):
        self.b = bytearray()

    def add(self, vals, tc):
        while len(self.b) % 4:
            self.b.append(0)
        off = len(self.b)
        self.b += bytes(array.array(tc, vals))
        return off

    def i8(self, vals):
        return self.add(vals, "b")

    def i32(self, vals):
        return self.add(vals, "i")


class Env:
    """What a kernel reads of a running program (mpy_lazy/program.py): the arena A, the
    tensor slots B, the work array W, and the pure kernels' typed views of them."""

    def __init__(self, arena, slots=()):
        self.A = arena
        self.B = tuple(slots) or (bytearray(4),)
        self.W = array.array("i", bytes(4 * WORK))
        self.a8 = _slot_view(arena, "i8")
        self.a16 = _slot_view(arena, "i16")
        self.a32 = _slot_view(arena, "i32")
        self.s8 = tuple([_slot_view(b, "i8") for b in self.B])
        self.s32 = tuple([_slot_view(b, "i32") for b in self.B])


    def view(self, es):
        return (self.a8, self.a16, None, self.a32)[es - 1]


def record(kind, fields):
    """A program holding one record (the kernels read it at word 0)."""
    return array.array("i", [kind, len(fields) + 2] + list(fields))


def run_record(mod, name, arena, slots, kind, fields):
    """Run kernel `name` of impl `mod` on one record; returns the arena (a bytearray)."""
    E = Env(arena, slots)
    P = record(kind, fields)
    getattr(mod, name)(E, P, 0)
    assert list(P)[2:] == list(fields), "%s changed its record" % name
    return arena


def signed(buf):
    return [v - 256 if v > 127 else v for v in buf]


def run_each(build, expected, what):
    """build(impl module) -> (run thunk, output buffer); every impl must produce `expected`
    (the buffer's bytes read as int8 when it is a bytearray)."""
    for name, mod in IMPLS:
        fn, out = build(mod)
        fn()
        got = signed(out) if isinstance(out, bytearray) else out
        for i in range(len(expected)):
            if got[i] != expected[i]:
                raise AssertionError("%s on %s: element %d is %d, expected %d" % (what, name, i, got[i], expected[i]))


def requant(mod, acc, mq, dst, p):
    """requant() of either impl on whole buffers (the pure one takes their start offsets)."""
    if mod is _pure:
        return _pure.requant(acc, 0, mq, 0, dst, p)
    return mod.requant(acc, mq, dst, p)


# --- fixed point ------------------------------------------------------------------------------

def fixed_point_vectors(r, n):
    """(x, m, s) int32 arrays with x << s within int32 for s > 0 (TFLM's domain). Arrays, not
    a list of tuples: thousands of live big ints scattered over a board's heap fragment it."""
    xs, ms, ss = array.array("i", bytes(4 * n)), array.array("i", bytes(4 * n)), array.array("i", bytes(4 * n))
    for i in range(n):
        x = EDGE_ACC[i % len(EDGE_ACC)] if i < 3 * len(EDGE_ACC) or r.chance(4) else r.int(INT32_MIN, INT32_MAX)
        m = r.pick(EDGE_M) if r.chance(3) else r.int(0, INT32_MAX)
        s = r.int(-31, 6) if not r.chance(6) else r.pick((-31, -30, -1, 0, 1))
        if s > 0:
            while not INT32_MIN <= x * (1 << s) <= INT32_MAX:
                x = c_div(x, 2)
        xs[i], ms[i], ss[i] = x, m, s
    return xs, ms, ss


def test_fixed_point_primitives_match_gemmlowp():
    r = Lcg(1)
    edges = EDGE_ACC + (3, -3, 5, -5, 6, -6)
    for a in edges:
        for b in edges:
            assert _pure.srdhm(a, b) == ref_srdhm(a, b), (a, b)
    for _ in range(VECTORS):
        a = r.int(INT32_MIN, INT32_MAX)
        b = r.pick(edges) if r.chance(4) else r.int(INT32_MIN, INT32_MAX)
        assert _pure.srdhm(a, b) == ref_srdhm(a, b), (a, b)
    assert ref_srdhm(INT32_MIN, INT32_MIN) == INT32_MAX and _pure.srdhm(INT32_MIN, INT32_MIN) == INT32_MAX
    for e in range(32):
        for x in edges:
            assert _pure.rdbpot(x, e) == ref_rdbpot(x, e), (x, e)
    for _ in range(VECTORS):
        x, e = r.int(INT32_MIN, INT32_MAX), r.int(0, 31)
        assert _pure.rdbpot(x, e) == ref_rdbpot(x, e), (x, e)
    # rounding ties go away from zero
    assert ref_rdbpot(3, 1) == 2 and ref_rdbpot(-3, 1) == -2 and ref_rdbpot(-5, 2) == -1
    assert _pure.rdbpot(-3, 1) == -2 and _pure.rdbpot(-1, 1) == -1 and _pure.rdbpot(1, 1) == 1
    xs, ms, ss = fixed_point_vectors(r, VECTORS)
    for i in range(VECTORS):
        x, m, s = xs[i], ms[i], ss[i]
        assert _pure.mbqm(x, m, s) == ref_mbqm(x, m, s), (x, m, s)


def test_reciprocal_matches_gemmlowp():
    """softmax's 1 / sum: _pure.one_over_one_plus_x against gemmlowp's, written out (rt_util),
    on Q0.31 values in [0, 2**31); viper's _reciprocal (TFLM's GetReciprocal of a Q12.19 sum:
    the Q0.31 scale and the output exponent bits_over_unit + 23) against the same."""
    r = Lcg(5)
    xs = [0, 1, 2, (1 << 30) - 1, 1 << 30, INT32_MAX - 1, INT32_MAX]
    xs += [r.int(0, INT32_MAX) for _ in range(VECTORS // 4)]
    for a in xs:
        assert _pure.one_over_one_plus_x(a) == ref_one_over_one_plus_x(a), a
    if _viper is None:
        return
    t = array.array("i", (0, 0, 0, 0))
    sums = [1, 2, 3, 1 << 19, (1 << 19) + 1, (1 << 28) - 1, 511 << 19] + [r.int(1, (1 << 28) - 1) for _ in range(VECTORS // 4)]
    for total in sums:
        headroom = 0
        while not (total << headroom) & (1 << 31):
            headroom += 1
        shifted = ((total << headroom) & 0xFFFFFFFF) - (1 << 31)
        t[0] = total
        _viper._reciprocal(t)
        assert t[0] == ref_one_over_one_plus_x(shifted) and t[3] == 12 - headroom + 23, (total, t[0], t[3])


def test_viper_srdhm_and_rdbpot():
    if _viper is None:
        return  # CPython: no viper (the _pure versions are checked above)
    r = Lcg(2)
    t = array.array("i", (0, 0, 0, 0))
    edges = EDGE_ACC + (3, -3)
    for i in range(len(edges) ** 2 + VECTORS):
        if i < len(edges) ** 2:
            a, b = edges[i // len(edges)], edges[i % len(edges)]
        else:
            a, b = r.int(INT32_MIN, INT32_MAX), r.int(INT32_MIN, INT32_MAX)
        t[0], t[1] = a, b
        _viper._srdhm(t)
        assert t[2] == ref_srdhm(a, b), (a, b, t[2])
    for e in range(32):
        for x in edges:
            t[2] = x
            _viper._rdbpot(t, e)
            assert t[2] == ref_rdbpot(x, e), (x, e, t[2])


def test_requant_raw_and_int8_on_fixed_point_vectors():
    """requant() over thousands of (acc, m, s): raw mode (OC < 0: the bare mbqm results into an
    int32 array, one channel per element) and int8 mode (zero point, clamp), every impl."""
    r = Lcg(3)
    n = VECTORS
    acc, ms, ss = fixed_point_vectors(r, n)
    mq = ms + ss
    want = array.array("i", bytes(4 * (n + 3)))
    for i in range(n):
        want[2 + i] = ref_mbqm(acc[i], ms[i], ss[i])

    def raw(mod):
        out = array.array("i", bytes(4 * (n + 3)))
        p = array.array("i", (2, n, -n, 99, -128, 127, 1, 0))
        return (lambda: requant(mod, acc, mq, out, p)), out

    run_each(raw, want, "requant raw")
    for zy, lo, hi in ((0, -128, 127), (-128, -128, 127), (127, -128, 127), (5, -7, 9), (-3, 0, 0)):
        want = array.array("b", bytes(n + 1))
        for i in range(n):
            want[1 + i] = ref_requant(acc[i], ms[i], ss[i], zy, lo, hi)

        def int8(mod):
            out = array.array("b", bytes(n + 1))
            p = array.array("i", (1, n, n, zy, lo, hi, 1, 0))  # OC = n: one channel per element
            return (lambda: requant(mod, acc, mq, out, p)), out

        run_each(int8, want, "requant int8 %d %d %d" % (zy, lo, hi))


def test_requant_paths_agree_when_the_shift_overflows():
    """Outside TFLite Micro's defined domain: a positive shift whose acc << shift leaves int32
    (undefined behaviour in TFLM's `x * (1 << left_shift)`; the shift and the accumulator are
    both in range: conv bias 2**20 and shift 20 reach it). Whatever the answer, _pure and viper
    must give the same one (the runtime's promise: the same integers on every path)."""
    if _viper is None:
        return  # one implementation: nothing to compare
    r = Lcg(6)
    edge = ((1 << 20, 1 << 30, 20), (3 << 28, INT32_MAX, 30), (-(1 << 25), 1 << 30, 12), (1 << 29, 1 << 30, 5),
            (INT32_MIN, 1 << 30, 1), (INT32_MAX, INT32_MAX, 1))
    n = len(edge) + 200
    acc, mq = array.array("i", bytes(4 * n)), array.array("i", bytes(8 * n))
    for i in range(n):
        if i < len(edge):
            acc[i], mq[i], mq[n + i] = edge[i]
        else:
            s = r.int(1, 30)
            acc[i], mq[i], mq[n + i] = r.int(INT32_MIN, INT32_MAX) | (1 << (31 - s)), r.int(1 << 30, INT32_MAX), s
    outs = []
    for _, mod in IMPLS:
        d = array.array("b", bytes(n))
        requant(mod, acc, mq, d, array.array("i", (0, n, n, 0, -128, 127, 1, 0)))
        outs.append(d)
    for k in range(1, len(outs)):
        bad = [(acc[i], mq[i], mq[n + i], outs[0][i], outs[k][i]) for i in range(n) if outs[0][i] != outs[k][i]]
        assert not bad, "%d of %d differ (acc, m, shift, pure, %s): %s" % (len(bad), n, IMPLS[k][0], bad[:4])


def test_requant_channels_cycle_and_header():
    """Element i uses channel i % OC; RQ_Y/RQ_N select the block; nothing else is written."""
    r = Lcg(4)
    for _ in range(CASES):
        oc = r.int(1, 7)
        n = oc * r.int(1, 5) + r.int(0, oc - 1)
        acc = [r.pick(EDGE_ACC) if r.chance(5) else r.int(-(1 << 20), 1 << 20) for _ in range(n)]
        bound = 1 << 20
        for v in acc:
            if abs(v) > bound:
                bound = abs(v)
        mq = mq_for(r, oc, bound)
        zy, lo, hi = head(r, oc)
        ar = Arena(r, [n])
        y = ar.offsets[0]
        for i in range(n):
            ar.expected[y + i] = ref_requant(acc[i], mq[i % oc], mq[oc + i % oc], zy, lo, hi)

        def build(mod):
            a = ar.fresh()
            p = array.array("i", (y, n, oc, zy, lo, hi, 1, 0))
            a = array.array("b", ar.init)
            return (lambda: requant(mod, array.array("i", acc), array.array("i", mq), a, p)), a

        run_each(build, ar.expected, "requant")


# --- conv / depthwise -------------------------------------------------------------------------

def conv_case(r, dw):
    while True:
        h, w = r.int(1, 6), r.int(1, 6)
        if dw:
            c = r.pick((1, 2, 3, 4, 4, 8, 12))  # (4 n channels, multiplier 1: the assembler's dw4)
            mult = r.pick((1, 1, 2, 3))
            oc, cpg, opg = c * mult, 1, mult
        else:
            g = r.pick((1, 1, 1, 2, 3))
            cpg, opg = r.pick((1, 2, 3, 4, 5, 8)), r.int(1, 3)  # viper: < 4 and >= 4 take two loop orders
            c, oc = g * cpg, g * opg
        kh, kw = r.int(1, 3), r.int(1, 3)
        sh, sw = r.pick((1, 1, 2, 3)), r.pick((1, 1, 2))
        dh, dwd = r.pick((1, 1, 1, 2)), r.pick((1, 1, 2))
        eh, ew = dh * (kh - 1) + 1, dwd * (kw - 1) + 1
        pads = (r.int(0, eh - 1), r.int(0, ew - 1), r.int(0, eh - 1), r.int(0, ew - 1))
        oh = (h + pads[0] + pads[2] - eh) // sh + 1
        ow = (w + pads[1] + pads[3] - ew) // sw + 1
        if oh >= 1 and ow >= 1:
            return h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dwd, pads, cpg, opg


STRIDES = {  # (WSO, WSY, WSX, WSC) as functions of (oc, kh, kw, cpg): the kernels' ABI
    "ohwi": lambda oc, kh, kw, cpg: (kh * kw * cpg, kw * cpg, cpg, 1),
    "ohwi8": lambda oc, kh, kw, cpg: (8 * kh * kw * cpg, 8 * kw * cpg, 8 * cpg, 8),  # WSO: per block of 8
    "oihw": lambda oc, kh, kw, cpg: (cpg * kh * kw, kw, 1, kh * kw),
    "1hwo": lambda oc, kh, kw, cpg: (1, kw * oc, oc, 1),
    "o1hw": lambda oc, kh, kw, cpg: (kh * kw, kw, 1, 1),
}


def check_conv(seed, dw):
    r = Lcg(seed)
    for case in range(CASES):
        h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dwd, pads, cpg, opg = conv_case(r, dw)
        layout = r.pick(("1hwo", "o1hw") if dw else ("ohwi", "oihw", "ohwi8"))
        if layout == "ohwi8":  # outputs in blocks of 8 (WB 3): the assembler's conv8 with groups 1
            opg = 8 * r.int(1, 2)
            oc = (c // cpg) * opg
        zx = r.pick((-128, 127, 0, r.int(-128, 127)))
        x = i8s(r, h * w * c, zx)
        wts = i8s(r, oc * kh * kw * cpg)  # canonical order (o, ky, kx, ci)
        wbuf = [0] * len(wts)
        k = 0
        for o in range(oc):
            for ky in range(kh):
                for kx in range(kw):
                    for ci in range(cpg):
                        wbuf[weight_index(layout, o, ky, kx, ci, oc, kh, kw, cpg)] = wts[k]
                        k += 1
        taps = kh * kw * cpg * 128 * 255
        hasb = r.next() % 3 != 0
        mq = mq_for(r, oc, taps + 65536)
        bias = []
        for o in range(oc):
            if not hasb:
                bias.append(0)
            elif mq[oc + o] > 0 or r.chance(2):
                bias.append(r.int(-65536, 65536))
            else:  # near the int32 limits, leaving room for the taps
                big = INT32_MAX - taps
                bias.append(r.pick((big, -big, r.int(-big, big))))
                mq[oc + o] = r.int(-31, 0)
        zy, lo, hi = head(r, oc)
        rp = r.int(1, ow)  # output pixels per requantization
        window = max(kh * kw, (c + 3) // 4) if dw else kh * kw * cpg
        ar = Arena(r, [h * w * c, oh * ow * oc], (rp * oc, window))
        xo, yo = ar.offsets
        ar.put(xo, x)
        for oy in range(oh):
            for ox in range(ow):
                for o in range(oc):
                    acc = bias[o]
                    g = o // opg
                    for ky in range(kh):
                        iy = oy * sh - pads[0] + ky * dh
                        for kx in range(kw):
                            ix = ox * sw - pads[1] + kx * dwd
                            inside = 0 <= iy < h and 0 <= ix < w
                            for ci in range(cpg):  # ZX is in the bias: padding reads ZX
                                wv = wts[((o * kh + ky) * kw + kx) * cpg + ci]
                                acc += wv * (x[(iy * w + ix) * c + g * cpg + ci] if inside else zx)
                    assert INT32_MIN <= acc <= INT32_MAX
                    ar.expected[yo + (oy * ow + ox) * oc + o] = ref_requant(acc, mq[o], mq[oc + o], zy, lo, hi)
        ws = STRIDES[layout](oc, kh, kw, cpg)
        p = [oc, zy, lo, hi, xo, yo, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwd, pads[0], pads[1]]
        p += list(ws) + [cpg, opg, zx, 1 if hasb else 0, rp]
        slot = Slot()
        wo, bo, mo = slot.i8(wbuf), slot.i32(bias) if hasb else 0, slot.i32(mq)
        fields = p + ar.scratch + [0, wo, 0, bo, 0, mo, 3 if layout == "ohwi8" else 0]
        what = "%s case %d %s %s" % ("depthwise" if dw else "conv", case, layout, p)

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "depthwise" if dw else "conv", a, (slot.b,),
                                       check.DEPTHWISE if dw else check.CONV, fields)), a

        run_each(build, ar.expected, what)


def test_conv():
    check_conv(10, False)


def test_depthwise():
    check_conv(11, True)


def test_grouped_conv_equals_depthwise():
    """A conv with one input channel per group (groups = C, ohwi weights) computes what
    depthwise computes with the same filters in 1hwo or o1hw (how a torch depthwise conv may
    arrive): conv() and depthwise() give the same bytes on every impl."""
    r = Lcg(12)
    for case in range(CASES // 2):
        h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dwd, pads, cpg, opg = conv_case(r, True)
        x = i8s(r, h * w * c)
        wts = i8s(r, oc * kh * kw)  # canonical (o, ky, kx)
        mq = mq_for(r, oc, kh * kw * 128 * 255)
        outs = []
        for layout in ("ohwi", "1hwo", "o1hw"):
            wbuf = [0] * len(wts)
            for o in range(oc):
                for ky in range(kh):
                    for kx in range(kw):
                        wbuf[weight_index(layout, o, ky, kx, 0, oc, kh, kw, 1)] = wts[(o * kh + ky) * kw + kx]
            p = [oc, 0, -128, 127, 0, h * w * c, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwd, pads[0], pads[1]]
            p += list(STRIDES[layout](oc, kh, kw, 1)) + [1, opg, 3, 0, ow]
            acc = (h * w * c + oh * ow * oc + 3) // 4 * 4
            col = acc + 4 * ow * oc
            slot = Slot()
            fields = p + [acc, col, 0, slot.i8(wbuf), 0, 0, 0, slot.i32(mq), 0]
            for _, mod in IMPLS:
                a = bytearray(array.array("b", x + [0] * (col + 4 * max(kh * kw, c) - h * w * c)))
                if layout == "ohwi":
                    run_record(mod, "conv", a, (slot.b,), check.CONV, fields)
                else:
                    run_record(mod, "depthwise", a, (slot.b,), check.DEPTHWISE, fields)
                outs.append(list(a)[:acc])
        for o in outs[1:]:
            assert o == outs[0], case


# --- dense ------------------------------------------------------------------------------------

def test_dense():
    """oi (WSI 1: viper's 4-wide unrolled loop, n_in not a multiple of 4 included) and io
    layouts, with gaps between weight rows, and oi8 (outputs in blocks of 8, WB 3: the
    assembler's conv8); bias or not."""
    r = Lcg(20)
    sizes = (1, 2, 3, 4, 5, 7, 8, 9, 13, 32, 33)
    for case in range(CASES + 10):
        n_in = sizes[case % len(sizes)] if case < 2 * len(sizes) else r.int(1, 40)
        layout = ("oi", "io", "oi8")[case % 3]
        n_out = r.int(1, 6) if layout != "oi8" else 8 * r.int(1, 2)
        gap = r.pick((0, 0, 1, 3)) if layout != "oi8" else 0
        wso, wsi = {"io": (1, n_out + gap), "oi": (n_in + gap, 1), "oi8": (8 * n_in, 8)}[layout]
        wb = 3 if layout == "oi8" else 0
        wts = [i8s(r, n_in) for _ in range(n_out)]  # wts[o][i]
        size = (n_in - 1) * wsi + (n_out // (1 << wb) - 1) * wso + (1 << wb)
        wbuf = i8s(r, size)  # garbage in the gaps
        for o in range(n_out):
            for i in range(n_in):
                wbuf[(o >> wb) * wso + (o & 7 if wb else 0) + i * wsi] = wts[o][i]
        zx = r.pick((-128, 127, 0, r.int(-128, 127)))
        x = i8s(r, n_in, zx)
        bound = n_in * 128 * 255
        mq = mq_for(r, n_out, bound + 100000)
        hasb = r.next() % 3 != 0
        bias = []
        for o in range(n_out):
            if not hasb:
                bias.append(0)
            elif mq[n_out + o] > 0 or r.chance(2):
                bias.append(r.int(-100000, 100000))
            else:
                big = INT32_MAX - bound
                bias.append(r.pick((big, -big)))
                mq[n_out + o] = r.int(-31, 0)
        zy, lo, hi = head(r, n_out)
        ar = Arena(r, [n_in, n_out], (n_out, n_in))
        xo, yo = ar.offsets
        ar.put(xo, x)
        for o in range(n_out):
            acc = bias[o]
            for i in range(n_in):
                acc += wts[o][i] * x[i]
            ar.expected[yo + o] = ref_requant(acc, mq[o], mq[n_out + o], zy, lo, hi)
        p = [n_out, zy, lo, hi, xo, yo, n_in, wso, wsi, 1 if hasb else 0]
        slot = Slot()
        fields = p + ar.scratch + [0, slot.i8(wbuf), 0, slot.i32(bias) if hasb else 0, 0, slot.i32(mq), wb]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "dense", a, (slot.b,), check.DENSE, fields)), a

        run_each(build, ar.expected, "dense case %d %s %s" % (case, layout, p))


# --- add / mul --------------------------------------------------------------------------------

def binary_case(r):
    c = r.int(1, 8)
    n = c * r.pick((1, 2, 7, 40, 90))
    bc = c if r.chance(2) and n > c else n  # broadcast a per-channel x2 (BC < N), or not
    block = r.pick((256, 257, 300, 1024))
    return n, bc, block


def test_add():
    """TFLM's int8 add: both inputs (q - Z) << 20 rescaled (m1, s1), (m2, s2), summed, rescaled
    (m, s); broadcast x2 (BC < N); several blocks; the 512-entry table built by the kernel."""
    r = Lcg(30)
    for case in range(CASES):
        n, bc, block = binary_case(r)
        z1, z2 = r.pick((-128, 127, r.int(-128, 127))), r.pick((-128, 127, r.int(-128, 127)))
        m1, m2, m = multiplier(r), multiplier(r), multiplier(r)
        s1, s2 = r.int(-12, 0), r.pick((-31, r.int(-12, 0)))
        bound = 2 * (255 << 20)
        s = shift(r, bound)
        zy, lo, hi = head(r, 1)
        x1, x2 = i8s(r, n, z1), i8s(r, bc, z2)
        ar = Arena(r, [n, bc, n], (512, block))
        o1, o2, yo = ar.offsets
        ar.put(o1, x1)
        ar.put(o2, x2)
        for i in range(n):
            a = ref_mbqm((x1[i] - z1) * (1 << 20), m1, s1)
            b = ref_mbqm((x2[i % bc] - z2) * (1 << 20), m2, s2)
            ar.expected[yo + i] = ref_requant(a + b, m, s, zy, lo, hi)
        p = [1, zy, lo, hi, o1, o2, yo, n, bc, block, z1, z2]
        fields = p + ar.scratch + [m1, s1, m2, s2, m, s]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "add", a, (), check.ADD, fields)), a

        run_each(build, ar.expected, "add case %d %s" % (case, p))


def test_mul():
    r = Lcg(31)
    for case in range(CASES):
        n, bc, block = binary_case(r)
        z1, z2 = r.pick((-128, 127, r.int(-128, 127))), r.pick((-128, 127, r.int(-128, 127)))
        m = multiplier(r)
        s = shift(r, 255 * 255)
        zy, lo, hi = head(r, 1)
        x1, x2 = i8s(r, n, z1), i8s(r, bc, z2)
        ar = Arena(r, [n, bc, n], (block,))
        o1, o2, yo = ar.offsets
        ar.put(o1, x1)
        ar.put(o2, x2)
        for i in range(n):
            ar.expected[yo + i] = ref_requant((x1[i] - z1) * (x2[i % bc] - z2), m, s, zy, lo, hi)
        p = [1, zy, lo, hi, o1, o2, yo, n, bc, block, z1, z2]
        fields = p + ar.scratch + [m, s]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "mul", a, (), check.MUL, fields)), a

        run_each(build, ar.expected, "mul case %d %s" % (case, p))


# --- pooling, mean ------------------------------------------------------------------------------

def pool_case(r):
    while True:
        h, w, c = r.int(1, 7), r.int(1, 7), r.int(1, 3)
        kh, kw = r.int(1, 4), r.int(1, 4)
        sh, sw = r.int(1, 3), r.int(1, 3)
        pads = (r.int(0, kh - 1), r.int(0, kw - 1), r.int(0, kh - 1), r.int(0, kw - 1))
        oh = (h + pads[0] + pads[2] - kh) // sh + 1
        ow = (w + pads[1] + pads[3] - kw) // sw + 1
        if oh >= 1 and ow >= 1:
            return h, w, c, oh, ow, kh, kw, sh, sw, pads


def check_pool(seed, is_max):
    r = Lcg(seed)
    partial = 0
    for case in range(CASES):
        h, w, c, oh, ow, kh, kw, sh, sw, pads = pool_case(r)
        lo, hi = -128, 127
        if r.chance(3):
            lo = r.int(-128, 100)
            hi = r.int(lo, 127)
        x = i8s(r, h * w * c)
        if r.chance(3):  # mostly negative values: negative sums to round
            x = [v if v < 0 else -v - 1 for v in x]
        ar = Arena(r, [h * w * c, oh * ow * c])
        xo, yo = ar.offsets
        ar.put(xo, x)
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    vals = []
                    for ky in range(kh):
                        for kx in range(kw):
                            iy, ix = oy * sh - pads[0] + ky, ox * sw - pads[1] + kx
                            if 0 <= iy < h and 0 <= ix < w:
                                vals.append(x[(iy * w + ix) * c + ch])
                    assert vals  # pad < k: every window keeps one element
                    if len(vals) < kh * kw:
                        partial += 1
                    if is_max:
                        v = max(vals)
                    else:  # TFLM: (sum +- count / 2) / count, C division; count = in-bounds only
                        s, n = sum(vals), len(vals)
                        v = c_div(s + n // 2, n) if s > 0 else c_div(s - n // 2, n)
                    ar.expected[yo + (oy * ow + ox) * c + ch] = lo if v < lo else (hi if v > hi else v)
        p = [c, 0, lo, hi, xo, yo, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pads[0], pads[1]]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "maxpool" if is_max else "avgpool", a, (),
                                       check.MAXPOOL if is_max else check.AVGPOOL, p)), a

        run_each(build, ar.expected, "%s case %d %s" % ("maxpool" if is_max else "avgpool", case, p))
    assert partial > 0  # padding that leaves partial windows was reached


def test_maxpool():
    check_pool(40, True)


def test_avgpool():
    check_pool(41, False)


def test_avgpool_rounds_half_away_from_zero():
    """Exact cases: sums -3, -2, -1, 1, 2, 3 over 2 elements and -5 over 4 (TFLM rounds the
    average half away from zero: -1.5 -> -2, -0.5 -> -1, 0.5 -> 1, -1.25 -> -1)."""
    cases = (((-1, -2), -2), ((-1, -1), -1), ((0, -1), -1), ((0, 1), 1), ((1, 1), 1), ((1, 2), 2),
             ((-1, -1, -1, -2), -1), ((-128, -128), -128), ((127, 127), 127), ((-3, -2, -2), -2))
    for vals, want in cases:
        n = len(vals)
        p = [1, 0, -128, 127, 0, n, 1, n, 1, 1, 1, 1, n, 1, 1, 1, 1, 0, 0]
        for name, mod in IMPLS:
            a = bytearray(array.array("b", list(vals) + [99]))
            run_record(mod, "avgpool", a, (), check.AVGPOOL, p)
            assert signed(a)[n] == want, (name, vals, a[n], want)


def test_mean():
    r = Lcg(50)
    for case in range(CASES):
        hw, c = r.int(1, 60), r.int(1, 6)
        zx = r.pick((-128, 127, r.int(-128, 127)))
        m = multiplier(r)
        s = shift(r, hw * 255)
        zy = r.pick((-128, 127, r.int(-128, 127)))
        x = i8s(r, hw * c, zx)
        ar = Arena(r, [hw * c, c], (c,))
        xo, yo = ar.offsets
        ar.put(xo, x)
        for ch in range(c):
            total = 0
            for i in range(hw):
                total += x[i * c + ch] - zx
            ar.expected[yo + ch] = ref_requant(total, m, s, zy)
        fields = [1, zy, -128, 127, xo, yo, hw, zx, c] + ar.scratch + [m, s]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "mean", a, (), check.MEAN, fields)), a

        run_each(build, ar.expected, "mean case %d %s" % (case, fields))


# --- lut, softmax -----------------------------------------------------------------------------

def test_lut():
    r = Lcg(60)
    for case in range(CASES):
        n = r.int(1, 300)
        table = i8s(r, 256)
        x = i8s(r, n)
        inplace = r.chance(2)
        ar = Arena(r, [n] if inplace else [n, n])
        xo = ar.offsets[0]
        yo = xo if inplace else ar.offsets[1]
        ar.put(xo, x)
        for i in range(n):
            ar.expected[yo + i] = table[x[i] + 128]
        slot = Slot()
        fields = [0, 0, 0, 0, xo, yo, n, 0, slot.i8(table)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "lut", a, (slot.b,), check.LUT, fields)), a

        run_each(build, ar.expected, "lut case %d" % case)


def exp_table(r, dmax=None):
    """(exps, dmax): exp(-d * k) in Q0.31 (exps[0] = INT32_MAX, TFLM's One), 0 beyond dmax
    (TFLM's diff_min); or a flat table (every element equal: the largest sums)."""
    kind = r.next() % 5
    if dmax is None:
        dmax = r.pick((255, 255, r.int(1, 254), r.int(5, 60)))
    k = r.pick((0.01, 0.05, 0.1, 0.3, 1.0)) * (1 + (r.next() % 100) / 100.0)
    exps = []
    for d in range(256):
        if d > dmax:
            exps.append(0)
        elif kind == 0:
            exps.append(INT32_MAX)
        else:
            v = int(math.exp(-d * k) * 2147483648.0)
            exps.append(INT32_MAX if v > INT32_MAX else v)
    return exps, dmax


def test_softmax():
    r = Lcg(70)
    depths = (1, 2, 3, 10, 64, 255, 511)
    below = 0
    for case in range(CASES):
        n = depths[case % len(depths)] if case < len(depths) or not small_board() else r.int(1, 20)
        if small_board() and n > 64:
            n = 64
        rows = r.int(1, 3)
        # every third case has a small diff_min and a wide spread, so elements below it occur
        exps, dmax = exp_table(r, r.int(5, 60) if case % 3 == 0 else None)
        spread = 255 if case % 3 == 0 else r.pick((3, 30, 255))
        x = []
        for _ in range(rows):
            top = r.int(-128, 127)
            x += [top if r.chance(4) else max(-128, top - r.int(0, spread)) for _ in range(n)]
        ar = Arena(r, [n * rows, n * rows])
        xo, yo = ar.offsets
        ar.put(xo, x)
        for row in range(rows):
            got = ref_softmax_row(x[row * n:(row + 1) * n], exps, dmax)
            top = max(x[row * n:(row + 1) * n])
            below += sum(1 for v in x[row * n:(row + 1) * n] if top - v > dmax)
            for i in range(n):
                ar.expected[yo + row * n + i] = got[i]
        slot = Slot()
        fields = [0, 0, 0, 0, xo, yo, n, rows, 0, slot.i32(exps)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "softmax", a, (slot.b,), check.SOFTMAX, fields)), a

        run_each(build, ar.expected, "softmax case %d n %d" % (case, n))
    assert below > 0  # elements below diff_min were reached


def test_softmax_sums_to_one():
    """Sanity of the formula itself: a flat row of n gives 256/n each (rounded), a single
    dominant element gives 255/256 -> 127."""
    for n in (1, 2, 4, 256):
        exps = [INT32_MAX] * 256
        out = ref_softmax_row([5] * n, exps, 255)
        assert out == [min(127, c_div(256 + n // 2, n) - 128)] * n, (n, out)
        for _, mod in IMPLS:
            a = bytearray(array.array("b", [5] * n + [0] * n))
            slot = Slot()
            run_record(mod, "softmax", a, (slot.b,), check.SOFTMAX, [0, 0, 0, 0, 0, n, n, 1, 0, slot.i32(exps)])
            assert signed(a)[n:] == out
    exps = [INT32_MAX] + [0] * 255
    assert ref_softmax_row([100, -100, 0], exps, 255) == [127, -128, -128]


# --- move, fill ---------------------------------------------------------------------------------

def test_move_and_fill():
    """move records: strided copies inside the arena (transposes, concatenation, padding,
    slices) of 1-, 2- or 4-byte elements over up to three levels (planes, rows, columns);
    put(): the same between two buffers (a model's input); fill records: a run of one value.
    Nothing outside the destination changes."""
    r = Lcg(80)
    for case in range(CASES):
        planes, rows, cols = r.int(1, 3), r.int(1, 6), r.int(1, 6)
        ss, sj = r.pick((cols, cols + 2, 1)), r.pick((1, rows, 2))
        if ss == 1 and sj == 1:
            sj = rows
        ds, dj = r.pick((cols, cols + 1)), 1
        if r.chance(2):
            ds, dj = 1, rows  # transposed destination
        pss = r.pick((0, (rows - 1) * ss + (cols - 1) * sj + 1 + r.int(0, 3)))
        pds = (rows - 1) * ds + (cols - 1) * dj + 1 + r.int(0, 3)
        n_src = (planes - 1) * pss + (rows - 1) * ss + (cols - 1) * sj + 1
        n_dst = (planes - 1) * pds + (rows - 1) * ds + (cols - 1) * dj + 1
        for es in (1, 2, 4):
            ar = Arena(r, [es * n_src + 3, es * n_dst + 3])
            so, do = ((o + es - 1) // es * es for o in ar.offsets)  # element-aligned
            want = list(ar.init)
            for q in range(planes):
                for i in range(rows):
                    for j in range(cols):
                        for b in range(es):
                            d = do + es * (q * pds + i * ds + j * dj) + b
                            want[d] = ar.init[so + es * (q * pss + i * ss + j * sj) + b]
            fields = [so, do, rows, cols, ss, sj, ds, dj, es, planes, pss, pds]

            def build(mod):
                a = ar.fresh()
                return (lambda: run_record(mod, "move", a, (), check.MOVE, fields)), a

            run_each(build, want, "move case %d es %d %s" % (case, es, fields))
        # put(): between two buffers, element indices
        src = i8s(r, n_src + r.int(0, 4))
        dst0 = i8s(r, n_dst + r.int(0, 4))
        so, do = r.int(0, len(src) - n_src), r.int(0, len(dst0) - n_dst)
        want = list(dst0)
        for i in range(rows):
            for j in range(cols):
                want[do + i * ds + j * dj] = src[so + i * ss + j * sj]
        p = [so, do, rows, cols, ss, sj, ds, dj]

        def build_put(mod):
            d = array.array("b", dst0)
            return (lambda: mod.put(array.array("b", src), d, array.array("i", p))), d

        run_each(build_put, want, "put case %d %s" % (case, p))
        # fill: bytes and words
        for es in (1, 2, 4):
            n = r.int(0, 12)
            ar = Arena(r, [es * n + 3])
            off = (ar.offsets[0] + es - 1) // es * es
            top = 1 << (8 * es - 1)
            v = r.pick((-top, top - 1, 0, r.int(-top, top - 1)))
            want = list(ar.init)
            code = signed(struct.pack("<i", v))
            for i in range(es * n):
                want[off + i] = code[i % es]

            def fill(mod):
                a = ar.fresh()
                return (lambda: run_record(mod, "fill", a, (), check.FILL, [off, n, v, es])), a

            run_each(fill, want, "fill es %d" % es)


# --- kernel paths, f16 -------------------------------------------------------------------------

def test_paths():
    paths = kernels.available()
    try:
        assert paths[-1] == "pure"
        assert ("viper" in paths) == (_viper is not None)
        assert ("thumb" in paths) == (_thumb is not None)
        if _thumb is not None:  # ARM: the assembler runs where viper does
            assert _viper is not None and sys.platform not in ("linux", "darwin", "win32")
        if IS_MICROPYTHON:
            assert _viper is not None  # the unix port and the boards have the native emitter
        else:
            assert _viper is None
        assert ("ulab" in paths) == (backend.kind() is not None)
        assert paths[0] == ("ulab" if backend.kind() else "thumb" if _thumb else "viper" if _viper else "pure")
        for bad in ("cuda", "", "Pure", "numpy"):
            e = raises(ValueError, kernels.use, bad)
            assert repr(bad) in str(e) and "pure" in str(e)
        if _viper is None:
            raises(ValueError, kernels.use, "viper")
        before = kernels.path()
        raises(ValueError, kernels.use, "cuda")
        assert kernels.path() == before  # a refused path changes nothing
        for p in paths:
            assert kernels.use(p) == p and kernels.path() == p
            t = kernels.table()
            assert len(t) == check.KINDS and all(t[k] is not None for k in range(1, check.KINDS) if check.LENGTH[k])
            assert t[check.CONV] is kernels.i8.conv and t[check.DENSE] is kernels.i8.dense
            assert kernels.i8 is (_pure if p == "pure" or _viper is None else _viper)
            if _viper is not None:  # the assembler loops on 'thumb' (and 'ulab' where it exists)
                assert _viper.T is (_thumb if p in ("thumb", "ulab") else None), p
        assert kernels.use() == paths[0] and kernels.path() == paths[0]
        assert kernels.use(None) == paths[0]
    finally:
        kernels.use()


def f16_f32_bits(h):
    """The float32 bits of the f16 value with bits h (exact: every f16 is a float32), computed
    from the value: (-1)^s * m * 2**(e - 25) (normal) or m * 2**-24 (subnormal)."""
    sign = -1.0 if h & 0x8000 else 1.0
    e, m = (h >> 10) & 31, h & 1023
    if e == 31:
        return None  # inf / nan: checked apart
    v = sign * (m * 2.0 ** -24 if e == 0 else (1024 + m) * 2.0 ** (e - 25))
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_f16_decode_every_value():
    """kernels.f16 (viper's bit conversion where there is viper) and _pure.f16_to_f32 decode all
    65536 halfs exactly: the float32 bits equal struct's '<e' and the value computed from the
    fields; +-inf and NaN stay so. `first` and `n` select the slice; dst past n is untouched."""
    step = 256 if small_board() else 2048
    dst = array.array("f", bytes(4 * (step + 1)))
    fns = [("_pure", _pure.f16_to_f32)]
    if _viper is not None:
        fns.append(("_viper", _viper.f16_to_f32))
    src = bytearray(2 * step + 6)
    for start in range(0, 65536, step):
        for i in range(step):
            struct.pack_into("<H", src, 6 + 2 * i, start + i)
        ref = struct.unpack_from("<%de" % step, src, 6)
        for name, fn in fns:
            dst[step] = 7.5
            fn(src, 3, dst, 0, step)  # first = 3 halfs in: skips 6 bytes
            assert dst[step] == 7.5, name
            bits = struct.unpack("<%dI" % step, bytes(dst)[:4 * step])
            for i in range(step):
                h = start + i
                want = f16_f32_bits(h)
                if want is None:
                    if h & 0x3FF:
                        assert dst[i] != dst[i], (name, hex(h))  # NaN
                    else:
                        assert bits[i] == (0xFF800000 if h & 0x8000 else 0x7F800000), (name, hex(h))
                    continue
                assert bits[i] == want, (name, hex(h), hex(bits[i]), hex(want))
                got = struct.unpack("<I", struct.pack("<f", ref[i]))[0]
                assert got == want, ("struct", hex(h))
    # partial: n < the buffer, from an odd first, into element 1 of the destination
    for name, fn in fns:
        out = array.array("f", (9.0, 9.0, 9.0, 9.0))
        fn(struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0), 1, out, 1, 2)
        assert list(out) == [9.0, -2.0, 0.5, 9.0], name
