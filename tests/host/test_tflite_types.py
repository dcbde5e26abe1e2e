"""The other tensor types TFLM's data-moving, comparing and casting kernels take (issue 29), against
TensorFlow Lite Micro itself: SLICE, STRIDED_SLICE, REVERSE_V2 and CONCATENATION on bool; REVERSE_V2
on uint8; CAST from bool; DEQUANTIZE from uint8 (every code); int64 (8 bytes an element, moved as
two words) through REVERSE_V2, CONCATENATION, PACK and ZEROS_LIKE, and EQUAL, NOT_EQUAL, LESS,
LESS_EQUAL, GREATER, GREATER_EQUAL, MINIMUM and MAXIMUM (words equal, or differing in the low half
only: its sign bit compared unsigned), an operand constant too. One-op .tflite models written with
TFLM's own schema module (test_tflite_elem.model), run by the tflite-micro wheel
(tests/tflm_ref.py), packed with `mpy-lazy pack` and run by mpy-lazy on CPython (the pure
kernels), on the MicroPython unix port (viper, 0 bytes allocated per integer inference) and by the
host reference interpreter: every element equal."""
import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from test_tflite_elem import _opts, model  # noqa: E402
from host_util import cli  # noqa: E402,F401 (a fixture)
from test_tflite_moves import _ints, expect, on_board, tflm_tests  # noqa: E402

from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

OP = S.BuiltinOperator


def _bools(shape, seed):
    return np.random.default_rng(seed).integers(0, 2, shape).astype(np.bool_)


def _op(op, dt, x, out_shape, consts=(), options=None, q=None):
    """x -> op -> one output of dt; consts: int32 inputs after x."""
    tensors = [(x.shape, dt, q, None)] + [(c.shape or (1,), "i32", None, c) for c in consts]
    tensors.append((out_shape, dt, q, None))
    n = len(tensors)
    return model(op, tensors, [0], [n - 1], list(range(n - 1)), options), [x]


def _longs(shape, seed):
    """int64 over the whole range, with words that differ in the low half only and in its sign bit."""
    x = np.random.default_rng(seed).integers(-2 ** 63, 2 ** 63 - 1, shape, endpoint=True).astype(np.int64)
    flat = x.reshape(-1)
    flat[:6] = (-2 ** 63, 2 ** 63 - 1, -1, 0, 1 << 31, (1 << 32) - 1)
    return x


def models():
    out = {}
    a, b = _longs((1, 5, 6), 6), _longs((1, 5, 6), 7)
    out["reverse_i64"] = _op(OP.REVERSE_V2, "i64", a, a.shape, [_ints([1])])
    out["concat_i64"] = model(OP.CONCATENATION, [(a.shape, "i64", None, None), (b.shape, "i64", None, None),
                                                 ((1, 5, 12), "i64", None, None)], [0, 1], [2], [0, 1],
                              _opts("ConcatenationOptions", axis=-1)), [a, b]
    for axis in (1, 2, 3):
        y = list(a.shape)
        y.insert(axis, 2)
        out["pack%d_i64" % axis] = model(OP.PACK, [(a.shape, "i64", None, None), (b.shape, "i64", None, None),
                                                   (tuple(y), "i64", None, None)], [0, 1], [2], [0, 1],
                                         _opts("PackOptions", valuesCount=2, axis=axis)), [a, b]
    out["zeros_like_i64"] = _op(OP.ZEROS_LIKE, "i64", a, a.shape)
    b2 = b.copy()  # equal, and differing in the low word only, by one and in its sign bit
    b2[0, 0], b2[0, 1], b2[0, 2], b2[0, 3] = a[0, 0], a[0, 1] + 1, a[0, 2] ^ (1 << 31), a[0, 3] - 1
    per_channel = _longs((6,), 8)
    per_channel[:3] = (a[0, 0, 0], a[0, 4, 1] + 1, a[0, 4, 2] - (1 << 31))
    for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
        out["%s_i64" % op.lower()] = model(getattr(OP, op), [(a.shape, "i64", None, None), (a.shape, "i64", None, None),
                                                             (a.shape, "bool", None, None)], [0, 1], [2], [0, 1]), [a, b2]
    for op, c in (("GREATER", per_channel), ("EQUAL", np.zeros(1, np.int64))):
        out["%s_const_i64" % op.lower()] = model(getattr(OP, op), [(a.shape, "i64", None, None),
                                                                   (c.shape, "i64", None, c),
                                                                   (a.shape, "bool", None, None)], [0], [2], [0, 1]), [a]
    for op in ("MINIMUM", "MAXIMUM"):
        out["%s_i64" % op.lower()] = model(getattr(OP, op), [(a.shape, "i64", None, None), (a.shape, "i64", None, None),
                                                             (a.shape, "i64", None, None)], [0, 1], [2], [0, 1]), [a, b2]
        out["%s_const_i64" % op.lower()] = model(getattr(OP, op), [(a.shape, "i64", None, None),
                                                                   ((6,), "i64", None, per_channel),
                                                                   (a.shape, "i64", None, None)], [0], [2], [0, 1]), [a]
    x = _bools((1, 5, 6, 7), 1)
    out["slice_bool"] = _op(OP.SLICE, "bool", x, (1, 3, 4, 2), [_ints([0, 1, 2, 3]), _ints([1, 3, -1, 2])])
    ss = _opts("StridedSliceOptions", beginMask=0b0100, endMask=0b1000, shrinkAxisMask=0b0010)
    out["strided_slice_bool"] = _op(OP.STRIDED_SLICE, "bool", x, (1, 3, 3),
                                    [_ints([0, -2, 5, 1]), _ints([1, 0, 5, 0]), _ints([1, 1, 2, 2])], ss)
    out["reverse_bool"] = _op(OP.REVERSE_V2, "bool", x, x.shape, [_ints([1, 2])])
    u = np.random.default_rng(2).integers(0, 256, (1, 5, 6), endpoint=False).astype(np.uint8)
    u[0, 0, :2] = (0, 255)
    out["reverse_u8"] = _op(OP.REVERSE_V2, "u8", u, u.shape, [_ints([-1])])
    a, b = _bools((1, 4, 5, 3), 3), _bools((1, 4, 5, 2), 4)
    out["concat_bool"] = model(OP.CONCATENATION, [(a.shape, "bool", None, None), (b.shape, "bool", None, None),
                                                  ((1, 4, 5, 5), "bool", None, None)], [0, 1], [2], [0, 1],
                               _opts("ConcatenationOptions", axis=-1)), [a, b]
    x = _bools((1, 3, 8), 5)
    for dt in ("i8", "i16", "i32", "f32", "u32"):
        out["cast_bool_%s" % dt] = model(OP.CAST, [(x.shape, "bool", None, None), (x.shape, dt, None, None)],
                                         [0], [1], [0]), [x]
    codes = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
    for k, (scale, zp) in enumerate(((0.1, 130), (0.0039, 0), (3.7e-5, 255))):
        out["dequantize_u8_f32_%d" % k] = model(OP.DEQUANTIZE, [(codes.shape, "u8", (scale, zp), None),
                                                                (codes.shape, "f32", None, None)],
                                                [0], [1], [0]), [codes]
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out, board = on_board(models(), str(tmp_path_factory.mktemp("tflite_types")), "types")
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())
test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)


def _refused():
    a = _longs((1, 8), 9)
    x = _bools((1, 8), 10)
    return {  # name -> (.tflite bytes, words of the one-line refusal)
        "add_i64": (model(OP.ADD, [(a.shape, "i64", None, None), (a.shape, "i64", None, None),
                                   (a.shape, "i64", None, None)], [0, 1], [2], [0, 1]),
                    ("(ADD)", "INT64 tensors", "MINIMUM")),
        "cast_to_bool": (model(OP.CAST, [(a.shape, "i32", None, None), (a.shape, "bool", None, None)],
                               [0], [1], [0]), ("(CAST)", "to BOOL")),
        "greater_i16": (model(OP.GREATER, [(a.shape, "i16", (0.01, 0), None), (a.shape, "i16", (0.01, 0), None),
                                           (a.shape, "bool", None, None)], [0, 1], [2], [0, 1]),
                        ("(GREATER)", "never sets")),
        "tanh_bool": (model(OP.TANH, [(x.shape, "bool", None, None), (x.shape, "bool", None, None)], [0], [1], [0]),
                      ("(TANH)", "bool tensors")),
    }


@pytest.mark.parametrize("name", sorted(_refused()))
def test_types_tflm_does_not_run_are_refused(cli, tmp_path, name):
    """What TFLM's kernels do not run on these types (or run wrongly): refused in one line naming
    the operator, no container written."""
    data, words = _refused()[name]
    src, out = tmp_path / (name + ".tflite"), tmp_path / (name + ".mpyl")
    src.write_bytes(data)
    line = cli.fails("pack", src, "-o", out)
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()


def test_mpy_lazy_run_takes_and_gives_int64(cli, tmp_path):
    """`mpy-lazy run` on the unix port: int64 inputs from .npy files (their numbers, exactly) and
    an int64 output to one, equal to TFLM's."""
    data, xs = models()["maximum_i64"]
    src, packed = tmp_path / "m.tflite", tmp_path / "m.mpyl"
    src.write_bytes(data)
    cli.ok("pack", src, "-o", packed, "-q")
    names = []
    for k, x in enumerate(xs):
        names.append(tmp_path / ("x%d.npy" % k))
        np.save(names[-1], x)
    out = cli.ok("run", packed, "--input", names[0], "--input", names[1], "--output", tmp_path / "y.npy",
                 "--repeat", "1")
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int64 and "i64" in out
    want = tflm_ref.run(data, [tuple(xs)], arena_size=1 << 20)[0]
    assert y.reshape(-1).tolist() == np.asarray(want).reshape(-1).tolist()
