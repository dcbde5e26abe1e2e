"""Acceptance tests of the graph runner on real torch models, against onnxruntime and the host
reference interpreter, on CPython (mpy_lazy directly) and on the MicroPython unix port (containers
inside a ROMFS image built with `mpy-lazy romfs`, mounted with vfs.VfsRom; viper path).

- The four MLPerf Tiny architectures (examples/mlperf_tiny/models.py, seeded weights, published
  shapes), exported with both torch exporters (dynamo=True, the default, and dynamo=False), packed
  f32 and int8 (calibrated on seeded inputs saved as .npy): float outputs within 1e-4 relative of
  onnxruntime; int8 outputs equal to host_tools.reference.run on the container's own tensors, and
  0 bytes allocated per int8 inference on the board.
- The importer's rewrites: BatchNorm folded (standalone ones become a 1x1 depthwise), shape
  constants never packed, TorchScript's Pad subgraph folded into the conv, ResNet-8's residual
  graph; f16 weights.
- Small ops through tiny torch models (f32 and calibrated int8).
- The digits demo: int8 accuracy within 1 point of f32 on the 360 held-out images.
- An old `layers` chain container still runs.

Everything heavy is built once per module (one fixture): the exports, the packs, two ROMFS images
and two MicroPython processes that run in the background (the TorchScript exports' one while the
dynamo exporter works, the dynamo exports' one while CPython checks), so the module stays well
under a minute on two cores."""
import contextlib
import importlib.util
import io
import json
import logging
import os
import warnings
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
nn = torch.nn

from conftest import ROOT, RUNTIME_TESTS, run_micropython  # noqa: E402
from host_tools import reference  # noqa: E402
from host_util import Board, kernel_path, run_cli as cli, tensors_of  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import ContainerError, graph as mgraph, kernels, model as mmodel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mlperf = _load("mlperf_tiny_models", os.path.join(ROOT, "examples", "mlperf_tiny", "models.py"))

FLOAT_RTOL = 1e-4  # max|y - onnxruntime| / max|onnxruntime|
N_MLPERF = 3  # seeded inputs per MLPerf model (int8 on the board; float on the board: 1)
N_SMALL = 2


# --------------------------------------------------------------------------- helpers

def export(module, shape, path, dynamo=False, **kw):
    """torch.onnx.export of a batch-1 model, input "x", output "y"; the exporters' chatter dropped."""
    if dynamo:
        kw["external_data"] = False
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.zeros((1,) + tuple(shape)),), str(path), input_names=["x"],
                              output_names=["y"], dynamo=dynamo, **kw)
    finally:
        log.setLevel(level)
    return str(path)


def onnx_ops(path):
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def graph_ops(text):
    return [op for _, op, _ in mgraph.parse(text) if op not in ("input", "output")]


def graph_lines(text, op=None):
    return [kv for _, o, kv in mgraph.parse(text) if op is None or o == op]


def flat(y):
    """An onnxruntime output (batch 1) flat, in its own (torch's) order: the order tolist() gives
    (an image output is marked `output ... layout=chw`)."""
    return np.asarray(y).reshape(-1).astype(np.float64)


def quantize(x, q):
    """Host quantization of a float input: round half away from zero, saturate (TFLite's)."""
    r = np.asarray(x, np.float64).reshape(-1) / q[0]
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(-r + 0.5)) + q[1]
    return np.clip(r, -128, 127).astype(np.int64)


def output_q(text):
    """(scale, zero point) of the graph's (first) output value."""
    lines = list(mgraph.parse(text))
    out = [kv["x"] for _, op, kv in lines if op == "output"][0]
    return [kv for _, op, kv in lines if kv.get("y") == out][0]["q"]


def rel_err(y, want):
    want = np.asarray(want, np.float64).reshape(-1)
    return float(np.max(np.abs(np.asarray(y, np.float64).reshape(-1) - want)) / np.max(np.abs(want)))


class Packed:
    """One packed container: its bytes kept alive, the runtime Container, the description."""

    def __init__(self, path):
        self.path = str(path)
        self.name = os.path.basename(self.path)
        with open(self.path, "rb") as f:
            self.data = f.read()
        self.c = mpy_lazy.open(self.data)
        self.text = self.c.meta.get("graph")
        self._tensors = None

    @property
    def tensors(self):
        if self._tensors is None:
            self._tensors = tensors_of(self.c)
        return self._tensors

    def model(self):
        return mmodel.from_container(self.c)

    def input_q(self):
        for _, op, kv in mgraph.parse(self.text):
            if op == "input":
                return kv.get("q")


class Entry:
    """A model of the zoo: torch module, ONNX file, seeded inputs, onnxruntime outputs, packs."""

    def __init__(self, key, module, shape, onnx_path, n_inputs, seed):
        self.key, self.module, self.shape, self.onnx = key, module, tuple(shape), onnx_path
        rng = np.random.default_rng(seed)
        self.xs = rng.standard_normal((n_inputs,) + self.shape).astype(np.float32)
        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        self.ort = [flat(sess.run(None, {"x": x[None]})[0]) for x in self.xs]
        self.packs = {}
        self._xi = self._ref = None

    def xi(self):
        """The inputs quantized with the int8 container's input q (the same ints everywhere)."""
        if self._xi is None:
            q = self.packs["int8"].input_q()
            self._xi = [quantize(x, q) for x in self.xs]
        return self._xi

    def ref(self):
        """host_tools.reference on the int8 container's own tensors, per input."""
        if self._ref is None:
            p = self.packs["int8"]
            self._ref = [reference.run(p.text, p.tensors, xi)[0].reshape(-1) for xi in self.xi()]
        return self._ref


# --------------------------------------------------------------------------- the board

def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return str(path)


def board_jobs(workdir, entries, float_inputs=None):
    """Jobs for Board: each entry's f32 (and f16) containers on float inputs (the first
    float_inputs of them), its int8 one on the quantized inputs with the allocation measured."""
    jobs = []
    for e in entries:
        for kind, p in e.packs.items():
            if kind == "int8":
                xs = [xi.tolist() for xi in e.xi()]
            else:
                xs = [x.reshape(-1).astype(np.float64).tolist() for x in e.xs[:float_inputs]]
            jobs.append({"name": p.name, "alloc": kind == "int8",
                         "xs": _write_json(os.path.join(workdir, p.name + ".json"), xs)})
    return jobs


# --------------------------------------------------------------------------- the small models

class MatMulAdd(nn.Module):
    """torch.matmul with a parameter plus a bias: ONNX MatMul + Add (not Gemm)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(12, 5))
        self.b = nn.Parameter(torch.randn(5))

    def forward(self, x):
        return torch.matmul(x, self.w) + self.b


class Affine(nn.Module):
    """Per-channel Mul and Add by constants after a conv + relu (cannot fold into the conv)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(5, 1, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(5, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) * self.scale + self.shift


class Concat(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        return torch.cat([torch.relu(self.a(x)), self.b(x)], dim=1)


class BNAfterAdd(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.a(x) + self.b(x))


class Swish(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y * torch.sigmoid(y)


class MeanHW(nn.Module):
    """x.mean over H and W (keepdim=False): ONNX ReduceMean, not GlobalAveragePool."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


def _gap():
    return nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))


# name: (builder, input shape, ONNX ops the export must have, graph ops expected, export options)
SMALL = {
    "conv1d": (lambda: nn.Sequential(nn.Conv1d(4, 6, 3, padding=1), nn.ReLU(), nn.Conv1d(6, 5, 3, stride=2)),
               (4, 20), ["Conv"], ["conv2d", "conv2d"], {}),
    "dilation": (lambda: nn.Sequential(nn.Conv2d(3, 5, 3, dilation=2, padding=2), nn.ReLU()),
                 (3, 10, 10), ["Conv"], ["conv2d"], {}),
    "groups": (lambda: nn.Conv2d(4, 6, 3, groups=2, padding=1), (4, 8, 8), ["Conv"], ["conv2d"], {}),
    "depthwise_mult": (lambda: nn.Sequential(nn.Conv2d(3, 6, 3, groups=3, bias=False), nn.ReLU6()),
                       (3, 7, 7), ["Conv", "Clip"], ["depthwise"], {}),
    "matmul_add": (MatMulAdd, (12,), ["MatMul", "Add"], ["linear"], {}),
    "leakyrelu": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.LeakyReLU(0.1)), (3, 6, 6),
                  ["LeakyRelu"], ["conv2d", "leakyrelu"], {}),
    "sigmoid": (lambda: nn.Sequential(nn.Linear(8, 6), nn.Sigmoid()), (8,), ["Sigmoid"],
                ["linear", "sigmoid"], {}),
    "tanh": (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.Tanh()), (3, 5, 5), ["Tanh"], ["conv2d", "tanh"], {}),
    "concat": (Concat, (3, 6, 6), ["Concat"], ["conv2d", "conv2d", "concat"], {}),
    "maxpool_pad": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(3, 2, padding=1)),
                    (3, 9, 9), ["MaxPool"], ["conv2d", "maxpool"], {}),
    "gap": (_gap, (3, 8, 8), ["GlobalAveragePool"], ["conv2d", "mean", "reshape", "linear"], {}),
    "mean_hw": (MeanHW, (3, 8, 8), ["ReduceMean"], ["conv2d", "mean", "reshape", "linear"], {}),
    "affine": (Affine, (3, 6, 6), ["Mul", "Add"], ["conv2d", "depthwise"], {}),
    "bn1d": (lambda: nn.Sequential(nn.BatchNorm1d(10), nn.Linear(10, 4)), (10,), ["BatchNormalization"],
             ["depthwise", "linear"], {}),
    "bn_after_add": (BNAfterAdd, (3, 6, 6), ["BatchNormalization"], ["conv2d", "conv2d", "add", "depthwise"], {}),
    # no constant folding: the exporter leaves BatchNormalization after each Conv, the importer folds it
    "conv_bn": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                      nn.Conv2d(4, 4, 3, groups=4), nn.BatchNorm2d(4)),
                (3, 6, 6), ["BatchNormalization"], ["conv2d", "depthwise"], {"do_constant_folding": False}),
    "swish": (Swish, (3, 6, 6), ["Sigmoid", "Mul"], ["conv2d", "sigmoid", "mul"], {}),
    "pad_maxpool": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.ZeroPad2d((1, 2, 0, 1)), nn.MaxPool2d(2)),
                    (3, 8, 8), ["Pad"], ["conv2d", "pad", "maxpool"], {}),
}


def seeded(module, seed):
    """Random but fixed BatchNorm statistics (so folding them is really tested); eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.3)
    return module.eval()


# the old chain format (metadata key `layers`): torch layouts, read as a graph by mpy_lazy.chain
LAYERS_TEXT = """input shape=1,8,8
conv2d w=0.weight b=0.bias in=1 out=4 k=3,3 stride=1,1 pad=1,1
relu
maxpool k=2,2 stride=2,2
conv2d w=3.weight b=3.bias in=4 out=6 k=3,3 stride=2,2 pad=1,1
relu
avgpool k=2,2 stride=2,2
flatten
linear w=7.weight b=7.bias in=6 out=5
softmax"""


def layers_cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(6, 5), nn.Softmax(dim=1)).eval()


# --------------------------------------------------------------------------- the zoo

class Zoo:
    pass


def _pack(e, workdir, kinds=("f32", "int8")):
    base = os.path.join(workdir, e.key)
    cal = os.path.join(workdir, e.key + "-calib.npy")
    # calibration inputs: seeded, another stream than the test inputs
    seed = zlib.crc32(e.key.encode())
    np.save(cal, np.random.default_rng(seed).standard_normal((16,) + e.shape).astype(np.float32))
    for kind in kinds:
        out = "%s-%s.mpyl" % (base, kind)
        if kind == "f32":
            cli("pack", e.onnx, "-o", out, "-q")
        elif kind == "f16":
            cli("pack", e.onnx, "-o", out, "-q", "--quantize", "f16")
        else:
            cli("pack", e.onnx, "-o", out, "-q", "--quantize", "int8", "--calibrate", cal)
        e.packs[kind] = Packed(out)


def _digits(workdir):
    train = _load("digits_train", os.path.join(ROOT, "examples", "digits", "train.py"))
    results = train.main()  # cached in examples/digits/out (about 50 s the first time)
    out = train.OUT
    d = {"train": train, "results": results, "calib": os.path.join(out, "calib.npy")}
    test = np.load(os.path.join(out, "test.npz"))
    d["x"] = train.to_float(test["x"])  # (360, 1, 8, 8), pixel / 16
    d["y"] = test["y"].astype(np.int64)
    d["packs"] = {}
    for name in train.MODELS:
        onnx_path = os.path.join(out, name + ".onnx")
        f32 = os.path.join(workdir, "digits-%s-f32.mpyl" % name)
        i8 = os.path.join(workdir, "digits-%s-int8.mpyl" % name)
        cli("pack", onnx_path, "-o", f32, "-q")
        cli("pack", onnx_path, "-o", i8, "-q", "--quantize", "int8", "--calibrate", d["calib"])
        d["packs"][name] = {"f32": Packed(f32), "int8": Packed(i8)}
    return d


def _layers_container(workdir):
    from safetensors.torch import save_file

    m = layers_cnn()
    st = os.path.join(workdir, "chain.safetensors")
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, st)
    out = os.path.join(workdir, "chain-layers.mpyl")
    cli("pack", st, "-o", out, "-q", "--meta", "layers=" + LAYERS_TEXT)
    xs = np.random.default_rng(3).uniform(0, 1, (3, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = m(torch.from_numpy(xs)).numpy()
    return Packed(out), xs, want


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("zoo"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; the other core runs MicroPython
    z = Zoo()
    z.dir = workdir
    z.boards = []
    try:
        # 1. TorchScript exports (fast), packs, and the first board run in the background
        z.mlperf = {}
        for name in mlperf.NAMES:
            module = mlperf.build(name)
            path = mlperf.export_onnx(module, os.path.join(workdir, name + "-ts.onnx"), dynamo=False)
            e = Entry(name + "-ts", module, mlperf.INPUT_SHAPES[name], path, N_MLPERF, seed=7)
            _pack(e, workdir, ("f32", "int8", "f16") if name == "kws" else ("f32", "int8"))
            z.mlperf[e.key] = e
        z.small = {}
        for i, (name, (build, shape, _, _, opts)) in enumerate(SMALL.items()):
            torch.manual_seed(100 + i)
            module = seeded(build(), 200 + i)
            path = export(module, shape, os.path.join(workdir, name + ".onnx"), **opts)
            e = z.small[name] = Entry(name, module, shape, path, N_SMALL, seed=300 + i)
            _pack(e, workdir)
        z.digits = _digits(workdir)
        z.chain, z.chain_xs, z.chain_want = _layers_container(workdir)
        ts = [e for e in z.mlperf.values()] + list(z.small.values())
        jobs = board_jobs(workdir, z.mlperf.values(), float_inputs=1)
        jobs += board_jobs(workdir, z.small.values())
        for name, packs in z.digits["packs"].items():
            p = packs["int8"]
            q = p.input_q()
            xs = [quantize(x, q).tolist() for x in z.digits["x"]]
            jobs.append({"name": p.name, "predict": True,
                         "xs": _write_json(os.path.join(workdir, p.name + ".json"), xs)})
        jobs.append({"name": z.chain.name, "xs": _write_json(os.path.join(workdir, "chain.json"),
                                                              [x.reshape(-1).tolist() for x in z.chain_xs])})
        packs = [p for e in ts for p in e.packs.values()] + [z.chain] + \
            [d["int8"] for d in z.digits["packs"].values()]
        z.board_ts = Board(workdir, "ts", [p.path for p in packs], jobs, path="viper")
        z.boards.append(z.board_ts)
        # 2. the dynamo exports (the slow part) while that runs; then their board run
        dyn = []
        for name in mlperf.NAMES:
            module = z.mlperf[name + "-ts"].module
            path = mlperf.export_onnx(module, os.path.join(workdir, name + "-dynamo.onnx"), dynamo=True)
            e = Entry(name + "-dynamo", module, mlperf.INPUT_SHAPES[name], path, N_MLPERF, seed=7)
            _pack(e, workdir)
            z.mlperf[e.key] = e
            dyn.append(e)
        jobs = board_jobs(workdir, dyn, float_inputs=1)
        z.board_dyn = Board(workdir, "dynamo", [p.path for e in dyn for p in e.packs.values()], jobs, path="viper")
        z.boards.append(z.board_dyn)
        yield z
    finally:
        torch.set_num_threads(threads)
        for b in z.boards:
            b.stop()


MLPERF_KEYS = ["%s-%s" % (n, x) for n in mlperf.NAMES for x in ("dynamo", "ts")]
# int8 on CPython's pure kernels takes seconds per inference for vww and resnet8: those two run
# from the default (dynamo) export only; their TorchScript graphs are the same graphs op for op
# (test_both_exporters_give_the_same_graph) and run on the board (test_mlperf_on_micropython_*).
CPYTHON_INT8_KEYS = [k for k in MLPERF_KEYS if k not in ("vww-ts", "resnet8-ts")]


def board_of(zoo, key):
    return zoo.board_dyn if key.endswith("-dynamo") else zoo.board_ts


# --------------------------------------------------------------------------- MLPerf Tiny

@pytest.mark.parametrize("key", MLPERF_KEYS)
def test_mlperf_float_matches_onnxruntime_on_cpython(zoo, key):
    e = zoo.mlperf[key]
    m = e.packs["f32"].model()
    for x, want in zip(e.xs, e.ort):
        m(x.reshape(-1).tolist())
        assert rel_err(m.tolist(), want) <= FLOAT_RTOL, key


@pytest.mark.parametrize("key", CPYTHON_INT8_KEYS)
def test_mlperf_int8_equals_reference_on_cpython(zoo, key):
    e = zoo.mlperf[key]
    p = e.packs["int8"]
    assert p.text.splitlines()[0].split()[0] == "input" and "dtype=i8" in p.text.splitlines()[0]
    ref = e.ref()
    with kernel_path("pure"):  # (one input: the pure path takes seconds for vww and resnet8)
        m = p.model()
        y = m(e.xi()[0].tolist())
        assert y is m.output
        assert m.tolist() == ref[0].tolist(), key
    # a sanity bound (8-bit activations through the whole net): int8 is near the float model
    s, z = output_q(p.text)
    for r, want in zip(ref, e.ort):
        assert rel_err(s * (r - z), want) < 0.25, key
    assert len({tuple(r) for r in ref}) == N_MLPERF  # not a constant (saturated) output


@pytest.mark.parametrize("key", MLPERF_KEYS)
def test_mlperf_on_micropython_from_romfs(zoo, key):
    e = zoo.mlperf[key]
    board = board_of(zoo, key)
    f = board.get(e.packs["f32"].name)
    assert f["path"] == "viper"
    assert len(f["ys"]) == 1
    assert rel_err(f["ys"][0], e.ort[0]) <= FLOAT_RTOL, key
    r = board.get(e.packs["int8"].name)
    assert r["path"] == "viper"
    assert len(r["ys"]) == N_MLPERF
    for got, want in zip(r["ys"], e.ref()):
        assert got == want.tolist(), key
    assert r["alloc"] == [0] * N_MLPERF, "bytes allocated per int8 inference: %s" % r["alloc"]


_GEOMETRY = ("k", "stride", "pad", "dil", "groups", "mult", "out", "shape", "order", "act", "layout", "dtype")


def _structure(text):
    """The description without its names and quantization numbers: ops, wiring, geometry."""
    ids, out = {}, []
    for _, op, kv in mgraph.parse(text):
        xs = kv.get("x")
        xs = xs if isinstance(xs, list) else ([xs] if xs else [])
        out.append((op, tuple(ids[x] for x in xs), tuple((k, kv[k]) for k in _GEOMETRY if k in kv)))
        if "y" in kv:
            ids[kv["y"]] = len(ids)
    return out


@pytest.mark.parametrize("name", mlperf.NAMES)
def test_both_exporters_give_the_same_graph(zoo, name):
    ts, dyn = zoo.mlperf[name + "-ts"], zoo.mlperf[name + "-dynamo"]
    assert onnx_ops(ts.onnx) != onnx_ops(dyn.onnx)  # two different ONNX graphs...
    for kind in ("f32", "int8"):  # ...one graph for the board
        assert _structure(ts.packs[kind].text) == _structure(dyn.packs[kind].text), kind


def test_batchnorm_folded(zoo):
    # ad (TorchScript): BatchNormalization after each Gemm; folded: the graph is 10 linear ops
    e = zoo.mlperf["ad-ts"]
    assert onnx_ops(e.onnx).count("BatchNormalization") == 9
    for kind in ("f32", "int8"):
        assert graph_ops(e.packs[kind].text) == ["linear"] * 10
    # Conv + BatchNormalization left by the exporter (no constant folding): folded into the convs
    e = zoo.small["conv_bn"]
    assert onnx_ops(e.onnx) == ["Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization"]
    assert graph_ops(e.packs["f32"].text) == ["conv2d", "depthwise"]
    assert graph_lines(e.packs["f32"].text, "conv2d")[0]["act"] == "relu"
    # standalone: at the input (no linear before it) and after an add: a 1x1 depthwise (per-channel affine)
    for key in ("bn1d", "bn_after_add"):
        text = zoo.small[key].packs["f32"].text
        dw = graph_lines(text, "depthwise")
        assert len(dw) == 1 and dw[0]["k"] == (1, 1), text
    # (their values: test_small_ops_*)


def test_shape_constants_never_packed(zoo):
    # dynamo's Flatten is a Reshape whose shape is an int64 initializer
    init = {t.name: t for t in onnx.load(zoo.mlperf["kws-dynamo"].onnx).graph.initializer}
    reshape = [n for n in onnx.load(zoo.mlperf["kws-dynamo"].onnx).graph.node if n.op_type == "Reshape"]
    assert reshape and any(i in init and init[i].data_type == onnx.TensorProto.INT64 for i in reshape[0].input)
    entries = list(zoo.mlperf.values()) + list(zoo.small.values())
    for e in entries:
        for kind, p in e.packs.items():
            named = set()
            for kv in graph_lines(p.text):
                for key in ("w", "b", "m", "t"):
                    if key in kv and isinstance(kv[key], str):
                        named.add(kv[key])
            assert set(p.c.names()) == named, (p.name, set(p.c.names()) ^ named)
            dtypes = {p.c.view(n).dtype for n in p.c.names()}
            assert dtypes <= {"f32", "f16", "i8", "i32"}, (p.name, dtypes)


def _zero_pads(module):
    """(top, left, bottom, right) of every nn.ZeroPad2d, in module order."""
    out = []
    for m in module.modules():
        if isinstance(m, nn.ZeroPad2d):
            l, r, t, b = m.padding
            out.append((t, l, b, r))
    return out


@pytest.mark.parametrize("name", ["kws", "vww", "resnet8"])
def test_asymmetric_pad_fused_into_the_conv(zoo, name):
    want = _zero_pads(zoo.mlperf[name + "-ts"].module)
    assert want and any(t != b or l != r for t, l, b, r in want)
    for exporter in ("ts", "dynamo"):
        e = zoo.mlperf["%s-%s" % (name, exporter)]
        ops = onnx_ops(e.onnx)
        if exporter == "ts":  # a Pad whose pads a small constant subgraph computes
            assert ops.count("Pad") == len(want) and "ConstantOfShape" in ops, ops
        for kind in ("f32", "int8"):
            text = e.packs[kind].text
            assert "pad" not in graph_ops(text), (e.key, kind)
            got = [tuple(kv["pad"]) for kv in graph_lines(text) if "pad" in kv
                   and (kv["pad"][0] != kv["pad"][2] or kv["pad"][1] != kv["pad"][3])]
            assert got == want, (e.key, kind, got)


def test_resnet8_is_a_graph_not_a_chain(zoo):
    e = zoo.mlperf["resnet8-ts"]
    assert not isinstance(e.module, nn.Sequential)
    for key in ("resnet8-ts", "resnet8-dynamo"):
        text = zoo.mlperf[key].packs["int8"].text
        adds = graph_lines(text, "add")
        assert len(adds) == 3
        for kv in adds:
            assert len(set(kv["x"])) == 2 and kv["clamp"][0] == kv["q"][1]  # the residual's relu: a clamp
        shortcut = [kv for kv in graph_lines(text, "conv2d") if kv["k"] == (1, 1)]
        assert len(shortcut) == 2 and all(kv["stride"] == (2, 2) for kv in shortcut)
    # outputs: test_mlperf_*


def _rounded_f16(path, out):
    """The ONNX model with the initializers mpy-lazy stores as f16 (float, 2+ dims) rounded."""
    from onnx import numpy_helper

    m = onnx.load(path)
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.ndim >= 2:
            t.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), t.name))
    onnx.save(m, out)
    return out


def test_f16_weights(zoo):
    e = zoo.mlperf["kws-ts"]
    p = e.packs["f16"]
    dt = {n: p.c.view(n).dtype for n in p.c.names()}
    assert {d for n, d in dt.items() if len(p.c.view(n).shape) >= 2} == {"f16"}
    sess = ort.InferenceSession(_rounded_f16(e.onnx, os.path.join(zoo.dir, "kws-f16w.onnx")),
                                providers=["CPUExecutionProvider"])
    rounded = [flat(sess.run(None, {"x": x[None]})[0]) for x in e.xs]
    m = p.model()
    ys = []
    for x in e.xs:
        m(x.reshape(-1).tolist())
        ys.append(m.tolist())
    ys.append(zoo.board_ts.get(p.name)["ys"][0])
    for y, want, exact in zip(ys, e.ort + e.ort[:1], rounded + rounded[:1]):
        assert rel_err(y, exact) <= FLOAT_RTOL  # the runtime computes with the f16 weights exactly
        # against the f32 model: f16's unit roundoff is 2**-11 = 4.9e-4 per weight
        assert rel_err(y, want) <= 4 * 2.0 ** -11


# --------------------------------------------------------------------------- small ops

@pytest.mark.parametrize("name", list(SMALL))
def test_small_ops_float(zoo, name):
    e = zoo.small[name]
    _, _, want_onnx, want_graph, _ = SMALL[name]
    ops = onnx_ops(e.onnx)
    assert all(op in ops for op in want_onnx), ops
    p = e.packs["f32"]
    assert graph_ops(p.text) == want_graph, p.text
    m = p.model()
    for path in kernels.available():
        with kernel_path(path):
            for x, want in zip(e.xs, e.ort):
                m(x.reshape(-1).tolist())
                assert rel_err(m.tolist(), want) <= FLOAT_RTOL, (name, path)


@pytest.mark.parametrize("name", list(SMALL))
def test_small_ops_int8(zoo, name):
    e = zoo.small[name]
    p = e.packs["int8"]
    assert graph_ops(p.text) == [
        "lut" if op in ("leakyrelu", "sigmoid", "tanh") else op for op in SMALL[name][3]], p.text
    with kernel_path("pure"):
        m = p.model()
        for xi, x, ref in zip(e.xi(), e.xs, e.ref()):
            m(xi.tolist())
            assert m.tolist() == ref.tolist(), name
            m(x.reshape(-1).tolist())
            assert m.tolist() == ref.tolist(), name
    s, z = output_q(p.text)
    for ref, want in zip(e.ref(), e.ort):
        assert rel_err(s * (ref - z), want) < 0.25, name
    assert e.ref()[0].tolist() != e.ref()[1].tolist()


@pytest.mark.parametrize("name", list(SMALL))
def test_small_ops_on_micropython(zoo, name):
    e = zoo.small[name]
    board = board_of(zoo, name)
    f = board.get(e.packs["f32"].name)
    assert f["path"] == "viper" and len(f["ys"]) == N_SMALL
    for y, want in zip(f["ys"], e.ort):
        assert rel_err(y, want) <= FLOAT_RTOL, name
    r = board.get(e.packs["int8"].name)
    assert [np.array(y).tolist() for y in r["ys"]] == [ref.tolist() for ref in e.ref()], name
    assert r["alloc"] == [0] * N_SMALL, r["alloc"]


# --------------------------------------------------------------------------- digits, layers chain

def test_digits_int8_accuracy_within_a_point_of_f32(zoo):
    d = zoo.digits
    assert len(d["y"]) == 360
    acc = {}
    for name, packs in d["packs"].items():
        m = packs["f32"].model()
        pred = np.array([m.predict(x.reshape(-1).tolist()) for x in d["x"]])
        acc[name + " f32"] = float(np.mean(pred == d["y"]))
        # the float container is the trained torch model: its accuracy, give or take a borderline image
        assert abs(acc[name + " f32"] - d["results"]["torch_acc"][name]) <= 1.0 / 360 + 1e-9, acc
        got = zoo.board_ts.get(packs["int8"].name)
        assert got["path"] == "viper"
        acc[name + " int8"] = float(np.mean(np.array(got["pred"]) == d["y"]))
        assert abs(acc[name + " int8"] - acc[name + " f32"]) <= 0.01 + 1e-9, acc
        # the board's predictions are the reference's (a sample of the images: it is slow)
        p = packs["int8"]
        q = p.input_q()
        for i in range(0, 360, 45):
            ref = reference.run(p.text, p.tensors, quantize(d["x"][i], q))[0].reshape(-1)
            assert got["pred"][i] == int(np.argmax(ref)), (name, i)


def test_layers_chain_container_still_runs(zoo):
    p = zoo.chain
    assert p.text is None and p.c.meta["layers"] == LAYERS_TEXT
    m = mmodel.from_container(p.c)
    assert [op.name for op in m.ops] == ["conv2d", "relu", "maxpool", "conv2d", "relu", "avgpool", "reshape",
                                         "linear", "softmax"]
    for path in kernels.available():
        with kernel_path(path):
            for x, want in zip(zoo.chain_xs, zoo.chain_want):
                m(x.reshape(-1).tolist())
                assert rel_err(m.tolist(), want) <= FLOAT_RTOL, path
    r = zoo.board_ts.get(p.name)
    assert r["path"] == "viper"
    for y, want in zip(r["ys"], zoo.chain_want):
        assert rel_err(y, want) <= FLOAT_RTOL


def test_weights_only_container_is_not_a_model(zoo, tmp_path):
    from safetensors.torch import save_file

    st = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in layers_cnn().state_dict().items()}, str(st))
    cli("pack", st, "-o", tmp_path / "w.mpyl", "-q")
    c = mpy_lazy.open((tmp_path / "w.mpyl").read_bytes())
    with pytest.raises(ContainerError, match="graph"):
        mmodel.from_container(c)


# --------------------------------------------------------------------------- ulab firmware

def _ulab():
    exe = os.environ.get("MICROPYTHON_ULAB")
    if not exe:
        pytest.skip("MICROPYTHON_ULAB not set (a MicroPython unix build with ulab)")
    if not os.path.exists(exe):
        pytest.skip("MICROPYTHON_ULAB=%s does not exist" % exe)
    return exe


def test_small_ops_on_ulab(zoo):
    exe = _ulab()
    entries = [zoo.small[n] for n in SMALL]
    board = Board(zoo.dir, "ulab", [p.path for e in entries for p in e.packs.values()],
                  board_jobs(zoo.dir, entries), binary=exe, path="ulab")
    zoo.boards.append(board)
    for e in entries:
        f = board.get(e.packs["f32"].name)
        assert f["path"] == "ulab"
        for y, want in zip(f["ys"], e.ort):
            assert rel_err(y, want) <= FLOAT_RTOL, e.key
        r = board.get(e.packs["int8"].name)
        assert r["ys"] == [ref.tolist() for ref in e.ref()], e.key
        assert r["alloc"] == [0] * N_SMALL, (e.key, r["alloc"])  # int8 ops run on viper there


def _runtime_functions(*modules):
    import ast

    for mod in modules:
        with open(os.path.join(RUNTIME_TESTS, mod + ".py")) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield pytest.param(mod, node.name, id="%s::%s" % (mod, node.name))


@pytest.mark.parametrize("module,func", list(_runtime_functions("test_kernels", "test_model")))
def test_runtime_kernels_on_ulab(module, func):
    """The kernel and model runtime tests, unchanged, on the ulab firmware (all three paths)."""
    exe = _ulab()
    r = run_micropython("import %s\n%s.%s()\nprint('MPY-TEST-OK')\n" % (module, module, func), binary=exe)
    if "MPY-TEST-SKIP:" in r.stdout:
        pytest.skip(r.stdout.split("MPY-TEST-SKIP:", 1)[1].strip().splitlines()[0])
    assert r.returncode == 0 and "MPY-TEST-OK" in r.stdout, r.stdout + r.stderr
