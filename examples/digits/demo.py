"""`make demo`: train an MLP and a small CNN on scikit-learn's 8x8 digits (cached), export ONNX,
pack f32 / f16 / int8 / int8-per-channel containers with `mpy-lazy pack` (the layer description
comes from the ONNX graph), build a ROMFS image with `mpy-lazy romfs`, and run the held-out
test set on the `micropython` binary with the image mounted through vfs.VfsRom (run_board.py).

Prints each model x dtype's accuracy on the board next to PyTorch's, and the RAM report."""
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
DTYPES = (("f32", "none"), ("f16", "f16"), ("int8", "int8"), ("int8c", "int8-channel"))


def micropython(env_name="MICROPYTHON", default=None):
    exe = os.environ.get(env_name)
    if exe:
        return exe
    if default:
        return default
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    return here if os.path.exists(here) else "micropython"


def pack_all(progress):
    """Containers for every model x dtype plus the test set, and the ROMFS image of them."""
    import numpy as np

    files = []
    for name in train.MODELS:
        for label, quant in DTYPES:
            out = os.path.join(OUT, "%s-%s.mpyl" % (name, label))
            rc = cli.main(["pack", os.path.join(OUT, name + ".onnx"), "-o", out, "--quantize", quant,
                           "--meta", "model=%s" % name, "-q"])
            if rc:
                sys.exit("demo: packing %s failed" % out)
            files.append(out)
            progress.update(1)
    test = np.load(os.path.join(OUT, "test.npz"))
    npz = os.path.join(OUT, "test_set.npz")
    np.savez(npz, x=test["x"].reshape(len(test["y"]), -1), y=test["y"])
    out = os.path.join(OUT, "test.mpyl")
    if cli.main(["pack", npz, "-o", out, "--meta", "input_scale=%r" % train.INPUT_SCALE, "-q"]):
        sys.exit("demo: packing the test set failed")
    files.append(out)
    image = os.path.join(OUT, "digits.romfs")
    if cli.main(["romfs"] + files + ["-o", image, "-q"]):
        sys.exit("demo: building the ROMFS image failed")
    progress.update(1)
    return files, image


def run_board(exe, image, paths, heapsize=None):
    cmd = [exe] + (["-X", "heapsize=%s" % heapsize] if heapsize else [])
    cmd += [os.path.join(HERE, "run_board.py"), image] + list(paths)
    env = dict(os.environ, MICROPYPATH=ROOT + ":" + HERE + ":.frozen")
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode:
        sys.exit("demo: %s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout, time.time() - t


def parse(stdout):
    results, heap, reports = {}, {}, {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            _, cont, path, correct, n, ms = line.split()
            results[(cont, path)] = (int(correct), int(n), float(ms))
            current = None
        elif line.startswith("HEAP "):
            parts = line.split()
            heap[(parts[1], parts[2])] = dict(kv.split("=") for kv in parts[3:])
        elif line.startswith("REPORT "):
            current = line.split()[1]
            reports[current] = []
        elif current:
            reports[current].append(line)
    return results, heap, reports


def main():
    from tqdm import tqdm

    t0 = time.time()
    res = train.main(lambda total, desc: tqdm(total=total, desc=desc, unit="epoch"))
    with tqdm(total=len(train.MODELS) * len(DTYPES) + 1, desc="pack + romfs", unit="file") as bar:
        files, image = pack_all(bar)
    sizes = {os.path.basename(f)[:-5]: os.path.getsize(f) for f in files}
    print("ROMFS image %s: %d bytes, %d containers" % (os.path.relpath(image, ROOT),
                                                       os.path.getsize(image), len(files)))
    runs = [("micropython", micropython(), ["viper", "pure"])]
    ulab = os.environ.get("MICROPYTHON_ULAB")
    if ulab and os.path.exists(ulab):
        runs.append(("micropython+ulab", ulab, ["ulab"]))
    results, heap, reports = {}, {}, {}
    for label, exe, paths in runs:
        print("running the test set on %s (%s) ..." % (label, ", ".join(paths)))
        out, secs = run_board(exe, image, paths)
        r, h, rep = parse(out)
        results.update(r)
        heap.update(h)
        reports.update(rep)
        print("  %.1f s" % secs)
    paths = [p for (_c, p) in results]
    paths = [p for p in ("ulab", "viper", "pure") if p in paths]
    print()
    print("Held-out test set: %d images, every kernel path. Accuracy %%, ms per image on the "
          "MicroPython unix port." % res["n_test"])
    head = "%-6s %-6s %8s %7s" % ("model", "dtype", "bytes", "torch")
    for p in paths:
        head += " %8s %7s" % (p, "ms")
    head += "  %s" % "int8 vs f32"
    print(head)
    print("-" * len(head))
    failed = False
    for name in train.MODELS:
        f32 = results.get(("%s-f32" % name, "viper"))
        for label, _q in DTYPES:
            cont = "%s-%s" % (name, label)
            line = "%-6s %-6s %8d %7.2f" % (name, label, sizes[cont], 100 * res["torch_acc"][name])
            for p in paths:
                r = results.get((cont, p))
                line += " %8.2f %7.2f" % (100.0 * r[0] / r[1], r[2]) if r else " %8s %7s" % ("-", "-")
            r = results.get((cont, "viper"))
            if label.startswith("int8") and r and f32:
                drop = 100.0 * (f32[0] - r[0]) / f32[1]
                ok = drop <= 1.0
                failed |= not ok
                line += "  %+.2f pt %s" % (0.0 - drop, "ok" if ok else "MORE THAN 1 POINT")
            print(line)
    print()
    print("RAM on the board (heap bytes; model declaration + open + bind, then after the first forward pass):")
    for (cont, p), h in sorted(heap.items()):
        if p == "viper":
            print("  %-12s declare+open+bind %6s  with activation buffers %6s  (%s MACs/image)"
                  % (cont, h["open+bind"], h["after_forward"], h["macs"]))
    for cont in ("cnn-int8c",):
        if cont in reports:
            print()
            print("mpy_lazy.report() for %s:" % cont)
            for line in reports[cont]:
                print("  " + line)
    print()
    print("demo done in %.1f s" % (time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
