"""The last kernels of TFLM's resolver (issue 29) against TensorFlow Lite Micro itself: float32
TRANSPOSE_CONV (strides, SAME and VALID padding, with and without a bias, every fused
activation the float kernels take). One-op .tflite models written with TFLM's own schema module,
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

from host_util import kernel_path  # noqa: E402
from test_tflite_elem import _opts, model  # noqa: E402
from test_tflite_moves import _x, on_board, tflm_tests  # noqa: E402

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


def models():
    out = {}
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


def test_the_float_cases_clamp_and_reach_every_output(cases):
    """The relu cases clamp (zeros, and relu6's 6), the outputs are not all one value."""
    y = cases[0]["tconv_s2_k2_valid_relu_f32"].want[0]
    assert (y == 0).any() and (y > 0).any()
    y = cases[0]["tconv_s3_same_relu6_f32"].want[0]
    assert (y == 0).any() and (y == 6).any() and ((y > 0) & (y < 6)).any()
