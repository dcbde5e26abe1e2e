"""The last kernels of TFLM's resolver (issue 29) against TensorFlow Lite Micro itself: float32
TRANSPOSE_CONV (strides, SAME and VALID padding, with and without a bias, every fused
activation the float kernels take); int16 PRELU (int8 alpha per channel or one value, every
alpha code, int16 inputs across their range, output scales that shift left and right, zero
points); float32 SVDF (ranks 1 to 3, memory 1 and more, no activation, relu, relu6) over a sequence of calls, its state kept from one to the next and started again by
reset(). One-op .tflite models written with TFLM's own schema module,
run by the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by
mpy-lazy on CPython (the pure kernels and the ulab path: numpy), on the MicroPython unix port
(viper, 0 bytes allocated per integer inference) and by the host reference interpreter:
integers equal, floats within float32 rounding (TFLM sums in float32 in its own order, the
unix port and CPython in 64-bit floats: FLOAT_ULPS units in the last place of the output's
largest magnitude)."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import _opts, model  # noqa: E402
from test_tflite_moves import _x, on_board, tflm_tests  # noqa: E402
from test_tflite_reduce import _record  # noqa: E402

import mpy_lazy  # noqa: E402

from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator
FLOAT_ULPS = 16  # (float32 sums in another order: measured at most 3 on TRANSPOSE_CONV, 9 on SVDF)


def tconv_f32(h, w, c, oc, k, stride, padding, act, bias):
    """TRANSPOSE_CONV of a (1, h, w, c) float32 input: k x k weights, the output size TFLite's
    converter gives for SAME (h * stride) or VALID ((h - 1) * stride + k)."""
    oh, ow = (h * stride, w * stride) if padding == S.Padding.SAME else ((h - 1) * stride + k, (w - 1) * stride + k)
    rng = np.random.default_rng(h * 7 + k + stride + act)
    wt = rng.standard_normal((oc, k, k, c)).astype(np.float32)
    tensors = [((4,), "i32", None, np.array([1, oh, ow, oc], np.int32)), ((oc, k, k, c), "f32", None, wt),
               ((1, h, w, c), "f32", None, None)]
    ins = [0, 1, 2]
    if bias:
        tensors.append(((oc,), "f32", None, rng.standard_normal(oc).astype(np.float32)))
        ins.append(3)
    tensors.append(((1, oh, ow, oc), "f32", None, None))
    opts = _opts("TransposeConvOptions", padding=padding, strideW=stride, strideH=stride, fusedActivationFunction=act)
    return model(OP.TRANSPOSE_CONV, tensors, [2], [len(tensors) - 1], ins, opts), [_x("f32", (h, w, c), 3 + k) * (4 if act == 3 else 1)]  # (relu6: past 6)


X16 = np.concatenate([np.array([-32768, -32767, -1, 0, 1, 32767, 99, 100, 101, -16384, 16383], np.int16),
                      np.linspace(-32768, 32767, 53).astype(np.int16)])  # 64 values
# (x, alpha, y) quantization: y's scale below x's (M1 > 1: a left shift), above it, zero points
PRELU16_Q = [((0.001, 0), (0.01, 0), (0.0004, 0)), ((0.002, 0), (0.003, -128), (0.005, 0)),
             ((0.0005, 100), (0.2, 5), (0.0007, -50)), ((1e-4, 0), (0.05, 0), (3e-6, 0)), ((0.001, 0), (0.01, 127), (0.002, 0))]


def prelu16(qx, qa, qy, per_channel=True):
    """x (1, 64, 256): row i holds X16[i]; alpha every int8 code, one per channel (or one value)."""
    x = np.repeat(X16, 256).reshape(1, 64, 256)
    alpha = np.arange(-128, 128).astype(np.int8) if per_channel else np.array([-77], np.int8)
    return model(OP.PRELU, [((1, 1, 64, 256), "i16", qx, None), (alpha.shape, "i8", qa, alpha),
                            ((1, 1, 64, 256), "i16", qy, None)], [0], [2], [0, 1]), [x]


def models():
    out = {}
    for i, qs in enumerate(PRELU16_Q):
        out["prelu%d_i16" % i] = prelu16(*qs)
    out["prelu_scalar_i16"] = prelu16(*PRELU16_Q[0], per_channel=False)
    for name, args in (("s1_same", (4, 5, 3, 2, 3, 1, S.Padding.SAME, 0, True)),
                       ("s2_same", (3, 4, 4, 3, 3, 2, S.Padding.SAME, 0, True)),
                       ("s2_valid", (3, 3, 2, 5, 3, 2, S.Padding.VALID, 0, False)),
                       ("s2_k2_valid_relu", (4, 3, 3, 4, 2, 2, S.Padding.VALID, 1, True)),
                       ("s3_same_relu6", (2, 3, 3, 2, 4, 3, S.Padding.SAME, 3, False)),
                       ("s1_k1_nobias", (3, 3, 6, 4, 1, 1, S.Padding.VALID, 0, False))):
        out["tconv_%s_f32" % name] = tconv_f32(*args)
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out, board = on_board(models(), str(tmp_path_factory.mktemp("tflite_kernels")), "kernels")
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


def float_error(got, want):
    """The largest |got - want| in units of the last float32 place of want's largest magnitude."""
    g, w = np.asarray(got, np.float64).reshape(-1), np.asarray(want, np.float64).reshape(-1)
    return float(np.abs(g - w).max() / np.spacing(np.float32(np.abs(w).max())))


def expect(case, got):
    assert len(got) == len(case.want), case.name
    for g, w in zip(got, case.want):
        if w.dtype.kind == "f":
            err = float_error(g, w)
            assert err <= FLOAT_ULPS, (case.name, err)
        else:
            assert np.asarray(g).reshape(-1).tolist() == w.astype(np.int64).tolist(), case.name


test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)


@pytest.mark.parametrize("name", [n for n in NAMES if "f32" in n])
def test_ulab_path_matches_tflm(cases, name):
    """The float kernels' ulab path (numpy on CPython: _nd.py) within float32 rounding too."""
    c = cases[0][name]
    with kernel_path("ulab"):
        m = mmodel.from_container(c.c)
        m(*c.inputs)
        expect(c, [m.tolist(i) for i in range(len(c.want))])


@pytest.mark.parametrize("case, field, value, words", [
    ("prelu0_i16", 2, 2, "out"), ("prelu0_i16", 3, 40000, "zero_point"), ("prelu0_i16", 4, -40000, "clamp"),
    ("prelu0_i16", 6, 1 << 30, "x"), ("prelu0_i16", 7, 1, "y"), ("prelu0_i16", 8, 300, "x"),
    ("prelu0_i16", 10, 40000, "zero_point"), ("prelu0_i16", 11, 200, "zero_point"), ("prelu0_i16", 12, -1, "m"),
    ("prelu0_i16", 15, 31, "m"), ("prelu0_i16", 17, 1 << 20, "alpha"),
])
def test_a_bad_record_field_is_refused_at_load(cases, case, field, value, words):
    """Each field of a record the kernels trust, broken in the stored program: a ContainerError
    naming the record's line and the field, before anything runs."""
    from mpy_lazy import ContainerError, kinds

    c = cases[0][case]
    with open(c.pack, "rb") as f:
        buf = bytearray(f.read())
    at = _record(buf, kinds.PRELU16)
    buf[at + 4 * field: at + 4 * field + 4] = int(value).to_bytes(4, "little", signed=True)
    with kernel_path("pure"), pytest.raises(ContainerError) as e:
        mmodel.from_container(mpy_lazy.open(bytes(buf)))
    assert e.value.field == "program" and words in str(e.value) and str(e.value).startswith("graph line "), str(e.value)


def test_an_int16_prelu_with_an_int16_alpha_is_refused(cli, tmp_path):
    """TFLM's 16x8 PRELU takes an int8 alpha (its Prepare refuses another): pack refuses it in one line."""
    x = np.zeros((1, 4, 8), np.int16)
    data = model(OP.PRELU, [((1, 4, 8), "i16", (0.001, 0), None), ((8,), "i16", (0.01, 0), np.arange(8)),
                            ((1, 4, 8), "i16", (0.001, 0), None)], [0], [2], [0, 1])
    src = tmp_path / "p.tflite"
    src.write_bytes(data)
    with pytest.raises(RuntimeError):
        tflm_ref.run(str(src), [x[0]])
    err = cli.fails("pack", str(src), "-o", str(tmp_path / "p.mpyl"))
    assert "PRELU" in err and "takes int8" in err and "\n" not in err.strip(), err


def test_the_prelu_cases_saturate_and_shift_left(cases):
    """Both ends of int16 reached; the first q set shifts left (M1 > 1), the second right."""
    from host_tools import tflm

    for name in ("prelu0_i16", "prelu3_i16"):
        y = cases[0][name].want[0]
        assert -32768 in y and 32767 in y, name
    assert len(set(cases[0]["prelu0_i16"].want[0].tolist())) > 1000
    assert tflm.prelu_params(*(q[0] for q in PRELU16_Q[0]))[1] > 0
    assert tflm.prelu_params(*(q[0] for q in PRELU16_Q[1]))[1] <= 0


def test_the_float_cases_clamp_and_reach_every_output(cases):
    """The relu cases clamp (zeros, and relu6's 6), the outputs are not all one value."""
    y = cases[0]["tconv_s2_k2_valid_relu_f32"].want[0]
    assert (y == 0).any() and (y > 0).any()
    y = cases[0]["tconv_s3_same_relu6_f32"].want[0]
    assert (y == 0).any() and (y == 6).any() and ((y > 0) & (y < 6)).any()


# --- SVDF: a sequence of calls (the state persists), TFLM's one interpreter the peer ----------

STEPS = 6
AGAIN = 2  # steps run again after reset()
# name: (input features, units, rank, memory, fused activation)
SVDF_F32 = {"svdf_r1_f32": (6, 4, 1, 5, 0), "svdf_r2_relu_f32": (5, 3, 2, 4, 1), "svdf_r3_relu6_f32": (4, 2, 3, 3, 3),
            "svdf_mem1_f32": (7, 3, 1, 1, 0), "svdf_r2_f32": (3, 5, 2, 6, 0)}


def svdf_f32(nin, units, rank, mem, act, bias=True):
    """A float32 SVDF: feature weights [F, nin], time weights [F, mem], a bias [units] (or none:
    TFLM cannot run that), the state a variable (1, F x mem)."""
    f = units * rank
    rng = np.random.default_rng(nin * 31 + units * 7 + rank + mem)
    gain = 3 if act == 3 else 1  # (relu6: past 6)
    tensors = [((1, nin), "f32", None, None), ((f, nin), "f32", None, rng.standard_normal((f, nin)) * gain),
               ((f, mem), "f32", None, rng.standard_normal((f, mem))),
               ((units,), "f32", None, rng.standard_normal(units)), ((1, f * mem), "f32", None, None),
               ((1, units), "f32", None, None)]
    data = model(OP.SVDF, tensors, [0], [5], [0, 1, 2, 3 if bias else -1, 4],
                 _opts("SVDFOptions", rank=rank, fusedActivationFunction=act))
    m = tflm_ref.read_model(data)
    m.subgraphs[0].tensors[4].isVariable = True
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    xs = [_x("f32", (1, nin), 40 + k) for k in range(STEPS)]
    return bytes(b.Output()), xs


class Sequence:
    def __init__(self, name, workdir):
        self.name = name
        data, self.xs = svdf_f32(*SVDF_F32[name])
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        self.want = [np.asarray(y).reshape(-1) for y in tflm_ref.run(self.src, self.xs)]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [x.reshape(-1).tolist() for x in self.xs]


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_svdf"))
    out = {name: Sequence(name, workdir) for name in SVDF_F32}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.inputs + ["reset"] + c.inputs[:AGAIN], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "alloc": False})
    board = Board(workdir, "svdf", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def expect_step(c, got, want):
    err = float_error(got, want)
    assert err <= FLOAT_ULPS, (c.name, err)


@pytest.mark.parametrize("name", list(SVDF_F32))
@pytest.mark.parametrize("path", ["pure", "ulab"])
def test_svdf_cpython_matches_tflm_at_every_step(sequences, name, path):
    c = sequences[0][name]
    with kernel_path(path):
        m = mmodel.from_container(c.c)
        for x, want in zip(c.inputs, c.want):
            m(x)
            expect_step(c, m.tolist(), want)
        m.reset()
        for x, want in zip(c.inputs[:AGAIN], c.want):
            m(x)
            expect_step(c, m.tolist(), want)


@pytest.mark.parametrize("name", list(SVDF_F32))
def test_svdf_micropython_matches_tflm_at_every_step(sequences, name):
    c = sequences[0][name]
    r = sequences[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert len(r["ys"]) == STEPS + AGAIN
    for got, want in zip(r["ys"], c.want + c.want[:AGAIN]):
        expect_step(c, got, want)


@pytest.mark.parametrize("name", list(SVDF_F32))
def test_svdf_host_reference_matches_tflm_at_every_step(sequences, name):
    c = sequences[0][name]
    state = {}
    for x, want in zip(c.xs, c.want):
        expect_step(c, reference.run(c.c.meta["graph"], tensors_of(c.c), x.reshape(-1), state=state)[0], want)


@pytest.mark.parametrize("field, value, words", [
    (2, 7, "rank"), (3, 0, "x"), (4, 1 << 20, "memory"), (5, 0, "out"), (6, 1 << 30, "x"), (7, 2, "y"),
    (8, -4, "state"), (9, 3, "act"), (11, 1 << 20, "weight"), (13, 4, "time"), (15, 1 << 20, "bias"),
])
def test_a_bad_svdf_record_field_is_refused_at_load(sequences, field, value, words):
    """Each field of the float svdf record, broken in the stored program: a ContainerError naming
    the record's line and the field, before anything runs."""
    from mpy_lazy import ContainerError, kinds

    with open(sequences[0]["svdf_r2_f32"].pack, "rb") as f:
        buf = bytearray(f.read())
    at = _record(buf, kinds.FSVDF)
    buf[at + 4 * field: at + 4 * field + 4] = int(value).to_bytes(4, "little", signed=True)
    with kernel_path("pure"), pytest.raises(ContainerError) as e:
        mmodel.from_container(mpy_lazy.open(bytes(buf)))
    assert e.value.field == "program" and words in str(e.value) and str(e.value).startswith("graph line "), str(e.value)


def test_the_svdf_state_changes_the_outputs(sequences):
    """TFLM's output for one input differs with what came before it (memory > 1), and the
    activations clamp where they are fused."""
    for name, c in sequences[0].items():
        again = [np.asarray(y).reshape(-1) for y in tflm_ref.run(c.src, c.xs[:1] * 2)]
        assert np.array_equal(again[0], c.want[0]), name
        if SVDF_F32[name][4] == 0:  # (no activation: nothing clamps the difference away)
            assert np.array_equal(again[0], again[1]) == (SVDF_F32[name][3] == 1), name
    ys = np.concatenate(sequences[0]["svdf_r2_relu_f32"].want)
    assert (ys == 0).any() and (ys > 0).any()
    ys = np.concatenate(sequences[0]["svdf_r3_relu6_f32"].want)
    assert (ys == 0).any() and (ys == 6).any()


def test_an_svdf_without_its_bias_is_refused(cli, tmp_path):
    """TFLM's SVDF reads its bias whatever the model says: the wheel cannot even allocate one
    without it (in a forked child, with a 16 MiB arena, it crashes), where the same model with
    its bias runs: pack refuses it in one line."""
    data, xs = svdf_f32(4, 2, 1, 3, 0, bias=False)
    assert tflm_ref._trial(svdf_f32(4, 2, 1, 3, 0)[0], 1 << 24, False, invoke=True)
    assert not tflm_ref._trial(data, 1 << 24, False, invoke=True)
    src = tmp_path / "s.tflite"
    src.write_bytes(data)
    err = cli.fails("pack", str(src), "-o", str(tmp_path / "s.mpyl"))
    assert "SVDF" in err and "five inputs" in err and "\n" not in err.strip(), err


@pytest.mark.parametrize("line, words", [
    ("svdf x=f y=y w=w t=t b=b out=2 rank=1 memory=3 act=finite", "takes none, relu or relu6"),
    ("svdf x=f y=y w=w t=t b=b out=2 rank=1 memory=3 sq=0.1,0", "sq= is for an int8 svdf"),
    ("svdf x=f y=y w=w t=t b=b out=2 rank=1 memory=3 q=0.1,0", "q= is for integer ops"),
    ("svdf x=a y=y w=w t=t b=b out=2 rank=1 memory=3 q=0.1,0 m=1,0,1,0", "int8 op needs sq="),
    ("svdf x=a y=y w=w t=t b=b out=2 rank=1 memory=3 q=0.1,0 m=1,0,1,0 sq=0.1,0 act=relu", "act= is for a float"),
    ("prelu x=h y=y w=w q=0.1,0 m=1,0,1,0", "int16 prelu needs m=M1,S1,M2,S2,ZA"),
    ("prelu x=h y=y w=w q=0.1,0 m=1,0,1,0,200", "int16 prelu needs m=M1,S1,M2,S2,ZA"),
])
def test_a_bad_description_is_refused(line, words):
    """A float svdf with the int8 keys or an activation it lacks, an int8 one without its keys
    or with act=, an int16 prelu without its two multipliers and alpha zero point: refused in
    one line, before any tensor is read."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    text = ("input y=a shape=4 dtype=i8 q=0.1,0\ninput y=f shape=4 dtype=f32\ninput y=h shape=4 dtype=i16 q=0.001,0"
            "\n%s\noutput x=y" % line)
    with pytest.raises(ContainerError) as e:
        Model(text)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
