"""Shapes computed at pack time (issue 29 item 2): a Keras Flatten on a dynamic batch converts to
SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE (or CONCATENATION in place of PACK); the importer
computes those ops on the static shapes and constants (TFLM computes them at every invoke from
the same shapes), so the RESHAPE gets a constant shape. Small models written with TFLM's schema
module, run by the tflite-micro wheel (tests/tflm_ref.py) and by mpy-lazy on CPython (pure
kernels), on the unix port (viper, 0 B per inference) and by the host reference: every output
equal. tests/golden/tflite/ops_dynamic_batch_int8.tflite is the converter's own (test_tflite.py)."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

TYPES = {"f32": (S.TensorType.FLOAT32, np.float32), "i8": (S.TensorType.INT8, np.int8),
         "i16": (S.TensorType.INT16, np.int16), "i32": (S.TensorType.INT32, np.int32)}
OP = S.BuiltinOperator


def build(tensors, inputs, outputs, ops):
    """A .tflite: tensors [(shape, dtype, q or None, constant data or None)], ops [(builtin,
    inputs, outputs, (options type, options) or None)]."""
    m = S.ModelT()
    m.version = 3
    codes = sorted({op for op, _, _, _ in ops})
    m.operatorCodes = []
    for op in codes:
        code = S.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode, code.version = op, min(op, 127), 1
        m.operatorCodes.append(code)
    m.buffers = [S.BufferT()]
    sg = S.SubGraphT()
    sg.tensors = []
    for k, (shape, dt, q, data) in enumerate(tensors):
        t = S.TensorT()
        t.shape, t.type, t.name, t.buffer = list(shape), TYPES[dt][0], "t%d" % k, 0
        if data is not None:
            b = S.BufferT()
            b.data = list(np.asarray(data, TYPES[dt][1]).tobytes())
            t.buffer = len(m.buffers)
            m.buffers.append(b)
        if q is not None:
            qp = S.QuantizationParametersT()
            qp.scale, qp.zeroPoint = [float(q[0])], [int(q[1])]
            t.quantization = qp
        sg.tensors.append(t)
    sg.inputs, sg.outputs = inputs, outputs
    sg.operators = []
    for op, ins, outs, options in ops:
        o = S.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = codes.index(op), ins, outs
        if options is not None:
            o.builtinOptionsType, o.builtinOptions = options
        sg.operators.append(o)
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _opts(cls, **fields):
    o = getattr(S, cls + "T")()
    for k, v in fields.items():
        setattr(o, k, v)
    return (getattr(S.BuiltinOptions, cls), o)


def flatten(dt, how):
    """x (1, 2, 3, 4) -> SHAPE -> STRIDED_SLICE (the batch) -> PACK with -1, or CONCATENATION
    with [-1] -> RESHAPE (1, 24) -> a requantizing QUANTIZE (int8) or an ADD to itself (f32)."""
    q = (0.05, -3) if dt == "i8" else None
    shrink = how == "pack"
    tensors = [((1, 2, 3, 4), dt, q, None), ((4,), "i32", None, None), ((1,), "i32", None, [0]),
               ((1,), "i32", None, [1]), ((() if shrink else (1,)), "i32", None, None),
               ((() if shrink else (1,)), "i32", None, [-1]), ((2,), "i32", None, None),
               ((1, 24), dt, q, None), ((1, 24), dt, (0.07, 5) if q else None, None)]
    last = ((OP.QUANTIZE, [7], [8], None) if dt == "i8" else
            (OP.ADD, [7, 7], [8], _opts("AddOptions", fusedActivationFunction=0)))
    join = ((OP.PACK, [4, 5], [6], _opts("PackOptions", valuesCount=2, axis=0)) if shrink else
            (OP.CONCATENATION, [4, 5], [6], _opts("ConcatenationOptions", axis=0, fusedActivationFunction=0)))
    ops = [(OP.SHAPE, [0], [1], _opts("ShapeOptions", outType=S.TensorType.INT32)),
           (OP.STRIDED_SLICE, [1, 2, 3, 3], [4], _opts("StridedSliceOptions", shrinkAxisMask=1 if shrink else 0)),
           join, (OP.RESHAPE, [0, 6], [7], None), last]
    rng = np.random.default_rng(len(dt) + len(how))
    x = (rng.integers(-128, 128, (2, 3, 4)).astype(np.int8) if dt == "i8" else
         rng.standard_normal((2, 3, 4)).astype(np.float32))
    return build(tensors, [0], [8], ops), x


NAMES = ["%s_%s" % (dt, how) for dt in ("i8", "f32") for how in ("pack", "concat")]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_fold"))
    out, jobs = {}, []
    for name in NAMES:
        data, x = flatten(*name.split("_"))
        src = os.path.join(workdir, name + ".tflite")
        with open(src, "wb") as f:
            f.write(data)
        assert [o.name for o in tflm_ref.ops(src)][:3] == ["SHAPE", "STRIDED_SLICE", "PACK" if "pack" in name
                                                          else "CONCATENATION"]
        want = np.asarray(tflm_ref.run(src, [x], arena_size=1 << 16)[0]).reshape(-1)
        pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", src, "-o", pack)
        with open(pack, "rb") as f:
            c = mpy_lazy.open(f.read())
        xs = x.reshape(-1).tolist()
        out[name] = (c, xs, want)
        with open(os.path.join(workdir, name + ".json"), "w") as f:
            json.dump([xs], f)
        jobs.append({"name": name + ".mpyl", "xs": os.path.join(workdir, name + ".json"), "alloc": "i8" in name})
    board = Board(workdir, "fold", [os.path.join(workdir, n + ".mpyl") for n in NAMES], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def same(got, want):
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind == "f":
        return np.allclose(got, want, rtol=1e-6, atol=0)
    return got.astype(np.int64).tolist() == want.astype(np.int64).tolist()


@pytest.mark.parametrize("name", NAMES)
def test_folded_flatten_matches_tflm(cases, name):
    c, xs, want = cases[0][name]
    ops = [op for _, op, _ in mpy_lazy.graph.parse(c.meta["graph"])]
    assert ops == ["input", "reshape", "lut" if "i8" in name else "add", "output"], ops
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        m(xs)
        assert same(m.tolist(), want), name
    r = cases[1].get(name + ".mpyl")
    assert r["path"] == "viper"
    assert same(r["ys"][0], want), name
    if "i8" in name:
        assert r["alloc"] == [0]
    assert same(reference.run(c.meta["graph"], tensors_of(c), np.array(xs))[0], want), name


def test_pack_of_board_values_runs_on_the_board(cli, tmp_path):
    """A PACK whose input is computed on the board is not folded: it runs there (the data
    movers' PACK), as TFLM does."""
    tensors = [((1, 3), "i32", None, None), ((2, 1, 3), "i32", None, None)]
    src = tmp_path / "pack.tflite"
    src.write_bytes(build(tensors, [0], [1], [(OP.PACK, [0, 0], [1], _opts("PackOptions", valuesCount=2, axis=0))]))
    cli.ok("pack", src, "-o", tmp_path / "p.mpyl")
    with open(tmp_path / "p.mpyl", "rb") as f:
        c = mpy_lazy.open(f.read())
    assert "concat" in [op for _, op, _ in mpy_lazy.graph.parse(c.meta["graph"])]
    x = np.array([[7, -5, 123456]], np.int32)
    want = np.asarray(tflm_ref.run(str(src), [x], arena_size=1 << 16)[0]).reshape(-1)
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        m(x.reshape(-1).tolist())
        assert same(m.tolist(), want)
