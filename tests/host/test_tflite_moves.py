"""The data-moving builtins (issue 29) against TensorFlow Lite Micro itself: SQUEEZE,
EXPAND_DIMS, SLICE, SPLIT, SPLIT_V and UNPACK (several outputs: one slice each), STRIDED_SLICE
with its begin, end and shrink-axis masks, PACK and CONCATENATION on every axis, each on int8,
int16, int32 and float32 (the types TFLM's kernels take that the board has; its EXPAND_DIMS
takes no int32), in one-op .tflite models written with TFLM's own schema module, run by the
tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by mpy-lazy on
CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes allocated per integer
inference) and by the host reference interpreter: every output, every element equal; and the
fields TFLM's kernels trust, refused."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import ARENA, TYPES, _opts, model  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

Q = {"i8": (0.05, -7), "i16": (0.001, 0), "i32": None, "f32": None}
OP = S.BuiltinOperator


def _x(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if dt == "f32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(TYPES[dt][1])
    lo, hi = max(info.min, -(1 << 20)), min(info.max, 1 << 20)
    return rng.integers(lo, hi, shape, endpoint=True).astype(TYPES[dt][1])


def _ints(v):
    return np.asarray(v, np.int32)


def one(op, dt, shape, outs, consts=(), options=None, data_at=0, n_in=1):
    """A model: `n_in` inputs of `shape` (dtype dt), constant int32 inputs `consts` placed from
    position 0 with the data input at `data_at`, outputs of shapes `outs`."""
    q = Q[dt]
    tensors = [(shape, dt, q, None) for _ in range(n_in)]
    op_inputs = list(range(n_in))
    for c in consts:  # int32 arrays, or (array, dtype, q)
        c = c if isinstance(c, tuple) else (c, "i32", None)
        tensors.append((c[0].shape or (1,), c[1], c[2], c[0]))
    cin = list(range(n_in, n_in + len(consts)))
    if data_at:
        op_inputs = cin[:data_at] + op_inputs + cin[data_at:]
    else:
        op_inputs = op_inputs + cin
    first = len(tensors)
    tensors += [(s, dt, q, None) for s in outs]
    out_ix = list(range(first, first + len(outs)))
    data = model(op, tensors, list(range(n_in)), out_ix, op_inputs, options)
    xs = [_x(dt, shape, 7 + k)[0] if shape[0] == 1 and len(shape) > 1 else _x(dt, shape, 7 + k) for k in range(n_in)]
    return data, xs


def _save(m):
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def cases_of(dt):
    out = {}
    out["squeeze"] = one(OP.SQUEEZE, dt, (1, 4, 1, 6), [(1, 4, 6)], options=_opts("SqueezeOptions", squeezeDims=[2]))
    if dt != "i32":  # (TFLM's EXPAND_DIMS takes int8, int16 and float32)
        out["expand_dims"] = one(OP.EXPAND_DIMS, dt, (1, 5, 6), [(1, 5, 1, 6)], [_ints([-2])])
    out["slice"] = one(OP.SLICE, dt, (1, 5, 6, 7), [(1, 3, 4, 2)], [_ints([0, 1, 2, 3]), _ints([1, 3, -1, 2])])
    out["slice_2d"] = one(OP.SLICE, dt, (4, 9), [(2, 5)], [_ints([1, 3]), _ints([2, 5])])
    for axis in (1, 2, 3, -1):
        out["split%d" % axis] = one(OP.SPLIT, dt, (1, 4, 6, 6), [[1, 4, 6, 6][:axis % 4] + [2] +
                                                                  [1, 4, 6, 6][axis % 4 + 1:]] * [0, 2, 3, 3][axis % 4],
                                    [_ints(axis)], _opts("SplitOptions", numSplits=[0, 2, 3, 3][axis % 4]), data_at=1)
    out["split_v"] = one(OP.SPLIT_V, dt, (1, 3, 10), [(1, 3, 2), (1, 3, 5), (1, 3, 3)], [_ints([2, -1, 3]), _ints(2)],
                         _opts("SplitVOptions", numSplits=3))
    out["split_v_rows"] = one(OP.SPLIT_V, dt, (1, 6, 4, 2), [(1, 1, 4, 2), (1, 5, 4, 2)], [_ints([1, 5]), _ints(1)],
                              _opts("SplitVOptions", numSplits=2))
    for axis, shape in ((0, (3, 4, 5)), (1, (1, 3, 4, 5)), (2, (1, 3, 4, 5)), (-1, (1, 3, 4, 5))):
        a = axis % len(shape)
        outs = [tuple(d for k, d in enumerate(shape) if k != a)] * shape[a]
        out["unpack%d_%dd" % (axis, len(shape))] = one(OP.UNPACK, dt, shape, outs,
                                                        options=_opts("UnpackOptions", num=shape[a], axis=axis))
    ss = _opts("StridedSliceOptions", beginMask=0b0100, endMask=0b1000, shrinkAxisMask=0b0010)
    out["strided_shrink"] = one(OP.STRIDED_SLICE, dt, (1, 5, 6, 7), [(1, 3, 3)],
                                [_ints([0, -2, 5, 1]), _ints([1, 0, 5, 0]), _ints([1, 1, 2, 2])], ss)
    ss = _opts("StridedSliceOptions", shrinkAxisMask=0b101)
    out["strided_shrink_2d"] = one(OP.STRIDED_SLICE, dt, (3, 4, 9), [(2,)],
                                   [_ints([1, 1, 2]), _ints([2, 4, 3]), _ints([1, 2, 1])], ss)
    for axis, shape in ((0, (4, 5)), (1, (1, 4, 5)), (2, (1, 4, 5)), (-1, (1, 4, 5))):
        a = axis % (len(shape) + 1)
        y = tuple(shape[:a]) + (3,) + tuple(shape[a:])
        out["pack%d_%dd" % (axis, len(shape))] = one(OP.PACK, dt, shape, [y], n_in=3,
                                                      options=_opts("PackOptions", valuesCount=3, axis=axis))
    data, xs = one(OP.PACK, dt, (1, 4, 5), [(1, 4, 2, 5)], options=_opts("PackOptions", valuesCount=2, axis=2))
    m = tflm_ref.read_model(data)  # the one input twice
    m.subgraphs[0].operators[0].inputs = [0, 0]
    out["pack_twice"] = (_save(m), xs)
    for axis in (1, 2, 3, -3):
        y = [1, 4, 5, 6]
        y[axis % 4] *= 2
        out["concat%d" % axis] = one(OP.CONCATENATION, dt, (1, 4, 5, 6), [y], n_in=2,
                                     options=_opts("ConcatenationOptions", axis=axis))
    pads = _ints([[0, 0], [1, 2], [0, 1], [2, 0]])
    out["pad_channels"] = one(OP.PAD, dt, (1, 3, 4, 5), [(1, 6, 5, 7)], [pads])
    out["pad_2d"] = one(OP.PAD, dt, (3, 4), [(6, 5)], [_ints([[1, 2], [0, 1]])])
    code = np.asarray([-3.25 if dt == "f32" else -100], TYPES[dt][1])
    out["padv2"] = one(OP.PADV2, dt, (1, 3, 4, 5), [(1, 6, 5, 7)], [pads, (code, dt, Q[dt])])
    if dt in ("i8", "f32"):  # (TFLM's MIRROR_PAD takes int8 and float32)
        for mode in (0, 1):
            out["mirror_pad%d" % mode] = one(OP.MIRROR_PAD, dt, (1, 3, 4, 5), [(1, 6 + mode, 5, 8 + mode)],
                                             [_ints([[0, 0], [1, 2 + mode], [0, 1], [2, 1 + mode]])],
                                             _opts("MirrorPadOptions", mode=mode))
    for b in (2, 3) if dt in ("i8", "f32") else ():  # (TFLM's take int8 and float32)
        out["depth_to_space%d" % b] = one(OP.DEPTH_TO_SPACE, dt, (1, 3, 2, 2 * b * b), [(1, 3 * b, 2 * b, 2)],
                                          options=_opts("DepthToSpaceOptions", blockSize=b))
        out["space_to_depth%d" % b] = one(OP.SPACE_TO_DEPTH, dt, (1, 2 * b, 3 * b, 2), [(1, 2, 3, 2 * b * b)],
                                          options=_opts("SpaceToDepthOptions", blockSize=b))
    return {"%s_%s" % (k, dt): v for k, v in out.items()}


def models():
    out = {}
    for dt in ("i8", "i16", "i32", "f32"):
        out.update(cases_of(dt))
    return out


class Case:
    def __init__(self, name, data, xs, workdir):
        self.name, self.xs = name, xs
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        y = tflm_ref.run(self.src, [tuple(xs) if len(xs) > 1 else xs[0]], arena_size=ARENA)[0]
        self.want = [np.asarray(v).reshape(-1) for v in (y if isinstance(y, tuple) else (y,))]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [np.asarray(x).reshape(-1).tolist() for x in xs]


def on_board(made, workdir, tag):
    """The Cases of `made` ({name: (.tflite bytes, inputs)}: packed, TFLM's answers) and a Board
    (the unix port) running each once (its heap allocations counted on the integer ones)."""
    out = {name: Case(name, data, xs, workdir) for name, (data, xs) in made.items()}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([c.inputs], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": "f32" not in c.name})
    return out, Board(workdir, tag, [c.pack for c in out.values()], jobs)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out, board = on_board(models(), str(tmp_path_factory.mktemp("tflite_moves")), "moves")
    try:
        yield out, board
    finally:
        board.stop()


NAMES = list(models())


def expect(case, got):
    assert len(got) == len(case.want), case.name
    for g, w in zip(got, case.want):
        g = np.asarray(g).reshape(-1)
        if w.dtype.kind == "f":
            assert np.array_equal(g.astype(np.float32), w), case.name
        else:
            assert g.tolist() == w.astype(np.int64).tolist(), case.name


def tflm_tests(names, expect):
    """The three comparisons of a module's one-op models with TFLM's outputs (`expect(case, got)`):
    CPython's pure kernels, the unix port's viper path (0 B per integer inference) and the host
    reference; the module's `cases` fixture gives (its Cases, the Board that ran them)."""

    @pytest.mark.parametrize("name", names)
    def test_cpython_matches_tflm(cases, name):
        c = cases[0][name]
        with kernel_path("pure"):
            m = mmodel.from_container(c.c)
            m(*c.inputs)
            expect(c, [m.tolist(i) for i in range(len(c.want))])

    @pytest.mark.parametrize("name", names)
    def test_micropython_matches_tflm(cases, name):
        c = cases[0][name]
        r = cases[1].get(os.path.basename(c.pack))
        assert r["path"] == "viper"
        expect(c, r["ys"][0])
        if "f32" not in name:
            assert r["alloc"] == [0], r["alloc"]

    @pytest.mark.parametrize("name", names)
    def test_host_reference_matches_tflm(cases, name):
        c = cases[0][name]
        got = reference.run(c.c.meta["graph"], tensors_of(c.c), *[np.array(x) for x in c.inputs])
        expect(c, got)

    return test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm


test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)


def _bad_q_split():
    data, _ = one(OP.SPLIT, "i8", (1, 4, 6), [(1, 2, 6)] * 2, [_ints(1)], _opts("SplitOptions", numSplits=2),
                  data_at=1)
    return data


# name -> (.tflite bytes, words of the one-line refusal)
REFUSED = {
    "split_uneven": (one(OP.SPLIT, "i8", (1, 5, 6), [(1, 2, 6)] * 2, [_ints(1)], _opts("SplitOptions", numSplits=2),
                         data_at=1)[0], ("operator 0 (SPLIT)", "num_splits 2", "size 5")),
    "split_shape": (one(OP.SPLIT, "i8", (1, 4, 6), [(1, 2, 6), (1, 2, 5)], [_ints(1)],
                        _opts("SplitOptions", numSplits=2), data_at=1)[0], ("(SPLIT)", "[1, 2, 5]", "[1, 2, 6]")),
    "split_axis": (one(OP.SPLIT, "i8", (1, 4, 6), [(1, 2, 6)] * 2, [_ints(3)], _opts("SplitOptions", numSplits=2),
                       data_at=1)[0], ("(SPLIT)", "axis 3 outside")),
    "split_v_sizes": (one(OP.SPLIT_V, "i8", (1, 3, 10), [(1, 3, 2), (1, 3, 9)], [_ints([2, 9]), _ints(2)],
                          _opts("SplitVOptions", numSplits=2))[0], ("(SPLIT_V)", "size_splits [2, 9]")),
    "unpack_num": (one(OP.UNPACK, "i8", (1, 3, 4), [(1, 4)] * 3, options=_opts("UnpackOptions", num=2, axis=1))[0],
                   ("(UNPACK)", "num 2")),
    "slice_beyond": (one(OP.SLICE, "f32", (1, 5, 6), [(1, 3, 4)], [_ints([0, 3, 0]), _ints([1, 3, 4])])[0],
                     ("(SLICE)", "axis 1: begin 3, size 3")),
    "pack_count": (one(OP.PACK, "i8", (1, 4), [(1, 2, 4)], n_in=2, options=_opts("PackOptions", valuesCount=3,
                                                                                   axis=1))[0],
                   ("(PACK)", "values_count 3 for 2 inputs")),
    "pack_shape": (one(OP.PACK, "i8", (1, 4), [(1, 3, 4)], n_in=2, options=_opts("PackOptions", valuesCount=2,
                                                                                   axis=1))[0],
                   ("(PACK)", "output of shape [1, 3, 4]", "[1, 2, 4]")),
    "strided_shrink_beyond": (one(OP.STRIDED_SLICE, "i8", (1, 5, 6), [(1, 6)], [_ints([0, 5, 0]), _ints([1, 6, 6]),
                                                                               _ints([1, 1, 1])],
                                  _opts("StridedSliceOptions", shrinkAxisMask=0b10))[0],
                              ("(STRIDED_SLICE)", "axis 1: shrink at 5 outside its 5")),
    "mirror_pad_wide": (one(OP.MIRROR_PAD, "i8", (1, 3, 4), [(1, 9, 4)], [_ints([[0, 0], [3, 3], [0, 0]])],
                            _opts("MirrorPadOptions", mode=0))[0],
                        ("(MIRROR_PAD)", "axis 0: reflect padding 3, 3 of 3")),
    "pad_batch": (one(OP.PAD, "i8", (1, 4), [(2, 4)], [_ints([[0, 1], [0, 0]])])[0],
                  ("(PAD)", "padding of the batch dimension")),
    "pad_shape": (one(OP.PAD, "f32", (1, 3, 4), [(1, 3, 5)], [_ints([[0, 0], [0, 0], [1, 1]])])[0],
                  ("(PAD)", "output of shape [1, 3, 5]", "[1, 3, 6]")),
    "padv2_value_q": (one(OP.PADV2, "i8", (1, 3, 4), [(1, 3, 6)], [_ints([[0, 0], [0, 0], [1, 1]]),
                                                                   (np.int8([3]), "i8", (0.5, 0))])[0],
                      ("(PADV2)", "padding value quantized (0.5, 0)")),
    "depth_to_space_block": (one(OP.DEPTH_TO_SPACE, "i8", (1, 2, 2, 6), [(1, 4, 4, 1)],
                                 options=_opts("DepthToSpaceOptions", blockSize=2))[0],
                             ("(DEPTH_TO_SPACE)", "block_size 2")),
    "squeeze_not_one": (one(OP.SQUEEZE, "i8", (1, 4, 1, 6), [(1, 1, 6)],
                            options=_opts("SqueezeOptions", squeezeDims=[1]))[0], ("(SQUEEZE)", "not 1")),
    "expand_dims_shape": (one(OP.EXPAND_DIMS, "i8", (1, 5, 6), [(1, 5, 6, 1)], [_ints([1])])[0],
                          ("(EXPAND_DIMS)", "output of shape [1, 5, 6, 1]", "[1, 1, 5, 6]")),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_malformed_moves_are_refused(cli, tmp_path, name):
    """Fields TFLM's kernels trust (output shapes, counts, axes): refused in one line naming the
    operator and the field, no container written."""
    data, words = REFUSED[name]
    src, out = tmp_path / (name + ".tflite"), tmp_path / (name + ".mpyl")
    src.write_bytes(data)
    line = cli.fails("pack", src, "-o", out)
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()


def test_split_outputs_of_another_quantization_are_refused(cli, tmp_path):
    """TFLM's SPLIT copies codes whatever the outputs' quantization: a model whose outputs
    have another one is refused, not given other values."""
    m = tflm_ref.read_model(_bad_q_split())
    sg = m.subgraphs[0]
    sg.tensors[sg.outputs[1]].quantization.scale = [0.1]
    src = tmp_path / "q.tflite"
    src.write_bytes(_save(m))
    line = cli.fails("pack", src, "-o", tmp_path / "q.mpyl")
    assert "(SPLIT)" in line and "quantized" in line, line


@pytest.mark.parametrize("line, words", [
    ("pad x=x y=y pad=1,1,1", ("pad=", "begin and an end for each of the 2 axes")),
    ("pad x=x y=y pad=0,3,0,0 mode=reflect", ("axis 1: reflect padding 3, 0 of 3",)),
    ("pad x=x y=y pad=0,4,0,0 mode=symmetric", ("axis 1: symmetric padding 4, 0 of 3",)),
    ("pad x=x y=y pad=1,1,1,1 code=200", ("code=200 outside i8's -128..127",)),
    ("pad x=x y=y pad=1,1,1,1 value=0.5", ("i8 values are padded with code=",)),
    ("depth2space x=x y=y block=2", ("needs an H,W,C value", "block")),
    ("depth2space x=x2 y=y block=2", ("6 channels: not a multiple of block x block = 4",)),
    ("space2depth x=x2 y=y block=2", ("height 3, width 2: not multiples of block 2",)),
    ("space2depth x=x2 y=y block=0", ("block >= 1",)),
])
def test_move_description_refused(line, words):
    """The graph description's pad, depth2space and space2depth: each bad key refused in one
    line naming it."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    with pytest.raises(ContainerError) as e:
        Model("input y=x shape=2,3 dtype=i8 q=0.1,0\ninput y=x2 shape=3,2,6 dtype=i8 q=0.1,0\n"
              "%s q=0.1,0\noutput x=y" % line)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
