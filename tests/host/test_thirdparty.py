"""Models made by others (tests/golden/thirdparty/: tflite-micro's examples and integration tests,
MLPerf Tiny's reference models, and small models of the repositories docs/SURVEY.md surveys:
Arm's ML-zoo, Seeed's SSCMA zoo, Espressif's and the Pico's TFLM ports, Coral's test data,
OpenMV's camera models, the Arduino examples; their source and licence in its README)
against TensorFlow Lite Micro's own interpreter (the tflite-micro wheel, tests/tflm_ref.py):
packed with `mpy-lazy pack`, run on seeded inputs through TFLM, through mpy-lazy on CPython
(the pure kernels) and on the MicroPython unix port (viper, from a ROMFS image): every output
element equal (float models: within 1e-5 of the largest output, float32's rounding). int16
models (TFLite's 16x8 quantization) included. Models with state (LSTM, SVDF: TFLM's variable
tensors persist from one Invoke() to the next) run their inputs in order on one interpreter,
as TFLM does: each output depends on the inputs before it."""
import glob
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("tflite")

from conftest import ROOT  # noqa: E402
from host_util import Board, kernel_path, run_cli  # noqa: E402

import mpy_lazy  # noqa: E402
from host_tools.tflite_import import from_tflite  # noqa: E402
from mpy_lazy import graph as mgraph, model as mmodel  # noqa: E402

DIR = os.path.join(ROOT, "tests", "golden", "thirdparty")
SOURCES = ("tflite-micro", "mlperf-tiny",  # tensorflow/tflite-micro, mlcommons/tiny
           "ml-zoo", "sscma-model-zoo", "esp-tflite-micro", "coral-test-data", "openmv", "pico-tflmicro",
           "tflite-micro-arduino-examples")  # (the surveyed repositories: the README there)
PATHS = {os.path.basename(p)[:-7]: p for src in SOURCES
         for p in glob.glob(os.path.join(DIR, src, "*.tflite"))}
NAMES = sorted(PATHS)
N = 2  # seeded inputs per model


class Case:
    """A model, its TFLM outputs on N seeded inputs, and its container. An input the graph
    drops (TRANSPOSE_CONV's output shape given as a model input) gets the real shape for TFLM
    and is not given to mpy-lazy."""

    def __init__(self, name, workdir):
        self.name = name
        self.src = PATHS[name]
        m = tflm_ref.read_model(self.src)
        info = tflm_ref.tensors(m)
        ins = [int(i) for i in m.subgraphs[0].inputs]
        self.dropped = from_tflite(self.src).dropped
        shape_of = {}
        for o in tflm_ref.ops(self.src):
            if o.name == "TRANSPOSE_CONV":
                shape_of[o.inputs[0]] = np.array(info[o.outputs[0]].shape, dtype=np.int32)
        rng = np.random.default_rng(7)
        self.samples = []  # as TFLM takes them
        for _ in range(N):
            x = [shape_of[i] if k in self.dropped else tflm_ref.sample_tensor(info[i], rng)
                 for k, i in enumerate(ins)]
            self.samples.append(tuple(x) if len(x) > 1 else x[0])
        self.xs = [[v.reshape(-1).tolist() for k, v in enumerate(x if isinstance(x, tuple) else (x,))
                    if k not in self.dropped] for x in self.samples]
        # one interpreter, the inputs in order (a model with state carries it from one to the next)
        self.want = [[np.asarray(v).reshape(-1).tolist() for v in (y if isinstance(y, tuple) else (y,))]
                     for y in tflm_ref.run(self.src, self.samples)]
        self.floats = any(isinstance(w[0], float) for w in self.want[0])
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.data = f.read()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("thirdparty"))
    out = {name: Case(name, workdir) for name in NAMES}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.xs, f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": True})
    board = Board(workdir, "thirdparty", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def outputs(m):
    return [m.tolist(i) for i in range(len(m.outputs))]


def same(got, want):
    """Every output equal; a float one within 1e-5 of its largest value (float32 sums in
    another order: TFLM's float kernels do not specify their rounding)."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if len(g) != len(w):
            return False
        if w and isinstance(w[0], float):
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            if np.max(np.abs(g - w)) > 1e-5 * np.max(np.abs(w)):
                return False
        elif list(g) != list(w):
            return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        assert isinstance(m, mmodel.Program)  # a stored program
        for x, want in zip(c.xs, c.want):
            m(*x)
            assert same(outputs(m), want), name
    # (whether the inputs reach the outputs: test_every_value_matches_tflm)


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert len(r["ys"]) == N
    for got, want in zip(r["ys"], c.want):
        assert same(got, want), name
    if not c.floats:  # (a float model boxes its floats on the unix port)
        assert r["alloc"] == [0] * N, "bytes allocated per inference: %s" % r["alloc"]


@pytest.mark.parametrize("name", NAMES)
def test_host_reference_matches_tflm(cases, name):
    """host_tools.reference (numpy, written apart from the kernels) on the container's
    description and tensors gives TFLM's outputs too."""
    from host_tools import reference
    from host_util import tensors_of

    c = cases[0][name]
    container = mpy_lazy.open(c.data)
    text, tensors = container.meta["graph"], tensors_of(container)
    state = {}  # carried from one input to the next, as the board's program keeps it
    for x, want in zip(c.xs, c.want):
        got = reference.run(text, tensors, *[np.array(v) for v in x], state=state)
        assert same([np.asarray(g).reshape(-1).tolist() for g in got], want), name


@pytest.mark.parametrize("name", NAMES)
def test_every_value_matches_tflm(cases, name):
    """Every value of the graph that is a tensor of the .tflite (the ops' outputs), after each
    input in order, from mpy-lazy's pure kernels (the model compiled from the container's own
    description and tensors, every value made an output) and from the host reference, against
    TFLM's interpreter keeping every tensor (kPreserveAllTensors): an op that agrees only where
    a later op saturates is found too (16 values at a time: a program's outputs). Some value
    differs between the inputs."""
    import re

    from host_tools import reference
    from host_util import tensors_of

    c = cases[0][name]
    _, names = from_tflite(c.src)._text()  # the importer's value names -> the description's
    tensor_of = {v: int(k[1:]) for k, v in names.items() if re.match(r"t\d+$", k)}
    container = mpy_lazy.open(c.data)
    text = container.meta["graph"]
    values = [kv["y"] for _, op, kv in mgraph.parse(text) if op not in ("input", "output") and kv["y"] in tensor_of]
    # TFLM's SignalEnergy writes its bins start..end only (the rest of its tensor, and of a CAST
    # of it, is what the arena held); mpy-lazy's writes 0 there
    part = {}
    for _, op, kv in mgraph.parse(text):
        if op == "energy":
            part[kv["y"]] = slice(*kv["opts"])
        elif op == "cast" and kv["x"] in part:
            part[kv["y"]] = part[kv["x"]]
    tensors = tensors_of(container)
    runs = tflm_ref.intermediate_runs(c.src, c.samples)
    seen = {v: set() for v in values}
    for at in range(0, len(values), 16):  # (a program has at most 16 outputs)
        kept = values[at:at + 16]
        every = "\n".join([line for line in text.split("\n") if not line.startswith("output ")]
                          + ["output x=%s" % v for v in kept])
        state = {}
        with kernel_path("pure"):
            m = mmodel.Model(every)
            m.load(container)
            for x, tflm in zip(c.xs, runs):
                m(*x)
                ref = reference.run(every, tensors, *[np.array(v) for v in x], state=state)
                for k, v in enumerate(kept):
                    w = np.asarray(tflm[tensor_of[v]].value)
                    if w.dtype in (np.uint32, np.uint64):  # (the board's int32 words of the same bits)
                        w = w.view(np.int32)
                    part_ = part.get(v, slice(None))
                    want = [w.reshape(-1)[part_].tolist()]
                    assert same([m.tolist(k)[part_]], want), (name, v, "kernels")
                    assert same([np.asarray(ref[k]).reshape(-1)[part_].tolist()], want), (name, v, "reference")
                    seen[v].add(json.dumps(want))
    assert any(len(s) > 1 for s in seen.values()), name
