# The kernels (the reference ones in each op's room, mpy_lazy/ops/<op>.py, and their fast twins
# in mpy_lazy/_viper*.py) and the kernel-path switch (mpy_lazy/kernels.py). Every kernel runs
# on seeded pseudo-random geometry, parameters and data (rt_util.Lcg: the same cases on CPython
# and MicroPython) with edge values mixed in, and its whole arena is compared against the
# plain-integer formula written out in this file (TFLite Micro's reference kernels, gemmlowp's
# fixed point from rt_util). On MicroPython the viper twin runs the same cases and must give
# the same bytes as the reference; on CPython (no viper) the reference is checked against the
# formula alone. A kernel runs one record (the program's format, mpy_lazy/program.py) in an
# Env: the arena (values and the kernel's scratch), the tensor slot holding its weights, the
# work array.
import array
import math
import struct
import sys

from rt_util import (INT32_MAX, INT32_MIN, IS_MICROPYTHON, Lcg, c_div, raises, ref_mbqm, ref_rdbpot,
                     ref_one_over_one_plus_x, ref_requant, ref_softmax_row, ref_srdhm, small_board,
                     weight_index)

from mpy_lazy import _arith, backend, check, kernels, kinds
from mpy_lazy.program import WORK

_slot_view = _arith.slot_view

_viper = kernels._viper
_thumb = kernels._thumb


class _Viper:
    """_viper's kernels (or _viper_elem's) with the assembler inner loops on (the 'thumb' path)
    or off ('viper'), whatever path kernels.use() last picked."""

    def __init__(self, asm, module=None):
        self.asm = asm
        self.module = module

    def __getattr__(self, name):
        f = getattr(self.module or _viper, name)
        asm = self.asm

        def call(*args):
            saved = _viper.T
            _viper.T = asm
            try:
                return f(*args)
            finally:
                _viper.T = saved

        return call


class _Reference:
    """The rooms' reference kernels (mpy_lazy/ops/<op>.py), and the helpers they share
    (mpy_lazy/_arith.py), by name: what the pure path runs."""

    def __getattr__(self, name):
        for kind in range(1, kinds.KINDS):
            if kinds.word(kinds.ROOM, kind):
                room = kernels.room(kind)
                if hasattr(room, name):
                    return getattr(room, name)
        return getattr(_arith, name)


_ref = _Reference()

IMPLS = [("pure", _ref)] + ([("viper", _Viper(None))] if _viper is not None else []) \
    + ([("thumb", _Viper(_thumb))] if _thumb is not None else [])
if _viper is not None:
    from mpy_lazy import _viper_elem
# kinds 44..52's kernels: the rooms' and their viper twins in _viper_elem
ELEM_IMPLS = [("pure", _ref)] + ([("viper", _Viper(None, _viper_elem))] if _viper is not None else []) \
    + ([("thumb", _Viper(_thumb, _viper_elem))] if _thumb is not None else [])
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


def i8a(r, n):
    """i8s(r, n) (the same values) as an array('b'): one block of n bytes, not a list of n
    ints (4n bytes, and on a board a large block its fragmented heap may not have)."""
    out = array.array("b", bytes(n))
    for i in range(n):
        k = r.next() % 16
        out[i] = -128 if k == 0 else 127 if k == 1 else 0 if k == 2 else r.int(-128, 127)
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

    def __init__(self, r, sizes, scratch=(), aligns=()):
        self.offsets = []
        n = r.int(0, 5)
        for i, size in enumerate(sizes):
            a = aligns[i] if i < len(aligns) else 1  # (an int16 region's offset is even)
            n = (n + a - 1) // a * a
            self.offsets.append(n)
            n += size + r.int(0, 5)
        n += r.int(0, 5)
        self.size = n
        self.scratch = []
        n = (n + 3) // 4 * 4
        for words in scratch:
            self.scratch.append(n)
            n += 4 * words
        self.init = i8a(r, n)  # (an array: the scratch regions make it the big one)
        self.expected = self.init[: self.size]  # (an array too: a list takes 4 bytes per byte)

    def put(self, off, vals):
        for i in range(len(vals)):
            self.init[off + i] = vals[i]
            self.expected[off + i] = vals[i]

    def put_expected(self, off, vals):
        for i in range(len(vals)):
            self.expected[off + i] = vals[i]

    def put_init(self, off, vals):
        """Initial bytes of a region outside the compared ones (a kernel's state)."""
        for i in range(len(vals)):
            self.init[off + i] = vals[i]

    def fresh(self):
        return bytearray(self.init)


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


def run_each(build, expected, what, impls=None):
    """build(impl module) -> (run thunk, output buffer); every impl (of IMPLS, or `impls`)
    must produce `expected` (the buffer's bytes read as int8 when it is a bytearray)."""
    for name, mod in impls or IMPLS:
        fn, out = build(mod)
        fn()
        wrap = 256 if isinstance(out, bytearray) else 0  # (read in place: no list of the arena)
        for i in range(len(expected)):
            v = out[i]
            if wrap and v > 127:
                v -= 256
            if v != expected[i]:
                raise AssertionError("%s on %s: element %d is %d, expected %d" % (what, name, i, v, expected[i]))


def requant(mod, acc, mq, dst, p):
    """requant() of either impl on whole buffers (the pure one takes their start offsets)."""
    if mod is _ref:
        return _ref.requant(acc, 0, mq, 0, dst, p)
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
            assert _ref.srdhm(a, b) == ref_srdhm(a, b), (a, b)
    for _ in range(VECTORS):
        a = r.int(INT32_MIN, INT32_MAX)
        b = r.pick(edges) if r.chance(4) else r.int(INT32_MIN, INT32_MAX)
        assert _ref.srdhm(a, b) == ref_srdhm(a, b), (a, b)
    assert ref_srdhm(INT32_MIN, INT32_MIN) == INT32_MAX and _ref.srdhm(INT32_MIN, INT32_MIN) == INT32_MAX
    for e in range(32):
        for x in edges:
            assert _ref.rdbpot(x, e) == ref_rdbpot(x, e), (x, e)
    for _ in range(VECTORS):
        x, e = r.int(INT32_MIN, INT32_MAX), r.int(0, 31)
        assert _ref.rdbpot(x, e) == ref_rdbpot(x, e), (x, e)
    # rounding ties go away from zero
    assert ref_rdbpot(3, 1) == 2 and ref_rdbpot(-3, 1) == -2 and ref_rdbpot(-5, 2) == -1
    assert _ref.rdbpot(-3, 1) == -2 and _ref.rdbpot(-1, 1) == -1 and _ref.rdbpot(1, 1) == 1
    xs, ms, ss = fixed_point_vectors(r, VECTORS)
    for i in range(VECTORS):
        x, m, s = xs[i], ms[i], ss[i]
        assert _ref.mbqm(x, m, s) == ref_mbqm(x, m, s), (x, m, s)


def test_reciprocal_matches_gemmlowp():
    """softmax's 1 / sum: _ref.one_over_one_plus_x against gemmlowp's, written out (rt_util),
    on Q0.31 values in [0, 2**31); viper's _reciprocal (TFLM's GetReciprocal of a Q12.19 sum:
    the Q0.31 scale and the output exponent bits_over_unit + 23) against the same."""
    r = Lcg(5)
    xs = [0, 1, 2, (1 << 30) - 1, 1 << 30, INT32_MAX - 1, INT32_MAX]
    xs += [r.int(0, INT32_MAX) for _ in range(VECTORS // 4)]
    for a in xs:
        assert _ref.one_over_one_plus_x(a) == ref_one_over_one_plus_x(a), a
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
        return  # CPython: no viper (the _ref versions are checked above)
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
    both in range: conv bias 2**20 and shift 20 reach it). Whatever the answer, _ref and viper
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

def conv_case(r, dw, asm=False):
    while True:
        h, w = r.int(1, 6), r.int(1, 6)
        if dw:
            c = r.pick((4, 8, 12) if asm else (1, 2, 3, 4, 4, 8, 12))  # (4 n channels, multiplier 1: dw4)
            mult = 1 if asm else r.pick((1, 1, 2, 3))
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


def check_conv(seed, dw, fine=False, legacy=False):
    """fine: every output's requantization in the kernels' own (dw4's, conv8's where the
    assembler runs): multipliers below 2**22 and shifts 0..-2 put mbqm()'s value, rounding bits
    included, inside the int8 range for accumulators around +-2**15 and +-2**16. legacy: conv_u8 /
    dw_u8, the weights' zero point WZ subtracted from each weight (a legacy uint8 model's)."""
    r = Lcg(seed)
    for case in range(CASES):
        h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dwd, pads, cpg, opg = conv_case(r, dw, fine)
        layout = "1hwo" if fine and dw else "ohwi8" if fine else r.pick(("1hwo", "o1hw") if dw else ("ohwi", "oihw", "ohwi8"))
        if layout == "ohwi8":  # outputs in blocks of 8 (WB 3): the assembler's conv8 with groups 1
            opg = 8 * r.int(1, 2)
            oc = (c // cpg) * opg
        zx = r.pick((-128, 127, 0, r.int(-128, 127)))
        x = i8s(r, h * w * c, zx)
        wts = i8s(r, oc * kh * kw * cpg)  # canonical order (o, ky, kx, ci)
        wz = r.pick((-128, 127, r.int(-128, 127), r.int(-128, 127))) if legacy else 0
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
        if fine:
            mq = [r.pick((0, 1, 1 << 21)) if r.chance(8) else r.int(0, 1 << 22) for _ in range(oc)]
            mq += [r.int(-2, 0) for _ in range(oc)]
            hasb = True
        bias = []
        for o in range(oc):
            if not hasb:
                bias.append(0)
            elif fine or mq[oc + o] > 0 or r.chance(2):
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
                                wv = wts[((o * kh + ky) * kw + kx) * cpg + ci] - wz
                                acc += wv * (x[(iy * w + ix) * c + g * cpg + ci] if inside else zx)
                    assert INT32_MIN <= acc <= INT32_MAX
                    ar.expected[yo + (oy * ow + ox) * oc + o] = ref_requant(acc, mq[o], mq[oc + o], zy, lo, hi)
        ws = STRIDES[layout](oc, kh, kw, cpg)
        p = [oc, zy, lo, hi, xo, yo, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwd, pads[0], pads[1]]
        p += list(ws) + [cpg, opg, zx, 1 if hasb else 0, rp]
        slot = Slot()
        wo, bo, mo = slot.i8(wbuf), slot.i32(bias) if hasb else 0, slot.i32(mq)
        fields = p + ar.scratch + [0, wo, 0, bo, 0, mo, 3 if layout == "ohwi8" else 0] + ([wz] if legacy else [])
        what = "%s case %d %s %s wz %d" % ("depthwise" if dw else "conv", case, layout, p, wz)
        name = ("dw_u8" if dw else "conv_u8") if legacy else ("depthwise" if dw else "conv")
        kind = (kinds.DW_U8 if dw else kinds.CONV_U8) if legacy else (kinds.DEPTHWISE if dw else kinds.CONV)

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, name, a, (slot.b,), kind, fields)), a

        run_each(build, ar.expected, what)


def test_conv():
    check_conv(10, False)


def test_depthwise():
    check_conv(11, True)


def test_conv_u8():
    check_conv(14, False, legacy=True)


def test_dw_u8():
    check_conv(15, True, legacy=True)


def test_conv_u8_check():
    """A conv_u8 record's WZ beyond -128..127 is refused in one ContainerError line naming it, and
    the accumulator bound counts it (|w - WZ|): a bias that fits with WZ 0 can leave int32 with
    WZ -128."""
    from mpy_lazy import ContainerError

    room = kernels.room(kinds.CONV_U8)
    slot = Slot()
    wo, bo, mo = slot.i8([100] * 4), slot.i32([INT32_MAX - 128 * 500]), slot.i32([1 << 30, 0])
    # 1x1x4 -> 1x1x1, a 1x1 kernel over 4 channels
    p = [1, 0, -128, 127, 0, 4, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 4, 4, 4, 1, 4, 1, 0, 1, 1, 8, 12,
         0, wo, 0, bo, 0, mo, 0]
    arena = 64
    for wz, field in ((0, None), (-1, None), (128, "wz"), (-129, "wz"), (-128, "bias")):
        r = check._Rec(record(kinds.CONV_U8, p + [wz]), 0, arena, (slot.b,), None)
        if field is None:
            room.check(r, check._Env((slot.b,)))
            continue
        e = raises(ContainerError, room.check, r, check._Env((slot.b,)))
        assert (e.field, e.tensor) == ("program", field) and "\n" not in str(e) \
            and str(e).startswith("graph line 0: conv2d: %s" % field), (wz, str(e))


def test_conv_requantizes_exactly():
    check_conv(12, False, fine=True)


def test_depthwise_requantizes_exactly():
    check_conv(13, True, fine=True)


def ref_mbqm64(x, m, s):
    """TFLM's MultiplyByQuantizedMultiplier(int64 x, int32 m, int shift) (docs/FORMAT.md)."""
    r = (m + 32768) >> 16 if m < 0x7FFF0000 else 0x7FFF
    t = 15 - s
    return wrap32((x * r + (1 << (t - 1))) >> t)


def wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v > INT32_MAX else v


def i16_bytes(v):
    """An int16 as its two little-endian bytes, each read as int8 (an Arena holds bytes)."""
    lo, hi = v & 255, (v >> 8) & 255
    return [lo - 256 if lo > 127 else lo, hi - 256 if hi > 127 else hi]


def test_conv16():
    """16x8 conv2d (kind conv16): int16 x, int8 w, TFLM's int64 accumulator and mbqm64 (ACC64
    1) or its wrapping int32 one and mbqm (0). Output channels in blocks of 8 and the rest
    (viper's 8-filter pass), windows of more than 128 values (its chunks), the int16 and int8
    extremes, groups and the oihw layout (the other loop)."""
    r = Lcg(16)
    for case in range(CASES):
        while True:
            h, w = r.int(1, 4), r.int(1, 5)
            g = 2 if r.chance(4) else 1
            cpg, opg = r.pick((1, 2, 3, 17, 40)), r.pick((1, 3, 8, 12, 16, 19))
            c, oc = g * cpg, g * opg
            kh, kw, sh, sw = r.int(1, 3), r.int(1, 3), r.pick((1, 2)), r.pick((1, 2))
            pads = (r.int(0, kh - 1), r.int(0, kw - 1), r.int(0, kh - 1), r.int(0, kw - 1))
            oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
            macs = oh * ow * oc * kh * kw * cpg
            if oh >= 1 and ow >= 1 and macs <= (3000 if small_board() else 30000):
                break
        layout = r.pick(("ohwi", "ohwi", "oihw"))
        acc64 = r.int(0, 1)
        # arrays, not lists: a board's heap (the M0's) fragments under big lists of this test
        x = array.array("h", [r.pick((-32768, 32767, 0)) if r.chance(6) else r.int(-32768, 32767)
                              for _ in range(h * w * c)])
        wts = i8s(r, oc * kh * kw * cpg)  # canonical order (o, ky, kx, ci)
        wbuf = array.array("b", bytes(len(wts)))
        for o in range(oc):
            for ky in range(kh):
                for kx in range(kw):
                    for ci in range(cpg):
                        wbuf[weight_index(layout, o, ky, kx, ci, oc, kh, kw, cpg)] = wts[((o * kh + ky) * kw + kx) * cpg + ci]
        hasb = r.next() % 3 != 0
        bias = [(r.pick((INT32_MAX, INT32_MIN)) if r.chance(8) else r.int(-(1 << 24), 1 << 24)) if hasb else 0
                for _ in range(oc)]

        def acc_at(oy, ox, o):
            acc = bias[o]
            for ky in range(kh):
                iy = oy * sh - pads[0] + ky
                for kx in range(kw):
                    ix = ox * sw - pads[1] + kx
                    if 0 <= iy < h and 0 <= ix < w:  # padding: the int16 zero point, 0
                        for ci in range(cpg):
                            acc += wts[((o * kh + ky) * kw + kx) * cpg + ci] * x[(iy * w + ix) * c + (o // opg) * cpg + ci]
            return acc if acc64 else wrap32(acc)

        bound = 1
        for oy in range(oh):
            for ox in range(ow):
                for o in range(oc):
                    a = abs(acc_at(oy, ox, o))
                    bound = a if a > bound else bound
        mq = [multiplier(r) for _ in range(oc)]
        if acc64:  # shifts -31..7 bringing the accumulators near the int16 range
            for _ in range(oc):
                s = r.pick((-31, 7)) if r.chance(8) else 15 - bitlen(bound) + r.int(-3, 3)
                mq.append(-31 if s < -31 else (7 if s > 7 else s))
        else:
            mq += [shift(r, bound) for _ in range(oc)]
        zy, lo, hi = 0, -32768, 32767
        if r.chance(3):
            zy, lo, hi = r.int(-100, 100), r.int(-32768, 0), r.int(0, 32767)
        ys = array.array("h", bytes(2 * oh * ow * oc))
        i = 0
        for oy in range(oh):
            for ox in range(ow):
                for o in range(oc):
                    acc = acc_at(oy, ox, o)
                    v = (ref_mbqm64(acc, mq[o], mq[oc + o]) if acc64 else ref_mbqm(acc, mq[o], mq[oc + o])) + zy
                    ys[i] = lo if v < lo else (hi if v > hi else v)
                    i += 1
        rp = r.int(1, ow)
        ar = Arena(r, [2 * h * w * c, 2 * oh * ow * oc], (2 * rp * oc, kh * kw * cpg), aligns=(2, 2))
        xo, yo = ar.offsets
        for i in range(len(x)):
            ar.put(xo + 2 * i, i16_bytes(x[i]))
        for i in range(len(ys)):
            ar.expected[yo + 2 * i], ar.expected[yo + 2 * i + 1] = i16_bytes(ys[i])
        ws = STRIDES[layout](oc, kh, kw, cpg)
        p = [oc, zy, lo, hi, xo, yo, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pads[0], pads[1]]
        p += list(ws) + [cpg, opg, acc64, 1 if hasb else 0, rp]
        slot = Slot()
        wo, bo, mo = slot.i8(wbuf), slot.i32(bias) if hasb else 0, slot.i32(mq)
        fields = p + ar.scratch + [0, wo, 0, bo, 0, mo]
        what = "conv16 case %d %s %s" % (case, layout, p)

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "conv16", a, (slot.b,), kinds.CONV16, fields)), a

        run_each(build, ar.expected, what)


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
                    run_record(mod, "conv", a, (slot.b,), kinds.CONV, fields)
                else:
                    run_record(mod, "depthwise", a, (slot.b,), kinds.DEPTHWISE, fields)
                outs.append(list(a)[:acc])
        for o in outs[1:]:
            assert o == outs[0], case


# --- dense ------------------------------------------------------------------------------------

def test_dense():
    """oi (WSI 1: viper's 4-wide unrolled loop, n_in not a multiple of 4 included) and io
    layouts, with gaps between weight rows, and oi8 (outputs in blocks of 8, WB 3: the
    assembler's conv8); bias or not; inputs longer than the viper kernel's int32 column
    (kinds.DENSE_COL: the input in chunks), the column exactly as long as the record says."""
    r = Lcg(20)
    sizes = (1, 2, 3, 4, 5, 7, 8, 9, 13, 32, 33, 255, 256, 257, 600)
    for case in range(CASES + 10):
        n_in = sizes[case % len(sizes)] if case < 2 * len(sizes) else r.int(1, 40)
        layout = ("oi", "io", "oi8")[case % 3]
        n_out = r.int(1, 6) if layout != "oi8" else 8 * r.int(1, 2)
        if small_board() and n_in * n_out > 4000:  # (an M0's heap has no 9 KB block left by now)
            n_out = 8 if layout == "oi8" else 4000 // n_in
        gap = r.pick((0, 0, 1, 3)) if layout != "oi8" else 0
        wso, wsi = {"io": (1, n_out + gap), "oi": (n_in + gap, 1), "oi8": (8 * n_in, 8)}[layout]
        wb = 3 if layout == "oi8" else 0
        wts = [i8s(r, n_in) for _ in range(n_out)]  # wts[o][i]
        size = (n_in - 1) * wsi + (n_out // (1 << wb) - 1) * wso + (1 << wb)
        wbuf = i8a(r, size)  # garbage in the gaps (an array: 600 x 6 of them on a board's heap)
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
        ar = Arena(r, [n_in, n_out], (n_out, min(n_in, kinds.DENSE_COL)))
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
            return (lambda: run_record(mod, "dense", a, (slot.b,), kinds.DENSE, fields)), a

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
            return (lambda: run_record(mod, "add", a, (), kinds.ADD, fields)), a

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
            return (lambda: run_record(mod, "mul", a, (), kinds.MUL, fields)), a

        run_each(build, ar.expected, "mul case %d %s" % (case, p))


def test_mul16():
    """TFLM's int16 mul (zero points 0): x1 x2 requantized to int16; broadcast x2, blocks."""
    r = Lcg(32)
    for case in range(CASES):
        n, bc, block = binary_case(r)
        m = multiplier(r)
        s = shift(r, 32768 * 32768)
        zy, lo, hi = 0, -32768, 32767
        if r.chance(3):
            lo, hi = r.int(-32768, 0), r.int(0, 32767)
        edge = (-32768, 32767, -1, 0, 1)
        x1 = [r.pick(edge) if r.chance(4) else r.int(-32768, 32767) for _ in range(n)]
        x2 = [r.pick(edge) if r.chance(4) else r.int(-32768, 32767) for _ in range(bc)]
        ar = Arena(r, [2 * n, 2 * bc, 2 * n], (block,), aligns=(2, 2, 2))
        o1, o2, yo = ar.offsets
        for i in range(n):
            ar.put(o1 + 2 * i, i16_bytes(x1[i]))
        for i in range(bc):
            ar.put(o2 + 2 * i, i16_bytes(x2[i]))
        for i in range(n):
            ar.expected[yo + 2 * i], ar.expected[yo + 2 * i + 1] = i16_bytes(
                ref_requant(x1[i] * x2[i % bc], m, s, zy, lo, hi))
        p = [1, zy, lo, hi, o1, o2, yo, n, bc, block, 0, 0]
        fields = p + ar.scratch + [m, s]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "mul16", a, (), kinds.MUL16, fields)), a

        run_each(build, ar.expected, "mul16 case %d %s" % (case, p))


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


def check_pool(seed, is_max, es=1, up=False):
    """maxpool / avgpool (es 2: maxpool16 / avgpool16, int16 values; up: avgpool_u8) against the
    formula."""
    r = Lcg(seed)
    partial = 0
    top = 127 if es == 1 else 32767
    for case in range(CASES):
        h, w, c, oh, ow, kh, kw, sh, sw, pads = pool_case(r)
        lo, hi = -top - 1, top
        if r.chance(3):
            lo = r.int(-top - 1, top - 27)
            hi = r.int(lo, top)
        x = i8s(r, h * w * c) if es == 1 else [r.pick((-32768, 32767, r.int(-32768, 32767))) for _ in range(h * w * c)]
        if r.chance(3):  # mostly negative values: negative sums to round
            x = [v if v < 0 else -v - 1 for v in x]
        ar = Arena(r, [es * h * w * c, es * oh * ow * c], aligns=(es, es))
        xo, yo = ar.offsets
        if es == 1:
            ar.put(xo, x)
        else:
            for i in range(len(x)):
                ar.put(xo + 2 * i, i16_bytes(x[i]))
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
                    elif up:  # TFLite's uint8 kernel: (sum + count / 2) / count on the uint8 values
                        n = len(vals)
                        v = (sum(vals) + 128 * n + n // 2) // n - 128
                    else:  # TFLM: (sum +- count / 2) / count, C division; count = in-bounds only
                        s, n = sum(vals), len(vals)
                        v = c_div(s + n // 2, n) if s > 0 else c_div(s - n // 2, n)
                    v = lo if v < lo else (hi if v > hi else v)
                    at = (oy * ow + ox) * c + ch
                    if es == 1:
                        ar.expected[yo + at] = v
                    else:
                        ar.expected[yo + 2 * at], ar.expected[yo + 2 * at + 1] = i16_bytes(v)
        p = [c, 0, lo, hi, xo, yo, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pads[0], pads[1]]
        name = ("maxpool" if is_max else "avgpool") + ("16" if es == 2 else "") + ("_u8" if up else "")
        kind = {"maxpool": kinds.MAXPOOL, "avgpool": kinds.AVGPOOL, "maxpool16": kinds.MAXPOOL16,
                "avgpool16": kinds.AVGPOOL16, "avgpool_u8": kinds.AVGPOOL_U8}[name]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, name, a, (), kind, p)), a

        run_each(build, ar.expected, "%s case %d %s" % (name, case, p))
    assert partial > 0  # padding that leaves partial windows was reached


def test_maxpool():
    check_pool(40, True)


def test_avgpool():
    check_pool(41, False)


def test_maxpool16():
    check_pool(42, True, 2)


def test_avgpool16():
    check_pool(43, False, 2)


def test_avgpool_u8():
    check_pool(44, False, up=True)


def test_avgpool_u8_rounds_half_up():
    """TFLite's uint8 average rounds halves up, on the uint8 values (codes + 128): -1.5 -> -1,
    -0.5 -> 0 where TFLM's int8 kernel gives -2 and -1; -1.25 -> -1; the ends of the range."""
    cases = (((-1, -2), -1), ((0, -1), 0), ((0, 1), 1), ((1, 2), 2), ((-1, -1, -1, -2), -1),
             ((-128, -127), -127), ((-128, -128), -128), ((127, 126), 127), ((-3, -2, -2), -2))
    for vals, want in cases:
        n = len(vals)
        p = [1, 0, -128, 127, 0, n, 1, n, 1, 1, 1, 1, n, 1, 1, 1, 1, 0, 0]
        for name, mod in IMPLS:
            a = bytearray(array.array("b", list(vals) + [99]))
            run_record(mod, "avgpool_u8", a, (), kinds.AVGPOOL_U8, p)
            assert signed(a)[n] == want, (name, vals, a[n], want)


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
            run_record(mod, "avgpool", a, (), kinds.AVGPOOL, p)
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
            return (lambda: run_record(mod, "mean", a, (), kinds.MEAN, fields)), a

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
            return (lambda: run_record(mod, "lut", a, (slot.b,), kinds.LUT, fields)), a

        run_each(build, ar.expected, "lut case %d" % case)


def test_load():
    """load: a tensor's N bytes (at any offset of its slot) into the arena, byte for byte."""
    r = Lcg(61)
    for case in range(CASES):
        n = r.int(1, 300)
        vals = i8s(r, n + 7)
        skip = r.int(0, 7)  # the tensor's bytes start anywhere in the slot
        ar = Arena(r, [n])
        do = ar.offsets[0]
        for i in range(n):
            ar.expected[do + i] = vals[skip + i]
        slot = Slot()
        fields = [do, n, 0, slot.i8(vals) + skip]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "load", a, (slot.b,), kinds.LOAD, fields)), a

        run_each(build, ar.expected, "load case %d" % case)


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
            return (lambda: run_record(mod, "softmax", a, (slot.b,), kinds.SOFTMAX, fields)), a

        run_each(build, ar.expected, "softmax case %d n %d" % (case, n))
    assert below > 0  # elements below diff_min were reached


def test_softmax_long_rows():
    """Rows of 512..4095 values: near-equal ones push the sum of exps past 2**28, where TFLM's
    final shift would pass 31 (gemmlowp asserts): every quotient rounds to 0 (the output's
    minimum), the same on every path; spread ones keep it within 31."""
    r = Lcg(71)
    exps, dmax = exp_table(r, None)
    for n in (512, 1001, 4095) if not small_board() else (1001,):
        for spread in (0, 2, 255):
            top = r.int(-100, 127)
            x = [max(-128, top - r.int(0, spread)) for _ in range(n)]
            ar = Arena(r, [n, n])
            xo, yo = ar.offsets
            ar.put(xo, x)
            got = ref_softmax_row(x, exps, dmax)
            for i in range(n):
                ar.expected[yo + i] = got[i]
            if spread == 0:
                assert got == [-128] * n
            slot = Slot()
            fields = [0, 0, 0, 0, xo, yo, n, 1, 0, slot.i32(exps)]

            def build(mod):
                a = ar.fresh()
                return (lambda: run_record(mod, "softmax", a, (slot.b,), kinds.SOFTMAX, fields)), a

            run_each(build, ar.expected, "softmax n %d spread %d" % (n, spread))


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
            run_record(mod, "softmax", a, (slot.b,), kinds.SOFTMAX, [0, 0, 0, 0, 0, n, n, 1, 0, slot.i32(exps)])
            assert signed(a)[n:] == out
    exps = [INT32_MAX] + [0] * 255
    assert ref_softmax_row([100, -100, 0], exps, 255) == [127, -128, -128]


def test_softmax16():
    """TFLM's int8 -> int16 softmax (kind softmax16, the softmax kernel reading its kind): the
    exponent 31 - 16, the offset -32768, int16 output."""
    r = Lcg(71)
    for case in range(CASES // 2):
        n = (1, 2, 3, 10, 64, 255, 511)[case % 7] if not small_board() else r.int(1, 20)
        rows = r.int(1, 3)
        exps, dmax = exp_table(r, r.int(5, 60) if case % 3 == 0 else None)
        x = []
        for _ in range(rows):
            top = r.int(-128, 127)
            x += [top if r.chance(4) else max(-128, top - r.int(0, 255)) for _ in range(n)]
        ar = Arena(r, [n * rows, 2 * n * rows], aligns=(1, 2))
        xo, yo = ar.offsets
        ar.put(xo, x)
        for row in range(rows):
            got = ref_softmax_row(x[row * n:(row + 1) * n], exps, dmax, 16)
            for i in range(n):
                ar.put(yo + 2 * (row * n + i), i16_bytes(got[i]))
        slot = Slot()
        fields = [0, 0, 0, 0, xo, yo, n, rows, 0, slot.i32(exps)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "softmax16", a, (slot.b,), kinds.SOFTMAX16, fields)), a

        run_each(build, ar.expected, "softmax16 case %d n %d" % (case, n))


# --- recurrent ops (mpy_lazy/ops/lstm.py, svdf.py, _viper_recurrent.py) ------------------------

def recurrent_impls():
    out = [("pure", _ref)]
    if _viper is not None:
        from mpy_lazy import _viper_recurrent

        out.append(("viper", _Recurrent(_viper_recurrent, None)))
        if _thumb is not None:  # the dot products in assembler
            out.append(("thumb", _Recurrent(_viper_recurrent, _thumb)))
    return out


class _Recurrent(_Viper):
    """_viper_recurrent's kernels with _viper.T (the assembler loops) set as the path would."""

    def __init__(self, mod, asm):
        _Viper.__init__(self, asm)
        self.mod = mod

    def __getattr__(self, name):
        f = getattr(self.mod, name)
        asm = self.asm

        def call(*args):
            saved = _viper.T
            _viper.T = asm
            try:
                return f(*args)
            finally:
                _viper.T = saved

        return call


def sigmoid_table(r):
    """A table as TFLM's int16 sigmoid reads one (its sigmoid_table_uint16, or any other): from
    32768 up, never decreasing, at most 65534 but for the last entry (65535 interpolated from
    makes a gate of 32768, which TFLM's int16 gates wrap: the LSTM's check refuses it)."""
    t = [32768 + r.pick((0, 0, r.int(1, 50)))]
    for i in range(255):
        v = t[-1] + r.pick((0, 1, 5, 40, 200, 700))
        top = 65535 if i == 254 else 65534
        t.append(top if v > top else v)
    return t


def ref_logistic16(x, t):
    """reference_integer_ops::Logistic(input_multiplier 0, input_left_shift 0) of one int16
    (lstm_eval's Sigmoid): input_multiplier becomes 3, the table interpolated with 9 fraction
    bits; C's unsigned arithmetic on the magnitude."""
    v = x * 3
    u = -v if v < 0 else v
    uh = u >> 9
    if uh >= 255:
        res = 0x7FFF << 10
    else:
        res = (t[uh] << 9) + (u & 0x1FF) * (t[uh + 1] - t[uh])
    res = res + (1 << 9) if v >= 0 else (1 << 25) - res + (1 << 9) - 1
    return res >> 10


def ref_tanh16(x, power, t):
    """lstm_eval's Tanh(cell_state_scale_power, ...) of one int16: input_left_shift = 15 + power
    - 3 (negative: its magnitude, with input_multiplier 3), then reference_integer_ops::Tanh:
    multiplier 0 becomes 3 << shift; the table interpolated with 8 fraction bits."""
    shift = 15 + power - 3
    mult = 0
    if shift < 0:
        shift, mult = -shift, 3
    if mult == 0:
        mult, shift = 3 << shift, 0
    rnd = (1 << (shift - 1)) if shift > 0 else 0
    v = (x * mult + rnd) >> shift
    u = -v if v < 0 else v
    uh = u >> 8
    if uh >= 255:
        res = 0xFFFF << 8
    else:
        res = (t[uh] << 8) + (u & 0xFF) * (t[uh + 1] - t[uh])
    res = res - (1 << 23) + (1 << 7) if v >= 0 else -res + (1 << 23) + (1 << 7) - 1
    return res >> 8


def sat(v, lo, hi):
    return lo if v < lo else (hi if v > hi else v)


def ref_lstm_step(x, h, c, W, R, bias, mq, zh, qclip, power, t, hid, wide=False):
    """One step of TFLM's integer LSTM (lstm_eval.h LstmStep, 8x8 -> 16): per gate (i, f, c, o
    rows of W, R; bias[0:4H] with the input's products, bias[4H:] with the hidden state's) the
    two FullyConnected outputs to int16, AddElementWise saturating, Sigmoid (Tanh for the cell
    gate, power -12); UpdateLstmCell: Mul(f, c), Mul(i, g), AddElementWise, Clipping;
    UpdateLstmHidden: Tanh(cell power), Mul(., o) to int8. Returns the new (h, c). mq: the m
    tensor (per row the products' multipliers and shifts, then the inter-gate ones). wide: the
    16x8 LSTM (LstmStep<int16_t, int8_t, int16_t, int64_t>): int64 sums through the int64
    MultiplyByQuantizedMultiplier, bias[0:4H] only (the recurrent FullyConnected has none), h
    int16."""
    gates = []
    n4 = 4 * hid
    mul = ref_mbqm64 if wide else ref_mbqm
    for row in range(n4):
        g = row // hid
        ax = bias[row] + sum(W[row][i] * x[i] for i in range(len(x)))
        ah = (0 if wide else bias[n4 + row]) + sum(R[row][i] * h[i] for i in range(hid))
        a = sat(mul(ax, mq[row], mq[n4 + row]), -32768, 32767)
        b = sat(mul(ah, mq[2 * n4 + row], mq[3 * n4 + row]), -32768, 32767)
        v = sat(a + b, -32768, 32767)
        gates.append(ref_tanh16(v, -12, t) if g == 2 else ref_logistic16(v, t))
    h2, c2 = [], []
    m_fc, m_ig, s_fc, s_ig, m_h, s_h = mq[4 * n4:]
    for j in range(hid):
        ig, fg, cg, og = gates[j], gates[hid + j], gates[2 * hid + j], gates[3 * hid + j]
        cv = sat(sat(ref_mbqm(fg * c[j], m_fc, s_fc), -32768, 32767)
                 + sat(ref_mbqm(ig * cg, m_ig, s_ig), -32768, 32767), -32768, 32767)
        if qclip >= 0:
            cv = sat(cv, -qclip, qclip)
        c2.append(cv)
        h2.append(sat(zh + ref_mbqm(ref_tanh16(cv, power, t) * og, m_h, s_h), *((-32768, 32767) if wide else (-128, 127))))
    return h2, c2


def shift16(r, bound):
    """A shift bringing accumulators of magnitude <= bound near the int16 range (or past it:
    saturation), never one whose left shift leaves int32."""
    top = 0
    while (bound << (top + 1)) <= INT32_MAX and top < 30:
        top += 1
    s = 15 - bitlen(bound) + r.int(-4, 2)
    return -31 if s < -31 else (top if s > top else s)


def test_lstm():
    """TFLM's integer LSTM over T steps, one record: gates from both products requantized apart,
    TFLM's int16 sigmoid and tanh from a table (random monotone ones), the cell and hidden
    updates, the cell clip, cell scales 2**-20..2**2; the state started from zero (FLAGS 1) or
    kept from the record's last run (FLAGS 0: run twice, the second from the first's state).
    The outputs and the state (h int8, c int16) equal the formula on every impl."""
    r = Lcg(90)
    impls = recurrent_impls()
    for case in range(CASES // 2):
        steps, nin, hid = r.int(1, 4), r.pick((1, 3, 8, 9, 17, r.int(1, 12))), r.int(1, 6)
        keep = case % 2
        W = [i8s(r, nin) for _ in range(4 * hid)]
        R = [i8s(r, hid) for _ in range(4 * hid)]
        bias = [r.int(-(1 << 16), 1 << 16) for _ in range(8 * hid)]
        mq = []
        for n in (nin, hid):  # per row: the products' multipliers, then their shifts
            mq += [multiplier(r) for _ in range(4 * hid)]
            mq += [shift16(r, (1 << 16) + 128 * 128 * n) for _ in range(4 * hid)]
        ms = [multiplier(r) for _ in range(3)]
        ss = [r.pick((-14, -15, -17, -22, r.int(-31, -1))) for _ in range(3)]
        mq += [ms[0], ms[1], ss[0], ss[1], ms[2], ss[2]]
        t = sigmoid_table(r)
        power = r.pick((-12, -11, -15, -20, r.int(-20, 2)))
        sh = 12 + power
        tm, ts = (3 << sh, 0) if sh >= 0 else (3, -sh)
        qclip = r.pick((-1, -1, 0, r.int(0, 32767), r.int(100, 5000)))
        zh = r.pick((-128, 127, 0, r.int(-128, 127)))
        x = i8s(r, steps * nin)
        h0 = i8s(r, hid) if keep else [zh] * hid
        c0 = [r.int(-32768, 32767) for _ in range(hid)] if keep else [0] * hid
        runs = 2 if keep else 1
        h, c, ys = h0, c0, []
        for _ in range(runs):
            ys = []
            for step in range(steps):
                h, c = ref_lstm_step(x[step * nin:(step + 1) * nin], h, c, W, R, bias, mq, zh, qclip, power, t, hid)
                ys += h
        words = nin + 9 * hid
        ar = Arena(r, [steps * nin, steps * hid], (words, (hid + 3) // 4, (hid + 1) // 2))
        xo, yo = ar.offsets
        ho, co = ar.scratch[1], ar.scratch[2]
        ar.put(xo, x)
        for i in range(steps * hid):
            ar.expected[yo + i] = ys[i]
        for j in range(hid):
            ar.init[ho + j] = h0[j]
            ar.put_init(co + 2 * j, i16_bytes(c0[j]))
        slot = Slot()
        wo = slot.i8([v for row in W for v in row])
        ro = slot.i8([v for row in R for v in row])
        bo, mo = slot.i32(bias), slot.i32(mq)
        to = slot.add([v - 65536 if v > 32767 else v for v in t], "h")
        fields = [steps, nin, hid, zh, xo, yo, ho, co, 0 if keep else 1, qclip, tm, ts, ar.scratch[0],
                  0, wo, 0, ro, 0, bo, 0, mo, 0, to]
        what = "lstm case %d T %d I %d H %d keep %d power %d clip %d" % (case, steps, nin, hid, keep, power, qclip)
        for name, mod in impls:
            a = ar.fresh()
            for _ in range(runs):
                run_record(mod, "lstm", a, (slot.b,), kinds.LSTM, fields)
            got = signed(a)
            assert got[:ar.size] == list(ar.expected), (what, name)
            assert got[ho:ho + hid] == h, (what, name, "h")
            cs = array.array("h", bytes(a[co:co + 2 * hid]))
            assert list(cs) == c, (what, name, "c")


def test_lstm16():
    """TFLM's 16x8 LSTM (kind lstm16) over T steps, one record, as test_lstm: int16 x and h
    (their extremes now and then), int32 biases up to the int32 extremes (TFLM's int64 ones
    within int32), inputs of more than 256 values (viper's int32 chunks), shifts -31..7 that
    bring the int64 sums near the int16 range, past it (saturation) or past int32 (TFLM's int32
    cast wraps); FLAGS 1 and 0. The outputs and the state equal the formula on every impl."""
    r = Lcg(91)
    impls = recurrent_impls()
    for case in range(CASES // 2):
        steps, nin, hid = r.int(1, 3), r.pick((1, 3, 8, 9, 17, 300, r.int(1, 12))), r.int(1, 5)
        if small_board() and nin > 256:
            hid = min(hid, 2)  # (an M0's heap has no 5 KB block left by now for 4H rows of 300)
        keep = case % 2
        W = [i8a(r, nin) for _ in range(4 * hid)]  # arrays: 300-value rows as lists do not fit an M0's heap
        R = [i8s(r, hid) for _ in range(4 * hid)]
        bias = [r.pick((INT32_MAX, -INT32_MAX - 1, 0, r.int(-(1 << 24), 1 << 24))) for _ in range(4 * hid)]
        mq = []
        for n in (nin, hid):  # per row: the products' multipliers, then their shifts (-31..7)
            mq += [multiplier(r) for _ in range(4 * hid)]
            mq += [min(7, shift16(r, 32768 * 128 * n)) for _ in range(4 * hid)]
        ms = [multiplier(r) for _ in range(3)]
        ss = [r.pick((-14, -15, -17, -22, r.int(-31, -1))) for _ in range(3)]
        mq += [ms[0], ms[1], ss[0], ss[1], ms[2], ss[2]]
        t = sigmoid_table(r)
        power = r.pick((-12, -11, -15, -20, r.int(-20, 2)))
        sh = 12 + power
        tm, ts = (3 << sh, 0) if sh >= 0 else (3, -sh)
        qclip = r.pick((-1, -1, 0, r.int(0, 32767), r.int(100, 5000)))

        def i16s(n):
            return [r.pick((-32768, 32767, 0, r.int(-32768, 32767), r.int(-300, 300))) for _ in range(n)]

        x = i16s(steps * nin)
        h0 = i16s(hid) if keep else [0] * hid
        c0 = [r.int(-32768, 32767) for _ in range(hid)] if keep else [0] * hid
        runs = 2 if keep else 1
        h, c, ys = h0, c0, []
        for _ in range(runs):
            ys = []
            for step in range(steps):
                h, c = ref_lstm_step(x[step * nin:(step + 1) * nin], h, c, W, R, bias, mq, 0, qclip, power, t, hid,
                                     wide=True)
                ys += h
        ar = Arena(r, [2 * steps * nin, 2 * steps * hid], (8 * hid, (hid + 1) // 2, (hid + 1) // 2), (2, 2))
        xo, yo = ar.offsets
        ho, co = ar.scratch[1], ar.scratch[2]
        for i in range(len(x)):
            ar.put(xo + 2 * i, i16_bytes(x[i]))
        for i in range(steps * hid):
            ar.put_expected(yo + 2 * i, i16_bytes(ys[i]))
        for j in range(hid):
            ar.put_init(ho + 2 * j, i16_bytes(h0[j]))
            ar.put_init(co + 2 * j, i16_bytes(c0[j]))
        slot = Slot()
        weights = array.array("b")
        for row in W:
            weights.extend(row)
        wo = slot.i8(weights)
        ro = slot.i8([v for row in R for v in row])
        bo, mo = slot.i32(bias), slot.i32(mq)
        to = slot.add([v - 65536 if v > 32767 else v for v in t], "h")
        fields = [steps, nin, hid, 0, xo, yo, ho, co, 0 if keep else 1, qclip, tm, ts, ar.scratch[0],
                  0, wo, 0, ro, 0, bo, 0, mo, 0, to]
        what = "lstm16 case %d T %d I %d H %d keep %d power %d clip %d" % (case, steps, nin, hid, keep, power, qclip)
        for name, mod in impls:
            a = ar.fresh()
            for _ in range(runs):
                run_record(mod, "lstm16", a, (slot.b,), kinds.LSTM16, fields)
            assert signed(a)[:ar.size] == list(ar.expected), (what, name)
            assert list(array.array("h", bytes(a[ho:ho + 2 * hid]))) == h, (what, name, "h")
            assert list(array.array("h", bytes(a[co:co + 2 * hid]))) == c, (what, name, "c", list(array.array("h", bytes(a[co:co + 2 * hid]))), c, qclip)


def test_lstm16_check():
    """The 16x8 LSTM record's load-time check refuses each field its kernels assume: h's zero
    point not 0, x, y, the state and the scratch (32H bytes) outside the arena or x, y, h odd
    (int16), the bias outside its slot,
    a product's shift past 7 (TFLM's int64 MultiplyByQuantizedMultiplier), the sigmoid table's
    entry 254 at 65535; each with one ContainerError line naming it."""
    from mpy_lazy import ContainerError

    room = kernels.room(kinds.LSTM16)
    steps, nin, hid = 3, 4, 2
    arena = 1024
    m_good = ([1 << 30] * (4 * hid) + [-3] * (4 * hid)) * 2 + [1 << 30, 1 << 30, -2, -2, 1 << 30, -2]
    table = list(range(32768, 32768 + 256))

    def rec(m=m_good, t=table, **change):
        slot = Slot()
        wo, ro = slot.i8([1] * (4 * hid * nin)), slot.i8([1] * (4 * hid * hid))
        bo, mo = slot.i32([0] * (4 * hid)), slot.i32(m)
        to = slot.add([v - 65536 if v > 32767 else v for v in t], "h")
        f = [steps, nin, hid, 0, 0, 64, 128, 160, 1, -1, 6, 0, 256, 0, wo, 0, ro, 0, bo, 0, mo, 0, to]
        for i, v in change.items():
            f[int(i[1:]) - 2] = v
        return check._Rec(record(kinds.LSTM16, f), 0, arena, (slot.b,), None), check._Env((slot.b,))

    room.check(*rec())
    m_far = list(m_good)
    m_far[16 * hid] = 7  # (the inter-gate products' shifts take -31..30: an int32 multiply)
    room.check(*rec(m=m_far, t=table[:255] + [65535]))
    bad = [("zero_point", rec(w5=1)), ("x", rec(w6=arena - 4)), ("x", rec(w6=1)), ("y", rec(w7=arena - 2)),
           ("y", rec(w7=65)), ("state", rec(w8=129)), ("state", rec(w8=arena - 2)), ("bias", rec(w20=1 << 20)), ("scratch", rec(w14=arena - 32 * hid + 4)),
           ("table", rec(t=table[:254] + [65535, 65535]))]
    for k in (4 * hid, 12 * hid + 1):  # a product's shift past 7
        m = list(m_good)
        m[k] = 8
        bad.append(("requant", rec(m=m)))
    for field, args in bad:
        e = raises(ContainerError, room.check, *args)
        assert (e.field, e.tensor) == ("program", field) and "\n" not in str(e) \
            and str(e).startswith("graph line 0: lstm: " + field), (field, str(e))


def ref_gru_step(x, h, W, R, bias, mq, zy, t, hid):
    """One step of the integer GRU (mpy_lazy/ops/gru.py, built as TFLM's integer LSTM): per row
    (gates z, r, n of W, R; bias[0:3H] with the input's products, bias[3H:] with the hidden
    state's) both products requantized to int16 apart; z, r = Logistic(sat(gx + gh));
    n = Tanh(sat(gx_n + RoundingDivideByPOT(r gh_n, 15))); h = sat(n + RoundingDivideByPOT(
    z (h - n), 15)) (int16 Q0.15); y = clamp8(zy + mbqm(h)). Returns (h, y)."""
    n3 = 3 * hid
    gx, gh = [], []
    for row in range(n3):
        ax = bias[row] + sum(W[row][i] * x[i] for i in range(len(x)))
        ah = bias[n3 + row] + sum(R[row][i] * h[i] for i in range(hid))
        gx.append(sat(ref_mbqm(ax, mq[row], mq[n3 + row]), -32768, 32767))
        gh.append(sat(ref_mbqm(ah, mq[2 * n3 + row], mq[3 * n3 + row]), -32768, 32767))
    h2, y = [], []
    for j in range(hid):
        z = ref_logistic16(sat(gx[j] + gh[j], -32768, 32767), t)
        rg = ref_logistic16(sat(gx[hid + j] + gh[hid + j], -32768, 32767), t)
        n = ref_tanh16(sat(gx[2 * hid + j] + ref_rdbpot(rg * gh[2 * hid + j], 15), -32768, 32767), -12, t)
        hj = sat(n + ref_rdbpot(z * (h[j] - n), 15), -32768, 32767)
        h2.append(hj)
        y.append(sat(zy + ref_mbqm(hj, mq[4 * n3], mq[4 * n3 + 1]), -128, 127))
    return h2, y


def test_gru():
    """The integer GRU over T steps, one record: both products requantized apart per row,
    TFLM's int16 sigmoid and tanh from a table (random monotone ones), the reset gate on the
    hidden state's n product, the update in Q0.15; the state started from zero (FLAGS 1) or kept
    from the record's last run (FLAGS 0: run twice). The outputs and the state (h int16) equal
    the formula on every impl."""
    r = Lcg(91)
    impls = recurrent_impls()
    for case in range(CASES // 2):
        steps, nin, hid = r.int(1, 4), r.pick((1, 3, 8, 9, 17, r.int(1, 12))), r.int(1, 6)
        keep = case % 2
        W = [i8s(r, nin) for _ in range(3 * hid)]
        R = [i8s(r, hid) for _ in range(3 * hid)]
        bias = [r.int(-(1 << 16), 1 << 16) for _ in range(6 * hid)]
        mq = []
        for n, top in ((nin, 128), (hid, 32768)):  # per row: the products' multipliers, then their shifts
            mq += [multiplier(r) for _ in range(3 * hid)]
            mq += [shift16(r, (1 << 16) + 128 * top * n) for _ in range(3 * hid)]
        mq += [multiplier(r), r.pick((-8, -9, -12, r.int(-31, 0)))]
        t = sigmoid_table(r)
        zy = r.pick((-128, 127, 0, r.int(-128, 127)))
        x = i8s(r, steps * nin)
        h0 = [r.pick((-32768, 32767, r.int(-32768, 32767))) for _ in range(hid)] if keep else [0] * hid
        runs = 2 if keep else 1
        h, ys = h0, []
        for _ in range(runs):
            ys = []
            for step in range(steps):
                h, y = ref_gru_step(x[step * nin:(step + 1) * nin], h, W, R, bias, mq, zy, t, hid)
                ys += y
        ar = Arena(r, [steps * nin, steps * hid], (nin + 7 * hid, (hid + 1) // 2))
        xo, yo = ar.offsets
        ho = ar.scratch[1]
        ar.put(xo, x)
        for i in range(steps * hid):
            ar.expected[yo + i] = ys[i]
        for j in range(hid):
            ar.put_init(ho + 2 * j, i16_bytes(h0[j]))
        slot = Slot()
        wo = slot.i8([v for row in W for v in row])
        ro = slot.i8([v for row in R for v in row])
        bo, mo = slot.i32(bias), slot.i32(mq)
        to = slot.add([v - 65536 if v > 32767 else v for v in t], "h")
        fields = [steps, nin, hid, zy, xo, yo, ho, 0 if keep else 1, ar.scratch[0], 0, wo, 0, ro, 0, bo, 0, mo, 0, to]
        what = "gru case %d T %d I %d H %d keep %d" % (case, steps, nin, hid, keep)
        for name, mod in impls:
            a = ar.fresh()
            for _ in range(runs):
                run_record(mod, "gru", a, (slot.b,), kinds.GRU, fields)
            got = signed(a)
            assert got[:ar.size] == list(ar.expected), (what, name)
            assert list(array.array("h", bytes(a[ho:ho + 2 * hid]))) == h, (what, name, "h")


def test_gru_check():
    """The load-time check of a gru / fgru record passes a good one and refuses each bad field
    with one ContainerError line naming it."""
    from mpy_lazy import ContainerError

    room = kernels.room(kinds.GRU)
    steps, nin, hid = 3, 4, 2
    slot = Slot()
    wo, ro = slot.i8([1] * (3 * hid * nin)), slot.i8([1] * (3 * hid * hid))
    m_good = ([1 << 30] * (3 * hid) + [-3] * (3 * hid)) * 2 + [1 << 30, -2]  # per row: x's, then h's; y's
    bo, mo = slot.i32([0] * (6 * hid)), slot.i32(m_good)
    to = slot.add([v - 65536 if v > 32767 else v for v in range(32768, 32768 + 256)], "h")
    fo = slot.add([0.5] * (3 * hid * (nin + hid) + 6 * hid), "f")
    arena = 1024
    good = [steps, nin, hid, 5, 0, 64, 128, 1, 256, 0, wo, 0, ro, 0, bo, 0, mo, 0, to]
    bad = {2: (0, "x"), 4: (0, "out"), 5: (128, "zero_point"), 6: (arena - 4, "x"), 7: (arena - 2, "y"),
           8: (129, "state"), 9: (2, "state"), 10: (258, "scratch"), 12: (wo + 1 << 20, "weight")}
    for kind, fields, size in ((kinds.GRU, good, 1), (kinds.FGRU, None, 4)):
        if fields is None:  # the f32 record: f32 tensors, 4-byte values
            fields = [steps, nin, hid, 0, 0, 64, 128, 1, 256, 0, fo, 0, fo, 0, fo]
        room.check(check._Rec(record(kind, fields), 0, arena, (slot.b,), None), check._Env((slot.b,)))
        for i, (v, field) in bad.items():
            if i - 2 >= len(fields):
                continue
            f = list(fields)
            f[i - 2] = v
            e = raises(ContainerError, room.check, check._Rec(record(kind, f), 0, arena, (slot.b,), None),
                       check._Env((slot.b,)))
            assert (e.field, e.tensor) == ("program", field) and "\n" not in str(e) \
                and str(e).startswith("graph line 0: gru: " + field), \
                (kind, i, str(e))
    for k, v, field in ((0, -1, "requant"), (3 * hid, 31, "requant"), (9 * hid, -32, "requant"),
                        (12 * hid + 1, -32, "requant"), (12 * hid, -1, "requant")):
        m = list(m_good)
        m[k] = v
        s2 = Slot()
        f = list(good)
        f[10], f[12], f[14] = s2.i8([1] * (3 * hid * nin)), s2.i8([1] * (3 * hid * hid)), s2.i32([0] * (6 * hid))
        f[16], f[18] = s2.i32(m), s2.add([v - 65536 if v > 32767 else v for v in range(32768 + 255, 32767, -1)], "h")
        e = raises(ContainerError, room.check, check._Rec(record(kinds.GRU, f), 0, arena, (s2.b,), None),
                   check._Env((s2.b,)))
        assert e.tensor == field, (k, v, str(e))
    f = list(good)  # a table that decreases
    e = raises(ContainerError, room.check, check._Rec(record(kinds.GRU, f[:18] + [wo]), 0, arena, (slot.b,), None),
               check._Env((slot.b,)))
    assert e.tensor == "table", str(e)
    s3 = Slot()  # entry 254 at 65535: a gate of 32768 (TFLM's table has 65534 there)
    f = list(good)
    f[10], f[12], f[14], f[16] = s3.i8([1] * (3 * hid * nin)), s3.i8([1] * (3 * hid * hid)), s3.i32([0] * (6 * hid)), \
        s3.i32(m_good)
    f[18] = s3.add([v - 65536 if v > 32767 else v for v in list(range(32768, 32768 + 254)) + [65535, 65535]], "h")
    e = raises(ContainerError, room.check, check._Rec(record(kinds.GRU, f), 0, arena, (s3.b,), None),
               check._Env((s3.b,)))
    assert e.tensor == "table" and "entry 254" in str(e), str(e)


def ref_svdf(x, state, wf, wt, bias, zx, zs, zy, m1, s1, m2, s2, units, mem, es):
    """TFLM's EvalIntegerSvdfReference (svdf_common.cc) for batch 1: the state shifts one
    element left; each filter's dot product with x - zx, MultiplyByQuantizedMultiplier,
    clamped to the state type, plus zs, stored with the C cast (wrapping); each filter's time
    product with state - zs (int32, wrapping); per unit bias + its rank filters, requantized to
    int8. Returns (y, new state)."""
    lo, hi = (-32768, 32767) if es == 2 else (-128, 127)
    st = state[1:] + state[-1:]
    f = len(wf)
    for o in range(f):
        d = wrap(sum(wf[o][i] * (x[i] - zx) for i in range(len(x))))
        d = sat(ref_mbqm(d, m1, s1), lo, hi) + zs
        st[o * mem + mem - 1] = (d - lo) % (hi - lo + 1) + lo
    rank = f // units
    y = []
    for u in range(units):
        acc = bias[u]
        for o in range(u * rank, (u + 1) * rank):
            acc += wrap(sum(wt[o][j] * (st[o * mem + j] - zs) for j in range(mem)))
        y.append(sat(zy + ref_mbqm(wrap(acc), m2, s2), -128, 127))
    return y, st


def wrap(v):
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def test_svdf():
    """TFLM's integer SVDF, int16 and int8 state (and time weights), ranks 1..3, run three times
    on the record (the state kept between runs); sums that wrap around int32 (as TFLM's do:
    biases near the limits, large time weights) included. Outputs and the state equal the
    formula on every impl."""
    r = Lcg(91)
    impls = recurrent_impls()
    for case in range(CASES // 2):
        es = 2 if case % 3 else 1
        units, rank, mem, nin = r.int(1, 5), r.pick((1, 1, 2, 3)), r.pick((1, 2, 8, r.int(1, 10))), r.int(1, 12)
        f = units * rank
        lo, hi = (-32768, 32767) if es == 2 else (-128, 127)
        zx, zy = r.pick((-128, 0, r.int(-128, 127))), r.pick((-128, 0, r.int(-128, 127)))
        zs = 0 if es == 2 and r.chance(2) else r.int(lo, hi) // (256 if es == 2 else 1)
        wf = [i8s(r, nin) for _ in range(f)]
        wt = [[r.int(lo, hi) for _ in range(mem)] for _ in range(f)]
        bias = [r.pick((r.int(-(1 << 20), 1 << 20), INT32_MAX - r.int(0, 9), INT32_MIN + r.int(0, 9)))
                for _ in range(units)]
        m1, s1 = multiplier(r), shift(r, 128 * 255 * nin) - (8 if es == 2 else 0) + r.int(0, 8)
        s1 = -31 if s1 < -31 else (0 if s1 > 0 else s1)
        m2, s2 = multiplier(r), r.int(-31, 0)
        state0 = [r.int(lo, hi) for _ in range(f * mem)]
        xs = [i8s(r, nin) for _ in range(3)]
        units_out = []
        st = list(state0)
        for x in xs:
            y, st = ref_svdf(x, st, wf, wt, bias, zx, zs, zy, m1, s1, m2, s2, units, mem, es)
            units_out.append(y)
        ar = Arena(r, [nin, units], (f * mem * es // 4 + 1, f + units + nin))
        xo, yo = ar.offsets
        so = ar.scratch[0]
        for i in range(f * mem):
            ar.put_init(so + es * i, i16_bytes(state0[i]) if es == 2 else [state0[i]])
        ar.put_expected(yo, units_out[-1])
        ar.put_expected(xo, xs[-1])  # (each run's input written in before it)
        slot = Slot()
        wfo = slot.i8([v for row in wf for v in row])
        wto = slot.add([v for row in wt for v in row], "h" if es == 2 else "b")
        bo = slot.i32(bias)
        fields = [f, nin, mem, units, xo, yo, so, es, zx, zs, zy, m1, s1, m2, s2, ar.scratch[1],
                  0, wfo, 0, wto, 0, bo]
        what = "svdf case %d es %d F %d M %d U %d" % (case, es, f, mem, units)
        for name, mod in impls:
            a = ar.fresh()
            for x in xs:
                a[xo:xo + nin] = bytes(array.array("b", x))
                run_record(mod, "svdf", a, (slot.b,), kinds.SVDF, fields)
            got = signed(a)
            assert got[:ar.size] == list(ar.expected), (what, name)
            sv = array.array("h" if es == 2 else "b", bytes(a[so:so + es * f * mem]))
            assert list(sv) == st, (what, name, "state")


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
                return (lambda: run_record(mod, "move", a, (), kinds.MOVE, fields)), a

            run_each(build, want, "move case %d es %d %s" % (case, es, fields))
            # the same elements with the source's rows and columns and the destination's planes
            # walked backwards (negative strides: REVERSE_V2, slices of stride -1)
            back = [so + es * ((rows - 1) * ss + (cols - 1) * sj), do + es * (planes - 1) * pds, rows, cols,
                    -ss, -sj, ds, dj, es, planes, pss, -pds]
            want = list(ar.init)
            for q in range(planes):
                for i in range(rows):
                    for j in range(cols):
                        for b in range(es):
                            d = do + es * ((planes - 1 - q) * pds + i * ds + j * dj) + b
                            want[d] = ar.init[so + es * (q * pss + (rows - 1 - i) * ss + (cols - 1 - j) * sj) + b]

            def build_back(mod):
                a = ar.fresh()
                return (lambda: run_record(mod, "move", a, (), kinds.MOVE, back)), a

            run_each(build_back, want, "move backwards case %d es %d %s" % (case, es, back))
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
                return (lambda: run_record(mod, "fill", a, (), kinds.FILL, [off, n, v, es])), a

            run_each(fill, want, "fill es %d" % es)


# --- float transpose conv ----------------------------------------------------------------------

class FloatEnv:
    """What a float kernel reads: the arena as f32 (af) over bytes A, the tensor slots as f32
    (sf), the ndarray kernels' cache."""

    def __init__(self, nwords, slot):
        self.A = bytearray(4 * nwords)
        self.B = (slot,)
        self.af = backend.typed_view(memoryview(self.A), "f32", nwords)
        self.sf = (_slot_view(slot, "f32"),)
        self.cache = {}


def test_float_tconv():
    """The float transpose conv record (kind ftconv) on _float and, where there is ulab or
    numpy, _nd: seeded geometry (strides, paddings, outputs past the input's reach, as
    output_padding makes) against TFLM's reference written out here (every input pixel
    scattered over the outputs its taps reach), values exact in float32 so only the order of
    the sums differs; the record passes its room's check."""
    from mpy_lazy.ops import tconv as room

    impls = [("ops.tconv", room.ftconv)]
    if backend.kind() is not None:
        from mpy_lazy import _nd

        impls.append(("_nd", kernels._unless_declined(_nd.ftconv, room.ftconv)))
    r = Lcg(70)
    for case in range(CASES):
        h, w, c, oc = r.int(1, 4), r.int(1, 4), r.int(1, 3), r.int(1, 3)
        kh, kw, sh, sw = r.int(1, 4), r.int(1, 4), r.int(1, 3), r.int(1, 3)
        pt, pl = r.int(0, kh - 1), r.int(0, kw - 1)
        oh = max(1, (h - 1) * sh + kh - pt - r.int(0, pt) + r.int(0, sh))
        ow = max(1, (w - 1) * sw + kw - pl - r.int(0, pl) + r.int(0, sw))
        act, hasb = r.int(0, 2), r.chance(2) == 0
        x = [r.int(-64, 64) / 32.0 for _ in range(h * w * c)]
        wt = [r.int(-64, 64) / 64.0 for _ in range(oc * kh * kw * c)]
        bias = [r.int(-64, 64) / 16.0 for _ in range(oc)]
        want = [bias[i % oc] if hasb else 0.0 for i in range(oh * ow * oc)]
        for iy in range(h):
            for ix in range(w):
                for ky in range(kh):
                    for kx in range(kw):
                        oy, ox = iy * sh + ky - pt, ix * sw + kx - pl
                        if 0 <= oy < oh and 0 <= ox < ow:
                            for o in range(oc):
                                for ci in range(c):
                                    want[(oy * ow + ox) * oc + o] += wt[((o * kh + ky) * kw + kx) * c + ci] * \
                                        x[(iy * w + ix) * c + ci]
        for i in range(len(want)):
            if act and want[i] < 0:
                want[i] = 0.0
            if act == 2 and want[i] > 6:
                want[i] = 6.0
        slot = Slot()
        wo = slot.add(wt, "f")
        bo = slot.add(bias, "f")
        xo, yo = 1, 2 + h * w * c + r.int(0, 3)  # word offsets in the arena (a guard word between)
        n = yo + oh * ow * oc + 2
        fields = [oc, act, 0, 0, 4 * xo, 4 * yo, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl, 0, 1 if hasb else 0, 0,
                  0, wo, 0, bo if hasb else 0]  # (an absent bias: slot 0, offset 0)
        P = record(kinds.FTCONV, fields)
        room.check(check._Rec(P, 0, 4 * n, (slot.b,), None), check._Env((slot.b,)))
        for name, fn in impls:
            E = FloatEnv(n, slot.b)
            for i in range(len(x)):
                E.af[xo + i] = x[i]
            E.af[yo - 1], E.af[yo + len(want)] = 7.5, -7.5  # guards: written by no one
            fn(E, P, 0)
            assert list(P)[2:] == fields, name
            assert E.af[yo - 1] == 7.5 and E.af[yo + len(want)] == -7.5, (name, case)
            for i in range(len(want)):
                assert abs(E.af[yo + i] - want[i]) <= 1e-5 * (1 + abs(want[i])), (name, case, i, E.af[yo + i], want[i])
        E = FloatEnv(n, slot.b)
        bad = list(fields)
        bad[15] = kh  # a pad as large as the kernel
        raises(Exception, room.check, check._Rec(record(kinds.FTCONV, bad), 0, 4 * n, (slot.b,), None),
               check._Env((slot.b,)))


def test_float_gru():
    """The float GRU record (kind fgru) against torch's GRU equations written out here (gates
    z, r, n; r on the hidden state's n product and its bias, linear_before_reset=1), over T
    steps from a zero state (FLAGS 1) or from the state the last run left (FLAGS 0: run twice);
    the record passes its room's check; y and h within float32 rounding."""
    from mpy_lazy.ops import gru as room

    def sig(v):
        return 1.0 / (1.0 + math.exp(-v))

    r = Lcg(71)
    for case in range(CASES // 2):
        steps, nin, hid = r.int(1, 4), r.int(1, 6), r.int(1, 5)
        keep = case % 2
        W = [[r.int(-64, 64) / 64.0 for _ in range(nin)] for _ in range(3 * hid)]
        R = [[r.int(-64, 64) / 64.0 for _ in range(hid)] for _ in range(3 * hid)]
        b = [r.int(-64, 64) / 32.0 for _ in range(6 * hid)]
        x = [r.int(-64, 64) / 16.0 for _ in range(steps * nin)]
        h0 = [r.int(-32, 32) / 32.0 for _ in range(hid)] if keep else [0.0] * hid
        h, ys = list(h0), []
        for _ in range(2 if keep else 1):
            ys = []
            for t in range(steps):
                xt = x[t * nin:(t + 1) * nin]
                gx = [b[o] + sum(W[o][i] * xt[i] for i in range(nin)) for o in range(3 * hid)]
                gh = [b[3 * hid + o] + sum(R[o][i] * h[i] for i in range(hid)) for o in range(3 * hid)]
                new = []
                for j in range(hid):
                    z = sig(gx[j] + gh[j])
                    rg = sig(gx[hid + j] + gh[hid + j])
                    n = math.tanh(gx[2 * hid + j] + rg * gh[2 * hid + j])
                    new.append((1 - z) * n + z * h[j])
                h = new
                ys += h
        slot = Slot()
        wo, ro = slot.add([v for row in W for v in row], "f"), slot.add([v for row in R for v in row], "f")
        bo = slot.add(b, "f")
        xo, yo, ho = 1, 2 + steps * nin, 3 + steps * (nin + hid)  # word offsets (guard words between)
        so = ho + hid + 1
        n = so + 6 * hid + 1
        fields = [steps, nin, hid, 0, 4 * xo, 4 * yo, 4 * ho, 0 if keep else 1, 4 * so, 0, wo, 0, ro, 0, bo]
        P = record(kinds.FGRU, fields)
        room.check(check._Rec(P, 0, 4 * n, (slot.b,), None), check._Env((slot.b,)))
        E = FloatEnv(n, slot.b)
        for i in range(len(x)):
            E.af[xo + i] = x[i]
        for j in range(hid):
            E.af[ho + j] = h0[j]
        E.af[yo - 1], E.af[ho - 1] = 7.5, -7.5  # guards: written by no one
        for _ in range(2 if keep else 1):
            room.fgru(E, P, 0)
        assert E.af[yo - 1] == 7.5 and E.af[ho - 1] == -7.5, case
        for got, want in [(E.af[yo + i], ys[i]) for i in range(len(ys))] + [(E.af[ho + j], h[j]) for j in range(hid)]:
            assert abs(got - want) <= 1e-5 * (1 + abs(want)), (case, got, want)


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
            assert len(t) == kinds.KINDS and all(t[k] is not None for k in range(1, kinds.KINDS) if kinds.LENGTH[k])
            one = kernels.table((kinds.CONV,))  # a program's table: its kinds only
            assert one[kinds.CONV] is t[kinds.CONV] and all(one[k] is None for k in range(2, kinds.KINDS))
            fast = _viper if p != "pure" and _viper is not None else None
            assert kernels.viper() is fast
            for k, name in ((kinds.CONV, "conv"), (kinds.DENSE, "dense"), (kinds.SOFTMAX, "softmax")):
                assert t[k] is getattr(fast or kernels.room(k), name), (p, k)
            assert kernels.views((kinds.CONV, kinds.DENSE)) is (fast is None)
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
    v = sign * (m / 16777216.0 if e == 0 else (1024 + m) * 2.0 ** (e - 25))  # (2**24: no folded constant)
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_f16_decode_every_value():
    """kernels.f16 (viper's bit conversion where there is viper) and _arith.f16_to_f32 decode all
    65536 halfs exactly: the float32 bits equal struct's '<e' and the value computed from the
    fields; +-inf and NaN stay so. `first` and `n` select the slice; dst past n is untouched."""
    step = 256 if small_board() else 2048
    dst = array.array("f", bytes(4 * (step + 1)))
    fns = [("_ref", _ref.f16_to_f32)]
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


# --- elementwise ops, cast, resize (kinds 44..52) ---------------------------------------------

def ints_of(r, n, es):
    """n signed integers of es bytes, the type's edges now and then."""
    top = (1 << (8 * es - 1)) - 1
    out = []
    for _ in range(n):
        k = r.next() % 8
        out.append(-top - 1 if k == 0 else top if k == 1 else r.int(-top - 1, top))
    return out


def pack_ints(vals, es):
    return list(signed(struct.pack("<%d%s" % (len(vals), "bhi"[es // 2]), *vals)))


def test_minmax():
    """TFLM's MINIMUM / MAXIMUM on integers of 1, 2 and 4 bytes: the stored codes compared
    (el1 > el2 ? el1 : el2), x2 repeating every BC elements, from the arena or a tensor."""
    r = Lcg(90)
    for case in range(CASES):
        es = (1, 2, 4)[case % 3]
        c = r.int(1, 6)
        n = c * r.pick((1, 2, 5, 30))
        bc = r.pick((n, c, 1))
        op, src = r.int(0, 1), r.int(0, 1)
        x1, x2 = ints_of(r, n, es), ints_of(r, bc, es)
        if r.chance(3):  # equal elements
            x2 = [x1[i] for i in range(bc)]
        ar = Arena(r, [es * n + es, es * bc + es, es * n + es])
        o1, o2, yo = ((o + es - 1) // es * es for o in ar.offsets)
        ar.put(o1, pack_ints(x1, es))
        slot = Slot()
        toff = slot.add(x2, "bhi"[es // 2])
        if not src:
            ar.put(o2, pack_ints(x2, es))
        want = [max(x1[i], x2[i % bc]) if op else min(x1[i], x2[i % bc]) for i in range(n)]
        expected = list(ar.expected)
        expected[yo: yo + es * n] = pack_ints(want, es)
        fields = [op, es, o1, yo, n, bc, src, o2, 0, toff]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "minmax", a, (slot.b,), kinds.MINMAX, fields)), a

        run_each(build, expected, "minmax case %d %s" % (case, fields), ELEM_IMPLS)


def test_compare_logical_select():
    """compare (integers of 1, 2, 4 bytes, or i8 codes through a table of rescaled codes: the
    six comparisons), logical (and, or, not: a non-zero byte is true) and select (elements of
    1, 2, 4 bytes), every operand repeating every BC elements: the output bytes 1 or 0, or the
    chosen operand's, on every path."""
    r = Lcg(93)
    cmps = (lambda u, v: u == v, lambda u, v: u != v, lambda u, v: u < v, lambda u, v: u <= v,
            lambda u, v: u > v, lambda u, v: u >= v)
    for case in range(CASES):
        c = r.int(1, 6)
        n = c * r.pick((1, 2, 5, 30))
        bc1, bc2, bcc = r.pick((n, c, 1)), r.pick((n, c, 1)), r.pick((n, c, 1))
        which = case % 3
        es = 1 if which == 1 else r.pick((1, 2, 4))
        x1, x2 = ints_of(r, bc1, es), ints_of(r, bc2, es)
        if which == 1:  # (logical: bytes, true when not zero)
            x1 = [r.pick((0, 1, -3)) for _ in range(bc1)]
            x2 = [r.pick((0, 1, 2)) for _ in range(bc2)]
        if r.chance(2):
            x2 = [x1[i % bc1] for i in range(bc2)]  # ties
        cond = [r.pick((0, 1, 5)) for _ in range(bcc)]
        ar = Arena(r, [es * bc1 + 4, es * bc2 + 4, bcc, es * n + 4])
        o1, o2, oc, yo = ((o + 3) // 4 * 4 for o in ar.offsets)
        ar.put(o1, pack_ints(x1, es))
        ar.put(o2, pack_ints(x2, es))
        ar.put(oc, pack_ints(cond, 1))
        slot = Slot()
        expected = list(ar.expected)
        if which == 0:
            op, scaled = r.int(0, 5), es == 1 and r.chance(2)
            table = [r.int(-1000, 1000) for _ in range(512)]
            toff = slot.add(table, "i")
            u = [table[128 + v] if scaled else v for v in x1]
            v = [table[384 + w] if scaled else w for w in x2]
            want = [1 if cmps[op](u[i % bc1], v[i % bc2]) else 0 for i in range(n)]
            expected[yo: yo + n] = want
            kind, name = kinds.COMPARE, "compare"
            fields = [op, es, o1, o2, yo, n, bc1, bc2, 1 if scaled else 0] + ([0, toff] if scaled else [0, 0])
        elif which == 1:
            op = r.int(0, 2)
            want = [1 if (x1[i % bc1] and x2[i % bc2] if op == 0 else (
                x1[i % bc1] or x2[i % bc2] if op == 1 else not x1[i % bc1])) else 0 for i in range(n)]
            expected[yo: yo + n] = want
            kind, name, fields = kinds.LOGICAL, "logical", [op, o1, o2, yo, n, bc1, bc2]
        else:
            want = [x1[i % bc1] if cond[i % bcc] else x2[i % bc2] for i in range(n)]
            expected[yo: yo + es * n] = pack_ints(want, es)
            kind, name, fields = kinds.SELECT, "select", [es, oc, o1, o2, yo, n, bcc, bc1, bc2]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, name, a, (slot.b,), kind, fields)), a

        run_each(build, expected, "%s case %d %s" % (name, case, fields), ELEM_IMPLS)


def test_sqdiff_addn():
    """sqdiff (TFLM's SquaredDifference: i8 with LS 7 and i16 with LS 0, each operand's (x - z)
    << LS rescaled (SRDHM, RDBPOT), the difference squared, MBQM, clamped; i32 the wrapped
    square of the wrapped difference; operands repeating every BC elements) and int8 addn
    (TFLM's AddN: (-z + sum (x_j - z)) << 19 wrapped, SRDHM, RDBPOT, clamped), on every path."""
    r = Lcg(94)
    for case in range(CASES):
        ar = expected = None  # (the last case's lists freed before this one's: the M0's heap is in pieces)
        c = r.int(1, 6)
        n = c * r.pick((1, 2, 5, 30))
        slot = Slot()
        if case % 3 == 2:  # addn
            k = r.int(2, 8)
            xs = [ints_of(r, n, 1) for _ in range(k)]
            z, zy = r.int(-128, 127), r.int(-128, 127)
            lo = r.int(-128, 0)
            hi = r.int(lo, 127)
            m, s = r.pick(EDGE_M), -r.int(0, 31)
            ar = Arena(r, [n] * (k + 1))
            for j in range(k):
                ar.put(ar.offsets[j], pack_ints(xs[j], 1))
            yo = ar.offsets[k]
            want = []
            for i in range(n):
                acc = -z
                for j in range(k):
                    acc += xs[j][i] - z
                d = ref_rdbpot(ref_srdhm(_arith.wrap32(acc << 19), m), -s) + zy
                want.append(min(hi, max(lo, d)))
            expected = ar.expected  # (this case's own: no copy)
            ar.put_expected(yo, want)
            name, kind = "addn", kinds.ADDN
            fields = [k, z, zy, lo, hi, yo, n, m, s] + [ar.offsets[j] for j in range(k)] + [0] * (8 - k)
        else:
            es = r.pick((1, 2, 4))
            bc1, bc2 = r.pick((n, c, 1)), r.pick((n, c, 1))
            x1, x2 = ints_of(r, bc1, es), ints_of(r, bc2, es)
            ar = Arena(r, [es * bc1 + 4, es * bc2 + 4, es * n + 4])
            o1, o2, yo = ((o + 3) // 4 * 4 for o in ar.offsets)
            ar.put(o1, pack_ints(x1, es))
            ar.put(o2, pack_ints(x2, es))
            top = (1 << (8 * es - 1)) - 1
            if es == 4:
                m = [0] * 12
                want = [_arith.wrap32(_arith.wrap32(x1[i % bc1] - x2[i % bc2]) ** 2) for i in range(n)]
            else:
                ls = 7 if es == 1 else 0
                z1, z2, zy = (r.int(-128, 127) if es == 1 else 0 for _ in range(3))
                lo = r.int(-top - 1, 0)
                hi = r.int(lo, top)
                mq = [r.int(1 << 29, INT32_MAX), -r.int(1, 3), r.int(1 << 29, INT32_MAX), -r.int(1, 3),
                      r.pick(EDGE_M), r.int(-31, 0)]  # (a left shift of d * d overflows: undefined in C)
                m = [zy, lo, hi, z1, z2, ls] + mq

                def sc(v, z, mm, sh):
                    return ref_rdbpot(ref_srdhm((v - z) << ls, mm), -sh)
                want = []
                for i in range(n):
                    d = sc(x1[i % bc1], z1, mq[0], mq[1]) - sc(x2[i % bc2], z2, mq[2], mq[3])
                    want.append(min(hi, max(lo, ref_mbqm(d * d, mq[4], mq[5]) + zy)))
            expected = ar.expected
            ar.put_expected(yo, pack_ints(want, es))
            name, kind = "sqdiff", kinds.SQDIFF
            fields = [es, o1, o2, yo, n, bc1, bc2] + m

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, name, a, (slot.b,), kind, fields)), a

        run_each(build, expected, "%s case %d %s" % (name, case, fields), ELEM_IMPLS)


def test_elementwise_bool_arith_checks():
    """The load-time checks of the unary, compare, fcompare, logical, select, farith, sqdiff
    and addn records pass a good one and refuse each bad field with one ContainerError line
    naming it."""
    from mpy_lazy import ContainerError

    slot = Slot()
    to = slot.i32([0] * 512)
    arena = 1024
    cases = [  # (kind, name, good fields, {field index: (bad value, field name)})
        (kinds.FUNARY, "unary", [3, 0, 256, 16], {2: (12, "op"), 3: (2, "x"), 4: (1022, "y"), 5: (0, "x")}),
        (kinds.COMPARE, "compare", [2, 1, 0, 64, 128, 16, 16, 4, 1, 0, to],
         {2: (6, "op"), 3: (3, "dtype"), 4: (1020, "x"), 8: (5, "x"), 9: (17, "x"), 10: (2, "t"),
          12: (to + 4, "table")}),
        (kinds.COMPARE, "compare", [5, 4, 0, 64, 128, 16, 16, 1, 0, 0, 0], {3: (3, "dtype"), 11: (1, "table")}),
        (kinds.COMPARE, "compare", [5, 8, 0, 64, 128, 4, 4, 1, 0, 0, 0], {3: (16, "dtype"), 4: (2, "x"), 10: (1, "dtype")}),
        (kinds.FCOMPARE, "compare", [0, 0, 64, 128, 16, 16, 16], {2: (6, "op"), 4: (1000, "x"), 7: (0, "x")}),
        (kinds.LOGICAL, "logical", [1, 0, 64, 128, 16, 16, 4], {2: (3, "op"), 5: (1020, "y"), 8: (3, "x")}),
        (kinds.SELECT, "select", [4, 0, 64, 128, 256, 16, 1, 16, 4],
         {2: (3, "dtype"), 4: (66, "x"), 6: (1000, "y"), 8: (5, "x")}),
        (kinds.FARITH, "arith", [1, 0, 64, 128, 16, 16, 16], {2: (3, "op"), 6: (1 << 25, "x")}),
        (kinds.SQDIFF, "sqdiff", [1, 0, 64, 128, 16, 16, 4, -3, -128, 127, 5, -5, 7, 1 << 30, -1, 1 << 30, -1,
                                  1 << 30, 3],
         {9: (128, "zero_point"), 11: (-129, "clamp"), 14: (0, "shift"), 16: (1, "m"), 20: (31, "m")}),
        (kinds.SQDIFF, "sqdiff", [4, 0, 64, 128, 16, 16, 4] + [0] * 12, {9: (1, "m"), 14: (7, "m")}),
        (kinds.ADDN, "addn", [3, 5, -3, -128, 127, 256, 16, 1 << 30, -2, 0, 64, 128, 0, 0, 0, 0, 0],
         {2: (9, "x"), 3: (200, "zero_point"), 10: (1, "m"), 12: (1020, "x"), 14: (64, "x")}),
    ]
    for kind, name, good, bad in cases:
        room = kernels.room(kind)
        room.check(check._Rec(record(kind, good), 0, arena, (slot.b,), None), check._Env((slot.b,)))
        for i, (v, field) in bad.items():
            f = list(good)
            f[i - 2] = v
            e = raises(ContainerError, room.check, check._Rec(record(kind, f), 0, arena, (slot.b,), None),
                       check._Env((slot.b,)))
            assert e.tensor == field and "\n" not in str(e) and str(e).startswith(
                "graph line 0: %s: %s" % (name, field)), (name, i, str(e))


def test_cast_integers():
    """CAST between i8, i16 and i32: sign-extended, or the low bits kept (C's static_cast)."""
    r = Lcg(91)
    for case in range(CASES):
        xes, yes = r.pick((1, 2, 4)), r.pick((1, 2, 4))
        n = r.int(1, 40)
        x = ints_of(r, n, xes)
        ar = Arena(r, [xes * n + 4, yes * n + 4])
        xo, yo = ((o + 3) // 4 * 4 for o in ar.offsets)
        ar.put(xo, pack_ints(x, xes))
        bits = 8 * yes
        want = []
        for v in x:
            v &= (1 << bits) - 1
            want.append(v - (1 << bits) if v >= 1 << (bits - 1) else v)
        expected = list(ar.expected)
        expected[yo: yo + yes * n] = pack_ints(want, yes)
        fields = [xo, yo, n, xes, yes]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "cast", a, (), kinds.CAST, fields)), a

        run_each(build, expected, "cast case %d %s" % (case, fields), ELEM_IMPLS)


def ref_div(a, b, z1, z2, zy, m, s, recip):
    """TFLM's int8 DIV (reference_ops::DivElementwise), written out:
        input1_val = a - z1; input2_val = b - z2; both negated if input2_val < 0
        input2_inv = GetReciprocal(input2_val, 31, &recip_shift)     (recip(d) -> (inv, shift))
        headroom = CountLeadingSignBits(input1_val)
        unscaled = MultiplyByQuantizedMultiplierGreaterThanOne(input1_val, input2_inv, headroom)
        total_shift = output_shift - recip_shift - headroom
        y = zy + MultiplyByQuantizedMultiplierSmallerThanOneExp(unscaled, m, total_shift)
    where a right shift of 32 or more (undefined in C) gives the rounded value, 0."""
    u, v = a - z1, b - z2
    if v < 0:
        u, v = -u, -v
    inv, rshift = recip(v)
    h = 0
    while h < 31 and -(1 << (30 - h)) <= u < (1 << (30 - h)):
        h += 1
    q = ref_srdhm(ref_srdhm(u * (1 << h), inv), m)
    e = h + rshift - s
    y = zy + (ref_rdbpot(q, e) if e < 32 else 0)
    return -128 if y < -128 else (127 if y > 127 else y)


def recip_of(table):
    def recip(d):
        bits = 0
        while d >> bits:
            bits += 1
        return table[d], bits - 1  # (TFLM: num_bits_over_unit = 31 - CountLeadingZeros(d))
    return recip


def test_div():
    """TFLM's int8 DIV against the formula above, with gemmlowp's reciprocals (and arbitrary
    int32 ones: the paths must agree on any table), zero denominators included."""
    r = Lcg(92)
    # int32 arrays, not lists: 256 boxed ints each would scatter over a board's heap
    true_table = array.array("i", bytes(1024))
    for d in range(1, 256):
        true_table[d] = ref_one_over_one_plus_x(((d << (32 - bitlen(d))) & 0xFFFFFFFF) - (1 << 31))
    for case in range(CASES):
        table = true_table
        if not case % 4:
            table = array.array("i", bytes(1024))
            for d in range(256):
                table[d] = r.int(INT32_MIN, INT32_MAX)
        c = r.int(1, 5)
        n = c * r.pick((1, 3, 20))
        bc = r.pick((n, c, 1))
        z1, z2 = r.int(-128, 127), r.int(-128, 127)
        m, s = multiplier(r), r.int(-20, 22)
        zyc, lo, hi = head(r, 1)
        x1, x2 = i8s(r, n, z1), i8s(r, bc, z2)
        ar = Arena(r, [n, bc, n])
        o1, o2, yo = ar.offsets
        ar.put(o1, x1)
        ar.put(o2, x2)
        recip = recip_of(table)
        for i in range(n):
            v = ref_div(x1[i], x2[i % bc], z1, z2, zyc, m, s, recip)
            ar.expected[yo + i] = lo if v < lo else (hi if v > hi else v)
        slot = Slot()
        fields = [1, zyc, lo, hi, o1, o2, yo, n, bc, z1, z2, m, s, 0, slot.i32(table)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "div", a, (slot.b,), kinds.DIV, fields)), a

        run_each(build, ar.expected, "div case %d %s" % (case, fields[:13]), ELEM_IMPLS)


def test_resize():
    """Nearest (a gather of C elements of 1, 2 or 4 bytes per output pixel) and TFLM's int8
    ResizeBilinearInteger (four products, rounded half away from zero by 2**20) from random
    tables: edges, rows equal, weights outside [0, 1024] (TFLM's half-pixel extrapolation)."""
    r = Lcg(93)
    for case in range(CASES):
        h, w, c, oh, ow = r.int(1, 5), r.int(1, 5), r.int(1, 4), r.int(1, 6), r.int(1, 6)
        bil = case % 2
        es = 1 if bil else r.pick((1, 2, 4))
        x = ints_of(r, h * w * c, es)
        if bil:
            rows = [(r.int(0, h - 1), r.int(0, h - 1), r.pick((0, 1024, -512, 2559, -1535, r.int(0, 1024))))
                    for _ in range(oh)]
            cols = [(r.int(0, w - 1), r.int(0, w - 1), r.pick((0, 1024, -256, r.int(0, 1024)))) for _ in range(ow)]
            table = [v for t in rows + cols for v in t]
        else:
            rows, cols = [r.int(0, h - 1) for _ in range(oh)], [r.int(0, w - 1) for _ in range(ow)]
            table = rows + cols
        want = []
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    if not bil:
                        want.append(x[(rows[oy] * w + cols[ox]) * c + ch])
                        continue
                    (y0, y1, dy), (x0, x1, dx) = rows[oy], cols[ox]
                    v = x[(y0 * w + x0) * c + ch] * (1024 - dy) * (1024 - dx) + x[(y1 * w + x0) * c + ch] * dy * (1024 - dx) \
                        + x[(y0 * w + x1) * c + ch] * (1024 - dy) * dx + x[(y1 * w + x1) * c + ch] * dy * dx
                    v = c_div(v + (524288 if v > 0 else -524288), 1 << 20)
                    want.append(((v + 128) & 255) - 128)  # static_cast<int8_t>
        ar = Arena(r, [es * h * w * c + es, es * oh * ow * c + es])
        xo, yo = ((o + es - 1) // es * es for o in ar.offsets)
        ar.put(xo, pack_ints(x, es))
        expected = list(ar.expected)
        expected[yo: yo + es * len(want)] = pack_ints(want, es)
        slot = Slot()
        fields = [bil, es, xo, yo, h, w, c, oh, ow, 0, slot.i32(table)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "resize", a, (slot.b,), kinds.RESIZE, fields)), a

        run_each(build, expected, "resize case %d %s" % (case, fields[:9]), ELEM_IMPLS)


def test_prelu():
    """TFLM's int8 PRELU: x >= ZX from the table, else clamp(ZY + mbqm((x - ZX)(alpha - ZA), M,
    S)); alpha repeating every BC elements; blocks of BLOCK elements."""
    r = Lcg(94)
    for case in range(CASES):
        c = r.int(1, 6)
        n = c * r.pick((1, 4, 90))
        bc = r.pick((n, c, 1))
        zx, za = r.int(-128, 127), r.int(-128, 127)
        m, s = multiplier(r), shift(r, 255 * 255)
        zy, lo, hi = head(r, 1)
        x, alpha, table = i8s(r, n, zx), i8s(r, bc, za), i8s(r, 256)
        block = r.pick((1, 7, 256))
        ar = Arena(r, [n, n], (block,))
        xo, yo = ar.offsets
        ar.put(xo, x)
        for i in range(n):
            d = x[i] - zx
            ar.expected[yo + i] = table[x[i] + 128] if d >= 0 else ref_requant(d * (alpha[i % bc] - za), m, s, zy, lo, hi)
        slot = Slot()
        ao, to = slot.i8(alpha), slot.i8(table)
        fields = [1, zy, lo, hi, xo, yo, n, bc, zx, za, m, s, 0, ao, 0, to] + ar.scratch + [block]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "prelu", a, (slot.b,), kinds.PRELU, fields)), a

        run_each(build, ar.expected, "prelu case %d %s" % (case, fields[:12]), ELEM_IMPLS)


def test_prelu16():
    """TFLM's 16x8 PRELU (int16 x and y, int8 alpha): d = x - ZX; clamp(ZY + mbqm(d, M1, S1)) for
    d >= 0, else clamp(ZY + mbqm(d (alpha - ZA), M2, S2)); alpha repeating every BC elements;
    written over its input too (the check allows x == y)."""
    r = Lcg(95)
    for case in range(CASES):
        c = r.int(1, 6)
        n = c * r.pick((1, 4, 90))
        bc = r.pick((n, c, 1))
        zx = r.pick((0, 0, r.int(-32768, 32767)))
        za = r.int(-128, 127)
        m1, s1 = multiplier(r), shift16(r, 65535)
        m2, s2 = multiplier(r), shift16(r, 65535 * 255)
        zy = r.pick((0, 0, -32768, 32767, r.int(-32768, 32767)))
        lo, hi = (-32768, 32767) if not r.chance(3) else (r.int(-32768, 0), r.int(0, 32767))
        edge = (-32768, 32767, -1, 0, 1, zx)
        x = [r.pick(edge) if r.chance(4) else r.int(-32768, 32767) for _ in range(n)]
        alpha = i8s(r, bc, za)
        inplace = case % 4 == 3
        ar = Arena(r, [2 * n] if inplace else [2 * n, 2 * n], aligns=(2, 2))
        xo = ar.offsets[0]
        yo = xo if inplace else ar.offsets[1]
        for i in range(n):
            ar.put(xo + 2 * i, i16_bytes(x[i]))
        for i in range(n):
            d = x[i] - zx
            v = ref_requant(d, m1, s1, zy, lo, hi) if d >= 0 else \
                ref_requant(d * (alpha[i % bc] - za), m2, s2, zy, lo, hi)
            ar.expected[yo + 2 * i], ar.expected[yo + 2 * i + 1] = i16_bytes(v)
        slot = Slot()
        fields = [1, zy, lo, hi, xo, yo, n, bc, zx, za, m1, s1, m2, s2, 0, slot.i8(alpha)]

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "prelu16", a, (slot.b,), kinds.PRELU16, fields)), a

        run_each(build, ar.expected, "prelu16 case %d %s" % (case, fields[:14]), ELEM_IMPLS)


# --- float kernels of kinds 44..53 (_float.py: one implementation, against the formulas) ------

class FEnv(Env):
    """Env with the float kernels' views: the arena and the slots as f32, the program too."""

    def __init__(self, arena, slots, P):
        Env.__init__(self, arena, slots)
        self.af = _slot_view(arena, "f32")
        self.sf = tuple([_slot_view(b, "f32") for b in self.B])
        self.pf = _slot_view(P, "f32")


def f32r(v):
    """v rounded to float32 (what an f32 arena holds)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def run_float(name, arena, slots, kind, fields):
    P = record(kind, fields)
    getattr(_ref, name)(FEnv(arena, slots, P), P, 0)
    return _slot_view(arena, "f32")


def close_to(got, want, what, rtol=1e-6):
    for i in range(len(want)):
        w, g = want[i], got[i]
        if w != w:
            assert g != g, (what, i, g, w)
        elif abs(w) == float("inf") or abs(g - w) > rtol * (abs(w) + 1e-30) and abs(g - w) > 1e-30:
            assert g == w, (what, i, g, w)


def f32_bits_of(v):
    return struct.unpack("<i", struct.pack("<f", v))[0]


FLT_MAX = (2.0 - 2.0 ** -23) * 2.0 ** 127  # (float32's largest; a literal may parse to inf on a board)


def test_fsvdf():
    """TFLM's float SVDF over two calls on one arena: the state (garbage-free, F x M f32) moves one
    element left across the filters, filter f's newest entry is w_f . x, y_u = act(b_u + the sum
    of the unit's rank filters' t_f . state_f); act none, relu, relu6."""
    r = Lcg(96)
    for case in range(CASES // 4):
        units, rank, mem, nin = r.int(1, 4), r.int(1, 3), r.int(1, 5), r.int(1, 6)
        f, act = units * rank, case % 3
        w = [f32r(r.int(-64, 64) / 16.0) for _ in range(f * nin)]
        t = [f32r(r.int(-64, 64) / 16.0) for _ in range(f * mem)]
        b = [f32r(r.int(-64, 64) / 8.0) for _ in range(units)]
        st = [f32r(r.int(-64, 64) / 32.0) for _ in range(f * mem)]
        slot = Slot()
        wo, to, bo = slot.add(w, "f"), slot.add(t, "f"), slot.add(b, "f")
        xo, yo, so = 0, 4 * nin, 4 * (nin + units)
        a = bytearray(4 * (nin + units + f * mem))
        af = _slot_view(a, "f32")
        for i in range(f * mem):
            af[nin + units + i] = st[i]
        for call in range(2):
            x = [f32r(r.int(-64, 64) / 16.0) for _ in range(nin)]
            for i in range(nin):
                af[i] = x[i]
            st = st[1:] + [0.0]
            for o in range(f):
                st[o * mem + mem - 1] = f32r(sum(w[o * nin + i] * x[i] for i in range(nin)))
            want = []
            for u in range(units):
                y = b[u] + sum(t[o * mem + j] * st[o * mem + j] for o in range(u * rank, (u + 1) * rank) for j in range(mem))
                y = max(y, 0.0) if act else y
                want.append(f32r(min(y, 6.0) if act == 2 else y))
            got = run_float("fsvdf", a, (slot.b,), kinds.FSVDF, [f, nin, mem, units, xo, yo, so, act, 0, wo, 0, to, 0, bo])
            close_to([got[nin + u] for u in range(units)], want, "fsvdf case %d call %d" % (case, call))
            close_to([got[nin + units + i] for i in range(f * mem)], st, "fsvdf state case %d call %d" % (case, call))


def test_float_binary_cast_act():
    """binary (min, max, div with IEEE's zeros, prelu; a fused activation; x2 from the arena or
    a tensor, repeating), cast (TFLM's: f32 to integers truncated and saturated, NaN to 0), and
    the activations hardswish, hardsigmoid, gelu and its tanh form."""
    r = Lcg(95)
    inf, nan = float("inf"), float("nan")
    for case in range(CASES // 2):
        c = r.int(1, 4)
        n = c * r.pick((1, 3, 8))
        bc = r.pick((n, c, 1))
        x1 = [f32r(r.int(-400, 400) / 64.0) for _ in range(n)]
        x2 = [f32r(r.pick((0.0, -0.0, 1.0, r.int(-400, 400) / 32.0))) for _ in range(bc)]
        for op in range(4):
            for act in (0, 1, 2, 3):  # none, relu (at most FLT_MAX), relu6, finite (+-FLT_MAX)
                src = r.int(0, 1)
                a = bytearray(4 * (2 * n + bc))
                af = _slot_view(a, "f32")
                for i in range(n):
                    af[i] = x1[i]
                for j in range(bc):
                    af[2 * n + j] = x2[j]
                slot = bytearray(array.array("f", x2))
                want = []
                for i in range(n):
                    u, v = x1[i], x2[i % bc]
                    if op == 0:
                        y = min(u, v)
                    elif op == 1:
                        y = max(u, v)
                    elif op == 2:
                        y = (u / v) if v != 0 else (nan if u == 0 else (inf if (u > 0) == (str(v)[0] != "-") else -inf))
                    else:
                        y = u if u >= 0 else u * v
                    if act in (1, 2):
                        y = max(y, 0.0) if y == y else y
                    if act == 2:
                        y = min(y, 6.0) if y == y else y
                    if act in (1, 3) and y == y:
                        y = min(max(y, -FLT_MAX), FLT_MAX)
                    want.append(f32r(y))
                got = run_float("fbinary", a, (slot,), kinds.FBINARY, [op, act, 0, 4 * n, n, bc, src, 8 * n, 0, 0])
                close_to([got[n + i] for i in range(n)], want, "binary %d %d" % (op, act))
    # cast
    vals = [0.4, -0.6, 1.5, -1.5, 127.9, 128.0, -129.0, 300.7, 40000.0, -40000.0, 3e9, -3e9, inf, -inf, nan]
    for yt, top in ((3, 127), (5, 32767), (7, 2147483647)):
        a = bytearray(4 * 2 * len(vals))
        af = _slot_view(a, "f32")
        for i, v in enumerate(vals):
            af[i] = v
        run_float("fcast", a, (), kinds.FCAST, [0, 4 * len(vals), len(vals), 1, yt])
        es = {3: 1, 5: 2, 7: 4}[yt]
        got = struct.unpack_from("<%d%s" % (len(vals), "bhi"[es // 2]), a, 4 * len(vals))
        for v, g in zip(vals, got):
            want = 0 if v != v else (top if v >= top else (-top - 1 if v <= -top - 1 else int(v)))
            assert g == want, (yt, v, g, want)
    for xt, es in ((3, 1), (5, 2), (7, 4)):
        ints = ints_of(r, 20, es) + [16777217, -16777217][:2 if es == 4 else 0]
        a = bytearray(es * len(ints) + 4 * len(ints) + 4)
        yo = (es * len(ints) + 3) // 4 * 4
        struct.pack_into("<%d%s" % (len(ints), "bhi"[es // 2]), a, 0, *ints)
        got = run_float("fcast", a, (), kinds.FCAST, [0, yo, len(ints), xt, 1])
        assert [got[yo // 4 + i] for i in range(len(ints))] == [f32r(float(v)) for v in ints], xt
    # activations: hardswish, hardsigmoid (alpha 0.25, beta 0.4), gelu, gelu (tanh)
    xs = [f32r(r.int(-700, 700) / 100.0) for _ in range(60)] + [-3.0, 3.0, 0.0, -1.6, 2.4]
    forms = {6: lambda v: v * min(6.0, max(0.0, v + 3.0)) / 6.0,
             7: lambda v: min(1.0, max(0.0, 0.25 * v + 0.4)),
             8: lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) if hasattr(math, "erf") else None,
             9: lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))}
    for fn, form in forms.items():
        if form(0.5) is None:
            continue
        a = bytearray(array.array("f", xs)) + bytearray(4 * len(xs))
        got = run_float("fact", a, (), kinds.FACT, [fn, 0, 4 * len(xs), len(xs), f32_bits_of(0.25), f32_bits_of(0.4)])
        close_to([got[len(xs) + i] for i in range(len(xs))], [f32r(form(v)) for v in xs], "act %d" % fn, 1e-5)


def test_float_unary():
    """unary (TFLite's NEG, SQRT, RSQRT, SQUARE, EXP, LOG, SIN, COS, FLOOR, CEIL, ROUND, ELU on
    float32): each function of the float32 input rounded once to float32 (rsqrt: 1 / the square
    root rounded to float32), ROUND's halves to even, the signed zeros of FLOOR and CEIL, NaN
    outside a function's domain, +-inf beyond float32's range, in place too."""
    r = Lcg(97)
    inf, nan = float("inf"), float("nan")
    xs = [f32r(r.int(-4000, 4000) / 64.0) for _ in range(40)] + [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -3.5,
                                                                   8388607.5, -8388607.5, 1e20, -1e20, 100.0, -100.0]
    xs = [f32r(v) for v in xs]

    def rnd(v):
        f = math.floor(v)
        return float(f if v - f < 0.5 or v - f == 0.5 and f % 2 == 0 else f + 1)

    def top(v):
        return inf if v > 3.4028235677973366e38 else (-inf if v < -3.4028235677973366e38 else v)

    forms = {0: lambda v: -v, 1: lambda v: math.sqrt(v) if v >= 0 else nan,
             2: lambda v: (1.0 / f32r(math.sqrt(v)) if v > 0 else (math.copysign(inf, v) if v == 0 else nan)),
             3: lambda v: top(v * v), 4: lambda v: inf if v > 88.8 else math.exp(v),
             5: lambda v: math.log(v) if v > 0 else (-inf if v == 0 else nan), 6: math.sin, 7: math.cos,
             8: lambda v: v if v == 0 or abs(v) >= 8388608 else float(math.floor(v)),
             9: lambda v: v if v == 0 or abs(v) >= 8388608 else (-0.0 if -1 < v < 0 else float(math.ceil(v))),
             10: lambda v: v if v == 0 or abs(v) >= 8388608 else rnd(v),
             11: lambda v: v if v >= 0 else math.exp(v) - 1.0}
    n = len(xs)
    for fn, form in forms.items():
        for inplace in (False, True):
            a = bytearray(array.array("f", xs)) + bytearray(4 * n)
            yo = 0 if inplace else 4 * n
            got = run_float("funary", a, (), kinds.FUNARY, [fn, 0, yo, n])
            got = [got[yo // 4 + i] for i in range(n)]
            want = [f32r(form(v)) for v in xs]
            exact = fn not in (4, 5, 6, 7, 11)
            close_to(got, want, "unary %d" % fn, 0.0 if exact else 2e-7)
            if exact:  # (signed zeros too)
                assert [math.copysign(1.0, g) for g in got] == [math.copysign(1.0, w) for w in want], fn


def test_float_compare():
    """fcompare: the six comparisons of f32 values (x2 repeating every BC2 elements), NaN
    unequal to everything, infinities and signed zeros as IEEE orders them; bytes 1 or 0."""
    inf, nan = float("inf"), float("nan")
    xs = [0.0, -0.0, 1.5, -1.5, inf, -inf, nan, 3e38, 1e-45, 2.0]
    cmps = (lambda u, v: u == v, lambda u, v: u != v, lambda u, v: u < v, lambda u, v: u <= v,
            lambda u, v: u > v, lambda u, v: u >= v)
    n = len(xs) * len(xs)
    x1 = [xs[i // len(xs)] for i in range(n)]
    for op in range(6):
        a = bytearray(array.array("f", x1 + xs)) + bytearray(n + 4)
        run_float("fcompare", a, (), kinds.FCOMPARE, [op, 0, 4 * n, 4 * (n + len(xs)), n, n, len(xs)])
        got = list(a[4 * (n + len(xs)): 4 * (n + len(xs)) + n])
        assert got == [1 if cmps[op](x1[i], xs[i % len(xs)]) else 0 for i in range(n)], op


def test_float_arith():
    """farith: squared difference ((a - b) rounded to f32, squared), floor division (floor of
    the quotient), floor modulo (fmod, plus b where the signs differ), x2 repeating every BC2
    elements."""
    inf = float("inf")
    xs = [f32r(v) for v in (7.5, -7.5, 3.0, -3.0, 0.0, 1e-3, 2.5e10, -0.75, 5.0, 1e30)]
    ds = [f32r(v) for v in (2.0, -2.0, 0.7, -0.25, 3.0, 1e-20)]
    n = len(xs) * len(ds)
    x1 = [xs[i // len(ds)] for i in range(n)]

    def fmod_floor(u, v):
        t = math.fmod(u, v)
        return t + v if t != 0 and (v < 0) != (t < 0) else t

    def floor_div(u, v):
        q = u / v  # (inf on a float32 board: 1e30 / 1e-20)
        return q if q in (inf, -inf) else float(math.floor(q))

    forms = (lambda u, v: f32r(u - v) ** 2, floor_div, fmod_floor)
    for op, form in enumerate(forms):
        a = bytearray(array.array("f", x1 + ds)) + bytearray(4 * n)
        got = run_float("farith", a, (), kinds.FARITH, [op, 0, 4 * n, 4 * (n + len(ds)), n, n, len(ds)])
        want = []
        for i in range(n):
            w = form(x1[i], ds[i % len(ds)])
            want.append(inf if w > 3.4028235677973366e38 else f32r(w))
        assert [got[n + len(ds) + i] for i in range(n)] == want, op


def test_float_resize_and_layernorm():
    """resize (bilinear f32: the four neighbours weighted by the table's d) and layernorm over
    groups at any strides (mean, variance, (x - mean) / sqrt(var + eps) gamma + beta)."""
    r = Lcg(96)
    for case in range(CASES // 4):
        h, w, c, oh, ow = r.int(1, 4), r.int(1, 4), r.int(1, 3), r.int(1, 5), r.int(1, 5)
        x = [f32r(r.int(-100, 100) / 16.0) for _ in range(h * w * c)]
        rows = [(r.int(0, h - 1), r.int(0, h - 1), f32r(r.int(-8, 16) / 16.0)) for _ in range(oh)]
        cols = [(r.int(0, w - 1), r.int(0, w - 1), f32r(r.int(-8, 16) / 16.0)) for _ in range(ow)]
        words = []
        for i0, i1, d in rows + cols:
            words += [i0, i1, f32_bits_of(d)]
        slot = bytearray(array.array("i", words))
        a = bytearray(array.array("f", x)) + bytearray(4 * oh * ow * c)
        got = run_float("fresize", a, (slot,), kinds.FRESIZE, [1, 4, 0, 4 * len(x), h, w, c, oh, ow, 0, 0])
        want = []
        for oy in range(oh):
            for ox in range(ow):
                (y0, y1, dy), (x0, x1, dx) = rows[oy], cols[ox]
                for ch in range(c):
                    v = lambda yy, xx: x[(yy * w + xx) * c + ch]  # noqa: E731
                    want.append(f32r(v(y0, x0) * (1 - dy) * (1 - dx) + v(y1, x0) * dy * (1 - dx)
                                     + v(y0, x1) * (1 - dy) * dx + v(y1, x1) * dy * dx))
        close_to([got[len(x) + i] for i in range(len(want))], want, "resize case %d" % case, 1e-5)
    for g, n, gs, es in ((3, 4, 4, 1), (4, 3, 1, 4), (1, 12, 0, 1)):
        x = [f32r(r.int(-100, 100) / 16.0) for _ in range(12)]
        gam = [f32r(r.int(1, 40) / 16.0) for _ in range(n)]
        bet = [f32r(r.int(-40, 40) / 16.0) for _ in range(n)]
        eps = 1e-3
        slot = bytearray(array.array("f", gam + bet))
        for hasb in (0, 1):
            a = bytearray(array.array("f", x)) + bytearray(48)
            got = run_float("flayernorm", a, (slot,), kinds.FLAYERNORM,
                            [0, 48, g, n, gs, es, 0, 0, hasb, 0, 4 * n, f32_bits_of(eps)])
            for gi in range(g):
                idx = [gi * gs + j * es for j in range(n)]
                mean = sum(x[i] for i in idx) / n
                var = sum((x[i] - mean) ** 2 for i in idx) / n
                for j, i in enumerate(idx):
                    want = (x[i] - mean) / math.sqrt(var + f32r(eps)) * gam[j] + (bet[j] if hasb else 0.0)
                    close_to([got[12 + i]], [f32r(want)], "layernorm %d %d" % (g, j), 1e-5)


def test_float_groupnorm():
    """groupnorm: a P,C value's channels in groups of CG consecutive channels (CG 1:
    InstanceNorm), each group over all pixels to (x - mean) / sqrt(var + eps) gamma[c] + beta[c],
    in place too; its load check refuses groups that do not divide the channels, regions past
    the arena, short tensors and a negative or non-finite eps (ContainerError)."""
    from mpy_lazy import ContainerError

    r = Lcg(97)
    for p, c, cg in ((6, 4, 2), (5, 3, 1), (1, 6, 6), (4, 6, 3), (7, 1, 1)):
        n = p * c
        x = [f32r(r.int(-100, 100) / 16.0) for _ in range(n)]
        gam = [f32r(r.int(1, 40) / 16.0) for _ in range(c)]
        bet = [f32r(r.int(-40, 40) / 16.0) for _ in range(c)]
        eps = 1e-3
        slot = bytearray(array.array("f", gam + bet))
        want = [0.0] * n
        for c0 in range(0, c, cg):
            idx = [i * c + c0 + j for i in range(p) for j in range(cg)]
            mean = sum(x[i] for i in idx) / len(idx)
            var = sum((x[i] - mean) ** 2 for i in idx) / len(idx)
            for i in idx:
                want[i] = f32r((x[i] - mean) / math.sqrt(var + f32r(eps)) * gam[i % c] + bet[i % c])
        for yo in (4 * n, 0):  # apart, in place
            fields = [0, yo, p, c, cg, 0, 0, 0, 4 * c, f32_bits_of(eps)]
            kernels.room(kinds.FGROUPNORM).check(check._Rec(record(kinds.FGROUPNORM, fields), 0, 8 * n, (slot,), None),
                                                 check._Env((slot,)))
            a = bytearray(array.array("f", x)) + bytearray(4 * n)
            got = run_float("fgroupnorm", a, (slot,), kinds.FGROUPNORM, fields)
            close_to([got[yo // 4 + i] for i in range(n)], want, "groupnorm %d %d %d" % (p, c, cg), 1e-5)
    good = [0, 96, 6, 4, 2, 0, 0, 0, 16, f32_bits_of(1e-5)]
    slot = bytearray(32)
    for i, v, field in ((4, 2, "groups"), (4, 0, "groups"), (4, 5, "groups"), (1, 100, "y"), (2, 0, "x"),
                        (3, 0, "x"), (8, 20, "bias"), (9, f32_bits_of(-1.0), "eps"),
                        (9, f32_bits_of(float("inf")), "eps")):
        fields = list(good)
        fields[i] = v
        if i == 4 and v == 2:
            fields[3] = 3  # 3 channels: 2 per group do not divide them
        e = raises(ContainerError, kernels.room(kinds.FGROUPNORM).check,
                   check._Rec(record(kinds.FGROUPNORM, fields), 0, 192, (slot,), None), check._Env((slot,)))
        assert field in str(e), (i, v, str(e))


# --- gathernd, update (ops/index.py) ------------------------------------------------------------

def test_gathernd():
    """TFLM's GATHER_ND (and EMBEDDING_LOOKUP): slice i is the SLICE elements at from_pos =
    sum(index[i ND + j] x Cj) of the params (in the arena, or a tensor), 1-, 2- or 4-byte
    elements; a from_pos outside 0..TOTAL - SLICE raises IndexError (TFLM's invoke fails)."""
    r = Lcg(93)
    for case in range(CASES):
        es, nd = r.pick((1, 2, 4)), r.int(1, 3)
        dims = [r.int(1, 4) for _ in range(nd + r.int(0, 2))]
        size = 1
        for d in dims[nd:]:
            size *= d
        cs = []
        for j in range(nd - 1, -1, -1):
            cs.insert(0, size if not cs else cs[0] * dims[j + 1])
        total = cs[0] * dims[0]
        n = r.int(0, 5)
        idx = [r.int(0, dims[j] - 1) for _ in range(n) for j in range(nd)]
        params = ints_of(r, total, es)
        in_tensor = r.chance(2)
        slot = Slot()
        ar = Arena(r, [es * n * size + 4, 4 * n * nd + 4] + ([] if in_tensor else [es * total + 4]))
        yo, io = ((o + 3) // 4 * 4 for o in ar.offsets[:2])
        ar.put(io, pack_ints(idx, 4))
        if in_tensor:
            src = [1, 0, slot.add(pack_ints(params, es), "b"), 0]
        else:
            po = (ar.offsets[2] + 3) // 4 * 4
            ar.put(po, pack_ints(params, es))
            src = [0, po, 0, 0]
        expected = list(ar.expected)
        for i in range(n):
            at = sum(idx[i * nd + j] * cs[j] for j in range(nd))
            expected[yo + es * i * size: yo + es * (i + 1) * size] = pack_ints(params[at: at + size], es)
        fields = [yo, io, n, nd, size, es, total] + (cs + [0] * 5)[:5] + src

        def build(mod, fields=fields):
            a = ar.fresh()
            return (lambda: run_record(mod, "gathernd", a, (slot.b,), kinds.GATHERND, fields)), a

        run_each(build, expected, "gathernd case %d %s" % (case, fields), ELEM_IMPLS)
        if n:  # the first slice moved just past the end, or before the start: IndexError on every path
            base, c = sum(idx[j] * cs[j] for j in range(nd - 1)), cs[nd - 1]
            for v in ((total - size - base) // c + 1, -(base // c) - 1):
                ar.put(io, pack_ints(idx[:nd - 1] + [v] + idx[nd:], 4))
                for name, mod in ELEM_IMPLS:
                    raises(IndexError, run_record, mod, "gathernd", ar.fresh(), (slot.b,), kinds.GATHERND, fields)
            ar.put(io, pack_ints(idx, 4))


def test_update():
    """TFLM's DYNAMIC_UPDATE_SLICE: y = x, then the update at the int32 starts clamped to
    0..Dj - Uj (a batch's start first when SKIP), 1-, 2- or 4-byte elements, rank 1 to 3."""
    r = Lcg(94)
    for case in range(CASES):
        es, rank, skip = r.pick((1, 2, 4)), r.int(1, 3), r.int(0, 1)
        xs = [1] * (3 - rank) + [r.int(1, 5) for _ in range(rank)]
        us = [r.int(1, d) for d in xs]
        starts = [r.pick((-3, 0, 1, 2, 7, -(1 << 31), (1 << 31) - 1)) for _ in range(rank + skip)]
        nx, nu = xs[0] * xs[1] * xs[2], us[0] * us[1] * us[2]
        x, u = ints_of(r, nx, es), ints_of(r, nu, es)
        ar = Arena(r, [es * nx + 4, es * nu + 4, 4 * len(starts) + 4, es * nx + 4])
        xo, uo, so, yo = ((o + 3) // 4 * 4 for o in ar.offsets)
        ar.put(xo, pack_ints(x, es))
        ar.put(uo, pack_ints(u, es))
        ar.put(so, pack_ints(starts, 4))
        s = [0] * (3 - rank) + [min(max(0, v), d - e) for v, d, e in zip(starts[skip:], xs[3 - rank:], us[3 - rank:])]
        want = list(x)
        for i in range(us[0]):
            for j in range(us[1]):
                for l in range(us[2]):
                    want[((s[0] + i) * xs[1] + s[1] + j) * xs[2] + s[2] + l] = u[(i * us[1] + j) * us[2] + l]
        expected = list(ar.expected)
        expected[yo: yo + es * nx] = pack_ints(want, es)
        fields = [xo, uo, so, yo, es, skip, rank] + xs + us

        def build(mod):
            a = ar.fresh()
            return (lambda: run_record(mod, "update", a, (), kinds.UPDATE, fields)), a

        run_each(build, expected, "update case %d %s" % (case, fields), ELEM_IMPLS)


def test_index_check():
    """The load-time check of a gathernd / update record passes a good one and refuses each bad
    field with one ContainerError line naming it."""
    from mpy_lazy import ContainerError

    room = kernels.room(kinds.GATHERND)
    slot = Slot()
    to = slot.add([0] * 24, "b")
    arena = 256
    # 4 slices of 3 elements from a [2, 4, 3] table: 2 components, strides 12 and 3
    cases = {kinds.GATHERND: ([0, 64, 4, 2, 3, 1, 24, 12, 3, 0, 0, 0, 1, 0, to, 0],
                              {3: (-1, "x"), 5: (0, "x"), 5.5: (6, "x"), 6: (0, "shape"), 7: (3, "dtype"),
                               8: (2, "shape"), 9: (0, "shape"), 11: (1, "shape"), 2: (250, "y"),
                               3: (250, "x"), 15: (1 << 20, "params")}),
             kinds.UPDATE: ([0, 64, 128, 160, 1, 1, 2, 1, 4, 6, 1, 2, 3],
                            {6: (3, "dtype"), 7: (2, "x"), 8: (0, "x"), 8.5: (2, "shape"), 12: (5, "shape"),
                             10: (0, "shape"), 2: (250, "x"), 4: (255, "x"), 5: (250, "y")})}
    for kind, (good, bad) in cases.items():
        room.check(check._Rec(record(kind, good), 0, arena, (slot.b,), None), check._Env((slot.b,)))
        for i, (v, field) in bad.items():
            f = list(good)
            f[int(i) - 2] = v
            if kind == kinds.UPDATE and i == 8.5:  # rank 2 with a first axis of 2
                f[7] = 2
            e = raises(ContainerError, room.check, check._Rec(record(kind, f), 0, arena, (slot.b,), None),
                       check._Env((slot.b,)))
            assert (e.field, e.tensor) == ("program", field) and "\n" not in str(e) \
                and str(e).startswith("graph line 0: %s: %s" % (kinds.word(kinds.NAMES, kind), field)), (kind, i, str(e))
