"""IF and WHILE (issue 29) against TensorFlow Lite Micro itself. Where the condition is known at
pack time the subgraphs are computed there: loop_f32.tflite (the converter's counted
tf.while_loop: tools/make_tflite_fixtures.py) is unrolled into three copies of its body; int8
models written here with TFLM's schema module: an IF on a constant condition (each branch), a
counted WHILE whose counter is int32 arithmetic. Where the board computes the condition it runs
there (branch, jump, loop and next records: mpy_lazy/ops/control.py): cond_f32 and while_f32
(the converter's tf.cond and tf.while_loop on conditions computed from the input), int8 models
written here (an IF on a bool input, a WHILE counting to an int32 input, the same with an IF on
the counter inside its body). mpy-lazy's packed model gives TFLM's outputs on CPython (the pure
kernels), on the MicroPython unix port (viper, 0 bytes allocated per int8 inference) and in the
host reference; a WHILE that never ends raises RuntimeError after its bound on each of them."""
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
from host_tools.ops import control  # noqa: E402
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


def if_input(flags=1, qx=Q):
    """y = IF(flag, x), flag a bool input: then relu(x), else x + x (int8, one q); flags: the
    condition's elements (TFLM takes 1); qx: x's quantization in the main subgraph."""
    main = ([((flags,), "bool", None, None), ((1, 16), "i8", qx, None), ((1, 16), "i8", Q, None)],
            [0, 1], [2], [(0, [0, 1], [2], _opts("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2))])
    then = ([((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)], [0], [1], [(1, [0], [1], None)])
    other = ([((1, 16), "i8", Q, None), ((1, 16), "i8", Q, None)], [0], [1],
             [(2, [0, 0], [1], _opts("AddOptions", fusedActivationFunction=0))])
    return tflite([O.IF, O.RELU, O.ADD], [main, then, other])


def while_input(nested=False, step=1, qx=None):
    """v = x; i = 0; while i < n (an int32 input): v = tanh(v), i += step; nested: v = IF(i < 2,
    tanh(v), relu(v)) instead (an IF on the board inside the loop). step 0: a loop that never
    ends while n > 0."""
    T = (1 / 128, 0)
    main = ([((), "i32", None, np.array(0, np.int32)), ((1, 16), "i8", qx or T, None), ((1,), "i32", None, None),
             ((), "i32", None, None), ((1, 16), "i8", T, None), ((1,), "i32", None, None)], [2, 1], [4],
            [(0, [0, 1, 2], [3, 4, 5], _opts("WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2))])
    cond = ([((), "i32", None, None), ((1, 16), "i8", T, None), ((1,), "i32", None, None),
             ((1,), "bool", None, None)], [0, 1, 2], [3], [(1, [0, 2], [3], None)])
    body_t = [((), "i32", None, None), ((1, 16), "i8", T, None), ((1,), "i32", None, None),
              ((), "i32", None, np.array(step, np.int32)), ((), "i32", None, None), ((1, 16), "i8", T, None)]
    body_ops = [(2, [0, 3], [4], _opts("AddOptions", fusedActivationFunction=0))]
    if nested:
        body_t += [((), "i32", None, np.array(2, np.int32)), ((), "bool", None, None)]
        body_ops += [(1, [0, 6], [7], None),
                     (4, [7, 1], [5], _opts("IfOptions", thenSubgraphIndex=3, elseSubgraphIndex=4))]
    else:
        body_ops.append((3, [1], [5], None))
    body = (body_t, [0, 1, 2], [4, 5, 2], body_ops)
    then = ([((1, 16), "i8", T, None), ((1, 16), "i8", T, None)], [0], [1], [(3, [0], [1], None)])
    other = ([((1, 16), "i8", T, None), ((1, 16), "i8", T, None)], [0], [1], [(5, [0], [1], None)])
    return tflite([O.WHILE, O.LESS, O.ADD, O.TANH, O.IF, O.RELU],
                  [main, cond, body] + ([then, other] if nested else []))


CODES = np.arange(-128, 128, 16).astype(np.int8)
X2 = [CODES.reshape(1, 16), -CODES.reshape(1, 16) - 1]
COUNTS = [np.array([n], np.int32) for n in (0, 1, 2, 3, 7)]
# name -> (the .tflite, its samples: each a list of the model's inputs)
MODELS = {"if_true": lambda: (if_int8(True), [[x] for x in X2]),
          "if_false": lambda: (if_int8(False), [[x] for x in X2]),
          "while_3": lambda: (while_int8(3), [[x] for x in X2]), "while_0": lambda: (while_int8(0), [[x] for x in X2]),
          "if_input": lambda: (if_input(), [[np.array([f]), x] for x in X2 for f in (True, False)]),
          "while_input": lambda: (while_input(), [[n, X2[0]] for n in COUNTS]),
          "while_if_input": lambda: (while_input(nested=True), [[n, X2[1]] for n in COUNTS[:4]])}
FIXTURES = ("loop_f32", "cond_f32", "while_f32")  # tests/golden/tflite: TF's converter's
NAMES = list(MODELS) + list(FIXTURES)


class Case:
    def __init__(self, name, workdir):
        self.name = name
        if name in FIXTURES:
            self.src = os.path.join(GOLDEN, "tflite", name + ".tflite")
            if not os.path.exists(self.src):
                pytest.skip("%s.tflite is missing (make tflite-fixtures)" % name)
            self.samples = [[x] for x in tflm_ref.sample_inputs(self.src, 8, seed=29)]
        else:
            self.src = os.path.join(workdir, name + ".tflite")
            data, self.samples = MODELS[name]()
            with open(self.src, "wb") as f:
                f.write(data)
        self.want = [np.asarray(y).reshape(-1) for y in
                     tflm_ref.run(self.src, [tuple(s) if len(s) > 1 else s[0] for s in self.samples])]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [[np.asarray(x).reshape(-1).tolist() for x in s] for s in self.samples]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_control"))
    out = {name: Case(name, workdir) for name in NAMES}
    out["never"] = never(workdir)
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.inputs, f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": "f32" not in c.name})
    board = Board(workdir, "control", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def never(workdir):
    """A WHILE that never ends while its input n > 0 (its counter steps by 0), packed with a
    bound of 50 iterations: inputs n = 0 (no iteration), then 1 (RuntimeError)."""
    c = Case.__new__(Case)
    c.name, c.src, c.pack = "never", os.path.join(workdir, "never.tflite"), os.path.join(workdir, "never.mpyl")
    with open(c.src, "wb") as f:
        f.write(while_input(step=0))
    prev, control.MAX_ITERATIONS = control.MAX_ITERATIONS, 50
    try:
        run_cli("pack", c.src, "-o", c.pack)
    finally:
        control.MAX_ITERATIONS = prev
    with open(c.pack, "rb") as f:
        c.c = mpy_lazy.open(f.read())
    c.inputs = [[[0], CODES.tolist()], [[1], CODES.tolist()]]
    return c


def expect(case, got, want):
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind == "f":
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (case.name, got, want)
    else:
        assert got.tolist() == want.astype(np.int64).tolist(), case.name


def test_the_models_test_something(cases):
    """Each branch and trip count gives other outputs (TFLM's), the loop ran its body, and the
    conditions computed on the board took both ways."""
    c = cases[0]
    assert not np.array_equal(c["if_true"].want[0], c["if_false"].want[0])
    assert not np.array_equal(c["while_3"].want[0], c["while_0"].want[0])
    assert np.array_equal(c["while_0"].want[0], CODES)  # (no iteration: the input itself)
    parse = __import__("mpy_lazy.graph", None, None, ("parse",)).parse
    ops = [op for _, op, _ in parse(c["while_3"].c.meta["graph"])]
    assert ops.count("lut") == 3, ops  # three copies of the body's TANH
    for name in ("if_input", "while_input", "while_if_input", "cond_f32", "while_f32"):
        wants = c[name].want
        assert len({w.tobytes() for w in wants}) == len(wants), name  # (every sample another answer)
        ops = [op for _, op, _ in parse(c[name].c.meta["graph"])]
        assert "branch" in ops, (name, ops)
    assert np.array_equal(c["while_input"].want[0], CODES)  # n = 0: no iteration
    x = c["cond_f32"].samples
    assert {bool(s[0].sum() > 0) for s in x} == {True, False}  # both branches
    ops = [op for _, op, _ in parse(c["while_if_input"].c.meta["graph"])]
    assert ops.count("branch") == 2 and ops.count("next") == 1 and ops.count("jump") == 1, ops


def _run(m, inputs):
    m(*inputs)
    return m.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        for x, want in zip(c.inputs, c.want):
            expect(c, _run(m, x), want)


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    for got, want in zip(r["ys"], c.want):
        expect(c, got[0], want)
    if "f32" not in name:
        assert r["alloc"] == [0] * len(c.inputs), r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    for x, want in zip(c.samples, c.want):
        expect(c, reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.asarray(v).reshape(-1) for v in x])[0], want)


def test_a_loop_that_never_ends_raises_after_its_bound(cases):
    """TFLM would spin for ever; the board stops after the bound packed into the record (here 50;
    control.MAX_ITERATIONS by default) with RuntimeError naming the line, on CPython, on the unix
    port and in the host reference, and the model still runs after it."""
    c = cases[0]["never"]
    for path in ("pure", None):
        with kernel_path(path or "pure"):
            m = mmodel.from_container(c.c)
            assert _run(m, c.inputs[0]) == CODES.tolist()  # n = 0: no iteration
            with pytest.raises(RuntimeError, match="next: more than 50 iterations"):
                m(*c.inputs[1])
            assert _run(m, c.inputs[0]) == CODES.tolist()
    with pytest.raises(RuntimeError, match="more than 50 iterations"):
        reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.asarray(v) for v in c.inputs[1]])
    board = cases[1]
    board.results()
    assert "ERROR never.mpyl RuntimeError('graph line" in board.output, board.output[-2000:]
    assert "next: more than 50 iterations" in board.output


def test_the_loop_records_are_checked(cases):
    """A next record that does not go back to the record after its loop record, or a branch
    to the middle of a record: refused when the program loads (a board never runs a loop
    without its bound)."""
    from mpy_lazy import program
    from mpy_lazy.container import ContainerError
    from mpy_lazy.kinds import BRANCH, LOOP, NEXT

    c = cases[0]["while_input"].c
    P0 = program.load(c).P
    words = list(P0[i] for i in range(len(P0)))
    at = {kind: k for kind, k in __import__("mpy_lazy.check", None, None, ("records",)).records(P0)}
    for kind, field, delta, words_of in ((NEXT, 2, -1, "next: to: "), (NEXT, 2, 1, "next: to: "),
                                         (BRANCH, 3, 1, "branch: to: "), (NEXT, 4, -words[at[NEXT] + 4], "next: max: "),
                                         (LOOP, 2, 1, "loop: loop: 1 is outside 0..0"), (NEXT, 3, 1, "next: to: ")):
        bad = list(words)
        bad[at[kind] + field] += delta
        P = __import__("array").array("i", bad)
        with pytest.raises(ContainerError, match=words_of):
            program.Program(P, (c._mv,), verify=c._tensor_at, words=len(P))


@pytest.mark.parametrize("lines, words", [
    ("branch x=c y=b skip=3", "branch: goes to op 6 of 3"),
    ("jump y=j skip=4096", "jump: goes to op 4099 of 3"),
    ("branch x=x y=b skip=0", "branch: x= one bool value"),
    ("loop y=l\nnext x=c y=n back=1 max=9", "next: x=c is no loop line's value"),
    ("loop y=l\nnext x=l y=n back=3 max=9", "next: goes to op 0 of 4"),
    ("loop y=l\nnext x=l y=n back=1 max=0", "next: max=0 outside 1..1073741824"),
])
def test_control_lines_are_checked(lines, words):
    """A description's branch, jump, loop and next lines: targets inside it, a next on a loop
    line's value, a bool condition, a bound: refused with one line naming the line."""
    from mpy_lazy.container import ContainerError

    text = "input y=x shape=4\ninput y=c shape=1 dtype=bool\nneg x=x y=a\n%s\nneg x=a y=z\noutput x=z" % lines
    with pytest.raises(ContainerError, match=words):
        mmodel.Model(text)


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


def test_a_condition_of_two_elements_is_refused(tmp_path):
    """An IF whose condition has 2 elements (found by tools/fuzz_tflite.py: it packed and ran on
    the first; TFLM's Prepare takes one element): one line, and TFLM refuses it too."""
    import contextlib
    import io

    from host_tools.cli import main

    path = tmp_path / "if2.tflite"
    path.write_bytes(if_input(flags=2))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["pack", str(path), "-o", str(tmp_path / "x.mpyl")]) == 1
    assert "its condition of shape [2]: one bool expected" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
    with pytest.raises(RuntimeError, match="TFLM cannot allocate"):  # (its Prepare: NumElements(cond) != 1)
        tflm_ref.run(str(path), [np.array([True, False]), np.zeros((1, 16), np.int8)])


@pytest.mark.parametrize("qx", [None, (0.1, 0)])
def test_a_branch_input_of_another_quantization_is_refused(tmp_path, qx):
    """An IF input whose quantization is not its branch's input's (found by tools/fuzz_tflite.py:
    TFLM copies the bytes and the branch reads them with its own scale; mpy-lazy read them with
    the caller's, another answer): one line."""
    path = tmp_path / "ifq.tflite"
    path.write_bytes(if_input(qx=qx))
    _refused_copying(path, tmp_path)


def test_a_loop_variable_of_another_quantization_is_refused(tmp_path):
    """The same for a WHILE's loop variable and its condition's and body's inputs."""
    path = tmp_path / "whileq.tflite"
    path.write_bytes(while_input(qx=(0.1, 0)))
    _refused_copying(path, tmp_path)


def _refused_copying(path, tmp_path):
    import contextlib
    import io

    from host_tools.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["pack", str(path), "-o", str(tmp_path / "x.mpyl")]) == 1
    assert "TFLM copies the bytes" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
