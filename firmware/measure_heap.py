"""Heap a model takes on an emulated 32-bit board, against `mpy-lazy inspect`'s estimate.

For each container (the digits demo's models, the golden graphs, the .tflite fixtures packed,
or the files given), one fresh boot of the board: import the runtime and every op module, then,
gc.collect() before each figure,

  open      gc.mem_alloc() delta of mpy_lazy.open('/rom/<name>')
  model     + model.from_container(c): declare, bind, plan + allocate the arena, prepare
  first     + one forward pass on the default kernel path (ulab's float scratch is made here)

and prints them with the model's counts (ops, values, bound tensors, description bytes), the
arena and float scratch (m.memory()) and host_tools.inspect's estimate of the same total;
--fit prints the least-squares constants of `first - arena - scratch - open` over the counts,
which is where inspect.HEAP_* come from.

    python firmware/measure_heap.py [--board MPS2_AN385|MICROBIT|rp2] [--build-dir DIR] [--fit] [FILE.mpyl ...]
"""
import argparse
import glob
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BOARD_CODE = """
import gc
import mpy_lazy
from mpy_lazy import model, kinds
# the modules a model runs with (every room of kinds.ROOM and the graph path's), imported before
# any figure: imported during one, their objects would count and stay scattered through the heap
# (the free heap then in pieces)
for _m in set(kinds.ROOM.split() + ['reshape', 'concat', 'pad', 'slice', 'const']) - {'-'}:
    __import__('mpy_lazy.ops.' + _m)
for _m in ('program', 'check', 'kernels', '_arith', '_viper', '_thumb', '_nd', '_viper_elem', '_viper_recurrent',
           '_viper_reduce', '_viper_signal'):
    try:
        __import__('mpy_lazy.' + _m)
    except ImportError:  # (a port without it)
        pass
def measure(name):
    gc.collect()
    a0 = gc.mem_alloc()
    c = mpy_lazy.open('/rom/' + name)
    gc.collect()
    a1 = gc.mem_alloc()
    try:
        m = model.from_container(c)
    except MemoryError as e:
        print('NOHEAP', repr((name, str(e), gc.mem_free())))
        return False
    gc.collect()
    a2 = gc.mem_alloc()
    m(None)
    gc.collect()
    a3 = gc.mem_alloc()
    mem = m.memory()
    print('HEAP', repr((name, a1 - a0, a2 - a1, a3 - a2, mem['arena'], mem['scratch'], gc.mem_free())))
    return True
_keep = []
def _fits(name, free):
    # blocks take all the free heap but `free` bytes (the biggest first, then the holes: the
    # heap of a board that has run a while is in pieces, and one block of all but `free` bytes
    # measured that, not the model), then open + from_container + one forward pass
    gc.collect()
    size = gc.mem_free() - free
    ok = True
    c = m = None
    try:
        while size > 64:
            try:
                _keep.append(bytearray(size - 32))
            except MemoryError:
                size //= 2
                continue
            size = gc.mem_free() - free
        c = mpy_lazy.open('/rom/' + name)
        m = model.from_container(c)
        m(None)
    except (MemoryError, mpy_lazy.ContainerError):  # (the arena checked against the free heap)
        ok = False
    c = m = None
    del _keep[:]
    gc.collect()
    return ok
def min_free(name, hi):
    # the least free heap (to 64 bytes) that loads and runs the model
    lo = 0
    if not _fits(name, hi):
        print('MINFREE', repr((name, -1)))
        return
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if _fits(name, mid):
            hi = mid
        else:
            lo = mid
    print('MINFREE', repr((name, hi)))
"""


def default_files(workdir):
    """The containers measured by default: digits demo models, golden graphs, .tflite fixtures."""
    from host_tools import cli

    files = sorted(glob.glob(os.path.join(ROOT, "examples", "digits", "out", "*-*.mpyl")))
    files += sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "graph_*.mpyl")))
    for tfl in sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "tflite", "*.tflite"))):
        if "unsupported" in tfl:
            continue
        out = os.path.join(workdir, os.path.basename(tfl)[:-7] + ".mpyl")
        if cli.main(["pack", tfl, "-o", out, "-q"]) == 0:
            files.append(out)
    return files


def host_figures(path):
    from host_tools import inspect

    c, _buf = inspect.open_container(path)
    return inspect.graph_report(c)


def run(board, build_dir, files, timeout, log, min_free=False):
    from firmware.qemu_run import Qemu, romfs_image

    image_files = [(os.path.basename(p), open(p, "rb").read()) for p in files]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        image = os.path.join(tmp, "heap.romfs")
        with open(image, "wb") as f:
            f.write(romfs_image(image_files))
        call = "if measure(%r):\n    min_free(%r, gc.mem_free() - 4096)\n" if min_free else "measure(%r)\n"
        calls = [call.replace("%r", repr(name)) for name, _ in image_files]
        if board == "rp2":
            from firmware import rp2_run

            uf2 = os.environ.get("MPY_LAZY_RP2_UF2") or os.path.join(build_dir, "rp2", "firmware.uf2")
            pico = rp2_run.Pico(uf2, tmp)
            for i, call in enumerate(calls):  # one boot per model
                log("  %s ..." % call.split("'")[1])
                paths = []
                for j, code in enumerate((BOARD_CODE, call)):
                    p = os.path.join(tmp, "s%d_%d.py" % (i, j))
                    with open(p, "w") as f:
                        f.write(code)
                    paths.append(p)
                rc, results, err = pico.run(paths, image, timeout)
                if rc or any(r.get("err") for r in results):
                    raise SystemExit("rp2040js: %s %s" % (err.strip()[-500:], results))
                out.append("".join(r.get("out", "") for r in results))
        else:
            firmware = os.path.join(build_dir, "qemu-%s" % board, "firmware.elf")
            for call in calls:
                log("  %s ..." % call.split("'")[1])
                with Qemu(firmware, board, romfs=image, timeout=60) as q:
                    q.exec(BOARD_CODE)
                    out.append(q.exec(call, timeout=timeout))
    rows = {}
    for line in "\n".join(out).splitlines():
        if line.startswith("HEAP "):
            name, opened, model, first, arena, scratch, free = eval(line[5:])
            rows[name] = {"open": opened, "model": model, "first": first, "arena": arena,
                          "scratch": scratch, "free": free}
        elif line.startswith("MINFREE "):
            name, need = eval(line[8:])
            if name in rows:
                rows[name]["min_free"] = need
        elif line.startswith("NOHEAP "):
            log("  %s: does not fit: %s (%d bytes free)" % eval(line[7:]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--board", default="MPS2_AN385", choices=["MPS2_AN385", "MICROBIT", "rp2"])
    ap.add_argument("--build-dir", default=os.environ.get("BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--min-free", action="store_true", help="also search the least free heap that loads and "
                    "runs each model")
    ap.add_argument("--fit", action="store_true", help="print least-squares constants for the estimates")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as work:
        files = args.files or default_files(work)
        measured = run(args.board, args.build_dir, files, args.timeout, log, args.min_free)
        host = {os.path.basename(p): host_figures(p) for p in files}
    rows = []
    print("%-24s %4s %6s  %6s %7s %6s %7s  %7s %7s %7s %5s  %8s %8s %5s"
          % ("container", "ops", "params", "open", "model", "first", "kept", "arena", "scratch", "objects",
             "est", "min free", "est", ""))
    for name in sorted(measured):
        m, h = measured[name], host[name]
        kept = m["open"] + m["model"] + m["first"]
        objects = kept - m["arena"] - m["scratch"] - h["heap"]["f16_decoded"]
        assert (m["arena"], m["scratch"]) == (h["arena"], h["scratch"]), (name, m, h)
        row = dict(name=name, ops=h["ops_count"], params=h["params_count"], kept=kept, objects=objects,
                   est_objects=h["heap"]["objects"], est_free=h["heap"]["free"], f16=h["heap"]["f16_decoded"], **m)
        rows.append(row)
        need = m.get("min_free")
        print("%-24s %4d %6d  %6d %7d %6d %7d  %7d %7d %7d %+4.0f%%  %8s %8d %s"
              % (name, row["ops"], row["params"], m["open"], m["model"], m["first"], kept, m["arena"],
                 m["scratch"], objects, 100.0 * (row["est_objects"] - objects) / objects,
                 need if need else "-", row["est_free"],
                 "%+4.0f%%" % (100.0 * (row["est_free"] - need) / need) if need else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.fit:
        import numpy as np

        def fit(key, target):
            a = np.array([[1, r["ops"], r["params"]] for r in rows if target(r)], float)
            y = np.array([target(r) for r in rows if target(r)], float)
            coef, *_ = np.linalg.lstsq(a, y, rcond=None)
            err = np.max(np.abs(a @ coef - y) / y)
            print("%s = %.0f + %.0f/op + %.0f/tensor: max error %.1f%%" % ((key,) + tuple(coef) + (100 * err,)))

        fit("objects (HEAP_*)", lambda r: r["objects"])
        if args.min_free:
            fit("min free - arena - scratch - f16 (LOAD_*)",
                lambda r: r.get("min_free", 0) > 0 and r["min_free"] - r["arena"] - r["scratch"] - r["f16"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
