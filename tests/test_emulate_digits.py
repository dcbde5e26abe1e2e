"""firmware/emulate_digits.py (`make emulate-demo`) without emulators: its command line, the
one-line skip reasons for boards whose firmware is absent, --require-all, and the board code it
sends over the raw REPL (run_board.py's functions), run here on the MicroPython unix port."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_micropython

sys.path.insert(0, ROOT)
from firmware import emulate_digits  # noqa: E402

SCRIPT = os.path.join(ROOT, "firmware", "emulate_digits.py")


def _run(*args, build_dir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MICROPY_QEMU_FIRMWARE", "MICROPY_QEMU_BOARD", "MPY_LAZY_RP2_UF2", "BUILD_DIR")}
    return subprocess.run([sys.executable, SCRIPT, "--build-dir", str(build_dir)] + list(args),
                          capture_output=True, text=True, env=env, timeout=120)


def test_help():
    r = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for option in ("--build-dir", "--full", "--require-all", "--timeout"):
        assert option in r.stdout


def test_boards_without_firmware_are_skipped_and_no_board_fails(tmp_path):
    r = _run(build_dir=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # no board ran: a table of nothing is a failure
    lines = r.stdout.splitlines()
    assert lines[:3] == [
        "skip qemu MPS2_AN385: %s not found (make firmware BOARD=QEMU_MPS2_AN385)"
        % (tmp_path / "qemu-MPS2_AN385" / "firmware.elf"),
        "skip qemu MICROBIT: %s not found (make firmware BOARD=QEMU_MICROBIT)"
        % (tmp_path / "qemu-MICROBIT" / "firmware.elf"),
        "skip rp2040js Pico: %s not found (make firmware BOARD=RPI_PICO_MPY_LAZY)"
        % (tmp_path / "rp2" / "firmware.uf2"),
    ]
    assert lines[3:] == ["no emulated board to run: see make firmware-help"]


def test_require_all_fails_on_a_missing_board(tmp_path):
    r = _run("--require-all", build_dir=tmp_path)
    assert r.returncode == 1
    assert r.stdout.count("skip ") == 3
    assert "--require-all and 3 board(s) cannot run" in r.stdout


def test_environment_overrides_the_build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROPY_QEMU_FIRMWARE", "/x/m0.elf")
    monkeypatch.setenv("MICROPY_QEMU_BOARD", "MICROBIT")
    monkeypatch.setenv("MPY_LAZY_RP2_UF2", "/x/pico.uf2")
    got = {kind: path for _name, kind, path in emulate_digits.boards(str(tmp_path))}
    assert got == {"MPS2_AN385": str(tmp_path / "qemu-MPS2_AN385" / "firmware.elf"),
                   "MICROBIT": "/x/m0.elf", "rp2": "/x/pico.uf2"}


def test_board_code_runs_over_a_raw_repl_session():
    """What goes to the board: run_board.py minus its entry point, then one main() call per
    model. Run here on the unix port with the demo's image mounted at /rom."""
    if not os.path.exists(emulate_digits.IMAGE):
        pytest.skip("%s not built (make demo)" % os.path.relpath(emulate_digits.IMAGE, ROOT))
    code = emulate_digits.board_code()
    assert "__main__" not in code and "sys.exit" not in code
    code += "mount(%r)\n" % emulate_digits.IMAGE + emulate_digits.call("mlp-int8", ["viper:30"])
    r = run_micropython(code)
    assert r.returncode == 0, r.stdout + r.stderr
    results, heap = emulate_digits.parse(r.stdout)
    assert list(results) == [("mlp-int8", "viper")]  # only= picked one container
    correct, n, _ms = results[("mlp-int8", "viper")]
    assert n == 30 and correct >= 28
    h = heap[("mlp-int8", "viper")]
    assert 0 < int(h["open+bind"]) < int(h["after_forward"]) and int(h["free"]) > 0
