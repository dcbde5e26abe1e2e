"""`mpy-lazy run` (issue 22): a container run on the MicroPython unix port exactly as a board
runs it (a ROMFS image of it mounted at /rom, the installed runtime), from the command line:

- an ONNX image model from torch: its input in torch's C, H, W order, its outputs (an image
  output too: `output ... layout=chw`) saved in the same order and shape, equal to onnxruntime's;
- a .tflite int8 model: its output codes equal to TFLite Micro's, bit for bit;
- a weights-only container with the user's board script (--script);
- one-line errors: no unix port (MPY_LAZY_MICROPYTHON pointing nowhere), a bad container, an
  input of the wrong shape or order; a closed pipe ends quietly.
No clock is asserted on; the real unix port runs everything."""
import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from host_util import ROOT, cli, save_safetensors  # noqa: F401 (fixture)

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402

TFLITE = os.path.join(ROOT, "tests", "golden", "tflite")


def _mpy_lazy():
    """The installed entry point of this venv (what a user types)."""
    return os.path.join(os.path.dirname(sys.executable), "mpy-lazy")


def _export(module, shape, path):
    import torch

    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), (torch.zeros((1,) + tuple(shape)),), str(path), input_names=["x"],
                              output_names=["y"], dynamo=False)
    finally:
        log.setLevel(level)
    return str(path)


def _conv_net():
    """A small torch model whose output is an image (N, C, H, W): conv, relu, pool, conv."""
    import torch

    torch.manual_seed(22)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 4, 3, padding=1))


@pytest.fixture(scope="module")
def image_model(tmp_path_factory):
    """(dir, onnx path, f32 container, int8 container, samples) of _conv_net on 3x8x6 inputs."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from host_tools.cli import main

    d = tmp_path_factory.mktemp("img")
    onnx_path = _export(_conv_net(), (3, 8, 6), d / "m.onnx")
    samples = np.random.default_rng(1).standard_normal((32, 3, 8, 6)).astype(np.float32)
    np.save(d / "samples.npy", samples)
    assert main(["pack", onnx_path, "-o", str(d / "f32.mpyl"), "-q"]) == 0
    assert main(["pack", onnx_path, "-o", str(d / "int8.mpyl"), "-q", "--quantize", "int8",
                 "--calibrate", str(d / "samples.npy")]) == 0
    return d, onnx_path, str(d / "f32.mpyl"), str(d / "int8.mpyl"), samples


def _ort(onnx_path, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.reshape((1,) + x.shape[-3:])})[0]


def test_onnx_image_output_is_marked_chw_and_comes_in_torchs_order(image_model):
    """An image output of an ONNX model reads C, H, W (torch's order) through tolist(),
    dequantize() and predict(); the raw output view stays H, W, C. Before: H, W, C from all."""
    d, onnx_path, f32, int8, samples = image_model
    x = samples[0]
    want = _ort(onnx_path, x)  # (1, 4, 4, 3)
    for path in (f32, int8):
        c = mpy_lazy.open(open(path, "rb").read())
        assert c.meta["graph"].splitlines()[-1].endswith(" layout=chw"), c.meta["graph"]
        m = mmodel.from_container(c)
        assert m.out_layouts == ["chw"] and tuple(m.outputs[0].shape) == (4, 3, 4)
        m(x.reshape(-1).tolist())
        got = np.array(m.dequantize())
        tol = 1e-4 if path == f32 else 2 * m.outputs[0].q[0]
        assert np.max(np.abs(got - want.reshape(-1))) <= tol * max(1.0, np.abs(want).max())
        raw = np.array([m.output[i] for i in range(m.outputs[0].size)], np.float64)
        assert np.array_equal(raw.reshape(4, 3, 4).transpose(2, 0, 1).reshape(-1),
                              np.array(m.tolist(), np.float64))
        assert m.predict(x.reshape(-1).tolist()) == int(np.argmax(m.dequantize()))


def test_tflite_outputs_stay_hwc(tmp_path):
    pytest.importorskip("tflite")
    from host_tools.tflite_import import from_tflite

    g = from_tflite(os.path.join(TFLITE, "ops_int8.tflite"))
    assert g.out_layouts == {} and all(" layout=" not in ln for ln in g.text().splitlines() if ln.startswith("output"))


def test_run_onnx_image_model_equals_onnxruntime(cli, image_model, tmp_path):
    """`mpy-lazy run f32.mpyl --input x.npy --output y.npy`: x in torch's (1, C, H, W), y saved as
    onnxruntime gives it, (1, C, H, W), within 1e-4; the printout names the class and figures."""
    d, onnx_path, f32, int8, samples = image_model
    x = samples[3]
    np.save(tmp_path / "x.npy", x[None])  # with the batch dimension
    np.save(tmp_path / "x3.npy", x)  # without
    want = _ort(onnx_path, x)
    for inp in ("x.npy", "x3.npy"):
        out = cli.ok("run", f32, "--input", tmp_path / inp, "--output", tmp_path / "y.npy", "--repeat", "3")
        y = np.load(tmp_path / "y.npy")
        assert y.shape == want.shape == (1, 4, 4, 3) and y.dtype == np.float32
        assert np.max(np.abs(y - want)) <= 1e-4 * max(1.0, float(np.abs(want).max()))
        assert "class %d " % int(np.argmax(y)) in out, out
        assert "(C, H, W: torch's order)" in out and "median of 3" in out, out
    # int8: every figure, and 0 B per inference
    out = cli.ok("run", int8, "--input", tmp_path / "x.npy", "--output", tmp_path / "y8.npy")
    y8 = np.load(tmp_path / "y8.npy")
    c = mpy_lazy.open(open(int8, "rb").read())
    m = mmodel.from_container(c)
    m(x.reshape(-1).tolist())
    assert np.array_equal(y8.reshape(-1), np.float32(np.array(m.dequantize())))  # the board's own result
    assert "allocated per inference: 0 B" in out, out
    for word in ("heap kept by the model:", "arena %d B" % m.memory()["arena"], "time per inference:"):
        assert word in out, out


def test_run_without_input_uses_a_seeded_random_one(cli, image_model):
    d, onnx_path, f32, int8, samples = image_model
    out = cli.ok("run", f32, "--repeat", "1")
    assert "random normal(0, 1) values (seed 0), shape (3, 8, 6) (C, H, W: torch's order)" in out, out
    assert cli.ok("run", f32, "--repeat", "1").split("time per")[0] == out.split("time per")[0]


def test_run_tflite_equals_tflm_bit_for_bit(cli, tmp_path):
    tflm_ref = pytest.importorskip("tflm_ref")
    pytest.importorskip("tflite")
    model = os.path.join(TFLITE, "digits_cnn_int8.tflite")
    cli.ok("pack", model, "-o", tmp_path / "m.mpyl", "-q")
    m = mmodel.from_container(mpy_lazy.open(open(tmp_path / "m.mpyl", "rb").read()))
    s, z = m.outputs[0].q
    rng = np.random.default_rng(5)
    for k in range(3):
        codes = rng.integers(-128, 128, (1, 8, 8, 1)).astype(np.int8)
        np.save(tmp_path / "x.npy", codes)
        out = cli.ok("run", tmp_path / "m.mpyl", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                     "--repeat", "1")
        want = tflm_ref.run(model, [codes])[0]
        y = np.load(tmp_path / "y.npy")
        assert y.shape == (1, 10)
        got = np.round(y.astype(np.float64).reshape(-1) / s).astype(np.int64) + z
        assert got.tolist() == want.reshape(-1).astype(np.int64).tolist(), (got, want)
        assert "class %d " % int(np.argmax(want)) in out
        assert "allocated per inference: 0 B" in out


NET_PY = """\
import sys
import mpy_lazy


class Net(mpy_lazy.Module):
    def __init__(self):
        self.fc = mpy_lazy.Module()
        self.fc.weight = mpy_lazy.Param((3, 4))
        self.fc.bias = mpy_lazy.Param((3,))


net = Net()
mpy_lazy.load(net, mpy_lazy.open("/rom/w.mpyl"))
w, b = net.fc.weight.val(), net.fc.bias.val()
print("output", [b[o] + sum(w[o * 4 + i] * (i + 1) for i in range(4)) for o in range(3)])
print("args", sys.argv[1:], sys.implementation.name)
"""


def test_run_script_on_a_weights_only_container(cli, tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    b = np.array([0.5, -1, 2], np.float32)
    save_safetensors(tmp_path / "w.safetensors", {"fc.weight": w, "fc.bias": b})
    cli.ok("pack", tmp_path / "w.safetensors", "-o", tmp_path / "w.mpyl", "-q")
    (tmp_path / "net.py").write_text(NET_PY)
    out = cli.ok("run", tmp_path / "w.mpyl", "--script", tmp_path / "net.py", "a", "b")
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert eval(lines["output"]) == (w @ np.arange(1, 5) + b).tolist()
    assert lines["args"] == "['a', 'b'] micropython"
    # without a script, a weights-only container has nothing to run
    line = cli.fails("run", tmp_path / "w.mpyl")
    assert "weights only" in line and "--script" in line
    # the script's own failure: its traceback (MicroPython prints it on stdout), its exit status
    (tmp_path / "bad.py").write_text("import mpy_lazy\nraise ValueError('mine')\n")
    rc, out, err = cli("run", tmp_path / "w.mpyl", "--script", tmp_path / "bad.py")
    assert rc == 1 and "ValueError: mine" in out and "bad.py" in out, (out, err)


def test_run_errors_are_one_line(cli, image_model, tmp_path, monkeypatch):
    d, onnx_path, f32, int8, samples = image_model
    # the input in H, W, C order for a C, H, W model: named, with the fix
    np.save(tmp_path / "hwc.npy", samples[0].transpose(1, 2, 0)[None])
    line = cli.fails("run", f32, "--input", tmp_path / "hwc.npy")
    assert "(3, 8, 6) (C, H, W: torch's order)" in line and "transpose it to C, H, W" in line, line
    np.save(tmp_path / "n.npy", samples[:4])
    assert "a batch of 4" in cli.fails("run", f32, "--input", tmp_path / "n.npy")
    np.save(tmp_path / "small.npy", samples[0, :2])
    assert "takes (3, 8, 6)" in cli.fails("run", f32, "--input", tmp_path / "small.npy")
    # a bad container
    (tmp_path / "junk.mpyl").write_bytes(b"MPYL" + b"\0" * 60)
    assert "junk.mpyl" in cli.fails("run", tmp_path / "junk.mpyl")
    assert "nope.mpyl" in cli.fails("run", tmp_path / "nope.mpyl")
    # a bad --repeat; an --output in a missing directory: nothing written
    assert "--repeat" in cli.fails("run", f32, "--repeat", "0")
    line = cli.fails("run", f32, "--output", tmp_path / "no" / "y.npy")
    assert "does not exist" in line and not (tmp_path / "no").exists()
    # no unix port: one line naming the extra
    monkeypatch.setenv("MPY_LAZY_MICROPYTHON", "/nonexistent/micropython")
    line = cli.fails("run", f32)
    assert "/nonexistent/micropython" in line and "mpy-lazy[unix]" in line, line
    assert "mpy-lazy[unix]" in cli.fails("run", f32, "--script", tmp_path / "hwc.npy")


def test_run_real_cli_missing_binary_and_closed_pipe(image_model):
    """The installed command in a fresh process: a missing unix port is one line and exit 1;
    `mpy-lazy run m.mpyl | head -1` and a --script's output cut short end quietly."""
    d, onnx_path, f32, int8, samples = image_model
    env = dict(os.environ, MPY_LAZY_MICROPYTHON="/nonexistent")
    r = subprocess.run([_mpy_lazy(), "run", f32], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r
    assert r.stderr.startswith("mpy-lazy: error: ") and "mpy-lazy[unix]" in r.stderr
    script = d / "many.py"
    script.write_text("for i in range(100000):\n    print('line', i)\n")
    for args in (["run", f32, "--repeat", "2"], ["run", f32, "--script", str(script)]):
        p = subprocess.Popen([_mpy_lazy()] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=300) == 0 and err == "", (args, p.returncode, err)


ALLOC_PY = """\
import array, gc
import mpy_lazy
from mpy_lazy import kernels, model

m = model.from_container(mpy_lazy.open("/rom/%s"))
n = m.inputs[0].size
xs = {"bytes": bytes(range(n)), "bytearray": bytearray(n), "array('b')": array.array("b", [-3] * n),
      "list": [(7 * i) %% 256 - 128 for i in range(n)]}
print("path", kernels.path())
for k in xs:
    x = xs[k]
    m(x)  # the first call with this object reads its type (that allocates)
    got = []
    for t in range(3):
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        m(x)
        b = gc.mem_alloc()
        gc.enable()
        got.append(b - a)
    print("alloc", k, got)
"""


@pytest.mark.parametrize("which", ["onnx-chw", "tflite-hwc"])
def test_int8_inputs_of_every_type_allocate_nothing(cli, image_model, tmp_path, which):
    """An int8 input as bytes, bytearray, array('b') or a list of ints: 0 B per inference on the
    viper path (measured on the unix port with gc.disable() and gc.mem_alloc() around one call),
    after the first call with that object; for a C, H, W input (transposed as it is copied in)
    and an H, W, C one."""
    if which == "onnx-chw":
        path = image_model[3]
    else:
        pytest.importorskip("tflite")
        path = str(tmp_path / "t.mpyl")
        cli.ok("pack", os.path.join(TFLITE, "digits_cnn_int8.tflite"), "-o", path, "-q")
    name = os.path.basename(path)
    (tmp_path / "alloc.py").write_text(ALLOC_PY % name)
    out = cli.ok("run", path, "--script", tmp_path / "alloc.py")
    assert "path viper" in out, out
    got = {ln.split(" ", 1)[1].rsplit(" [", 1)[0]: ln.rsplit(" [", 1)[1] for ln in out.splitlines()
           if ln.startswith("alloc ")}
    assert got == {k: "0, 0, 0]" for k in ("bytes", "bytearray", "array('b')", "list")}, out


GOLDEN = os.path.join(ROOT, "tests", "golden")


def test_run_float_model_too_big_to_count_with_the_gc_off(cli, tmp_path):
    """A float model whose one inference allocates more than the heap holds with the GC off (an
    LSTM: every float boxed) runs and reports what it can measure (issue 32: MemoryError from
    the allocation count, nothing else printed); its output is the runtime's on the host."""
    from host_tools import run

    path = os.path.join(GOLDEN, "tflm_mnist_lstm_float.mpyl")
    out = cli.ok("run", path, "--repeat", "1", "--output", tmp_path / "y.npy")
    assert "time per inference:" in out and "heap kept by the model:" in out, out
    assert "shape (28, 28) (as stored)" in out, out  # a sequence, not an image: no H, W, C order
    line = [ln for ln in out.splitlines() if ln.startswith("allocated per inference:")]
    assert len(line) == 1 and "more than " in line[0] and "not measurable" in line[0], out
    assert int(line[0].split("more than ")[1].split()[0]) > 4 * 2 ** 20, line  # the heap's free bytes
    m = mmodel.from_container(mpy_lazy.open(open(path, "rb").read()))
    x, kind, _ = run.random_input(m.inputs[0], m.layouts[0])
    m(x.tolist())
    want = np.array(m.tolist(), np.float32)
    y = np.load(tmp_path / "y.npy").reshape(-1)
    assert np.max(np.abs(y - want)) <= 1e-5 * max(1.0, float(np.abs(want).max())), (y, want)


def test_run_progress_on_a_terminal(tmp_path):
    """Progress on stderr when it is a terminal (a pty here): each step, one line rewritten in
    place and cleared at the end; stdout is the report alone. (Off a terminal stderr stays
    empty: test_run_real_cli_missing_binary_and_closed_pipe.)"""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen([_mpy_lazy(), "run", os.path.join(GOLDEN, "graph_f32.mpyl"), "--repeat", "3"],
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read().decode()
    assert p.wait(timeout=300) == 0
    os.close(master)
    err = err.decode()
    steps = [s.rsplit(" (", 1)[0] for s in err.split("\r\x1b[K") if s]
    assert steps == ["mpy-lazy run: the first inference (opening and planning the model)",
                     "mpy-lazy run: timed inference 1 of 3", "mpy-lazy run: timed inference 2 of 3",
                     "mpy-lazy run: timed inference 3 of 3",
                     "mpy-lazy run: counting the bytes one inference allocates (GC off)"], err
    assert err.endswith("\r\x1b[K") and "mpy-lazy run" not in out and "median of 3" in out, (out, err)


def test_run_refuses_a_damaged_container(cli, tmp_path):
    """A data CRC that does not match: one line, the model not run (issue 32: it ran on)."""
    data = bytearray(open(os.path.join(GOLDEN, "graph_f32.mpyl"), "rb").read())
    c = mpy_lazy.open(bytes(data))
    name = c.names()[0]
    data[c.info(name).offset] ^= 0x40
    (tmp_path / "bad.mpyl").write_bytes(data)
    (tmp_path / "s.py").write_text("print('ran')\n")
    for args in ((), ("--script", tmp_path / "s.py")):
        line = cli.fails("run", tmp_path / "bad.mpyl", *args)
        assert "bad.mpyl" in line and "%r: data_crc" % name in line and "damaged" in line, line


def test_run_script_opening_another_name_says_what_rom_holds(cli, tmp_path):
    """The README's scripts open /rom/model.mpyl; a container packed under another name: the
    error names the path and lists /rom (MicroPython's own said `[Errno 2] ENOENT`)."""
    import shutil

    shutil.copy(os.path.join(GOLDEN, "graph_f32.mpyl"), tmp_path / "mine.mpyl")
    (tmp_path / "s.py").write_text("import mpy_lazy\nmpy_lazy.open('/rom/model.mpyl')\n")
    rc, out, err = cli("run", tmp_path / "mine.mpyl", "--script", tmp_path / "s.py")
    assert rc == 1 and "/rom/model.mpyl: no such file (/rom holds mine.mpyl)" in out + err, (out, err)


def test_run_input_in_torchs_conv1d_shape(cli, tmp_path):
    """A Conv1d model (torch input (1, 49, 10): N, C, L; held as C, H, W = (49, 1, 10)) takes
    the input in torch's own shape, with or without the batch dimension (issue 32: refused);
    equal to onnxruntime."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    import torch

    torch.manual_seed(32)
    nn = torch.nn
    onnx_path = _export(nn.Sequential(nn.Conv1d(49, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 4)), (49, 10),
                        tmp_path / "c1d.onnx")
    cli.ok("pack", onnx_path, "-o", tmp_path / "c1d.mpyl", "-q")
    x = np.random.default_rng(32).standard_normal((1, 49, 10)).astype(np.float32)
    import onnxruntime as ort

    want = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for k, a in enumerate((x, x[0])):
        np.save(tmp_path / ("x%d.npy" % k), a)
        cli.ok("run", tmp_path / "c1d.mpyl", "--input", tmp_path / ("x%d.npy" % k), "--output", tmp_path / "y.npy",
               "--repeat", "1")
        y = np.load(tmp_path / "y.npy")
        assert np.max(np.abs(y - want)) <= 1e-5 * max(1.0, float(np.abs(want).max())), (y, want)
    np.save(tmp_path / "t.npy", x[0].T)  # (10, 49): another order, still refused
    assert "takes (49, 1, 10)" in cli.fails("run", tmp_path / "c1d.mpyl", "--input", tmp_path / "t.npy")


def test_run_int16_codes_in_and_out_allocating_nothing(cli, tmp_path):
    """A 16x8 model's int16 input is passed as codes (an .npy of int16) and its int16 output read
    as codes and dequantized: the runtime's own result, 0 B per inference (floats into the
    board's input would be quantized there, allocating)."""
    path = os.path.join(GOLDEN, "tflm_seanet_conv15.mpyl")
    m = mmodel.from_container(mpy_lazy.open(open(path, "rb").read()))
    assert m.inputs[0].dtype == m.outputs[0].dtype == "i16"
    codes = np.random.default_rng(3).integers(-32768, 32768, (1,) + tuple(m.inputs[0].shape)).astype(np.int16)
    np.save(tmp_path / "x.npy", codes)
    out = cli.ok("run", path, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", "--repeat", "2")
    m(codes.reshape(-1).tolist())
    s, z = m.outputs[0].q
    want = np.float32(s * (np.array(m.tolist(), np.float64) - z))
    assert np.array_equal(np.load(tmp_path / "y.npy").reshape(-1), want)
    assert "int16 codes" in out and "int16 q=" in out, out
    assert "allocated per inference: 0 B" in out, out


def test_run_counts_no_bytes_of_its_own(cli):
    """The allocation count of `run` is the model's alone (a global of the board script made
    between the two counts grew its dict: 128 B reported for MLPerf's KWS, which allocates 0)."""
    out = cli.ok("run", os.path.join(GOLDEN, "tflm_keyword_scrambled.mpyl"), "--repeat", "1")
    assert "allocated per inference: 0 B" in out, out
