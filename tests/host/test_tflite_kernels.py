"""The last kernels of TFLM's resolver (issue 29) against TensorFlow Lite Micro itself: float32
TRANSPOSE_CONV (strides, SAME and VALID padding, with and without a bias, every fused
activation the float kernels take); int16 PRELU (int8 alpha per channel or one value, every
alpha code, int16 inputs across their range, output scales that shift left and right, zero
points). One-op .tflite models written with TFLM's own schema module,
run by the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by
mpy-lazy on CPython (the pure kernels and the ulab path: numpy), on the MicroPython unix port
(viper, 0 bytes allocated per integer inference) and by the host reference interpreter:
integers equal, floats within float32 rounding (TFLM sums in float32 in its own order, the
unix port and CPython in 64-bit floats: FLOAT_ULPS units in the last place of the output's
largest magnitude)."""
import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_util import cli, kernel_path  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import _opts, model  # noqa: E402
from test_tflite_moves import _x, on_board, tflm_tests  # noqa: E402
from test_tflite_reduce import _record  # noqa: E402

import mpy_lazy  # noqa: E402

from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator
FLOAT_ULPS = 16  # (float32 sums of a few dozen terms in another order: measured at most 3)


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
