"""The float functions of one operand (issue 29) against TensorFlow Lite Micro itself: NEG, SQRT,
RSQRT, SQUARE, EXP, LOG, SIN, COS, FLOOR, CEIL, ROUND, ELU on float32 (edge values: signed zeros,
halves, infinities, NaN, overflow, denormals), and RSQRT and ELU on int8 (every code, at several
scales: lut tables of TFLM's arithmetic), in one-op .tflite models written with TFLM's own schema
module, run by the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by
mpy-lazy on CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes allocated
per int8 inference) and by the host reference interpreter: every element equal (floats: the same
float32, or both NaN)."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import ARENA, CODES, model  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator
FLOAT_OPS = ("NEG", "SQRT", "RSQRT", "SQUARE", "EXP", "LOG", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "ELU")
_RNG = np.random.default_rng(29)
# edge values: every op gets them on CPython and the host reference (NaN and inf there too)
EDGE = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 1.0, -1.0, 3.0, 1e-30, -1e-30,
                 1e-45, -1e-45, 1e-7, -1e-7, 88.5, 89.0, -104.0, 1e20, -1e20, 3e38, -3e38, 8388607.5, -8388607.5,
                 8388609.0, 1e-39, 100.0, -100.0, 7.0e5, np.inf, -np.inf, np.nan], np.float32)
SPREAD = np.concatenate([_RNG.standard_normal(200) * 4, np.exp(_RNG.uniform(-30, 30, 100)),
                         -np.exp(_RNG.uniform(-30, 30, 100))]).astype(np.float32)
# the values on the board, whose inputs and outputs travel as JSON (no NaN, no infinity): in each
# op's domain, beyond it not
DOMAIN = {"SQRT": lambda v: v >= 0, "RSQRT": lambda v: v > 0, "LOG": lambda v: v > 0,
          "EXP": lambda v: v < 88.0, "SQUARE": lambda v: np.abs(v) < 1e19}
ELU_Q = [((0.05, -3), (0.04, 20)), ((0.1, 60), (0.05, -128)), ((0.3, 0), (0.2, 5)), ((0.0078125, -128), (0.01, -30))]
RSQRT_Q = [((0.05, -3), (0.04, -100)), ((0.5, -128), (0.01, -128)), ((0.002, 10), (0.3, 0)), ((1.0, 0), (0.1, -50))]


def unary(op, dt, x, qi=None, qo=None):
    n = x.size
    return model(getattr(OP, op), [((1, n), dt, qi, None), ((1, n), dt, qo, None)], [0], [1], [0]), [x.reshape(1, n)]


def models():
    """name -> (.tflite bytes, [one input], board input or None where the CPython one serves)."""
    out = {}
    x = np.concatenate([EDGE, SPREAD])
    for op in FLOAT_OPS:
        fin = x[np.isfinite(x)]
        board = fin[DOMAIN[op](fin)] if op in DOMAIN else fin
        out["%s_f32" % op.lower()] = unary(op, "f32", x) + (board,)
    for i, (qi, qo) in enumerate(ELU_Q):
        out["elu_i8_%d" % i] = unary("ELU", "i8", CODES, qi, qo) + (None,)
    for i, (qi, qo) in enumerate(RSQRT_Q):  # (TFLM fails on a code below the zero point)
        out["rsqrt_i8_%d" % i] = unary("RSQRT", "i8", CODES[CODES >= qi[1]], qi, qo) + (None,)
    return out


class Case:
    def __init__(self, name, data, xs, board, workdir):
        self.name = name
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.x = xs[0]
        self.want = np.asarray(tflm_ref.run(self.src, [xs[0]], arena_size=ARENA)[0]).reshape(-1)
        if board is None:
            self.board_x, self.board_want = self.x, self.want
        else:
            self.board_x, n = board, board.size  # (the model's input size: padded with the first values)
            padded = np.concatenate([board, np.resize(board, xs[0].size - n)]).reshape(xs[0].shape)
            self.board_x = padded
            self.board_want = np.asarray(tflm_ref.run(self.src, [padded], arena_size=ARENA)[0]).reshape(-1)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_unary"))
    out = {name: Case(name, data, xs, board, workdir) for name, (data, xs, board) in models().items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([[c.board_x.reshape(-1).tolist()]], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": "f32" not in c.name})
    board = Board(workdir, "unary", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


# TFLM calls the C library's expf, logf, sinf, cosf, expm1f, which are not always correctly
# rounded: mpy-lazy's result (the function rounded once) may be the float32 next to theirs
ROUNDED = ("exp", "log", "sin", "cos", "elu")
ULPS = {}  # name -> how many elements differ by one ulp (test_transcendentals_within_one_ulp)


def expect(name, got, want):
    got = np.asarray(got).reshape(-1)
    if want.dtype.kind == "f":
        g = got.astype(np.float32)
        same = (g == want) | (np.isnan(g) & np.isnan(want))
        if name.split("_")[0] in ROUNDED:
            near = np.isfinite(want) & (np.abs(g.view(np.int32).astype(np.int64) - want.view(np.int32)) <= 1) & \
                (np.signbit(g) == np.signbit(want))
            ULPS[name] = int(np.sum(~same & near))
            same |= near
        assert same.all(), (name, [(a, b) for a, b in zip(g[~same], want[~same])][:8])
    else:
        assert got.tolist() == want.astype(np.int64).tolist(), name


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        m(c.x.reshape(-1).tolist())
        expect(name, m.tolist(), c.want)


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    expect(name, r["ys"][0][0], c.board_want)
    if "f32" not in name:
        assert r["alloc"] == [0], r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    got = reference.run(c.c.meta["graph"], tensors_of(c.c), np.array(c.x))[0]
    expect(name, got, c.want)


def test_edge_values_reach_the_special_cases(cases):
    """The float inputs reach what the kernels special-case: NaN and infinities out of finite
    inputs (log 0, sqrt and log of negatives, exp and square overflowing), halves rounded to
    even, and a -0.0 kept."""
    w = {n: cases[0][n + "_f32"].want for n in ("log", "sqrt", "exp", "square", "round", "ceil")}
    k = {float(v): i for i, v in enumerate(EDGE.tolist()) if v == v}
    k[3e38] = k[float(np.float32(3e38))]
    assert w["log"][k[0.0]] == -np.inf and np.isnan(w["log"][k[-1.0]]) and np.isnan(w["sqrt"][k[-1.0]])
    assert w["exp"][k[89.0]] == np.inf and w["square"][k[3e38]] == np.inf
    assert w["round"][k[2.5]] == 2.0 and w["round"][k[-2.5]] == -2.0 and w["round"][k[1.5]] == 2.0
    assert np.signbit(w["ceil"][list(EDGE).index(np.float32(-0.5))])


@pytest.mark.parametrize("op, dt", [("NEG", "i8"), ("SQRT", "i8"), ("ELU", "i16"), ("RSQRT", "i16"), ("EXP", "i32")])
def test_types_tflm_refuses_are_refused(cli, tmp_path, op, dt):
    """Integer forms TFLM's kernel does not take: refused in one line naming the op and the type."""
    q = None if dt == "i32" else ((0.05, 0) if dt == "i16" else (0.05, -3))
    data, _ = unary(op, dt, np.zeros(4, np.int8), q, q)
    src = tmp_path / "m.tflite"
    src.write_bytes(data)
    line = cli.fails("pack", src, "-o", tmp_path / "m.mpyl")
    assert "(%s)" % op in line and "is not supported" in line, line
    assert not (tmp_path / "m.mpyl").exists()


def test_transcendentals_within_one_ulp(cases):
    """Where mpy-lazy's exp, log, sin, cos, elu differ from TFLM's, by one ulp, and rarely (the
    C library's rounding, not a formula of ours)."""
    for op in ROUNDED:
        c = cases[0][op + "_f32"]
        with kernel_path("pure"):
            m = mmodel.from_container(c.c)
            m(c.x.reshape(-1).tolist())
            expect(c.name, m.tolist(), c.want)
        assert ULPS[c.name] <= c.want.size // 50, (c.name, ULPS[c.name])
    print("one-ulp differences:", {op: ULPS[op + "_f32"] for op in ROUNDED})
