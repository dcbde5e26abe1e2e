"""Low memory on the MicroPython unix port (docs/RELIABILITY.md): opening a container, binding a
model and one inference either succeed or raise MemoryError cleanly, and the container stays
usable: the same objects, retried after gc.collect() with room, give the right answer.

The runtime is imported as .mpy files (tools/build_mpy.py), as a board would have it frozen."""
import os
import sys

import numpy as np
import pytest

from conftest import run_micropython
from host_util import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import build_mpy  # noqa: E402

LAYERS = """input shape=64
linear w=fc1.weight b=fc1.bias in=64 out=32
relu
linear w=fc2.weight b=fc2.bias in=32 out=10
softmax
"""

PIPELINE = """
import gc, sys
sys.path.insert(0, %(mpy)r)
import mpy_lazy
from mpy_lazy import model, nn
from binascii import crc32
X = [(i %% 7) * 0.25 - 0.75 for i in range(64)]


def fill(leave):
    # Take the whole heap except one hole of `leave` bytes: the hole is allocated first, the
    # rest is filled down to the last block, then the hole is dropped (the next allocation
    # that does not fit collects it).
    gc.collect()
    hole = bytearray(leave) if leave else None
    parts = []
    tail = [None] * 1024
    size = 1 << 20
    while size >= 16:
        try:
            parts.append(bytearray(size))
        except MemoryError:
            size //= 2
    try:  # the last single blocks: one boxed float each
        for i in range(len(tail)):
            tail[i] = i + 0.5
    except MemoryError:
        pass
    hole = None
    return parts, tail
"""

BALLAST = PIPELINE + """
def run(path, kernel, step, limit):
    nn.use(kernel)
    buf = bytearray(open(path, "rb").read())
    crc = crc32(buf)
    ref = nn.tolist(model.from_container(mpy_lazy.open(buf))(X))
    stages = {}
    for leave in range(0, limit, step):
        nn.free_scratch()
        c = m = None
        stage = "open"
        ballast = fill(leave)
        try:
            c = mpy_lazy.open(buf)
            stage = "bind"
            m = model.from_container(c)
            stage = "infer"
            y = nn.tolist(m(X))
            stage = "done"
        except MemoryError:
            pass
        ballast = None
        gc.collect()
        # retry what failed, on the same objects, now with room
        if stage == "open":
            c = mpy_lazy.open(buf)
        if stage in ("open", "bind"):
            m = model.from_container(c)
        if stage != "done":
            y = nn.tolist(m(X))
        assert y == ref, (path, kernel, leave, stage, y, ref)
        assert c.verify() == len(c) and crc32(buf) == crc
        stages[stage] = stages.get(stage, 0) + 1
    print("STAGES", path.rsplit("/", 1)[1], kernel, sorted(stages.items()))

for path in %(paths)r:
    for kernel in ("viper", "pure"):
        run(path, kernel, 80, 14000)
print("BALLAST-OK")
"""

FRESH = """
import sys
sys.path.insert(0, %(mpy)r)
print("STAGE import")
import mpy_lazy
from mpy_lazy import model, nn
print("STAGE open")
c = mpy_lazy.open(open(%(path)r, "rb").read())
print("STAGE bind")
m = model.from_container(c)
print("STAGE infer")
y = nn.tolist(m([(i %% 7) * 0.25 - 0.75 for i in range(64)]))
print("STAGE done")
print("Y", y)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from safetensors.numpy import save_file

    from host_tools.cli import main

    d = tmp_path_factory.mktemp("lowmem")
    rng = np.random.default_rng(0)
    save_file({"fc1.weight": rng.standard_normal((32, 64)).astype(np.float32),
               "fc1.bias": rng.standard_normal(32).astype(np.float32),
               "fc2.weight": rng.standard_normal((10, 32)).astype(np.float32),
               "fc2.bias": rng.standard_normal(10).astype(np.float32)}, str(d / "mlp.safetensors"))
    (d / "mlp.layers").write_text(LAYERS)
    paths = []
    for quant in ("none", "int8-channel"):
        out = str(d / ("mlp-%s.mpyl" % quant))
        assert main(["pack", str(d / "mlp.safetensors"), "-o", out, "--layers", str(d / "mlp.layers"),
                     "--quantize", quant, "-q"]) == 0
        paths.append(out)
    build_mpy.build(str(d / "mpy"))
    return {"mpy": str(d / "mpy"), "paths": paths}


def test_memory_error_at_any_point_leaves_the_container_usable(files):
    """A ballast leaves a hole of 0..14000 bytes (80-byte steps): open, bind and the first
    inference each fail for some sizes and succeed for larger; after each failure the ballast
    is freed and the step retried on the same objects: the result equals the reference, every
    CRC still checks and the container bytes are unchanged."""
    r = run_micropython(BALLAST % files, heapsize="256K", timeout=300)
    assert r.returncode == 0 and "BALLAST-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("STAGES")]
    assert len(lines) == 4
    for line in lines:  # every stage failed at least once, and the whole run fit at the end
        for stage in ("'open'", "'bind'", "'infer'", "'done'"):
            assert stage in line, line


def _outcome(r):
    """(last stage reached, 'done' | 'MemoryError'); anything else fails the test."""
    out = r.stdout + r.stderr
    stages = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("STAGE ")]
    if r.returncode == 0 and stages[-1:] == ["done"]:
        return "done", "done"
    assert r.returncode == 1, "not a clean exit (rc %d): %s" % (r.returncode, out[-2000:])
    last = out.strip().splitlines()[-1]
    assert last.startswith("MemoryError"), out[-2000:]
    return (stages[-1] if stages else "startup"), "MemoryError"


def test_heap_sizes_from_comfortable_to_tiny(files):
    """Fresh processes with heaps from 256K down to 2K: each run finishes with the right
    answer or exits with a MemoryError traceback (at startup, import, open, bind or
    inference), never a crash."""
    heaps = [256, 160, 128] + list(range(120, 60, -2)) + [48, 32, 16, 8, 4, 2]
    for path in files["paths"]:
        ref = None
        seen = {}
        for kb in heaps:
            r = run_micropython(FRESH % {"mpy": files["mpy"], "path": path}, heapsize="%dK" % kb)
            stage, result = _outcome(r)
            seen.setdefault(stage, kb)
            if result == "done":
                y = [line for line in r.stdout.splitlines() if line.startswith("Y ")][0]
                ref = ref or y
                assert y == ref, (kb, y, ref)
        assert seen.get("done") == 256 and ref is not None
        # the sweep reaches a MemoryError inside the runtime, not only at import
        assert set(seen) & {"open", "bind", "infer"}, seen
        assert "startup" in seen or "import" in seen, seen
