"""Bool values (issue 29) against TensorFlow Lite Micro itself: EQUAL, NOT_EQUAL, LESS,
LESS_EQUAL, GREATER, GREATER_EQUAL (float32, int32, bool, and int8 on every pair of codes, the
operands rescaled as TFLM's Prepare rescales them), LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT,
SELECT_V2 (float32, int8, int16), each with numpy's broadcasting and constant operands, and
FILL and ZEROS_LIKE (float32, int8, int32), in one-op .tflite models written with TFLM's own
schema module, run by the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack`
and run by mpy-lazy on CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes
allocated per integer inference) and by the host reference interpreter: every element equal."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import ARENA, CODES, TYPES, _opts, model  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

TYPES.setdefault("bool", (S.TensorType.BOOL, np.bool_))
OP = S.BuiltinOperator
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")
Q = {"i8": (0.05, -7), "i16": (0.001, 0), "i32": None, "f32": None, "bool": None}


def _x(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if dt == "f32":  # (small integers and halves: ties between the operands happen)
        return (rng.integers(-3, 3, shape) / 2.0).astype(np.float32)
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt == "i32":
        return (rng.integers(-2, 2, shape) * (1 << 29) + rng.integers(0, 2, shape)).astype(np.int32)
    return rng.integers(-9, -3, shape).astype(TYPES[dt][1])  # (around i8's zero point: ties; every code: *_pairs)


def op_model(op, tensors, n_in, options=None):
    """tensors [(shape, dtype, q, constant or None)] of the inputs then the output: the
    activation inputs are the model's inputs (seeded values)."""
    ins = [k for k in range(n_in) if tensors[k][3] is None]
    data = model(getattr(OP, op), tensors, ins, [n_in], list(range(n_in)), options)
    return data, [_x(tensors[k][1], tensors[k][0], 11 + k) for k in ins]


def compare(op, dt, s1, s2, so, q1=None, q2=None, const=None):
    t = [(s1, dt, q1 or Q[dt], None), (s2, dt, q2 or Q[dt], const), (so, "bool", None, None)]
    return op_model(op, t, 2)


def every_pair(op, q1, q2):
    """int8: x1 (1, 256, 256) repeats each code 256 times, x2 cycles through them."""
    data = model(getattr(OP, op), [((1, 256, 256), "i8", q1, None), ((1, 256, 256), "i8", q2, None),
                                   ((1, 256, 256), "bool", None, None)], [0, 1], [2], [0, 1])
    return data, [np.repeat(CODES, 256).reshape(1, 256, 256), np.tile(CODES, 256).reshape(1, 256, 256)]


PAIR_Q = [((0.05, -3), (0.05, -3)), ((0.02, 10), (0.07, -100)), ((0.5, 126), (0.003, -128))]


def models():
    out = {}
    for op in COMPARISONS:
        o = op.lower()
        for i, (q1, q2) in enumerate(PAIR_Q):
            out["%s_pairs%d" % (o, i)] = every_pair(op, q1, q2)
        for dt in ("f32", "i32", "i8") + (("bool",) if op in ("EQUAL", "NOT_EQUAL") else ()):
            out["%s_%s" % (o, dt)] = compare(op, dt, (1, 4, 6), (1, 4, 6), (1, 4, 6))
            out["%s_%s_channel" % (o, dt)] = compare(op, dt, (1, 4, 6), (6,), (1, 4, 6))
            out["%s_%s_outer" % (o, dt)] = compare(op, dt, (1, 4, 1), (1, 1, 6), (1, 4, 6))  # (both copied out)
            c = _x(dt, (1,), 3)
            out["%s_%s_const" % (o, dt)] = compare(op, dt, (1, 4, 6), (), (1, 4, 6), const=c.reshape(()))
            c = _x(dt, (6,), 4)
            out["%s_%s_const_first" % (o, dt)] = op_model(op, [((6,), dt, Q[dt], c), ((1, 4, 6), dt, Q[dt], None),
                                                              ((1, 4, 6), "bool", None, None)], 2)
        out["%s_i8_other_q" % o] = compare(op, "i8", (1, 3, 8), (8,), (1, 3, 8), (0.1, 4), (0.037, 20))
    for op, n in (("LOGICAL_AND", 2), ("LOGICAL_OR", 2)):
        o = op.lower()
        out[o] = op_model(op, [((1, 4, 6), "bool", None, None)] * 2 + [((1, 4, 6), "bool", None, None)], n)
        out[o + "_channel"] = op_model(op, [((1, 4, 6), "bool", None, None), ((6,), "bool", None, None),
                                            ((1, 4, 6), "bool", None, None)], n)
        out[o + "_const"] = op_model(op, [((1, 4, 6), "bool", None, None),
                                          ((6,), "bool", None, np.array([1, 0, 1, 1, 0, 0], np.bool_)),
                                          ((1, 4, 6), "bool", None, None)], n)
    out["logical_not"] = op_model("LOGICAL_NOT", [((1, 4, 6), "bool", None, None), ((1, 4, 6), "bool", None, None)], 1)
    for dt in ("f32", "i8", "i16"):
        b = ((1, 4, 6), "bool", None, None)
        v = ((1, 4, 6), dt, Q[dt], None)
        out["select_%s" % dt] = op_model("SELECT_V2", [b, v, v, v], 3)
        out["select_%s_cond_channel" % dt] = op_model("SELECT_V2", [((6,), "bool", None, None), v, v, v], 3)
        out["select_%s_outer" % dt] = op_model("SELECT_V2", [((1, 4, 1), "bool", None, None),
                                                             ((1, 1, 6), dt, Q[dt], None), v, v], 3)
        zero = np.zeros((), TYPES[dt][1])
        out["select_%s_const" % dt] = op_model("SELECT_V2", [b, v, ((), dt, Q[dt], zero), v], 3)
    for dt in ("f32", "i8", "i32"):
        x = ((1, 3, 5), dt, Q[dt], None)
        out["zeros_like_%s" % dt] = op_model("ZEROS_LIKE", [x, x], 1)
        v = np.array(-2.75 if dt == "f32" else -77, TYPES[dt][1])
        out["fill_%s" % dt] = fill(dt, v)
    return out


def fill(dt, v):
    """FILL (dims a constant, the value a constant scalar), beside an input it does not read
    (mpy-lazy's models have one)."""
    data = model(OP.FILL, [((3,), "i32", None, np.array([1, 3, 5], np.int32)), ((), dt, Q[dt], v),
                           ((1, 3, 5), dt, Q[dt], None), ((1, 2), dt, Q[dt], None)], [3], [2], [0, 1])
    return data, [_x(dt, (1, 2), 5)]


class Case:
    def __init__(self, name, data, xs, workdir):
        self.name, self.xs = name, xs
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        y = tflm_ref.run(self.src, [tuple(xs) if len(xs) > 1 else (xs[0] if xs else ())], arena_size=ARENA)[0]
        self.want = np.asarray(y).reshape(-1)
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [np.asarray(x).astype(np.float64 if x.dtype.kind == "f" else np.int64).reshape(-1).tolist()
                       for x in xs]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_compare"))
    out = {name: Case(name, data, xs, workdir) for name, (data, xs) in models().items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([c.inputs], f)
        floats = "f32" in c.name and not c.name.startswith(("select", "zeros", "fill"))
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": not floats})
    board = Board(workdir, "compare", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


def expect(case, got, want=None):
    got = np.asarray(got).reshape(-1)
    want = case.want if want is None else want
    if want.dtype.kind == "f":
        assert np.array_equal(got.astype(np.float32), want), case.name
    else:
        assert got.tolist() == want.astype(np.int64).tolist(), case.name


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        m(*c.inputs)
        expect(c, m.tolist())


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    expect(c, r["ys"][0][0])
    if "alloc" in r and not ("f32" in name and not name.startswith(("select", "zeros", "fill"))):
        assert r["alloc"] == [0], r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    got = reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.array(x) for x in c.inputs])[0]
    expect(c, got)


def test_the_cases_reach_both_answers(cases):
    """Every comparison, logical and select model gives both answers somewhere (a test of a
    constant answer would test nothing; two scales 0.1 and 0.037 apart meet at no code near the
    zero points), and the int8 pairs differ between the comparisons."""
    for name, c in cases[0].items():
        if not name.startswith(("zeros", "fill", "select")) and not name.endswith("equal_i8_other_q"):
            assert set(c.want.astype(int).tolist()) == {0, 1}, name
    assert cases[0]["less_pairs1"].want.tolist() != cases[0]["less_equal_pairs1"].want.tolist()


def _refused():
    b = ((1, 4), "bool", None, None)
    f = ((1, 4), "f32", None, None)
    return {
        "int16_less": (compare("LESS", "i16", (1, 4), (1, 4), (1, 4))[0], ("(LESS)", "INT16 LESS is not supported")),
        "int16_greater": (compare("GREATER", "i16", (1, 4), (1, 4), (1, 4))[0], ("(GREATER)", "never sets")),
        "big_scale": (compare("GREATER", "i8", (1, 4), (1, 4), (1, 4), (1.5, 0), (0.1, 0))[0],
                      ("(GREATER)", "an input scale of 1.5", "below 1")),
        "and_of_floats": (op_model("LOGICAL_AND", [f, f, b], 2)[0], ("(LOGICAL_AND)", "FLOAT32")),
        "select_float_condition": (op_model("SELECT_V2", [f, f, f, f], 3)[0], ("(SELECT_V2)",)),
        "bool_add": (model(OP.ADD, [b, b, b], [0, 1], [2], [0, 1]), ("(ADD)", "bool tensors")),
        "not_broadcast": (compare("EQUAL", "f32", (1, 4), (1, 3), (1, 4))[0], ("(EQUAL)", "do not broadcast")),
        "compare_to_float": (op_model("LESS", [f, f, f], 2)[0], ("(LESS)", "output of type FLOAT32")),
        "fill_dims": (model(OP.FILL, [((3,), "i32", None, np.array([1, 3, 4], np.int32)),
                                      ((), "f32", None, np.float32(1)), ((1, 3, 5), "f32", None, None),
                                      ((1, 2), "f32", None, None)], [3], [2], [0, 1]), ("(FILL)", "dims [1, 3, 4]")),
        "fill_computed_value": (model(OP.FILL, [((3,), "i32", None, np.array([1, 3, 5], np.int32)),
                                                ((1,), "f32", None, None), ((1, 3, 5), "f32", None, None)],
                                      [1], [2], [0, 1]), ("(FILL)", "must be a constant")),
    }


REFUSED = _refused()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_tflm_does_not_run_is_refused(cli, tmp_path, name):
    """Types and shapes TFLM's kernels do not take (int16 comparisons, whose parameters TFLM's
    Prepare never computes; an int8 scale of 1 or more, which its Prepare aborts on; logical
    ops on numbers; bool through another op), and FILL's trusted fields: one line naming the
    operator, no container written."""
    data, words = REFUSED[name]
    src, out = tmp_path / (name + ".tflite"), tmp_path / (name + ".mpyl")
    src.write_bytes(data)
    line = cli.fails("pack", src, "-o", out)
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()


@pytest.mark.parametrize("line, words", [
    ("less x=a,a y=y", ("t= (the rescaled codes",)),
    ("select x=a,a,a y=y", ("the condition (the first input) is i8",)),
    ("and x=a,a y=y", ("takes bool values, not i8",)),
    ("not x=f y=y", ("takes bool values, not f32",)),
    ("equal x=f,g y=y", ("do not broadcast",)),
    ("const y=y shape=4 code=1", ("one of t=tensor, value=number",)),
    ("const y=y shape=4 dtype=i8 code=300", ("code=300 outside i8's -128..127",)),
    ("const y=y shape=4 dtype=bool value=1.0", ("one of t=tensor, code=integer",)),
])
def test_bool_description_refused(line, words):
    """The description's comparisons, logical ops, select and const: each bad key refused in
    one line naming it."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    text = "input y=a shape=4 dtype=i8 q=0.1,0\ninput y=f shape=4\ninput y=g shape=3\n%s\noutput x=y" % line
    with pytest.raises(ContainerError) as e:
        Model(text)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_mpy_lazy_run_takes_and_gives_bools(cli, tmp_path):
    """`mpy-lazy run` on the unix port: a bool input from a .npy (numbers: true where not zero)
    and a bool output to one, equal to TFLM's."""
    data, xs = op_model("SELECT_V2", [((1, 4, 6), "bool", None, None), ((1, 4, 6), "f32", None, None),
                                      ((1, 4, 6), "f32", None, None), ((1, 4, 6), "f32", None, None)], 3)
    src, packed = tmp_path / "s.tflite", tmp_path / "s.mpyl"
    src.write_bytes(data)
    cli.ok("pack", src, "-o", packed, "-q")
    names = []
    for k, x in enumerate(xs):
        names.append(tmp_path / ("x%d.npy" % k))
        np.save(names[-1], x.astype(np.int8) if k == 0 else x)  # (the condition as 0s and 1s)
    cli.ok("run", packed, *sum([["--input", n] for n in names], []), "--output", tmp_path / "y.npy", "--repeat", "1")
    want = tflm_ref.run(data, [tuple(xs)], arena_size=ARENA)[0]
    assert np.array_equal(np.load(tmp_path / "y.npy").reshape(-1), np.asarray(want).reshape(-1))
    data, xs = compare("LESS", "f32", (1, 4, 6), (6,), (1, 4, 6))
    src.write_bytes(data)
    cli.ok("pack", src, "-o", packed, "-q")
    for k, x in enumerate(xs):
        np.save(names[k], x)
    out = cli.ok("run", packed, "--input", names[0], "--input", names[1], "--output", tmp_path / "y.npy",
                 "--repeat", "1")
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.bool_ and "bool" in out
    assert np.array_equal(y.reshape(-1), np.asarray(tflm_ref.run(data, [tuple(xs)], arena_size=ARENA)[0]).reshape(-1))
