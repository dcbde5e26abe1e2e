""".tflite models (issue 11) against TensorFlow Lite Micro itself (tests/tflm_ref.py, the
tflite_micro package's interpreter): every fixture of tests/golden/tflite/ packed with `mpy-lazy
pack`, the same seeded inputs through TFLM, through mpy-lazy on CPython (pure path) and on the
MicroPython unix port (viper, the containers in a ROMFS image): identical int8 outputs, every
element; float models within a tight tolerance. Refusals: an op outside the list, a damaged file.
The int8 lookup tables of host_tools.tflm (LOGISTIC, TANH, SOFTMAX; RELU, RELU6, LEAKY_RELU and
int8 QUANTIZE as the importer builds them) against TFLM on every input code, with one-op models
written with TFLM's own schema module."""
import importlib.util
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from conftest import ROOT  # noqa: E402
from host_tools import reference, tflm  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: fixture)

import mpy_lazy  # noqa: E402
from mpy_lazy import graph as mgraph, model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

FIXTURE_DIR = os.path.join(ROOT, "tests", "golden", "tflite")


def _fixture_names():
    spec = importlib.util.spec_from_file_location(
        "make_tflite_fixtures", os.path.join(ROOT, "tools", "make_tflite_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [n for n in mod.FIXTURES if n not in mod.REFUSED]


NAMES = _fixture_names()
BIG = ("kws_int8", "vww_int8", "resnet8_int8")  # seconds per inference on the pure path
N_TFLM = 4  # seeded inputs through TFLM and the board
SEED = 11


def fixture_path(name):
    path = os.path.join(FIXTURE_DIR, name + ".tflite")
    if not os.path.exists(path):
        pytest.skip("%s is missing (make tflite-fixtures writes it; it may be left out of git)"
                    % os.path.relpath(path, ROOT))
    return path


def flat(y):
    return np.asarray(y).reshape(-1)


def same(got, want):
    """int8 (uint8): every element equal; float: allclose, tight (float32 accumulation order only)."""
    want = flat(want)
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind in "iu":
        return got.astype(np.int64).tolist() == want.astype(np.int64).tolist()
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))


# --------------------------------------------------------------------------- one-op models

def one_op(op, in_q, out_q, n=256, options=None, types=("INT8", "INT8")):
    """A .tflite with one operator over a (1, n) tensor of `types` (input, output: int8 by
    default), written with TFLM's schema module."""
    def tensor(name, q, typ):
        t = S.TensorT()
        t.shape, t.type, t.buffer, t.name = [1, n], getattr(S.TensorType, typ), 0, name
        qp = S.QuantizationParametersT()
        qp.scale, qp.zeroPoint = [float(q[0])], [int(q[1])]
        t.quantization = qp
        return t

    m = S.ModelT()
    m.version = 3
    code = S.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op, min(op, 127), 1
    m.operatorCodes = [code]
    sg = S.SubGraphT()
    sg.tensors = [tensor("x", in_q, types[0]), tensor("y", out_q, types[1])]
    sg.inputs, sg.outputs = [0], [1]
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, [0], [1]
    if options is not None:
        o.builtinOptionsType, o.builtinOptions = options
    sg.operators = [o]
    m.subgraphs = [sg]
    m.buffers = [S.BufferT()]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


# input (scale, zero point) pairs: converter-like scales, tiny and large ones, both signs of zp
SCALES = [(0.04417487, -128), (0.1, 0), (0.01, 20), (0.5, -5), (0.0078125, 0), (0.003, -100),
          (2.0, 10), (0.0235637, -25)]
CODES = np.arange(-128, 128, dtype=np.int8)
UCODES = np.arange(256, dtype=np.uint8)
# uint8 <-> int8 QUANTIZE (a model's uint8 input or output): (uint8 side, int8 side); the first
# two are what the converter writes (one scale, zero points 128 apart: TFLM's XOR 0x80 path)
U8_Q = [((0.0078125, 128), (0.0078125, 0)), ((1 / 255, 0), (1 / 255, -128)), ((0.02, 100), (0.031, -7)),
        ((0.5, 255), (0.011, 127)), ((0.003, 3), (0.9, -128))]


def _leaky(alpha):
    o = S.LeakyReluOptionsT()
    o.alpha = alpha
    return (S.BuiltinOptions.LeakyReluOptions, o)


def _softmax():
    o = S.SoftmaxOptionsT()
    o.beta = 1.0
    return (S.BuiltinOptions.SoftmaxOptions, o)


def one_op_models():
    """name -> (.tflite bytes, inputs): each elementwise op at two input scales, every code."""
    out = {}
    for i, (s, z) in enumerate(SCALES[:3]):
        out["logistic%d" % i] = (one_op(S.BuiltinOperator.LOGISTIC, (s, z), (1 / 256, -128)), [CODES])
        out["tanh%d" % i] = (one_op(S.BuiltinOperator.TANH, (s, z), (1 / 128, 0)), [CODES])
        out["relu%d" % i] = (one_op(S.BuiltinOperator.RELU, (s, z), (s * 0.7, -128)), [CODES])
        out["relu6_%d" % i] = (one_op(S.BuiltinOperator.RELU6, (s, z), (s, z)), [CODES])
        out["leakyrelu%d" % i] = (one_op(S.BuiltinOperator.LEAKY_RELU, (s, z), (s * 0.9, z // 2 + 3),
                                         options=_leaky(0.2)), [CODES])
        out["requantize%d" % i] = (one_op(S.BuiltinOperator.QUANTIZE, (s, z), (s * 1.3, 7)), [CODES])
        rng = np.random.default_rng(i)
        rows = [CODES] + [rng.integers(-128, 128, 256, dtype=np.int16).astype(np.int8) for _ in range(2)]
        out["softmax%d" % i] = (one_op(S.BuiltinOperator.SOFTMAX, (s, z), (1 / 256, -128), options=_softmax()),
                                rows)
    for i, (qu, qi) in enumerate(U8_Q):
        out["quantize_u8_i8_%d" % i] = (one_op(S.BuiltinOperator.QUANTIZE, qu, qi, types=("UINT8", "INT8")), [UCODES])
        out["quantize_i8_u8_%d" % i] = (one_op(S.BuiltinOperator.QUANTIZE, qi, qu, types=("INT8", "UINT8")), [CODES])
    return out


# --------------------------------------------------------------------------- the board

ONE_OP_ARENA = 1 << 16  # plenty for a (1, 256) int8 op; an explicit size skips tflm_ref's probing


class Case:
    def __init__(self, name, src, xs, workdir, arena=None):
        self.name, self.src, self.xs = name, src, xs
        self.want = tflm_ref.run(src, xs, arena_size=arena)
        self.pack = os.path.join(workdir, name + ".mpyl")
        self.summary = run_cli("pack", src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.data = f.read()
        self.c = mpy_lazy.open(self.data)
        self.text = self.c.meta["graph"]
        self.int8_in = xs.dtype in (np.int8, np.uint8)  # integer codes in (int8, or uint8)

    def inputs(self):
        return [x.reshape(-1).astype(np.int64 if self.int8_in else np.float64).tolist() for x in self.xs]


@pytest.fixture(scope="module")
def tfl(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite"))
    cases = {}
    for name in NAMES:
        path = os.path.join(FIXTURE_DIR, name + ".tflite")
        if os.path.exists(path):
            cases[name] = Case(name, path, tflm_ref.sample_inputs(path, N_TFLM, seed=SEED), workdir)
    for name, (data, xs) in one_op_models().items():
        src = os.path.join(workdir, name + ".tflite")
        with open(src, "wb") as f:
            f.write(data)
        cases[name] = Case(name, src, np.stack(xs), workdir, ONE_OP_ARENA)
    jobs = []
    for case in cases.values():
        xs_path = os.path.join(workdir, case.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(case.inputs(), f)
        jobs.append({"name": os.path.basename(case.pack), "xs": xs_path, "alloc": case.int8_in})
    board = Board(workdir, "tflite", [c.pack for c in cases.values()], jobs)
    try:
        yield cases, board
    finally:
        board.stop()


def _case(tfl, name):
    cases, _ = tfl
    fixture_path(name)  # skips with the reason when the file is missing
    return cases[name]


# --------------------------------------------------------------------------- the fixtures

@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(tfl, name):
    case = _case(tfl, name)
    n = 1 if name in BIG else N_TFLM
    with kernel_path("pure"):
        m = mmodel.from_container(case.c)
        for x, want in zip(case.inputs()[:n], case.want[:n]):
            m(x)
            assert same(m.tolist(), want), (name, m.tolist(), flat(want).tolist())
    if not case.int8_in:  # float input: the default path (numpy on CPython) too
        m = mmodel.from_container(case.c)
        for x, want in zip(case.inputs(), case.want):
            m(x)
            assert same(m.tolist(), want), name
    assert len({tuple(flat(w).tolist()) for w in case.want}) > 1  # TFLM's outputs are not constant


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(tfl, name):
    case = _case(tfl, name)
    r = tfl[1].get(os.path.basename(case.pack))
    assert r["path"] == "viper"
    assert len(r["ys"]) == N_TFLM
    for got, want in zip(r["ys"], case.want):
        assert same(got, want), (name, got, flat(want).tolist())
    if case.int8_in:
        assert r["alloc"] == [0] * N_TFLM, "bytes allocated per inference: %s" % r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_reference_interpreter_matches_tflm(tfl, name):
    """host_tools.reference (what test_models.py compares ONNX int8 models with) is TFLM, too."""
    case = _case(tfl, name)
    tensors = tensors_of(case.c)
    state = {}  # (one TFLM interpreter ran the samples: a stateful model's state carries over)
    for x, want in zip(case.inputs()[:2], case.want[:2]):
        assert same(reference.run(case.text, tensors, x, state=state)[0], want), name


@pytest.mark.parametrize("name", NAMES)
def test_pack_summary(tfl, name):
    case = _case(tfl, name)
    first = case.summary.splitlines()[0]
    # e.g. "graph: 14 ops, 2656768 MACs per inference, int8; arena 16004 bytes + scratch ..."
    assert first.startswith("graph: ") and " MACs per inference" in first and "arena" in first, first
    planned = mmodel.Model(case.text).memory()
    assert "%d ops" % len(mmodel.Model(case.text).ops) in first
    assert "arena %d bytes + scratch %d bytes" % (planned["arena"], planned["scratch"]) in first, first
    m = mmodel.from_container(case.c)
    # what prepare() allocates: the plan, give or take a 1-element placeholder buffer
    assert 0 <= m.memory()["arena"] - planned["arena"] <= 8, (m.memory(), planned)
    assert "%d MACs" % m.macs() in first
    # MACs: conv/depthwise/fully connected as TFLite counts them, from TFLM's own tensor shapes
    subgraphs = []  # (a WHILE's body subgraph is unrolled: a whole number of copies of its MACs)
    for s in range(len(tflm_ref.read_model(case.src).subgraphs)):
        info = tflm_ref.tensors(case.src, s)
        macs = 0
        for o in tflm_ref.ops(case.src, s):
            if o.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
                out = info[o.outputs[0]].shape
                w = info[o.inputs[1]].shape
                per = int(np.prod(w[1:])) if o.name != "DEPTHWISE_CONV_2D" else w[1] * w[2]
                macs += int(np.prod(out)) * per
        subgraphs.append(macs)
    if len(subgraphs) == 1 or not any(subgraphs[1:]):
        assert m.macs() == subgraphs[0], (m.macs(), subgraphs)
    else:
        assert m.macs() > subgraphs[0] and (m.macs() - subgraphs[0]) % sum(subgraphs[1:]) == 0, (m.macs(), subgraphs)
    info = tflm_ref.tensors(case.src)
    assert "int8" in first or not any(t.type == "INT8" for t in info)


# --------------------------------------------------------------------------- refusals

def test_unsupported_op_is_refused(cli, tmp_path):
    """The fixture's SQUARED_DIFFERENCE (which mpy-lazy now runs: below) made HASHTABLE_LOOKUP,
    a builtin TFLM lacks: one line naming it, nothing written."""
    m = tflm_ref.read_model(fixture_path("unsupported_op"))
    codes = [c for c in m.operatorCodes if c.builtinCode == S.BuiltinOperator.SQUARED_DIFFERENCE]
    assert len(codes) == 1
    codes[0].builtinCode = codes[0].deprecatedBuiltinCode = S.BuiltinOperator.HASHTABLE_LOOKUP
    (tmp_path / "src").mkdir()
    src = _save_model(m, tmp_path / "src" / "unsupported_op.tflite")
    out = tmp_path / "u.mpyl"
    line = cli.fails("pack", src, "-o", out)
    assert "HASHTABLE_LOOKUP" in line and "unsupported_op.tflite" in line and "operator 2" in line
    assert not out.exists() and os.listdir(tmp_path) == ["src"]


def test_the_converters_squared_difference_runs_as_tflm_runs_it(tmp_path):
    """unsupported_op.tflite (TFLite's converter: two int8 FULLY_CONNECTED into an int8
    SQUARED_DIFFERENCE, once refused) packs and gives TFLM's output codes on seeded inputs."""
    src = fixture_path("unsupported_op")
    out = tmp_path / "u.mpyl"
    run_cli("pack", src, "-o", out)
    xs = tflm_ref.sample_inputs(src, 20, seed=3)
    want = tflm_ref.run(src, xs)
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(out.read_bytes()))
        for x, w in zip(xs, want):
            m(np.asarray(x).reshape(-1).tolist())
            assert m.tolist() == np.asarray(w).reshape(-1).tolist()


def test_hybrid_model_is_refused_as_tflm_refuses_it(cli, tmp_path):
    """The converter's dynamic-range mode (float activations, int8 weights): TFLM's
    FULLY_CONNECTED refuses the mix in its Prepare (the interpreter cannot be built), and pack
    says so in one line naming the operator."""
    src = fixture_path("hybrid_dynamic")
    info = tflm_ref.tensors(src)
    fc = tflm_ref.ops(src)[0]
    assert fc.name == "FULLY_CONNECTED" and info[fc.inputs[0]].type == "FLOAT32" and info[fc.inputs[1]].type == "INT8"
    with pytest.raises(RuntimeError):
        tflm_ref.run(src, tflm_ref.sample_inputs(src, 1), arena_size=1 << 16)
    out = tmp_path / "h.mpyl"
    line = cli.fails("pack", src, "-o", out)
    assert "operator 0 (FULLY_CONNECTED): hybrid model (float activations with int8 weights): TFLite Micro does " \
           "not run these either" in line, line
    assert not out.exists()


def _damaged(src, tmp_path):
    data = open(src, "rb").read()
    past_end = (len(data) + 4096).to_bytes(4, "little") + data[4:]  # root table beyond the file
    return {"truncated.tflite": data[: len(data) // 2], "header_only.tflite": data[:64],
            "root_past_end.tflite": past_end, "empty.tflite": b""}


def test_damaged_tflite_is_refused(cli, tmp_path):
    src = fixture_path("digits_cnn_int8")
    for fname, data in _damaged(src, tmp_path).items():
        path = tmp_path / fname
        path.write_bytes(data)
        out = tmp_path / (fname + ".mpyl")
        line = cli.fails("pack", path, "-o", out)
        assert fname in line, line
        assert not out.exists()


def _save_model(m, path):
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path.write_bytes(bytes(b.Output()))
    return path


def test_inconsistent_tflite_is_refused(cli, tmp_path):
    """Damage that keeps the flatbuffer valid: an operator reading a tensor that does not exist, a
    graph output no op writes, a weight buffer too short, a zero scale, a negative dimension."""
    src = fixture_path("digits_cnn_int8")

    def edit(fn):
        m = tflm_ref.read_model(src)
        fn(m, m.subgraphs[0])
        return m

    def short_weights(m, sg):
        w = sg.tensors[sg.operators[0].inputs[1]]
        m.buffers[w.buffer].data = m.buffers[w.buffer].data[:10]

    def zero_scale(m, sg):
        sg.tensors[sg.operators[0].outputs[0]].quantization.scale = [0.0]

    def f16_output(m, sg):
        sg.tensors[sg.operators[0].outputs[0]].type = S.TensorType.FLOAT16

    cases = {
        "bad_index": lambda m, sg: setattr(sg.operators[0], "inputs", [999] + list(sg.operators[0].inputs[1:])),
        "bad_output": lambda m, sg: setattr(sg, "outputs", [12345]),
        "short_weights": short_weights,
        "zero_scale": zero_scale,
        "negative_dim": lambda m, sg: setattr(sg.tensors[sg.operators[0].outputs[0]], "shape", [1, -3, 8, 8]),
        "f16_output": f16_output,
    }
    for name, fn in cases.items():
        path = _save_model(edit(fn), tmp_path / (name + ".tflite"))
        out = tmp_path / (name + ".mpyl")
        line = cli.fails("pack", path, "-o", out)
        assert name + ".tflite" in line, line
        # the operator whose tensors are damaged, by index and name (the graph's output: by its index)
        assert ("model output 0:" if name == "bad_output" else "operator 0 (CONV_2D):") in line, line
        assert not out.exists()


def _edit(src, fn):
    m = tflm_ref.read_model(src)
    fn(m, m.subgraphs[0])
    return m


def _conv(sg, k=0):
    return sg.operators[k], sg.tensors


def _float_bias_as_int32(m, sg):  # the float bias's bytes typed INT32
    op, t = _conv(sg)
    t[op.inputs[2]].type = S.TensorType.INT32


def _empty_bias(m, sg):  # a bias constant whose buffer holds nothing
    op, t = _conv(sg)
    m.buffers[t[op.inputs[2]].buffer].data = []


def _bias_is_an_activation(m, sg):  # the second conv's bias: the first pool's output
    op, t = _conv(sg, 2)
    op.inputs = [op.inputs[0], op.inputs[1], sg.operators[1].outputs[0]]


def _variable_weight(m, sg):
    op, t = _conv(sg)
    t[op.inputs[1]].isVariable = True


def _other_options(m, sg):  # CONV_2D carrying a pool's options table
    op, _ = _conv(sg)
    o = S.Pool2DOptionsT()
    o.strideW = o.strideH = o.filterWidth = o.filterHeight = 1
    op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.Pool2DOptions, o


def _negative_dim(m, sg):  # numpy's reshape reads -2 as "infer"
    op, t = _conv(sg)
    t[op.inputs[1]].shape = [8, 3, 3, -2]


def _no_batch(m, sg):
    op, t = _conv(sg)
    t[op.outputs[0]].shape = [8, 8, 8]


def _scales_without_zero_points(m, sg):
    op, t = _conv(sg)
    t[op.inputs[1]].quantization.zeroPoint = []


def _huge_weight_scale(m, sg):  # multipliers whose shift leaves TFLM's range (refused by the board)
    op, t = _conv(sg)
    t[op.inputs[1]].quantization.scale = [1e30] * len(t[op.inputs[1]].quantization.scale)


def _sparse(m, sg):
    op, t = _conv(sg)
    t[op.inputs[1]].sparsity = S.SparsityParametersT()


def _bad_activation(m, sg):
    op, _ = _conv(sg)
    op.builtinOptions.fusedActivationFunction = 5  # SIGN_BIT


def _depth_multiplier(m, sg):  # resnet/kws have depthwise ops: kws_int8
    for op in sg.operators:
        if isinstance(op.builtinOptions, S.DepthwiseConv2DOptionsT):
            op.builtinOptions.depthMultiplier = 2
            return
    raise AssertionError("no depthwise op")


def _unquantized_output(m, sg):  # TFLM reads scale 0 (its output all zeros, or an abort)
    op, t = _conv(sg)
    t[op.outputs[0]].quantization = None


def _op(sg, cls):
    for op in sg.operators:
        if isinstance(op.builtinOptions, cls):
            return op
    raise AssertionError("no %s" % cls.__name__)


def _svdf_state_transposed(m, sg):  # TFLM's Prepare takes (batch, memory x filters) only
    t = sg.tensors[_op(sg, S.SVDFOptionsT).inputs[4]]
    t.shape = list(t.shape)[::-1]


def _softmax_tiny_beta(m, sg):  # TFLM's Prepare asserts beta x scale x 2^26 > 1 (an abort)
    _op(sg, S.SoftmaxOptionsT).builtinOptions.beta = 1e-30


def _constant_input(m, sg):  # TFLM would let the caller write over a weight
    sg.inputs = list(sg.inputs) + [_conv(sg)[0].inputs[1]]


def _fc_output_depth(m, sg):  # TFLM takes the output's last dimension as its depth
    t = sg.tensors[_op(sg, S.FullyConnectedOptionsT).outputs[0]]
    t.shape = list(t.shape) + [1]


def _fc_bias_scale(m, sg):  # TFLM's Prepare: |s_x s_w - s_b| / s_y <= 0.02
    t = sg.tensors[_op(sg, S.FullyConnectedOptionsT).inputs[2]]
    t.quantization.scale = [s * 1000 for s in t.quantization.scale]


def _resize_size(m, sg):  # a size that is not the output's (huge: the packer once hung on it)
    op = _op(sg, S.ResizeBilinearOptionsT)
    m.buffers[sg.tensors[op.inputs[1]].buffer].data = np.array([1 << 30, 3], "<i4").view(np.uint8)


def _lstm_intermediate_scalar(m, sg):  # TFLM allocates no intermediate: it refuses a non-empty one
    op = _op(sg, S.UnidirectionalSequenceLSTMOptionsT)
    sg.tensors[op.intermediates[0]].shape = []


def _lstm_state_rank(m, sg):  # TFLM's Prepare: the states are (batch, units)
    t = sg.tensors[_op(sg, S.UnidirectionalSequenceLSTMOptionsT).inputs[18]]
    t.shape = [1] + list(t.shape)


def _resize_third_input(m, sg):
    op = _op(sg, S.ResizeBilinearOptionsT)
    op.inputs = list(op.inputs) + [op.inputs[0]]


def _slice_output_rank(m, sg):  # the batch dropped from the output: TFLM compares the shapes
    t = sg.tensors[_op(sg, S.StridedSliceOptionsT).outputs[0]]
    t.shape = list(t.shape)[1:]


def _quantize_output_unquantized(m, sg):  # an int16 -> int32 QUANTIZE: TFLM needs the output's scale
    sg.tensors[sg.operators[0].outputs[0]].quantization = None


def _softmax_no_options(m, sg):  # TFLM reads beta 0 (its int8 Prepare aborts)
    op = _op(sg, S.SoftmaxOptionsT)
    op.builtinOptionsType, op.builtinOptions = 0, None


def _svdf_bias_scale(m, sg):  # TFLM's Prepare: |s_bias - s_state s_time| < 1e-5
    sg.tensors[_op(sg, S.SVDFOptionsT).inputs[3]].quantization.scale = [1e30]


def _lstm_intermediate_data(m, sg):  # (TFLM crashed on it)
    sg.tensors[_op(sg, S.UnidirectionalSequenceLSTMOptionsT).intermediates[0]].buffer = len(m.buffers) + 3



def _mean_output_rank(m, sg):  # (1, 16) declared (16): TFLM's MEAN then CONCATENATION read it otherwise
    sg.tensors[_op(sg, S.ReducerOptionsT).outputs[0]].shape = [16]


def _concat_other_axis(m, sg):  # along axis 0 the output is not the one declared: TFLM copies past it
    _op(sg, S.ConcatenationOptionsT).builtinOptions.axis = 0


def _svdf_output_rank(m, sg):  # (1, 64) declared (64): TFLM's Prepare refuses it
    t = sg.tensors[_op(sg, S.SVDFOptionsT).outputs[0]]
    t.shape = list(t.shape)[1:]


def _prelu_alpha_permuted(m, sg):  # alpha (6, 6, 8) as (6, 8, 6): no broadcast, TFLM reads it anyway
    t = sg.tensors[[o for o in sg.operators if m.operatorCodes[o.opcodeIndex].builtinCode ==
                    S.BuiltinOperator.PRELU][0].inputs[1]]
    t.shape = [t.shape[0], t.shape[2], t.shape[1]]


def _int16_output_zero_point(m, sg):  # TFLM's 16x8 conv leaves it out (mpy-lazy added it: 3 apart)
    sg.tensors[sg.operators[0].outputs[0]].quantization.zeroPoint = [3]


def _dilation_beyond_int16(m, sg):  # TFLM's ConvParams hold it as int16: 65535 ran as -1
    _op(sg, S.Conv2DOptionsT).builtinOptions.dilationHFactor = 65535


def _output_with_data(m, sg):  # an op's output on a weight's buffer: TFLM reads it as that constant
    op, t = _conv(sg)
    t[op.outputs[0]].buffer = t[op.inputs[1]].buffer


def _int32_quantize_input(m, sg):  # a float model input retyped INT32: QUANTIZE needs its scale
    sg.tensors[sg.inputs[0]].type = S.TensorType.INT32


def _logistic_zero_point(m, sg):  # TFLM's Prepare wants -128 (its kernel writes q=1/256,-128)
    op = [o for o in sg.operators if m.operatorCodes[o.opcodeIndex].builtinCode == S.BuiltinOperator.LOGISTIC][0]
    sg.tensors[op.outputs[0]].quantization.zeroPoint = [3]


def _lstm_output_rank(m, sg):  # (1, 28, 20) declared (28, 20): TFLM's Prepare refuses it
    t = sg.tensors[_op(sg, S.UnidirectionalSequenceLSTMOptionsT).outputs[0]]
    t.shape = list(t.shape)[1:]


def _depthwise_no_bias(m, sg):  # TFLM's depthwise reads its bias anyway: it crashed
    op = _op(sg, S.DepthwiseConv2DOptionsT)
    op.inputs = list(op.inputs[:2]) + [-1]


def _svdf_tiny_state_scale(m, sg):  # its effective scale overflows float32: one line, no numpy warning
    sg.tensors[_op(sg, S.SVDFOptionsT).inputs[4]].quantization.scale = [1e-45]

def _state_as_model_input(m, sg):  # TFLM takes the caller's values as the LSTM's cell state
    lstm = _op(sg, S.UnidirectionalSequenceLSTMOptionsT)
    sg.inputs = list(sg.inputs) + [lstm.inputs[19]]


def _unused_tensor_buffer(m, sg):  # a tensor no op uses, its buffer index past the end: TFLM crashed
    t = S.TensorT()
    t.shape, t.type, t.buffer, t.name = [4], S.TensorType.INT32, len(m.buffers) + 5, b"unused"
    sg.tensors.append(t)


def _relu_tiny_output_scale(m, sg):  # input scale / output scale overflows float32: one line, no warning
    relu = next(op for op in sg.operators if m.operatorCodes[op.opcodeIndex].builtinCode == S.BuiltinOperator.RELU)
    sg.tensors[relu.outputs[0]].quantization.scale = [1e-45]


def _builtin_with_custom_options(m, sg):  # (found by fuzz_tflite: TFLM refuses any builtin op carrying them)
    sg.operators[0].customOptions = [1, 2, 3]


THIRDPARTY = "../thirdparty/tflite-micro/"
def _per_channel(t, dim):
    q = t.quantization
    q.scale, q.zeroPoint = [q.scale[0]] * t.shape[dim], [q.zeroPoint[0]] * t.shape[dim]
    q.quantizedDimension = dim


def _per_channel_activation(m, sg):  # an op's output with a weight's per-channel scales
    op, t = _conv(sg)
    _per_channel(t[op.outputs[0]], 3)


def _per_channel_input(m, sg):  # the model input (1, 8, 8, 1): 8 scales along its rows
    _per_channel(sg.tensors[sg.inputs[0]], 1)


MALFORMED = {  # name: (fixture, edit, words the refusal names)
    "float_bias_int32": ("digits_cnn_f32", _float_bias_as_int32, ("operator 0 (CONV_2D)", "bias", "INT32")),
    "empty_bias": ("digits_cnn_int8", _empty_bias, ("operator 0 (CONV_2D)", "no data")),
    "bias_activation": ("digits_cnn_int8", _bias_is_an_activation, ("operator 2 (CONV_2D)", "bias", "constant")),
    "variable_weight": ("digits_cnn_int8", _variable_weight, ("operator 0 (CONV_2D)", "is_variable")),
    "other_options": ("digits_cnn_int8", _other_options, ("operator 0 (CONV_2D)", "builtin_options_type", "Pool2D")),
    "negative_dim": ("digits_cnn_int8", _negative_dim, ("operator 0 (CONV_2D)", "dimension")),
    "no_batch": ("digits_cnn_int8", _no_batch, ("operator 0 (CONV_2D)", "output [8, 8, 8]", "rank")),
    "no_zero_points": ("digits_cnn_int8", _scales_without_zero_points, ("operator 0 (CONV_2D)", "zero points")),
    "huge_weight_scale": ("digits_cnn_int8", _huge_weight_scale, ("CONV_2D", "multiplier")),
    "sparse": ("digits_cnn_int8", _sparse, ("operator 0 (CONV_2D)", "sparse")),
    "sign_bit_activation": ("digits_cnn_int8", _bad_activation, ("operator 0 (CONV_2D)", "fused activation 5")),
    "depth_multiplier": ("kws_int8", _depth_multiplier, ("DEPTHWISE_CONV_2D", "depth_multiplier")),
    "unquantized_int8": ("digits_cnn_int8", _unquantized_output, ("operator 0 (CONV_2D)", "output 0",
                                                                  "without quantization")),
    "constant_input": ("digits_cnn_int8", _constant_input, ("model input 1", "constant")),
    "fc_output_depth": ("digits_mlp_int8", _fc_output_depth, ("(FULLY_CONNECTED)", "output of shape")),
    "fc_bias_scale": (THIRDPARTY + "hello_world_int8", _fc_bias_scale, ("(FULLY_CONNECTED)", "bias scale")),
    "resize_size": ("resize_int8", _resize_size, ("(RESIZE_BILINEAR)", "size 1073741824 x 3")),
    "lstm_intermediate": (THIRDPARTY + "mnist_lstm_int8", _lstm_intermediate_scalar, ("(UNIDIRECTIONAL_SEQUENCE_LSTM)",
                                                                                   "intermediate 0")),
    "lstm_state_rank": (THIRDPARTY + "mnist_lstm_int8", _lstm_state_rank, ("(UNIDIRECTIONAL_SEQUENCE_LSTM)", "state tensor")),
    "resize_inputs": ("resize_int8", _resize_third_input, ("(RESIZE_BILINEAR)", "3 inputs")),
    "slice_output_rank": (THIRDPARTY + "seanet_strided_slice0", _slice_output_rank, ("(STRIDED_SLICE)", "output of shape")),
    "quantize_output": (THIRDPARTY + "seanet_quantize1", _quantize_output_unquantized, ("(QUANTIZE)", "output 0",
                                                                                      "INT32 without quantization")),
    "softmax_no_options": (THIRDPARTY + "mnist_lstm_int8", _softmax_no_options, ("(SOFTMAX)", "no SoftmaxOptions")),
    "svdf_bias_scale": (THIRDPARTY + "keyword_scrambled", _svdf_bias_scale, ("(SVDF)", "bias scale")),
    "lstm_intermediate_buffer": (THIRDPARTY + "mnist_lstm_int8", _lstm_intermediate_data,
                                 ("(UNIDIRECTIONAL_SEQUENCE_LSTM)", "intermediate 0", "buffer")),
    "svdf_state_shape": (THIRDPARTY + "keyword_scrambled", _svdf_state_transposed, ("(SVDF)", "state of shape")),
    "softmax_tiny_beta": (THIRDPARTY + "mnist_lstm_int8", _softmax_tiny_beta, ("(SOFTMAX)", "beta")),
    "per_channel_activation": ("digits_cnn_int8", _per_channel_activation,
                               ("operator 0 (CONV_2D): output 0", "8 scales", "activation has one scale")),
    "per_channel_input": ("digits_cnn_int8", _per_channel_input,
                          ("operator 0 (CONV_2D): input 0", "8 scales", "activation has one scale")),
    "mean_output_rank": ("ops_int8", _mean_output_rank, ("(MEAN)", "output shape [16]", "computes [1, 16]")),
    "concat_other_axis": ("ops_int8", _concat_other_axis, ("(CONCATENATION)", "output shape [1, 8, 8, 16]",
                                                           "computes [2, 8, 8, 8]")),
    "svdf_output_rank": (THIRDPARTY + "keyword_scrambled", _svdf_output_rank, ("(SVDF)", "output shape [64]")),
    "prelu_alpha_shape": ("elem_f32", _prelu_alpha_permuted, ("(PRELU)", "alpha must broadcast")),
    "output_with_data": ("digits_cnn_int8", _output_with_data, ("operator 0 (CONV_2D): output 0", "has data")),
    "int32_quantize_input": ("digits_mlp_float_io", _int32_quantize_input, ("(QUANTIZE)", "input 0",
                                                                         "INT32 without quantization")),
    "logistic_zero_point": ("elem_int8", _logistic_zero_point, ("(LOGISTIC)", "output q=0.00390625,3")),
    "lstm_output_rank": (THIRDPARTY + "mnist_lstm_int8", _lstm_output_rank, ("(UNIDIRECTIONAL_SEQUENCE_LSTM)",
                                                                          "output shape [28, 20]")),
    "depthwise_no_bias": ("kws_int8", _depthwise_no_bias, ("(DEPTHWISE_CONV_2D)", "no bias")),
    "svdf_tiny_state_scale": (THIRDPARTY + "keyword_scrambled", _svdf_tiny_state_scale, ("(SVDF)",)),
    "dilation_int16": ("elem_f32", _dilation_beyond_int16, ("operator 0 (CONV_2D)", "dilation 65535", "int16")),
    "int16_zero_point": (THIRDPARTY + "seanet_conv15", _int16_output_zero_point, ("operator 0 (CONV_2D)",
                                                                                "output (tensor 3) zero point 3")),
    "state_as_model_input": (THIRDPARTY + "mnist_lstm_int8", _state_as_model_input, ("model input 1", "tensor 17",
                                                                                    "state (is_variable)")),
    "unused_tensor_buffer": ("digits_cnn_int8", _unused_tensor_buffer, ("tensor ", "buffer index", "outside")),
    "relu_tiny_output_scale": ("ops_int8", _relu_tiny_output_scale, ("(RELU)", "infinity")),
    "builtin_custom_options": ("digits_cnn_int8", _builtin_with_custom_options, ("operator 0 (CONV_2D)",
                                                                              "builtin operator with custom options")),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_fields_are_refused(cli, tmp_path, name):
    """Fields the reader once ignored or trusted (issue 21), each in a copy of a real fixture
    that stays a valid flatbuffer: refused in one line naming the operator, op and field,
    and no output written (before, each packed and gave another answer than TFLM's or failed
    only on the board)."""
    fixture, fn, words = MALFORMED[name]
    path = _save_model(_edit(fixture_path(fixture), fn), tmp_path / (name + ".tflite"))
    out = tmp_path / (name + ".mpyl")
    line = cli.fails("pack", path, "-o", out)
    assert name + ".tflite" in line, line
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()


def test_op_support_is_checked_before_tensors(cli, tmp_path):
    """A model with an op the board lacks and damaged tensors in front of it: the refusal names
    that op (its index and name), not a tensor type or an op before it."""
    m = tflm_ref.read_model(fixture_path("digits_cnn_int8"))
    sg = m.subgraphs[0]
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = S.BuiltinOperator.HASHTABLE_LOOKUP
    code.version = 1
    m.operatorCodes.append(code)
    sg.operators[3].opcodeIndex = len(m.operatorCodes) - 1
    sg.tensors[sg.operators[0].outputs[0]].type = S.TensorType.FLOAT16
    path = _save_model(m, tmp_path / "late_op.tflite")
    line = cli.fails("pack", path, "-o", tmp_path / "late_op.mpyl")
    assert "operator 3 (HASHTABLE_LOOKUP)" in line and "late_op.tflite" in line, line


@pytest.mark.parametrize("op", ["HARD_SWISH"])
def test_int16_op_the_board_lacks_is_refused_naming_it(cli, tmp_path, op):
    """An op mpy-lazy runs on float32 and int8 only, given int16 (16x8) activations (TFLM's
    HARD_SWISH takes neither; LOGISTIC, TANH, RELU, RELU6 run on int16 now: test_tflite_gaps.py):
    one line naming the operator, its type and int16, not the board's translation of it
    (before: "lut: lut takes an i8 value")."""
    m = tflm_ref.read_model(one_op(getattr(S.BuiltinOperator, op), (1 / 4096, 0), (1 / 4096, 0)))
    sg = m.subgraphs[0]
    for t in sg.tensors:
        t.type = S.TensorType.INT16
    path = _save_model(m, tmp_path / ("i16_%s.tflite" % op))
    line = cli.fails("pack", path, "-o", tmp_path / "i16.mpyl")
    assert "operator 0 (%s): int16 activations (16x8) are not supported for %s" % (op, op) in line, line
    assert "i16_%s.tflite" % op in line and "lut" not in line, line


def test_16x8_int32_bias_tflm_reads_as_int64_is_refused(cli, tmp_path):
    """TFLM's 16x8 DEPTHWISE_CONV_2D and TRANSPOSE_CONV read their bias as int64 whatever the
    tensor's type (an int32 bias: bytes past its end), so no answer is TFLM's: refused naming
    the operator, where CONV_2D and FULLY_CONNECTED (which take either) pack. A depthwise model
    built here (one DEPTHWISE_CONV_2D, 16x8), and SEANet's TRANSPOSE_CONV."""
    from test_tflite_elem import TYPES, _opts, model

    rng = np.random.default_rng(1)
    TYPES.setdefault("i64", (S.TensorType.INT64, np.int64))
    for bias in ("i64", "i32"):
        data = model(S.BuiltinOperator.DEPTHWISE_CONV_2D,
                     [((1, 4, 4, 8), "i16", (1 / 4096, 0), None),
                      ((1, 3, 3, 8), "i8", (0.01, 0), rng.integers(-127, 128, (1, 3, 3, 8))),
                      ((8,), bias, None, np.arange(8) * 1000), ((1, 4, 4, 8), "i16", (1 / 1024, 0), None)],
                     [0], [3], [0, 1, 2],
                     _opts("DepthwiseConv2DOptions", padding=0, strideW=1, strideH=1, depthMultiplier=1,
                           dilationWFactor=1, dilationHFactor=1))
        path = tmp_path / ("dw16x8_%s.tflite" % bias)
        path.write_bytes(data)
        if bias == "i64":
            cli.ok("pack", path, "-o", tmp_path / "dw.mpyl")
            continue
        line = cli.fails("pack", path, "-o", tmp_path / "dw.mpyl")
        assert "operator 0 (DEPTHWISE_CONV_2D): bias of type INT32 for INT16 activations (INT64 expected)" in line, line
    m = tflm_ref.read_model(os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro",
                                         "seanet_transpose_conv4.tflite"))
    sg = m.subgraphs[0]
    t = sg.tensors[sg.operators[0].inputs[3]]
    b = m.buffers[t.buffer]
    b.data = list(np.frombuffer(bytes(bytearray(b.data)), np.int64).astype(np.int32).tobytes())
    t.type = S.TensorType.INT32
    path = _save_model(m, tmp_path / "tconv16x8_i32.tflite")
    line = cli.fails("pack", path, "-o", tmp_path / "tc.mpyl")
    assert "operator 0 (TRANSPOSE_CONV): bias of type INT32 for INT16 activations (INT64 or INT16 expected); " \
        "TFLM reads its bytes as int64" in line, line


def test_empty_subgraph_is_refused_naming_the_file(cli, tmp_path):
    """A valid flatbuffer whose subgraph has no operators, inputs or outputs (what random damage
    of a fixture can also produce): refused, and the line names the file like every other."""
    m = tflm_ref.read_model(fixture_path("digits_cnn_int8"))
    sg = m.subgraphs[0]
    sg.operators, sg.inputs, sg.outputs = [], [], []
    path = _save_model(m, tmp_path / "no_ops.tflite")
    out = tmp_path / "no_ops.mpyl"
    line = cli.fails("pack", path, "-o", out)
    assert not out.exists()
    assert "no_ops.tflite" in line, line


def test_declared_shape_disagreeing_with_the_op_is_refused(cli, tmp_path):
    """A tensor whose declared shape is not what its operator produces: TFLM then runs another
    computation (or cannot allocate), so mpy-lazy, which recomputes shapes from the ops, would
    silently give other outputs than TFLM: pack must refuse the file."""
    src = fixture_path("digits_cnn_int8")
    x = tflm_ref.sample_inputs(src, 1, seed=0)
    for name, shape in (("wrong_width", [1, 8, 7, 8]), ("huge", [1, 100000, 100000, 8])):
        m = tflm_ref.read_model(src)
        sg = m.subgraphs[0]
        assert list(sg.tensors[sg.operators[0].outputs[0]].shape) == [1, 8, 8, 8]
        sg.tensors[sg.operators[0].outputs[0]].shape = shape
        path = _save_model(m, tmp_path / (name + ".tflite"))
        if name == "wrong_width":  # TFLM runs it, and gives another result than the intact model
            assert not np.array_equal(tflm_ref.run(path, x)[0], tflm_ref.run(src, x)[0])
        out = tmp_path / (name + ".mpyl")
        line = cli.fails("pack", path, "-o", out)
        assert name + ".tflite" in line and "operator 0 (CONV_2D)" in line, line
        assert not out.exists()


# --------------------------------------------------------------------------- int8 tables

@pytest.mark.parametrize("s,z", SCALES)
def test_logistic_and_tanh_tables_are_tflms(s, z):
    """Every input code of one-op LOGISTIC / TANH models through TFLM == the tables."""
    got = tflm_ref.run(one_op(S.BuiltinOperator.LOGISTIC, (s, z), (1 / 256, -128)), [CODES], ONE_OP_ARENA)[0]
    assert got.tolist() == tflm.logistic_table(s, z)
    got = tflm_ref.run(one_op(S.BuiltinOperator.TANH, (s, z), (1 / 128, 0)), [CODES], ONE_OP_ARENA)[0]
    assert got.tolist() == tflm.tanh_table(s, z)


def test_fixture_tables_against_tflm_intermediates(tfl):
    """ops_int8.tflite's standalone LOGISTIC, TANH, RELU, RELU6 and SOFTMAX, op by op: TFLM's
    input and output tensors (tflm_ref.intermediates) against the host tables."""
    src = fixture_path("ops_int8")
    seen = set()
    for x in tflm_ref.sample_inputs(src, 3, seed=SEED):
        vals = tflm_ref.intermediates(src, x)
        for o in tflm_ref.ops(src):
            if o.name not in ("LOGISTIC", "TANH", "RELU", "RELU6", "SOFTMAX"):
                continue
            seen.add(o.name)
            xin, yout = vals[o.inputs[0]], vals[o.outputs[0]]
            s_in, z_in = float(xin.scales[0]), int(xin.zero_points[0])
            s_out, z_out = float(yout.scales[0]), int(yout.zero_points[0])
            codes = xin.value.astype(np.int64).reshape(-1) + 128
            want = yout.value.astype(np.int64).reshape(-1)
            if o.name == "SOFTMAX":
                kv = {"q": (s_out, z_out), "t": "exp"}
                table = {"exp": np.array(tflm.softmax_table(s_in), np.int64)}
                got = reference.softmax([xin.value.astype(np.int64).reshape(xin.value.shape[1:])], kv,
                                        [(s_in, z_in)], table)
                assert flat(got).tolist() == want.tolist()
                continue
            if o.name == "LOGISTIC":
                table = tflm.logistic_table(s_in, z_in)
            elif o.name == "TANH":
                table = tflm.tanh_table(s_in, z_in)
            elif o.name == "RELU":
                table = tflm.requant_table(s_in, z_in, s_out, z_out, lo=z_out)
            else:
                six = z_in + tflm.tf_round(float(np.float32(6.0) / np.float32(s_in)))
                table = [min(max(q, z_in), min(six, 127)) for q in range(-128, 128)]
            assert np.array(table)[codes].tolist() == want.tolist(), o
    assert seen == {"LOGISTIC", "TANH", "RELU", "RELU6", "SOFTMAX"}


ONE_OP = list(one_op_models())


@pytest.mark.parametrize("name", ONE_OP)
def test_one_op_model_matches_tflm(tfl, name):
    """The importer's tables (LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU, int8 QUANTIZE, uint8 <->
    int8 QUANTIZE) and TFLM's int8 softmax (softmax_table) on every input code, CPython pure and
    the board."""
    case = tfl[0][name]
    assert [op for _, op, _ in mgraph.parse(case.text) if op not in ("input", "output")] == \
        ["softmax" if name.startswith("softmax") else "lut"]
    with kernel_path("pure"):
        m = mmodel.from_container(case.c)
        for x, want in zip(case.inputs(), case.want):
            m(x)
            assert same(m.tolist(), want), name
    r = tfl[1].get(os.path.basename(case.pack))
    assert r["path"] == "viper"
    for got, want in zip(r["ys"], case.want):
        assert same(got, want), name
    assert r["alloc"] == [0] * len(case.want)
    tensors = tensors_of(case.c)
    for x, want in zip(case.inputs(), case.want):
        assert same(reference.run(case.text, tensors, x)[0], want), name
