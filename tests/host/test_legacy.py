"""Legacy uint8-quantized .tflite models (TFLite's old asymmetric quantization: uint8 activations
and weights, each with a zero point; TFLite Micro refuses them) against TFLite's own interpreter
with its reference kernels (tensorflow-cpu 2.21's tf.lite.Interpreter, BUILTIN_REF): its outputs
on seeded uint8 inputs are in tests/golden/legacy/<model>.npz, written by
tools/make_legacy_goldens.py. mpy-lazy packs the model, runs it on CPython (the pure kernels),
on the MicroPython unix port (viper, from a ROMFS image, 0 B allocated per inference) and through
the host reference (numpy): every output element equal. Model: Coral's
mobilenet_v1_0.25_128_quant (tests/golden/thirdparty/README.md): CONV_2D (a 3-channel first
layer, pointwise ones in ohwi8 blocks, the 1001-class one), DEPTHWISE_CONV_2D (padded taps),
AVERAGE_POOL_2D, RESHAPE, SOFTMAX; and Coral's split_concat (CONCATENATION, SPLIT on uint8, three
inputs, five outputs); ops_u8, a graph TF's own (TF1) converter wrote in the legacy quantization:
CONV_2D with relu6, DEPTHWISE_CONV_2D with multiplier 2, MAX_POOL_2D, AVERAGE_POOL_2D,
FULLY_CONNECTED, SOFTMAX. And slices (tests/golden/legacy/<name>.tflite: one op of a
larger Coral model with its real weights and its real input, the whole model's intermediate):
a pointwise CONV_2D of mobilenet_v1_0.75_192 on which TFLite's multiplier (the scales' float32
product) and the double-product one round five outputs apart, mobilenet_v2's uint8 ADD, and the
0.25 classifier's layer as FULLY_CONNECTED."""
import json
import os

import numpy as np
import pytest

pytest.importorskip("tflite")

from conftest import ROOT  # noqa: E402
from host_util import Board, cli, kernel_path, run_cli, tensors_of  # noqa: E402,F401 (cli: a fixture)

import mpy_lazy  # noqa: E402
from host_tools.tflite_import import from_tflite  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402

CORAL = os.path.join(ROOT, "tests", "golden", "thirdparty", "coral-legacy")
MODELS = {name: os.path.join(CORAL, name + ".tflite") for name in ("mobilenet_v1_0.25_128_quant", "split_concat")}
GOLDEN = os.path.join(ROOT, "tests", "golden", "legacy")
SLICES = ("mnv1_075_conv16", "mnv2_add53", "mnv1_025_fc")
MODELS.update({name: os.path.join(GOLDEN, name + ".tflite") for name in SLICES + ("ops_u8",)})


def golden(name):
    """The peer's runs: [[input 0, input 1..] of each run], [[output 0, ..] of each run]."""
    g = np.load(os.path.join(GOLDEN, name + ".npz"))
    xs = [g["x%d" % j] for j in range(sum(f.startswith("x") for f in g.files))]
    ys = [g["y%d" % j] for j in range(sum(f.startswith("y") for f in g.files))]
    return [list(run) for run in zip(*xs)], [list(run) for run in zip(*ys)]


class Case:
    def __init__(self, name, workdir):
        self.src = MODELS[name]
        self.xs, self.want = golden(name)
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.data = f.read()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("legacy"))
    out = {name: Case(name, workdir) for name in MODELS}
    jobs = []
    for name, c in out.items():
        xs_path = os.path.join(workdir, name + ".json")
        with open(xs_path, "w") as f:
            json.dump([[x.reshape(-1).tolist() for x in xs] for xs in c.xs], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": True})
    board = Board(workdir, "legacy", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def differing(got, want):
    return int(np.sum(np.asarray(got, np.int64).reshape(-1) != np.asarray(want, np.int64).reshape(-1)))


def test_golden_outputs_are_not_trivial():
    """The peer's outputs differ between the two inputs and spread over classes, a slice's over
    many values (a test that compared constant outputs could not fail)."""
    for name in MODELS:
        y = np.array([ys[0] for ys in golden(name)[1]])
        assert y.dtype == np.uint8
        if name.startswith("mobilenet"):
            assert len(y) == 2 and (y[0] != y[1]).any() and min((v > 0).sum() for v in y) > 10
        elif name == "ops_u8":  # (10 classes)
            assert (y[0] != y[1]).any() and min(len(np.unique(v)) for v in y) > 3
        else:
            assert len(np.unique(y)) > 20, name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reads_as_legacy_uint8(name):
    """uint8 in and out to the user; weights keep their zero points (wz=), avgpool its uint8
    rounding (round=up)."""
    g = from_tflite(MODELS[name])
    text, _ = g._text()
    assert {g.dtypes.get(v) for v, _, _ in g.inputs} == {"u8"} and {g.dtypes.get(v) for v in g.outputs} == {"u8"}
    if name.startswith("mobilenet"):
        assert text.count(" wz=") >= 20 and " round=up" in text
    elif name == "ops_u8":
        assert text.count(" wz=") == 3 and " round=up" in text and "maxpool " in text
    elif name not in ("mnv2_add53", "split_concat"):
        assert " wz=" in text


@pytest.mark.parametrize("name", sorted(MODELS))
def test_host_reference_matches_tflite(cases, name):
    from host_tools import reference

    c = cases[0][name]
    container = mpy_lazy.open(c.data)
    text, tensors = container.meta["graph"], tensors_of(container)
    for xs, want in zip(c.xs, c.want):
        got = reference.run(text, tensors, *xs)
        assert [differing(g, w) for g, w in zip(got, want)] == [0] * len(want)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_cpython_matches_tflite(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        assert m.inputs[0].dtype == "u8" and m.outputs[0].dtype == "u8"
        xs, want = c.xs[-1], c.want[-1]  # (one input: the pure kernels take seconds on a whole model)
        m(*[x.reshape(-1).tolist() for x in xs])
        assert [differing(m.tolist(j), w) for j, w in enumerate(want)] == [0] * len(want)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_micropython_matches_tflite(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert len(r["ys"]) == len(c.want)
    for got, want in zip(r["ys"], c.want):
        assert [differing(g, w) for g, w in zip(got, want)] == [0] * len(want)
    assert r["alloc"] == [0] * len(c.want), "bytes allocated per inference: %s" % r["alloc"]


def test_ops_the_tests_do_not_prove_on_uint8_are_refused(cli, tmp_path):
    """A legacy model's op outside tflite_import.LEGACY (its uint8 kernel is not proven against
    TFLite's: mobilenet v2's ADD slice turned into a MUL) is refused in one line naming it, and
    nothing is written."""
    import flatbuffers
    import tflm_ref

    m = tflm_ref.read_model(MODELS["mnv2_add53"])
    code = m.operatorCodes[0]
    code.builtinCode = code.deprecatedBuiltinCode = tflm_ref.schema.BuiltinOperator.MUL
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    src, out = tmp_path / "mul.tflite", tmp_path / "mul.mpyl"
    src.write_bytes(bytes(b.Output()))
    line = cli.fails("pack", src, "-o", out)
    assert "operator 0 (MUL): a legacy uint8 model's MUL is not supported" in line, line
    assert not out.exists()
