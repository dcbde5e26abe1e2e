"""The remaining data movers and index ops (issue 29) against TensorFlow Lite Micro itself:
REVERSE_V2 and STRIDED_SLICE of negative strides (backward moves), TRANSPOSE (axes of 1 and the batch of 1 too), SLICE and PAD of 5-D tensors of leading 1s, BROADCAST_TO (moves of stride 0), BROADCAST_ARGS (computed at pack
time), SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (reshape, transpose, crop), each on the types TFLM's kernel takes that the board has, in
one-op .tflite models written with TFLM's own schema module (test_tflite_moves.one), run by
the tflite-micro wheel (tests/tflm_ref.py), packed with `mpy-lazy pack` and run by mpy-lazy on
CPython (the pure kernels), on the MicroPython unix port (viper, 0 bytes allocated per integer
inference) and by the host reference interpreter: every output, every element equal; and the
fields TFLM's kernels trust, refused."""
import copy
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import TYPES, _opts, model  # noqa: E402
from test_tflite_moves import OP, Q, _ints, _save, _x, expect, on_board, one, tflm_tests  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

TYPES.setdefault("i64", (S.TensorType.INT64, np.int64))


def cases_of(dt):
    out = {}
    for axes, shape in (([0], (6,)), ([1], (1, 5, 6)), ([-1], (1, 3, 4, 5)), ([1, 2], (1, 3, 4, 5)),
                        ([0, 1], (3, 4, 5)), ([2, 3], (1, 3, 4, 5))):
        out["reverse%s_%dd" % ("".join(str(a % len(shape)) for a in axes), len(shape))] = one(
            OP.REVERSE_V2, dt, shape, [shape], [_ints(axes)])
    for x, y in (((1, 1, 5), (1, 3, 4, 5)), ((1, 4, 1), (1, 2, 4, 3)), ((3, 1), (1, 2, 3, 4)), ((1,), (7,)),
                 ((2, 1, 4), (2, 3, 4)), ((1, 3), (4, 3)), ((1, 5), (1, 5)), ((1, 1, 4, 1), (1, 1, 3, 4, 2))):
        out["broadcast_to_%s" % "x".join(map(str, y))] = one(OP.BROADCAST_TO, dt, x, [y], [_ints(y)])
    out["broadcast_to_i64_shape"] = one(OP.BROADCAST_TO, dt, (1, 2, 1), [(1, 2, 3)],
                                        [(np.int64([1, 2, 3]), "i64", None)])
    out["broadcast_args"] = broadcast_args(dt)
    out["slice_5d"] = one(OP.SLICE, dt, (1, 1, 3, 4, 5), [(1, 1, 2, 4, 3)], [_ints([0, 0, 1, 0, 2]), _ints([1, 1, 2, 4, 3])])
    out["pad_5d"] = one(OP.PAD, dt, (1, 1, 3, 4, 5), [(1, 1, 4, 6, 5)], [_ints([[0, 0], [0, 0], [1, 0], [1, 1], [0, 0]])])
    if dt in ("i8", "f32"):
        out["broadcast_to_const_add"] = broadcast_const_add(dt)
    out["strided_backwards"] = one(OP.STRIDED_SLICE, dt, (1, 5, 6, 7), [(1, 4, 3, 3)],
                                   [_ints([0, 4, 0, 6]), _ints([1, 0, 6, 0]), _ints([1, -1, 2, -2])])
    out["strided_backwards_masks"] = one(OP.STRIDED_SLICE, dt, (1, 5, 6, 7), [(1, 3, 4, 6)],
                                         [_ints([0, 0, 1, 5]), _ints([1, 1, 5, 0]), _ints([1, -1, 1, -1])],
                                         _opts("StridedSliceOptions", beginMask=0b0010, endMask=0b1000))
    out["strided_backwards_2d"] = one(OP.STRIDED_SLICE, dt, (4, 9), [(4, 3)],
                                      [_ints([-1, 8]), _ints([-5, 0]), _ints([-1, -3])])
    for shape, perm in (((1, 4, 5, 6), (0, 2, 1, 3)), ((1, 4, 5, 6), (0, 3, 1, 2)), ((1, 1, 5, 6), (1, 0, 3, 2)),
                        ((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (1, 2, 0)), ((1, 3, 4), (0, 2, 1)),
                        ((1, 4, 1, 6), (0, 3, 2, 1)), ((1, 6, 2, 3), (0, 1, 3, 2)), ((1, 4, 5, 6), (0, 1, 2, 3)),
                        ((1, 1, 3, 4, 5), (0, 1, 4, 2, 3)), ((1, 1, 3, 4, 5), (1, 0, 3, 4, 2)),
                        ((1, 1, 1, 4, 5), (2, 1, 0, 4, 3))):
        if dt != "i32":  # (TFLM's TRANSPOSE takes int8, int16 and float32)
            out["transpose%s_%dd" % ("".join(map(str, perm)), len(shape))] = one(
                OP.TRANSPOSE, dt, shape, [tuple(shape[d] for d in perm)], [_ints(perm)])
    for shape, perm in (((2, 3, 4, 5), (3, 1, 0, 2)), ((2, 3, 2, 4, 5), (4, 2, 0, 3, 1)),
                        ((2, 1, 3, 4, 5), (1, 0, 2, 3, 4))):
        if dt != "i32":  # more dimensions than the board's 3: between two RESHAPEs (NXP's ShuffleNet)
            out["transpose%s_%dd_reshaped" % ("".join(map(str, perm)), len(shape))] = chain(
                dt, shape, OP.TRANSPOSE, [_ints(perm)], tuple(shape[d] for d in perm))
    if dt in ("i8", "f32"):  # NXP ShuffleNet's channel shuffle: (2, 1, C, H, W), a GATHER of each half
        for k in (0, 1):
            out["gather5d_%d" % k] = chain(dt, (2, 1, 3, 4, 5), OP.GATHER, [_ints(k)], (1, 1, 3, 4, 5),
                                           _opts("GatherOptions", axis=0))
    if dt in ("i8", "f32"):  # (TFLM's SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND take int8 and float32)
        for b, pads, (w, c) in ((2, [0, 0], (6, 3)), (3, [0, 0], (6, 2)), (2, [1, 2], (5, 3)), (1, [2, 1], (4, 3)),
                                (4, [3, 1], (4, 2))):
            wp = (w + sum(pads)) // b
            if not sum(pads):  # (padding: refused, see below)
                out["space_to_batch%d" % b] = one(OP.SPACE_TO_BATCH_ND, dt, (1, w, c), [(b, wp, c)],
                                                  [_ints([b]), _ints([pads])])
            out["batch_to_space%d_%d%d" % (b, pads[0], pads[1])] = one(
                OP.BATCH_TO_SPACE_ND, dt, (b, wp, c), [(1, w, c)], [_ints([b]), _ints([pads])])
        out["space_to_batch_4d"] = one(OP.SPACE_TO_BATCH_ND, dt, (1, 3, 4, 2), [(1, 3, 4, 2)],
                                       [_ints([1, 1]), _ints([[0, 0], [0, 0]])])
        out["batch_to_space_4d"] = one(OP.BATCH_TO_SPACE_ND, dt, (1, 5, 5, 2), [(1, 3, 4, 2)],
                                       [_ints([1, 1]), _ints([[1, 1], [0, 1]])])
    if dt in ("i8", "f32"):  # (TFLM's GATHER_ND and EMBEDDING_LOOKUP take int8 and float32)
        for params, idx, const in (((1, 4, 5, 3), (6, 2), False), ((4, 6), (3, 1), False), ((10, 4), (1, 5, 1), True),
                                   ((1, 3, 4), (5, 3), False), ((2, 3, 4), (2,), True), ((3, 2, 2, 2, 2), (4, 5), True)):
            out["gather_nd_%s_%s%s" % ("x".join(map(str, params)), "x".join(map(str, idx)), "_t" if const else "")] = \
                gather(OP.GATHER_ND, dt, params, idx, const)
        for value, n in (((10, 4), 5), ((6, 2, 3), 3), ((7, 1), 1)) + ((((50, 256), 300),) if dt == "i8" else ()):
            out["embedding_lookup_%s_%d" % ("x".join(map(str, value)), n)] = gather(OP.EMBEDDING_LOOKUP, dt, value, (n,), True)
        for params, idx in (((1, 4, 5, 3), [[0, 1], [0, 2], [0, 3], [0, 0], [1, -2]]), ((4, 6), [[3], [1]])):
            idx = _ints(idx)
            want = list(idx.shape[:-1]) + list(params[idx.shape[-1]:])
            out["gather_nd_const_indices_%dd" % len(params)] = one(OP.GATHER_ND, dt, params, [want], [idx])
    if dt == "f32":  # TFLM's hybrid form: an int8 table (zero point 0) to float32, code x scale
        for value, n in (((10, 4), 5), ((6, 2, 3), 3)):
            out["embedding_lookup_hybrid_%s_%d" % ("x".join(map(str, value)), n)] = embedding_hybrid(value, n, 0)
    for x, u, starts in (((1, 5, 6), (1, 2, 3), [0, 4, -2]), ((1, 5, 6), (1, 5, 6), [0, 1, 1]), ((7,), (3,), [2]),
                         ((4, 6), (1, 6), [9, 0]), ((1, 3, 4, 5), (1, 2, 1, 5), [0, 1, 2, 0]), ((4, 6), (2, 3), [1, 2])):
        tag = "%s_%s" % ("x".join(map(str, x)), "x".join(map(str, u)))
        out["update_slice_" + tag] = update_slice(dt, x, u, starts, False)
        out["update_slice_const_" + tag] = update_slice(dt, x, u, starts, True)
    out["update_slice_const_i64"] = update_slice(dt, (1, 5, 6), (1, 2, 3), np.int64([0, 9, 1]), True)
    return {"%s_%s" % (k, dt): v for k, v in out.items()}


def chain(dt, shape, op, consts, out, options=None):
    """RESHAPE of a flat input to `shape` (of more dimensions than the board's values), `op` of
    it (its constant int32 inputs `consts`), RESHAPE of its output `out` to a flat output."""
    data, _ = one(op, dt, shape, [out], consts, options)
    m = tflm_ref.read_model(data)
    sg = m.subgraphs[0]
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = OP.RESHAPE
    code.version = 1
    m.operatorCodes.append(code)
    n = int(np.prod(shape))
    first = len(sg.tensors)
    for k, dims in enumerate(((1, n), (1, int(np.prod(out))))):  # the flat input, the flat output
        t = copy.deepcopy(sg.tensors[0])
        t.shape, t.name = list(dims), "flat%d" % k
        sg.tensors.append(t)
    for k, dims in enumerate((shape, (1, int(np.prod(out))))):  # the RESHAPEs' shapes
        t = S.TensorT()
        t.shape, t.type, t.name, t.buffer = [len(dims)], S.TensorType.INT32, "shape%d" % k, len(m.buffers)
        b = S.BufferT()
        b.data = list(_ints(dims).tobytes())
        m.buffers.append(b)
        sg.tensors.append(t)
    y = sg.outputs[0]
    ops = []
    for ins, outs in (([first, first + 2], [0]), ([first + 1], [first + 3])):
        o = S.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = len(m.operatorCodes) - 1, ins, outs
        ops.append(o)
    ops[1].inputs = [y, first + 3]
    ops[1].outputs = [first + 1]
    sg.operators = [ops[0]] + sg.operators + [ops[1]]
    sg.inputs, sg.outputs = [first], [first + 1]
    return _save(m), [_x(dt, (n,), 7)]


def _board(shape):
    """A model input's sample as the board takes it: without a leading batch of 1."""
    return shape[1:] if len(shape) > 1 and shape[0] == 1 else shape


def gather(op, dt, params, idx, const):
    """GATHER_ND (params first) or EMBEDDING_LOOKUP (ids first) of int32 indices given to the
    model, the params a model input or (const) a constant; indices in range, one negative
    component where the flat position stays inside (TFLM checks the flat position only)."""
    rng = np.random.default_rng(len(params) * 10 + len(idx))
    nd = idx[-1] if op == OP.GATHER_ND else 1
    pv = _x(dt, params, 3)
    ix = np.stack([rng.integers(0, params[j], idx[:-1] if op == OP.GATHER_ND else idx) for j in range(nd)], -1)
    if op == OP.GATHER_ND and nd > 1 and params[nd - 1] > 1:  # (row r, column -1: row r - 1's last)
        ix.reshape(-1, nd)[0, nd - 2:] = (1, -1)
    ix = ix.astype(np.int32).reshape(idx)
    want = list(idx[:-1]) + list(params[nd:]) if op == OP.GATHER_ND else list(idx) + list(params[1:])
    q = Q[dt]
    pt = (params, dt, q, pv if const else None)
    it = (idx, "i32", None, None)
    tensors = ([pt, it] if op == OP.GATHER_ND else [it, pt]) + [(want, dt, q, None)]
    ins = [k for k, t in enumerate(tensors[:2]) if t[3] is None]
    data = model(op, tensors, ins, [2], [0, 1])
    xs = [_board(params) and pv.reshape(_board(params)) if tensors[k] is pt else ix.reshape(_board(idx)) for k in ins]
    return data, xs


def embedding_hybrid(value, n, zp):
    """EMBEDDING_LOOKUP of an int8 table (scale 0.037, zero point zp) into float32."""
    table = _x("i8", value, 4)
    ids = np.random.default_rng(n).integers(0, value[0], (n,)).astype(np.int32)
    tensors = [((n,), "i32", None, None), (value, "i8", (0.037, zp), table), ((n,) + tuple(value[1:]), "f32", None, None)]
    return model(OP.EMBEDDING_LOOKUP, tensors, [0], [2], [0, 1]), [ids]


def update_slice(dt, x, u, starts, const):
    """DYNAMIC_UPDATE_SLICE of an operand and an update given to the model, its int32 start
    indices given too or (const) constants; starts beyond the operand clamped (TFLM's)."""
    q = Q[dt]
    st = starts if isinstance(starts, np.ndarray) else _ints(starts)
    tensors = [(x, dt, q, None), (u, dt, q, None), ((len(x),), "i64" if st.dtype == np.int64 else "i32", None,
                                                    st if const else None), (x, dt, q, None)]
    ins = [0, 1] if const else [0, 1, 2]
    data = model(OP.DYNAMIC_UPDATE_SLICE, tensors, ins, [3], [0, 1, 2])
    xs = [_x(dt, x, 5).reshape(_board(x)), _x(dt, u, 6).reshape(_board(u))] + ([] if const else [st])
    return data, xs


def _op_before(m, op_code, inputs, output):
    """Model m with a first operator op_code(inputs) -> tensor output."""
    code = S.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op_code, min(op_code, 127), 1
    m.operatorCodes.append(code)
    op = S.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = len(m.operatorCodes) - 1, inputs, [output]
    m.subgraphs[0].operators.insert(0, op)


def _constant(m, values, dt, q=None):
    """A constant tensor of values (dtype dt) added to model m: its index."""
    sg = m.subgraphs[0]
    t = S.TensorT()
    t.shape, t.type, t.name, t.buffer = list(values.shape), TYPES[dt][0], "c%d" % len(sg.tensors), len(m.buffers)
    if q is not None:
        t.quantization = S.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [q[0]], [q[1]]
    b = S.BufferT()
    b.data = list(np.asarray(values, TYPES[dt][1]).tobytes())
    m.buffers.append(b)
    sg.tensors.append(t)
    return len(sg.tensors) - 1


def broadcast_const_add(dt):
    """ADD of a model input and the BROADCAST_TO of a constant (computed at pack time: ADD's
    constant operand)."""
    data, xs = one(OP.ADD, dt, (1, 3, 4, 5), [(1, 3, 4, 5)], n_in=2)
    m = tflm_ref.read_model(data)
    sg = m.subgraphs[0]
    c = _constant(m, _x(dt, (5,), 11), dt, Q[dt])
    shape = _constant(m, _ints([1, 3, 4, 5]), "i32")
    _op_before(m, OP.BROADCAST_TO, [c, shape], sg.inputs[1])
    sg.inputs = sg.inputs[:1]
    return _save(m), xs[:1]


def broadcast_args(dt):
    """RESHAPE to the shape BROADCAST_ARGS computes from two constant shapes (folded at pack
    time; TFLM computes it at every invoke)."""
    data, xs = one(OP.RESHAPE, dt, (1, 2, 6), [(3, 4)], [_ints([3, 4])])
    m = tflm_ref.read_model(data)
    sg = m.subgraphs[0]
    shape_t = sg.operators[0].inputs[1]
    m.buffers[sg.tensors[shape_t].buffer].data = None  # computed now
    _op_before(m, OP.BROADCAST_ARGS, [_constant(m, _ints(v), "i32") for v in ([3, 1], [4])], shape_t)
    return _save(m), xs


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


test_cpython_matches_tflm, test_micropython_matches_tflm, test_host_reference_matches_tflm = \
    tflm_tests(NAMES, expect)


# name -> (.tflite bytes, words of the one-line refusal)
REFUSED = {
    "reverse_apart": (one(OP.REVERSE_V2, "i8", (1, 3, 4, 5), [(1, 3, 4, 5)], [_ints([1, 3])])[0],
                      ("operator 0 (REVERSE_V2)", "axes [1, 3]: not contiguous")),
    "reverse_axis": (one(OP.REVERSE_V2, "i8", (1, 3, 4), [(1, 3, 4)], [_ints([3])])[0],
                     ("(REVERSE_V2)", "axes [3] outside")),
    "transpose_i64_perm": (one(OP.TRANSPOSE, "i8", (1, 3, 4), [(1, 4, 3)], [(np.int64([0, 2, 1]), "i64", None)])[0],
                           ("(TRANSPOSE)", "the permutation must be a constant int32")),
    "transpose_output": (one(OP.TRANSPOSE, "i8", (1, 3, 4), [(1, 3, 4)], [_ints([0, 2, 1])])[0],
                         ("(TRANSPOSE)", "output of shape [1, 3, 4], the op computes [1, 4, 3]")),
    "transpose_perm": (one(OP.TRANSPOSE, "i8", (1, 3, 4), [(1, 4, 3)], [_ints([0, 2, 2])])[0],
                       ("(TRANSPOSE)", "perm [0, 2, 2]: a permutation")),
    "space_to_batch_pads": (one(OP.SPACE_TO_BATCH_ND, "f32", (1, 5, 3), [(2, 4, 3)], [_ints([2]), _ints([[1, 2]])])[0],
                            ("(SPACE_TO_BATCH_ND)", "paddings [[1, 2]]", "never sets")),
    "space_to_batch_uneven": (one(OP.SPACE_TO_BATCH_ND, "f32", (1, 5, 3), [(2, 3, 3)], [_ints([2]), _ints([[0, 0]])])[0],
                              ("(SPACE_TO_BATCH_ND)", "sizes multiples of block_shape [2]")),
    "space_to_batch_4d": (one(OP.SPACE_TO_BATCH_ND, "f32", (1, 4, 4, 3), [(4, 2, 2, 3)],
                              [_ints([2, 2]), _ints([[0, 0], [0, 0]])])[0], ("(SPACE_TO_BATCH_ND)", "batch 4")),
    "batch_to_space_crops": (one(OP.BATCH_TO_SPACE_ND, "f32", (2, 2, 3), [(1, 1, 3)], [_ints([2]), _ints([[2, 2]])])[0],
                             ("(BATCH_TO_SPACE_ND)", "crops smaller than the sizes")),
    "batch_to_space_output": (one(OP.BATCH_TO_SPACE_ND, "f32", (2, 2, 3), [(1, 3, 3)], [_ints([2]), _ints([[0, 0]])])[0],
                              ("(BATCH_TO_SPACE_ND)", "output of shape [1, 3, 3], the op computes [1, 4, 3]")),
    "gather_nd_const_outside": (model(OP.GATHER_ND, [((4, 6), "f32", None, None), ((2, 1), "i32", None, _ints([[1], [4]])),
                                                     ((2, 6), "f32", None, None)], [0], [2], [0, 1]),
                                ("(GATHER_ND)", "index tuple 1 [4] starts at element 24, outside the params' 24")),
    "gather_nd_i16": (model(OP.GATHER_ND, [((4, 6), "i16", Q["i16"], None), ((2, 1), "i32", None, None),
                                           ((2, 6), "i16", Q["i16"], None)], [0, 1], [2], [0, 1]),
                      ("(GATHER_ND)", "params of type INT16")),
    "gather_nd_output": (model(OP.GATHER_ND, [((4, 6), "f32", None, None), ((2, 1), "i32", None, None),
                                              ((2, 5), "f32", None, None)], [0, 1], [2], [0, 1]),
                         ("(GATHER_ND)", "output of shape [2, 5], the op computes [2, 6]")),
    "embedding_hybrid_zp": (embedding_hybrid((5, 4), 3, 2)[0],
                            ("(EMBEDDING_LOOKUP)", "a constant table of zero point 0", "(0.03700000047683716, 2)")),
    "update_slice_larger": (model(OP.DYNAMIC_UPDATE_SLICE, [((1, 3, 4), "f32", None, None), ((1, 4, 4), "f32", None, None),
                                                            ((3,), "i32", None, _ints([0, 0, 0])), ((1, 3, 4), "f32", None, None)],
                                  [0, 1], [3], [0, 1, 2]),
                            ("(DYNAMIC_UPDATE_SLICE)", "the update no larger")),
    "strided_shrink_backwards": (one(OP.STRIDED_SLICE, "i8", (1, 5, 6), [(1, 6)], [_ints([0, 3, 0]), _ints([1, 4, 6]),
                                                                                   _ints([1, -1, 1])],
                                     _opts("StridedSliceOptions", shrinkAxisMask=0b10))[0],
                                 ("(STRIDED_SLICE)", "axis 1: stride -1 with shrink_axis")),
    "broadcast_to_not": (one(OP.BROADCAST_TO, "i8", (1, 2, 4), [(1, 3, 4)], [_ints([1, 3, 4])])[0],
                         ("operator 0 (BROADCAST_TO)", "shape [1, 3, 4]: the input's [1, 2, 4] does not broadcast")),
    "broadcast_to_output": (one(OP.BROADCAST_TO, "f32", (1, 1, 4), [(1, 2, 4)], [_ints([1, 3, 4])])[0],
                            ("(BROADCAST_TO)", "output of shape [1, 2, 4] for shape [1, 3, 4]")),
    "relu_5d": (chain("f32", (2, 1, 3, 4, 5), OP.RELU, [], (2, 1, 3, 4, 5))[0],
                ("operator 1 (RELU)", "tensor shape [2, 1, 3, 4, 5] is not supported", "only EXPAND_DIMS, GATHER")),
    "input_5d": (one(OP.TRANSPOSE, "i8", (2, 1, 3, 4, 5), [(1, 2, 3, 4, 5)], [_ints([1, 0, 2, 3, 4])])[0],
                 ("model input 0", "tensor shape [2, 1, 3, 4, 5] is not supported")),
    "output_5d": (one(OP.RESHAPE, "i8", (1, 120), [(2, 1, 3, 4, 5)], [_ints([2, 1, 3, 4, 5])])[0],
                  ("model output 0", "tensor shape [2, 1, 3, 4, 5] is not supported")),
    "transpose_6d": (chain("i8", (2, 3, 2, 2, 3, 2), OP.TRANSPOSE, [_ints([5, 3, 1, 4, 0, 2])], (2, 2, 3, 2, 2, 3))[0],
                     ("operator 1 (TRANSPOSE)", "up to 5, as TFLM's")),
    "broadcast_to_6d": (one(OP.BROADCAST_TO, "i8", (1, 4), [(1, 1, 1, 1, 1, 4)], [_ints([1, 1, 1, 1, 1, 4])])[0],
                        ("(BROADCAST_TO)", "up to 5 dimensions")),
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


def test_broadcast_args_of_shapes_that_do_not_broadcast_is_refused(cli, tmp_path):
    """BROADCAST_ARGS folded at pack time: shapes that do not broadcast (TFLM's kernel stops
    on its CHECK) refused naming the operator."""
    data, _ = broadcast_args("i8")
    m = tflm_ref.read_model(data)
    sg = m.subgraphs[0]
    m.buffers[sg.tensors[sg.operators[0].inputs[0]].buffer].data = list(_ints([3, 3]).tobytes())
    src = tmp_path / "args.tflite"
    src.write_bytes(_save(m))
    line = cli.fails("pack", src, "-o", tmp_path / "args.mpyl")
    assert "operator 0 (BROADCAST_ARGS)" in line and "shapes [3, 3] and [1, 4] do not broadcast" in line, line


@pytest.mark.parametrize("line, words", [
    ("broadcast x=x y=y shape=3,4", ("shape=3,4: (2, 3) does not broadcast to it",)),
    ("broadcast x=x y=y shape=3", ("shape=3: (2, 3) does not broadcast to it",)),
    ("slice x=x y=y begin=1,0 end=1,3 stride=-1,1", ("axis 0: begin 1, end 1, stride -1",)),
    ("slice x=x y=y begin=2,0 end=-1,3 stride=-1,1", ("axis 0: begin 2, end -1, stride -1",)),
    ("gathernd x=i,x y=y shape=2,3", ("gathernd: q= must be the params's quantization",)),
    ("gathernd x=x,x y=y shape=2,3", ("indices of dtype i8: i32",)),
    ("gathernd x=i y=y t=w shape=2,3 dtype=u8", ("a params tensor of dtype u8",)),
    ("gathernd x=i,x y=y shape=3,3", ("shape=3,3: 9 elements, the params value has 6",)),
    ("gathernd x=i,x y=y shape=6", ("indices of 2 components for params of shape (6,)",)),
    ("update x=x,i y=y begin=0,0", ("the update is i32",)),
    ("update x=x,x y=y begin=1,0", ("begin=1,0: one start per axis, 0 <= start <= dim - update's",)),
    ("update x=x,x,x y=y", ("starts: an i32 vector of 2 (or 3: a batch first) values, got i8",)),
])
def test_move_description_refused(line, words):
    """The graph description's broadcast, backward slices, gathernd and update: each bad key
    refused in one line naming it."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    with pytest.raises(ContainerError) as e:
        Model("input y=x shape=2,3 dtype=i8 q=0.1,0\ninput y=i shape=4,2 dtype=i32 q=1.0,0\n%s q=%s\noutput x=y"
              % (line, "0.2,0" if "gathernd x=i,x " in line and "shape=2,3" in line else "0.1,0"))
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_gather_outside_the_params_fails_as_tflm_fails(tmp_path):
    """An index tuple whose flat position leaves the params: TFLM's invoke fails; mpy-lazy's
    kernel raises IndexError (pure path and host reference; the viper one: test_kernels.py)."""
    from test_tflite_elem import ARENA

    data, xs = gather(OP.GATHER_ND, "f32", (4, 6), (2, 1), False)
    src = tmp_path / "g.tflite"
    src.write_bytes(data)
    xs = [xs[0], np.int32([[1], [4]])]
    with pytest.raises(Exception):
        tflm_ref.run(str(src), [tuple(xs)], arena_size=ARENA)
    run_cli("pack", src, "-o", tmp_path / "g.mpyl")
    c = mpy_lazy.open((tmp_path / "g.mpyl").read_bytes())
    with kernel_path("pure"):
        m = mmodel.from_container(c)
        with pytest.raises(IndexError):
            m(*[x.reshape(-1).tolist() for x in xs])
    with pytest.raises(IndexError):
        reference.run(c.meta["graph"], tensors_of(c), *xs)


def test_16x8_transpose_conv_with_an_int16_bias_runs_as_tflm(tmp_path):
    """TFLM's 16x8 TRANSPOSE_CONV widens an int16 bias to int64 (an int32 one it reads as int64
    bytes: refused, tests/host/test_tflite.py): SEANet's TRANSPOSE_CONV with its bias stored as
    int16 packs and runs TFLM's outputs bit for bit (pure path, viper on the unix port with 0 B
    allocated, host reference)."""
    import json

    from test_tflite import ROOT
    from test_tflite_elem import ARENA
    from host_util import Board

    m = tflm_ref.read_model(os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro",
                                         "seanet_transpose_conv4.tflite"))
    sg = m.subgraphs[0]
    t = sg.tensors[sg.operators[0].inputs[3]]
    b = m.buffers[t.buffer]
    b64 = np.frombuffer(bytes(bytearray(b.data)), np.int64)
    assert np.abs(b64).max() < 1 << 15
    b.data = list(b64.astype(np.int16).tobytes())
    t.type = S.TensorType.INT16
    src = tmp_path / "tc16.tflite"
    src.write_bytes(_save(m))
    x = np.random.default_rng(0).integers(-3000, 3000, (1, 2, 80, 16)).astype(np.int16)
    want = tflm_ref.run(str(src), [(np.int32([1, 2, 160, 8]), x)], arena_size=ARENA)[0].reshape(-1)
    pack = tmp_path / "tc16.mpyl"
    run_cli("pack", src, "-o", pack)
    c = mpy_lazy.open(pack.read_bytes())
    with kernel_path("pure"):
        mm = mmodel.from_container(c)
        mm(x.reshape(-1).tolist())
        assert mm.tolist(0) == want.tolist()
    assert reference.run(c.meta["graph"], tensors_of(c), x[0])[0].reshape(-1).tolist() == want.tolist()
    xs = tmp_path / "tc16.json"
    xs.write_text(json.dumps([[x.reshape(-1).tolist()]]))
    board = Board(str(tmp_path), "tc16", [str(pack)], [{"name": "tc16.mpyl", "xs": str(xs), "multi": True,
                                                        "alloc": True}])
    try:
        r = board.get("tc16.mpyl")
    finally:
        board.stop()
    assert r["path"] == "viper" and r["alloc"] == [0], (r["path"], r["alloc"])
    assert np.asarray(r["ys"][0]).reshape(-1).tolist() == want.tolist()
