"""The elementwise ops, CAST and RESIZE (issue 20) against TensorFlow Lite Micro itself, one
operator at a time on every input code: one-op .tflite models written with TFLM's own schema
module, run by the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run
by mpy-lazy on CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes
allocated per inference) and by the host reference interpreter: every element equal.

- HARD_SWISH: every int8 code at converter-like and extreme scales (the importer's table is
  TFLM's int16 fixed point, host_tools.tflm.hard_swish_table);
- PRELU: every (x, alpha) code pair, alpha per channel;
- DIV: every (x1, x2) code pair. TFLM shifts an int32 right by 32 bits or more for some tiny
  quotients, undefined in C (the x86 wheel shifts by the count mod 32 and gives saturated
  values; a Cortex-M gives another answer): mpy-lazy gives the rounded quotient there, 0. Those
  pairs are found from TFLM's formula and checked to be exactly the ones that differ;
- CAST between float32, int8, int16 and int32 on edge values (saturation, NaN, wrapping);
- MINIMUM / MAXIMUM on int8, int16 and int32 against a per-channel constant;
- RESIZE_NEAREST_NEIGHBOR on int16 (the .tflite fixtures cover int8 and float32);
- float ADD, SUB, MUL, DIV that overflow: TFLite clamps to float32's range (FLT_MAX, not inf)."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference, tflm  # noqa: E402
from host_util import Board, kernel_path, run_cli, tensors_of  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

TYPES = {"f32": (S.TensorType.FLOAT32, np.float32), "i8": (S.TensorType.INT8, np.int8),
         "i16": (S.TensorType.INT16, np.int16), "i32": (S.TensorType.INT32, np.int32),
         "i64": (S.TensorType.INT64, np.int64),
         "u32": (S.TensorType.UINT32, np.uint32), "u64": (S.TensorType.UINT64, np.uint64),
         "bool": (S.TensorType.BOOL, np.bool_), "u8": (S.TensorType.UINT8, np.uint8),
         "i64": (S.TensorType.INT64, np.int64)}
CODES = np.arange(-128, 128).astype(np.int8)
ARENA = 1 << 20


def model(op, tensors, inputs, outputs, op_inputs, options=None, custom=None):
    """A one-operator .tflite: tensors [(shape, dtype, q or None, constant data or None)]; a custom
    op: custom = (its name, its options: flexbuffer bytes), op CUSTOM."""
    m = S.ModelT()
    m.version = 3
    code = S.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op, min(op, 127), 1
    if custom is not None:
        code.customCode = custom[0]
    m.operatorCodes = [code]
    m.buffers = [S.BufferT()]
    sg = S.SubGraphT()
    sg.tensors = []
    for k, (shape, dt, q, data) in enumerate(tensors):
        t = S.TensorT()
        t.shape, t.type, t.name = list(shape), TYPES[dt][0], "t%d" % k
        t.buffer = 0
        if data is not None:
            b = S.BufferT()
            b.data = list(np.asarray(data, TYPES[dt][1] if dt in TYPES else data.dtype).tobytes())
            t.buffer = len(m.buffers)
            m.buffers.append(b)
        if q is not None:
            qp = S.QuantizationParametersT()
            qp.scale, qp.zeroPoint = [float(q[0])], [int(q[1])]
            t.quantization = qp
        sg.tensors.append(t)
    sg.inputs, sg.outputs = inputs, outputs
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, op_inputs, outputs
    if options is not None:
        o.builtinOptionsType, o.builtinOptions = options
    if custom is not None:
        o.customOptions = list(custom[1])
    sg.operators = [o]
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _opts(cls, **fields):
    o = getattr(S, cls + "T")()
    for k, v in fields.items():
        setattr(o, k, v)
    return (getattr(S.BuiltinOptions, cls), o)


def hard_swish(s_in, z_in, s_out, z_out):
    return model(S.BuiltinOperator.HARD_SWISH, [((1, 256), "i8", (s_in, z_in), None),
                                                ((1, 256), "i8", (s_out, z_out), None)], [0], [1], [0]), [CODES]


def prelu(qx, qa, qy):
    """x (1, 256, 256): row i holds code i; alpha per channel: code j."""
    x = np.repeat(CODES, 256).reshape(1, 256, 256)
    return model(S.BuiltinOperator.PRELU, [((1, 1, 256, 256), "i8", qx, None), ((256,), "i8", qa, CODES),
                                           ((1, 1, 256, 256), "i8", qy, None)], [0], [2], [0, 1]), [x]


def div(q1, q2, qy):
    """Every code pair: x1 (1, 256, 256) repeats each code 256 times, x2 cycles through them."""
    tensors = [((1, 256, 256), "i8", q1, None), ((1, 256, 256), "i8", q2, None), ((1, 256, 256), "i8", qy, None)]
    data = model(S.BuiltinOperator.DIV, tensors, [0, 1], [2], [0, 1], _opts("DivOptions", fusedActivationFunction=0))
    return data, [np.repeat(CODES, 256).reshape(256, 256), np.tile(CODES, 256).reshape(256, 256)]


CAST_VALUES = {
    "f32": np.array([0.4, -0.6, 1.5, -1.5, 127.9, 128.0, -129.0, 300.7, -300.7, 32767.5, 40000.0, -40000.0, 3e9,
                     -3e9, 1e20, np.inf, -np.inf, np.nan, 2147483520.0, -2147483648.0], np.float32),
    "i8": CODES.astype(np.int8),
    "i16": np.array([-32768, -129, -128, 127, 128, 255, 256, 300, 32767], np.int16),
    "i32": np.array([-2147483648, -40000, -32769, -129, -128, 127, 128, 255, 256, 32768, 70000, 16777217,
                     2147483647], np.int32),
}


def cast(src, dst):
    x = CAST_VALUES[src]
    return model(S.BuiltinOperator.CAST, [((1, len(x)), src, None, None), ((1, len(x)), dst, None, None)],
                 [0], [1], [0]), [x]


def minmax(op, dt, q):
    """x (1, 5, 16) against a constant per channel, with ties; integers over their whole range."""
    rng = np.random.default_rng(len(dt) + op)
    info = np.iinfo(TYPES[dt][1])
    x = rng.integers(info.min, info.max, (1, 5, 16), endpoint=True).astype(TYPES[dt][1])
    c = rng.integers(info.min, info.max, 16, endpoint=True).astype(TYPES[dt][1])
    x[0, 0] = c  # ties
    x[0, 1, :2] = (info.min, info.max)
    return model(op, [((1, 5, 16), dt, q, None), ((16,), dt, q, c), ((1, 5, 16), dt, q, None)], [0], [2], [0, 1]), [x]


def resize16(align, half):
    x = np.random.default_rng(5).integers(-32768, 32768, (1, 3, 5, 2)).astype(np.int16)
    tensors = [((1, 3, 5, 2), "i16", (0.001, 0), None), ((2,), "i32", None, np.array([7, 4], np.int32)),
               ((1, 7, 4, 2), "i16", (0.001, 0), None)]
    opts = _opts("ResizeNearestNeighborOptions", alignCorners=align, halfPixelCenters=half)
    return model(S.BuiltinOperator.RESIZE_NEAREST_NEIGHBOR, tensors, [0], [2], [0, 1], opts), [x[0]]


I32 = np.array([-2147483648, -2147483647, -65536, -46341, -7, -1, 0, 1, 7, 46341, 65536, 1000000, -1000000, 12345,
                2147483647, 3], np.int32)
DIVISORS = np.array([3, -3, 7, -7, 2, -2, 1, 65536, -65536, 100, -100, 5, 11, -11, 2147483647, -2147483648], np.int32)


def arith32(op, cls):
    """Unquantized int32 ADD, SUB, MUL of two values (every pair of I32: wraparound) and DIV by a
    constant per channel (C's truncated quotient, both signs)."""
    if op == S.BuiltinOperator.DIV:
        tensors = [((4, 16), "i32", None, None), ((16,), "i32", None, DIVISORS), ((4, 16), "i32", None, None)]
        x = np.stack([I32, I32[::-1], -I32 // 3, I32 // 7]).astype(np.int32)
        return model(op, tensors, [0], [2], [0, 1], _opts(cls, fusedActivationFunction=0)), [x]
    tensors = [((16, 16), "i32", None, None)] * 3
    return model(op, tensors, [0, 1], [2], [0, 1], _opts(cls, fusedActivationFunction=0)), \
        [np.repeat(I32, 16).reshape(16, 16), np.tile(I32, 16).reshape(16, 16)]


# float overflow: TFLite's kernels clamp a fused op's output to float32's range (none: +-FLT_MAX,
# relu: 0..FLT_MAX), so an overflow (or an infinite input) gives FLT_MAX where IEEE gives inf (no
# 0 / 0: the board reports its outputs in JSON, which has no NaN)
OVERFLOW_X = (np.array([3e38, -3e38, 3e38, 1.0, 5.0, 1e30, -1e30, 2.0, 3.4e38, np.inf, -np.inf, np.nan], np.float32),
              np.array([3e38, -3e38, 0.5, 0.0, 0.0, 1e10, 1e10, -3e38, 1e-38, 1.0, 1.0, 1.0], np.float32))


def overflow(op, cls, act):
    tensors = [((1, 12), "f32", None, None)] * 3
    return model(op, tensors, [0, 1], [2], [0, 1], _opts(cls, fusedActivationFunction=act)), list(OVERFLOW_X)


# input (scale, zero point): converter-like, tiny and large, both signs of the zero point
HS_SCALES = [((0.0280652, 11), (0.0196456, -3)), ((0.1, 0), (0.19, 40)), ((0.01, 20), (0.0025, -128)),
             ((0.5, -5), (0.35, -3)), ((0.003, -100), (0.0057, 40)), ((2.0, 10), (0.5, -128)),
             ((0.0235637, -25), (0.0447710, 40)), ((0.05, -128), (0.0125, -128))]
PRELU_Q = [((0.05, -3), (0.01, 0), (0.04, -20)), ((0.02, 100), (0.003, -128), (0.05, 7)), ((0.3, 0), (0.2, 5), (0.1, 0))]
# (x1, x2, y): the second one reaches shifts of 32 and more (TFLM's undefined behaviour)
DIV_Q = [((0.034, -3), (0.0039, -128), (0.0855, 9)), ((0.05, 3), (0.02, -128), (0.5, 9)), ((0.1, 0), (0.1, 5), (0.01, -3))]


def models():
    """name -> (.tflite bytes, [one input per model input, each a single sample])."""
    out = {}
    for i, (qi, qo) in enumerate(HS_SCALES):
        out["hard_swish%d" % i] = hard_swish(qi[0], qi[1], qo[0], qo[1])
    for i, qs in enumerate(PRELU_Q):
        out["prelu%d" % i] = prelu(*qs)
    for i, qs in enumerate(DIV_Q):
        out["div%d" % i] = div(*qs)
    for src in CAST_VALUES:
        for dst in CAST_VALUES:
            if src != dst:
                out["cast_%s_%s" % (src, dst)] = cast(src, dst)
    for dt, q in (("i8", (0.02, -5)), ("i16", (0.001, 0)), ("i32", (1.0, 0))):
        out["minimum_%s" % dt] = minmax(S.BuiltinOperator.MINIMUM, dt, q)
        out["maximum_%s" % dt] = minmax(S.BuiltinOperator.MAXIMUM, dt, q)
    for name, op, cls in (("add", S.BuiltinOperator.ADD, "AddOptions"), ("sub", S.BuiltinOperator.SUB, "SubOptions"),
                          ("mul", S.BuiltinOperator.MUL, "MulOptions"), ("div", S.BuiltinOperator.DIV, "DivOptions")):
        out["i32_%s" % name] = arith32(op, cls)
    for align, half in ((False, False), (True, False), (False, True)):
        out["resize16_%d%d" % (align, half)] = resize16(align, half)
    for name, op, cls in (("add", S.BuiltinOperator.ADD, "AddOptions"), ("mul", S.BuiltinOperator.MUL, "MulOptions"),
                          ("div", S.BuiltinOperator.DIV, "DivOptions"), ("sub", S.BuiltinOperator.SUB, "SubOptions")):
        out["f32_overflow_%s" % name] = overflow(op, cls, 0)
    out["f32_overflow_add_relu"] = overflow(S.BuiltinOperator.ADD, "AddOptions", 1)
    return out


class Case:
    def __init__(self, name, data, xs, workdir):
        self.name, self.xs = name, xs
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        y = tflm_ref.run(self.src, [tuple(xs) if len(xs) > 1 else xs[0]], arena_size=ARENA)[0]
        self.want = np.asarray(y).reshape(-1)
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [np.asarray(x).reshape(-1).tolist() for x in xs]
        # the board reads its inputs as JSON, which has no NaN nor infinity: zeros there, and
        # TFLM's outputs for those inputs
        finite = [np.where(np.isfinite(x), x, 0).astype(x.dtype) if x.dtype.kind == "f" else x for x in xs]
        self.board_inputs = [np.asarray(x).reshape(-1).tolist() for x in finite]
        self.board_want = np.asarray(tflm_ref.run(self.src, [tuple(finite) if len(xs) > 1 else finite[0]],
                                                  arena_size=ARENA)[0]).reshape(-1)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_elem"))
    out = {name: Case(name, data, xs, workdir) for name, (data, xs) in models().items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([c.board_inputs], f)
        # (an f32 input or output makes float work: the 0 B promise is the integer models')
        ints = "f32" not in c.name
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": ints})
    board = Board(workdir, "elem", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


def div_undefined(name):
    """Where TFLM's DIV shifts right by 32 or more (host_tools.tflm's formula for the shift)."""
    q1, q2, qy = DIV_Q[int(name[3:])]
    _, s = tflm.div_params(q1[0], q2[0], qy[0])
    u = np.repeat(CODES, 256).astype(np.int64) - q1[1]
    v = np.tile(CODES, 256).astype(np.int64) - q2[1]
    u, v = np.where(v < 0, -u, u), np.abs(v)
    bitlen = np.array([i.bit_length() for i in range(256)])
    return 31 - bitlen[np.where(u < 0, ~u, u)] + bitlen[v] - 1 - s >= 32


def expect(case, got, want=None):
    """got equals TFLM's outputs (floats: the same value or both NaN); for DIV, where TFLM's
    shift is undefined, the rounded quotient 0 (z_y) instead."""
    got = np.asarray(got).reshape(-1)
    want = case.want if want is None else want
    if want.dtype.kind == "f":
        assert np.array_equal(got.astype(np.float32), want, equal_nan=True), case.name
        return
    if case.name.startswith("div"):
        bad = div_undefined(case.name)
        assert np.array_equal(got[~bad], want[~bad]), case.name
        assert np.all(got[bad] == DIV_Q[int(case.name[3:])][2][1]), case.name
        return
    assert got.tolist() == want.astype(np.int64).tolist(), case.name


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        m(*c.inputs)
        expect(c, m.tolist())


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    expect(c, r["ys"][0][0], c.board_want)
    if "f32" not in name:
        assert r["alloc"] == [0], r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    got = reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.array(x) for x in c.inputs])[0]
    expect(c, got)


def test_hard_swish_tables_are_tflms(cases):
    """The importer's HARD_SWISH table is the host's, on every code, at every scale pair."""
    for i, (qi, qo) in enumerate(HS_SCALES):
        assert cases[0]["hard_swish%d" % i].want.tolist() == tflm.hard_swish_table(qi[0], qi[1], qo[0], qo[1])


def test_float_overflow_gives_flt_max(cases):
    """The overflow models reach float32's largest value (else they test nothing)."""
    top = float(np.finfo(np.float32).max)
    for name, c in cases[0].items():
        if name.startswith("f32_overflow"):
            assert top in c.want.tolist(), (name, c.want)


def test_div_undefined_shifts_occur(cases):
    """The second DIV model reaches TFLM's undefined shifts (small quotients of a wide divisor):
    the wheel's values there are not the rounded quotient, mpy-lazy's are."""
    bad = div_undefined("div1")
    assert bad.sum() > 1000
    assert np.any(cases[0]["div1"].want[bad] != DIV_Q[1][2][1])
    assert not div_undefined("div0").any() and not div_undefined("div2").any()


def test_float_resize_made_int8_as_the_converter_makes_it(tmp_path):
    """resize_f32.tflite through `pack --quantize int8 --calibrate` (the samples the converter
    calibrated resize_int8.tflite on): every value's quantization the converter's (scales
    within 2 float32 ulp), bilinear resizes on TFLM's integer coordinates, and the output
    codes of all 100 samples equal to TFLM's run of the converter's model."""
    from host_util import GOLDEN
    from mpy_lazy import graph as mgraph

    d = os.path.join(GOLDEN, "tflite")
    src, conv, samples = (os.path.join(d, n) for n in ("resize_f32.tflite", "resize_int8.tflite", "resize_samples.npy"))
    for p in (src, conv, samples):
        if not os.path.exists(p):
            pytest.skip("%s is missing (make tflite-fixtures)" % os.path.basename(p))
    out = tmp_path / "r.mpyl"
    run_cli("pack", src, "-o", out, "--quantize", "int8", "--calibrate", samples, "-q")
    c = mpy_lazy.open(out.read_bytes())
    ours = [kv["q"] for _, op, kv in mgraph.parse(c.meta["graph"]) if op != "output"]
    info = tflm_ref.tensors(conv)
    first = info[tflm_ref.read_model(conv).subgraphs[0].inputs[0]]
    theirs = [(first.scales[0], first.zero_points[0])] + [
        (info[o.outputs[0]].scales[0], info[o.outputs[0]].zero_points[0]) for o in tflm_ref.ops(conv)]
    assert len(ours) == len(theirs)
    for (s, z), (s2, z2) in zip(ours, theirs):
        assert z == z2 and abs(s - s2) <= 2 * 2.0 ** -23 * s2, (s, z, s2, z2)
    xs = np.load(samples)
    s, z = ours[0]
    xi = np.clip(np.floor(xs / np.float32(s) + 0.5) + z, -128, 127).astype(np.int8)
    want = tflm_ref.run(conv, xi)
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        for x, w in zip(xi, want):
            m(bytes(x.reshape(-1)))
            assert m.tolist() == np.asarray(w).reshape(-1).tolist()
