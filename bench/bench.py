"""`make bench`: one table, every figure measured in this run on the `micropython` binary (and on
$MICROPYTHON_ULAB for the ulab path when set).

    python bench/bench.py [--pack] [--quick]

Per model x dtype: weight bytes; heap held by the model's declaration (model.declare: layers and
Params, nothing bound: in a program this is the model's code), by open + bind (mpy_lazy.open and
m.load: the Container, one View per tensor; checked against the target on every row), by the first
forward pass (activation buffers, kernel scratch, weight caches) and in total after it (live);
heap allocated during one inference with the GC off
(the peak above the baseline; the unix port boxes every float, boards built with 32-bit floats
do not), inferences/s and MAC/s per kernel path. Then the targets (see docs/KERNELS.md) and
docs/heap_vs_weights.png. The unix port has no flash: the container bytes (read into RAM) stand
in for it and are not counted as heap used by mpy-lazy.
--pack also runs bench/pack_bench.py (packing MB/s and peak RSS, ~1 min)."""
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "build", "bench")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))

from demo import micropython  # noqa: E402  ($MICROPYTHON, else the venv's binary)
from host_tools import cli  # noqa: E402

DTYPES = (("f32", "none"), ("f16", "f16"), ("int8", "int8"), ("int8c", "int8-channel"))

# Runs on MicroPython. Prints one JSON line per measurement.
MEASURE = r"""
import gc, json, time, sys
import mpy_lazy
from mpy_lazy import model, nn

def timed(fn, budget_ms):
    n = 0
    t = time.ticks_us()
    while True:
        fn()
        n += 1
        dt = time.ticks_diff(time.ticks_us(), t)
        if dt >= budget_ms * 1000 or n >= 200:
            return n * 1e6 / dt

def one(path, paths, budget_ms):
    with open(path, 'rb') as f:
        buf = f.read()          # stands in for flash (ROMFS / frozen) on the unix port
    gc.collect()
    base = gc.mem_alloc()
    c = mpy_lazy.open(buf)
    gc.collect()
    a_open = gc.mem_alloc()
    m = model.declare(c)      # what model.from_container does: declare, then load
    gc.collect()
    a_decl = gc.mem_alloc()
    m.load(c)
    gc.collect()
    a_bind = gc.mem_alloc()
    n_in = 1
    for d in m.input_shape:
        n_in *= d
    x = [((i * 37) % 17) / 16.0 for i in range(n_in)]
    gc.collect()
    a_x = gc.mem_alloc()      # the input list (boxed floats on the unix port) is not the model's
    row = {'file': path.rsplit('/', 1)[-1], 'declare': a_decl - a_open,
           'bind': (a_open - base) + (a_bind - a_decl), 'macs': m.macs(),
           'weights': mpy_lazy.report(m, show=False)['flash']}
    for p in paths:
        nn.use(p)
        m(x)                      # first call: activation buffers, kernel scratch
        gc.collect()
        row['first_' + p] = gc.mem_alloc() - a_x
        row['live_' + p] = gc.mem_alloc() - a_x + a_bind - base
        gc.collect()
        a0 = gc.mem_alloc()
        gc.disable()
        try:
            m(x)
            row['peak_' + p] = gc.mem_alloc() - a0
        except MemoryError:
            row['peak_' + p] = -1
        gc.enable()
        row['ips_' + p] = timed(lambda: m(x), budget_ms)
    nn.free_scratch()
    print('ROW', json.dumps(row))

def cold(path):
    # the first open + load in a process also allocates a little once (interpreter caches):
    # measured here, so that every row below is measured the same way, after it
    with open(path, 'rb') as f:
        buf = f.read()
    gc.collect()
    a0 = gc.mem_alloc()
    c = mpy_lazy.open(buf)
    gc.collect()
    a1 = gc.mem_alloc()
    m = model.declare(c)
    gc.collect()
    a2 = gc.mem_alloc()
    m.load(c)
    gc.collect()
    print('COLD', json.dumps({'file': path.rsplit('/', 1)[-1], 'bind': a1 - a0 + gc.mem_alloc() - a2}))

cold(JOBS[0][0])
for path, paths, budget in JOBS:
    one(path, paths, budget)
"""

# viper int8 dense vs the pure-Python int8 loop on the same weights (the big MLP's first layer)
DENSE = r"""
import time, mpy_lazy
from mpy_lazy import nn
with open(%(path)r, 'rb') as f:
    buf = f.read()
c = mpy_lazy.open(buf)
w = nn.weight(c.view(%(name)r))
n_in = w.shape[1]
x = nn.act([((i * 37) %% 17) / 16.0 - 0.5 for i in range(n_in)])
out = nn.act([0.0] * w.shape[0])
res = {}
for p in %(paths)r:  # best single call of several: robust against a busy machine
    nn.use(p)
    nn.linear(x, w, out=out)
    best = None
    t_end = time.ticks_add(time.ticks_ms(), 1500)
    k = 0
    while k < 5 or (k < 200 and time.ticks_diff(t_end, time.ticks_ms()) > 0):
        t = time.ticks_us()
        nn.linear(x, w, out=out)
        dt = time.ticks_diff(time.ticks_us(), t)
        best = dt if best is None or dt < best else best
        k += 1
    res[p] = 1e6 / best
print('DENSE', res)
"""

# ulab: np.dot over a frombuffer view of the container vs over a RAM copy of the same weights
ULAB_VIEW = r"""
import time, mpy_lazy
from ulab import numpy as np
with open(%(path)r, 'rb') as f:
    buf = f.read()
c = mpy_lazy.open(buf)
v = c.view(%(name)r)
rows, cols = v.shape
flash = np.frombuffer(v.mv, dtype=np.int8).reshape((rows, cols))
ram = np.array(flash, dtype=np.int8)
x = np.array([((i * 37) %% 17) / 16.0 for i in range(cols)])
def best(a):  # best single call: robust against a busy machine
    b = None
    for _ in range(60):
        t = time.ticks_us()
        np.dot(a, x)
        dt = time.ticks_diff(time.ticks_us(), t)
        b = dt if b is None or dt < b else b
    return b
tf = min(best(flash), best(flash)); tr = min(best(ram), best(ram))
tf = min(tf, best(flash)); tr = min(tr, best(ram))
r1 = 1e6 / tf; r2 = 1e6 / tr
print('ULABVIEW', {'flash': r1, 'ram': r2})
"""

# heap needed to load weights of a given size: mpy-lazy (bind + first forward) vs naive
HEAP = r"""
import gc, struct, array, mpy_lazy
from mpy_lazy import model, nn
nn.use('viper')
for path, raw in %(files)r:
    with open(path, 'rb') as f:
        buf = f.read()
    gc.collect(); base = gc.mem_alloc()
    c = mpy_lazy.open(buf)
    m = model.from_container(c)
    m([0.5] * m.input_shape[0])
    gc.collect()
    lazy = gc.mem_alloc() - base
    del m, c, buf
    nn.free_scratch()
    gc.collect(); base = gc.mem_alloc()
    # naive: read the weights file into RAM, then build float arrays from it
    with open(raw, 'rb') as f:
        data = f.read()
    arrays = []
    off = 0
    for n in %(sizes)r[raw]:
        arrays.append(array.array('f', data[off:off + 4 * n]))
        off += 4 * n
    peak = gc.mem_alloc() - base
    del data
    gc.collect()
    print('HEAP', raw, lazy, peak, gc.mem_alloc() - base)
    del arrays
    gc.collect()
"""


def run_mpy(code, exe=None, heapsize=None, timeout=1200, root=ROOT):
    cmd = [exe or micropython()] + (["-X", "heapsize=%s" % heapsize] if heapsize else [])
    cmd += ["-c", "import sys\nsys.path.insert(0, %r)\n" % root + code]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r


def must(r, what):
    if r.returncode:
        sys.exit("bench: %s failed:\n%s%s" % (what, r.stdout, r.stderr))
    return r.stdout


def mlp_state(sizes, seed):
    rng = np.random.default_rng(seed)
    st = {}
    for i in range(len(sizes) - 1):
        st["fc%d.weight" % i] = (rng.standard_normal((sizes[i + 1], sizes[i])) / np.sqrt(sizes[i])).astype(np.float32)
        st["fc%d.bias" % i] = (0.1 * rng.standard_normal(sizes[i + 1])).astype(np.float32)
    text = ["input shape=%d" % sizes[0]]
    for i in range(len(sizes) - 1):
        text.append("linear w=fc%d.weight b=fc%d.bias in=%d out=%d" % (i, i, sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            text.append("relu")
    return st, "\n".join(text)


def pack_mlp(name, sizes, quant, seed=0):
    from safetensors.numpy import save_file

    st, text = mlp_state(sizes, seed)
    src = os.path.join(OUT, name + ".safetensors")
    if not os.path.exists(src):
        save_file(st, src)
    desc = os.path.join(OUT, name + ".layers")
    with open(desc, "w") as f:
        f.write(text)
    out = os.path.join(OUT, "%s-%s.mpyl" % (name, quant[0]))
    if cli.main(["pack", src, "-o", out, "--quantize", quant[1], "--layers", desc, "-q"]):
        sys.exit("bench: pack %s failed" % out)
    return out, st


def fmt_rate(v):
    if v is None:
        return "-"
    return "%.0f" % v if v >= 100 else ("%.1f" % v if v >= 1 else "%.2f" % v)


def fmt_si(v):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return "%.1f%s" % (v / div, unit)
    return "%.0f" % v


def main():
    quick = "--quick" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    import train

    train.main()  # cached by `make demo`
    jobs = []
    big = (256, 1024, 256, 10)  # 2.1 MB of f32 weights
    files = {}
    for name in train.MODELS:
        for label, q in DTYPES:
            out = os.path.join(OUT, "%s-%s.mpyl" % (name, label))
            if cli.main(["pack", os.path.join(train.OUT, name + ".onnx"), "-o", out, "--quantize", q, "-q"]):
                sys.exit("bench: pack failed")
            files[(name, label)] = out
    for dt in DTYPES:
        files[("mlp-big", dt[0])] = pack_mlp("mlp-big", big, dt)[0]
    ulab = os.environ.get("MICROPYTHON_ULAB")
    ulab = ulab if ulab and os.path.exists(ulab) else None

    # 1. per model x dtype on the stock binary (viper, pure) and the ulab binary (ulab)
    rows = {}
    for exe, paths in ((None, ["viper", "pure"]), (ulab, ["ulab"])):
        if exe is None and paths == ["ulab"]:
            continue
        jobs = [(files[k], paths, 150 if quick else 400) for k in sorted(files)]
        out = must(run_mpy(MEASURE.replace("JOBS", repr(jobs)), exe, heapsize="16m"), "measure")
        for line in out.splitlines():
            if line.startswith("ROW "):
                r = json.loads(line[4:])
                rows.setdefault(r["file"], {}).update(r)
            elif line.startswith("COLD ") and exe is None:
                cold = json.loads(line[5:])

    # 2. targets
    targets = []
    for r in rows.values():
        r["limit"] = r["weights"] // 100 + 2048
    worst = max(rows.values(), key=lambda r: r["bind"] / r["limit"])
    misses = [r["file"] for r in rows.values() if r["bind"] > r["limit"]]
    targets.append(("open+bind heap <= 1%% weights + 2 KB, every model x dtype (%d rows)" % len(rows),
                    "closest: %s %d B of %d B%s" % (worst["file"], worst["bind"], worst["limit"],
                                                    "; MISS: " + ", ".join(misses) if misses else ""),
                    not misses))
    # Heap = image + the runtime's code + headroom. On the unix port the runtime's bytecode
    # (precompiled .mpy, tools/build_mpy.py) is loaded into the heap; on a board it is frozen in
    # flash. That cost is measured and added; 2% more covers the GC's own allocation table.
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import build_mpy

    mpy_root = os.path.join(OUT, "mpy")
    build_mpy.build(mpy_root)
    code = must(run_mpy("import gc\ngc.collect(); a = gc.mem_alloc()\nimport mpy_lazy\n"
                        "from mpy_lazy import model, nn\ngc.collect(); print('CODE', gc.mem_alloc() - a)",
                        root=mpy_root), "import cost")
    code = int(code.split("CODE ", 1)[1])
    for label, ratio in (("f32", 8), ("int8", 8)):
        path = files[("mlp-big", label)]
        size = os.path.getsize(path)
        w = rows["mlp-big-%s.mpyl" % label]["weights"]
        headroom = w // ratio
        heap = int((size + code + headroom) / 0.98)
        # the image buffer is allocated first, at its exact size, and filled in place
        r = run_mpy("b = bytearray(%d)\nf = open(%r, 'rb'); f.readinto(b); f.close()\nimport mpy_lazy\n"
                    "from mpy_lazy import model\nm = model.from_container(mpy_lazy.open(b))\n"
                    "print('PRED', m.predict([0.25] * 256))\n" % (size, path), heapsize=heap, root=mpy_root)
        ok = r.returncode == 0 and "PRED" in r.stdout
        targets.append(("weights >= 8x heap headroom run (mlp-big %s, -X heapsize=%d)" % (label, heap),
                        "%d B weights / %d B headroom = %.1fx (+ image, + %d B runtime code)"
                        % (w, headroom, w / headroom, code), ok))
    dense = must(run_mpy(DENSE % {"path": files[("mlp-big", "int8")], "name": "fc0.weight",
                                  "paths": ["viper", "pure"]}), "dense")
    d = eval(dense.split("DENSE ", 1)[1])
    ratio = d["viper"] / d["pure"]
    targets.append(("viper int8 dense >= 30x pure int8 (1024x256 layer, best call)",
                    "%.0f vs %.1f calls/s = %.0fx" % (d["viper"], d["pure"], ratio), ratio >= 30))
    if ulab:
        u = must(run_mpy(ULAB_VIEW % {"path": files[("mlp-big", "int8")], "name": "fc0.weight"}, ulab), "ulab view")
        u = eval(u.split("ULABVIEW ", 1)[1])
        slow = u["ram"] / u["flash"]
        targets.append(("ulab dot over flash view within 1.1x of RAM copy (int8 1024x256)",
                        "%.0f vs %.0f calls/s = %.2fx" % (u["flash"], u["ram"], slow), slow <= 1.1))
    else:
        targets.append(("ulab dot over flash view within 1.1x of RAM copy", "skipped: MICROPYTHON_ULAB not set", None))

    # 3. heap vs weight size plot
    heap_points = heap_plot(quick)

    # 4. table
    paths = ["viper", "pure"] + (["ulab"] if ulab else [])
    print()
    print("mpy-lazy bench, MicroPython unix port %s%s" % (
        subprocess.run([micropython(), "-c", "import sys; print(sys.version.split(';')[1].strip())"],
                       capture_output=True, text=True).stdout.strip(), " + ulab" if ulab else ""))
    head = "%-7s %-5s %9s %8s %9s %6s %13s %9s %7s %9s" % (
        "model", "dtype", "weights", "declare", "open+bind", "%", "<=1%+2KB", "first inf", "live", "peak/inf")
    for p in paths:
        head += " %8s" % ("%s/s" % p)
    for p in paths:
        head += " %8s" % ("MAC/s %s" % p[:2])
    print(head)
    print("-" * len(head))
    for name in ("mlp", "cnn", "mlp-big"):
        for label, _q in DTYPES:
            r = rows["%s-%s.mpyl" % (name, label)]
            line = "%-7s %-5s %9d %8d %9d %6.2f %13s %9d %7d %9s" % (
                name, label, r["weights"], r["declare"], r["bind"], 100.0 * r["bind"] / r["weights"],
                "[%s] %d" % ("ok" if r["bind"] <= r["limit"] else "MISS", r["limit"]),
                r["first_viper"], r["live_viper"], r["peak_viper"] if r["peak_viper"] >= 0 else ">heap")
            for p in paths:
                line += " %8s" % fmt_rate(r.get("ips_" + p))
            for p in paths:
                v = r.get("ips_" + p)
                line += " %8s" % (fmt_si(v * r["macs"]) if v else "-")
            print(line)
    print("weights: tensor bytes read in place; declare: heap held by the model declaration (layers,")
    print("Params; nothing bound); open+bind: heap for mpy_lazy.open + load into the declared model,")
    print("[ok]/[MISS] against 1% of weights + 2 KB (the limit shown); first inf: heap the first")
    print("forward pass keeps (activation buffers, kernel scratch, weight caches); live: all of it after")
    print("a forward pass; peak/inf: heap allocated by one viper-path inference with the GC off (the")
    print("unix port boxes floats: an upper bound). Unix port x64: objects are ~2x a 32-bit board's.")
    r = rows[cold["file"]]
    print("The first open+bind in a process allocates %d B more, once (%s: %d B cold; %s)." % (
        cold["bind"] - r["bind"], cold["file"], cold["bind"],
        "within its limit of %d B" % r["limit"] if cold["bind"] <= r["limit"] else
        "MISSES its limit of %d B" % r["limit"]))
    print()
    print("Targets:")
    failed = False
    for what, detail, ok in targets:
        failed |= ok is False
        print("  [%s] %-70s %s" % ({True: "ok", False: "FAIL", None: "--"}[ok], what, detail))
    print()
    print("heap vs weights (viper path, bytes): weights, mpy-lazy heap, naive peak heap")
    for w, lazy, naive in heap_points:
        print("  %9d %9d %9d" % (w, lazy, naive))
    print("plot: docs/heap_vs_weights.png")
    if "--pack" in sys.argv:
        sys.path.insert(0, HERE)
        import pack_bench

        print()
        pack_bench.run()
    print("bench done in %.0f s" % (time.time() - t0))
    return 1 if failed else 0


def heap_plot(quick):
    """Heap to run MLPs of growing size: mpy-lazy (in place) vs naive (read + build arrays)."""
    points = []
    specs = [(64, 64, 10), (128, 256, 10), (256, 512, 64, 10), (256, 1024, 256, 10)]
    if not quick:
        specs.insert(2, (256, 256, 64, 10))
        specs.append((512, 1024, 512, 10))
    files = []
    sizes = {}
    for i, spec in enumerate(specs):
        path, st = pack_mlp("heap-" + "x".join(map(str, spec)), spec, ("f32", "none"), seed=i)
        raw = path[:-len("-f32.mpyl")] + ".f32"
        with open(raw, "wb") as f:
            for k in sorted(st):
                f.write(st[k].tobytes())
        sizes[raw] = [st[k].size for k in sorted(st)]
        files.append((path, raw))
    out = must(run_mpy(HEAP % {"files": files, "sizes": sizes}, heapsize="64m"), "heap plot")
    by_raw = {}
    for line in out.splitlines():
        if line.startswith("HEAP "):
            _, raw, lazy, peak, _after = line.split()
            by_raw[raw] = (int(lazy), int(peak))
    for path, raw in files:
        w = os.path.getsize(raw)
        points.append((w, by_raw[raw][0], by_raw[raw][1]))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ws = [p[0] / 1024 for p in points]
    ax.plot(ws, [p[2] / 1024 for p in points], "o-", label="naive: read file + build arrays (peak)")
    ax.plot(ws, [p[1] / 1024 for p in points], "s-", label="mpy-lazy: open + bind + forward")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("f32 weight bytes (KiB)")
    ax.set_ylabel("heap used (KiB)")
    ax.set_title("MicroPython heap vs model size (MLPs, unix port)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out_png = os.path.join(ROOT, "docs", "heap_vs_weights.png")
    fig.savefig(out_png + ".tmp.png")
    os.replace(out_png + ".tmp.png", out_png)
    return points


if __name__ == "__main__":
    sys.exit(main())
