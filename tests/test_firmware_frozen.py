"""Frozen containers stay in flash (issue 12 item 1), proven on emulated boards.

`make firmware-frozen BOARD=QEMU_MICROBIT|RPI_PICO_MPY_LAZY` (firmware/frozen.mk) freezes the
models of firmware/frozen_models.py (a 2-layer MLP packed as f32, f16 and int8 graph models, the
int8 one calibrated, and as f32, f16 and int8 weights for a Module declared in code, plus the
same f32 weights as a plain safetensors file whose data section starts at an odd offset) with
`mpy-lazy freeze` into the board's firmware; the board hook boards/frozen_align.py aligns their
bytes constants. On the emulated Cortex-M0 (qemu MICROBIT) and the emulated Pico (rp2040js):

- each frozen DATA constant is the file (CRC), inside the firmware image (flash), not in RAM, a
  container at a multiple of its alignment, the safetensors file's data section at one of 16;
- opened and bound, report() shows 0 RAM bytes: every View is in place (aligned), its address
  inside the firmware image; open + bind takes a few hundred bytes of heap;
- the models compute what CPython computes from the same files (int8: exactly).

Needs MPY_LAZY_FROZEN_QEMU (the frozen MICROBIT firmware.elf) and/or MPY_LAZY_FROZEN_RP2 (the
frozen Pico firmware.uf2), and MPY_LAZY_FROZEN_MODELS (the directory frozen_models.py wrote;
default: frozen-models next to the firmware's build directory). Skipped without them, failed under
MPY_LAZY_REQUIRE_EMULATORS=1 (`make emulate-test`)."""
import ast
import os
import shutil
import struct
import sys
from binascii import crc32

import numpy as np
import pytest

from conftest import ROOT, emulator_unavailable

sys.path.insert(0, ROOT)
from firmware import frozen_models  # noqa: E402
from firmware.qemu_run import BOARDS, Qemu, romfs_image  # noqa: E402



def _env(var, what):
    path = os.environ.get(var)
    if not path:
        emulator_unavailable("%s is not set (make firmware-frozen BOARD=%s)" % (var, what))
    if not os.path.exists(path):
        emulator_unavailable("%s=%s does not exist" % (var, path))
    models = os.environ.get("MPY_LAZY_FROZEN_MODELS") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(path))), "frozen-models")
    if not os.path.isdir(os.path.join(models, "models")):
        emulator_unavailable("no frozen models in %s (set MPY_LAZY_FROZEN_MODELS)" % models)
    return path, os.path.join(models, "models")


# Board code: every frozen model opened in place, bound, reported and run.
PROBE = """
import gc, uctypes, mpy_lazy
from binascii import crc32
from mpy_lazy import Module, Param, load, model

class Lin(Module):
    def __init__(self, n_in, n_out):
        self.weight = Param((n_out, n_in))
        self.bias = Param((n_out,))

class MLP(Module):
    def __init__(self):
        self.fc1 = Lin(%(n_in)d, %(n_hid)d)
        self.fc2 = Lin(%(n_hid)d, %(n_out)d)

def layer(lin, x, n_out, relu):
    n_in = len(x)
    y = []
    for o in range(n_out):
        s = lin.bias[o]
        for i in range(n_in):
            s += lin.weight[o * n_in + i] * x[i]
        y.append(max(s, 0.0) if relu else s)
    return y

def probe(name, x):
    mod = __import__('frozen_' + name)
    data = mod.DATA
    out = {'name': name, 'addr': uctypes.addressof(data), 'size': len(data), 'crc': crc32(data) & 0xffffffff}
    if name.startswith('weights'):
        m = MLP()
        if data[8] == 0x7b:  # a safetensors file: its reader is imported on first use, once
            gc.collect()
            a0 = gc.mem_alloc()
            __import__('mpy_lazy.safetensors')  # (an import statement would make mpy_lazy local)
            gc.collect()
            out['import'] = gc.mem_alloc() - a0
        gc.collect()
        a0 = gc.mem_alloc()
        c = mpy_lazy.open(data)
        load(m, c)
        gc.collect()
        out['heap'] = gc.mem_alloc() - a0
        out['y'] = layer(m.fc2, layer(m.fc1, x, %(n_hid)d, True), %(n_out)d, False)
    else:
        gc.collect()
        a0 = gc.mem_alloc()
        c = mpy_lazy.open(data)
        gc.collect()
        a1 = gc.mem_alloc()
        m = model.declare(c)  # the model's code (its Params): not counted, as in docs/RUNTIME.md
        gc.collect()
        a2 = gc.mem_alloc()
        m.load(c)
        gc.collect()
        out['heap'] = (a1 - a0) + (gc.mem_alloc() - a2)
        m.prepare()
        m(x)
        out['y'] = m.tolist()
    r = mpy_lazy.report(m, show=False)
    out['flash'], out['ram'] = r['flash'], r['ram']
    out['params'] = [(p['name'], p['state'], p['flash'], p['ram'], p['note']) for p in r['params']]
    out['views'] = [(n, uctypes.addressof(p.view.mv), p.view.aligned, p.view.nbytes) for n, p in m.named_params()]
    print('RESULT', repr(out))
"""


def _inputs():
    x = frozen_models.inputs(1, 7)[0]
    # the int8 model takes int8 codes (quantized here, once: the board's single-precision floats
    # could round a code the other way)
    return x


def _codes(path, x):
    import mpy_lazy
    from mpy_lazy import model

    m = model.from_container(mpy_lazy.open(path))
    s, z = m.inputs[0].q
    return [max(-128, min(127, int(np.round(v / s)) + z)) for v in x]


def _host(models, name, x):
    """What CPython computes from the same file."""
    import mpy_lazy
    from mpy_lazy import model

    path = os.path.join(models, frozen_models.file_name(name))
    c = mpy_lazy.open(path)
    if name.startswith("weights"):
        w = {n: c.view(n).dequantize() for n in c.names()}
        h = np.maximum(np.asarray(w["fc1.weight"]).reshape(32, 64) @ x + w["fc1.bias"], 0)
        return list(np.asarray(w["fc2.weight"]).reshape(10, 32) @ h + w["fc2.bias"])
    m = model.from_container(c)
    m(list(x) if not isinstance(x[0], (int, np.integer)) else [int(v) for v in x])
    return m.tolist()


def _script(models):
    x = _inputs()
    calls = []
    for name in frozen_models.NAMES:
        arg = _codes(os.path.join(models, name + ".mpyl"), x) if name == "graph_i8" else [float(v) for v in x]
        calls.append("probe(%r, %r)" % (name, arg))
    code = PROBE % {"n_in": frozen_models.N_IN, "n_hid": frozen_models.N_HID, "n_out": frozen_models.N_OUT}
    return code, calls


def _check(results, models, image_lo, image_hi, board):
    x = _inputs()
    assert [r["name"] for r in results] == list(frozen_models.NAMES)
    rows = []
    for r in results:
        name = r["name"]
        with open(os.path.join(models, frozen_models.file_name(name)), "rb") as f:
            data = f.read()
        if name in frozen_models.SAFETENSORS:  # tensors count from the data section
            alignment, phase = 16, 8 + struct.unpack_from("<Q", data, 0)[0]
            assert phase % 2 == 1, name  # at an odd offset in the file: in place only if padded
        else:
            (alignment,), phase = struct.unpack_from("<I", data, 16), 0
        assert r["size"] == len(data) and r["crc"] == crc32(data), name  # the packed file, frozen
        assert image_lo <= r["addr"] and r["addr"] + r["size"] <= image_hi, (name, hex(r["addr"]))
        assert (r["addr"] + phase) % alignment == 0, (name, r["addr"] % alignment)  # was 3 mod 16
        assert r["ram"] == 0 and r["flash"] > 0, (name, r["params"])  # was: every tensor copied
        for pname, state, flash, ram, note in r["params"]:
            assert state == "bound" and ram == 0 and note == "flash view", (name, pname, note)
        for pname, addr, aligned, nbytes in r["views"]:
            assert aligned and r["addr"] <= addr and addr + nbytes <= r["addr"] + r["size"], (name, pname)
            assert addr % 4 == 0, (name, pname, addr)
        # open + bind, the weights staying in flash: was 499,680 B for 495,912 B of weights
        assert r["heap"] <= 1024, (name, r["heap"])
        arg = _codes(os.path.join(models, name + ".mpyl"), x) if name == "graph_i8" else x
        want = _host(models, name, np.array(arg, dtype=np.float32) if name != "graph_i8" else arg)
        if name == "graph_i8":
            assert r["y"] == want, (name, r["y"], want)  # integer pipeline: bit-exact
        else:
            assert np.allclose(r["y"], want, rtol=1e-4, atol=1e-4), (name, r["y"], want)
        rows.append("%-8s %-12s data at 0x%08x (+%d: %% 16 = %d), %6d B flash, %d B RAM, open+bind heap %d B%s"
                    % (board, name, r["addr"], phase, (r["addr"] + phase) % 16, r["flash"], r["ram"], r["heap"],
                       " (+%d B importing the safetensors reader, once)" % r["import"] if "import" in r else ""))
    print("\n" + "\n".join(rows))


def _results(out):
    return [ast.literal_eval(line.split("RESULT ", 1)[1]) for line in out.splitlines() if line.startswith("RESULT ")]


def test_frozen_models_in_flash_on_qemu_m0():
    firmware, models = _env("MPY_LAZY_FROZEN_QEMU", "QEMU_MICROBIT")
    qemu = os.environ.get("QEMU_SYSTEM_ARM", "qemu-system-arm")
    if not shutil.which(qemu):
        emulator_unavailable("%s not found (apt-get install qemu-system-arm)" % qemu)
    binary = firmware[:-4] + ".bin" if firmware.endswith(".elf") else firmware
    image_hi = os.path.getsize(binary)  # MICROBIT: flash at 0, the image from 0
    assert image_hi <= BOARDS["MICROBIT"]["romfs_start"]
    code, calls = _script(models)
    with Qemu(firmware, "MICROBIT", timeout=120) as board:
        board.exec(code)
        out = "".join(board.exec(c) for c in calls)
    _check(_results(out), models, 0, image_hi, "M0")


def test_frozen_models_in_flash_on_rp2040(tmp_path):
    uf2, models = _env("MPY_LAZY_FROZEN_RP2", "RPI_PICO_MPY_LAZY")
    from firmware import rp2_run

    missing = rp2_run.tools_missing()
    if missing:
        emulator_unavailable(missing)
    code, calls = _script(models)
    scripts = []
    for i, c in enumerate([code] + calls):
        p = tmp_path / ("s%d.py" % i)
        p.write_text(c)
        scripts.append(str(p))
    img = tmp_path / "empty.romfs"
    img.write_bytes(romfs_image([("README", b"frozen models are in the firmware\n")]))
    rc, results, err = rp2_run.Pico(uf2, str(tmp_path)).run(scripts, str(img))
    assert rc == 0, err
    runs = [r for r in results if "script" in r]  # (run.mjs ends with a summary line)
    assert len(runs) == len(scripts)
    for r in runs:
        assert r["err"] == "", r
    base = rp2_run.LAYOUT.XIP_BASE
    _check(_results("".join(r["out"] for r in runs)), models, base, base + rp2_run.LAYOUT.uf2_end(uf2), "RP2040")
