"""Make the .tflite test fixtures in tests/golden/tflite/ with the real TensorFlow Lite converter.

    python tools/make_tflite_fixtures.py [--out DIR] [--only NAME,...] [--twice] [--no-verify]

Run with the repo venv's python (`make tflite-fixtures`). TensorFlow is never needed by
`make test`: this script keeps it in a virtualenv of its own, .venv-tf/ at the repo root (or
$MPY_LAZY_TF_VENV), which it creates from PyPI with the pinned versions below when it is missing
or its pins changed, and runs the Keras building and the conversion there (it re-runs itself
under that venv's python with --inner). The repo venv does the rest: it trains the digits demo
models if examples/digits/out/ has none (examples/digits/train.py), computes PyTorch's logits that
the Keras copies must match, and checks every file it got back with TFLM's own schema module and
interpreter (tests/tflm_ref.py): the op inventory (every op mpy-lazy will support appears in some
fixture, unsupported_op.tflite has one it won't), a live invoke, the arena size and invoke time.
Nothing in --out is touched unless all of that passes; each file is then replaced atomically.

--twice converts everything twice (in two fresh processes) and reports whether the bytes are
identical. --only limits the run to some fixtures (names without .tflite); the op-coverage check
is then skipped.

Fixtures (int8 = full-integer: int8 weights and activations, int32 biases, int8 input/output):
  digits_mlp_int8, digits_cnn_int8   the digits demo's trained torch weights, in NHWC Keras copies
  digits_cnn_f32                     the same CNN, float32, no quantization
  digits_mlp_float_io                int8 inside, float32 input/output (QUANTIZE/DEQUANTIZE)
  kws_int8, vww_int8, resnet8_int8, ad_int8
                                     MLPerf Tiny reference architectures (DS-CNN, MobileNetV1
                                     0.25, ResNet-8, FC autoencoder), seeded weights and BN stats
  ops_int8, ops_float_io             one small graph with every op of mpy-lazy's list
  ops_uint8_io                       the same graph, int8 inside, uint8 input and output
                                     (QUANTIZE uint8 -> int8 and int8 -> uint8)
  ops_dynamic_batch_int8             the same graph converted with Keras's dynamic batch: each
                                     Flatten a SHAPE, STRIDED_SLICE, PACK, RESHAPE (folded at pack
                                     time)
  unsupported_op                     a tiny int8 graph with an op outside that list
  elem_int8, elem_f32               HARD_SWISH, MAXIMUM with a scalar, MINIMUM, PRELU (alpha per
                                     channel and per element), DIV
  resize_int8, resize_f32, resize_samples.npy
                                     RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR with every
                                     align_corners / half_pixel_centers combination TFLM runs, and
                                     the samples resize_int8 is calibrated on
  cast_f32                           CAST float32 -> int32 -> int16 -> int8 -> int32 -> float32
  hybrid_dynamic                     the converter's dynamic-range mode (float activations, int8
                                     weights): TFLM refuses it, and so does mpy-lazy
  stream_int8, stream_f32            a streaming model with state: a tf.Variable keeps the last
                                     three 4-feature frames (initial value 0.25), each call
                                     concatenates the new frame, assigns the newest three back and
                                     runs a dense layer over the window (a streaming conv1d of
                                     kernel 4): CALL_ONCE with its init subgraph, VAR_HANDLE,
                                     READ_VARIABLE, ASSIGN_VARIABLE (int8: the variable quantized)
  loop_f32                           a counted tf.while_loop (three steps of v = relu(v W + x)):
                                     WHILE with its condition and body subgraphs, the counter's
                                     int32 ADD and LESS (unrolled at pack time)
  cond_f32                           tf.cond on the input (sum(x) > 0: relu(x W), else tanh(x) / 2):
                                     IF with a condition computed on the board
  while_f32                          tf.while_loop on the input (while max(v) < 4 and i < 20:
                                     v = relu(v W) + v / 2 + 1/4): WHILE whose trip count the board
                                     computes
  calib_f32, calib_int8, calib_samples.npy
                                     a small digits-like float CNN (conv, pool, depthwise, add,
                                     dense), the 100 samples its int8 conversion is calibrated on,
                                     and the converter's full-integer int8 model (int8 in/out)
                                     from them: `mpy-lazy pack calib_f32.tflite --quantize int8
                                     --calibrate calib_samples.npy` is compared with it
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tflite")
DIGITS = os.path.join(ROOT, "examples", "digits")
TF_VENV = os.environ.get("MPY_LAZY_TF_VENV") or os.path.join(ROOT, ".venv-tf")

# The TensorFlow venv, pinned whole (tensorflow-cpu 2.21.0 and everything it pulls in, as pip
# resolved it on Python 3.11 / Linux x86-64), so that a rebuilt venv converts the same way.
# safetensors reads the digits weights. No scikit-learn: the digits split is made by
# examples/digits/train.py's split() in the repo venv and handed over, so it can't drift.
TF_PINS = (
    "tensorflow-cpu==2.21.0",
    "numpy==2.4.6",
    "safetensors==0.8.0",
    "keras==3.15.1",
    "absl-py==2.5.1",
    "astunparse==1.6.3",
    "certifi==2026.10.18",
    "charset-normalizer==3.5.2",
    "flatbuffers==25.12.19",
    "gast==0.7.0",
    "google-pasta==0.2.0",
    "grpcio==1.85.1",
    "h5py==3.14.0",
    "idna==3.20",
    "libclang==18.1.1",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "ml_dtypes==0.6.0",
    "namex==0.1.0",
    "opt_einsum==3.4.0",
    "optree==0.20.0",
    "packaging==26.3",
    "protobuf==7.36.2",
    "Pygments==2.21.0",
    "requests==2.34.2",
    "rich==15.0.0",
    "six==1.17.0",
    "termcolor==3.3.0",
    "typing_extensions==4.16.0",
    "urllib3==2.8.0",
    "wrapt==2.5.2",
)

SEED = 20261023

# name -> (model builder, conversion mode); several fixtures share a Keras model.
FIXTURES = {
    "digits_mlp_int8": ("digits_mlp", "int8"),
    "digits_cnn_int8": ("digits_cnn", "int8"),
    "digits_cnn_f32": ("digits_cnn", "f32"),
    "digits_mlp_float_io": ("digits_mlp", "float_io"),
    "kws_int8": ("kws", "int8"),
    "vww_int8": ("vww", "int8"),
    "resnet8_int8": ("resnet8", "int8"),
    "ad_int8": ("ad", "int8"),
    "ops_int8": ("ops", "int8"),
    "ops_float_io": ("ops", "float_io"),
    "ops_uint8_io": ("ops", "uint8_io"),
    "ops_dynamic_batch_int8": ("ops", "int8_dynamic_batch"),
    "unsupported_op": ("unsupported", "int8"),
    "calib_f32": ("calib", "f32"),
    "calib_int8": ("calib", "int8"),
    "elem_int8": ("elem", "int8"),
    "elem_f32": ("elem", "f32"),
    "resize_int8": ("resize", "int8"),
    "resize_f32": ("resize", "f32"),
    "cast_f32": ("cast", "f32"),
    "hybrid_dynamic": ("hybrid", "dynamic"),
    "stream_int8": ("stream", "int8"),
    "stream_f32": ("stream", "f32"),
    "loop_f32": ("loop", "f32"),
    "cond_f32": ("cond", "f32"),
    "while_f32": ("while", "f32"),
}
# fixtures neither TFLM nor mpy-lazy runs (each refuses them with its reason)
REFUSED = ("unsupported_op", "hybrid_dynamic")
# kind -> the .npy the inner side saves its representative (calibration) samples to
SAMPLES = {"calib": "calib_samples", "resize": "resize_samples"}

# The builtin ops mpy-lazy's .tflite support covers: each must appear in some fixture.
SUPPORTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL",
                 "AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "PAD", "RESHAPE", "SOFTMAX",
                 "CONCATENATION", "LOGISTIC", "TANH", "RELU", "RELU6", "QUANTIZE", "DEQUANTIZE",
                 "HARD_SWISH", "MINIMUM", "MAXIMUM", "CAST", "DIV", "RESIZE_NEAREST_NEIGHBOR",
                 "RESIZE_BILINEAR", "PRELU", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                 "CALL_ONCE", "WHILE", "IF")
# Ops that must appear as operators of their own (not only as a fused activation) somewhere.
STANDALONE = ("RELU", "RELU6", "TANH", "LOGISTIC")


_PROGRESS = sys.stdout  # the inner side points this at its real stdout (see inner())


def say(msg):
    print(msg, file=_PROGRESS, flush=True)


# =========================================================================== outer (repo venv)

def ensure_tf_venv():
    """Create (or re-create, when the pins changed) the TensorFlow venv; return its python."""
    py = os.path.join(TF_VENV, "bin", "python")
    stamp = os.path.join(TF_VENV, ".installed")
    want = "\n".join(TF_PINS) + "\n"
    if os.path.exists(py) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == want:
                return py
    base = os.environ.get("TF_PYTHON") or getattr(sys, "_base_executable", None) or sys.executable
    ver = subprocess.run([base, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    if ver not in ("3.10", "3.11", "3.12", "3.13"):
        sys.exit("make_tflite_fixtures: tensorflow-cpu 2.21 needs Python 3.10..3.13, %s is %s "
                 "(set TF_PYTHON to another interpreter)" % (base, ver))
    say("creating %s (Python %s, tensorflow-cpu 2.21.0 from PyPI; a minute or two) ..."
        % (os.path.relpath(TF_VENV, ROOT), ver))
    t0 = time.time()
    if os.path.exists(TF_VENV):
        shutil.rmtree(TF_VENV)
    subprocess.run([base, "-m", "venv", TF_VENV], check=True)
    pip = [py, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(pip + ["install", "--quiet", "--upgrade", "pip"], check=True)
    req = os.path.join(TF_VENV, "requirements.txt")
    with open(req, "w") as f:
        f.write(want)
    subprocess.run(pip + ["install", "--quiet", "--only-binary=:all:", "-r", req], check=True)
    with open(stamp, "w") as f:
        f.write(want)
    say("  %s ready in %.0f s" % (os.path.relpath(TF_VENV, ROOT), time.time() - t0))
    return py


def digits_handover(path):
    """Train the digits models unless train.py's cache is current (repo venv: torch), then write
    what the TF side needs: the train/test split as float NHWC pixel/16 with the test labels, and
    PyTorch's logits on the test images. Returns the directory of the .safetensors weights."""
    import numpy as np

    sys.path.insert(0, DIGITS)
    import train  # examples/digits/train.py

    out = train.OUT
    say("digits: examples/digits/train.py (trains unless its cache in %s is current) ..."
        % os.path.relpath(out, ROOT))
    train.main()
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    x_train, x_test, _, y_test = train.split()
    f = lambda x: (x.astype(np.float32) * train.INPUT_SCALE)[:, :, :, None]  # noqa: E731 NHWC
    arrays = {"x_train": f(x_train), "x_test": f(x_test), "y_test": y_test}
    for name in ("mlp", "cnn"):
        model = train.build(name)
        model.load_state_dict(load_file(os.path.join(out, name + ".safetensors")))
        model.eval()
        with torch.no_grad():
            nchw = torch.from_numpy(np.ascontiguousarray(arrays["x_test"].transpose(0, 3, 1, 2)))
            arrays["torch_" + name] = model(nchw).numpy()
    np.savez(path, **arrays)
    return out


def run_inner(py, outdir, names, handover, weights_dir, log_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update({
        "PYTHONHASHSEED": "0",
        "TF_CPP_MIN_LOG_LEVEL": "3",      # silence TF's C++ info/warning logs
        "TF_ENABLE_ONEDNN_OPTS": "0",     # plain Eigen kernels: same float results everywhere
        "CUDA_VISIBLE_DEVICES": "-1",
        "TF_NUM_INTEROP_THREADS": "1",
        "TF_NUM_INTRAOP_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "TF_DETERMINISTIC_OPS": "1",
        "KERAS_BACKEND": "tensorflow",
    })
    args = {"out": outdir, "names": names, "handover": handover, "weights": weights_dir}
    with open(log_path, "w") as log:
        # stdout (progress) goes straight through; TF's and the converter's chatter to the log.
        rc = subprocess.run([py, os.path.abspath(__file__), "--inner", json.dumps(args)],
                            env=env, stderr=log).returncode
    if rc:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        sys.exit("make_tflite_fixtures: the TensorFlow side failed (exit %d); the end of its "
                 "log:\n%s" % (rc, tail))


def digits_accuracy(tflm_ref, data, digits):
    """TFLM's accuracy on the held-out digits and its outputs; the inputs are quantized with the
    model's own input parameters where its input is int8."""
    import numpy as np

    ins, _ = tflm_ref.io_details(data)
    x = digits["x_test"]
    if ins[0]["dtype"] == np.int8:
        q = ins[0]["quantization_parameters"]
        x = np.clip(np.round(x / q["scales"][0]) + q["zero_points"][0], -128, 127).astype(np.int8)
    ys = tflm_ref.run(data, x)
    pred = np.array([int(np.argmax(y)) for y in ys])
    return float((pred == digits["y_test"]).mean()), np.array(ys)


def invoke_seconds(tflm_ref, data, x, repeat=5):
    """Best-of-`repeat` wall time in seconds of one TFLM invoke (on this host) for the sample x:
    the table's figure, for a reader's orientation (speed is compared in `make bench`)."""
    it = tflm_ref.ready(data, x)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        it.invoke()
        best = min(best, time.perf_counter() - t0)
    return best


def verify(outdir, names, full, digits=None):
    """Check every produced file with TFLM (tests/tflm_ref.py); print the table; return ok."""
    import numpy as np

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tflm_ref

    ok = True
    seen, standalone = set(), set()
    rows = []
    for name in names:
        path = os.path.join(outdir, name + ".tflite")
        data = open(path, "rb").read()
        ops = tflm_ref.ops(data)
        names_here = [o.name for o in ops]
        seen.update(names_here)
        standalone.update(names_here)
        seen.update(o.fused for o in ops if o.fused not in (None, "NONE"))
        x = tflm_ref.sample_inputs(data, 3, seed=SEED)
        try:
            y = tflm_ref.run(data, x)
            arena = tflm_ref.arena_bytes(data)
            rep = tflm_ref.allocation_report(data)
            secs = invoke_seconds(tflm_ref, data, x[0])
            status = "ok"
        except RuntimeError as e:  # e.g. an op TFLM lacks
            y, arena, rep, secs, status = None, None, {}, None, "TFLM: %s" % e
            if name not in REFUSED:
                ok = False
        if name == "hybrid_dynamic" and y is not None:
            status, ok = "TFLM runs it (expected a refusal)", False
        if y is not None and not all(np.all(np.isfinite(np.asarray(v, np.float64))) for v in y):
            status, ok = "non-finite output", False
        # A quantized fixture must be integer all the way: the converter leaves an op in float
        # (DEQUANTIZE ... QUANTIZE around it) when it can't quantize it, and that must not pass.
        mode = FIXTURES[name][1]
        if mode not in ("f32", "dynamic"):
            info = tflm_ref.tensors(data)
            outputs = [int(i) for i in tflm_ref.read_model(data).subgraphs[0].outputs]
            for o in ops:
                if o.name == "DEQUANTIZE" and mode == "float_io" or \
                        o.name == "QUANTIZE" and mode == "uint8_io" and o.outputs[0] in outputs or \
                        o.name in ("SHAPE", "STRIDED_SLICE", "PACK") and mode.endswith("_dynamic_batch"):
                    continue  # (a dynamic batch's shape arithmetic: int32)
                bad = [info[t].type for t in o.outputs if info[t].type != "INT8"
                       and (o.name, info[t].type) != ("VAR_HANDLE", "RESOURCE")]  # (a variable's handle)
                if bad:
                    status, ok = "%s #%d outputs %s" % (o.name, o.index, "/".join(bad)), False
        counts = {}
        for n in names_here:
            counts[n] = counts.get(n, 0) + 1
        fused = {}
        for o in ops:
            if o.fused not in (None, "NONE"):
                key = "%s+%s" % (o.name, o.fused)
                fused[key] = fused.get(key, 0) + 1
        if digits is not None and name.startswith("digits_") and y is not None:
            kind = name.split("_")[1]
            acc, ys = digits_accuracy(tflm_ref, data, digits)
            ref = float((digits["torch_" + kind].argmax(1) == digits["y_test"]).mean())
            status += ", digits accuracy %.2f%% (torch %.2f%%)" % (100 * acc, 100 * ref)
            if ys.dtype == np.float32:
                status += ", max |TFLM - torch| %.2g" % np.abs(ys - digits["torch_" + kind]).max()
            if acc < ref - 0.02:
                status, ok = status + " TOO LOW", False
        rows.append((name, len(data), arena, rep.get("head"), rep.get("tail"), secs, status,
                     counts, fused))
    say("")
    say("arena: smallest arena_size that works (bisection); head/tail: RecordingMicroAllocator's "
        "figures; invoke: one TFLM invoke on this host")
    say("%-27s %8s %8s %8s %8s %10s  %s" % ("fixture", "bytes", "arena", "head", "tail",
                                             "invoke ms", "TFLM"))
    total = 0
    for name, size, arena, head, tail, secs, status, counts, fused in rows:
        total += size
        say("%-27s %8d %8s %8s %8s %10s  %s" % (
            name + ".tflite", size, arena if arena is not None else "-",
            head if head is not None else "-", tail if tail is not None else "-",
            "%.3f" % (secs * 1e3) if secs is not None else "-", status))
    say("%-27s %8d" % ("total", total))
    say("")
    for name, _, _, _, _, _, _, counts, fused in rows:
        say("%s: %s" % (name, ", ".join("%s x%d" % kv for kv in sorted(counts.items()))))
        if fused:
            say("    fused: %s" % ", ".join("%s x%d" % kv for kv in sorted(fused.items())))
    if full:
        missing = [op for op in SUPPORTED_OPS if op not in seen]
        missing += ["standalone " + op for op in STANDALONE if op not in standalone]
        if missing:
            say("MISSING from every fixture: %s" % ", ".join(missing))
            ok = False
        else:
            say("every supported op appears (%s; standalone %s)"
                % (" ".join(SUPPORTED_OPS), " ".join(STANDALONE)))
        odd = sorted({n for n in tflm_ref.op_names(os.path.join(outdir, "unsupported_op.tflite"))
                      if n not in SUPPORTED_OPS})
        if odd:
            say("unsupported_op.tflite has ops outside the list: %s" % ", ".join(odd))
        else:
            say("unsupported_op.tflite has no op outside the list")
            ok = False
        for name in names:
            if name in REFUSED:
                continue
            extra = sorted(set(tflm_ref.op_names(os.path.join(outdir, name + ".tflite")))
                           - set(SUPPORTED_OPS))
            if extra:
                say("%s has ops outside the list: %s" % (name, ", ".join(extra)))
                ok = False
    return ok


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def outer(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help="output directory (default tests/golden/tflite)")
    ap.add_argument("--only", help="comma-separated fixture names (without .tflite)")
    ap.add_argument("--twice", action="store_true",
                    help="convert twice and report whether the bytes are identical")
    ap.add_argument("--no-verify", action="store_true", help="skip the TFLM checks")
    a = ap.parse_args(argv)
    names = list(FIXTURES)
    if a.only:
        names = [n.strip().removesuffix(".tflite") for n in a.only.split(",") if n.strip()]
        bad = [n for n in names if n not in FIXTURES]
        if bad:
            sys.exit("make_tflite_fixtures: unknown fixture(s) %s; known: %s"
                     % (", ".join(bad), ", ".join(FIXTURES)))
    t_start = time.time()
    py = ensure_tf_venv()
    work = tempfile.mkdtemp(prefix="tflite-fixtures-")
    try:
        handover = os.path.join(work, "digits.npz")
        weights = None
        if any(FIXTURES[n][0].startswith("digits") for n in names):
            say("digits: split, torch weights and torch logits (repo venv)")
            weights = digits_handover(handover)
        runs = 2 if a.twice else 1
        dirs = []
        for r in range(runs):
            d = os.path.join(work, "run%d" % r)
            os.makedirs(d)
            say("converting with TensorFlow (%s)%s ..." % (os.path.relpath(py, ROOT),
                                                           " [run %d of 2]" % (r + 1) if a.twice
                                                           else ""))
            t0 = time.time()
            run_inner(py, d, names, handover, weights, os.path.join(work, "tf%d.log" % r))
            say("  converted in %.0f s" % (time.time() - t0))
            dirs.append(d)
        if a.twice:
            same = [n for n in names if digest(os.path.join(dirs[0], n + ".tflite"))
                    == digest(os.path.join(dirs[1], n + ".tflite"))]
            diff = [n for n in names if n not in same]
            say("determinism: %d of %d fixtures byte-identical across the two runs%s"
                % (len(same), len(names), (" (differ: %s)" % ", ".join(diff)) if diff else ""))
        if not a.no_verify:
            import numpy as np

            digits = dict(np.load(handover)) if weights else None
            if not verify(dirs[0], names, full=(names == list(FIXTURES)), digits=digits):
                sys.exit("make_tflite_fixtures: verification failed; %s left unchanged" % a.out)
        os.makedirs(a.out, exist_ok=True)
        changed = 0
        files = [n + ".tflite" for n in names]
        files += sorted({SAMPLES[FIXTURES[n][0]] + ".npy" for n in names if FIXTURES[n][0] in SAMPLES})
        for f in files:
            src, dst = os.path.join(dirs[0], f), os.path.join(a.out, f)
            if os.path.exists(dst) and digest(dst) == digest(src):
                continue
            tmp = dst + ".tmp"
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
            changed += 1
        say("wrote %d file(s) to %s (%d changed) in %.0f s"
            % (len(files), os.path.relpath(a.out, ROOT), changed, time.time() - t_start))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# =========================================================================== inner (TF venv)

def inner(args):
    global _PROGRESS
    # Progress lines go to the real stdout; everything else written on fd 1 (Keras's export
    # printout "Saved artifact at ...", the converter's own lines) joins stderr, i.e. the log.
    _PROGRESS = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)

    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()
    keras = tf.keras
    L = keras.layers

    def fresh(seed):
        """Same names and seeds for a model whatever was built before it in this process."""
        keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        return np.random.default_rng(seed)

    def init_weights(model, rng, last_gain=1.0):
        """He-normal kernels (depthwise: fan-in kh*kw), small N(0, 0.05) biases, all seeded."""
        for layer in model.layers:
            if isinstance(layer, L.BatchNormalization):
                continue
            ws = layer.get_weights()
            if not ws:
                continue
            new = []
            for w in ws:
                if w.ndim >= 2:
                    if isinstance(layer, L.DepthwiseConv2D):
                        fan_in = w.shape[0] * w.shape[1]
                    else:
                        fan_in = int(np.prod(w.shape[:-1]))
                    new.append(rng.normal(0, np.sqrt(2.0 / fan_in), w.shape))
                else:
                    new.append(rng.normal(0, 0.05, w.shape))
            layer.set_weights([v.astype(np.float32) for v in new])

    def set_bn(model, rep, rng):
        """Give every BatchNormalization layer non-trivial seeded parameters that keep the
        activations well scaled through the depth: moving mean/variance near the statistics of
        the layer's actual input on the representative data (layer by layer, so each sees the
        already-set layers before it), gamma in [0.6, 1.4], beta ~ N(0.1, 0.2). Rounded to
        float16 precision so that float noise in the statistics does not reach the bytes."""
        for layer in model.layers:
            if not isinstance(layer, L.BatchNormalization):
                continue
            probe = keras.Model(model.inputs, layer.input)
            a = np.asarray(probe(rep, training=False), np.float64)
            a = a.reshape(-1, a.shape[-1])
            mean, var = a.mean(0), a.var(0)
            c = a.shape[-1]
            gamma = rng.uniform(0.6, 1.4, c)
            beta = rng.normal(0.1, 0.2, c)
            mmean = mean + rng.normal(0, 0.1, c) * np.sqrt(var)
            mvar = var * rng.uniform(0.8, 1.25, c) + 1e-3
            f16 = lambda v: v.astype(np.float16).astype(np.float32)  # noqa: E731
            layer.set_weights([f16(gamma), f16(beta), f16(mmean), f16(mvar)])

    def scale_logits(model, layer, rep, target=2.0):
        """Rescale a final Dense so its pre-softmax logits have std `target` (not saturated)."""
        probe = keras.Model(model.inputs, layer.output)
        act = layer.activation
        layer.activation = keras.activations.linear
        z = np.asarray(probe(rep, training=False), np.float64)
        layer.activation = act
        k, b = layer.get_weights()
        s = target / max(z.std(), 1e-6)
        k16 = (k * s).astype(np.float16).astype(np.float32)
        layer.set_weights([k16, (b * s).astype(np.float32)])

    def bn_relu(x, relu6=False):
        x = L.BatchNormalization()(x)
        return L.ReLU(6.0)(x) if relu6 else L.ReLU()(x)

    handover = np.load(args["handover"]) if args.get("handover") and os.path.exists(
        args["handover"]) else None

    # ------------------------------------------------------------- digits (trained weights)
    def digits(kind):
        from safetensors.numpy import load_file

        fresh(SEED)
        sd = load_file(os.path.join(args["weights"], kind + ".safetensors"))
        inp = keras.Input((8, 8, 1), name="pixels")
        if kind == "mlp":
            # torch: Flatten, Linear 64->128, ReLU, Linear 128->64, ReLU, Linear 64->10. With
            # one channel, Keras's H,W,C flatten order is torch's C,H,W order.
            x = L.Flatten()(inp)
            d1 = L.Dense(128, activation="relu")
            d2 = L.Dense(64, activation="relu")
            d3 = L.Dense(10)
            out = d3(d2(d1(x)))
            model = keras.Model(inp, out, name="digits_mlp")
            for layer, key in ((d1, "1"), (d2, "3"), (d3, "5")):
                layer.set_weights([sd[key + ".weight"].T, sd[key + ".bias"]])
        else:
            # torch: Conv 1->8 3x3 pad 1, ReLU, MaxPool 2, Conv 8->16 3x3 pad 1, ReLU, MaxPool 2,
            # Flatten (C,H,W), Linear 64->10.
            c1 = L.Conv2D(8, 3, padding="same", activation="relu")
            c2 = L.Conv2D(16, 3, padding="same", activation="relu")
            d = L.Dense(10)
            x = L.MaxPooling2D(2)(c1(inp))
            x = L.MaxPooling2D(2)(c2(x))
            out = d(L.Flatten()(x))
            model = keras.Model(inp, out, name="digits_cnn")
            for layer, key in ((c1, "0"), (c2, "3")):  # OIHW -> HWIO
                layer.set_weights([sd[key + ".weight"].transpose(2, 3, 1, 0), sd[key + ".bias"]])
            # Keras flattens the 2x2x16 map as (h, w, c), torch as (c, h, w): permute the
            # Linear's input columns instead of adding a transpose to the graph.
            w = sd["7.weight"].reshape(10, 16, 2, 2).transpose(2, 3, 1, 0).reshape(64, 10)
            d.set_weights([w, sd["7.bias"]])
        got = np.asarray(model(handover["x_test"], training=False))
        err = float(np.abs(got - handover["torch_" + kind]).max())
        say("  digits %s: Keras float vs torch, max |diff| %.2e over %d test images"
            % (kind, err, len(got)))
        if err > 1e-5:
            raise SystemExit("digits %s: the Keras copy does not match torch (%.3g)" % (kind, err))
        return model, handover["x_train"]

    # ------------------------------------------------------------- MLPerf Tiny architectures
    def kws():
        """DS-CNN (keyword spotting): 49x10x1 MFCC input, 12 classes."""
        rng = fresh(SEED + 1)
        inp = keras.Input((49, 10, 1), name="mfcc")
        x = L.Conv2D(64, (10, 4), strides=(2, 2), padding="same")(inp)
        x = bn_relu(x)
        for _ in range(4):
            x = L.DepthwiseConv2D((3, 3), padding="same")(x)
            x = bn_relu(x)
            x = L.Conv2D(64, (1, 1), padding="same")(x)
            x = bn_relu(x)
        x = L.AveragePooling2D(pool_size=(25, 5))(x)
        x = L.Flatten()(x)
        last = L.Dense(12, activation="softmax")
        model = keras.Model(inp, last(x), name="kws_ds_cnn")
        rep = rng.standard_normal((100, 49, 10, 1)).astype(np.float32)
        return model, rep, rng, last

    def vww():
        """MobileNetV1 alpha 0.25 (visual wake words): 96x96x3, 2 classes."""
        rng = fresh(SEED + 2)
        inp = keras.Input((96, 96, 3), name="image")
        x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(inp)
        x = bn_relu(x, relu6=True)
        for filters, stride in ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1),
                                (128, 1), (128, 1), (128, 1), (128, 1), (256, 2), (256, 1)):
            x = L.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)
            x = bn_relu(x, relu6=True)
            x = L.Conv2D(filters, 1, padding="same", use_bias=False)(x)
            x = bn_relu(x, relu6=True)
        x = L.GlobalAveragePooling2D()(x)
        last = L.Dense(2, activation="softmax")
        model = keras.Model(inp, last(x), name="vww_mobilenet_v1_025")
        rep = rng.uniform(0, 1, (100, 96, 96, 3)).astype(np.float32)
        return model, rep, rng, last

    def resnet8():
        """ResNet-8 (image classification, CIFAR-10): 32x32x3, 10 classes."""
        rng = fresh(SEED + 3)
        inp = keras.Input((32, 32, 3), name="image")
        x = L.Conv2D(16, 3, padding="same")(inp)
        x = bn_relu(x)
        for filters, stride in ((16, 1), (32, 2), (64, 2)):
            y = L.Conv2D(filters, 3, strides=stride, padding="same")(x)
            y = bn_relu(y)
            y = L.Conv2D(filters, 3, padding="same")(y)
            y = L.BatchNormalization()(y)
            if stride != 1:  # 1x1 convolution shortcut where the shape changes
                x = L.Conv2D(filters, 1, strides=stride, padding="same")(x)
            x = L.ReLU()(L.Add()([x, y]))
        x = L.AveragePooling2D(pool_size=8)(x)
        x = L.Flatten()(x)
        last = L.Dense(10, activation="softmax")
        model = keras.Model(inp, last(x), name="resnet8")
        rep = rng.uniform(0, 1, (100, 32, 32, 3)).astype(np.float32)
        return model, rep, rng, last

    def ad():
        """FC autoencoder (anomaly detection, ToyADMOS): 640 -> 128x4 -> 8 -> 128x4 -> 640."""
        rng = fresh(SEED + 4)
        inp = keras.Input((640,), name="features")
        x = inp
        for units in (128, 128, 128, 128, 8, 128, 128, 128, 128):
            x = bn_relu(L.Dense(units)(x))
        out = L.Dense(640)(x)
        model = keras.Model(inp, out, name="ad_autoencoder")
        rep = rng.standard_normal((100, 640)).astype(np.float32)
        return model, rep, rng, None

    # ------------------------------------------------------------- op coverage
    def ops():
        """One small graph whose int8 conversion holds every op of mpy-lazy's list, with fused
        activations on CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / ADD and standalone
        RELU, RELU6, TANH, LOGISTIC (placed after ops that have no fused activation)."""
        rng = fresh(SEED + 5)
        inp = keras.Input((8, 8, 4), name="x")
        a = L.Conv2D(8, 3, padding="same", activation="relu", name="conv_relu")(inp)
        b = L.DepthwiseConv2D(3, padding="same", activation="relu6", name="dw_relu6")(inp)
        b = L.Conv2D(8, 1, name="conv_1x1")(b)                          # CONV_2D, no activation
        s = L.Add(name="add")([a, b])                                    # ADD
        c = L.Concatenate(name="concat")([s, a])                         # CONCATENATION 8x8x16
        p = L.ZeroPadding2D(((1, 0), (0, 1)), name="pad")(c)             # PAD (asymmetric) 9x9x16
        r = L.ReLU(name="relu")(p)                                       # RELU after PAD
        r6 = L.ReLU(6.0, name="relu6")(p)                                # RELU6 after PAD
        m = L.MaxPooling2D(2, name="maxpool")(r)                         # MAX_POOL_2D 4x4x16
        v = L.AveragePooling2D(2, name="avgpool")(r6)                    # AVERAGE_POOL_2D 4x4x16
        g = L.Activation("sigmoid", name="sigmoid")(m)                   # LOGISTIC
        t = L.Activation("tanh", name="tanh")(v)                         # TANH
        mul = L.Multiply(name="mul")([g, L.Conv2D(16, 1, name="conv_gate")(t)])  # MUL 4x4x16
        mean = L.GlobalAveragePooling2D(name="mean")(mul)                # MEAN 16
        flat = L.Flatten(name="flatten")(m)                              # RESHAPE 256
        f = L.Dense(16, activation="relu", name="fc_relu")(flat)         # FULLY_CONNECTED+RELU
        h = L.Concatenate(name="concat2")([f, mean])                     # 32
        z = L.Dense(10, name="fc")(h)
        z = L.Reshape((2, 5), name="reshape")(z)                         # RESHAPE
        out = L.Softmax(name="softmax")(z)                               # SOFTMAX on the last axis
        model = keras.Model(inp, out, name="ops")
        rep = rng.standard_normal((100, 8, 8, 4)).astype(np.float32)
        return model, rep, rng, None

    def unsupported():
        """A tiny int8 graph with one op outside this script's list (SQUARED_DIFFERENCE: mpy-lazy
        runs it now; tests/host/test_tflite.py makes it a builtin TFLM lacks for the refusal)."""
        rng = fresh(SEED + 6)
        inp = keras.Input((8,), name="x")
        a = L.Dense(8, name="fc_a")(inp)
        b = L.Dense(8, name="fc_b")(inp)
        out = L.Lambda(lambda t: tf.math.squared_difference(t[0], t[1]),
                       output_shape=(8,), name="squared_difference")([a, b])
        model = keras.Model(inp, out, name="unsupported")
        rep = rng.standard_normal((100, 8)).astype(np.float32)
        return model, rep, rng, None

    def calib():
        """A digits-like float CNN (8x8x1 in, 10 logits out) for the float -> int8 comparison:
        conv+relu, maxpool, depthwise+relu6, 1x1 conv, add (residual), avgpool, flatten, dense.
        Its representative samples are saved next to it (calib_samples.npy)."""
        rng = fresh(SEED + 7)
        inp = keras.Input((8, 8, 1), name="pixels")
        c = L.Conv2D(8, 3, padding="same", activation="relu", name="conv")(inp)
        p = L.MaxPooling2D(2, name="maxpool")(c)                                # 4x4x8
        d = L.DepthwiseConv2D(3, padding="same", activation="relu6", name="dw")(p)
        e = L.Conv2D(8, 1, name="conv_1x1")(d)
        a = L.AveragePooling2D(2, name="avgpool")(L.Add(name="add")([p, e]))   # 2x2x8
        last = L.Dense(10, name="fc")
        model = keras.Model(inp, last(L.Flatten(name="flatten")(a)), name="calib")
        # digit-like inputs: dark background, a few bright strokes, in [0, 1]
        rep = np.clip(rng.normal(0, 0.1, (100, 8, 8, 1)) + (rng.uniform(0, 1, (100, 8, 8, 1)) > 0.7), 0, 1)
        return model, rep.astype(np.float32), rng, last

    def elem():
        """HARD_SWISH, MAXIMUM against a scalar, MINIMUM of two activations, PRELU with alpha per
        channel and per element (both signs), DIV by a LOGISTIC of a TANH (away from zero)."""
        rng = fresh(SEED + 8)
        inp = keras.Input((6, 6, 4), name="x")
        c = L.Conv2D(8, 3, padding="same", name="conv")(inp)
        hs = L.Activation("hard_swish", name="hard_swish")(c)
        mx = L.Lambda(lambda t: tf.maximum(t, -0.25), name="maximum")(hs)
        mn = L.Minimum(name="minimum")([mx, L.Conv2D(8, 1, name="conv_b")(inp)])
        p = L.PReLU(shared_axes=[1, 2], name="prelu_c")(mn)
        p = L.PReLU(name="prelu_hwc")(p)
        d = L.Activation("sigmoid", name="sigmoid")(L.Activation("tanh", name="tanh")(
            L.Conv2D(8, 1, name="conv_d")(inp)))
        out = L.Lambda(lambda z: z[0] / z[1], name="div")([p, d])
        model = keras.Model(inp, out, name="elem")
        rep = rng.standard_normal((100, 6, 6, 4)).astype(np.float32)
        return model, rep, rng, None

    def resize():
        """Every resize TFLM runs: bilinear and nearest, plain, align_corners, half_pixel_centers
        (Keras's Resizing and UpSampling2D: half pixel), up and down."""
        rng = fresh(SEED + 9)
        inp = keras.Input((6, 6, 4), name="x")
        x = L.Conv2D(4, 3, padding="same", name="conv")(inp)
        x = L.Resizing(5, 7, interpolation="bilinear", name="bilinear_half")(x)
        x = L.Resizing(9, 4, interpolation="nearest", name="nearest_half")(x)
        v1 = tf.compat.v1.image
        x = L.Lambda(lambda t: v1.resize_bilinear(t, (7, 9), align_corners=True), name="bilinear_corners")(x)
        x = L.Lambda(lambda t: v1.resize_nearest_neighbor(t, (11, 5), align_corners=True), name="nearest_corners")(x)
        x = L.Lambda(lambda t: v1.resize_nearest_neighbor(t, (4, 13)), name="nearest")(x)
        x = L.Lambda(lambda t: v1.resize_bilinear(t, (8, 3)), name="bilinear")(x)
        out = L.UpSampling2D(2, interpolation="bilinear", name="upsample")(x)
        model = keras.Model(inp, out, name="resize")
        rep = rng.standard_normal((100, 6, 6, 4)).astype(np.float32)
        return model, rep, rng, None

    def cast():
        """CAST through every integer type and back (float32 inputs of a few units: exact)."""
        rng = fresh(SEED + 10)
        inp = keras.Input((8,), name="x")
        c = tf.cast
        x = L.Lambda(lambda t: c(c(c(c(c(t, tf.int32), tf.int16), tf.int8), tf.int32), tf.float32), name="casts")(inp)
        out = L.Dense(4, name="fc")(L.Concatenate(name="concat")([x, inp]))
        model = keras.Model(inp, out, name="cast")
        rep = (4 * rng.standard_normal((100, 8))).astype(np.float32)
        return model, rep, rng, None

    def hybrid():
        """Dense layers whose weights the dynamic-range mode quantizes (>= 1024 of them)."""
        rng = fresh(SEED + 11)
        inp = keras.Input((64,), name="x")
        out = L.Dense(10, name="fc2")(L.Dense(64, activation="relu", name="fc1")(inp))
        model = keras.Model(inp, out, name="hybrid")
        return model, rng.standard_normal((100, 64)).astype(np.float32), rng, None

    def stream(mode):
        """The streaming model (tf.Module with a tf.Variable: Keras layers keep no state across
        calls) converted with resource variables; int8 quantizes the variable too."""
        rng = fresh(SEED + 12)

        class Stream(tf.Module):
            def __init__(self):
                self.frames = tf.Variable(np.full((1, 12), 0.25, np.float32), name="frames")
                self.w = tf.constant(rng.normal(0, 0.4, (16, 6)).astype(np.float32))
                self.b = tf.constant(rng.normal(0, 0.1, (6,)).astype(np.float32))

            @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
            def __call__(self, x):
                window = tf.concat([self.frames, x], axis=1)
                self.frames.assign(window[:, 4:])
                return tf.nn.relu(tf.matmul(window, self.w) + self.b)

        m = Stream()
        rep = rng.uniform(-1, 1, (100, 1, 4)).astype(np.float32)
        conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
        conv.experimental_enable_resource_variables = True
        if mode == "int8":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([x] for x in rep)
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
            conv._experimental_variable_quantization = True
        return conv.convert()

    def loop(mode):
        """A counted tf.while_loop: the converter's WHILE, a condition subgraph (LESS on the
        counter) and a body subgraph (the counter's ADD, FULLY_CONNECTED, ADD with RELU)."""
        rng = fresh(SEED + 13)
        w = tf.constant(rng.normal(0, 0.5, (4, 4)).astype(np.float32))

        class Loop(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
            def __call__(self, x):
                _, v = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.nn.relu(tf.matmul(v, w) + x)),
                                     (tf.constant(0), x))
                return v

        m = Loop()
        return tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m).convert()

    def cond(mode):
        """tf.cond on a condition computed from the input: the converter's IF (two subgraphs)."""
        rng = fresh(SEED + 14)
        w = tf.constant(rng.normal(0, 0.5, (8, 8)).astype(np.float32))

        class Cond(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
            def __call__(self, x):
                return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.nn.relu(tf.matmul(x, w)), lambda: tf.tanh(x) * 0.5)

        m = Cond()
        return tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m).convert()

    def while_(mode):
        """tf.while_loop whose trip count depends on the input: WHILE, its condition (REDUCE_MAX,
        LESS, LOGICAL_AND) computed on the board every iteration."""
        rng = fresh(SEED + 15)
        w = tf.constant(rng.normal(0, 0.5, (8, 8)).astype(np.float32))

        class While(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
            def __call__(self, x):
                _, v = tf.while_loop(lambda i, v: tf.logical_and(tf.reduce_max(v) < 4.0, i < 20),
                                     lambda i, v: (i + 1, tf.nn.relu(tf.matmul(v, w)) + 0.5 * v + 0.25),
                                     (tf.constant(0), x))
                return v

        m = While()
        return tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m).convert()

    modules = {"stream": stream, "loop": loop, "cond": cond, "while": while_}  # tf.Module models

    builders = {"kws": kws, "vww": vww, "resnet8": resnet8, "ad": ad, "ops": ops,
                "unsupported": unsupported, "calib": calib, "elem": elem, "resize": resize, "cast": cast,
                "hybrid": hybrid}

    def build(kind):
        if kind.startswith("digits_"):
            return digits(kind[len("digits_"):])
        model, rep, rng, last = builders[kind]()
        init_weights(model, rng)
        set_bn(model, rep, rng)
        if last is not None:
            scale_logits(model, last, rep)
        return model, rep

    def static_batch(model):
        """`model` re-wired on an input with the batch size fixed at 1 (the very same layers, so
        the same names and weights). With Keras 3 a Flatten on a dynamic batch converts to
        SHAPE + STRIDED_SLICE + PACK + RESHAPE; with batch 1 it is one RESHAPE with a constant
        shape (or nothing)."""
        keras.backend.clear_session()  # the same graph names whatever was converted before
        inputs = [keras.Input(batch_shape=(1,) + tuple(t.shape[1:]), dtype=t.dtype,
                              name=t.name) for t in model.inputs]
        return keras.models.clone_model(model, input_tensors=inputs[0] if len(inputs) == 1
                                        else inputs, clone_function=lambda layer: layer)

    def convert(model, rep, mode):
        dynamic = mode.endswith("_dynamic_batch")  # (as a Keras model is usually converted: Flatten
        mode = mode.removesuffix("_dynamic_batch")  # becomes SHAPE, STRIDED_SLICE, PACK, RESHAPE)
        conv = tf.lite.TFLiteConverter.from_keras_model(model if dynamic else static_batch(model))
        if mode == "dynamic":  # weights only: float activations, int8 weights (hybrid ops)
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
        elif mode != "f32":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([x[None].astype(np.float32)] for x in rep)
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            if mode == "int8":
                conv.inference_input_type = tf.int8
                conv.inference_output_type = tf.int8
            elif mode == "uint8_io":  # int8 inside, a uint8 input and output (QUANTIZE at each end)
                conv.inference_input_type = tf.uint8
                conv.inference_output_type = tf.uint8
        return conv.convert()

    say("  TensorFlow %s, Keras %s, numpy %s" % (tf.__version__, keras.__version__,
                                                 np.__version__))
    models = {}
    for name in args["names"]:
        kind, mode = FIXTURES[name]
        t0 = time.time()
        if kind in modules:
            data = modules[kind](mode)
            with open(os.path.join(args["out"], name + ".tflite"), "wb") as f:
                f.write(data)
            say("  %-27s %8d bytes  (%s, %.1f s)" % (name + ".tflite", len(data), mode, time.time() - t0))
            continue
        if kind not in models:
            models[kind] = build(kind)
        model, rep = models[kind]
        data = convert(model, rep, mode)
        with open(os.path.join(args["out"], name + ".tflite"), "wb") as f:
            f.write(data)
        if kind in SAMPLES:
            np.save(os.path.join(args["out"], SAMPLES[kind] + ".npy"), rep)
        say("  %-27s %8d bytes  (%s, %.1f s)" % (name + ".tflite", len(data), mode,
                                                  time.time() - t0))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        inner(json.loads(sys.argv[2]))
    else:
        outer(sys.argv[1:])
