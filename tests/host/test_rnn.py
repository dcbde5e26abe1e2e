"""Recurrent torch models through ONNX (host_tools/onnx_seq.py): nn.LSTM and nn.GRU, one layer
(and two stacked LSTM layers), batch first or time major, the last step's output or h_n into a
linear layer, exported with both torch exporters (TorchScript, dynamo=False, and the default
dynamo), batch 1, fixed sequence length.

- f32 packs equal onnxruntime within 1e-4 (relative to the largest output) on CPython (every
  kernel path there) and on the MicroPython unix port (viper);
- int8 packs (`--quantize int8 --calibrate`) equal the host reference interpreter
  (host_tools/reference.py) on CPython's pure kernels and on the unix port, 0 bytes allocated per
  inference; near the float model;
- an LSTM is one `lstm` op (its state zero at each call, as ONNX's: no state=keep), its int8
  version quantized as TFLite's converter quantizes an LSTM; a GRU is one `gru` op, its weights
  stored once (the container within 2x its float32 parameter bytes + 16 KB, f32 and int8);
  both exporters give one graph;
- the variants the board does not run are refused in one line naming the ONNX node."""
import contextlib
import io
import json
import logging
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
nn = torch.nn

from host_tools import reference  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)

import mpy_lazy  # noqa: E402
from mpy_lazy import graph as mgraph, kernels, model as mmodel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")

T, I, H, OUT = 6, 5, 8, 3
FLOAT_RTOL = 1e-4
N = 3  # test inputs per model


class Net(nn.Module):
    """kind LSTM or GRU (layers, batch_first) and a linear layer on the last step's output
    (hn: on the last layer's final hidden state h_n)."""

    def __init__(self, kind, batch_first, layers=1, hn=False):
        super().__init__()
        self.rnn = getattr(nn, kind)(I, H, num_layers=layers, batch_first=batch_first)
        self.fc = nn.Linear(H, OUT)
        self.bf, self.hn = batch_first, hn

    def forward(self, x):
        y, state = self.rnn(x)
        if self.hn:
            h = state[0] if isinstance(state, tuple) else state
            return self.fc(h[-1])
        return self.fc(y[:, -1] if self.bf else y[-1])


# name: (kind, batch_first, layers, hn, exporters)
MODELS = {
    "lstm_bf": ("LSTM", True, 1, False, ("ts", "dynamo")),
    "lstm_tm_hn": ("LSTM", False, 1, True, ("ts", "dynamo")),
    "lstm_2layers": ("LSTM", True, 2, False, ("ts",)),
    "gru_bf": ("GRU", True, 1, False, ("ts", "dynamo")),
    "gru_tm_hn": ("GRU", False, 1, True, ("ts", "dynamo")),
}
KEYS = ["%s-%s" % (name, e) for name, m in MODELS.items() for e in m[4]]


def input_shape(batch_first):
    return (1, T, I) if batch_first else (T, 1, I)


def export(module, shape, path, dynamo):
    kw = {"external_data": False} if dynamo else {}
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.zeros(shape),), str(path), input_names=["x"], output_names=["y"],
                              dynamo=dynamo, **kw)
    finally:
        log.setLevel(level)
    return str(path)


def rel_err(y, want):
    want = np.asarray(want, np.float64).reshape(-1)
    return float(np.max(np.abs(np.asarray(y, np.float64).reshape(-1) - want)) / np.max(np.abs(want)))


def quantize(x, q):
    r = np.asarray(x, np.float64).reshape(-1) / q[0]
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(-r + 0.5)) + q[1]
    return np.clip(r, -128, 127).astype(np.int64)


def graph_ops(text):
    return [op for _, op, _ in mgraph.parse(text) if op not in ("input", "output")]


def q_of(text, value):
    return [kv for _, op, kv in mgraph.parse(text) if kv.get("y") == value][0]["q"]


class Case:
    def __init__(self, key, workdir):
        name, exporter = key.rsplit("-", 1)
        kind, bf, layers, hn, _ = MODELS[name]
        torch.manual_seed(sum(map(ord, name)))
        self.key, self.kind = key, kind
        self.module = Net(kind, bf, layers, hn).eval()
        shape = input_shape(bf)
        self.onnx = export(self.module, shape, os.path.join(workdir, key + ".onnx"), exporter == "dynamo")
        rng = np.random.default_rng(5)
        self.xs = rng.standard_normal((N,) + shape).astype(np.float32)
        sess = ort.InferenceSession(self.onnx, providers=["CPUExecutionProvider"])
        self.want = [sess.run(None, {"x": x})[0].reshape(-1).astype(np.float64) for x in self.xs]
        cal = os.path.join(workdir, key + "-calib.npy")  # (N, T, I): the sequence, batch dropped
        np.save(cal, np.random.default_rng(6).standard_normal((32, T, I)).astype(np.float32))
        self.f32, self.int8 = (os.path.join(workdir, "%s-%s.mpyl" % (key, k)) for k in ("f32", "int8"))
        run_cli("pack", self.onnx, "-o", self.f32, "-q")
        run_cli("pack", self.onnx, "-o", self.int8, "-q", "--quantize", "int8", "--calibrate", cal)
        self.c32 = mpy_lazy.open(open(self.f32, "rb").read())
        self.c8 = mpy_lazy.open(open(self.int8, "rb").read())
        self.text8 = self.c8.meta["graph"]
        q = [kv for _, op, kv in mgraph.parse(self.text8) if op == "input"][0]["q"]
        self.xi = [quantize(x, q) for x in self.xs]
        self.ref = [reference.run(self.text8, tensors_of(self.c8), xi)[0].reshape(-1) for xi in self.xi]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("rnn"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    board = None
    try:
        cases = {key: Case(key, workdir) for key in KEYS}
        jobs = []
        for c in cases.values():
            for path, xs, alloc in ((c.f32, [x.reshape(-1).tolist() for x in c.xs], False),
                                    (c.int8, [x.tolist() for x in c.xi], True)):
                xs_path = os.path.join(workdir, os.path.basename(path) + ".json")
                with open(xs_path, "w") as f:
                    json.dump(xs, f)
                jobs.append({"name": os.path.basename(path), "xs": xs_path, "alloc": alloc})
        board = Board(workdir, "rnn", [p for c in cases.values() for p in (c.f32, c.int8)], jobs, path="viper")
        yield cases, board
    finally:
        torch.set_num_threads(threads)
        if board is not None:
            board.stop()


@pytest.mark.parametrize("key", KEYS)
def test_float_matches_onnxruntime_on_cpython(zoo, key):
    c = zoo[0][key]
    m = mmodel.from_container(c.c32)
    assert isinstance(m, mmodel.Program)
    for path in kernels.available():
        with kernel_path(path):
            for x, want in zip(c.xs, c.want):
                m(x.reshape(-1).tolist())
                assert rel_err(m.tolist(), want) <= FLOAT_RTOL, (key, path)


@pytest.mark.parametrize("key", KEYS)
def test_int8_equals_reference_on_cpython(zoo, key):
    c = zoo[0][key]
    with kernel_path("pure"):
        m = mmodel.from_container(c.c8)
        for xi, ref in zip(c.xi, c.ref):
            m(xi.tolist())
            assert m.tolist() == ref.tolist(), key
    s, z = q_of(c.text8, [kv["x"] for _, op, kv in mgraph.parse(c.text8) if op == "output"][0])
    for ref, want in zip(c.ref, c.want):  # 8-bit activations through the steps: near the float model
        assert rel_err(s * (ref - z), want) < 0.3, key
    assert len({tuple(r) for r in c.ref}) == N


@pytest.mark.parametrize("key", KEYS)
def test_on_micropython(zoo, key):
    c, board = zoo[0][key], zoo[1]
    f = board.get(os.path.basename(c.f32))
    assert f["path"] == "viper" and len(f["ys"]) == N
    for y, want in zip(f["ys"], c.want):
        assert rel_err(y, want) <= FLOAT_RTOL, key
    r = board.get(os.path.basename(c.int8))
    assert r["ys"] == [ref.tolist() for ref in c.ref], key
    assert r["alloc"] == [0] * N, r["alloc"]


def _structure(text):
    ids, out = {}, []
    for _, op, kv in mgraph.parse(text):
        xs = kv.get("x")
        xs = xs if isinstance(xs, list) else ([xs] if xs else [])
        geo = tuple((k, kv[k]) for k in ("shape", "begin", "end", "out", "state", "k") if k in kv)
        out.append((op, tuple(ids[x] for x in xs), geo))
        if "y" in kv:
            ids[kv["y"]] = len(ids)
    return out


@pytest.mark.parametrize("name", [n for n in MODELS if len(MODELS[n][4]) == 2])
def test_graphs(zoo, name):
    """An LSTM is one lstm op per layer (no state kept from call to call, as ONNX's; its int8
    version TFLite's: int8 weights, an int16 cell state of a power-of-two scale, TFLM's sigmoid
    table); a GRU is one gru op (int8: int8 weights, int32 biases, per-row multipliers, the same
    table); both exporters give the same graph."""
    ts, dyn = zoo[0][name + "-ts"], zoo[0][name + "-dynamo"]
    for kind in ("c32", "c8"):
        assert _structure(getattr(ts, kind).meta["graph"]) == _structure(getattr(dyn, kind).meta["graph"])
    ops32, ops8 = graph_ops(ts.c32.meta["graph"]), graph_ops(ts.text8)
    if ts.kind == "LSTM":
        assert ops32.count("lstm") == 1 and "state" not in ts.c32.meta["graph"]
        lstm = [kv for _, op, kv in mgraph.parse(ts.text8) if op == "lstm"][0]
        assert -20 <= lstm["cell"] <= 0 and {"m", "t", "q"} <= set(lstm)
        views = {n: ts.c8.view(n) for n in (lstm["w"], lstm["r"], lstm["b"], lstm["t"])}
        assert [views[lstm[k]].dtype for k in ("w", "r", "b", "t")] == ["i8", "i8", "i32", "i16"]
        assert views[lstm["t"]].array()[0] == -32768 and views[lstm["t"]].array()[255] == -1  # 32768..65535
    else:
        assert ops32[0] == "gru" and ops32.count("gru") == 1 and ops32[-1] == "linear"
        assert "state" not in ts.c32.meta["graph"]
        assert ops8.count("gru") == 1 and "lut" not in ops8
        gru = [kv for _, op, kv in mgraph.parse(ts.text8) if op == "gru"][0]
        views = {k: ts.c8.view(gru[k]) for k in ("w", "r", "b", "m", "t")}
        assert [views[k].dtype for k in ("w", "r", "b", "m", "t")] == ["i8", "i8", "i32", "i32", "i16"]
        assert [views[k].shape for k in ("w", "r", "b", "m")] == [(3 * H, I), (3 * H, H), (6 * H,), (12 * H + 2,)]
        assert views["t"].array()[0] == -32768 and views["t"].array()[255] == -1  # TFLM's table, 32768..65535


def test_stacked_layers_are_two_lstm_ops(zoo):
    c = zoo[0]["lstm_2layers-ts"]
    assert [n.op_type for n in onnx.load(c.onnx).graph.node].count("LSTM") == 2
    assert graph_ops(c.c32.meta["graph"]).count("lstm") == 2


class Returns(nn.Module):
    def __init__(self, rnn, pick):
        super().__init__()
        self.rnn, self.pick = rnn, pick

    def forward(self, x):
        return self.pick(self.rnn(x))


@pytest.mark.parametrize("what,module,match", [
    ("bidirectional", lambda: Returns(nn.LSTM(I, H, batch_first=True, bidirectional=True), lambda r: r[0]),
     "bidirectional LSTM"),
    ("final cell state", lambda: Returns(nn.LSTM(I, H, batch_first=True), lambda r: r[1][1]), "Y_c"),
    ("bidirectional GRU", lambda: Returns(nn.GRU(I, H, batch_first=True, bidirectional=True), lambda r: r[0]),
     "bidirectional GRU"),
])
def test_unsupported_variants_refused(tmp_path, cli, what, module, match):
    path = export(module().eval(), (1, T, I), tmp_path / "m.onnx", dynamo=False)
    line = cli.fails("pack", path, "-o", tmp_path / "m.mpyl")
    assert "ONNX node" in line and match in line and ("(LSTM)" in line or "(GRU)" in line), line


def _lstm_onnx(path, peephole=False, initial_h=0.0):
    """A hand-made ONNX LSTM (torch makes neither peepholes nor a non-zero initial state)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 4 * H, k)).astype(np.float32), n)
             for n, k in (("W", I), ("R", H))]
    inits.append(numpy_helper.from_array(np.full((1, 1, H), initial_h, np.float32), "h0"))
    ins = ["x", "W", "R", "", "", "h0"]
    if peephole:
        inits.append(numpy_helper.from_array(rng.standard_normal((1, 3 * H)).astype(np.float32), "P"))
        ins += ["", "P"]
    node = helper.make_node("LSTM", ins, ["y"], name="the_lstm", hidden_size=H)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [T, 1, 1, H])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.parametrize("kw,match", [(dict(peephole=True), "peepholes"), (dict(initial_h=0.5), "initial_h")])
def test_hand_made_variants_refused(tmp_path, cli, kw, match):
    line = cli.fails("pack", _lstm_onnx(tmp_path / "m.onnx", **kw), "-o", tmp_path / "m.mpyl")
    assert "ONNX node 'the_lstm' (LSTM)" in line and match in line, line


def test_hand_made_lstm_runs(tmp_path):
    """The same hand-made LSTM with a zero initial state, its Y (T, 1, 1, H) the output."""
    path = _lstm_onnx(tmp_path / "m.onnx")
    run_cli("pack", path, "-o", tmp_path / "m.mpyl", "-q")
    m = mmodel.from_container(mpy_lazy.open((tmp_path / "m.mpyl").read_bytes()))
    x = np.random.default_rng(1).standard_normal((T, 1, I)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    m(x.reshape(-1).tolist())
    assert rel_err(m.tolist(), want) <= FLOAT_RTOL


def _gru_onnx(path, lbr, steps=T, nin=I, hid=H):
    """A hand-made ONNX GRU with biases (torch exports linear_before_reset=1 only)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array((rng.standard_normal((1, 3 * hid, k)) / np.sqrt(k)).astype(np.float32), n)
             for n, k in (("W", nin), ("R", hid))]
    inits.append(numpy_helper.from_array(rng.standard_normal((1, 6 * hid)).astype(np.float32), "B"))
    node = helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], name="the_gru", hidden_size=hid,
                            linear_before_reset=lbr)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, nin])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, hid])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.parametrize("lbr", [1, 0])
def test_hand_made_gru_runs(tmp_path, lbr):
    """linear_before_reset=1 (torch's) is one gru op; 0 (ONNX's default) is unrolled into graph
    ops: both equal onnxruntime, biases included, every kernel path."""
    path = _gru_onnx(tmp_path / "m.onnx", lbr)
    run_cli("pack", path, "-o", tmp_path / "m.mpyl", "-q")
    c = mpy_lazy.open((tmp_path / "m.mpyl").read_bytes())
    ops = graph_ops(c.meta["graph"])
    assert (ops == ["gru"]) if lbr else ("gru" not in ops and ops.count("linear") == 3 * T - 2)
    m = mmodel.from_container(c)
    x = np.random.default_rng(1).standard_normal((T, 1, I)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for p in kernels.available():
        with kernel_path(p):
            m(x.reshape(-1).tolist())
            assert rel_err(m.tolist(), want) <= FLOAT_RTOL, p


def test_gru_container_holds_its_weights_once(tmp_path):
    """The issue's GRU (~3.1k parameters over 50 steps; unrolled it packed to 590 KB f32 and
    389 KB int8): f32 and int8 containers within 2x its float32 parameter bytes + 16 KB."""
    steps, nin, hid = 50, 16, 24
    path = _gru_onnx(tmp_path / "m.onnx", 1, steps, nin, hid)
    params = 3 * hid * (nin + hid) + 6 * hid
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(3).standard_normal((16, steps, nin)).astype(np.float32))
    run_cli("pack", path, "-o", tmp_path / "f32.mpyl", "-q")
    run_cli("pack", path, "-o", tmp_path / "int8.mpyl", "-q", "--quantize", "int8", "--calibrate", cal)
    for name in ("f32", "int8"):
        size = (tmp_path / (name + ".mpyl")).stat().st_size
        assert size <= 2 * 4 * params + 16384, (name, size, params)
        assert graph_ops(mpy_lazy.open((tmp_path / (name + ".mpyl")).read_bytes()).meta["graph"]).count("gru") == 1


def test_int8_gru_whose_recurrent_sums_could_overflow_is_refused(tmp_path, cli):
    """int8: h is int16, so r h sums up to 32768 x sum |r| per row: a GRU where that could leave
    int32 (hidden size 520, every recurrent weight alike) is refused in one line naming the node."""
    from onnx import TensorProto, helper, numpy_helper

    hid = 520
    inits = [numpy_helper.from_array(np.full((1, 3 * hid, k), 0.01, np.float32), n) for n, k in (("W", I), ("R", hid))]
    node = helper.make_node("GRU", ["x", "W", "R"], ["y"], name="the_gru", hidden_size=hid, linear_before_reset=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, hid])], inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(0).standard_normal((10, 2, I)).astype(np.float32))
    line = cli.fails("pack", path, "-o", tmp_path / "m.mpyl", "--quantize", "int8", "--calibrate", cal)
    assert "the_gru" in line and "recurrent products could overflow" in line, line
    assert not (tmp_path / "m.mpyl").exists()


def test_float_tflite_lstm_quantized_as_tflite_converter(tmp_path):
    """The float MNIST LSTM of tflite-micro (tests/golden/thirdparty) packed `--quantize int8`:
    its LSTM weights are the int8 codes of TFLite's converter's own int8 model of it (each gate's
    eight tensors symmetric per tensor, max |w| / 127), and it keeps the .tflite's state and cell
    clip; the cell state a power-of-two scale."""
    from host_util import ROOT

    d = os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro")
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(0).uniform(0, 1, (16, 28, 28)).astype(np.float32))
    run_cli("pack", os.path.join(d, "mnist_lstm_float.tflite"), "-o", tmp_path / "ours.mpyl", "-q",
            "--quantize", "int8", "--calibrate", cal)
    run_cli("pack", os.path.join(d, "mnist_lstm_int8.tflite"), "-o", tmp_path / "tflite.mpyl", "-q")
    ours, theirs = (mpy_lazy.open((tmp_path / n).read_bytes()) for n in ("ours.mpyl", "tflite.mpyl"))
    lines = [[kv for _, op, kv in mgraph.parse(c.meta["graph"]) if op == "lstm"][0] for c in (ours, theirs)]
    for key in ("w", "r"):
        a, b = (np.array(c.view(kv[key]).array()).reshape(c.view(kv[key]).shape) for c, kv in zip((ours, theirs), lines))
        assert a.shape == (80, 28 if key == "w" else 20) and np.array_equal(a, b), key
    assert lines[0]["state"] == "keep" and lines[0]["clip"] == 10.0 and -15 <= lines[0]["cell"] <= -10
