"""UNIDIRECTIONAL_SEQUENCE_LSTM with int16 activations (TFLM's 16x8 LSTM: int16 input, output
and hidden state, int8 weights, int64 biases, int16 cell state) against TensorFlow Lite Micro
itself: models written with TFLM's schema module, quantized as TFLite's converter quantizes a
16x8 LSTM (symmetric int16 activations, per-tensor int8 weights, int64 biases at the input scale
x the weight scale, a power-of-two cell scale), run by the tflite-micro wheel (tests/tflm_ref.py),
packed with `mpy-lazy pack` and run by mpy-lazy on CPython (the pure kernels), on the MicroPython
unix port (viper, 0 bytes allocated per inference) and by the host reference interpreter: every
output of every step equal. Each model runs two invokes of one interpreter: the state (TFLM's
variable tensors) carries from the first to the second; after reset() the first input gives
the first outputs again."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
flatbuffers = pytest.importorskip("flatbuffers")
pytest.importorskip("tflite")

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)
from test_tflite_elem import ARENA, _opts, model  # noqa: E402
from test_tflite_moves import _save  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402


def lstm16(steps, nin, hid, seed, s_x=2.0 ** -12, s_h=1.0 / 32767, cell=-11, clip=0.0, time_major=False,
           w_scale=0.5, bias_scale=1.0, bias_dt="i64", zp=0):
    """A 16x8 LSTM (batch 1) with seeded weights, and two seeded inputs over the int16 range."""
    rng = np.random.default_rng(seed)
    tensors = [((steps, 1, nin) if time_major else (1, steps, nin), "i16", (s_x, zp), None)]
    sw = []
    for k in range(8):  # input weights (i, f, c, o), then recurrent: the converter's scales max|w| / 127
        w = rng.normal(0, w_scale, (hid, nin if k < 4 else hid)).astype(np.float32)
        s = float(np.abs(w).max()) / 127
        sw.append(s)
        tensors.append((w.shape, "i8", (s, 0), np.round(w / s).astype(np.int8)))
    for k in range(4):  # biases: int64 at s_x * s_w (the forget gate's leaning to 1)
        b = rng.normal(1.0 if k == 1 else 0.0, bias_scale, hid)
        q = (s_x * sw[k], 0)
        tensors.append(((hid,), bias_dt, q, np.round(b / q[0]).astype(np.int64)))
    tensors.append(((1, hid), "i16", (s_h, 0), None))  # h
    tensors.append(((1, hid), "i16", (2.0 ** cell, 0), None))  # c
    tensors.append((((steps, 1, hid) if time_major else (1, steps, hid)), "i16", (s_h, 0), None))  # y
    ins = list(range(9)) + [-1] * 3 + list(range(9, 13)) + [-1, -1, 13, 14] + [-1] * 4
    opts = _opts("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=4, cellClip=clip,
                 timeMajor=time_major)
    m = S.ModelT.InitFromPackedBuf(model(S.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, tensors, [0], [15],
                                         ins, opts), 0)
    for i in (13, 14):
        m.subgraphs[0].tensors[i].isVariable = True
    shape = tensors[0][0]
    xs = [rng.integers(-32768, 32768, shape).astype(np.int16) for _ in range(2)]
    xs[1][..., ::2] //= 16  # (one input mostly inside the gates' unsaturated range)
    return _save(m), xs


MODELS = {
    "small": lambda: lstm16(6, 5, 7, 1),
    "clip": lambda: lstm16(5, 3, 4, 2, cell=-12, clip=3.0),
    "time_major": lambda: lstm16(4, 6, 5, 3, time_major=True, cell=-10),
    "cell_small": lambda: lstm16(7, 4, 3, 4, cell=-14, s_x=1.0 / 32767, s_h=2.0 ** -14, w_scale=0.2),
    "wide": lambda: lstm16(2, 300, 4, 5, w_scale=0.05, bias_scale=4.0),  # 300 products: past 256 a row
    "cell_coarse": lambda: lstm16(3, 8, 9, 6, cell=-7, s_h=2.0 ** -13),
}


class Case:
    def __init__(self, name, workdir):
        data, self.xs = MODELS[name]()
        self.name = name
        self.src = os.path.join(workdir, name + ".tflite")
        with open(self.src, "wb") as f:
            f.write(data)
        self.want = [np.asarray(y).reshape(-1) for y in tflm_ref.run(self.src, self.xs, arena_size=ARENA)]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.c = mpy_lazy.open(f.read())
        self.inputs = [x.reshape(-1).tolist() for x in self.xs]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("tflite_lstm16"))
    out = {name: Case(name, workdir) for name in MODELS}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([[x] for x in c.inputs] + ["reset", [c.inputs[0]]], f)  # (then from the start again)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": True})
    board = Board(workdir, "lstm16", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def test_the_models_are_16x8_lstms(cases):
    """TFLM runs each as an int16 LSTM, its outputs reach far into the int16 range (the gates
    are neither all saturated nor all at rest), and its second invoke depends on the first."""
    for c in cases[0].values():
        assert tflm_ref.op_names(c.src) == ["UNIDIRECTIONAL_SEQUENCE_LSTM"]
        assert all(y.dtype == np.int16 for y in c.want)
        y = np.concatenate(c.want)
        assert np.abs(y).max() > 3000 and len(set(y.tolist())) > len(y) // 3, c.name
        assert [line.split()[0] for line in c.c.meta["graph"].splitlines()].count("lstm") == 1
        fresh = np.asarray(tflm_ref.run(c.src, c.xs[1:], arena_size=ARENA)[0]).reshape(-1)
        assert fresh.tolist() != c.want[1].tolist(), c.name  # (the second invoke starts from the first's state)


@pytest.mark.parametrize("name", list(MODELS))
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c)
        for x, want in zip(c.inputs, c.want):
            m(x)
            assert m.tolist() == want.astype(np.int64).tolist(), name
        m.reset()  # the state starts again: the first call's outputs again
        m(c.inputs[0])
        assert m.tolist() == c.want[0].astype(np.int64).tolist(), name


@pytest.mark.parametrize("name", list(MODELS))
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert [y[0] for y in r["ys"]] == [w.astype(np.int64).tolist() for w in c.want + c.want[:1]], name
    assert r["alloc"] == [0, 0, 0], r["alloc"]


@pytest.mark.parametrize("name", list(MODELS))
def test_host_reference_matches_tflm(cases, name):
    c = cases[0][name]
    state = {}
    for x, want in zip(c.inputs, c.want):
        got = reference.run(c.c.meta["graph"], tensors_of(c.c), np.array(x), state=state)[0]
        assert np.asarray(got).reshape(-1).tolist() == want.astype(np.int64).tolist(), name


@pytest.mark.parametrize("kw,match", [
    (dict(bias_dt="i32"), "int16 with int8 weights and int64 biases"),  # (TFLM reads them as int64)
    (dict(zp=3), "symmetric"),
    (dict(bias_scale=1e4), "beyond int32"),
])
def test_pack_refuses_what_tflm_or_the_board_would_not_run(cli, tmp_path, kw, match):
    """A 16x8 LSTM with int32 biases (TFLM's kernel reads int64 ones), an input zero point, or
    biases past int32 (the container's): one line naming the operator, no output written."""
    src, out = tmp_path / "m.tflite", tmp_path / "m.mpyl"
    src.write_bytes(lstm16(3, 4, 5, 7, **kw)[0])
    line = cli.fails("pack", src, "-o", out)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in line and match in line, line
    assert not out.exists()
