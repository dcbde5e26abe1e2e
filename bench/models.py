"""The models `make bench` measures, made on the host (CPython): the digits demo's MLP and CNN
(examples/digits: trained, cached there) and the four MLPerf Tiny models (examples/mlperf_tiny:
seeded weights), each exported to ONNX with torch's default (dynamo) exporter and packed f32 and
int8 (the integer pipeline: `--quantize int8 --calibrate`), plus the .tflite fixture of the same
architecture (tests/golden/tflite, made by tools/make_tflite_fixtures.py) packed as it is; and
.tflite models that have no ONNX twin here (TFLITE_ONLY, from tflite-micro, tests/golden/thirdparty:
an int8 LSTM keyword spotter, a 16x8 layer of SEANet: int16 activations, int8 weights, and the
hello_world sine model), and tflite-micro's person_detect when its file is given (PERSON_DETECT_HOW).

    entries = models.prepare(out_dir)   # [Entry], in table order

Each Entry has the container, its input file (raw bytes: int8 codes for an int8 input, float32
little-endian for a float input, in the input's layout order; for a .tflite entry the very
sample TFLM gets) and, for .tflite entries, the fixture path. The MLPerf ONNX exports are cached
in OUT/onnx (keyed by models.py, torch's version and the exporter); packing is redone every run."""
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DIGITS = os.path.join(ROOT, "examples", "digits")
MLPERF = os.path.join(ROOT, "examples", "mlperf_tiny")
FIXTURES = os.path.join(ROOT, "tests", "golden", "tflite")
for p in (ROOT, DIGITS, os.path.join(ROOT, "tests")):
    if p not in sys.path:
        sys.path.insert(0, p)

NAMES = ("mlp", "cnn", "kws", "vww", "resnet8", "ad")
DIGITS_MODELS = ("mlp", "cnn")
FIXTURE = {"mlp": "digits_mlp_int8", "cnn": "digits_cnn_int8", "kws": "kws_int8", "vww": "vww_int8",
           "resnet8": "resnet8_int8", "ad": "ad_int8"}
DTYPES = ("f32", "int8", "tflite-int8")
# .tflite-only rows (model name: (fixture, dtype label)): TFLM's micro_speech LSTM (49 steps, 80
# units, int8), and SEANet's first conv layer quantized 16x8 (int16 in and out, int8 weights, int64
# bias: 8x166x2 -> 8x160x28, 7x1 kernel, 250 k MACs; tflite-micro's integration test model)
_THIRDPARTY = os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro")
TFLITE_ONLY = {"lstm": (os.path.join(_THIRDPARTY, "micro_speech_lstm.tflite"), "tflite-int8"),
               "seanet": (os.path.join(_THIRDPARTY, "seanet_conv0.tflite"), "tflite-16x8"),
               "hello": (os.path.join(_THIRDPARTY, "hello_world_int8.tflite"), "tflite-int8")}
# tflite-micro's person_detect (MobileNet v1 0.25 on 96x96 grayscale, int8, 300 KB): not kept in the
# repository; its row runs when PERSON_DETECT_TFLITE (the .tflite) or PICO_TFLMICRO_DIR (a
# pico-tflmicro checkout, which holds it as a C array) is set (bench/tflm_pico.py's person_detect)
PERSON_DETECT_HOW = ("set PERSON_DETECT_TFLITE (tflite-micro's tensorflow/lite/micro/models/person_detect.tflite) "
                     "or PICO_TFLMICRO_DIR (a pico-tflmicro checkout)")
SEED = 2026
CALIB_N = 50  # seeded N(0, 1) calibration samples for the MLPerf models (the digits use training images)
EXPORT_VERSION = 1


class Entry:
    def __init__(self, model, dtype, container, input_file, fixture=None, note=None):
        self.model = model
        self.dtype = dtype
        self.container = container
        self.input_file = input_file
        self.fixture = fixture  # the .tflite file (tflite-int8 and tflite-16x8 entries)
        self.note = note
        self.key = "%s-%s" % (model, dtype)

    def __repr__(self):
        return "Entry(%s)" % self.key


def mlperf():
    """examples/mlperf_tiny/models.py, imported by path (this file is a `models` too)."""
    mod = sys.modules.get("mlperf_tiny_models")
    if mod is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("mlperf_tiny_models", os.path.join(MLPERF, "models.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def fixture_path(name):
    return os.path.join(FIXTURES, FIXTURE[name] + ".tflite")


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _mlperf_onnx(out, log):
    """{name: path} of the MLPerf Tiny ONNX exports, made (dynamo exporter) unless cached."""
    import torch

    mlp = mlperf()
    d = os.path.join(out, "onnx")
    os.makedirs(d, exist_ok=True)
    stamp = {"models.py": _sha(os.path.join(MLPERF, "models.py")), "torch": torch.__version__,
             "exporter": "dynamo", "version": EXPORT_VERSION}
    stamp_path = os.path.join(d, "stamp.json")
    paths = {n: os.path.join(d, n + ".onnx") for n in mlp.NAMES}
    try:
        with open(stamp_path) as f:
            cached = json.load(f) == stamp
    except (OSError, ValueError):
        cached = False
    if cached and all(os.path.exists(p) for p in paths.values()):
        return paths
    torch.set_num_threads(1)
    for name in mlp.NAMES:
        log("  exporting %s (torch.onnx.export, dynamo) ..." % name)
        tmp = paths[name] + ".tmp.onnx"
        mlp.export_onnx(mlp.build(name), tmp, dynamo=True)
        os.replace(tmp, paths[name])
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return paths


def _pack(args):
    from host_tools import cli

    if cli.main(["pack"] + args + ["-q"]):
        raise SystemExit("bench: mpy-lazy pack %s failed" % " ".join(args))


def _input_bytes(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        return rng.integers(-128, 128, size=shape, dtype=np.int16).astype(np.int8).tobytes()
    return rng.standard_normal(shape).astype("<f4").tobytes()


def prepare(out, log=print):
    """Export (cached), pack, write the input files; return the entries in table order."""
    import train  # examples/digits/train.py

    os.makedirs(out, exist_ok=True)
    log("digits: examples/digits/train.py (cached after its first run) ...")
    train.main()
    log("MLPerf Tiny: ONNX exports (cached in %s) ..." % os.path.relpath(os.path.join(out, "onnx"), ROOT))
    onnx = {n: os.path.join(train.OUT, n + ".onnx") for n in DIGITS_MODELS}
    onnx.update(_mlperf_onnx(out, log))
    shapes = {n: train.INPUT_SHAPE[n] for n in DIGITS_MODELS}
    shapes.update(mlperf().INPUT_SHAPES)
    log("packing f32, int8 (calibrated) and the .tflite fixtures ...")
    entries = []
    for i, name in enumerate(NAMES):
        shape = (1,) + tuple(shapes[name])
        if name in DIGITS_MODELS:
            calib = os.path.join(train.OUT, "calib.npy")  # 200 training images
        else:
            calib = os.path.join(out, name + "-calib.npy")
            rng = np.random.default_rng(SEED + i)
            np.save(calib, rng.standard_normal((CALIB_N,) + tuple(shapes[name])).astype(np.float32))
        for dtype in DTYPES:
            cont = os.path.join(out, "%s-%s.mpyl" % (name, dtype))
            inp = os.path.join(out, "%s-%s.input" % (name, dtype))
            if dtype == "tflite-int8":
                fx = fixture_path(name)
                if not os.path.exists(fx):
                    entries.append(Entry(name, dtype, None, None, fx,
                                         note="%s missing (make tflite-fixtures)" % os.path.relpath(fx, ROOT)))
                    continue
                _pack([fx, "-o", cont])
                import tflm_ref

                data = tflm_ref.sample_inputs(fx, 1, seed=SEED)[0].tobytes()  # what TFLM gets
                entries.append(Entry(name, dtype, cont, inp, fx))
            else:
                args = [onnx[name], "-o", cont]
                if dtype == "int8":
                    args += ["--quantize", "int8", "--calibrate", calib]
                _pack(args)
                data = _input_bytes(shape, "int8" if dtype == "int8" else "f32", SEED + 100 + i)
                entries.append(Entry(name, dtype, cont, inp))
            with open(inp, "wb") as f:
                f.write(data)
    for name, (fx, dtype) in TFLITE_ONLY.items():
        import tflm_ref

        cont = os.path.join(out, "%s-%s.mpyl" % (name, dtype))
        inp = os.path.join(out, "%s-%s.input" % (name, dtype))
        _pack([fx, "-o", cont])
        with open(inp, "wb") as f:
            f.write(tflm_ref.sample_inputs(fx, 1, seed=SEED)[0].tobytes())  # what TFLM gets
        entries.append(Entry(name, dtype, cont, inp, fx))
    entries.append(_person_detect(out))
    return entries


def _person_detect(out):
    """The person_detect entry: packed from PERSON_DETECT_TFLITE / PICO_TFLMICRO_DIR, else skipped."""
    src = os.environ.get("PERSON_DETECT_TFLITE") or os.environ.get("PICO_TFLMICRO_DIR")
    fx = os.path.join(out, "person_detect.tflite")
    if not src:
        return Entry("person", "tflite-int8", None, None, fx, note=PERSON_DETECT_HOW)
    import tflm_pico  # bench/tflm_pico.py
    import tflm_ref

    with open(fx, "wb") as f:
        f.write(tflm_pico.person_detect(src))
    cont = os.path.join(out, "person-tflite-int8.mpyl")
    inp = os.path.join(out, "person-tflite-int8.input")
    _pack([fx, "-o", cont])
    with open(inp, "wb") as f:
        f.write(tflm_ref.sample_inputs(fx, 1, seed=SEED)[0].tobytes())  # what TFLM gets
    return Entry("person", "tflite-int8", cont, inp, fx)

