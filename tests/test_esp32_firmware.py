"""The ESP-IDF build of boards/ESP32_S3_MPY_LAZY, checked on the build's own output with ESP-IDF's
tools (docs/FIRMWARE.md "ESP-IDF firmware"): MPY_LAZY_ESP32_BUILD=<build dir> (make firmware
BOARD=ESP32_S3_MPY_LAZY leaves BUILD_DIR/esp32s3[-VARIANT]). Skipped without it; a build that
stopped after configuring (partition table made, no firmware yet) runs the partition-table test.
Running the firmware needs Espressif's QEMU fork (its ESP32-S3 machine), which is not built here.
"""
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOARD = os.path.join(ROOT, "boards", "ESP32_S3_MPY_LAZY")
CSV = os.path.join(BOARD, "partitions-8MiB-romfs.csv")
BUILD = os.environ.get("MPY_LAZY_ESP32_BUILD", "")


def _build_file(*parts):
    if not BUILD:
        pytest.skip("MPY_LAZY_ESP32_BUILD is not set to an ESP-IDF build of ESP32_S3_MPY_LAZY")
    path = os.path.join(BUILD, *parts)
    if not os.path.isfile(path):
        if os.environ.get("MPY_LAZY_REQUIRE_EMULATORS") == "1":
            pytest.fail("%s not found" % path)
        pytest.skip("%s not found (the build did not get that far)" % path)
    return path


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _idf_path():
    with open(_build_file("project_description.json")) as f:
        return json.load(f)["idf_path"]


def _idf_python():
    """The Python the build ran IDF's tools with (idf.py passes -DPYTHON=)."""
    with open(_build_file("CMakeCache.txt")) as f:
        m = re.search(r"^PYTHON:\w+=(.+)$", f.read(), re.M)
    return m.group(1) if m else sys.executable


def _sdkconfig(key):
    with open(_build_file("sdkconfig")) as f:
        m = re.search(r"^CONFIG_%s=(.*)$" % key, f.read(), re.M)
    return m.group(1).strip('"') if m else None


def _partitions():
    """(name, type, subtype, offset, size) of the build's binary table, read by gen_esp32part.py."""
    tool = os.path.join(_idf_path(), "components", "partition_table", "gen_esp32part.py")
    r = subprocess.run([sys.executable, tool, _build_file("partition_table", "partition-table.bin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [line.split(",") for line in r.stdout.splitlines() if line and not line.startswith("#")]
    return {row[0]: row for row in rows}


def _size(text):
    units = {"K": 1024, "M": 1024 * 1024}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text, 0)


def test_partition_table_is_the_boards():
    """The table the build wrote is our CSV, byte for byte as IDF's gen_esp32part.py makes it."""
    built = _read(_build_file("partition_table", "partition-table.bin"))
    tool = os.path.join(_idf_path(), "components", "partition_table", "gen_esp32part.py")
    flash = _sdkconfig("ESPTOOLPY_FLASHSIZE")
    assert flash == "8MB"
    r = subprocess.run([sys.executable, tool, "--flash-size", flash, CSV, "-"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert built == r.stdout
    parts = _partitions()
    assert parts["romfs"][1:5] == ["data", "143", "0x280000", "3M"]
    assert parts["factory"][1:4] == ["app", "factory", "0x10000"]


def test_firmware_fits_and_is_the_parts():
    """firmware.bin = bootloader + the table at 0x8000 + the app at the factory partition; the app fits."""
    firmware = _read(_build_file("firmware.bin"))
    app = _read(_build_file("micropython.bin"))
    table = _read(_build_file("partition_table", "partition-table.bin"))
    factory = _partitions()["factory"]
    offset, size = int(factory[3], 16), _size(factory[4])
    assert len(app) <= size, "app %d B > factory partition %d B" % (len(app), size)
    assert firmware[0x8000:0x8000 + len(table)] == table
    assert firmware[offset:] == app


def test_app_image_is_valid_for_esp32s3():
    """esptool's image_info (IDF's Python environment): an ESP32-S3 app with valid checksum and hash."""
    r = subprocess.run([_idf_python(), "-m", "esptool", "--chip", "esp32s3", "image_info", "--version", "2",
                        _build_file("micropython.bin")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"Checksum: \w+ \(valid\)", r.stdout), r.stdout
    assert re.search(r"Validation hash: \w+ \(valid\)", r.stdout, re.I), r.stdout
    assert re.search(r"Chip ID: \d+ \(ESP32-S3\)", r.stdout), r.stdout


def test_runtime_frozen_and_romfs_in_the_app():
    """Every mpy_lazy module but the ARM Thumb kernels is frozen into the app; ROMFS support is in."""
    app = _read(_build_file("micropython.bin"))
    names = sorted(os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, "/")
                   for d, _, files in os.walk(os.path.join(ROOT, "mpy_lazy")) for f in files if f.endswith(".py"))
    assert "mpy_lazy/_thumb.py" in names
    for name in names:
        frozen = name.encode() + b"\x00" in app
        assert frozen == (name != "mpy_lazy/_thumb.py"), name
    assert b"ulab" in app
    assert _sdkconfig("PARTITION_TABLE_CUSTOM_FILENAME").endswith("partitions-8MiB-romfs.csv")
    assert b"rom_ioctl" in app  # vfs.rom_ioctl: MICROPY_VFS_ROM, which mounts the romfs partition at /rom
