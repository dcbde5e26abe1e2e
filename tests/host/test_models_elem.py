"""The elementwise ops, resize and the norms (issue 20: LayerNorm; GroupNorm, InstanceNorm1d/2d
with and without affine, each one groupnorm op) in small torch models, exported with
both torch exporters (the TorchScript one, dynamo=False, and the default dynamo one), packed f32
and int8 (calibrated), against onnxruntime and the host reference interpreter, on CPython and
on the MicroPython unix port (viper), as tests/host/test_models.py does for its zoo:

- f32: within 1e-4 (relative to the largest output) of onnxruntime, every kernel path;
- int8: equal to host_tools.reference.run on the container's own tensors, 0 bytes allocated per
  inference on the board (but where a norm runs in float), and near the float
  model (a sanity bound: 8-bit activations);
- how each op is quantized: HardSwish as TFLite's converter and TFLM do it (a table of TFLM's
  fixed-point HARD_SWISH), PRelu, Div, Min/Max, Resize with TFLM's integer arithmetic,
  HardSigmoid and Gelu as tables of the float function, the norms in float between a
  dequantize and a quantize.
- torchvision's mobilenet_v3_small (all of the above in one real network: HardSwish, the
  squeeze-and-excite gates' HardSigmoid) at 32x32, f32 and int8, on CPython and the board."""
import os
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn
F = torch.nn.functional

from host_util import Board, kernel_path  # noqa: E402
from test_models import (FLOAT_RTOL, Entry, _pack, board_jobs, export, graph_lines, graph_ops, onnx_ops,  # noqa: E402
                         output_q, rel_err)

from mpy_lazy import kernels  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")
N_INPUTS = 2


class ActNet(nn.Module):
    """HardSwish, HardSigmoid, PReLU per channel and with one slope (MobileNetV3's activations)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 6, 1), nn.Conv2d(6, 6, 3)
        self.p1, self.p2 = nn.PReLU(6), nn.PReLU()
        with torch.no_grad():
            self.p1.weight.copy_(torch.tensor([0.25, -0.5, 0.1, 1.5, 0.0, -0.05]))
            self.p2.weight.fill_(0.3)

    def forward(self, x):
        x = F.hardswish(self.c1(x))
        x = F.hardsigmoid(self.c2(x)) * 4.0 - 2.0  # (a per-tensor affine: a 1x1 depthwise)
        return self.p2(self.c3(self.p1(x)))


class GeluNorm(nn.Module):
    """Gelu (erf and tanh forms) and LayerNorm over a vector."""

    def __init__(self):
        super().__init__()
        self.f1, self.f2, self.f3 = nn.Linear(8, 12), nn.Linear(12, 12), nn.Linear(12, 4)
        self.norm = nn.LayerNorm(12)

    def forward(self, x):
        x = F.gelu(self.f1(x))
        return self.f3(F.gelu(self.norm(self.f2(x)), approximate="tanh"))


class SeqNorm(nn.Module):
    """LayerNorm over the features of a (N, T, D) sequence (the board stores D across its W)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.conv = nn.Conv1d(5, 3, 1)
        with torch.no_grad():
            self.norm.weight.copy_(torch.linspace(0.5, 1.5, 6))
            self.norm.bias.copy_(torch.linspace(-0.3, 0.3, 6))

    def forward(self, x):
        return self.conv(self.norm(x))


def _seeded_affine(norm, seed):
    """A norm's weight and bias away from torch's ones and zeros (the packed form folds them)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(norm.weight.shape, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(norm.bias.shape, generator=g) * 0.3)
    return norm


class GroupNormNet(nn.Module):
    """GroupNorm (3 groups of 2 channels; the exporters write Reshape, InstanceNormalization,
    Reshape, Mul, Add) then ReLU, a 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 4, 1)
        self.norm = _seeded_affine(nn.GroupNorm(3, 6), 1)

    def forward(self, x):
        return self.c2(torch.relu(self.norm(self.c1(x))))


class InstanceNormNet(nn.Module):
    """InstanceNorm2d with an affine (ONNX InstanceNormalization's scale and bias) and without."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 5, 1)
        self.n1, self.n2 = _seeded_affine(nn.InstanceNorm2d(4, affine=True), 2), nn.InstanceNorm2d(5)

    def forward(self, x):
        return self.n2(self.c2(self.n1(self.c1(x))))


class Norm1d(nn.Module):
    """InstanceNorm1d and GroupNorm over an (N, C, L) sequence (the board stores it 1, L, C)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv1d(3, 4, 3), nn.Conv1d(4, 4, 1)
        self.n1, self.n2 = _seeded_affine(nn.InstanceNorm1d(4, affine=True), 3), _seeded_affine(nn.GroupNorm(2, 4), 4)

    def forward(self, x):
        return self.n2(self.c2(self.n1(self.c1(x))))


class ResizeNet(nn.Module):
    """nn.Upsample nearest and bilinear (half pixel, align_corners), F.interpolate by 1.5 x 0.75
    and to a size (the TorchScript exporter computes its sizes from the input's Shape)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3), nn.Conv2d(4, 3, 1)

    def forward(self, x):
        x = F.interpolate(self.c1(x), scale_factor=2, mode="nearest")
        x = F.interpolate(self.c2(x), scale_factor=2, mode="bilinear")
        x = F.interpolate(self.c3(x), scale_factor=(1.5, 0.75), mode="bilinear")
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
        return F.interpolate(x, size=(9, 7), mode="nearest")


class MinMaxDiv(nn.Module):
    """torch.maximum of two activations, torch.minimum with a constant, a division by an
    activation (kept away from zero by a sigmoid)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        m = torch.minimum(torch.maximum(self.a(x), self.b(x)), torch.tensor(0.5))
        return m / torch.sigmoid(self.c(x))


# name: (module, input shape, ONNX ops the export has, the f32 graph's ops, the int8 graph's ops)
MODELS = {
    "act": (ActNet, (3, 6, 6), ["HardSwish", "HardSigmoid", "PRelu"],
            ["conv2d", "hardswish", "conv2d", "hardsigmoid", "depthwise", "prelu", "conv2d", "prelu"],
            ["conv2d", "lut", "conv2d", "lut", "depthwise", "prelu", "conv2d", "prelu"]),
    "gelu_norm": (GeluNorm, (8,), ["Gelu", "LayerNormalization"],
                  ["linear", "gelu", "linear", "layernorm", "gelu", "linear"],
                  ["linear", "lut", "linear", "dequantize", "layernorm", "quantize", "lut", "linear"]),
    "seq_norm": (SeqNorm, (5, 6), ["LayerNormalization"], ["layernorm", "conv2d"],
                 ["dequantize", "layernorm", "quantize", "conv2d"]),
    "group_norm": (GroupNormNet, (3, 5, 6), ["InstanceNormalization"], ["conv2d", "groupnorm", "relu", "conv2d"],
                   ["conv2d", "dequantize", "groupnorm", "quantize", "lut", "conv2d"]),
    "instance_norm": (InstanceNormNet, (3, 5, 4), ["InstanceNormalization"],
                      ["conv2d", "groupnorm", "conv2d", "groupnorm"],
                      ["conv2d", "dequantize", "groupnorm", "quantize", "conv2d", "dequantize", "groupnorm",
                       "quantize"]),
    "norm1d": (Norm1d, (3, 9), ["InstanceNormalization"], ["conv2d", "groupnorm", "conv2d", "groupnorm"],
               ["conv2d", "dequantize", "groupnorm", "quantize", "conv2d", "dequantize", "groupnorm", "quantize"]),
    "resize": (ResizeNet, (3, 4, 5), ["Resize"],
               ["conv2d", "resize", "conv2d", "resize", "conv2d", "resize", "resize", "resize"],
               ["conv2d", "resize", "conv2d", "resize", "conv2d", "resize", "resize", "resize"]),
    "minmax_div": (MinMaxDiv, (3, 4, 5), ["Max", "Min", "Div"],
                   ["conv2d", "conv2d", "maximum", "minimum", "conv2d", "sigmoid", "div"],
                   ["conv2d", "conv2d", "maximum", "minimum", "conv2d", "lut", "div"]),
}
KEYS = ["%s-%s" % (name, exp) for name in MODELS for exp in ("ts", "dynamo")]


def mobilenet_v3_small():
    """torchvision's mobilenet_v3_small (10 classes, seeded weights). PyPI's torchvision wheel
    carries C++ operators built for a CUDA torch; beside the CPU build of torch they do not
    load and `import torchvision` fails registering them. Its models are plain Python and need
    none of them: the import is retried without that registration."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pytest.skip("torchvision is not installed")
    except RuntimeError:
        for name in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    from torchvision.models import mobilenet_v3_small as build

    torch.manual_seed(50)
    return build(num_classes=10).eval()


MOBILENET = ("mobilenet_v3_small", (3, 32, 32))


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Every model exported and packed; two boards in the background: the TorchScript exports'
    (with MobileNet) runs while the dynamo exporter works, then the dynamo exports' one."""
    workdir = str(tmp_path_factory.mktemp("zoo_elem"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    entries, boards = {}, {}
    modules = {}
    try:
        for exp in ("ts", "dynamo"):
            batch = []
            for i, (name, (build, shape, _, _, _)) in enumerate(MODELS.items()):
                torch.manual_seed(40 + i)
                module = modules.setdefault(name, build().eval())
                key = "%s-%s" % (name, exp)
                path = export(module, shape, os.path.join(workdir, key + ".onnx"), dynamo=exp == "dynamo")
                e = entries[key] = Entry(key, module, shape, path, N_INPUTS, seed=60 + i)
                _pack(e, workdir)
                batch.append(e)
            jobs = board_jobs(workdir, batch)
            if exp == "ts":
                key, shape = MOBILENET  # (the TorchScript exporter: the dynamo one takes 10 s on it)
                path = export(mobilenet_v3_small(), shape, os.path.join(workdir, key + ".onnx"))
                e = entries[key] = Entry(key, None, shape, path, N_INPUTS, seed=70)
                _pack(e, workdir)
                jobs += board_jobs(workdir, [e], float_inputs=1)
                batch.append(e)
            boards[exp] = Board(workdir, "elem-" + exp, [p.path for e in batch for p in e.packs.values()], jobs,
                                path="viper")
        yield entries, boards
    finally:
        torch.set_num_threads(threads)
        for b in boards.values():
            b.stop()


def board_of(zoo, key):
    return zoo[1]["dynamo" if key.endswith("-dynamo") else "ts"]


@pytest.mark.parametrize("key", KEYS)
def test_graph(zoo, key):
    e = zoo[0][key]
    _, _, want_onnx, want_f32, want_int8 = MODELS[key.split("-")[0]]
    ops = onnx_ops(e.onnx)
    assert all(op in ops for op in want_onnx), ops
    assert graph_ops(e.packs["f32"].text) == want_f32, e.packs["f32"].text
    assert graph_ops(e.packs["int8"].text) == want_int8, e.packs["int8"].text


@pytest.mark.parametrize("key", KEYS)
def test_float_matches_onnxruntime(zoo, key):
    e = zoo[0][key]
    m = e.packs["f32"].model()
    for path in kernels.available():
        with kernel_path(path):
            for x, want in zip(e.xs, e.ort):
                m(x.reshape(-1).tolist())
                assert rel_err(m.tolist(), want) <= FLOAT_RTOL, (key, path, rel_err(m.tolist(), want))


@pytest.mark.parametrize("key", KEYS)
def test_int8_equals_reference(zoo, key):
    e = zoo[0][key]
    p = e.packs["int8"]
    with kernel_path("pure"):
        m = p.model()
        for xi, ref in zip(e.xi(), e.ref()):
            m(xi.tolist())
            assert m.tolist() == ref.tolist(), key
    s, z = output_q(p.text)
    for ref, want in zip(e.ref(), e.ort):
        assert rel_err(s * (ref - z), want) < 0.25, (key, rel_err(s * (ref - z), want))
    assert e.ref()[0].tolist() != e.ref()[1].tolist()


@pytest.mark.parametrize("key", KEYS)
def test_on_micropython(zoo, key):
    e = zoo[0][key]
    f = board_of(zoo, key).get(e.packs["f32"].name)
    assert f["path"] == "viper" and len(f["ys"]) == N_INPUTS
    for y, want in zip(f["ys"], e.ort):
        assert rel_err(y, want) <= FLOAT_RTOL, key
    r = board_of(zoo, key).get(e.packs["int8"].name)
    assert [np.array(y).tolist() for y in r["ys"]] == [ref.tolist() for ref in e.ref()], key
    if "dequantize" not in graph_ops(e.packs["int8"].text):  # (a float island boxes its floats)
        assert r["alloc"] == [0] * N_INPUTS, r["alloc"]


def test_quantized_as_tflite_converts(zoo):
    """HardSwish's table is TFLM's HARD_SWISH for the calibrated scales; PRelu's alpha is one
    symmetric int8 scale (the converter's); Min/Max share one quantization with their inputs;
    bilinear resizes carry TFLM's integer coordinates (weights in 1/1024)."""
    from host_tools import tflm

    for exp in ("ts", "dynamo"):
        p = zoo[0]["act-" + exp].packs["int8"]
        lines = graph_lines(p.text)
        q = {kv["y"]: kv.get("q") for kv in lines if "y" in kv}
        luts = [kv for kv in graph_lines(p.text, "lut")]
        hs = luts[0]
        assert p.tensors[hs["t"]].tolist() == tflm.hard_swish_table(*(q[hs["x"]] + q[hs["y"]]))
        for kv in graph_lines(p.text, "prelu"):
            assert kv["m"][2] == 0 and p.tensors[kv["w"]].dtype == np.int8
        mm = zoo[0]["minmax_div-" + exp].packs["int8"]
        qs = {kv["y"]: kv.get("q") for kv in graph_lines(mm.text) if "y" in kv}
        for kv in graph_lines(mm.text, "maximum") + graph_lines(mm.text, "minimum"):
            assert all(qs[x] == kv["q"] for x in kv["x"]), kv
        rs = zoo[0]["resize-" + exp].packs["int8"]
        for kv in graph_lines(rs.text, "resize"):
            t = rs.tensors[kv["t"]].reshape(-1)
            if kv.get("interp") == "bilinear":
                assert np.all(np.abs(t[2::3]) <= 2048)  # 1/1024 units, not float bits


def test_mobilenet_v3_small(zoo):
    """torchvision's MobileNetV3-small: f32 within 1e-4 of onnxruntime (CPython's default path
    and the board), int8 equal to the host reference on the board (0 bytes per inference) and
    near the float model; its HardSwish and HardSigmoid are int8 tables, its gates int8 muls."""
    e = zoo[0][MOBILENET[0]]
    assert {"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul"} <= set(onnx_ops(e.onnx))
    ops = graph_ops(e.packs["int8"].text)
    assert "hardswish" not in ops and ops.count("lut") >= 10 and ops.count("mul") == 9, ops
    m = e.packs["f32"].model()
    for x, want in zip(e.xs, e.ort):
        m(x.reshape(-1).tolist())
        assert rel_err(m.tolist(), want) <= FLOAT_RTOL
    f = zoo[1]["ts"].get(e.packs["f32"].name)  # (one input: floats in plain Python take seconds)
    assert len(f["ys"]) == 1 and rel_err(f["ys"][0], e.ort[0]) <= FLOAT_RTOL
    r = zoo[1]["ts"].get(e.packs["int8"].name)
    assert r["path"] == "viper"
    assert [np.array(y).tolist() for y in r["ys"]] == [ref.tolist() for ref in e.ref()]
    assert r["alloc"] == [0] * N_INPUTS, r["alloc"]
    s, z = output_q(e.packs["int8"].text)
    for ref, want in zip(e.ref(), e.ort):
        assert rel_err(s * (ref - z), want) < 0.25
