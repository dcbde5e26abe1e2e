"""Resource variables (issue 29): a streaming model's state kept from one invoke to the next,
against TensorFlow Lite Micro itself. stream_int8.tflite and stream_f32.tflite (the TFLite
converter's output for a tf.Module whose tf.Variable holds the last three frames:
tools/make_tflite_fixtures.py) have CALL_ONCE and its init subgraph, VAR_HANDLE, READ_VARIABLE and
ASSIGN_VARIABLE; one TFLM interpreter runs a sequence of frames, and mpy-lazy's packed model
gives the same outputs at every step on CPython (the pure kernels), on the MicroPython unix port
(viper, 0 bytes allocated per int8 inference) and in the host reference, then, after reset(), the
first steps' outputs again (the state the model was loaded with: the init subgraph's values).
The refusals: an init subgraph that computes, a variable read at two types."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import GOLDEN, Board, kernel_path, run_cli, tensors_of  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

NAMES = ("stream_int8", "stream_f32")
STEPS = 8
AGAIN = 3  # steps run again after reset()


def frames(name):
    rng = np.random.default_rng(29)
    if name.endswith("int8"):
        return [rng.integers(-128, 128, (1, 4)).astype(np.int8) for _ in range(STEPS)]
    return [rng.uniform(-1, 1, (1, 4)).astype(np.float32) for _ in range(STEPS)]


class Case:
    def __init__(self, name, workdir):
        self.name = name
        self.src = os.path.join(GOLDEN, "tflite", name + ".tflite")
        if not os.path.exists(self.src):
            pytest.skip("%s is missing (make tflite-fixtures)" % os.path.basename(self.src))
        self.xs = frames(name)
        self.want = [np.asarray(y).reshape(-1) for y in tflm_ref.run(self.src, self.xs)]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [x.reshape(-1).tolist() for x in self.xs]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_state"))
    out = {name: Case(name, workdir) for name in NAMES}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.inputs + ["reset"] + c.inputs[:AGAIN], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "alloc": c.name.endswith("int8")})
    board = Board(workdir, "state", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def expect(case, got, want):
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind == "f":  # (the unix port computes in float64: float32 rounding apart)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (case.name, got, want)
    else:
        assert got.tolist() == want.astype(np.int64).tolist(), case.name


def test_the_state_changes_the_outputs(cases):
    """The fixtures test state: TFLM's outputs for one frame differ with what came before it,
    and its first step starts from the init subgraph's values (a fresh interpreter's)."""
    for c in cases[0].values():
        again = [np.asarray(y).reshape(-1) for y in tflm_ref.run(c.src, c.xs[:1] * 3)]
        assert not np.array_equal(again[0], again[1]), c.name
        assert np.array_equal(again[0], c.want[0]), c.name
        ops = [o.name for o in tflm_ref.ops(c.src)]
        assert {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} <= set(ops), ops


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm_at_every_step(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        for x, want in zip(c.inputs, c.want):
            m(x)
            expect(c, m.tolist(), want)
        m.reset()
        for x, want in zip(c.inputs[:AGAIN], c.want):
            m(x)
            expect(c, m.tolist(), want)


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm_at_every_step(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert len(r["ys"]) == STEPS + AGAIN
    for got, want in zip(r["ys"], c.want + c.want[:AGAIN]):
        expect(c, got, want)
    if name.endswith("int8"):
        assert r["alloc"] == [0] * (STEPS + AGAIN), r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm_at_every_step(cases, name):
    c = cases[0][name]
    state = {}
    for x, want in zip(c.xs, c.want):
        got = reference.run(c.c.meta["graph"], tensors_of(c.c), x.reshape(-1), state=state)[0]
        expect(c, got, want)


def test_the_variable_is_state_in_the_description(cases):
    """One var line (the init subgraph's values as its tensor), a read and an assign."""
    from mpy_lazy import graph

    ops = [(op, kv) for _, op, kv in graph.parse(cases[0]["stream_int8"].c.meta["graph"])]
    names = [op for op, _ in ops]
    assert names.count("var") == 1 and names.count("read") == 1 and names.count("assign") == 1
    kv = dict(ops)["var"]
    init = tensors_of(cases[0]["stream_int8"].c)[kv["t"]].reshape(-1)
    s, z = kv["q"]
    assert np.allclose((init.astype(np.float64) - z) * s, 0.25, atol=s), init  # tf.Variable's 0.25


def _fails(*args):
    """`mpy-lazy ARGS` in-process, expected to fail: its stderr."""
    import contextlib
    import io

    from host_tools.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    assert rc != 0, args
    return err.getvalue()


def _edited(tmp_path, name, edit):
    """stream_f32.tflite with `edit(model)` applied to its schema object (TFLM's schema module)."""
    src = os.path.join(GOLDEN, "tflite", "stream_f32.tflite")
    if not os.path.exists(src):
        pytest.skip("stream_f32.tflite is missing (make tflite-fixtures)")
    with open(src, "rb") as f:
        m = S.ModelT.InitFromPackedBuf(bytearray(f.read()), 0)
    edit(m)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / (name + ".tflite")
    path.write_bytes(bytes(b.Output()))
    return path


def _computed_init(m):
    init = m.subgraphs[1]
    value = [op for op in init.operators if len(op.inputs) == 2][0].inputs[1]
    m.buffers[init.tensors[value].buffer].data = None  # the initial value no constant


def _init_index(m):
    for op in m.subgraphs[0].operators:
        if op.builtinOptionsType == S.BuiltinOptions.CallOnceOptions:
            op.builtinOptions.initSubgraphIndex = 7


@pytest.mark.parametrize("name,edit,msg", [
    ("computed_init", _computed_init, "assigns a computed value; the initial value must be a constant"),
    ("init_index", _init_index, "init subgraph 7: the model has subgraphs 0..1"),
])
def test_refusals_name_the_operator(tmp_path, name, edit, msg):
    path = _edited(tmp_path, name, edit)
    err = _fails("pack", path, "-o", tmp_path / "x.mpyl")
    assert msg in err and "CALL_ONCE" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.mpyl").exists()


def test_quantizing_a_stateful_float_model_is_refused(tmp_path):
    src = os.path.join(GOLDEN, "tflite", "stream_f32.tflite")
    if not os.path.exists(src):
        pytest.skip("stream_f32.tflite is missing (make tflite-fixtures)")
    np.save(tmp_path / "s.npy", np.random.default_rng(0).uniform(-1, 1, (20, 4)).astype(np.float32))
    err = _fails("pack", src, "-o", tmp_path / "x.mpyl", "--quantize", "int8", "--calibrate", tmp_path / "s.npy")
    assert "resource variables" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.mpyl").exists()
