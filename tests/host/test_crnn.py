"""Recurrent models as people build them (tools/coverage.py's recurrent families): a Conv1d or
Conv2d front end before a GRU or LSTM (the keyword-spotting CRNN), handed over batch first or
time major through the transposes, squeezes and reshapes both torch exporters write; RNN
outputs into a Conv1d; a Linear on every frame before the RNN and after it (every step out).
Each is exported with both exporters (TorchScript, dynamo=False, and the default dynamo),
packed f32 and int8 (calibrated on 16 seeded inputs) and run on the MicroPython unix port
(viper, containers in a ROMFS image) on 50 inputs:

- f32 within 1e-4 of torch (relative to the largest output);
- int8 equal to host_tools/reference.py on the container's own tensors, 0 bytes allocated per
  inference, and its class (argmax; per frame for every-step outputs) torch's on >= 90% of the
  inputs;
- moving the batch dimension of 1 moves no byte: a Conv1d front end hands its output to the RNN
  and an RNN to a Conv1d with no transpose on the board; a per-frame Linear is a 1x1 conv with its
  bias folded in; both exporters give one graph."""
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from conftest import ROOT  # noqa: E402
from host_util import Board  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import graph as mgraph  # noqa: E402

nn = torch.nn

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")

_spec = importlib.util.spec_from_file_location("coverage_families", os.path.join(ROOT, "tools", "coverage.py"))
cov = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cov)

N = 50
AGREE = 0.9
NAMES = list(cov.TASKS)
KEYS = ["%s-%s" % (n, e) for n in NAMES for e in ("ts", "dynamo")]


@pytest.fixture(scope="module")
def crnns(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("crnn"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; the other core runs MicroPython
    board = None
    try:
        cases, want = {}, {}
        for name in NAMES:
            module = cov.build(name)[0]
            for dynamo in (False, True):
                c = cov.Case(name, dynamo, workdir, n_inputs=N)
                cases[c.key] = c
            with torch.no_grad():
                want[name] = [module(torch.from_numpy(x[None])).numpy().astype(np.float64) for x in c.xs]
        jobs = [j for c in cases.values() for j in c.jobs(workdir)]
        board = Board(workdir, "crnn", [p for c in cases.values() for p in c.packs.values()], jobs,
                      path="viper")
        yield cases, want, board
    finally:
        torch.set_num_threads(threads)
        if board is not None:
            board.stop()


def _text(path):
    return mpy_lazy.open(open(path, "rb").read()).meta["graph"]


def _classes(y, shape):
    """The argmax of each frame (the last axis) of an output of torch's shape."""
    return np.asarray(y, np.float64).reshape(shape).reshape(-1, shape[-1]).argmax(axis=1)


def test_families_are_the_recurrent_ones():
    assert len(NAMES) == 11 and all(n in NAMES for n in ("crnn_gru", "crnn_lstm", "gru_conv1d", "lstm_frames"))


@pytest.mark.parametrize("key", KEYS)
def test_float_matches_torch_on_micropython(crnns, key):
    cases, want, board = crnns
    c = cases[key]
    assert sorted(c.packs) == ["f32", "int8"], c.status
    f = board.get(os.path.basename(c.packs["f32"]))
    assert f["path"] == "viper" and len(f["ys"]) == N
    errs = [cov.rel_err(y, w) for y, w in zip(f["ys"], want[c.name])]
    assert max(errs) <= cov.FLOAT_RTOL, (key, max(errs))


@pytest.mark.parametrize("key", KEYS)
def test_int8_on_micropython(crnns, key):
    cases, want, board = crnns
    c = cases[key]
    r = board.get(os.path.basename(c.packs["int8"]))
    assert [list(y) for y in r["ys"]] == [ref.tolist() for ref in c.ref()], key
    assert r["alloc"] == [0] * N, r["alloc"]
    shape = want[c.name][0].shape
    got = np.concatenate([_classes(c.int8_output(y), shape) for y in r["ys"]])
    ref = np.concatenate([_classes(w, shape) for w in want[c.name]])
    assert len(set(ref.tolist())) > 1, "torch's classes all alike: inputs that say nothing"
    assert np.mean(got == ref) >= AGREE, (key, np.mean(got == ref))


def _ops(key, crnns, kind="f32"):
    return [op for _, op, _ in mgraph.parse(_text(crnns[0][key].packs[kind]))
            if op not in ("input", "output", "reshape")]


@pytest.mark.parametrize("name", NAMES)
def test_graphs(crnns, name):
    """Both exporters give one graph; an LSTM or GRU is one op (f32 and int8); handing a
    sequence between a Conv1d and an RNN (either way, batch first or time major) moves no byte;
    a Conv2d front end's frames are one transpose from its channels-last image; a Linear on
    every frame is a 1x1 conv."""
    ops = {e: _ops("%s-%s" % (name, e), crnns) for e in ("ts", "dynamo")}
    assert ops["ts"] == ops["dynamo"], ops
    ops = ops["ts"]
    rnn = "lstm" if "lstm" in name else "gru"
    assert ops.count(rnn) == 1 and "concat" not in ops and ("gru" if rnn == "lstm" else "lstm") not in ops, ops
    assert _ops("%s-ts" % name, crnns, "int8").count(rnn) == 1  # one op in int8 too (not unrolled)
    if name.startswith("crnn_conv2d"):  # (C, F) of each frame: out of the channels-last image
        assert ops[:2] == ["conv2d", "maxpool"] and ops.count("transpose") == (2 if "gru" in name else 1), ops
    else:
        assert "transpose" not in ops, ops
    if name.startswith(("linear_", "lstm_frames")):
        text = _text(crnns[0][name + "-ts"].packs["f32"])
        convs = [kv for _, op, kv in mgraph.parse(text) if op == "conv2d"]
        assert convs and all(kv["k"] == (1, 1) and "b" in kv for kv in convs) and "add" not in ops[:2], ops


class _BatchOfSteps(nn.Module):
    """A Conv1d over each time step's features: torch's batch is then the T steps."""

    def __init__(self):
        super().__init__()
        self.conv, self.conv2 = nn.Conv1d(8, 6, 3), nn.Conv1d(1, 2, 3)

    def forward(self, x):
        return self.conv2(self.conv(x).permute(2, 0, 1))  # (T, 1, C): a batch of T


class _FramesRead(nn.Module):
    """An image's batch moved, then read by a ReLU (not reshaped into frames)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x).permute(3, 0, 1, 2))


@pytest.mark.parametrize("module,shape,op,match", [
    (_BatchOfSteps, (8, 12), "Conv", "a sequence seen as [10, 1, 6] read by Conv: the board runs batch 1"),
    (_FramesRead, (1, 6, 7), "Relu", "an image whose batch dimension a Transpose moved (to [7, 1, 4, 6]) read by "
                                     "Relu: only a Reshape of it to a sequence"),
])
def test_what_the_board_cannot_run_is_refused(tmp_path, module, shape, op, match):
    """Torch's batch really made of the steps, or an image's batch moved and not made into
    frames: one line naming the ONNX node, from both exporters."""
    import onnx

    from host_tools.container import PackError
    from host_tools.convert import graph_of

    for dynamo in (False, True):
        path = cov.export(module().eval(), shape, tmp_path / ("m%d.onnx" % dynamo), dynamo)
        node = [n for n in onnx.load(path).graph.node if n.op_type == op][-1]
        with pytest.raises(PackError) as e:
            graph_of(path)
        line = str(e.value)
        assert "\n" not in line and "ONNX node %r (%s)" % (node.name, op) in line and match in line, line
