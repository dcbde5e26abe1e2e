"""ADD, SUB and MUL with a constant operand of any shape that broadcasts over the activation, and
two activations where one repeats over the other's trailing dimensions (issue 29 item 3): the
importer broadcasts a constant over the output as far as it varies (a (1, H, 1, 1) one over
(1, H, W, C) becomes (H, W, C) values), the board copies it into the op's scratch (a load
record) and repeats it as the kernels repeat their second input. Small models written with
TFLM's schema module, run by the tflite-micro wheel (tests/tflm_ref.py) and by mpy-lazy on
CPython (pure kernels), on the unix port (viper, 0 B per integer inference) and by the host
reference: every output code equal (float32: within float32 rounding)."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: fixture)
from test_tflite_fold import OP, _opts, build  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402

X = (1, 4, 5, 6)
SHAPES = [(), (1,), (6,), (1, 1, 1, 6), (5, 6), (1, 4, 1, 1), (1, 1, 5, 1), (4, 1, 6), (1, 4, 5, 6)]
# (x q, constant q, output q) per dtype and op
Q = {("i8", "ADD"): ((0.05, -3), (0.02, 7), (0.08, 2)), ("i8", "SUB"): ((0.05, -3), (0.02, 7), (0.07, -5)),
     ("i8", "MUL"): ((0.05, -3), (0.02, 7), (0.03, -1)), ("i16", "ADD"): ((0.001, 0), (0.0004, 0), (0.0015, 0)),
     ("i16", "SUB"): ((0.001, 0), (0.0004, 0), (0.0012, 0)), ("i16", "MUL"): ((0.001, 0), (0.0004, 0), (0.0005, 0))}
OPTIONS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}
NP = {"i8": np.int8, "i16": np.int16, "f32": np.float32}


def values(dt, shape, rng):
    if dt == "f32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(NP[dt])
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(NP[dt])


def binary(op, dt, cshape, const_first=False, act=0, seed=0):
    """x (1, 4, 5, 6) OP a constant of cshape (or the constant OP x)."""
    rng = np.random.default_rng(seed)
    qx, qc, qy = Q.get((dt, op), (None, None, None))
    c = values(dt, cshape, rng)
    tensors = [(X, dt, qx, None), (cshape, dt, qc, c), (X, dt, qy, None)]
    ins = [1, 0] if const_first else [0, 1]
    data = build(tensors, [0], [2], [(getattr(OP, op), ins, [2], _opts(OPTIONS[op], fusedActivationFunction=act))])
    return data, [values(dt, X[1:], rng)]


def two_values(op, dt, bshape, ashape=X):
    """x of ashape (1, 4, 5, 6) OP y of bshape, both model inputs."""
    rng = np.random.default_rng(7)
    qx, qc, qy = Q.get((dt, op), (None, None, None))
    out = tuple(np.broadcast_shapes(ashape, bshape))
    tensors = [(ashape, dt, qx, None), (bshape, dt, qc, None), (out, dt, qy, None)]
    data = build(tensors, [0, 1], [2], [(getattr(OP, op), [0, 1], [2], _opts(OPTIONS[op], fusedActivationFunction=0))])
    return data, [values(dt, ashape[1:], rng), values(dt, bshape[1:], rng)]


def models():
    out = {}
    for dt in ("i8", "f32"):
        for op in ("ADD", "SUB", "MUL"):
            for k, s in enumerate(SHAPES):
                out["%s_%s_c%d" % (dt, op.lower(), k)] = binary(op, dt, s, seed=k)
        out["%s_add_first" % dt] = binary("ADD", dt, (1, 4, 1, 1), const_first=True)
        out["%s_mul_first_relu" % dt] = binary("MUL", dt, (5, 6), const_first=True, act=1)
        out["%s_add_values" % dt] = two_values("ADD", dt, (1, 1, 5, 6))
        out["%s_sub_values" % dt] = two_values("SUB", dt, (1, 1, 1, 6))
        # both broadcast, an inner dimension, the first one smaller: move records spread them
        out["%s_mul_both" % dt] = two_values("MUL", dt, (1, 4, 1, 6), (1, 1, 5, 6))
        out["%s_add_inner" % dt] = two_values("ADD", dt, (1, 4, 5, 1))
        out["%s_sub_first_small" % dt] = two_values("SUB", dt, (1, 1, 5, 6), X)
        out["%s_sub_both" % dt] = two_values("SUB", dt, (1, 4, 5, 1), (1, 1, 5, 6))
    for op in ("ADD", "SUB", "MUL"):  # (TFLM's int16 MUL: zero points 0)
        for k in (0, 3, 5, 8):
            out["i16_%s_c%d" % (op.lower(), k)] = binary(op, "i16", SHAPES[k], seed=k)
    out["i16_mul_values"] = two_values("MUL", "i16", (1, 1, 5, 6))
    out["i16_mul_both"] = two_values("MUL", "i16", (1, 4, 1, 6), (1, 1, 5, 6))
    return out


NAMES = list(models())


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_broadcast"))
    out, jobs = {}, []
    for name, (data, xs) in models().items():
        src = os.path.join(workdir, name + ".tflite")
        with open(src, "wb") as f:
            f.write(data)
        want = np.asarray(tflm_ref.run(src, [tuple(xs) if len(xs) > 1 else xs[0]], arena_size=1 << 16)[0]).reshape(-1)
        pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", src, "-o", pack)
        with open(pack, "rb") as f:
            c = mpy_lazy.open(f.read())
        inputs = [x.reshape(-1).tolist() for x in xs]
        out[name] = (c, inputs, want)
        with open(os.path.join(workdir, name + ".json"), "w") as f:
            json.dump([inputs], f)
        jobs.append({"name": name + ".mpyl", "xs": os.path.join(workdir, name + ".json"), "multi": True,
                     "alloc": not name.startswith("f32")})
    board = Board(workdir, "broadcast", [os.path.join(workdir, n + ".mpyl") for n in NAMES], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def same(got, want):
    got = np.asarray(got, np.float64 if want.dtype.kind == "f" else np.int64).reshape(-1)
    if want.dtype.kind == "f":
        return np.allclose(got, want, rtol=1e-6, atol=1e-6)
    return got.tolist() == want.astype(np.int64).tolist()


@pytest.mark.parametrize("name", NAMES)
def test_broadcast_matches_tflm(cases, name):
    c, inputs, want = cases[0][name]
    assert len(set(want.tolist())) > 1
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        m(*inputs)
        assert same(m.tolist(), want), (name, m.tolist(), want.tolist())
    r = cases[1].get(name + ".mpyl")
    assert r["path"] == "viper"
    assert same(r["ys"][0][0], want), name
    if not name.startswith("f32"):
        assert r["alloc"] == [0], r["alloc"]
    got = reference.run(c.meta["graph"], tensors_of(c), *[np.array(x) for x in inputs])[0]
    assert same(got, want), name


@pytest.mark.parametrize("shapes, out, what", [
    (((1, 4, 1, 6), (1, 1, 5, 6)), (1, 4, 5, 7), "do not broadcast to it"),
    (((1, 4, 1, 6), (1, 1, 1, 6)), (1, 4, 5, 6), "do not broadcast to it"),
])
def test_shapes_that_do_not_broadcast_are_refused(cli, tmp_path, shapes, out, what):
    """Inputs whose broadcast is not the output's shape: refused naming the op and the shapes."""
    tensors = [(shapes[0], "i8", (0.05, 0), None), (shapes[1], "i8", (0.05, 0), None), (out, "i8", (0.1, 0), None)]
    src = tmp_path / "b.tflite"
    src.write_bytes(build(tensors, [0, 1], [2], [(OP.ADD, [0, 1], [2], _opts("AddOptions", fusedActivationFunction=0))]))
    line = cli.fails("pack", src, "-o", tmp_path / "b.mpyl")
    assert "operator 0 (ADD)" in line and what in line, line


def test_constant_larger_than_the_activation_is_refused(cli, tmp_path):
    """A constant that would broadcast the activation (the output larger than it): refused."""
    tensors = [((1, 1, 1, 6), "i8", (0.05, 0), None), (X, "i8", (0.05, 0), np.zeros(X, np.int8)),
               (X, "i8", (0.1, 0), None)]
    src = tmp_path / "c.tflite"
    src.write_bytes(build(tensors, [0], [2], [(OP.MUL, [0, 1], [2], _opts("MulOptions", fusedActivationFunction=0))]))
    line = cli.fails("pack", src, "-o", tmp_path / "c.mpyl")
    assert "operator 0 (MUL)" in line and "the constant is larger than the activation" in line, line


def test_int16_mul_with_a_zero_point_is_refused_as_tflm_refuses_it(cli, tmp_path):
    """TFLM's int16 MUL takes zero points 0 (its Prepare fails otherwise): refused naming it."""
    tensors = [(X, "i16", (0.001, 5), None), (X, "i16", (0.001, 0), None), (X, "i16", (0.001, 0), None)]
    src = tmp_path / "m.tflite"
    src.write_bytes(build(tensors, [0, 1], [2], [(OP.MUL, [0, 1], [2], _opts("MulOptions", fusedActivationFunction=0))]))
    with pytest.raises(RuntimeError):
        tflm_ref.run(str(src), [(np.zeros(X[1:], np.int16), np.zeros(X[1:], np.int16))], arena_size=1 << 16)
    line = cli.fails("pack", src, "-o", tmp_path / "m.mpyl")
    assert "operator 0 (MUL): input 0 (tensor 0) zero point 5: TFLM's int16 MUL takes zero points 0" in line, line
