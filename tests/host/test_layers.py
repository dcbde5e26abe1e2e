"""Layer descriptions from torch and ONNX, `mpy-lazy pack` recording them, and models built from
packed containers agreeing with PyTorch on CPython (numpy and pure paths) and on the
MicroPython unix port (viper and pure; ulab where MICROPYTHON_ULAB is set)."""
import ast
import json
import os
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as tnn

from conftest import ROOT, RUNTIME_TESTS, run_micropython
from host_tools import layers
from host_tools.container import PackError
from host_util import cli  # noqa: F401 (fixture)

import mpy_lazy
from mpy_lazy import model, nn

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

CNN_TEXT = """input shape=1,8,8
conv2d w=0.weight b=0.bias in=1 out=4 k=3,3 stride=1,1 pad=1,1
relu
maxpool k=2,2 stride=2,2
conv2d w=3.weight b=3.bias in=4 out=6 k=3,3 stride=2,2 pad=1,1
relu
avgpool k=2,2 stride=2,2
flatten
linear w=7.weight b=7.bias in=6 out=5
softmax"""


def tiny_cnn():
    torch.manual_seed(0)
    return tnn.Sequential(tnn.Conv2d(1, 4, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                          tnn.Conv2d(4, 6, 3, stride=2, padding=1), tnn.ReLU(), tnn.AvgPool2d(2),
                          tnn.Flatten(), tnn.Linear(6, 5), tnn.Softmax(dim=1)).eval()


def tiny_mlp():
    torch.manual_seed(1)
    return tnn.Sequential(tnn.Flatten(), tnn.Linear(64, 24), tnn.ReLU(), tnn.Dropout(0.1),
                          tnn.Sequential(tnn.Linear(24, 10))).eval()


def export_onnx(m, path, shape):
    torch.onnx.export(m, (torch.zeros((1,) + shape),), str(path), input_names=["x"],
                      output_names=["y"], dynamo=False)
    return str(path)


def test_from_torch():
    assert layers.from_torch(tiny_cnn(), (1, 8, 8)) == CNN_TEXT
    text = layers.from_torch(tiny_mlp(), (1, 8, 8))
    assert text.splitlines()[1:] == ["flatten", "linear w=1.weight b=1.bias in=64 out=24", "relu",
                                     "linear w=4.0.weight b=4.0.bias in=24 out=10"]
    for bad in (tnn.Sequential(tnn.Conv2d(2, 2, 3, groups=2)), tnn.Sequential(tnn.BatchNorm2d(2)),
                tnn.Sequential(tnn.MaxPool2d(2, padding=1)), tnn.Sequential(tnn.Linear(4, 2)),
                tnn.Sequential(tnn.Softmax(dim=0))):
        with pytest.raises(PackError):
            layers.from_torch(bad, (2, 4, 4))


def test_from_onnx_matches_torch(tmp_path):
    for m, shape in ((tiny_cnn(), (1, 8, 8)), (tiny_mlp(), (1, 8, 8))):
        path = export_onnx(m, tmp_path / "m.onnx", shape)
        assert layers.from_onnx(path) == layers.from_torch(m, shape)


def _graph(nodes, inits, out="y", in_shape=(1, 16)):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g)


def test_from_onnx_matmul_reshape_and_errors():
    from onnx import helper

    rng = np.random.default_rng(0)
    inits = {"W": rng.standard_normal((16, 8)).astype(np.float32), "B": np.zeros(8, np.float32),
             "shape": np.array([1, -1], np.int64)}
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
             helper.make_node("Softmax", ["a"], ["y"], axis=1)]
    text = layers.from_onnx(_graph(nodes, inits))
    assert text.splitlines() == ["input shape=16", "flatten", "linear w=W b=B in=16 out=8 t=1", "softmax"]
    bad = [
        ([helper.make_node("Sigmoid", ["x"], ["y"])], "Sigmoid"),
        ([helper.make_node("Gemm", ["x", "W"], ["y"], alpha=2.0)], "alpha"),
        ([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["x"], ["y"])], "chain"),
    ]
    for nodes, word in bad:
        with pytest.raises(PackError, match=word):
            layers.from_onnx(_graph(nodes, inits))


def test_pack_records_layers(cli, tmp_path):
    onnx_path = export_onnx(tiny_cnn(), tmp_path / "cnn.onnx", (1, 8, 8))
    out = tmp_path / "cnn.mpyl"
    cli.ok("pack", onnx_path, "-o", out, "-q")
    meta = cli.inspect(out)["meta"]
    meta = meta if isinstance(meta, dict) else dict(meta)
    assert meta["layers"] == CNN_TEXT
    # --layers FILE for a safetensors input; checked against the tensors
    from safetensors.torch import save_file

    st = tmp_path / "cnn.safetensors"
    save_file(tiny_cnn().state_dict(), str(st))
    desc = tmp_path / "cnn.layers"
    desc.write_text(CNN_TEXT)
    cli.ok("pack", st, "-o", tmp_path / "b.mpyl", "--layers", desc, "-q")
    desc.write_text(CNN_TEXT.replace("in=6 out=5", "in=6 out=4"))
    line = cli.fails("pack", st, "-o", tmp_path / "c.mpyl", "--layers", desc)
    assert "7.weight" in line and not (tmp_path / "c.mpyl").exists()
    # a graph the runner cannot run is still packed, without a description
    rc, stdout, _ = cli("pack", export_onnx(tnn.Sequential(tnn.Linear(4, 4), tnn.Sigmoid()),
                                            tmp_path / "s.onnx", (4,)), "-o", tmp_path / "s.mpyl")
    assert rc == 0 and "no layer description" in stdout


def _pack_all(cli, tmp_path, m, shape, name):
    onnx_path = export_onnx(m, tmp_path / (name + ".onnx"), shape)
    out = {}
    for label, q in (("f32", "none"), ("f16", "f16"), ("int8", "int8"), ("int8c", "int8-channel")):
        out[label] = str(tmp_path / ("%s-%s.mpyl" % (name, label)))
        cli.ok("pack", onnx_path, "-o", out[label], "--quantize", q, "-q")
    return out


# how far each stored dtype may move the output (softmax probabilities / logits)
TOL = {"f32": 2e-5, "f16": 3e-3, "int8": 0.05, "int8c": 0.05}


def _inputs(n, shape):
    rng = np.random.default_rng(3)
    return rng.uniform(0, 1, (n,) + shape).astype(np.float32)


def test_models_match_torch_on_cpython(cli, tmp_path):
    for m, name in ((tiny_cnn(), "cnn"), (tiny_mlp(), "mlp")):
        xs = _inputs(4, (1, 8, 8))
        with torch.no_grad():
            want = m(torch.from_numpy(xs)).numpy()
        for label, path in _pack_all(cli, tmp_path, m, (1, 8, 8), name).items():
            c = mpy_lazy.open(path)
            net = model.from_container(c)
            for p in nn.available():
                nn.use(p)
                for x, w in zip(xs, want):
                    got = np.array(nn.tolist(net(x.reshape(-1).tolist())))
                    assert np.max(np.abs(got - w)) <= TOL[label] * max(1.0, np.max(np.abs(w))), (name, label, p)
            nn.use()
            rep = mpy_lazy.report(net, show=False)
            assert rep["ram"] == 0 and rep["flash"] > 0  # weights read in place


RUN_ON_BOARD = """
import mpy_lazy, vfs, json
from mpy_lazy import model, nn
f = open(%(image)r, 'rb'); img = f.read(); f.close()
vfs.mount(vfs.VfsRom(img), '/rom')
xs = %(xs)r
out = {}
for name in %(names)r:
    c = mpy_lazy.open('/rom/' + name)
    m = model.from_container(c)
    for p in nn.available():
        nn.use(p)
        out[name + ' ' + p] = [nn.tolist(m(x)) for x in xs]
print('OUT', json.dumps(out))
"""


def _board_outputs(cli, tmp_path, binary=None):
    m = tiny_cnn()
    paths = _pack_all(cli, tmp_path, m, (1, 8, 8), "cnn")
    image = tmp_path / "models.romfs"
    cli.ok("romfs", *paths.values(), "-o", image, "-q")
    xs = _inputs(3, (1, 8, 8))
    with torch.no_grad():
        want = m(torch.from_numpy(xs)).numpy()
    names = [os.path.basename(p) for p in paths.values()]
    r = run_micropython(RUN_ON_BOARD % {"image": str(image), "xs": [x.reshape(-1).tolist() for x in xs],
                                        "names": names}, binary=binary, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.split("OUT ", 1)[1])
    return out, want, {os.path.basename(p): label for label, p in paths.items()}


def test_models_from_romfs_on_micropython(cli, tmp_path):
    out, want, labels = _board_outputs(cli, tmp_path)
    seen = set()
    for key, ys in out.items():
        name, p = key.split()
        seen.add(p)
        for got, w in zip(ys, want):
            assert np.max(np.abs(np.array(got) - w)) <= TOL[labels[name]], (key, got, w)
    assert seen == {"viper", "pure"}
    # viper and pure run the same integer arithmetic: identical int8 results
    for name in labels:
        assert np.allclose(out[name + " viper"], out[name + " pure"], atol=1e-6), name


def _ulab():
    exe = os.environ.get("MICROPYTHON_ULAB")
    if not exe:
        pytest.skip("MICROPYTHON_ULAB not set (a MicroPython unix build with ulab)")
    if not os.path.exists(exe):
        pytest.skip("MICROPYTHON_ULAB=%s does not exist" % exe)
    return exe


def test_models_from_romfs_on_ulab(cli, tmp_path):
    exe = _ulab()
    out, want, labels = _board_outputs(cli, tmp_path, binary=exe)
    assert any(k.endswith(" ulab") for k in out)
    for key, ys in out.items():
        for got, w in zip(ys, want):
            assert np.max(np.abs(np.array(got) - w)) <= TOL[labels[key.split()[0]]], key


def _runtime_functions(*modules):
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
