"""Models made by others (tests/golden/thirdparty/, their source and licence in its README)
against TensorFlow Lite Micro's own interpreter (the tflite-micro wheel, tests/tflm_ref.py):
packed with `mpy-lazy pack`, run on seeded inputs through TFLM, through mpy-lazy on CPython
(the pure kernels) and on the MicroPython unix port (viper, from a ROMFS image): every output
element equal. int16 models (TFLite's 16x8 quantization) included."""
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
from mpy_lazy import model as mmodel  # noqa: E402

DIR = os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro")
NAMES = sorted(os.path.basename(p)[:-7] for p in glob.glob(os.path.join(DIR, "*.tflite")))
N = 2  # seeded inputs per model


def sample(t, rng):
    """A seeded input of TFLM tensor t (without its batch dimension), over its type's range."""
    shape = tuple(t.shape[1:] if t.shape[:1] == (1,) and len(t.shape) > 1 else t.shape)
    if t.dtype == np.int16:
        return rng.integers(-32768, 32768, size=shape).astype(np.int16)
    if t.dtype == np.int8:
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if t.dtype == np.int32:
        return rng.integers(-(1 << 20), 1 << 20, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32)


class Case:
    """A model, its TFLM outputs on N seeded inputs, and its container. An input the graph
    drops (TRANSPOSE_CONV's output shape given as a model input) gets the real shape for TFLM
    and is not given to mpy-lazy."""

    def __init__(self, name, workdir):
        self.name = name
        self.src = os.path.join(DIR, name + ".tflite")
        m = tflm_ref.read_model(self.src)
        info = tflm_ref.tensors(m)
        ins = [int(i) for i in m.subgraphs[0].inputs]
        self.dropped = from_tflite(self.src).dropped
        shape_of = {}
        for o in tflm_ref.ops(self.src):
            if o.name == "TRANSPOSE_CONV":
                shape_of[o.inputs[0]] = np.array(info[o.outputs[0]].shape, dtype=np.int32)
        rng = np.random.default_rng(7)
        self.xs, self.want = [], []
        for _ in range(N):
            x = [shape_of[i] if k in self.dropped else sample(info[i], rng) for k, i in enumerate(ins)]
            y = tflm_ref.run(self.src, [tuple(x) if len(x) > 1 else x[0]])[0]
            self.xs.append([v.reshape(-1).tolist() for k, v in enumerate(x) if k not in self.dropped])
            self.want.append([np.asarray(v).reshape(-1).tolist() for v in (y if isinstance(y, tuple) else (y,))])
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


@pytest.mark.parametrize("name", NAMES)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        assert isinstance(m, mmodel.Program)  # a stored program
        for x, want in zip(c.xs, c.want):
            m(*x)
            assert outputs(m) == want, name
    assert len({json.dumps(w) for w in c.want}) > 1  # TFLM's outputs are not constant


@pytest.mark.parametrize("name", NAMES)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert r["path"] == "viper"
    assert [[y] if not isinstance(y[0], list) else y for y in r["ys"]] == c.want, name
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
    for x, want in zip(c.xs, c.want):
        got = reference.run(text, tensors, *[np.array(v) for v in x])
        assert [np.asarray(g).reshape(-1).tolist() for g in got] == want, name
