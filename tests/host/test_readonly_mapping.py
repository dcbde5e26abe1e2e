"""No public path writes to flash (issue 13 item 4), with the container in memory the process
cannot write, as flash is on a board: a write through any object the public API hands out
would kill the interpreter (SIGSEGV), not just change a hash.

- CPython: the golden containers mapped with mmap ACCESS_READ (mpy_lazy.open(path) maps so);
- MicroPython (the unix port run in-process): a ROMFS image mapped read-only outside the heap
  and mounted with vfs.VfsRom(uctypes.bytearray_at(...)) (as tests/host/test_runtime_memory.py
  does), each container opened both as a ROMFS file (a read-only memoryview) and as a raw
  uctypes.bytearray_at over the read-only pages (a buffer that claims to be writable).

Both run tests/runtime/rt_walk.py: every public object and method, a write attempted through
each thing handed out, the container's CRC checked after each attempt."""
import os
import subprocess
import sys

from conftest import ROOT, RUNTIME_TESTS
from host_tools.romfs import AlignedRomWriter, container_alignment

sys.path.insert(0, RUNTIME_TESTS)
import rt_walk  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "golden")
NAMES = ("tiny", "f16", "int8", "int8_channel", "ints", "align64", "graph_int8", "graph_f32", "graph_f16",
         "layers")

LAUNCHER = """
import mmap, os, sys
import numpy as np
import micropython_run
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
os.environ["MPYL_ROM"] = "%d %d" % (np.frombuffer(m, np.uint8).ctypes.data, len(m))
sys.exit(micropython_run.run_main(["micropython"] + sys.argv[2:]))
"""

WALK = """
import os, sys, uctypes, vfs
from binascii import crc32
sys.path[:0] = [%(root)r, %(runtime)r]
addr, n = [int(x) for x in os.getenv("MPYL_ROM").split()]
vfs.mount(vfs.VfsRom(uctypes.bytearray_at(addr, n)), "/rom")
import mpy_lazy, rt_walk
for name in %(names)r:
    path = "/rom/" + name
    mv = memoryview(open(path, "rb"))
    crc = crc32(mv)
    unchanged = lambda: crc32(mv) == crc
    w = rt_walk.walk(mpy_lazy.open(path), unchanged)
    raw = uctypes.bytearray_at(uctypes.addressof(mv), len(mv))  # writable as far as Python knows
    w2 = rt_walk.walk(mpy_lazy.open(raw), unchanged)
    print("WALKED", name, w.steps, w.refused, w.copied, w2.refused)
print("OK")
"""


def _image(tmp_path, files):
    w = AlignedRomWriter()
    for name, data in files:
        w.mkfile_aligned(name, data, container_alignment(data, name))
    path = tmp_path / "rom.img"
    path.write_bytes(w.finalise())
    return path


def _goldens():
    out = []
    for name in NAMES:
        with open(os.path.join(GOLDEN, name + ".mpyl"), "rb") as f:
            out.append((name + ".mpyl", f.read()))
    import test_safetensors as st  # and a plain safetensors file (the runtime tests' writer)

    out.append(("plain.safetensors", st.build([t for t in st.ALL if t[3]], meta=[("k", "v")])))
    return out


def test_cpython_read_only_mmap(tmp_path):
    import mmap
    from binascii import crc32

    import mpy_lazy

    for name, data in _goldens():
        path = os.path.join(GOLDEN, name)
        if not os.path.exists(path):
            path = os.path.join(tmp_path, name)
            with open(path, "wb") as f:
                f.write(data)
        c = mpy_lazy.open(path)  # mmap ACCESS_READ
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        crc = crc32(m)
        w = rt_walk.walk(c, lambda: crc32(m) == crc)
        assert w.refused > 0, name


def test_micropython_read_only_mapping(tmp_path):
    files = _goldens()
    img = _image(tmp_path, files)
    code = WALK % {"root": ROOT, "runtime": RUNTIME_TESTS, "names": [n for n, _ in files]}
    r = subprocess.run([sys.executable, "-c", LAUNCHER, str(img), "-X", "heapsize=8M", "-c", code],
                       capture_output=True, text=True, timeout=300, cwd=RUNTIME_TESTS)
    # a write to the read-only pages ends the process with SIGSEGV (returncode -11)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    walked = [line.split() for line in r.stdout.splitlines() if line.startswith("WALKED")]
    assert len(walked) == len(files)
    for _, name, steps, refused, copied, refused_raw in walked:
        assert int(refused) > 0 and int(refused_raw) > 0 and int(steps) > 10, name
