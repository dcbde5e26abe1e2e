"""Packing benchmark: throughput and peak RSS of `mpy-lazy pack` on a >= 200 MB safetensors file.

    python bench/pack_bench.py [--mb 256] [--repeat 3]

`run()` returns rows (dicts) and prints a table; bench/bench.py calls it. Each pack runs in a
child process whose own peak RSS comes from os.wait4. Targets: >= 200 MB/s, peak RSS <= largest
tensor + 64 MB."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
MODES = ("none", "int8-channel")

CHILD = """
import json, sys, time
sys.path.insert(0, %(root)r)
from host_tools.pack import pack
mode = %(mode)r
t = time.perf_counter()
if mode:
    pack([%(src)r], %(out)r, quantize=mode, quiet=True)
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def make_input(path, total_mb=256):
    """A transformer-ish state dict: one embedding (1/4 of the bytes), square layers, biases."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    d = 2048
    emb_rows = max(1, total_mb * MiB // 4 // (4 * d))
    tensors = {"embed.weight": rng.standard_normal((emb_rows, d), dtype=np.float32)}
    layers = max(1, (total_mb * MiB - emb_rows * d * 4) // (4 * d * d))
    for i in range(layers):
        tensors["layers.%d.weight" % i] = rng.standard_normal((d, d), dtype=np.float32) * 0.02
        tensors["layers.%d.bias" % i] = rng.standard_normal(d, dtype=np.float32)
    save_file(tensors, path)
    return sum(t.nbytes for t in tensors.values()), max(t.nbytes for t in tensors.values())


def _child(src, out, mode):
    """Run one pack in a fresh interpreter; (seconds inside pack, peak RSS bytes of that child)."""
    code = CHILD % {"root": ROOT, "src": src, "out": out, "mode": mode}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    stdout = p.stdout.read()
    _pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("pack child failed (%s)" % mode)
    return json.loads(stdout)["seconds"], usage.ru_maxrss * 1024  # Linux reports KiB


def run(total_mb=256, show=True, repeat=1):
    """Pack the input with each mode, `repeat` times (the modes interleaved); a row per mode
    with the median time (and its min/max) and the largest peak RSS."""
    import statistics

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "model.safetensors")
        # made in a child: a forked child's peak RSS would include this process's pages
        code = "import sys; sys.path.insert(0, %r); import pack_bench as b; print(*b.make_input(%r, %d))" % (
            os.path.dirname(os.path.abspath(__file__)), src, total_mb)
        total, largest = map(int, subprocess.check_output([sys.executable, "-c", code]).split())
        _secs, base_rss = _child(src, None, None)  # interpreter + imports, no packing
        runs = {mode: [] for mode in MODES}
        out_mb = {}
        for _ in range(max(1, repeat)):
            for mode in MODES:
                out = os.path.join(tmp, "model-%s.mpyl" % mode)
                runs[mode].append(_child(src, out, mode))
                out_mb[mode] = os.path.getsize(out) / MiB
                os.unlink(out)
        for mode in MODES:
            secs = [r[0] for r in runs[mode]]
            seconds = statistics.median(secs)
            rss = max(r[1] for r in runs[mode])
            rows.append({"bench": "pack", "mode": mode, "input_mb": total / MiB,
                         "output_mb": out_mb[mode], "seconds": seconds, "seconds_min": min(secs),
                         "seconds_max": max(secs), "repeat": len(secs),
                         "mb_per_s": total / MiB / seconds, "peak_rss_mb": rss / MiB,
                         "baseline_rss_mb": base_rss / MiB, "largest_tensor_mb": largest / MiB,
                         "rss_target_mb": largest / MiB + 64,
                         "ok": total / MiB / seconds >= 200 and rss <= largest + 64 * MiB})
    if show:
        print("pack benchmark: %.0f MB safetensors input, largest tensor %.0f MB, "
              "interpreter+imports %.0f MB RSS; median of %d runs per mode (s: min..max)"
              % (total / MiB, largest / MiB, base_rss / MiB, rows[0]["repeat"]))
        print("%-13s %9s %8s %13s %9s %13s %13s  %s" % ("mode", "out MB", "s", "min..max", "MB/s",
                                                       "peak RSS MB", "target MB", "targets met"))
        for r in rows:
            print("%-13s %9.1f %8.2f %13s %9.0f %13.0f %13.0f  %s" % (
                r["mode"], r["output_mb"], r["seconds"], "%.2f..%.2f" % (r["seconds_min"], r["seconds_max"]),
                r["mb_per_s"], r["peak_rss_mb"], r["rss_target_mb"], "yes" if r["ok"] else "NO"))
    return rows


if __name__ == "__main__":
    mb = int(sys.argv[sys.argv.index("--mb") + 1]) if "--mb" in sys.argv else 256
    rep = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    run(mb, repeat=rep)
