"""`make demo`: train an MLP and a small CNN on scikit-learn's 8x8 digits (cached), export ONNX
with torch's default (dynamo) exporter, pack each model as f32, f16 and int8 (the integer
pipeline, calibrated on training images) plus its TensorFlow Lite int8 twin (the committed
fixture tests/golden/tflite/digits_<model>_int8.tflite), put every container in one ROMFS image
(`mpy-lazy romfs`), mount it with vfs.VfsRom on the `micropython` binary and run the 360 held-out
images there on every kernel path (run_board.py). TFLM (tflite_micro, CPython) runs the same
.tflite files on the same int8 inputs, for comparison.

Prints one table (accuracy and ms per image per path, container bytes, arena, heap allocated per
inference) and the RAM report of one int8 model. Exit status 1 when an int8 model loses more than
1 point of accuracy against its f32 model."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import train  # noqa: E402
from host_tools import cli  # noqa: E402

OUT = train.OUT
FIXTURES = os.path.join(ROOT, "tests", "golden", "tflite")
# container label -> pack arguments (model.onnx is the input unless the label is "tflite")
DTYPES = (("f32", ["--quantize", "none"]), ("f16", ["--quantize", "f16"]),
          ("int8", ["--quantize", "int8", "--calibrate", os.path.join(OUT, "calib.npy")]),
          ("tflite", []))
LABEL = {"tflite": "tflite-int8"}  # how the table names a container's dtype
HEAPSIZE = "16m"  # the float paths of the unix port box every float: room for the per-inference count


def micropython(env_name="MICROPYTHON", default=None):
    exe = os.environ.get(env_name)
    if exe:
        return exe
    if default:
        return default
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    return here if os.path.exists(here) else "micropython"


def fixture(name):
    return os.path.join(FIXTURES, "digits_%s_int8.tflite" % name)


def pack_all(progress):
    """Containers for every model x dtype plus the test set, and the ROMFS image of them."""
    import numpy as np

    files = []
    for name in train.MODELS:
        for label, args in DTYPES:
            out = os.path.join(OUT, "%s-%s.mpyl" % (name, label))
            src = fixture(name) if label == "tflite" else os.path.join(OUT, name + ".onnx")
            if cli.main(["pack", src, "-o", out, "--meta", "model=%s" % name, "-q"] + args):
                sys.exit("demo: packing %s failed" % out)
            files.append(out)
            progress.update(1)
    test = np.load(os.path.join(OUT, "test.npz"))
    npz = os.path.join(OUT, "test_set.npz")
    np.savez(npz, x=test["x"].reshape(len(test["y"]), -1), y=test["y"])
    out = os.path.join(OUT, "test.mpyl")
    if cli.main(["pack", npz, "-o", out, "--weights-only", "--meta", "input_scale=%r" % train.INPUT_SCALE,
                 "-q"]):
        sys.exit("demo: packing the test set failed")
    files.append(out)
    image = os.path.join(OUT, "digits.romfs")
    if cli.main(["romfs"] + files + ["-o", image, "-q"]):
        sys.exit("demo: building the ROMFS image failed")
    progress.update(1)
    return files, image


def run_board(exe, image, paths, heapsize=HEAPSIZE):
    cmd = [exe] + (["-X", "heapsize=%s" % heapsize] if heapsize else [])
    cmd += [os.path.join(HERE, "run_board.py"), image] + list(paths)
    env = dict(os.environ, MICROPYPATH=ROOT + ":" + HERE + ":.frozen")
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode:
        sys.exit("demo: %s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout, time.time() - t


def parse(stdout):
    """(results, heap, reports) from run_board.py's output: results[(container, path)] =
    (correct, n, ms/image); heap[(container, path)] = {key: value str}; reports[container] =
    the lines of mpy_lazy.report()."""
    results, heap, reports, _, _ = parse_all(stdout)
    return results, heap, reports


def parse_all(stdout):
    """parse() plus preds[(container, path)] (a str of digits, one per image) and
    luts[container] (the 17 input values the board used for pixels 0..16)."""
    results, heap, reports, preds, luts = {}, {}, {}, {}, {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            _, cont, path, correct, n, ms = line.split()
            results[(cont, path)] = (int(correct), int(n), float(ms))
            current = None
        elif line.startswith("HEAP "):
            parts = line.split()
            heap[(parts[1], parts[2])] = dict(kv.split("=") for kv in parts[3:])
        elif line.startswith("PRED "):
            parts = line.split()
            preds[(parts[1], parts[2])] = parts[3] if len(parts) > 3 else ""
        elif line.startswith("LUT "):
            parts = line.split()
            luts[parts[1]] = [float(v) if "." in v else int(v) for v in parts[2:]]
        elif line.startswith("REPORT "):
            current = line.split()[1]
            reports[current] = []
        elif line.startswith("END "):
            current = None
        elif current:
            reports[current].append(line)
    return results, heap, reports, preds, luts


def same_weights(name):
    """Whether the .tflite fixture holds our trained weights (out/<name>.safetensors, int8
    quantized): for every torch weight, the fixture's int8 tensor with the same output channels
    and size, per output channel its dequantized values sorted against the torch values sorted
    (layout-free: TFLite keeps the output channel first, as torch does) within half a
    quantization step. Returns (bool, worst error in steps)."""
    import numpy as np
    import tflm_ref
    from safetensors.numpy import load_file

    path = fixture(name)
    m = tflm_ref.read_model(path)
    consts = []
    for t in tflm_ref.tensors(m):
        if t.is_const and t.type == "INT8" and len(t.shape) >= 2:
            q = np.frombuffer(np.asarray(m.buffers[t.buffer].data, np.uint8).tobytes(), np.int8)
            consts.append((q.reshape(t.shape[0], -1).astype(np.float64), t.scales.astype(np.float64)))
    worst = 0.0
    for key, w in load_file(os.path.join(OUT, name + ".safetensors")).items():
        if not key.endswith(".weight"):
            continue
        w = w.reshape(w.shape[0], -1).astype(np.float64)
        match = [(q, s) for q, s in consts if q.shape == w.shape]
        if len(match) != 1:
            return False, float("inf")
        q, s = match[0]
        s = s if len(s) == len(q) else np.full(len(q), s[0])
        err = np.abs(np.sort(q * s[:, None], 1) - np.sort(w, 1)) / s[:, None]
        worst = max(worst, float(err.max()))
    return worst <= 0.5 + 1e-3, worst


def tflm_check(name, lut):
    """TFLM on the 360 test images, int8 inputs from the board's own table `lut` (pixel ->
    int8): (accuracy, predictions str) or (None, reason)."""
    import numpy as np

    try:
        import tflm_ref
    except ImportError as e:
        return None, "tflite_micro not importable (%s)" % e
    test = np.load(os.path.join(OUT, "test.npz"))
    x = np.asarray(lut, np.int64)[test["x"].astype(np.int64)].astype(np.int8)[..., None]  # N,8,8,1
    ys = tflm_ref.run(fixture(name), x)
    pred = np.array([int(np.argmax(y)) for y in ys])
    return float((pred == test["y"]).mean()), "".join(str(p) for p in pred)


def main():
    from tqdm import tqdm

    t0 = time.time()
    sys.path.insert(0, os.path.join(ROOT, "tests"))  # tflm_ref
    res = train.main(lambda total, desc: tqdm(total=total, desc=desc, unit="epoch"))
    t_train = time.time() - t0
    with tqdm(total=len(train.MODELS) * len(DTYPES) + 1, desc="pack + romfs", unit="file") as bar:
        files, image = pack_all(bar)
    sizes = {os.path.basename(f)[:-5]: os.path.getsize(f) for f in files}
    print("trained%s + exported in %.1f s; ONNX (dynamo exporter) vs torch on the test images: max |diff| %s"
          % ("" if res.get("trained") else " (cached)", t_train,
             ", ".join("%s %.1e" % (n, res["onnx_max_abs"][n]) for n in train.MODELS)))
    print("ROMFS image %s: %d bytes, %d containers" % (os.path.relpath(image, ROOT),
                                                       os.path.getsize(image), len(files)))
    runs = [("micropython", micropython(), ["viper", "pure"])]
    ulab = os.environ.get("MICROPYTHON_ULAB")
    if ulab and os.path.exists(ulab):
        runs.append(("micropython+ulab", ulab, ["ulab"]))
    results, heap, reports, preds, luts = {}, {}, {}, {}, {}
    for label, exe, paths in runs:
        print("running the test set on %s (%s) ..." % (label, ", ".join(paths)), end=" ", flush=True)
        out, secs = run_board(exe, image, paths)
        r, h, rep, p, lu = parse_all(out)
        results.update(r)
        heap.update(h)
        reports.update(rep)
        preds.update(p)
        luts.update(lu)
        print("%.1f s" % secs)
    paths = [p for p in ("viper", "pure", "ulab") if any(k[1] == p for k in results)]

    # TFLM on the same .tflite files and the same int8 inputs; do they hold our weights?
    tflm, same = {}, {}
    for name in train.MODELS:
        try:
            same[name] = same_weights(name)
        except ImportError as e:
            same[name] = (None, str(e))
        acc, pred = tflm_check(name, luts["%s-tflite" % name])
        tflm[name] = (acc, pred)

    n_test = res["n_test"]
    print()
    print("Held-out test set: %d images on the MicroPython unix port (x64), every kernel path: accuracy %%"
          % n_test)
    print("and ms per image. TFLM: TensorFlow Lite Micro's accuracy on the same .tflite and inputs (CPython).")
    head = "%-5s %-11s %7s %6s %6s" % ("model", "dtype", "bytes", "torch", "TFLM")
    for p in paths:
        head += " %6s %6s" % (p, "ms")
    head += " %6s %7s" % ("arena", "scratch")
    for p in paths:
        head += " %9s" % ("B/inf " + p[:2])
    head += "  int8 vs f32"
    print(head)
    print("-" * len(head))
    failed = False
    notes = []
    for name in train.MODELS:
        f32 = results.get(("%s-f32" % name, "viper"))
        for label, _args in DTYPES:
            cont = "%s-%s" % (name, label)
            torch_acc = "%.2f" % (100 * res["torch_acc"][name])
            tfl = "-"
            if label == "tflite":
                if same[name][0] is not True:
                    torch_acc = "-"  # another model's weights: no torch figure to compare with
                if tflm[name][0] is not None:
                    tfl = "%.2f" % (100 * tflm[name][0])
            line = "%-5s %-11s %7d %6s %6s" % (name, LABEL.get(label, label), sizes[cont], torch_acc, tfl)
            for p in paths:
                r = results.get((cont, p))
                line += " %6.2f %6.2f" % (100.0 * r[0] / r[1], r[2]) if r else " %6s %6s" % ("-", "-")
            h = heap.get((cont, "viper")) or heap.get((cont, paths[0]))
            line += " %6s %7s" % (h["arena"], h["scratch"])
            for p in paths:
                hp = heap.get((cont, p))
                v = int(hp["per_inf"]) if hp else None
                line += " %9s" % ("-" if v is None else (">heap" if v < 0 else v))
            r = results.get((cont, "viper"))
            if label in ("int8", "tflite") and r and f32:
                if label == "tflite" and same[name][0] is not True:
                    line += "  n/a (other weights)"
                else:
                    diff = 100.0 * (r[0] - f32[0]) / f32[1]
                    ok = diff >= -1.0
                    failed |= not ok
                    line += "  %+.2f pt [%s]" % (diff, "ok" if ok else "FAIL: more than 1 point")
            print(line)
    print("bytes: the container (in flash on a board); torch: PyTorch's accuracy with the same weights;")
    print("arena/scratch: activation and kernel scratch bytes (planned once); B/inf: heap allocated by one")
    print("inference with the GC off (input fill + forward + argmax; the unix port boxes every float,")
    print("so float models allocate there; 32-bit-float boards box none).")
    print()
    int8_in = luts.get("%s-int8" % train.MODELS[0])
    print("Input: pixel p (0..16) -> p/16 for f32/f16 models; for int8 models p/16 quantized with the model's")
    print("own input (scale, zero point), round half away from zero (as TFLite's QUANTIZE), saturated: a 17-entry")
    print("table per model, written straight into m.input (no allocation); e.g. %s-int8: %s" % (
        train.MODELS[0], " ".join(str(v) for v in int8_in) if int8_in else "-"))
    print()
    print("Checks:")
    for name in train.MODELS:
        ok, worst = same[name]
        if ok is None:
            print("  %s: fixture weights not checked (%s)" % (name, worst))
        else:
            print("  %s: %s holds %s (per channel, sorted: within %.3f quantization steps of %s.safetensors)"
                  % (name, os.path.relpath(fixture(name), ROOT),
                     "our trained weights" if ok else "OTHER weights than this training run",
                     worst, name))
            if not ok:
                notes.append("%s: the fixture was made from other weights (another torch or CPU?): its "
                             "accuracy is not comparable with this run's torch/f32 rows" % name)
        for label in ("int8", "tflite"):
            cont = "%s-%s" % (name, label)
            got = [(p, preds.get((cont, p))) for p in paths if preds.get((cont, p)) is not None]
            same_all = len({g for _p, g in got}) == 1
            failed |= not same_all
            print("  %s: predictions identical on %s: %s" % (cont, ", ".join(p for p, _ in got),
                                                              "yes" if same_all else "NO"))
        acc, tpred = tflm[name]
        ours = preds.get(("%s-tflite" % name, "viper"))
        if acc is None:
            print("  %s-tflite vs TFLM: skipped (%s)" % (name, tpred))
        elif ours is not None:
            agree = sum(a == b for a, b in zip(ours, tpred))
            failed |= agree != len(tpred)
            print("  %s-tflite vs TFLM: same prediction on %d of %d images [%s]" % (
                name, agree, len(tpred), "ok" if agree == len(tpred) else "FAIL"))
    for n in notes:
        print("  NOTE " + n)
    print()
    print("RAM on the board (heap bytes, viper path): declare+bind = mpy_lazy.open + model.declare + load")
    print("(every weight a flash view); live = all the model keeps after its first forward pass (adds the")
    print("arena, scratch and the ops' kernel parameters). Measured after a warm-up (run_board.warm_up).")
    print("  %-12s %12s %8s %8s %8s %10s" % ("container", "declare+bind", "live", "arena", "scratch", "MACs/image"))
    for name in train.MODELS:
        for label, _a in DTYPES:
            cont = "%s-%s" % (name, label)
            h = heap.get((cont, "viper"))
            if h:
                print("  %-12s %12s %8s %8s %8s %10s" % (cont, h["open+bind"], h["after_forward"],
                                                         h["arena"], h["scratch"], h["macs"]))
    for cont in ("cnn-int8",):
        if cont in reports:
            print()
            print("mpy_lazy.report(m) for %s on the board:" % cont)
            for line in reports[cont]:
                print("  " + line)
    print()
    print("demo done in %.1f s" % (time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
