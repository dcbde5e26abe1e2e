"""Board definitions, checked without building them: the ESP32-S3 partition table, the rp2
flash split, and that both boards freeze the same mpy-lazy files."""
import importlib.util
import os
import re
import struct
import subprocess
import sys

import pytest

from conftest import ROOT

BOARDS = os.path.join(ROOT, "boards")
RP2 = os.path.join(BOARDS, "RPI_PICO_MPY_LAZY")
ESP32 = os.path.join(BOARDS, "ESP32_S3_MPY_LAZY")
ESP32_CSV = os.path.join(ESP32, "partitions-8MiB-romfs.csv")

MiB = 1024 * 1024
ESP32_FLASH = 8 * MiB
PARTITION_TABLE_END = 0x8000 + 0x1000  # ESP-IDF's default table offset + its 4 KB sector
# Size estimates, measured: the rp2 firmware with ulab and mpy_lazy is 497 KB (docs/FIRMWARE.md);
# ESP32_GENERIC_S3 1.28 is about 1.7 MB, ulab adds about 0.2 MB on xtensa.
RP2_FIRMWARE_ESTIMATE = 520 * 1024
ESP32_FIRMWARE_ESTIMATE = 1.9 * MiB


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read(path):
    with open(path) as f:
        return f.read()


def esp32_partitions():
    """[(name, type, subtype, offset, size)] from the CSV, numbers as ints."""
    rows = []
    for line in _read(ESP32_CSV).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, ptype, subtype, offset, size = [f.strip() for f in line.split(",")[:5]]
        rows.append((name, ptype, subtype, int(offset, 0), int(size, 0)))
    return rows


def test_esp32_partitions_fit_8mb_and_are_aligned():
    parts = esp32_partitions()
    names = [p[0] for p in parts]
    assert len(set(names)) == len(names)
    end = PARTITION_TABLE_END
    for name, ptype, _sub, offset, size in sorted(parts, key=lambda p: p[3]):
        assert offset >= end, "%s overlaps the previous partition" % name
        # app partitions: 64 KB (MMU page); data: 4 KB (flash sector)
        align = 0x10000 if ptype == "app" else 0x1000
        assert offset % align == 0 and size % 0x1000 == 0 and size > 0, name
        end = offset + size
    assert end <= ESP32_FLASH
    # MicroPython puts the "vfs" filesystem on the flash after the last partition
    assert "vfs" not in names and ESP32_FLASH - end >= 1 * MiB


def test_esp32_romfs_partition():
    parts = {p[0]: p for p in esp32_partitions()}
    _name, ptype, subtype, offset, size = parts["romfs"]  # vfs.rom_ioctl looks it up by this label
    assert ptype == "data" and int(subtype, 0) == 0x8F
    # esp_partition_mmap maps whole 64 KB pages: keep the image start page aligned, so a
    # container aligned inside the image is aligned in the address space too
    assert offset % 0x10000 == 0 and size % 0x10000 == 0
    assert size >= 2 * MiB


def test_esp32_app_partition_holds_the_firmware():
    apps = [p for p in esp32_partitions() if p[1] == "app"]
    assert len(apps) == 1 and apps[0][2] == "factory"
    assert apps[0][4] >= ESP32_FIRMWARE_ESTIMATE * 1.2  # 20% headroom


def test_esp32_board_config():
    h = _read(os.path.join(ESP32, "mpconfigboard.h"))
    assert re.search(r"#define\s+MICROPY_VFS_ROM\s+\(1\)", h)
    assert "CONFIG_ESPTOOLPY_FLASHSIZE_8MB=y" in _read(os.path.join(ESP32, "sdkconfig.board")).split()
    cmake = _read(os.path.join(ESP32, "mpconfigboard.cmake"))
    assert "set(IDF_TARGET esp32s3)" in cmake
    assert "${MICROPY_BOARD_DIR}/" + os.path.basename(ESP32_CSV) in cmake


def test_esp32_partition_table_with_esp_idf_tool():
    """ESP-IDF's own gen_esp32part.py, when an ESP-IDF checkout is given as IDF_PATH."""
    tool = os.path.join(os.environ.get("IDF_PATH", ""), "components", "partition_table", "gen_esp32part.py")
    if not os.environ.get("IDF_PATH") or not os.path.exists(tool):
        pytest.skip("IDF_PATH is not set to an ESP-IDF checkout")
    r = subprocess.run([sys.executable, tool, "--flash-size", "8MB", ESP32_CSV, os.devnull],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, tool, "--flash-size", "4MB", ESP32_CSV, os.devnull],
                       capture_output=True, text=True)
    assert r.returncode != 0  # the table really needs the 8 MB chip


def test_rp2_flash_split():
    layout = _load("flash_layout", os.path.join(RP2, "flash_layout.py"))
    lay = layout.layout()
    assert lay["romfs_bytes"] % 4096 == 0 and lay["fs_bytes"] % 4096 == 0
    assert lay["fs_offset"] + lay["fs_bytes"] == layout.FLASH_BYTES
    assert lay["romfs_offset"] + lay["romfs_bytes"] == lay["fs_offset"]
    # the largest container alignment (4096) must survive the image's placement in flash
    assert lay["romfs_offset"] % 4096 == 0
    assert lay["firmware_max"] >= RP2_FIRMWARE_ESTIMATE * 1.2  # 20% headroom
    assert lay["romfs_bytes"] >= 512 * 1024


def test_rp2_uf2_end(tmp_path):
    layout = _load("flash_layout", os.path.join(RP2, "flash_layout.py"))

    def block(addr, size):
        head = struct.pack("<8I", 0x0A324655, 0x9E5D5157, 0x2000, addr, size, 0, 2, 0xE48BFF56)
        return head + bytes(476) + struct.pack("<I", 0x0AB16F30)

    p = tmp_path / "fw.uf2"
    p.write_bytes(block(0x10000000, 256) + block(0x10000100, 200))
    assert layout.uf2_end(str(p)) == 0x100 + 200
    p.write_bytes(b"\0" * 512)
    with pytest.raises(ValueError):
        layout.uf2_end(str(p))


def _manifest_lines(board_dir):
    return [line.strip() for line in _read(os.path.join(board_dir, "manifest.py")).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_boards_freeze_the_runtime():
    rp2, esp32 = _manifest_lines(RP2), _manifest_lines(ESP32)
    # each: the port's own default manifest, then the repo's manifest.py, nothing else (the
    # ESP32-S3 without the ARM Thumb kernels, which its Xtensa core cannot run)
    assert rp2 == ['include("$(PORT_DIR)/boards/manifest.py")', 'include("$(BOARD_DIR)/../../manifest.py")']
    assert esp32 == ['include("$(PORT_DIR)/boards/manifest.py")',
                     'include("$(BOARD_DIR)/../../manifest.py", thumb=False)']
    assert os.path.isfile(os.path.join(BOARDS, "..", "manifest.py"))
    for board in (RP2, ESP32):
        assert "set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/manifest.py)" in \
            _read(os.path.join(board, "mpconfigboard.cmake"))


@pytest.mark.parametrize("args,message", [
    (["firmware"], "BOARD is not set: one of QEMU_MPS2_AN385 QEMU_MICROBIT RPI_PICO_MPY_LAZY RPI_PICO ESP32_S3_MPY_LAZY"),
    (["firmware", "BOARD=NOPE"], "BOARD=NOPE is unknown"),
    (["firmware", "BOARD=QEMU_MICROBIT", "MPY_DIR="], "MPY_DIR is not set: point it at a MicroPython checkout"),
    (["firmware", "BOARD=RPI_PICO", "MPY_DIR="], "MPY_DIR is not set: point it at a MicroPython checkout"),
    (["flash"], "BOARD is not set: one of RPI_PICO_MPY_LAZY ESP32_S3_MPY_LAZY"),
    (["flash", "BOARD=QEMU_MICROBIT"], "BOARD=QEMU_MICROBIT cannot be flashed"),
    (["deploy"], "MODEL is not set: make deploy MODEL=model.mpyl"),
])
def test_make_targets_say_what_is_missing(args, message):
    """Firmware targets stop with one line naming what is missing, and a non-zero exit."""
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT] + args, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert message in r.stdout + r.stderr, r.stdout + r.stderr
