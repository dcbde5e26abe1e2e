"""The firmware targets tell a newcomer what they need: `make firmware-help` names every
variable the builds and the emulator tests read, and the MicroPython version of each board (the
Pico and the qemu boards need different checkouts); `make emulate-demo` fails when no board can
run instead of printing a table of nothing."""
import os
import subprocess

from conftest import ROOT


def _make(*args, env=None):
    return subprocess.run(["make", "--no-print-directory", "-C", ROOT] + list(args), capture_output=True,
                          text=True, timeout=120, env=env)


def test_firmware_help_names_every_variable_and_both_micropython_versions():
    r = _make("firmware-help")
    assert r.returncode == 0, r.stderr
    for name in ("MPY_DIR", "ULAB_DIR", "MPY_LIB_DIR", "PICOTOOL_DIR", "BUILD_DIR", "MPY_LAZY_RP2_UF2",
                 "MICROPY_QEMU_FIRMWARE", "MICROPY_QEMU_BOARD", "MPY_LAZY_REQUIRE_EMULATORS"):
        assert "  " + name in r.stdout, name
    with open(os.path.join(ROOT, "firmware", "firmware.mk")) as f:
        qemu = [ln.split(":=")[1].strip() for ln in f if ln.startswith("MPY_TESTED :=")][0]
    with open(os.path.join(ROOT, "firmware", "rp2.mk")) as f:
        rp2 = [ln.split(":=")[1].strip() for ln in f if ln.startswith("RP2_TESTED :=")][0]
    assert qemu.startswith("v1.29") and rp2.startswith("v1.28.0"), (qemu, rp2)
    assert qemu in r.stdout and rp2 in r.stdout


def test_emulate_demo_fails_when_no_board_can_run(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MICROPY_QEMU_FIRMWARE", "MICROPY_QEMU_BOARD", "MPY_LAZY_RP2_UF2", "BUILD_DIR")}
    r = _make("emulate-demo", "BUILD_DIR=%s" % tmp_path, env=env)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "no emulated board can run" in r.stderr, r.stdout + r.stderr
    assert "skip " not in r.stdout  # stopped before the demo scripts ran
