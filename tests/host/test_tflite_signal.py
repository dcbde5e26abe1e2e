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
from host_util import Board, cli, kernel_path, run_cli  # noqa: E402,F401 (cli: fixture)

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


def _as_board(v):
    """A TFLM value as the board holds it: uint32 as int32 bits, uint64 as lo, hi int32 words."""
    v = np.asarray(v)
    if v.dtype in (np.uint32, np.uint64):
        v = v.view(np.int32)
    return v.reshape(-1).tolist()


def _outputs(m):
    return [m.tolist(i) for i in range(len(m.outputs))]


def _edges32(rng, shape, dt, k):
    """int32 values over the whole range (k 0), of a quarter of it and small ones; float32 values
    of 10**(4 k - 4)."""
    if dt == "f32":
        return rng.normal(0, 10.0 ** (4 * k - 4), shape).astype(np.float32)
    top = (2 ** 31 - 1, 2 ** 29, 3000)[k]
    x = rng.integers(-top - 1, top, shape, endpoint=True).astype(np.int32)
    if k == 0:
        edge = np.array([-2 ** 31, 2 ** 31 - 1, -2 ** 31, -2 ** 31], np.int32)[:x.size]
        x.reshape(-1)[:edge.size] = edge
    return x


def _seen(name, got, want):
    """The outputs compared: energy's bins 3..59 (TFLM writes those only); a stacker's or framer's
    frames only where valid (TFLM leaves them as they were otherwise)."""
    if name == "energy":
        return [got[0][3:60]], [want[0][3:60]]
    if name.startswith(("rfft_f32", "irfft_f32")):  # (float32 sums: TFLM's in its order, rounded each time)
        g, w = np.asarray(got[0], np.float64), np.asarray(want[0], np.float64)
        near = np.abs(g - w).max() <= 1e-5 * np.abs(w).max() + 1e-30
        return [near or got[0]], [True if near else want[0]]
    if name.startswith(("stacker", "framer")) and not want[1][0]:
        return [got[1]], [want[1]]
    return got, want


class Case:
    """A model (the .tflite at src), its inputs invoke by invoke (runs: a list of inputs each),
    TFLM's outputs on one interpreter (state carried), and its container."""

    def __init__(self, name, src, runs, workdir):
        self.name, self.src, self.runs = name, src, runs
        ys = tflm_ref.run(src, [tuple(x) if len(x) > 1 else x[0] for x in runs], arena_size=1 << 20)
        self.want = [[_as_board(v) for v in (y if isinstance(y, tuple) else (y,))] for y in ys]
        self.xs = [[_as_board(v) for v in x] for x in runs]
        self.pack = os.path.join(workdir, name + ".mpyl")
        run_cli("pack", src, "-o", self.pack)
        with open(self.pack, "rb") as f:
            self.data = f.read()


def _with_board(out, workdir, label):
    """(cases, the unix port running each case's invokes in order, measuring the heap of each)."""
    jobs = []
    for c in out.values():
        xs_path = os.path.join(workdir, c.name + ".json")
        with open(xs_path, "w") as f:
            json.dump(c.xs, f)
        jobs.append({"name": os.path.basename(c.pack), "xs": xs_path, "multi": True, "alloc": True})
    return out, Board(workdir, label, [c.pack for c in out.values()], jobs)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("signal"))
    out = {name: Case(name, os.path.join(DIR, name + ".tflite"), [[x] for x in frames()], workdir)
           for name in MODELS}
    out, board = _with_board(out, workdir, "signal")
    try:
        yield out, board
    finally:
        board.stop()


def test_frames_reach_every_path(cases):
    """The frames give varied outputs (not all clamped): the test can fail."""
    want = np.array([w[0] for w in cases[0]["audio_preprocessor_int8"].want])
    assert (want.max(axis=1) > -128).sum() >= 2 * len(want) // 3
    assert want.min() == -128 and want.max() == 127 and len(np.unique(want)) > 80


@pytest.mark.parametrize("name", MODELS)
def test_cpython_matches_tflm(cases, name):
    c = cases[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for k, (x, want) in enumerate(zip(c.xs, c.want)):
            m(*x)
            assert _outputs(m) == want, (name, k)
        m.reset()  # the noise estimate starts again: the first frame's answer again
        m(*c.xs[0])
        assert _outputs(m) == c.want[0]


@pytest.mark.parametrize("name", MODELS)
def test_micropython_matches_tflm(cases, name):
    c = cases[0][name]
    r = cases[1].get(os.path.basename(c.pack))
    assert len(r["ys"]) == len(c.xs)
    for k, (got, want) in enumerate(zip(r["ys"], c.want)):
        assert got == want, (name, k)
    if "int8" in name:  # (the float model's last two ops box their floats on the unix port)
        assert r["alloc"] == [0] * len(c.xs), r["alloc"]


def test_state_carries_over_frames(cases):
    """The same frame twice gives two answers (the noise estimate moved), as in TFLM."""
    c = cases[0]["audio_preprocessor_int8"]
    x = c.runs[3][0]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        got = []
        for _ in range(2):
            m(x.tolist())
            got.append(m.tolist())
    ys = tflm_ref.run(c.src, [x, x])
    assert not np.array_equal(ys[0], ys[1])
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


# --- each op alone: one-op models (TFLM's schema module, flexbuffer options) on edge inputs -------

from flatbuffers import flexbuffers  # noqa: E402
from test_tflite_elem import model  # noqa: E402
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S  # noqa: E402

CUSTOM = S.BuiltinOperator.CUSTOM
I16 = np.iinfo(np.int16)


def _custom(name, opts, tensors, inputs, outputs, op_inputs):
    return model(CUSTOM, tensors, inputs, outputs, op_inputs, custom=(name, flexbuffers.Dumps(opts)))


def _edges16(rng, shape):
    x = rng.integers(I16.min, I16.max, shape, endpoint=True).astype(np.int16)
    e = x.reshape(-1)
    e[:min(4, e.size)] = (-32768, 32767, 0, -1)[:e.size]
    return x


def one_op_models():
    """name -> (.tflite bytes, [a list of inputs per invoke, in order])."""
    rng = np.random.default_rng(11)
    out = {}
    for shift in (0, 7, 15):
        w = _edges16(rng, (64,))
        out["window%d" % shift] = _custom("SignalWindow", {"shift": shift}, [
            ((3, 64), "i16", None, None), ((64,), "i16", None, w), ((3, 64), "i16", None, None)],
            [0], [2], [0, 1]), [[_edges16(rng, (3, 64))]]
    xs = [np.zeros(40, np.int16), np.full(40, -32768, np.int16), (rng.integers(-300, 300, 40)).astype(np.int16),
          _edges16(rng, (40,)), np.array([1] * 40, np.int16)]
    out["fft_auto_scale"] = _custom("SignalFftAutoScale", {}, [
        ((40,), "i16", None, None), ((40,), "i16", None, None), ((), "i32", None, None)],
        [0], [1, 2], [0]), [[x] for x in xs]
    for nfft, frame, frames in ((4, 3, 1), (16, 16, 2), (64, 50, 3), (512, 480, 1)):
        x = _edges16(rng, (frames, frame))
        quiet = (rng.normal(0, 200, (frames, frame))).astype(np.int16)
        out["rfft%d" % nfft] = _custom("SignalRfft", {"fft_length": nfft, "T": 7}, [
            ((frames, frame), "i16", None, None), ((frames, nfft + 2), "i16", None, None)],
            [0], [1], [0]), [[x], [quiet]]
    for nfft, frame, frames in ((4, 3, 1), (16, 16, 2), (64, 50, 3), (512, 480, 1)):  # int32 and float32
        for dt, typ in (("i32", S.TensorType.INT32), ("f32", S.TensorType.FLOAT32)):
            xs = [_edges32(rng, (frames, frame), dt, k) for k in range(3)]
            out["rfft_%s_%d" % (dt, nfft)] = _custom("SignalRfft", {"fft_length": nfft, "T": int(typ)}, [
                ((frames, frame), dt, None, None), ((frames, nfft + 2), dt, None, None)], [0], [1], [0]), [[x] for x in xs]
            shape = (frames, nfft + 2) if frames > 1 else (nfft + 2,)
            xs = [_edges32(rng, shape, dt, k) for k in range(3)]
            out["irfft_%s_%d_%d" % (dt, nfft, frames)] = _custom("SignalIrfft", {"T": int(typ), "fft_length": nfft}, [
                (shape, dt, None, None), (shape[:-1] + (nfft,), dt, None, None)], [0], [1], [0]), [[x] for x in xs]
    out["energy"] = _custom("SignalEnergy", {"start_index": 3, "end_index": 60}, [
        ((130,), "i16", None, None), ((65,), "u32", None, None)], [0], [1], [0]), [[_edges16(rng, (130,))]]
    ch, nin = 12, 90
    widths = rng.integers(1, 9, ch + 1).astype(np.int16)
    starts = np.minimum(np.cumsum(np.r_[0, widths[:-1]]) // 2, nin - 9).astype(np.int16)
    wstarts = np.cumsum(np.r_[0, widths[:-1]]).astype(np.int16)
    nw = int(wstarts[-1] + widths[-1])
    weights = rng.integers(0, 4096, nw).astype(np.int16)
    unweights = (4096 - weights).astype(np.int16)
    energies = rng.integers(0, 1 << 32, nin, dtype=np.uint64).astype(np.uint32)
    energies[:3] = (0xFFFFFFFF, 0, 1)
    out["filter_bank"] = _custom("SignalFilterBank", {"num_channels": ch}, [
        ((nin,), "u32", None, None), ((nw,), "i16", None, weights), ((nw,), "i16", None, unweights),
        ((ch + 1,), "i16", None, starts), ((ch + 1,), "i16", None, wstarts), ((ch + 1,), "i16", None, widths),
        ((ch,), "u64", None, None)], [0], [6], [0, 1, 2, 3, 4, 5]), [[energies]]
    for clamping in (False, True):
        opts = {"alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": clamping,
                "min_signal_remaining": 819, "num_channels": 20, "one_minus_smoothing": 15975, "smoothing": 409,
                "smoothing_bits": 10, "spectral_subtraction_bits": 14}
        xs = [rng.integers(0, 1 << (4 * k + 4), 20, dtype=np.uint64).astype(np.uint32) for k in range(6)]
        xs[3][:2] = (0xFFFFFFFF, 0)
        out["spectral_subtraction%d" % clamping] = _custom("SignalFilterBankSpectralSubtraction", opts, [
            ((20,), "u32", None, None), ((20,), "u32", None, None), ((20,), "u32", None, None)],
            [0], [1, 2], [0]), [[x] for x in xs + xs[::-1]]
    lut = _pcan_lut()
    x = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, 64).astype(np.uint32)
    noise = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, 64).astype(np.uint32)
    noise[:4] = (0, 1, 2, 3)
    for shift in (6, 20):
        out["pcan%d" % shift] = _custom("SignalPCAN", {"snr_shift": shift}, [
            ((64,), "u32", None, None), ((64,), "u32", None, None), ((125,), "i16", None, lut),
            ((64,), "u32", None, None)], [0, 1], [3], [0, 1, 2]), [[x, noise]]
    x = rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, 64).astype(np.uint32)
    x[:5] = (0, 1, 2, 0xFFFFFFFF, 0x80000000)
    for bits, scale in ((0, 64), (3, 64), (7, 1 << 20)):
        out["fb_log%d_%d" % (bits, scale)] = _custom("SignalFilterBankLog", {
            "input_correction_bits": bits, "output_scale": scale}, [
            ((64,), "u32", None, None), ((64,), "i16", None, None)], [0], [1], [0]), [[x]]
    for rows, f, d in ((1, 40, 7), (3, 20, 50), (2, 16, 0)):  # (a delay longer than a frame; none)
        out["delay%d_%d" % (f, d)] = _custom("SignalDelay", {"delay_length": d}, [
            ((rows, f), "i16", None, None), ((rows, f), "i16", None, None)], [0], [1], [0]), \
            [[_edges16(rng, (rows, f))] for _ in range(6)]
    for c, left, right, step in ((4, 2, 1, 1), (3, 0, 2, 2), (5, 1, 1, 3), (2, 0, 0, 1)):
        b = c * (left + right + 1)
        out["stacker%d_%d_%d_%d" % (c, left, right, step)] = _custom("SignalStacker", {
            "num_channels": c, "stacker_left_context": left, "stacker_right_context": right,
            "stacker_step": step}, [((c,), "i16", None, None), ((b,), "i16", None, None),
                                    ((), "bool", None, None)], [0], [1, 2], [0]), \
            [[rng.integers(I16.min, I16.max, c, endpoint=True).astype(np.int16)] for _ in range(9)]
    for shape, size, step, prefill in (((32,), 48, 16, 0), ((2, 20), 30, 10, 1), ((12,), 5, 4, 0),
                                       ((3, 8), 8, 8, 1), ((16,), 40, 8, 1)):
        n = shape[-1] // step
        out["framer%s_%d_%d_%d" % ("x".join(map(str, shape)), size, step, prefill)] = _custom("SignalFramer", {
            "frame_size": size, "frame_step": step, "prefill": bool(prefill)}, [
            (shape, "i16", None, None), (shape[:-1] + (n, size), "i16", None, None), ((), "bool", None, None)],
            [0], [1, 2], [0]), [[rng.integers(I16.min, I16.max, shape, endpoint=True).astype(np.int16)]
                                for _ in range(7)]
    for nfft, frames in ((4, 1), (16, 2), (64, 3), (512, 1), (32, 4)):
        shape = (frames, nfft + 2) if frames > 1 else (nfft + 2,)
        loud = [_edges16(rng, shape), (rng.normal(0, 300, shape)).astype(np.int16),
                rng.integers(-40, 40, shape).astype(np.int16)]
        out["irfft%d_%d" % (nfft, frames)] = _custom("SignalIrfft", {"T": int(S.TensorType.INT16), "fft_length": nfft}, [
            (shape, "i16", None, None), (shape[:-1] + (nfft,), "i16", None, None)], [0], [1], [0]), [[x] for x in loud]
    for shape, step in (((3, 16), 8), ((2, 4, 10), 3), ((1, 6), 6)):
        n, size = shape[-2:]
        y = shape[:-2] + (n * step,)
        out["overlap%s_%d" % ("x".join(map(str, shape)), step)] = _custom("SignalOverlapAdd", {
            "T": int(S.TensorType.INT16), "frame_step": step}, [(shape, "i16", None, None), (y, "i16", None, None)],
            [0], [1], [0]), [[_edges16(rng, shape)] for _ in range(5)]
        out["overlap_f%s_%d" % ("x".join(map(str, shape)), step)] = _custom("SignalOverlapAdd", {
            "T": int(S.TensorType.FLOAT32), "frame_step": step}, [(shape, "f32", None, None), (y, "f32", None, None)],
            [0], [1], [0]), [[(rng.normal(0, 10 ** k, shape)).astype(np.float32)] for k in range(-2, 5)]
    return out


def _pcan_lut():
    """micro_speech's PCAN gain table (the front end's constant tensor 8), read from the model."""
    from host_tools.tflite_import import _Reader

    with open(os.path.join(DIR, "audio_preprocessor_int8.tflite"), "rb") as f:
        r = _Reader(f.read(), "front end")
    return r.data(8)


def _saved(workdir, name, data):
    path = os.path.join(workdir, name + ".tflite")
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.fixture(scope="module")
def one_ops(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("signal_ops"))
    out = {name: Case(name, _saved(workdir, name, data), runs, workdir)
           for name, (data, runs) in one_op_models().items()}
    out, board = _with_board(out, workdir, "signal_ops")
    try:
        yield out, board
    finally:
        board.stop()


ONE_OPS = list(one_op_models())


@pytest.mark.parametrize("name", ONE_OPS)
def test_op_cpython_matches_tflm(one_ops, name):
    """Each op alone, every invoke in order on one model (state carried), pure kernels."""
    c = one_ops[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for k, (x, want) in enumerate(zip(c.xs, c.want)):
            m(*x)
            got = _outputs(m)
            got, want = _seen(name, got, want)
            assert got == want, (name, k)


@pytest.mark.parametrize("name", ONE_OPS)
def test_op_micropython_matches_tflm(one_ops, name):
    c = one_ops[0][name]
    r = one_ops[1].get(os.path.basename(c.pack))
    for k, (got, want) in enumerate(zip(r["ys"], c.want)):
        got, want = _seen(name, got, want)
        assert got == want, (name, k)
    if not name.startswith(("overlap_f", "rfft_", "irfft_")):  # (float32 values box on the unix port; int32
        # and float32 FFTs are plain Python: 64-bit products, a table's view per call)
        assert r["alloc"] == [0] * len(c.xs), r["alloc"]


def test_op_host_reference_matches_tflm(one_ops):
    from host_tools import reference
    from host_util import tensors_of

    for name, c in one_ops[0].items():
        container = mpy_lazy.open(c.data)
        state = {}
        for k, (x, want) in enumerate(zip(c.xs, c.want)):
            got = [np.asarray(v).reshape(-1).tolist() for v in
                   reference.run(container.meta["graph"], tensors_of(container), *[np.array(v) for v in x],
                                 state=state)]
            got, want = _seen(name, got, want)
            assert got == want, (name, k)


def test_square_roots_are_tflms():
    """Sqrt32 / Sqrt64 (signal/src/square_root_*.cc) as their comments specify them: the integer
    root, plus one where the remainder exceeds it (rounded), never past all ones; Sqrt64 takes
    the 32-bit one below 2**32. (The one-op model cannot feed TFLM a scalar scale input: the
    front ends' every-value test covers the op.)"""
    import math

    from mpy_lazy.ops.signal import sqrt64

    rng = np.random.default_rng(5)
    ns = [0, 1, 2, 3, 4, 8, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 64 - 1, 2 ** 62, (2 ** 32 - 1) ** 2]
    ns += [int(v) >> int(s) for v, s in zip(rng.integers(0, 2 ** 63, 2000, dtype=np.uint64),
                                             rng.integers(0, 63, 2000))]
    for n in ns:
        r = math.isqrt(n)
        top = 0xFFFF if n < 2 ** 32 else 0xFFFFFFFF
        if n - r * r > r and r != top:
            r += 1
        assert sqrt64(n) == r, n


def _refusals():
    """name -> (.tflite bytes, words the one-line refusal names)."""
    t16 = ((480,), "i16", None, None)
    w = np.ones(480, np.int16)
    lut = np.zeros(125, np.int16)
    return {
        "rfft_not_power_of_two": (_custom("SignalRfft", {"fft_length": 480, "T": 7}, [
            t16, ((482,), "i16", None, None)], [0], [1], [0]), ("SignalRfft", "fft_length 480", "powers of two")),
        "rfft_int64": (_custom("SignalRfft", {"fft_length": 512, "T": 4}, [
            ((480,), "i32", None, None), ((514,), "i32", None, None)], [0], [1], [0]), ("SignalRfft", "int16 (7), int32")),
        "rfft_type": (_custom("SignalRfft", {"fft_length": 512, "T": 2}, [
            ((480,), "i16", None, None), ((514,), "i16", None, None)], [0], [1], [0]), ("SignalRfft", "INT32 expected")),
        "window_no_options": (_custom("SignalWindow", {}, [t16, ((480,), "i16", None, w), t16], [0], [2], [0, 1]),
                              ("SignalWindow", "lack 'shift'")),
        "window_shift": (_custom("SignalWindow", {"shift": 40}, [t16, ((480,), "i16", None, w), t16], [0], [2],
                                 [0, 1]), ("SignalWindow", "shift 40")),
        "energy_range": (_custom("SignalEnergy", {"start_index": 9, "end_index": 300}, [
            ((514,), "i16", None, None), ((257,), "u32", None, None)], [0], [1], [0]), ("SignalEnergy", "start_index 9 .. end_index 300")),
        "filter_bank_output_rank": (_custom("SignalFilterBank", {"num_channels": 2}, [  # (found by fuzz_tflite)
            ((8,), "u32", None, None)] + [((3,), "i16", None, np.array(v, np.int16)) for v in ([9] * 3, [1] * 3)] + [
            ((3,), "i16", None, np.array(v, np.int16)) for v in ([0, 2, 4], [0, 1, 2], [1, 1, 1])] + [
            ((1, 2), "u64", None, None)], [0], [6], [0, 1, 2, 3, 4, 5]), ("SignalFilterBank", "output 0 of shape [1, 2]")),
        "energy_output_rank": (_custom("SignalEnergy", {"start_index": 3, "end_index": 60}, [  # (TFLM's ranks)
            ((130,), "i16", None, None), ((1, 65), "u32", None, None)], [0], [1], [0]),
            ("SignalEnergy", "output 0 of shape [1, 65]")),
        "log_input_rank": (_custom("SignalFilterBankLog", {"input_correction_bits": 3, "output_scale": 64}, [
            ((2, 20), "u32", None, None), ((2, 20), "i16", None, None)], [0], [1], [0]),
            ("SignalFilterBankLog", "input 0 of shape [2, 20]")),
        "pcan_short_table": (_custom("SignalPCAN", {"snr_shift": 6}, [
            ((40,), "u32", None, None), ((40,), "u32", None, None), ((100,), "i16", None, lut[:100]),
            ((40,), "u32", None, None)], [0, 1], [3], [0, 1, 2]), ("SignalPCAN", "gain table of 100")),
        "log_float": (_custom("SignalFilterBankLog", {"input_correction_bits": 3, "output_scale": 64}, [
            ((40,), "u32", None, None), ((40,), "f32", None, None)], [0], [1], [0]), ("output 0", "FLOAT32")),
        "stacker_step_past_stack": (_custom("SignalStacker", {
            "num_channels": 4, "stacker_left_context": 1, "stacker_right_context": 0, "stacker_step": 3}, [
            ((4,), "i16", None, None), ((8,), "i16", None, None), ((), "bool", None, None)], [0], [1, 2], [0]),
            ("SignalStacker", "step 3")),
        "framer_step_not_dividing": (_custom("SignalFramer", {"frame_size": 8, "frame_step": 5, "prefill": False}, [
            ((12,), "i16", None, None), ((2, 8), "i16", None, None), ((), "bool", None, None)], [0], [1, 2], [0]),
            ("SignalFramer", "frame_step 5")),
        "overlap_step_past_frame": (_custom("SignalOverlapAdd", {"T": int(S.TensorType.INT16), "frame_step": 9}, [
            ((2, 8), "i16", None, None), ((18,), "i16", None, None)], [0], [1], [0]),
            ("SignalOverlapAdd", "frame_step 9")),
        "irfft_type": (_custom("SignalIrfft", {"T": int(S.TensorType.FLOAT32), "fft_length": 16}, [
            ((18,), "i32", None, None), ((16,), "i32", None, None)], [0], [1], [0]), ("SignalIrfft", "FLOAT32 expected")),
        "irfft_not_power_of_two": (_custom("SignalIrfft", {"T": int(S.TensorType.INT16), "fft_length": 12}, [
            ((14,), "i16", None, None), ((12,), "i16", None, None)], [0], [1], [0]),
            ("SignalIrfft", "fft_length 12", "powers of two")),
        "overlap_int32": (_custom("SignalOverlapAdd", {"T": int(S.TensorType.INT32), "frame_step": 4}, [
            ((2, 8), "i32", None, None), ((8,), "i32", None, None)], [0], [1], [0]),
            ("SignalOverlapAdd", "INT32")),
        "uint32_into_add": (model(S.BuiltinOperator.ADD, [((40,), "u32", None, None)] * 3, [0, 1], [2], [0, 1]),
                            ("(ADD)", "uint32")),
        "uint32_to_float": (model(S.BuiltinOperator.CAST, [((40,), "u32", None, None), ((40,), "f32", None, None)],
                                  [0], [1], [0]), ("(CAST)", "uint32 and float32")),
        "int32_div_by_zero": (model(S.BuiltinOperator.DIV, [((40,), "i32", None, None),
                                                           ((1,), "i32", None, np.zeros(1, np.int32)),
                                                           ((40,), "i32", None, None)], [0], [2], [0, 1]),
                              ("(DIV)", "constant 0")),
        "int32_div_by_value": (model(S.BuiltinOperator.DIV, [((40,), "i32", None, None)] * 3, [0, 1], [2], [0, 1]),
                               ("(DIV)", "computed value")),
    }


@pytest.mark.parametrize("name", sorted(_refusals()))
def test_refused_in_one_line(cli, tmp_path, name):
    """What the board does not run, or TFLM would not either: one line naming the operator and
    the reason, no output written."""
    data, words = _refusals()[name]
    src = tmp_path / (name + ".tflite")
    src.write_bytes(data)
    out = tmp_path / (name + ".mpyl")
    line = cli.fails("pack", src, "-o", out)
    for w in words:
        assert w in line, (w, line)
    assert not out.exists()


def test_delay_reset_starts_again(one_ops):
    """SignalDelay's samples carry from call to call (TFLM's answers above); reset() zeroes them:
    the first call's answer again."""
    c = one_ops[0]["delay20_50"]
    assert c.want[0] != c.want[3]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for x in c.xs[:4]:
            m(*x)
        m.reset()
        m(*c.xs[0])
        assert _outputs(m) == c.want[0]


def test_framer_reset_prefills_again(one_ops):
    """SignalFramer's samples carry from call to call; reset() puts back the prefill zeros: the
    first call's frames again."""
    c = one_ops[0]["framer2x20_30_10_1"]
    assert c.want[0] != c.want[3]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for x in c.xs[:4]:
            m(*x)
        m.reset()
        m(*c.xs[0])
        assert _outputs(m) == c.want[0]


@pytest.mark.parametrize("name", ["overlap3x16_8", "overlap_f2x4x10_3"])
def test_overlap_reset_starts_again(one_ops, name):
    """SignalOverlapAdd's sums carry from call to call; reset() zeroes them."""
    c = one_ops[0][name]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for x in c.xs[:3]:
            m(*x)
        m.reset()
        m(*c.xs[0])
        assert _outputs(m) == c.want[0]
        m(*c.xs[0])
        assert _outputs(m) != c.want[0]


def test_stacker_reset_starts_again(one_ops):
    """SignalStacker's frames carry from call to call; reset() drops them: the first frame is
    padded again (the second call's stack again, not the one the held frames would make)."""
    c = one_ops[0]["stacker4_2_1_1"]
    with kernel_path("pure"):
        m = mmodel.from_container(mpy_lazy.open(c.data))
        for x in c.xs[:4]:
            m(*x)
        m.reset()
        m(*c.xs[0])
        assert _outputs(m)[1] == c.want[0][1] == [False]
        m(*c.xs[1])
        assert _outputs(m) == c.want[1] != c.want[2]
