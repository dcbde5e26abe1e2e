"""The reader's work against the file size on the MicroPython unix port (issue 13): the hostile
containers of tests/runtime/rt_hostile.py at two sizes 16x apart, each run as many times as it
takes to go through as many bytes as the largest once, so linear work takes the same time per
byte at both sizes (quadratic work 16x more). `make test` counts the same work on CPython
(traced lines, tests/runtime/test_linear_open.py); MicroPython has no tracer, so its figure is a
time, measured here and never asserted in a test (a busy machine would fail it).

    .venv/bin/python bench/linear.py        (make bench runs it)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIMIT = 4.0  # largest size's time per byte <= LIMIT x the smallest's (quadratic: 16x)

CODE = r"""
import sys, gc, time
sys.path[:0] = [%(root)r, %(tests)r]
import mpy_lazy
from mpy_lazy import ContainerError, model
import rt_hostile as A

def share(n): return A.shared_value(n, True)
def names(n): return A.shared_names(n, True, True)
def many(n): return A.many_tensors(n, True)

def meta(buf):
    c = mpy_lazy.open(buf)
    c.meta

def declare(buf):
    model.declare(mpy_lazy.open(buf))

CASES = (("metadata sharing one value", share, mpy_lazy.open, (50, 800)),
         ("names sharing a run of characters", names, mpy_lazy.open, (50, 800)),
         ("tensors in reversed data order", many, mpy_lazy.open, (100, 1600)),
         ("distinct metadata, c.meta", A.distinct_meta, meta, (50, 800)),
         ("graph of n relu ops, declare", A.long_graph, declare, (25, 400)))

def timed(use, buf, reps):
    gc.collect()
    t0 = time.ticks_us()
    for _ in range(reps):
        try:
            use(buf)
        except ContainerError:
            pass
    return time.ticks_diff(time.ticks_us(), t0)

for name, build, use, ns in CASES:
    bufs = [build(n) for n in ns]
    sizes = [len(b) for b in bufs]
    reps = [max(1, sizes[-1] // s) for s in sizes]
    best = [None, None]
    for _ in range(5):
        for i in range(2):
            t = timed(use, bufs[i], reps[i])
            best[i] = t if best[i] is None or t < best[i] else best[i]
    per = [1000 * best[i] / (reps[i] * sizes[i]) for i in range(2)]
    print("ROW|%%s|%%d|%%d|%%.2f|%%.2f" %% (name, sizes[0], sizes[1], per[0], per[1]))
"""


def run(exe):
    """[(case, small bytes, large bytes, ns per byte small, ns per byte large)]."""
    code = CODE % {"root": ROOT, "tests": os.path.join(ROOT, "tests", "runtime")}
    r = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("bench/linear.py: micropython failed: %s" % (r.stderr or r.stdout)[-2000:])
    rows = []
    for line in r.stdout.splitlines():
        if line.startswith("ROW|"):
            _, name, s0, s1, p0, p1 = line.split("|")
            rows.append((name, int(s0), int(s1), float(p0), float(p1)))
    return rows


def report(rows):
    """Print the table; True when every case is within LIMIT."""
    print("reader work vs file size on the MicroPython unix port (time per byte, best of 5; linear: equal)")
    print("%-36s %8s %8s %10s %10s %7s" % ("case", "small B", "large B", "ns/B small", "ns/B large", "ratio"))
    ok = True
    for name, s0, s1, p0, p1 in rows:
        ratio = p1 / p0 if p0 else 0.0
        ok &= ratio <= LIMIT
        print("%-36s %8d %8d %10.2f %10.2f %6.2fx" % (name, s0, s1, p0, p1, ratio))
    return ok


def main():
    sys.path.insert(0, HERE)
    from bench import micropython

    return 0 if report(run(micropython())) else 1


if __name__ == "__main__":
    sys.exit(main())
