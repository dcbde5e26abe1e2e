"""The remaining data movers and index ops (issue 29) against TensorFlow Lite Micro itself:
REVERSE_V2 (backward moves), each on the types TFLM's kernel takes that the board has, in
one-op .tflite models written with TFLM's own schema module (test_tflite_moves.one), run by
the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by mpy-lazy on
CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes allocated per integer
inference) and by the host reference interpreter: every output, every element equal; and the
fields TFLM's kernels trust, refused."""
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import cli, kernel_path, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import _opts  # noqa: E402
from test_tflite_moves import OP, _ints, expect, on_board, one  # noqa: E402

from mpy_lazy import model as mmodel  # noqa: E402


def cases_of(dt):
    out = {}
    for axes, shape in (([0], (6,)), ([1], (1, 5, 6)), ([-1], (1, 3, 4, 5)), ([1, 2], (1, 3, 4, 5)),
                        ([0, 1], (3, 4, 5)), ([2, 3], (1, 3, 4, 5))):
        out["reverse%s_%dd" % ("".join(str(a % len(shape)) for a in axes), len(shape))] = one(
            OP.REVERSE_V2, dt, shape, [shape], [_ints(axes)])
    return {"%s_%s" % (k, dt): v for k, v in out.items()}


def models():
    out = {}
    for dt in ("i8", "i16", "i32", "f32"):
        out.update(cases_of(dt))
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out, board = on_board(models(), str(tmp_path_factory.mktemp("tflite_moves2")), "moves2")
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
        expect(c, [m.tolist(i) for i in range(len(c.want))])


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    expect(c, r["ys"][0])
    if "f32" not in name:
        assert r["alloc"] == [0], r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    got = reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.array(x) for x in c.inputs])
    expect(c, got)


# name -> (.tflite bytes, words of the one-line refusal)
REFUSED = {
    "reverse_apart": (one(OP.REVERSE_V2, "i8", (1, 3, 4, 5), [(1, 3, 4, 5)], [_ints([1, 3])])[0],
                      ("operator 0 (REVERSE_V2)", "axes [1, 3]: not contiguous")),
    "reverse_axis": (one(OP.REVERSE_V2, "i8", (1, 3, 4), [(1, 3, 4)], [_ints([3])])[0],
                     ("(REVERSE_V2)", "axes [3] outside")),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_malformed_moves_are_refused(cli, tmp_path, name):
    """What TFLM's kernels refuse or trust: refused in one line naming the operator and the
    field, no container written."""
    data, words = REFUSED[name]
    src, out = tmp_path / (name + ".tflite"), tmp_path / (name + ".mpyl")
    src.write_bytes(data)
    line = cli.fails("pack", src, "-o", out)
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()
