"""Low memory on the MicroPython unix port (docs/RELIABILITY.md): opening a container, declaring,
binding and preparing a graph model and one inference either succeed or fail cleanly
(MemoryError; or, from prepare(), the ContainerError that refuses an arena larger than the free
heap), and everything stays usable: the failed step, retried on the same objects once there is
room, gives the right answer.

The runtime is imported as .mpy files (tools/build_mpy.py), as a board would have it frozen.
Models: a float MLP packed from weights with a graph description, and an int8 MLP (int8 ops,
TFLite Micro arithmetic); their answers are checked against numpy and host_tools.reference."""
import os
import sys

import numpy as np
import pytest

from conftest import run_micropython
from host_util import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import build_mpy  # noqa: E402

FLOAT_GRAPH = """input y=x shape=64
linear x=x y=h w=fc1.weight b=fc1.bias out=32 act=relu
linear x=h y=o w=fc2.weight b=fc2.bias out=10
softmax x=o y=p
output x=p
"""

INT8_GRAPH = """input y=x shape=64 dtype=i8 q=0.05,-4
linear x=x y=h w=fc1.w b=fc1.b m=fc1.m out=32 q=0.1,-128 clamp=-128,127
linear x=h y=o w=fc2.w b=fc2.b m=fc2.m out=10 q=0.2,3
softmax x=o y=p q=0.00390625,-128 t=sm.t
output x=p
"""

X_FLOAT = [(i % 7) * 0.25 - 0.75 for i in range(64)]
X_INT8 = [(i * 37) % 256 - 128 for i in range(64)]

PIPELINE = """
import gc, sys
sys.path.insert(0, %(mpy)r)
import mpy_lazy
from mpy_lazy import model, kernels, ContainerError
from binascii import crc32
INPUTS = %(inputs)r


def fill(leave):
    # Take the whole heap except one hole of `leave` bytes: the hole is allocated first, the
    # rest is filled down to the last block, then the hole is dropped (the next allocation
    # that does not fit collects it). The parts are kept in slots allocated up front: a list
    # grown part by part finds no room for itself in a fragmented heap before the heap is full,
    # and the filling stopped there, leaving room.
    gc.collect()
    hole = bytearray(leave) if leave else None
    slots = [None] * 4096
    n = 0
    size = 1 << 20
    while size >= 16 and n < len(slots):
        try:
            slots[n] = bytearray(size)
            n += 1
        except MemoryError:
            size //= 2
    try:  # the last single blocks: one boxed float each
        while n < len(slots):
            slots[n] = n + 0.5
            n += 1
    except MemoryError:
        pass
    assert gc.mem_free() == 0, ("fill left room", leave, n, gc.mem_free())
    hole = None
    return slots
"""

BALLAST = PIPELINE + """
STAGES = ("open", "declare", "load", "prepare", "infer", "read", "done")


def steps(buf, x, objs, start):
    # run the pipeline from stage `start` on the objects in objs (c, m); returns y
    for stage in STAGES[STAGES.index(start):]:
        objs[0] = stage
        if stage == "open":
            objs[1] = mpy_lazy.open(buf)
        elif stage == "declare":
            objs[2] = model.declare(objs[1])
        elif stage == "load":
            objs[2].load(objs[1])
        elif stage == "prepare":
            objs[2].prepare()
        elif stage == "infer":
            objs[2](x)
        elif stage == "read":
            objs[3] = objs[2].tolist()
    return objs[3]


def largest():
    # the largest block the heap can give now
    gc.collect()
    lo, hi = 0, gc.mem_free()
    while hi - lo > 16:
        mid = (lo + hi) // 2
        try:
            bytearray(mid)
            lo = mid
        except MemoryError:
            hi = mid
    return lo


def run(path, kernel, buf, ref, step, limit):
    kernels.use(kernel)
    crc = crc32(buf)
    x = INPUTS[path]
    objs = ["open", None, None, None]
    assert steps(buf, x, objs, "open") == ref  # with room: what use() resets is made again
    objs = None
    failed = {"none": 0, "prepare-refused": 0}
    for stage in STAGES:
        failed[stage] = 0
    # Nothing made in a round outlives it (a failed step leaks nothing; the conservative GC
    # may keep a few stale blocks): every round starts from this heap, so the hole fits in each
    # if it fits here, wherever the paths' strings (the checkout, the temporary directory,
    # HOME's ~/.micropython/lib) put the runtime.
    room = largest()
    assert room >= limit, ("no room for the sweep", room, limit)
    gc.collect()
    free = gc.mem_free()
    for leave in range(0, limit, step):
        gc.collect()
        assert free - gc.mem_free() < 1024, ("leak", path, kernel, leave, free, gc.mem_free())
        objs = ["open", None, None, None]
        ballast = fill(leave)
        how = None
        try:
            steps(buf, x, objs, "open")
        except MemoryError:
            how = "MemoryError"
        except ContainerError as e:  # prepare() refusing an arena larger than the free heap
            if objs[0] != "prepare" or e.field != "graph" or "heap" not in str(e):
                raise
            how = "refused"
        ballast = None
        gc.collect()
        stage = objs[0]
        if how:  # retry what failed, on the same objects, now with room
            steps(buf, x, objs, stage)
            failed[stage] += 1
            if how == "refused":
                failed["prepare-refused"] += 1
        else:
            failed["none"] += 1
        assert objs[3] == ref, (path, kernel, leave, stage, objs[3], ref)
        assert objs[1].verify() == len(objs[1]) and crc32(buf) == crc
        objs = None
    print("FAILED-AT", path.rsplit("/", 1)[1], kernel, sorted(kv for kv in failed.items() if kv[1]))
    print("Y", path.rsplit("/", 1)[1], kernel, ref)
    print("ROOM", path.rsplit("/", 1)[1], kernel, room, free)


# Every case once with room before any sweep: the runtime's one-time allocations (modules
# imported on first use, interned names) are made here, not inside some round's hole.
CASES = []
for path in %(paths)r:
    buf = bytearray(open(path, "rb").read())
    for kernel in ("viper", "pure"):
        kernels.use(kernel)
        CASES.append((path, kernel, buf, steps(buf, INPUTS[path], ["open", None, None, None], "open")))
for case in CASES:
    run(*case, %(step)d, %(limit)d)
print("BALLAST-OK")
"""

FRESH = """
import sys
sys.path.insert(0, %(mpy)r)
print("STAGE import")
import mpy_lazy
from mpy_lazy import model
print("STAGE open")
c = mpy_lazy.open(open(%(path)r, "rb").read())
print("STAGE bind")
m = model.declare(c)
m.load(c)
print("STAGE prepare")
m.prepare()
print("STAGE infer")
m(%(x)r)
y = m.tolist()
print("STAGE done")
print("Y", y)
"""


def _int8_tensors():
    """An int8 MLP with TFLite Micro's parameters (multipliers from the scales)."""
    from host_tools import tflm

    rng = np.random.default_rng(3)
    t = {}
    s_in, s_h, s_o = 0.05, 0.1, 0.2
    for name, (n_out, n_in), s_x, s_y in (("fc1", (32, 64), s_in, s_h), ("fc2", (10, 32), s_h, s_o)):
        t[name + ".w"] = rng.integers(-127, 128, (n_out, n_in)).astype(np.int8)
        t[name + ".b"] = rng.integers(-2000, 2000, n_out).astype(np.int32)
        w_scales = [0.004 + 0.002 * (i % 3) for i in range(n_out)]
        pairs = [tflm.quantize_multiplier(s_x * ws / s_y) for ws in w_scales]
        t[name + ".m"] = np.array([[p[0] for p in pairs], [p[1] for p in pairs]], dtype=np.int32)
    t["sm.t"] = np.array(tflm.softmax_table(s_o), dtype=np.int32)
    return t


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from safetensors.numpy import save_file

    from host_tools.cli import main

    d = tmp_path_factory.mktemp("lowmem")
    rng = np.random.default_rng(0)
    fl = {"fc1.weight": (0.2 * rng.standard_normal((32, 64))).astype(np.float32),
          "fc1.bias": (0.1 * rng.standard_normal(32)).astype(np.float32),
          "fc2.weight": (0.3 * rng.standard_normal((10, 32))).astype(np.float32),
          "fc2.bias": (0.1 * rng.standard_normal(10)).astype(np.float32)}
    save_file(fl, str(d / "mlp.safetensors"))
    (d / "mlp.graph").write_text(FLOAT_GRAPH)
    float_path = str(d / "mlp-float.mpyl")
    assert main(["pack", str(d / "mlp.safetensors"), "-o", float_path, "--graph", str(d / "mlp.graph"), "-q"]) == 0
    it = _int8_tensors()
    np.savez(str(d / "mlp8.npz"), **it)
    (d / "mlp8.graph").write_text(INT8_GRAPH)
    int8_path = str(d / "mlp-int8.mpyl")
    assert main(["pack", str(d / "mlp8.npz"), "-o", int8_path, "--graph", str(d / "mlp8.graph"), "-q"]) == 0
    build_mpy.build(str(d / "mpy"))
    # the answers, from numpy (float) and host_tools.reference (int8)
    from host_tools import reference

    x = np.array(X_FLOAT, dtype=np.float32).astype(np.float64)
    h = np.maximum(fl["fc1.weight"].astype(np.float64) @ x + fl["fc1.bias"], 0)
    o = fl["fc2.weight"].astype(np.float64) @ h + fl["fc2.bias"]
    e = np.exp(o - o.max())
    want_int8 = [int(v) for v in reference.run(INT8_GRAPH, it, np.array(X_INT8))[0].reshape(-1)]
    return {"mpy": str(d / "mpy"), "paths": [float_path, int8_path],
            "inputs": {float_path: X_FLOAT, int8_path: X_INT8},
            "want": {float_path: e / e.sum(), int8_path: want_int8}}


def _check_answer(files, path, y):
    want = files["want"][path]
    if path.endswith("int8.mpyl"):
        assert y == want, (y, want)
    else:
        assert np.allclose(y, want, rtol=1e-5, atol=1e-6), (y, want)


def test_memory_error_at_any_point_leaves_everything_usable(files):
    """A ballast leaves a hole of 0..16000 bytes (128-byte steps): open, declare, load, prepare
    and the inference each fail for some sizes and succeed for larger; after each failure the
    ballast is freed and the step retried on the same objects: the result equals the
    reference (itself checked against numpy / host_tools.reference), every CRC still checks
    and the container bytes are unchanged. An int8 forward pass on viper allocates nothing:
    it never fails. Every case runs once with room before the sweep, nothing made in a round
    outlives it (checked: the free heap returns to within 1 KB, the GC's stale blocks), the
    512K heap leaves the hole far more room than it needs (checked before the sweep) and the
    ballast leaves not one free block besides the hole (checked each round): the sweep does
    not depend on how long the checkout's, the temporary directory's or HOME's paths are
    (tests/host/test_paths.py runs it from several)."""
    sweep(files, step=128)


def sweep(files, step, root=ROOT, home=None):
    """Run the ballast sweep on `files` (the fixture's dict) and check its outcomes."""
    args = dict(files, step=step, limit=16000)
    r = run_micropython(BALLAST % args, heapsize="512K", timeout=300, root=root, home=home)
    assert r.returncode == 0 and "BALLAST-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("FAILED-AT")]
    assert len(lines) == 4, r.stdout
    for line in lines:
        for stage in ("'open'", "'declare'", "'prepare'", "'none'"):
            assert stage in line, line
        if "int8" in line and "viper" in line:
            assert "'infer'" not in line, line
    print("\n".join(lines))
    for line in r.stdout.splitlines():
        if line.startswith("Y "):
            _, name, kernel, y = line.split(" ", 3)
            path = [p for p in files["paths"] if p.endswith(name)][0]
            _check_answer(files, path, eval(y))


def _outcome(r):
    """(last stage reached, 'done' | 'MemoryError'); anything else fails the test."""
    out = r.stdout + r.stderr
    stages = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("STAGE ")]
    if r.returncode == 0 and stages[-1:] == ["done"]:
        return "done", "done"
    assert r.returncode == 1, "not a clean exit (rc %d): %s" % (r.returncode, out[-2000:])
    # (the traceback goes to stdout, a kernel path's one-line warning to stderr: a heap too small
    # for the viper module says so, then the import fails further on)
    last = [line for line in out.strip().splitlines() if not line.startswith("mpy_lazy: warning:")][-1]
    assert last.startswith("MemoryError") or (
        stages[-1:] == ["prepare"] and last.startswith("ContainerError") and "heap" in last), out[-2000:]
    return (stages[-1] if stages else "startup"), last.split(":")[0]


def test_heap_sizes_from_comfortable_to_tiny(files):
    """Fresh processes with heaps from 256K down to 2K: each run finishes with the right
    answer or exits with a MemoryError traceback (at startup, import, open, bind, prepare or
    inference), never a crash. Below the smallest heap that finishes (found by bisection),
    256-byte steps walk through the runtime's own allocations to where the import fails."""
    heaps = [256, 160, 128, 96, 64, 48, 32, 24, 16, 8, 4, 2]

    def run(path, size):
        r = run_micropython(FRESH % {"mpy": files["mpy"], "path": path, "x": files["inputs"][path]},
                            heapsize=str(size))
        stage, result = _outcome(r)
        if result == "done":
            y = [line for line in r.stdout.splitlines() if line.startswith("Y ")][0]
            _check_answer(files, path, eval(y[2:]))
        return stage

    for path in files["paths"]:
        seen = {}
        for kb in heaps:
            seen.setdefault(run(path, kb * 1024), kb * 1024)
        assert seen.get("done") == 256 * 1024, seen
        lo, hi = 2048, 256 * 1024  # lo fails, hi finishes
        while hi - lo > 1024:
            mid = (lo + hi) // 2
            if run(path, mid) == "done":
                hi = mid
            else:
                lo = mid
        size = hi - 256
        while size > lo - 16384 and size > 2048:
            stage = run(path, size)
            seen.setdefault(stage, size)
            if stage in ("import", "startup"):
                break
            size -= 256
        # the sweep reaches a MemoryError inside the runtime, not only at import
        assert set(seen) & {"open", "bind", "prepare", "infer"}, seen
        assert "startup" in seen or "import" in seen, seen
