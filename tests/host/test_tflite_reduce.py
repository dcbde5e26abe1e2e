"""The reductions and the ops of issue 29 beside them against TensorFlow Lite Micro itself:
MEAN over any axes (not only an image's height and width) and SUM on int8, int16 and float32,
REDUCE_MAX and REDUCE_MIN on int8 and float32, REDUCE_ALL on bool, with keep_dims both ways, on 2-, 3- and 4-D
tensors; ARG_MAX and ARG_MIN (int32 indices, ties included) on int8 and float32; CUMSUM on int8
and float32 along every axis, exclusive and reverse, its int8 accumulator wrapping as TFLM's;
BATCH_MATMUL on int8, int16 (int64 sums) and float32 with adj_x / adj_y, batches, a shared
operand and a constant right-hand side; L2_NORMALIZATION on int8 and float32; LOG_SOFTMAX and
L2_POOL_2D on float32. One-op .tflite models written with TFLM's own schema module, run by the
tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by mpy-lazy on
CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes allocated per integer
inference) and by the host reference interpreter: every element equal (float32 too: TFLM's
order of float32 operations; LOG_SOFTMAX within float32 rounding of expf / logf); the forms
TFLM refuses, refused; every record field the kernels trust, checked at load."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_util import Board, cli, kernel_path  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import TYPES, _opts, model  # noqa: E402
from test_tflite_moves import Case, expect as expect_exact, tflm_tests  # noqa: E402

import mpy_lazy  # noqa: E402,F401
from host_tools import reference  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

TYPES.setdefault("bool", (S.TensorType.BOOL, np.bool_))
OP = S.BuiltinOperator
QX = {"i8": (0.05, -7), "i16": (0.001, 0), "f32": None, "bool": None}


def _x(dt, shape, seed, narrow=False):
    rng = np.random.default_rng(seed)
    if dt == "bool":  # (all_cases: true often enough that a reduction is true half the time)
        return rng.random(shape) < 0.5 ** (1 / max(1, narrow))
    if dt == "f32":
        return (rng.standard_normal(shape) * (1 if not narrow else 3)).round(1 if narrow else 7).astype(np.float32)
    info = np.iinfo(TYPES[dt][1])
    lo, hi = (-4, 4) if narrow else (info.min, info.max)  # (narrow: many ties)
    return rng.integers(lo, hi, shape, endpoint=True).astype(TYPES[dt][1])


def reducer(op, dt, shape, axes, keep, yq="same"):
    """A reduction over `axes` (TFLite's), its output q `yq` (same: the input's)."""
    axes = np.asarray(axes, np.int32)
    a = set(int(v) % len(shape) for v in axes.reshape(-1))
    yshape = [1 if d in a else s for d, s in enumerate(shape) if keep or d not in a]
    qx = QX[dt]
    tensors = [(shape, dt, qx, None), (axes.shape or (1,), "i32", None, axes),
               (yshape, dt, qx if yq == "same" else yq, None)]
    data = model(op, tensors, [0], [2], [0, 1], _opts("ReducerOptions", keepDims=keep))
    x = _x(dt, shape, 3 + len(shape) + len(a))
    return data, [x[0] if shape[0] == 1 and len(shape) > 1 else x]


def arg(op, dt, shape, axis):
    a = axis % len(shape)
    yshape = [s for d, s in enumerate(shape) if d != a]
    cls = "ArgMaxOptions" if op == OP.ARG_MAX else "ArgMinOptions"
    tensors = [(shape, dt, QX[dt], None), ((1,), "i32", None, np.asarray([axis], np.int32)),
               (yshape, "i32", None, None)]
    data = model(op, tensors, [0], [2], [0, 1], _opts(cls, outputType=S.TensorType.INT32))
    x = _x(dt, shape, 11 + a, narrow=True)
    return data, [x[0] if shape[0] == 1 and len(shape) > 1 else x]


def cumsum(dt, shape, axis, exclusive, reverse, yq):
    tensors = [(shape, dt, QX[dt], None), ((1,), "i32", None, np.asarray([axis], np.int32)), (shape, dt, yq, None)]
    data = model(OP.CUMSUM, tensors, [0], [2], [0, 1], _opts("CumsumOptions", exclusive=exclusive, reverse=reverse))
    x = _x(dt, shape, 17 + axis)
    return data, [x[0] if shape[0] == 1 and len(shape) > 1 else x]


BQ = {"i8": ((0.05, -7), (0.04, 3), (0.5, 2)), "i16": ((0.001, 0), (0.002, 0), (0.1, 0)), "f32": (None,) * 3}


def batch_matmul(dt, ls, rs, adj=(False, False), const=False):
    """lhs ls x rhs rs (TFLite shapes; rhs a constant when `const`)."""
    ql, qr, qy = BQ[dt]
    rank = max(len(ls), len(rs))
    le, re_ = [1] * (rank - len(ls)) + list(ls), [1] * (rank - len(rs)) + list(rs)
    m = le[-1] if adj[0] else le[-2]
    n = re_[-2] if adj[1] else re_[-1]
    ys = list(np.broadcast_shapes(tuple(le[:-2]), tuple(re_[:-2]))) + [m, n]
    rx = _x(dt, rs, 29)
    tensors = [(ls, dt, ql, None), (rs, dt, qr, rx if const else None), (ys, dt, qy, None)]
    data = model(OP.BATCH_MATMUL, tensors, [0] if const else [0, 1], [2], [0, 1],
                 _opts("BatchMatMulOptions", adjX=adj[0], adjY=adj[1]))
    xs = [_x(dt, ls, 23)] + ([] if const else [rx])
    return data, [x[0] if x.shape[0] == 1 and x.ndim > 1 else x for x in xs]


def rows_op(op, dt, shape, options=None, qx=None):
    tensors = [(shape, dt, qx or QX[dt], None), (shape, dt, (1 / 128, 0) if dt == "i8" else None, None)]
    data = model(op, tensors, [0], [1], [0], options)
    x = _x(dt, shape, 31) * (4 if dt == "f32" else 1)
    return data, [x[0] if shape[0] == 1 and len(shape) > 1 else x]


def l2pool(shape, k, s, padding, act):
    h, w = shape[1:3]
    oh, ow = ((h + s - 1) // s, (w + s - 1) // s) if padding == 0 else ((h - k) // s + 1, (w - k) // s + 1)
    tensors = [(shape, "f32", None, None), ((1, oh, ow, shape[3]), "f32", None, None)]
    opts = _opts("Pool2DOptions", padding=padding, strideW=s, strideH=s, filterWidth=k, filterHeight=k,
                 fusedActivationFunction=act)
    data = model(OP.L2_POOL_2D, tensors, [0], [1], [0], opts)
    return data, [_x("f32", shape, 37)[0] - 0.5]


def cases_of(dt):
    out = {}
    ops = [("mean", OP.MEAN), ("sum", OP.SUM)]
    if dt != "i16":  # (TFLM's REDUCE_MAX / REDUCE_MIN take int8 and float32)
        ops += [("max", OP.REDUCE_MAX), ("min", OP.REDUCE_MIN)]
    forms = [("hw_keep", (1, 4, 5, 6), [1, 2], True), ("c", (1, 4, 5, 6), [3], False),
             ("h", (1, 4, 5, 6), [-3], True), ("wc", (1, 4, 5, 6), [2, 3], False),
             ("all", (1, 3, 4, 5), [0, 1, 2, 3], True), ("batch", (1, 3, 4, 5), [0], False),
             ("3d", (1, 7, 6), [1], False), ("2d_rows", (4, 9), [0], False), ("2d_dup", (4, 9), [1, -1], True)]
    for name, op in ops:
        for form, shape, axes, keep in forms:
            out["%s_%s" % (name, form)] = reducer(op, dt, shape, axes, keep)
    if dt != "f32":  # another output scale: the requantization of the sums
        sy = QX[dt][0] * (3 if dt == "i8" else 40)
        out["sum_rescaled"] = reducer(OP.SUM, dt, (1, 4, 5, 6), [1, 2], False, (sy, 5 if dt == "i8" else 0))
        out["mean_rescaled"] = reducer(OP.MEAN, dt, (1, 4, 5, 6), [3], True, (QX[dt][0] / 3, -20 if dt == "i8" else 0))
    if dt != "i16":  # (TFLM's ARG_MAX / ARG_MIN take int8 and float32)
        for name, op in (("argmax", OP.ARG_MAX), ("argmin", OP.ARG_MIN)):
            for shape, axis in (((1, 4, 5, 6), 3), ((1, 4, 5, 6), 1), ((1, 4, 5, 6), -2), ((5, 7), 0), ((1, 9), 1)):
                out["%s_%dd_%d" % (name, len(shape), axis)] = arg(op, dt, shape, axis)
    if dt != "i16":  # (TFLM's CUMSUM takes int8 and float32)
        yq = None if dt == "f32" else (QX[dt][0] * 6, 3)
        for shape, axis in (((1, 4, 5, 6), 1), ((1, 4, 5, 6), 2), ((1, 4, 5, 6), -1), ((5, 7), 0), ((1, 40), 1)):
            for exclusive, reverse in ((False, False), (True, False), (False, True), (True, True)):
                out["cumsum_%dd_%d_%d%d" % (len(shape), axis, exclusive, reverse)] = cumsum(
                    dt, shape, axis, exclusive, reverse, yq)
        out["cumsum_saturated"] = cumsum(dt, (1, 4, 9), 2, False, False, QX[dt])
        data, _ = cumsum(dt, (1, 40), 1, False, False, yq and (QX[dt][0] * 64, 0))
        out["cumsum_wraps"] = (data, [np.full(40, 127, TYPES[dt][1])])  # (int8: past int32 at the 32nd)
    for name, ls, rs, adj, const in (
            ("bmm_1", (1, 4, 6), (1, 6, 5), (0, 0), 0), ("bmm_batch", (3, 4, 6), (3, 6, 5), (0, 0), 0),
            ("bmm_adj_x", (2, 6, 4), (2, 6, 5), (1, 0), 0), ("bmm_adj_y", (2, 4, 6), (2, 5, 6), (0, 1), 0),
            ("bmm_adj_xy", (2, 6, 4), (2, 5, 6), (1, 1), 0), ("bmm_2d", (4, 6), (6, 5), (0, 0), 0),
            ("bmm_rhs_shared", (1, 3, 4, 6), (6, 5), (0, 0), 0), ("bmm_lhs_shared", (4, 6), (1, 3, 6, 5), (0, 0), 0),
            ("bmm_const", (1, 4, 6), (6, 5), (0, 0), 1), ("bmm_const_adj_y_batch", (3, 4, 6), (3, 5, 6), (0, 1), 1),
            ("bmm_row", (1, 7), (7, 3), (0, 0), 1)):
        out[name] = batch_matmul(dt, ls, rs, adj, const)
    if dt == "f32":  # (TFLM's LOG_SOFTMAX, L2_NORMALIZATION take int8 too; L2_POOL_2D float32 only)
        for shape in ((1, 5, 10), (3, 7), (1, 4, 4, 6), (1, 1)):
            tag = "_".join(map(str, shape))
            out["logsoftmax_" + tag] = rows_op(OP.LOG_SOFTMAX, dt, shape)
            out["l2norm_" + tag] = rows_op(OP.L2_NORMALIZATION, dt, shape, _opts("L2NormOptions"))
        data, _ = rows_op(OP.L2_NORMALIZATION, dt, (1, 3, 4))
        out["l2norm_zeros"] = (data, [np.zeros((3, 4), np.float32)])  # (the 1e-6 floor)
        for k, s, padding, act in ((2, 2, 1, 0), (3, 2, 0, 0), (3, 1, 0, 1), (2, 3, 0, 3)):
            out["l2pool_k%ds%d%s_%d" % (k, s, "valid" if padding else "same", act)] = l2pool((1, 7, 6, 3), k, s, padding, act)
    if dt == "i8":  # int8 LOG_SOFTMAX: TFLM's output q=16/256,127; input scales wide and narrow
        for sx, shape in ((0.05, (1, 5, 10)), (0.01, (3, 40)), (0.2, (1, 4, 4, 6)), (1.0, (2, 9)), (0.003, (1, 1))):
            tensors = [(shape, dt, (sx, 3), None), (shape, dt, (16 / 256, 127), None)]
            x = _x(dt, shape, 41)
            x.reshape(-1)[:3] = (127, 127, -128)[:x.size]  # (ties at the top, the widest difference)
            out["logsoftmax_%g" % sx] = (model(OP.LOG_SOFTMAX, tensors, [0], [1], [0]),
                                        [x[0] if shape[0] == 1 and len(shape) > 1 else x])
    if dt == "i8":  # (TFLM's int8 L2_NORMALIZATION: codes of 1/128 whatever the output's q)
        for shape in ((1, 5, 10), (3, 7), (1, 4, 4, 6), (1, 1), (1, 2, 300)):
            out["l2norm_" + "_".join(map(str, shape))] = rows_op(OP.L2_NORMALIZATION, dt, shape, _opts("L2NormOptions"))
        data, _ = rows_op(OP.L2_NORMALIZATION, dt, (1, 3, 4), qx=(0.05, 3))
        out["l2norm_zeros"] = (data, [np.full((3, 4), 3, np.int8)])  # (sums 0: TFLM's INT32_MAX)
        data, _ = rows_op(OP.L2_NORMALIZATION, dt, (1, 9000), qx=(0.05, -128))
        out["l2norm_wide"] = (data, [np.full(9000, 127, np.int8)])  # (a sum past 2**29)
    if dt == "i16":  # sums past int32: TFLM's int64 accumulator (the output scale keeps them apart)
        data, _ = batch_matmul(dt, (1, 2, 6), (1, 6, 3), (0, 0), 0)
        m = tflm_ref.read_model(data)
        m.subgraphs[0].tensors[2].quantization.scale = [300.0]
        edge = np.full((2, 6), -32768, np.int16)
        edge[1, ::2] = 32767
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        out["bmm_int64"] = (bytes(b.Output()), [edge, np.full((6, 3), -32768, np.int16)])
    return {"%s_%s" % (k, dt): v for k, v in out.items()}


def all_cases():
    """REDUCE_ALL (TFLM's takes bool only) over the forms of the other reductions."""
    out = {}
    for form, shape, axes, keep in (("hw_keep", (1, 4, 5, 6), [1, 2], True), ("c", (1, 4, 5, 6), [3], False),
                                    ("h", (1, 4, 5, 6), [-3], True), ("wc", (1, 4, 3, 2), [2, 3], False),
                                    ("every", (1, 3, 4, 5), [0, 1, 2, 3], True), ("batch", (1, 3, 4, 5), [0], False),
                                    ("3d", (1, 7, 6), [1], False), ("2d_rows", (4, 9), [0], False),
                                    ("2d_dup", (4, 3), [1, -1], True)):
        data, _ = reducer(OP.REDUCE_ALL, "bool", shape, axes, keep)
        count = int(np.prod([shape[a] for a in {a % len(shape) for a in axes}]))
        x = _x("bool", shape, 43 + len(out), narrow=count)
        out["all_%s_bool" % form] = (data, [x[0] if shape[0] == 1 and len(shape) > 1 else x])
    return out


def models():
    out = {}
    for dt in ("i8", "i16", "f32"):
        out.update(cases_of(dt))
    out.update(all_cases())
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_reduce"))
    out = {name: Case(name, data, xs, workdir) for name, (data, xs) in models().items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([c.inputs], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": "f32" not in c.name})
    board = Board(workdir, "reduce", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


def expect(case, got):
    """Equal to TFLM's outputs; LOG_SOFTMAX within float32 rounding (expf and logf are each
    libm's own), a few units in the last place of the row's largest value."""
    if not case.name.startswith("logsoftmax") or case.want[0].dtype.kind != "f":
        expect_exact(case, got)
        return
    g, w = np.asarray(got[0], np.float64).reshape(-1), case.want[0].astype(np.float64)
    assert np.all(np.abs(g - w) <= 4 * np.spacing(np.float32(np.abs(w).max() + 1))), (case.name, g - w)


test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)


def test_the_cases_reach_ties_and_saturation(cases):
    """The arg models have ties (the first index wins), the int8 sums saturate somewhere."""
    tied = 0
    for name, c in cases[0].items():
        if name.startswith("argmax") and "f32" not in name:
            x = np.asarray(c.xs[0])
            tied += int((x == x.max()).sum() > 1)
    assert tied
    assert 127 in cases[0]["sum_c_i8"].want[0].tolist()
    assert {-128, 127} & set(cases[0]["cumsum_saturated_i8"].want[0].tolist())
    y = cases[0]["bmm_int64_i16"].want[0].tolist()  # 6 x 2**30 / (300 / 2e-6), and 0
    assert y == [round(6 * 2 ** 30 * 2e-6 / 300)] * 3 + [round(-2 ** 15 * (32767 - 32768) * 3 * 2e-6 / 300)] * 3, y
    for name, c in cases[0].items():
        if name.startswith("bmm") and "f32" not in name and "int64" not in name:  # (not only the ends)
            assert len(set(c.want[0].tolist())) > 2, name
    wraps = cases[0]["cumsum_wraps_i8"].want[0].tolist()  # (TFLM's int32 accumulator wraps)
    assert 0 < wraps[29] < 127 and wraps[30] < 0, wraps
    for name, c in cases[0].items():  # (REDUCE_ALL: true and false, but over every element)
        if name.startswith("all_") and "every" not in name:
            assert set(c.want[0].astype(int).tolist()) == {0, 1}, name


def test_general_mean_takes_the_reduce_kind(cases):
    """MEAN over the channels becomes the reduce record (kind 72), over H and W the old mean
    (kind 8): stored programs of the old kind keep their layout."""
    from mpy_lazy import graph as mgraph

    ops = [op for _, op, _ in mgraph.parse(cases[0]["mean_c_i8"].c.meta["graph"])]
    assert "reduce" in ops and "mean" not in ops
    ops = [op for _, op, _ in mgraph.parse(cases[0]["mean_hw_keep_i8"].c.meta["graph"])]
    assert "mean" in ops and "reduce" not in ops


def _with(data, **fields):
    m = tflm_ref.read_model(data)
    for k, v in fields.items():
        setattr(m.subgraphs[0].tensors[int(k[1:])], "type", v)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _with_q(data, t, zp):
    m = tflm_ref.read_model(data)
    if m.subgraphs[0].tensors[t].quantization is None:
        m.subgraphs[0].tensors[t].quantization = S.QuantizationParametersT()
        m.subgraphs[0].tensors[t].quantization.scale = [1.0]
    m.subgraphs[0].tensors[t].quantization.zeroPoint = [zp]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _const_lhs():
    """BATCH_MATMUL of a constant lhs and an activation rhs."""
    tensors = [((4, 6), "i8", BQ["i8"][0], _x("i8", (4, 6), 1)), ((6, 5), "i8", BQ["i8"][1], None),
               ((4, 5), "i8", BQ["i8"][2], None)]
    return model(OP.BATCH_MATMUL, tensors, [1], [2], [0, 1], _opts("BatchMatMulOptions", adjX=False, adjY=False))


@pytest.mark.parametrize("dt", ["i8", "f32"])
def test_a_reduction_to_a_scalar_runs(tmp_path, dt):
    """SUM over every axis without keep_dims: a scalar output (shape []), one value on the board,
    TFLM's on CPython's pure kernels and in the host reference."""
    from host_util import run_cli, tensors_of

    data, xs = reducer(OP.SUM, dt, (4, 6), [0, 1], False)
    src, out = tmp_path / "sum.tflite", tmp_path / "sum.mpyl"
    src.write_bytes(data)
    want = np.asarray(tflm_ref.run(str(src), [xs[0]])[0]).reshape(-1)
    run_cli("pack", src, "-o", out)
    c = mpy_lazy.open(out.read_bytes())
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        m(np.asarray(xs[0]).reshape(-1).tolist())
        assert np.asarray(m.tolist(), want.dtype).tolist() == want.tolist()
    got = reference.run(c.meta["graph"], tensors_of(c), np.asarray(xs[0]).reshape(-1))[0]
    assert np.asarray(got, want.dtype).reshape(-1).tolist() == want.tolist()


@pytest.mark.parametrize("op", [OP.REDUCE_MAX, OP.REDUCE_MIN])
def test_tflm_refuses_int16_max_and_min(tmp_path, op):
    """TFLM's REDUCE_MAX / REDUCE_MIN take int8 and float32 only (reduce_common.cc: "Only float32
    and int8 types are supported"), with one quantization or another: tools/op_table.py's TFLM
    column says so, and pack refuses them (test_refusals)."""
    for yq in ("same", (0.002, 0)):
        data, xs = reducer(op, "i16", (1, 4, 6), [1], False, yq)
        src = tmp_path / "m.tflite"
        src.write_bytes(data)
        with pytest.raises(RuntimeError):
            tflm_ref.run(str(src), [xs[0]])


def test_refusals(cli, tmp_path):
    """What TFLM refuses (or the board cannot hold), refused in one line naming the op."""
    bad = {
        "max_i16": (reducer(OP.REDUCE_MAX, "i16", (1, 4, 6), [1], False)[0], "int16"),
        "max_requant": (reducer(OP.REDUCE_MAX, "i8", (1, 4, 6), [1], False, (0.1, 0))[0], "one quantization"),
        "argmax_i64": (_with(arg(OP.ARG_MAX, "i8", (1, 4, 6), 1)[0], t2=S.TensorType.INT64), "INT64"),
        "argmin_i8": (_with_q(_with(arg(OP.ARG_MIN, "i8", (1, 4, 6), 1)[0], t2=S.TensorType.INT8), 2, 0),
                      "int32 indices"),
        "bmm_const_lhs": (_const_lhs(), "constant left-hand side"),
        "bmm_i16_zero_point": (_with_q(batch_matmul("i16", (1, 4, 6), (1, 6, 5))[0], 1, 5), "zero points"),
        "cumsum_i16": (cumsum("i16", (1, 4, 6), 1, False, False, QX["i16"])[0], "int16"),
        "all_i8": (reducer(OP.REDUCE_ALL, "i8", (1, 4, 6), [1], False)[0], "takes bool"),
        "sum_bool": (reducer(OP.SUM, "bool", (1, 4, 6), [1], False)[0], "bool tensors"),
    }
    for name, (data, words) in bad.items():
        p = tmp_path / (name + ".tflite")
        p.write_bytes(data)
        err = cli.fails("pack", str(p), "-o", str(tmp_path / (name + ".mpyl")))
        assert words in err and "\n" not in err.strip(), (name, err)


def _record(buf, kind):
    """(byte offset of the program's first record of `kind` in buf, the program's words)."""
    c = mpy_lazy.open(bytes(buf))
    prog = bytes(c.view("graph.program").mv)
    at = bytes(buf).find(prog)
    P = np.frombuffer(prog, "<i4")
    k = P[6]
    while P[k] & 255 != kind:
        k += P[k + 1]
    return at + 4 * k


@pytest.mark.parametrize("case, field, value, words", [
    ("sum_c_i8", 6, 5, "fn"), ("sum_c_i8", 7, 4, "dtype"), ("sum_c_i8", 13, 8, "axes"),
    ("sum_c_i8", 10, 0, "x"), ("sum_c_i8", 10, 9999, "x"), ("sum_c_i8", 17, 31, "m"),
    ("sum_c_i8", 14, 300, "zero_point"), ("sum_c_i8", 15, -4, "scratch"), ("sum_c_i8", 9, 1 << 30, "y"),
    ("argmax_4d_3_i8", 13, 3, "axes"), ("sum_c_i16", 12, 40000, "x"),
    ("sum_c_f32", 2, 6, "fn"), ("argmin_2d_0_f32", 8, 6, "axes"), ("mean_c_f32", 4, -8, "y"),
    ("cumsum_2d_0_00_i8", 11, 4, "flags"), ("cumsum_2d_0_00_i8", 15, 1, "m"), ("cumsum_2d_0_00_i8", 9, 1 << 20, "x"),
    ("cumsum_2d_0_00_i8", 13, 2, "scratch"), ("cumsum_2d_0_00_f32", 5, 0, "x"), ("cumsum_2d_0_00_f32", 3, 1, "y"),
    ("bmm_batch_i8", 15, 200, "x"), ("bmm_batch_i8", 17, 16, "flags"), ("bmm_batch_i8", 6, 4, "dtype"),
    ("bmm_batch_i8", 8, 1, "weight"), ("bmm_const_i8", 11, 4, "weight"), ("bmm_batch_i16", 18, 1, "zero_point"),
    ("bmm_batch_i16", 21, 40, "m"), ("bmm_batch_f32", 13, -4, "scratch"), ("bmm_const_f32", 10, 7, "weight"),
    ("l2norm_3_7_f32", 2, 3, "fn"), ("l2norm_3_7_f32", 7, 1 << 20, "x"), ("l2norm_3_7_f32", 9, 1, "x"),
    ("l2pool_k3s2same_0_f32", 13, 3, "pad"), ("l2pool_k3s2same_0_f32", 15, 9, "y"), ("l2pool_k3s2same_0_f32", 17, 4, "act"),
    ("logsoftmax_3_7_f32", 5, 1 << 28, "scratch"),
    ("l2norm_3_7_i8", 6, 2, "fn"), ("l2norm_3_7_i8", 10, 40000, "x"), ("l2norm_3_7_i8", 11, 200, "zero_point"),
    ("l2norm_3_7_i8", 12, 1, "scratch"), ("l2norm_3_7_i8", 13, 1, "x"), ("l2norm_3_7_i8", 4, 0, "clamp"),
    ("logsoftmax_0.01_i8", 3, 0, "zero_point"), ("logsoftmax_0.01_i8", 14, 1, "m"), ("logsoftmax_0.01_i8", 15, 1, "m"),
    ("logsoftmax_0.01_i8", 17, 4, "table"), ("logsoftmax_0.01_i8", 10, 5000, "x"),
])
def test_a_bad_record_field_is_refused_at_load(cases, case, field, value, words):
    """Each field of a reduce, cumsum, batchmatmul or fnorm record the kernels trust, broken in the stored program: a
    ContainerError naming the record's line and the field, before anything runs."""
    from mpy_lazy import ContainerError, kinds

    c = cases[0][case]
    with open(c.pack, "rb") as f:
        buf = bytearray(f.read())
    kind = {"cumsum": (kinds.CUMSUM, kinds.FCUMSUM), "bmm": (kinds.BMM, kinds.FBMM), "l2norm": (kinds.NORM, kinds.FNORM),
            "l2pool": (0, kinds.FNORM), "logsoftmax": (kinds.NORM, kinds.FNORM)}.get(
        case.split("_")[0], (kinds.REDUCE, kinds.FREDUCE))
    at = _record(buf, kind["f32" in case])
    np.frombuffer(buf, "<i4", 1, at + 4 * field)  # (inside the file)
    buf[at + 4 * field: at + 4 * field + 4] = int(value).to_bytes(4, "little", signed=True)
    with kernel_path("pure"), pytest.raises(ContainerError) as e:
        mmodel.from_container(mpy_lazy.open(bytes(buf)))
    assert e.value.field == "program" and words in str(e.value) and str(e.value).startswith("graph line "), str(e.value)


@pytest.mark.parametrize("line, words", [
    ("reduce x=a y=y fn=all axes=0", "all takes bool values, the others numbers (x is i8)"),
    ("reduce x=b y=y fn=min axes=0 q=0.1,0", "all takes bool values, the others numbers (x is bool)"),
    ("reduce x=b y=y fn=all axes=0 q=0.1,0", "all has no q= or m="),
])
def test_reduce_all_description_refused(line, words):
    """fn=all on numbers, the others on bool values, a q= on bool: refused in one line."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    text = "input y=a shape=4 dtype=i8 q=0.1,0\ninput y=b shape=4 dtype=bool\n%s\noutput x=y" % line
    with pytest.raises(ContainerError) as e:
        Model(text)
    assert words in str(e.value), str(e.value)
