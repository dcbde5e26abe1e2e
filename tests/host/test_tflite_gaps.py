"""The forms of TFLite ops that kept real models of the survey (docs/SURVEY.md) from packing,
against TensorFlow Lite Micro itself, one operator at a time: one-op .tflite models written
with TFLM's own schema module, run by the tflite-micro wheel (tests/tflm_ref.py), packed with
`mpy-lazy pack` and run by mpy-lazy on CPython (the pure kernels), on the MicroPython unix port
(viper, 0 bytes allocated per integer inference) and by the host reference interpreter: every
element equal (float32: within float32's rounding).

- FULLY_CONNECTED over several rows (TFLM's batched FC: every row of the input's last
  dimension through the weights; keep_num_dims or not): openmv's FOMO detectors;
- SUB of a constant first operand (c - x; a scalar, per channel, or of the output's shape):
  the YOLO heads of Infineon's and openmv's zoos, Ambiq's rnnoise;
- CONCATENATION along an inner axis whose rows hold more than 65535 elements (the board's
  largest dimension): the SSD head of ARM's ML-zoo;
- AVERAGE_POOL_2D and MAX_POOL_2D on int16 (16x8: TFLM's integer pooling on int16 values; SAME
  and VALID padding, a fused activation, a window over the whole input): ML-zoo's int16 DS-CNN;
- ABS on int8 (every code), int16 (the edges: |-32768| saturates) and float32, rescaled or
  not (TFLM's elementwise.cc): Infineon's MobileFaceNet;
- SOFTMAX on int16 (TFLM's SoftmaxInt16: its two 513-entry interpolated tables, made at pack
  time as TFLM's LUTPopulate makes them), short and long rows, beta: ML-zoo's int16 DS-CNN;
  int8 SOFTMAX over more than 511 values (up to 4095: TFLM's Q12.19 sum), where its final shift
  stays within 31 (TFLM asserts beyond: the wheel aborts): Coral's 1001-class classifiers;
- CONV_2D with biases at int32's edges (a dead channel's -2**31: Seeed's YOLOv5): packed when
  no input can overflow TFLM's accumulator, whatever the conservative |bias| + 255 sum |w| says;
- RELU and RELU6 on int16 (TFLM's 16x8 activations: RELU rescaled, RELU6 clamping the codes);
- LOGISTIC and TANH on int16 (TFLM's: the input scaled to 3 x Q3.12, its sigmoid table
  interpolated), power-of-two input scales and others;
- GATHER of constant indices (float32, int8: TFLM's types) along any axis, with batch_dims, a
  scalar index, repeated and out-of-order indices: NXP's ShuffleNet (a channel shuffle)."""

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from test_tflite_elem import _opts, model  # noqa: E402
from test_tflite_moves import _x, on_board, one, tflm_tests  # noqa: E402
from test_thirdparty import same  # noqa: E402

from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator
Q = {"i8": (0.05, -7), "i16": (0.001, 0), "f32": None}
YQ = {"i8": (0.1, 3), "i16": (0.01, 0), "f32": None}


def _w(shape, seed, dt="i8"):
    """Weights or a constant: int8 codes over the whole range, or normal float32."""
    return _x("f32" if dt == "f32" else dt, shape, seed)


def fc(dt, xshape, n_out, keep=False, bias=True, act=0):
    """FULLY_CONNECTED of x over rows of its last dimension into n_out units."""
    n_in = xshape[-1]
    rows = int(np.prod(xshape[:-1]))
    yshape = tuple(xshape[:-1]) + (n_out,) if keep else (rows, n_out)
    wq = None if dt == "f32" else (0.02, 0)
    tensors = [(xshape, dt, Q[dt], None), ((n_out, n_in), "f32" if dt == "f32" else "i8", wq, _w((n_out, n_in), 3, "f32" if dt == "f32" else "i8"))]
    ins = [0, 1, -1]
    if bias:
        bq = None if dt == "f32" else (Q[dt][0] * wq[0], 0)
        b = _w((n_out,), 4, "f32") if dt == "f32" else np.random.default_rng(4).integers(-3000, 3000, n_out)
        tensors.append(((n_out,), "f32" if dt == "f32" else "i32", bq, b))
        ins[2] = 2
    tensors.append((yshape, dt, YQ[dt], None))
    opts = _opts("FullyConnectedOptions", keepNumDims=keep, fusedActivationFunction=act)
    data = model(OP.FULLY_CONNECTED, tensors, [0], [len(tensors) - 1], ins, opts)
    x = _x(dt, xshape, 7)
    return data, [x[0] if xshape[0] == 1 and len(xshape) > 1 else x]


def sub_rev(dt, xshape, cshape, seed=5):
    """c - x, c a constant of shape cshape (broadcast over x's)."""
    cq = None if dt == "f32" else (Q[dt][0] * 1.5, 4 if dt == "i8" else 0)
    c = _w(cshape, seed, dt)
    tensors = [(cshape, dt, cq, c), (xshape, dt, Q[dt], None), (xshape, dt, YQ[dt], None)]
    data = model(OP.SUB, tensors, [1], [2], [0, 1], _opts("SubOptions", fusedActivationFunction=0))
    x = _x(dt, xshape, 7)
    return data, [x[0] if xshape[0] == 1 and len(xshape) > 1 else x]


def pool(op, dt, padding, k, stride, act=0):
    """AVERAGE_POOL_2D / MAX_POOL_2D of x (1, 7, 9, 3) (TFLM's int16 kernels: int8's on int16)."""
    h, w = 7, 9
    if padding == 0:  # SAME
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    else:
        oh, ow = (h - k[0]) // stride[0] + 1, (w - k[1]) // stride[1] + 1
    q = Q[dt]
    tensors = [((1, h, w, 3), dt, q, None), ((1, oh, ow, 3), dt, q, None)]
    opts = _opts("Pool2DOptions", padding=padding, strideH=stride[0], strideW=stride[1], filterHeight=k[0],
                 filterWidth=k[1], fusedActivationFunction=act)
    return model(op, tensors, [0], [1], [0], opts), [_x(dt, (1, h, w, 3), 9)[0]]


def unary(op, dt, xq, yq, n=256):
    """A one-input elementwise op over n values: every int8 code, or int16 / float32 values with
    the edges."""
    if dt == "i8":
        x = np.arange(-128, 128).astype(np.int8)
    else:
        x = _x(dt, (n,), 11)
        if dt == "i16":
            x[:4] = (-32768, 32767, 0, -1)
    return model(op, [((1, len(x)), dt, xq, None), ((1, len(x)), dt, yq, None)], [0], [1], [0]), [x]


def gather(dt, xshape, idx, axis=0, batch_dims=0):
    """GATHER of x by constant int32 indices."""
    idx = np.asarray(idx, np.int32)
    a = axis % len(xshape)
    bd = batch_dims % idx.ndim if batch_dims < 0 else batch_dims
    yshape = tuple(xshape[:a]) + idx.shape[bd:] + tuple(xshape[a + 1:])
    q = Q[dt]
    tensors = [(xshape, dt, q, None), (idx.shape, "i32", None, idx), (yshape, dt, q, None)]
    data = model(OP.GATHER, tensors, [0], [2], [0, 1], _opts("GatherOptions", axis=axis, batchDims=batch_dims))
    x = _x(dt, xshape, 13)
    return data, [x[0] if xshape[0] == 1 and len(xshape) > 1 else x]


def softmax16(shape, s_in, beta=1.0, seed=17):
    """An int16 SOFTMAX (TFLM's SoftmaxInt16) over the last axis of x."""
    tensors = [(shape, "i16", (s_in, 0), None), (shape, "i16", (1.0 / 32768, 0), None)]
    data = model(OP.SOFTMAX, tensors, [0], [1], [0], _opts("SoftmaxOptions", beta=beta))
    x = _x("i16", shape, seed)
    x.reshape(-1)[:2] = (-32768, 32767)
    return data, [x[0] if shape[0] == 1 and len(shape) > 1 else x]


def conv_edge_bias(zx):
    """CONV_2D whose biases sit at int32's edges: channel 0 dead (zero weights, bias -2**31, as
    Seeed's YOLOv5 has it), channels 1 and 2 as far up and down as neither TFLM's accumulator
    (bias + sum w (x - zx), x in -128..127) nor the board's (its bias less zx sum w, then
    +- 128 sum |w|: what its load check bounds) can overflow."""
    w = _w((3, 3, 3, 3), 19).astype(np.int64)
    w[0] = 0
    per = w.reshape(3, -1)
    lo, hi = per * (-128 - zx), per * (127 - zx)
    span, total = np.abs(per).sum(axis=1), per.sum(axis=1)
    top = min(2 ** 31 - 1 - np.maximum(lo, hi)[1].sum(), 2 ** 31 - 1 - 128 * span[1] + zx * total[1])
    bottom = max(-2 ** 31 - np.minimum(lo, hi)[2].sum(), -2 ** 31 + 128 * span[2] + zx * total[2])
    b = np.array([-2 ** 31, top, bottom], np.int64)
    tensors = [((1, 5, 5, 3), "i8", (0.004, zx), None), ((3, 3, 3, 3), "i8", (0.02, 0), w.astype(np.int8)),
               ((3,), "i32", (0.004 * 0.02, 0), b.astype(np.int32)), ((1, 3, 3, 3), "i8", (2000.0, 0), None)]
    data = model(OP.CONV_2D, tensors, [0], [3], [0, 1, 2], _opts("Conv2DOptions", padding=1, strideH=1, strideW=1))
    x = _x("i8", (1, 5, 5, 3), 23)
    x[0, 0, :3] = -128  # (the extremes: the channels' accumulators reach their bounds)
    x[0, 1, :3] = 127
    return data, [x[0]]


def softmax8(n, s_in, seed=29):
    """An int8 SOFTMAX over n values (TFLM's fixed point: the sum of exps in Q12.19)."""
    tensors = [((1, n), "i8", (s_in, 0), None), ((1, n), "i8", (1.0 / 256, -128), None)]
    x = np.random.default_rng(seed).integers(-128, 128, n).astype(np.int8)
    return model(OP.SOFTMAX, tensors, [0], [1], [0], _opts("SoftmaxOptions", beta=1.0)), [x]


def models():
    out = {}
    for name, op in (("avgpool", OP.AVERAGE_POOL_2D), ("maxpool", OP.MAX_POOL_2D)):
        out["%s_same_i16" % name] = pool(op, "i16", 0, (3, 2), (2, 2))
        out["%s_valid_i16" % name] = pool(op, "i16", 1, (2, 3), (1, 2))
        out["%s_relu6_i16" % name] = pool(op, "i16", 0, (2, 2), (1, 1), act=3)
        out["%s_full_i16" % name] = pool(op, "i16", 1, (7, 9), (1, 1))
    out["softmax_i16"] = softmax16((1, 12), 0.0005)
    out["softmax_rows_i16"] = softmax16((1, 3, 4, 10), 0.002, beta=0.7)
    out["softmax_long_i16"] = softmax16((1, 1001), 0.00005)  # (Coral's ImageNet classifiers' length)
    out["softmax_flat_i16"] = softmax16((1, 2000), 1e-7)  # (every exp near 1: the largest sums)
    out["conv_edge_bias_i8"] = conv_edge_bias(-128)
    out["conv_edge_bias_zx_i8"] = conv_edge_bias(5)
    out["softmax_1001_i8"] = softmax8(1001, 0.1)  # (Coral's ImageNet classifiers: 1001 classes)
    out["softmax_4000_i8"] = softmax8(4000, 0.5)
    out["relu_i16"] = unary(OP.RELU, "i16", (0.001, 0), (0.0007, 0))
    out["relu_same_scale_i16"] = unary(OP.RELU, "i16", (0.001, 0), (0.001, 0))
    out["relu6_i16"] = unary(OP.RELU6, "i16", (0.0005, 0), (0.0005, 0))
    out["relu6_coarse_i16"] = unary(OP.RELU6, "i16", (0.01, 0), (0.01, 0))
    for name, op in (("logistic", OP.LOGISTIC), ("tanh", OP.TANH)):
        for s_in in (2.0 ** -12, 2.0 ** -11, 0.0003, 0.002, 2.0 ** -15):  # (powers of two: TFLM's special case)
            out["%s_%g_i16" % (name, s_in)] = unary(op, "i16", (s_in, 0), (1.0 / 32768, 0), n=1024)
    out["abs_i8"] = unary(OP.ABS, "i8", (0.05, -7), (0.04, -128))
    out["abs_same_scale_i8"] = unary(OP.ABS, "i8", (0.05, 5), (0.05, -128))
    out["abs_i16"] = unary(OP.ABS, "i16", (0.001, 0), (0.0007, 0))
    out["abs_same_scale_i16"] = unary(OP.ABS, "i16", (0.001, 0), (0.001, 0))
    out["abs_f32"] = unary(OP.ABS, "f32", None, None)
    shuffle = np.arange(12).reshape(2, 6).T.reshape(-1)  # (a channel shuffle: 0, 6, 1, 7, ...)
    for dt in ("i8", "f32"):  # (TFLM's GATHER takes float32 and int8)
        out["gather_channels_%s" % dt] = gather(dt, (1, 3, 4, 12), shuffle, axis=3)
        out["gather_runs_%s" % dt] = gather(dt, (1, 3, 4, 12), [4, 5, 6, 0, 1, 11, 11, 2], axis=-1)
        out["gather_rows_2d_%s" % dt] = gather(dt, (1, 5, 6), [[4, 0], [1, 1], [3, 2]], axis=1)
        out["gather_scalar_%s" % dt] = gather(dt, (7, 3), np.int32(5), axis=0)
        out["gather_batch_dims_%s" % dt] = gather(dt, (2, 5, 4), [[4, 0, 1], [2, 2, 3]], axis=1, batch_dims=1)
        out["gather_batch_dims_inner_%s" % dt] = gather(dt, (2, 3, 5), [[4, 0], [1, 2]], axis=2, batch_dims=-1)
    for dt in ("i8", "i16", "f32"):
        out["fc_rows_%s" % dt] = fc(dt, (1, 3, 3, 20), 6)
        out["fc_keep_%s" % dt] = fc(dt, (1, 3, 3, 20), 6, keep=True)
        out["fc_2d_%s" % dt] = fc(dt, (4, 20), 6, bias=dt != "i16", act=1)
        out["sub_rev_scalar_%s" % dt] = sub_rev(dt, (1, 4, 5, 3), (1,))
        out["sub_rev_channels_%s" % dt] = sub_rev(dt, (1, 4, 5, 3), (3,))
        out["sub_rev_whole_%s" % dt] = sub_rev(dt, (1, 2, 40), (1, 2, 40))
        out["concat_long_%s" % dt] = one(OP.CONCATENATION, dt, (1, 330, 100), [(1, 660, 100)], n_in=2,
                                         options=_opts("ConcatenationOptions", axis=1))
    return out


NAMES = list(models())


def expect(case, got):
    """Integers equal; float32 within float32's rounding (1e-5 of the largest output: sums in
    another order, and the unix port sums in 64 bits)."""
    want = [w.tolist() for w in case.want]
    assert same([np.asarray(g).reshape(-1).tolist() for g in got], want), case.name


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out, board = on_board(models(), str(tmp_path_factory.mktemp("tflite_gaps")), "gaps")
    try:
        yield out, board
    finally:
        board.stop()


test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)
