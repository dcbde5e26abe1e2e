"""A float .tflite made int8 by `mpy-lazy pack --quantize int8 --calibrate samples.npy` (issue 22)
against TFLite's own converter on the same float model and the same samples
(tests/golden/tflite/calib_f32.tflite, calib_samples.npy, calib_int8.tflite: made by `make
tflite-fixtures`, TensorFlow 2.21's TFLiteConverter with a representative dataset, full
integer, int8 in and out; TensorFlow is not needed here).

The packer calibrates by running the float graph with the host reference interpreter, then
quantizes it with host_tools/int8.py, the ONNX pipeline's TFLite scheme. Measured: every weight,
per-channel weight scale and bias equal to the converter's, every activation zero point equal and
every activation scale equal or 1 float32 ulp apart; the output codes on the MicroPython unix port
equal TFLite Micro's run of the converter's model on all 200 inputs (10 codes each). The test
asserts the brief's bounds: scales within float32 rounding (2 ulp), output codes within 1."""
import os

import numpy as np
import pytest

from host_util import GOLDEN, cli  # noqa: F401 (fixture)

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("tflite")

from host_tools.tflite_import import from_tflite  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402

TFLITE = os.path.join(GOLDEN, "tflite")
FLOAT, INT8, SAMPLES = (os.path.join(TFLITE, n) for n in ("calib_f32.tflite", "calib_int8.tflite", "calib_samples.npy"))
ULP = 2.0 ** -23

BOARD_PY = """\
import sys
import mpy_lazy
from mpy_lazy import model

m = model.from_container(mpy_lazy.open("/rom/m.mpyl"))
n = m.inputs[0].size
f = open(sys.argv[1], "rb")
while True:
    x = f.read(n)
    if not x:
        break
    m(x)
    print(m.tolist())
"""


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    from host_tools.cli import main

    d = tmp_path_factory.mktemp("q")
    assert main(["pack", FLOAT, "-o", str(d / "m.mpyl"), "--quantize", "int8", "--calibrate", SAMPLES, "-q"]) == 0
    return d


def _container(path):
    """The packed container, read by the runtime."""
    return mpy_lazy.open(open(path, "rb").read())


def test_same_quantization_as_the_converter(packed):
    import host_tools.convert as convert

    ours = convert.graph_of(FLOAT, "int8", SAMPLES, quiet=True)
    theirs = from_tflite(INT8)
    assert [n.op for n in ours.nodes] == [n.op for n in theirs.nodes]
    for a, b in zip([i[0] for i in ours.inputs] + [n.y for n in ours.nodes],
                    [i[0] for i in theirs.inputs] + [n.y for n in theirs.nodes]):
        (sa, za), (sb, zb) = ours.q[a], theirs.q[b]
        assert za == zb, (a, ours.q[a], theirs.q[b])
        assert abs(np.float32(sa) - np.float32(sb)) <= 2 * ULP * sb, (a, ours.q[a], theirs.q[b])
    for a, b in zip(ours.nodes, theirs.nodes):
        for key in ("w", "b"):
            if key in a.t:
                assert np.array_equal(ours.tensors[a.t[key]], theirs.tensors[b.t[key]]), (a, key)
        if "w" in a.t:
            assert np.array_equal(ours.wquant[a.t["w"]][0], theirs.wquant[b.t["w"]][0]), a
        for key in ("clamp",):
            assert a.attrs.get(key) == b.attrs.get(key), (a, key)


def test_outputs_on_the_unix_port_equal_tflm_on_the_converters_model(cli, packed):
    """The packed model on the MicroPython unix port (`mpy-lazy run --script`) against TFLM's
    run of the converter's int8 .tflite: the 100 calibration samples (as int8 codes with the
    input's q, which both models share) and 100 random inputs."""
    m = mmodel.from_container(_container(packed / "m.mpyl"))
    s, z = m.inputs[0].q
    samples = np.load(SAMPLES)
    want_in = tflm_ref.io_details(INT8)[0][0]["quantization_parameters"]
    assert (float(want_in["scales"][0]), int(want_in["zero_points"][0])) == (pytest.approx(s, rel=2 * ULP), z)
    r = samples.astype(np.float64) / s
    codes = np.clip(np.where(r >= 0, np.floor(r + 0.5), -np.floor(0.5 - r)) + z, -128, 127)
    codes = np.concatenate([codes.reshape(len(samples), -1),
                            np.random.default_rng(3).integers(-128, 128, (100, m.inputs[0].size))]).astype(np.int8)
    (packed / "in.bin").write_bytes(codes.tobytes())
    (packed / "board.py").write_text(BOARD_PY)
    out = cli.ok("run", packed / "m.mpyl", "--script", packed / "board.py", packed / "in.bin")
    ours = np.array([eval(line) for line in out.splitlines()], np.int64)
    want = np.array([y.reshape(-1) for y in tflm_ref.run(INT8, codes.reshape((-1, 8, 8, 1)))], np.int64)
    assert ours.shape == want.shape == (200, 10)
    assert np.abs(ours - want).max() <= 1  # the brief's bound; measured: all 2000 codes equal
    assert (ours == want).mean() >= 0.99, (ours != want).sum()


def test_int8_tflite_refuses_quantize_and_calibrate(cli, tmp_path):
    """--quantize int8 and --calibrate on an int8 .tflite were ignored without a word (issue 22)."""
    for args in (["--quantize", "int8"], ["--quantize", "int8", "--calibrate", SAMPLES], ["--calibrate", SAMPLES],
                 ["--quantize", "f16"]):
        line = cli.fails("pack", INT8, "-o", tmp_path / "m.mpyl", *args)
        assert "is int8 already" in line and "calib_int8.tflite" in line, line
        assert not (tmp_path / "m.mpyl").exists()
    cli.ok("pack", INT8, "-o", tmp_path / "m.mpyl", "-q")


def test_float_tflite_without_calibration_is_refused(cli, tmp_path):
    line = cli.fails("pack", FLOAT, "-o", tmp_path / "m.mpyl", "--quantize", "int8")
    assert "--calibrate" in line and not (tmp_path / "m.mpyl").exists()


def test_samples_in_torchs_order_for_a_tflite_are_named(cli, tmp_path):
    np.save(tmp_path / "nchw.npy", np.load(SAMPLES).transpose(0, 3, 1, 2))
    line = cli.fails("pack", FLOAT, "-o", tmp_path / "m.mpyl", "--quantize", "int8", "--calibrate", tmp_path / "nchw.npy")
    assert "other order" in line and "N, H, W, C" in line and "transpose(0, 2, 3, 1)" in line, line


def test_a_model_of_two_inputs_calibrates_on_a_npz_of_each(cli, tmp_path):
    """--calibrate on a float ADD of two inputs (it died with an IndexError): a .npz of one
    array per input, named as the inputs, gives each input its own range (TFLite's asymmetric
    int8 of its samples' min and max); the int8 model runs as TFLM runs that int8 ADD; one
    array, or arrays of other names or counts, are refused in one line naming the fix."""
    from test_tflite_elem import model
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S

    v = ((1, 4, 6), "f32", None, None)
    (tmp_path / "add.tflite").write_bytes(model(S.BuiltinOperator.ADD, [v, v, v], [0, 1], [2], [0, 1]))
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((20, 4, 6)).astype(np.float32), (3 * rng.standard_normal((20, 4, 6)) + 2).astype(np.float32)
    np.savez(tmp_path / "two.npz", t1=b, t0=a)
    out = tmp_path / "m.mpyl"
    cli.ok("pack", tmp_path / "add.tflite", "-o", out, "--quantize", "int8", "--calibrate", tmp_path / "two.npz", "-q")
    m = mmodel.from_container(_container(out))
    qs = []
    for inp, x in zip(m.inputs, (a, b)):
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        s, z = inp.q
        assert abs(s - (hi - lo) / 255) <= 2 * ULP * s and z == round(-128 - lo / s), (inp.q, lo, hi)
        qs.append((s, z))
    assert qs[1][0] > 2 * qs[0][0]  # (each its own)
    codes = [np.clip(np.round(x / s) + z, -128, 127).astype(np.int8) for x, (s, z) in zip((a[:5], b[:5]), qs)]
    t = [((1, 4, 6), "i8", q, None) for q in qs + [m.outputs[0].q]]
    (tmp_path / "int8.tflite").write_bytes(model(S.BuiltinOperator.ADD, t, [0, 1], [2], [0, 1]))
    for k in range(5):
        m(codes[0][k].reshape(-1).tolist(), codes[1][k].reshape(-1).tolist())
        want = tflm_ref.run(str(tmp_path / "int8.tflite"), [(codes[0][k][None], codes[1][k][None])])[0]
        assert m.tolist() == np.asarray(want).reshape(-1).tolist() and len(set(m.tolist())) > 5
    np.save(tmp_path / "one.npy", a)
    np.savez(tmp_path / "names.npz", x=a, y=b)
    np.savez(tmp_path / "counts.npz", t0=a, t1=b[:12])
    for fname, words in (("one.npy", "one array; the model has 2 inputs (t0, t1): give a .npz of one array of samples "
                                     "per input, named as the inputs"),
                         ("names.npz", "a .npz of x, y; the model has 2 inputs (t0, t1)"),
                         ("counts.npz", "20, 12 samples of the inputs t0, t1: give as many of each")):
        line = cli.fails("pack", tmp_path / "add.tflite", "-o", out, "--quantize", "int8", "--calibrate", tmp_path / fname)
        assert words in line and "\n" not in line.strip(), line
