"""IF and WHILE (issue 29) against TensorFlow Lite Micro itself: subgraphs computed at pack time
where their condition is known there. loop_f32.tflite (the converter's counted tf.while_loop:
tools/make_tflite_fixtures.py) is unrolled into three copies of its body; int8 models written
here with TFLM's schema module: an IF on a constant condition (each branch), a counted WHILE
whose counter is int32 arithmetic. mpy-lazy's packed model gives TFLM's outputs on CPython (the
pure kernels), on the MicroPython unix port (viper, 0 bytes allocated per int8 inference) and in
the host reference. A comparison of values computed on the board is refused by name."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import GOLDEN, Board, kernel_path, run_cli, tensors_of  # noqa: E402
from test_tflite_elem import TYPES, _opts  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

O = S.BuiltinOperator
KINDS = dict(TYPES, bool=(S.TensorType.BOOL, np.bool_))
Q = (0.05, -3)


def subgraph(tensors, inputs, outputs, ops, buffers):
    """tensors [(shape, dtype, q or None, constant data or None)]; ops [(code index, ins, outs,
    options or None)]; constants appended to buffers."""
    sg = S.SubGraphT()
    sg.tensors = []
    for k, (shape, dt, q, data) in enumerate(tensors):
        t = S.TensorT()
        t.shape, t.type, t.name, t.buffer = list(shape), KINDS[dt][0], "t%d" % k, 0
        if data is not None:
            b = S.BufferT()
            b.data = list(np.asarray(data, KINDS[dt][1]).tobytes())
            t.buffer = len(buffers)
            buffers.append(b)
        if q is not None:
            qp = S.QuantizationParametersT()
            qp.scale, qp.zeroPoint = [float(q[0])], [int(q[1])]
            t.quantization = qp
        sg.tensors.append(t)
    sg.inputs, sg.outputs = inputs, outputs
    sg.operators = []
    for code, ins, outs, options in ops:
        o = S.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = code, ins, outs
        if options is not None:
            o.builtinOptionsType, o.builtinOptions = options
        sg.operators.append(o)
    return sg


def tflite(codes, subgraphs):
    """A .tflite of several subgraphs: codes, the builtin of each opcode index; subgraphs, the
    subgraph() arguments but the buffers."""
    m = S.ModelT()
    m.version = 3
    m.operatorCodes = []
    for op in codes:
        c = S.OperatorCodeT()
        c.builtinCode, c.deprecatedBuiltinCode, c.version = op, min(op, 127), 1
        m.operatorCodes.append(c)
    m.buffers = [S.BufferT()]
    m.subgraphs = [subgraph(*sg, m.buffers) for sg in subgraphs]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def if_int8(flag):
    """y = IF(flag, x): then relu(x), else tanh(x) (int8, TFLM's q for tanh's output)."""
    main = ([((), "bool", None, np.array(flag)), ((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)],
            [1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2))])
    then = ([((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)], [0], [1], [(1, [0], [1], None)])
    other = ([((1, 16), "i8", Q, None), ((1, 16), "i8", (1 / 128, 0), None)], [0], [1], [(2, [0], [1], None)])
    return tflite([O.IF, O.RELU, O.TANH], [main, then, other])


def while_int8(count):
    """v = x; `count` times: v = tanh(v), a counter i from 0 while i < count (int32 ADD, LESS)."""
    T = (1 / 128, 0)
    main = ([((), "i32", None, np.array(0, np.int32)), ((1, 16), "i8", T, None), ((), "i32", None, None),
             ((1, 16), "i8", T, None)], [1], [3],
            [(0, [0, 1], [2, 3], _opts("WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2))])
    cond = ([((), "i32", None, None), ((1, 16), "i8", T, None), ((), "i32", None, np.array(count, np.int32)),
             ((), "bool", None, None)], [0, 1], [3], [(1, [0, 2], [3], None)])
    body = ([((), "i32", None, None), ((1, 16), "i8", T, None), ((), "i32", None, np.array(1, np.int32)),
             ((), "i32", None, None), ((1, 16), "i8", T, None)], [0, 1], [3, 4],
            [(2, [0, 2], [3], _opts("AddOptions", fusedActivationFunction=0)), (3, [1], [4], None)])
    return tflite([O.WHILE, O.LESS, O.ADD, O.TANH], [main, cond, body])


CODES = np.arange(-128, 128, 16).astype(np.int8)
MODELS = {"if_true": lambda: if_int8(True), "if_false": lambda: if_int8(False),
          "while_3": lambda: while_int8(3), "while_0": lambda: while_int8(0)}
NAMES = list(MODELS) + ["loop_f32"]


class Case:
    def __init__(self, name, workdir):
        self.name = name
        if name == "loop_f32":
            self.src = os.path.join(GOLDEN, "tflite", name + ".tflite")
            if not os.path.exists(self.src):
                pytest.skip("loop_f32.tflite is missing (make tflite-fixtures)")
            self.xs = tflm_ref.sample_inputs(self.src, 4, seed=29)
        else:
            self.src = os.path.join(workdir, name + ".tflite")
            with open(self.src, "wb") as f:
                f.write(MODELS[name]())
            self.xs = [CODES.reshape(1, 16), -CODES.reshape(1, 16) - 1]
        self.want = [np.asarray(y).reshape(-1) for y in tflm_ref.run(self.src, self.xs)]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [np.asarray(x).reshape(-1).tolist() for x in self.xs]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_control"))
    out = {name: Case(name, workdir) for name in NAMES}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.inputs, f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "alloc": "f32" not in c.name})
    board = Board(workdir, "control", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def expect(case, got, want):
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind == "f":
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (case.name, got, want)
    else:
        assert got.tolist() == want.astype(np.int64).tolist(), case.name


def test_the_models_test_something(cases):
    """Each branch and trip count gives other outputs (TFLM's), and the loop ran its body."""
    c = cases[0]
    assert not np.array_equal(c["if_true"].want[0], c["if_false"].want[0])
    assert not np.array_equal(c["while_3"].want[0], c["while_0"].want[0])
    assert np.array_equal(c["while_0"].want[0], CODES)  # (no iteration: the input itself)
    ops = [op for _, op, _ in __import__("mpy_lazy.graph", None, None, ("parse",)).parse(c["while_3"].c.meta["graph"])]
    assert ops.count("lut") == 3, ops  # three copies of the body's TANH


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        for x, want in zip(c.inputs, c.want):
            m(x)
            expect(c, m.tolist(), want)


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    for got, want in zip(r["ys"], c.want):
        expect(c, got, want)
    if "f32" not in name:
        assert r["alloc"] == [0] * len(c.inputs), r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    for x, want in zip(c.xs, c.want):
        expect(c, reference.run(c.c.meta["graph"], tensors_of(c.c), np.asarray(x).reshape(-1))[0], want)


def test_a_condition_computed_on_the_board_is_refused(tmp_path):
    """An IF on the model's bool input (a branch the board would take at run time): one line
    naming it."""
    import contextlib
    import io

    from host_tools.cli import main

    main_sg = ([((1,), "bool", None, None), ((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)],
               [0, 1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1))])
    branch = ([((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)], [0], [1], [(1, [0], [1], None)])
    path = tmp_path / "if_on_input.tflite"
    path.write_bytes(tflite([O.IF, O.RELU], [main_sg, branch]))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["pack", str(path), "-o", str(tmp_path / "x.mpyl")]) != 0
    assert "operator 0 (IF)" in err.getvalue() and "computed on the board" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_a_branch_that_calls_itself_is_refused(tmp_path):
    """An IF whose then branch is its own subgraph (TFLM would recurse without end): one line."""
    import contextlib
    import io

    from host_tools.cli import main

    main_sg = ([((), "bool", None, np.array(True)), ((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)],
               [1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1))])
    loop = ([((), "bool", None, np.array(True)), ((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)],
            [1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1))])
    path = tmp_path / "self.tflite"
    path.write_bytes(tflite([O.IF], [main_sg, loop]))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["pack", str(path), "-o", str(tmp_path / "x.mpyl")]) != 0
    assert "more than 16 deep" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()


def test_a_variable_inside_a_branch_is_refused(tmp_path):
    """A resource variable in an IF's branch (declared per model, not per subgraph): one line."""
    import contextlib
    import io

    from host_tools.cli import main

    main_sg = ([((), "bool", None, np.array(True)), ((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)],
               [1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=1))])
    branch = ([((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)], [0], [1],
              [(1, [], [], _opts("CallOnceOptions", initSubgraphIndex=1)), (2, [0], [1], None)])
    path = tmp_path / "var_in_branch.tflite"
    path.write_bytes(tflite([O.IF, O.CALL_ONCE, O.RELU], [main_sg, branch]))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["pack", str(path), "-o", str(tmp_path / "x.mpyl")]) != 0
    assert "CALL_ONCE" in err.getvalue() and "inside an IF or WHILE subgraph is not supported" in err.getvalue(), \
        err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
