# Real third-party .tflite models against TFLite Micro, where no TFLM runs: the recurrent and
# 16x8 kernels end to end (tflite-micro's SEANet 16x8 layers, its MNIST LSTMs, its keyword model
# with SVDF and an int8 -> int16 softmax). tests/golden/tflm_<name>.mpyl is the .tflite packed as
# it is; tflm_<name>.json holds seeded inputs and TFLM's outputs for them, after a first and a
# second invoke on one interpreter (the LSTM's and SVDF's state carries over), made on the host by
# tests/golden/make_tflm_golden.py (tests/host/test_tflm_golden.py checks they are current). Every
# kernel path of the interpreter running this (CPython: pure; the unix port: viper, pure; a board:
# ulab, thumb, viper and, for small models, pure) must give TFLM's integers (floats: within float
# rounding), on the first call and on the second.
from rt_util import GOLDEN_DIR, golden, golden_json, small_board

import mpy_lazy
from mpy_lazy import kernels, model

# the pure-Python kernels on a board only for the small models (seconds per inference above)
PURE_MAX_MACS = 30000 if small_board() else 1 << 30
# floats: TFLM's float32 against ours (a board's single-precision exp and tanh included)
FLOAT_TOL = 1e-4 if small_board() else 1e-5


def _same(name, path, call, got, want):
    if want and isinstance(want[0], float):
        tol = FLOAT_TOL * max(1.0, max(abs(v) for v in want))
        bad = [i for i in range(len(want)) if abs(got[i] - want[i]) > tol]
    else:
        bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert len(got) == len(want) and not bad, \
        "%s on %s, call %d: %d of %d outputs differ from TFLM's, first at %d: %r, TFLM %r" % (
            name, path, call, len(bad), len(want), bad[0], got[bad[0]], want[bad[0]])


def check(name):
    desc = golden_json("tflm_%s.json" % name)
    ins, outs = desc["inputs"], desc["outputs"]
    # a board maps the container in place from its ROMFS image; elsewhere: its bytes
    src = GOLDEN_DIR + "/tflm_%s.mpyl" % name if small_board() else golden("tflm_%s.mpyl" % name)
    m = model.from_container(mpy_lazy.open(src))
    assert [v.size for v in m.inputs] == [len(x) for x in ins], name
    ran = []
    try:
        for path in kernels.available():
            if path == "pure" and desc["macs"] > PURE_MAX_MACS:
                continue
            kernels.use(path)
            m.reset()
            m(*ins)
            _same(name, path, 1, m.tolist(), outs[0])
            m(*ins)  # the state carried over (LSTM, SVDF): TFLM's second invoke
            _same(name, path, 2, m.tolist(), outs[-1])
            ran.append(path)
    finally:
        kernels.use()
    assert ran, name


def test_seanet_conv_16x8():
    check("seanet_conv15")


def test_seanet_transpose_conv_16x8():
    check("seanet_transpose_conv0")


def test_seanet_add_int16():
    check("seanet_add0")


def test_seanet_sub_int16_broadcast():
    check("seanet_sub1")


def test_seanet_leaky_relu_int16():
    check("seanet_leaky_relu18")


def test_seanet_quantize_int32_to_int16():
    check("seanet_quantize0")


def test_mnist_lstm_int8():
    check("mnist_lstm_int8")


def test_mnist_lstm_float():
    check("mnist_lstm_float")


def test_keyword_svdf_int16_state_softmax16():
    check("keyword_scrambled")


def test_keyword_svdf_int8_state():
    check("keyword_scrambled_8bit")
