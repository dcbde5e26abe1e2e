"""`mpy-lazy pack` on models: what it refuses at pack time (an op or a form of an op the runtime
cannot run, int8 without calibration, bad calibration samples, a bad --graph description), what
it packs instead (--weights-only, weight files, --graph FILE) and the graph summary it prints.
Expected failures: exit 1, exactly one `mpy-lazy: error:` line on stderr, no output file."""
import contextlib
import io
import logging
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn

from host_util import cli  # noqa: E402,F401 (fixture)

import mpy_lazy  # noqa: E402
from mpy_lazy import ContainerError, graph as mgraph, model as mmodel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")


def export(module, shape, path, **kw):
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), (torch.zeros((1,) + tuple(shape)),), str(path), input_names=["x"],
                              output_names=["y"], dynamo=False, **kw)
    finally:
        log.setLevel(level)
    return str(path)


class LSTM(nn.Module):
    """A bidirectional LSTM (one forward LSTM layer runs: tests/host/test_rnn.py)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 3, bidirectional=True)
        self.register_buffer("h0", torch.zeros(2, 1, 3))
        self.register_buffer("c0", torch.zeros(2, 1, 3))

    def forward(self, x):
        return self.lstm(x, (self.h0, self.c0))[0]


class SelfProduct(nn.Module):
    """A product of two activations (attention's): MatMul runs with a constant weight only."""

    def forward(self, x):
        return x @ x.transpose(1, 2)


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64, 5)).eval()


# name: (module, input shape, the ONNX op the line must name)
REFUSED = {
    "elu": (lambda: nn.Sequential(nn.Linear(4, 6), nn.ELU()), (4,), "Elu"),
    "lstm": (LSTM, (1, 4), "LSTM"),
    # forms of supported ops the runtime does not run
    "matmul_activations": (SelfProduct, (4, 3), "MatMul"),  # (its Transpose runs)
    "dilated_maxpool": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, dilation=2)), (1, 6, 6),
                        "MaxPool"),
    "reflection_pad": (lambda: nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(1, 2, 3)), (1, 6, 6), "Pad"),
}


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_models")
    torch.manual_seed(0)
    files = {name: export(build(), shape, d / (name + ".onnx")) for name, (build, shape, _) in REFUSED.items()}
    files["cnn"] = export(cnn(), (1, 8, 8), d / "cnn.onnx")
    return files


def _node(path, op):
    """The name of the first node of type `op` in the ONNX file."""
    return [n for n in onnx.load(path).graph.node if n.op_type == op][0].name


@pytest.mark.parametrize("name", list(REFUSED))
def test_unsupported_model_is_refused_at_pack_time(cli, onnx_files, tmp_path, name):
    path = onnx_files[name]
    op = REFUSED[name][2]
    node = _node(path, op)
    # onnxruntime runs it: a valid model, the board cannot run it
    ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for quantize in ("none", "f16"):
        out = tmp_path / ("%s-%s.mpyl" % (name, quantize))
        line = cli.fails("pack", path, "-o", out, "--quantize", quantize)
        assert "(%s)" % op in line and repr(node) in line, line
        assert os.path.basename(path) in line
        assert not out.exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["elu", "lstm"])
def test_weights_only_packs_the_initializers(cli, onnx_files, tmp_path, name):
    from onnx import numpy_helper

    path = onnx_files[name]
    out = tmp_path / "w.mpyl"
    printed = cli.ok("pack", path, "-o", out, "--weights-only")
    assert "weights only (no graph)" in printed
    c = mpy_lazy.open(out.read_bytes())
    assert "graph" not in c.meta
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    assert set(c.names()) == set(init)
    for n, arr in init.items():
        v = c.view(n)
        assert tuple(v.shape) == arr.shape and np.array_equal(np.array(v.array()).reshape(arr.shape), arr), n
    with pytest.raises(ContainerError, match="graph"):
        mmodel.from_container(c)


def test_int8_needs_calibration(cli, onnx_files, tmp_path):
    out = tmp_path / "q.mpyl"
    for q in ("int8", "int8-channel"):
        line = cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", q)
        assert "--calibrate" in line
    assert not out.exists()
    # and --calibrate is only for int8
    np.save(tmp_path / "cal.npy", np.zeros((4, 1, 8, 8), np.float32))
    assert "--calibrate" in cli.fails("pack", onnx_files["cnn"], "-o", out, "--calibrate", tmp_path / "cal.npy")
    assert not out.exists()


def test_bad_calibration_samples(cli, onnx_files, tmp_path):
    out = tmp_path / "q.mpyl"
    bad = {
        "shape.npy": np.zeros((4, 1, 7, 8), np.float32),  # 7 rows, the model takes 8
        "channels.npy": np.zeros((4, 3, 8, 8), np.float32),
        "nan.npy": np.full((4, 1, 8, 8), np.nan, np.float32),
        "none.npy": np.zeros((0, 1, 8, 8), np.float32),
    }
    for fname, arr in bad.items():
        np.save(tmp_path / fname, arr)
        line = cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / fname)
        assert fname in line and "--calibrate" in line, line
        assert not out.exists()
    (tmp_path / "text.npy").write_text("not numpy")
    assert "text.npy" in cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8",
                                   "--calibrate", tmp_path / "text.npy")
    assert "missing.npy" in cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8",
                                      "--calibrate", tmp_path / "missing.npy")
    assert not out.exists()


def test_calibration_samples_are_checked_against_the_input(cli, onnx_files, tmp_path):
    """Samples that do not fit the model's input, each refused with one line saying what is wrong
    (issue 22: N,H,W,C samples for an N,C,H,W model, or one sample without its batch dimension,
    were accepted silently, reshaped to whatever fitted)."""
    out = tmp_path / "q.mpyl"
    rng = np.random.default_rng(0)
    cases = {
        "nhwc.npy": (rng.standard_normal((32, 8, 8, 1)), "other order", "transpose(0, 3, 1, 2)"),
        "one.npy": (rng.standard_normal((1, 8, 8)), "without the batch dimension", "(N, 1, 8, 8)"),
        "flat.npy": (rng.standard_normal((32, 64)), "(32, 64)", "(N, 1, 8, 8)"),
        "few.npy": (rng.standard_normal((5, 1, 8, 8)), "5 samples", "at least 10"),
        "nan.npy": (np.where(np.arange(32 * 64).reshape(32, 1, 8, 8) == 200, np.nan, 0.5), "1 NaN or Inf", "sample 3"),
        "inf.npy": (np.full((32, 1, 8, 8), np.inf), "2048 NaN or Inf", "sample 0"),
    }
    for fname, (arr, *words) in cases.items():
        np.save(tmp_path / fname, arr.astype(np.float32))
        line = cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / fname)
        assert fname in line and all(w in line for w in words), (fname, line)
        assert "N, C, H, W (torch's order)" in line or "samples:" in line or "NaN" in line, line
        assert not out.exists()
    np.save(tmp_path / "ok.npy", rng.standard_normal((10, 1, 8, 8)).astype(np.float32))
    cli.ok("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / "ok.npy", "-q")


def test_calibration_files_that_are_almost_surely_a_mistake(cli, onnx_files, tmp_path):
    """Each refused in one line naming the file and the fix (issue 32: all-zero samples packed a
    model answering one class for everything; a .npz of two arrays for a one-input model took
    the first; --calibrate model.mpyl gave numpy's message about pickles)."""
    out = tmp_path / "q.mpyl"
    rng = np.random.default_rng(0)
    one = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "zeros.npy", np.zeros((32, 1, 8, 8), np.float32))
    np.save(tmp_path / "same.npy", np.repeat(one, 32, axis=0))
    np.savez(tmp_path / "two.npz", a=rng.standard_normal((32, 1, 8, 8)), b=rng.standard_normal((32, 1, 8, 8)))
    cli.ok("pack", onnx_files["cnn"], "-o", tmp_path / "m.mpyl", "-q")
    cases = {"zeros.npy": ("every sample is all zeros", "typical inputs"),
             "same.npy": ("all 32 samples are the same", "typical inputs"),
             "two.npz": ("a .npz of 2 arrays (a, b)", "give one", "the model's input"),
             "m.mpyl": ("an mpy-lazy container, not a .npy or .npz", "numpy.save"),
             }
    for fname, words in cases.items():
        line = cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / fname)
        assert "--calibrate %s" % (tmp_path / fname) in line and all(w in line for w in words), (fname, line)
        assert "pickle" not in line and not out.exists(), line
    line = cli.fails("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", onnx_files["cnn"])
    assert "an ONNX model, not a .npy or .npz" in line, line
    np.savez(tmp_path / "one.npz", samples=rng.standard_normal((32, 1, 8, 8)).astype(np.float32))
    cli.ok("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / "one.npz", "-q")


def test_int32_bias_refusal_names_the_fix_and_v_lists_the_ranges_first(cli, onnx_files, tmp_path):
    """Samples far narrower than the model's inputs (here 1e-9 of them) give an input scale at
    which a bias cannot be int32: one line naming the op, the output, the input and the fix; -v
    prints its per-value ranges first (issue 32: no hint, and -v printed nothing)."""
    out = tmp_path / "q.mpyl"
    np.save(tmp_path / "narrow.npy", (np.random.default_rng(0).standard_normal((32, 1, 8, 8)) * 1e-9)
            .astype(np.float32))
    args = ("pack", onnx_files["cnn"], "-o", out, "--quantize", "int8", "--calibrate", tmp_path / "narrow.npy")
    line = cli.fails(*args)
    assert "(Conv)" in line and "does not fit in int32" in line and "calibrate on typical inputs" in line, line
    assert "-v lists every range" in line and not out.exists(), line
    rc, printed, err = cli(*args, "-v")
    assert rc == 1 and err.splitlines()[-1] == line, err
    rows = printed.splitlines()
    assert rows[0].startswith("calibration: 32 samples") and rows[1].split()[:5] == ["value", "op", "from", "min", "max"]
    lo, hi = (float(v) for v in rows[2].split()[-5:-3])  # the input's row: its calibrated range
    assert rows[2].split()[1] == "input" and 0 < hi < 1e-8 and -1e-8 < lo < 0, rows[2]


def test_verbose_calibration_summary(cli, onnx_files, tmp_path):
    """pack -v: per value its calibrated range, the int8 scale and zero point chosen, and the
    calibration values that saturate; the numbers are the container's own."""
    from host_tools import int8

    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((16, 1, 8, 8)).astype(np.float32))
    printed = cli.ok("pack", onnx_files["cnn"], "-o", tmp_path / "v.mpyl", "--quantize", "int8", "--calibrate",
                     tmp_path / "cal.npy", "-v")
    lines = printed.splitlines()
    k = [i for i, s in enumerate(lines) if s.startswith("calibration: 16 samples")][0]
    assert lines[k + 1].split() == ["value", "op", "from", "min", "max", "scale", "zp", "saturated"]
    text = mpy_lazy.open((tmp_path / "v.mpyl").read_bytes()).meta["graph"]
    q = {kv.get("y"): kv.get("q") for _, op, kv in mgraph.parse(text)}
    values = [kv.get("y") for _, op, kv in mgraph.parse(text) if op != "output"]
    rows = lines[k + 2:k + 2 + len(values)]
    assert [r.split()[0] for r in rows] == values and lines[k + 2 + len(values)].startswith("wrote ")
    for r in rows:
        w = r.split()
        name, lo, hi, scale, zp = w[0], float(w[-7]), float(w[-6]), float(w[-5]), int(w[-4])
        assert (scale, zp) == (pytest.approx(q[name][0], rel=1e-5), q[name][1]), r
        assert lo <= hi and w[-3:-1] == ["0", "of"] and int(w[-1]) > 0, r  # nothing saturates: q covers it
    assert rows[0].split()[1] == "input" and float(rows[0].split()[-7]) < -1
    # the count itself: values beyond the int8 range of a (scale, zero point)
    sat = int8.saturation([{"a": np.array([-12.9, -12.81, 0.0, 12.7, 12.75, 40.0])}], {"a": (0.1, 0)})
    assert sat == {"a": (3, 6)}
    assert "calibration:" not in cli.ok("pack", onnx_files["cnn"], "-o", tmp_path / "w.mpyl", "--quantize", "int8",
                                        "--calibrate", tmp_path / "cal.npy")


def _safetensors(tmp_path, module):
    from safetensors.torch import save_file

    path = tmp_path / "cnn.safetensors"
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(path))
    return path


def test_weight_files_pack_weights_only_with_a_note(cli, onnx_files, tmp_path):
    st = _safetensors(tmp_path, cnn())
    out = tmp_path / "w.mpyl"
    printed = cli.ok("pack", st, "-o", out)
    assert "weights only (no graph)" in printed and "graph:" not in printed
    c = mpy_lazy.open(out.read_bytes())
    assert "graph" not in c.meta and set(c.names()) == set(cnn().state_dict())
    # a model among weight files: packed on its own, or its weights with --weights-only
    line = cli.fails("pack", st, onnx_files["cnn"], "-o", tmp_path / "mix.mpyl")
    assert "--weights-only" in line and not (tmp_path / "mix.mpyl").exists()
    # the description is pack's to write
    line = cli.fails("pack", st, "-o", tmp_path / "m.mpyl", "--meta", "graph=input y=x shape=4")
    assert "--graph" in line and not (tmp_path / "m.mpyl").exists()


GRAPH = """input y=x shape=8,8,1 layout=chw
conv2d x=x y=c w=0.weight b=0.bias out=4 k=3,3 pad=1 wl=oihw act=relu
maxpool x=c y=p k=2,2 stride=2,2
reshape x=p y=f shape=64 order=chw
linear x=f y=y w=4.weight b=4.bias out=5
output x=y
"""


def test_graph_file_for_weights(cli, tmp_path):
    module = cnn()
    st = _safetensors(tmp_path, module)
    desc = tmp_path / "cnn.graph"
    desc.write_text(GRAPH)
    out = tmp_path / "g.mpyl"
    cli.ok("pack", st, "-o", out, "--graph", desc)
    c = mpy_lazy.open(out.read_bytes())
    assert c.meta["graph"] == GRAPH.strip()
    m = mmodel.from_container(c)
    xs = np.random.default_rng(0).standard_normal((3, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = module(torch.from_numpy(xs)).numpy()
    for x, w in zip(xs, want):
        m(x.reshape(-1).tolist())
        assert np.max(np.abs(np.array(m.tolist()) - w)) <= 1e-4 * np.max(np.abs(w))
    # descriptions that do not fit the weights, or are not descriptions
    bad = {
        "out_size": (GRAPH.replace("out=5", "out=6"), "4.bias"),
        "missing_tensor": (GRAPH.replace("w=4.weight", "w=fc.weight"), "fc.weight"),
        "unknown_op": (GRAPH.replace("maxpool", "maxpooool"), "maxpooool"),
        "bad_shape": (GRAPH.replace("shape=64", "shape=65"), "line 4"),
        "no_output": (GRAPH.replace("output x=y\n", ""), "output"),
        "undefined_value": (GRAPH.replace("conv2d x=x", "conv2d x=q"), "'q'"),
    }
    for name, (text, word) in bad.items():
        desc.write_text(text)
        out = tmp_path / (name + ".mpyl")
        line = cli.fails("pack", st, "-o", out, "--graph", desc)
        assert "--graph" in line and word in line, (name, line)
        assert not out.exists()
    line = cli.fails("pack", st, "-o", tmp_path / "x.mpyl", "--graph", tmp_path / "nope.graph")
    assert "nope.graph" in line and not (tmp_path / "x.mpyl").exists()


def _torch_facts(module, shape):
    """MACs (conv and linear, as the board counts them) and the activation bytes of the largest
    op (input + output, which can never share memory for a conv, pool or linear), by hooks."""
    macs, live = [], []

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            macs.append(out.numel() * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1])
        elif isinstance(m, nn.Linear):
            macs.append(m.in_features * m.out_features)
        live.append(inp[0].numel() + out.numel())

    mods = [m for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear, nn.MaxPool2d))]
    hs = [m.register_forward_hook(hook) for m in mods]
    with torch.no_grad():
        module(torch.zeros((1,) + shape))
    for h in hs:
        h.remove()
    return sum(macs), max(live)


def test_pack_prints_the_graph_summary(cli, onnx_files, tmp_path):
    macs, largest = _torch_facts(cnn(), (1, 8, 8))
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((16, 1, 8, 8)).astype(np.float32))
    for quantize, kind, itemsize in (("none", "float", 4), ("f16", "float", 4), ("int8", "int8", 1)):
        out = tmp_path / ("s-%s.mpyl" % quantize)
        args = ["pack", onnx_files["cnn"], "-o", out, "--quantize", quantize]
        if quantize == "int8":
            args += ["--calibrate", tmp_path / "cal.npy"]
        printed = cli.ok(*args)
        line = [s for s in printed.splitlines() if s.startswith("graph: ")]
        assert len(line) == 1, printed
        words = line[0].replace(",", "").replace(";", "").split()
        # graph: N ops M MACs per inference KIND arena A bytes + scratch S bytes
        n_ops, n_macs, arena, scratch = int(words[1]), int(words[3]), int(words[9]), int(words[13])
        assert words[2] == "ops" and words[4] == "MACs" and words[7] == kind, line
        text = mpy_lazy.open(out.read_bytes()).meta["graph"]
        assert n_ops == len([s for s in text.splitlines() if s.split()[0] not in ("input", "output")])
        assert n_macs == macs
        assert arena >= largest * itemsize, (arena, largest)
        planned = mmodel.Model(text).memory()
        assert (arena, scratch) == (planned["arena"], planned["scratch"])
        assert "wrote %s" % out in printed
    assert cli.ok("pack", onnx_files["cnn"], "-o", tmp_path / "quiet.mpyl", "-q") == ""


def test_an_onnx_model_of_two_inputs_calibrates_on_a_npz_of_each(cli, tmp_path):
    """--quantize int8 --calibrate on an ONNX (x + y) @ w of two inputs (it died with an
    IndexError): a .npz of one array per input, named as the inputs; each value's calibrated
    range is onnxruntime's over the samples, and the int8 model's outputs are the float ones
    within a few of their codes."""
    from host_tools import convert
    from onnx import TensorProto, helper

    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["z"])],
                          "g", [vi("x", TensorProto.FLOAT, [1, 8]), vi("y", TensorProto.FLOAT, [1, 8])],
                          [vi("z", TensorProto.FLOAT, [1, 4])], [onnx.numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "two.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    x, y = rng.standard_normal((20, 8)).astype(np.float32), (3 * rng.standard_normal((20, 8))).astype(np.float32)
    np.savez(tmp_path / "s.npz", y=y, x=x)
    q = convert.graph_of(path, "int8", str(tmp_path / "s.npz"), quiet=True, verbose=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    z = np.concatenate([sess.run(None, {"x": x[i:i + 1], "y": y[i:i + 1]})[0] for i in range(20)])
    ranges = q.calibration["ranges"]
    assert ranges["x"] == (x.min(), x.max()) and ranges["y"] == (y.min(), y.max())
    assert ranges["z"] == (z.min(), z.max()), (ranges, z.min(), z.max())
    out = tmp_path / "q.mpyl"
    cli.ok("pack", path, "-o", out, "--quantize", "int8", "--calibrate", tmp_path / "s.npz", "-q")
    m = mmodel.from_container(mpy_lazy.open(out.read_bytes()))
    (sx, zx), (sy, zy), (sz, zz) = m.inputs[0].q, m.inputs[1].q, m.outputs[0].q
    for i in range(20):
        m(np.clip(np.round(x[i] / sx) + zx, -128, 127).astype(int).tolist(),
          np.clip(np.round(y[i] / sy) + zy, -128, 127).astype(int).tolist())
        got = (np.array(m.tolist()) - zz) * sz
        assert np.abs(got - z[i]).max() <= 4 * sz, (got, z[i])
