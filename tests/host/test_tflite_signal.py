"""TFLite Micro's signal library (the custom ops Signal*: micro_speech's audio front end) against
TFLM itself: micro_speech's audio preprocessors (tests/golden/thirdparty/tflite-micro/
audio_preprocessor_int8.tflite and _float.tflite: window, FFT auto scale, int16 RFFT, energy,
filter bank, its square root, spectral subtraction, PCAN, log, then int32 / float32 arithmetic)
packed with `mpy-lazy pack` and run frame after frame, as TFLM runs them on one interpreter
(the spectral subtraction's noise estimate carries from each frame to the next), on CPython
(the pure kernels) and on the MicroPython unix port: every output element equal. Frames:
silence, quiet and loud noise, tones, full-scale square waves (-32768 included), seeded."""
import json
import os

import numpy as np
import pytest

tflm_ref = pytest.importorskip("tflm_ref")
pytest.importorskip("tflite")

from conftest import ROOT  # noqa: E402
from host_util import Board, kernel_path, run_cli  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import model as mmodel  # noqa: E402

DIR = os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro")
MODELS = ("audio_preprocessor_int8", "audio_preprocessor_float")


def frames(n=24, seed=3):
    """n frames of 480 int16 samples (30 ms at 16 kHz) of varied loudness and content."""
    rng = np.random.default_rng(seed)
    t = np.arange(480)
    out = [np.zeros(480, np.int16)]
    for k in range(1, n):
        kind = k % 6
        if kind == 0:
            x = rng.normal(0, 10 ** rng.uniform(0, 4.3), 480)
        elif kind == 1:
            x = 20000 * np.sin(2 * np.pi * rng.uniform(50, 7900) * t / 16000) + rng.normal(0, 50, 480)
        elif kind == 2:
            x = np.where((t // rng.integers(2, 40)) % 2, 32767, -32768)
        elif kind == 3:
            x = rng.integers(-32768, 32768, 480)
        elif kind == 4:
            x = rng.normal(0, 3, 480)
        else:
            x = sum(rng.uniform(500, 8000) * np.sin(2 * np.pi * f * t / 16000) for f in rng.uniform(100, 4000, 3))
        out.append(np.clip(np.round(x), -32768, 32767).astype(np.int16))
    return out


class Case:
    def __init__(self, name, workdir):
        self.name = name
        self.src = os.path.join(DIR, name + ".tflite")
        self.xs = frames()
        self.want = [np.asarray(y).reshape(-1).tolist() for y in tflm_ref.run(self.src, self.xs)]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", self.src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.data = f.read()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("signal"))
    out = {name: Case(name, workdir) for name in MODELS}
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump([[x.tolist()] for x in c.xs], f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": True})
    board = Board(workdir, "signal", [c.pack for c in out.values()], jobs)
    try:
        yield out, board
    finally:
        board.stop()


def test_frames_reach_every_path(cases):
    """The frames give varied outputs (not all clamped): the test can fail."""
    want = np.array(cases[0]["audio_preprocessor_int8"].want)
    assert (want.max(axis=1) > -128).sum() >= 2 * len(want) // 3
    assert want.min() == -128 and want.max() == 127 and len(np.unique(want)) > 80


@pytest.mark.parametrize("name", MODELS)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for k, (x, want) in enumerate(zip(c.xs, c.want)):
            m(x.tolist())
            assert m.tolist() == want, (name, k)
        m.reset()  # the noise estimate starts again: the first frame's answer again
        m(c.xs[0].tolist())
        assert m.tolist() == c.want[0]


@pytest.mark.parametrize("name", MODELS)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert len(r["ys"]) == len(c.xs)
    for k, (got, want) in enumerate(zip(r["ys"], c.want)):
        assert got[0] == want, (name, k)
    if "int8" in name:  # (the float model's last two ops box their floats on the unix port)
        assert r["alloc"] == [0] * len(c.xs), r["alloc"]


def test_state_carries_over_frames(cases):
    """The same frame twice gives two answers (the noise estimate moved), as in TFLM."""
    c = cases[0]["audio_preprocessor_int8"]
    x = c.xs[3]
    ys = tflm_ref.run(c.src, [x, x])
    assert not np.array_equal(ys[0], ys[1])
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        got = []
        for _ in range(2):
            m(x.tolist())
            got.append(m.tolist())
    assert got == [np.asarray(y).reshape(-1).tolist() for y in ys]


EXAMPLE = os.path.join(ROOT, "examples", "micro_speech", "speech.py")
WAVS = ("yes_1000ms", "no_1000ms")


def tflm_speech(wav):
    """TFLM's micro_speech: the int8 front end over 49 windows (one interpreter), then the keyword
    model: (features [49 x 40] int8, scores [4] int8)."""
    with open(os.path.join(DIR, wav + ".wav"), "rb") as f:
        pcm = np.frombuffer(f.read()[44:], np.int16)
    frames_ = [pcm[320 * i:320 * i + 480] for i in range(49)]
    feats = np.array(tflm_ref.run(os.path.join(DIR, "audio_preprocessor_int8.tflite"), frames_)).reshape(-1)
    scores = tflm_ref.run(os.path.join(DIR, "micro_speech_quantized.tflite"), [feats.astype(np.int8).reshape(1, -1)])
    return feats, np.asarray(scores[0]).reshape(-1)


def test_micro_speech_end_to_end(tmp_path):
    """examples/micro_speech/speech.py as written, on the unix port, from a ROMFS image of both
    containers and TFLM's "yes" and "no" recordings: every score equal to TFLM's pipeline, and
    the words recognized."""
    from conftest import run_micropython

    packs = []
    for src, name in (("audio_preprocessor_int8", "frontend"), ("micro_speech_quantized", "model")):
        packs.append(str(tmp_path / (name + ".mpyl")))
        run_cli("pack", os.path.join(DIR, src + ".tflite"), "-o", packs[-1])
    image = str(tmp_path / "speech.romfs")
    run_cli("romfs", *packs, *[os.path.join(DIR, w + ".wav") for w in WAVS], "-o", image, "-q")
    with open(EXAMPLE) as f:
        script = f.read()
    r = run_micropython("import vfs\nf = open(%r, 'rb'); vfs.mount(vfs.VfsRom(f.read()), '/rom'); f.close()\n"
                        % image + script, heapsize="2M", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {line.split()[0][:-4]: line for line in r.stdout.splitlines()}
    for wav, word in zip(WAVS, ("yes", "no")):
        _, scores = tflm_speech(wav)
        assert ("%s.wav %s %s" % (wav, word, scores.tolist())) == got[wav], r.stdout
        assert int(np.argmax(scores)) == ("silence", "unknown", "yes", "no").index(word)
