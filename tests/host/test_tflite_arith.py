"""SQUARED_DIFFERENCE (float32, int32, and int8 on every pair of codes, int16: TFLM's rescaled
arithmetic), FLOOR_DIV and FLOOR_MOD (float32), ADD_N (float32, int8) against TensorFlow Lite
Micro itself (issue 29), with numpy's broadcasting and constant operands, in one-op .tflite
models written with TFLM's own schema module, run by the tflite-micro wheel (tests/tflm_ref.py),
packed with `mpy-lazy pack` and run by mpy-lazy on CPython (the pure kernels), on the
MicroPython unix port (viper, 0 bytes allocated per integer inference) and by the host
reference interpreter: every element equal."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, kernel_path, tensors_of  # noqa: E402
from test_tflite_compare import Case, expect  # noqa: E402
from test_tflite_elem import CODES, TYPES, model  # noqa: E402

from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator
Q = {"i8": (0.05, -7), "i16": (0.001, 0), "i32": None, "f32": None}


def _x(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if dt == "f32":  # (no zero: TFLM's FLOOR_DIV fails on a zero divisor)
        v = rng.standard_normal(shape) * 8
        return np.where(np.abs(v) < 0.01, 0.5, v).astype(np.float32)
    info = np.iinfo(TYPES[dt][1])
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(TYPES[dt][1])


def op_model(op, tensors, n_in):
    """tensors: the inputs' then the output's (shape, dtype, q, constant or None)."""
    ins = [k for k in range(n_in) if tensors[k][3] is None]
    data = model(getattr(OP, op), tensors, ins, [n_in], list(range(n_in)))
    return data, [_x(tensors[k][1], tensors[k][0], 21 + k) for k in ins]


def binary(op, dt, s1, s2, so, q1=None, q2=None, qo=None, const=None):
    return op_model(op, [(s1, dt, q1 or Q[dt], None), (s2, dt, q2 or Q[dt], const), (so, dt, qo or Q[dt], None)], 2)


def every_pair(q1, q2, qo):
    data = model(OP.SQUARED_DIFFERENCE, [((1, 256, 256), "i8", q1, None), ((1, 256, 256), "i8", q2, None),
                                         ((1, 256, 256), "i8", qo, None)], [0, 1], [2], [0, 1])
    return data, [np.repeat(CODES, 256).reshape(1, 256, 256), np.tile(CODES, 256).reshape(1, 256, 256)]


SQ_Q = [((0.05, -3), (0.05, -3), (0.01, -128)), ((0.02, 10), (0.07, -100), (0.3, -128)),
        ((0.5, 127), (0.003, -128), (2.0, 0))]


def models():
    out = {}
    for i, qs in enumerate(SQ_Q):
        out["sqdiff_pairs%d" % i] = every_pair(*qs)
    for dt in ("f32", "i8", "i16", "i32"):
        qo = {"i8": (0.3, -100), "i16": (0.05, 0)}.get(dt)
        out["sqdiff_%s" % dt] = binary("SQUARED_DIFFERENCE", dt, (1, 4, 6), (1, 4, 6), (1, 4, 6), qo=qo)
        out["sqdiff_%s_channel" % dt] = binary("SQUARED_DIFFERENCE", dt, (1, 4, 6), (6,), (1, 4, 6), qo=qo)
        out["sqdiff_%s_outer" % dt] = binary("SQUARED_DIFFERENCE", dt, (1, 4, 1), (1, 1, 6), (1, 4, 6), qo=qo)
        out["sqdiff_%s_const" % dt] = binary("SQUARED_DIFFERENCE", dt, (1, 4, 6), (), (1, 4, 6), qo=qo,
                                             const=_x(dt, (), 9))
    for op in ("FLOOR_DIV", "FLOOR_MOD"):
        o = op.lower()
        out["%s_f32" % o] = binary(op, "f32", (1, 5, 8), (1, 5, 8), (1, 5, 8))
        out["%s_f32_channel" % o] = binary(op, "f32", (1, 5, 8), (8,), (1, 5, 8))
        out["%s_f32_const" % o] = binary(op, "f32", (1, 5, 8), (), (1, 5, 8), const=np.float32(-2.5))
    for k in (2, 3, 5):
        out["add_n%d_f32" % k] = op_model("ADD_N", [((1, 4, 6), "f32", None, None)] * (k + 1), k)
        out["add_n%d_i8" % k] = op_model("ADD_N", [((1, 4, 6), "i8", (0.05, -7), None)] * k
                                         + [((1, 4, 6), "i8", (0.11, 3), None)], k)
    out["add_n3_i8_wide"] = op_model("ADD_N", [((1, 16, 16), "i8", (0.02, 100), None)] * 3
                                     + [((1, 16, 16), "i8", (0.015, -128), None)], 3)
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_arith"))
    out = {name: Case(name, data, xs, workdir) for name, (data, xs) in models().items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([c.inputs], f)
        # (the board's harness measures a call of up to three inputs)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True,
                     "alloc": "f32" not in c.name and len(c.xs) <= 3})
    board = Board(workdir, "arith", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


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
    if "f32" not in name and len(c.xs) <= 3:
        assert r["alloc"] == [0], r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    got = reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.array(x) for x in c.inputs])[0]
    expect(c, got)


def test_the_cases_reach_the_edges(cases):
    """The int8 pairs saturate both ways, the int32 squares wrap, floor_mod adds the divisor
    somewhere, and an int8 ADD_N saturates (else they would test less)."""
    w = cases[0]
    for i, (_, _, qo) in enumerate(SQ_Q):  # (a square's least code is the zero point's)
        want = w["sqdiff_pairs%d" % i].want
        assert 127 in want.tolist() and want.min() == qo[1], i
    x1, x2 = (np.asarray(x, np.int64) for x in w["sqdiff_i32"].xs)
    assert np.any((x1 - x2) ** 2 > 2 ** 31), "no int32 square wraps"
    a, b = (np.asarray(x, np.float32) for x in w["floor_mod_f32"].xs)
    assert np.any((np.fmod(a, b) != 0) & ((np.fmod(a, b) < 0) != (b < 0)))
    assert 127 in w["add_n5_i8"].want.tolist() or -128 in w["add_n5_i8"].want.tolist()
