"""Boot the qemu-port firmware (boards/qemu/) in qemu-system-arm or -xtensa and drive its raw REPL.

The board's UART is qemu's stdio, so the REPL is two pipes; a ROMFS image is written into the
board's ROMFS partition with `-device loader`, and the firmware mounts it at /rom on boot.
Every read has a deadline: a HardFault makes the firmware print its registers and spin forever,
so a fault or a timeout raises and the qemu process is always killed and reaped.

    with Qemu(firmware, "MICROBIT", romfs=image_path) as board:
        print(board.exec("import mpy_lazy; print(mpy_lazy)"))

Environment (used by tests/test_firmware_qemu.py and `python -m firmware.qemu_run`):
MICROPY_QEMU_FIRMWARE (firmware.elf), MICROPY_QEMU_BOARD (MPS2_AN385, MICROBIT or ESP32S3),
QEMU_SYSTEM_ARM / QEMU_SYSTEM_XTENSA (the qemu binary, default qemu-system-arm / -xtensa; ESP32S3
needs the one firmware/esp32s3/build_qemu.sh builds, which knows the esp32s3 core)."""
import os
import select
import subprocess
import time

# Must match boards/qemu/<BOARD>/mpconfigboard.mk (ROMFS partition) and upstream's machine names.
BOARDS = {
    "MPS2_AN385": {
        "machine": "mps2-an385",
        "cpu": "Cortex-M3",
        "banner": "mps2-an385 with Cortex-M3",  # sys.implementation._machine
        "qemu_args": [],
        "romfs_start": 0x21000000,
        "romfs_size": 0x400000,
    },
    "MICROBIT": {
        "machine": "microbit",
        "cpu": "Cortex-M0",
        "banner": "microbit with nRF51",
        "qemu_args": [
            "-global", "nrf51-soc.flash-size=2097152",
            "-global", "nrf51-soc.sram-size=262144",
        ],
        "romfs_start": 0x100000,
        "romfs_size": 0x100000,
    },
    # boards/qemu/ESP32S3: the ESP32-S3's core in the `sim` machine, console on semihosting
    # (qemu's own stdin/stdout: no chardev); the image sits in data RAM.
    "ESP32S3": {
        "machine": "sim",
        "cpu": "ESP32-S3 core (Xtensa LX7)",
        "banner": "sim with ESP32-S3 core (Xtensa LX7)",
        "qemu_args": ["-cpu", "esp32s3"],
        "console": ["-display", "none", "-monitor", "none", "-serial", "none"],
        "romfs_start": 0x3E000000,
        "romfs_size": 0x1000000,
        # -kernel would set the PC to the ELF's entry, but the machine's reset that follows puts
        # it at the core's reset vector 0x50000000 (RESET_VECTOR0, nothing mapped there in `sim`);
        # the generic loader sets it after that reset.
        "load_elf": "loader",
    },
}

QEMU_BINARIES = {"sim": ("QEMU_SYSTEM_XTENSA", "qemu-system-xtensa")}


def qemu_binary(board):
    """The qemu binary that runs `board`: its environment variable's value or the default."""
    var, default = QEMU_BINARIES.get(BOARDS[board]["machine"], ("QEMU_SYSTEM_ARM", "qemu-system-arm"))
    return os.environ.get(var, default)


def mpy_march(board):
    """mpy-cross's -march for code run on `board` (its viper/native functions)."""
    return "xtensawin" if BOARDS[board]["machine"] == "sim" else "armv6m"

FAULT_MARKER = b" exception caught:"  # upstream mcu/arm/errorhandler.c (boards/qemu/ESP32S3 too), then registers
RAW_PROMPT = b"raw REPL; CTRL-B to exit\r\n>"


# Board code: a littlefs RAM disk mounted at /tmp. The qemu boards have no writable flash
# filesystem; real boards have littlefs, where files cannot be mapped (mpy_lazy.Stream's case).
RAMDISK = """
import vfs
class _RamDisk:
    def __init__(self, blocks):
        self.data = bytearray(512 * blocks)
    def readblocks(self, n, buf, off=0):
        a = n * 512 + off
        buf[:] = memoryview(self.data)[a:a + len(buf)]
    def writeblocks(self, n, buf, off=0):
        a = n * 512 + off
        self.data[a:a + len(buf)] = buf
    def ioctl(self, op, arg):
        if op == 4:
            return len(self.data) // 512
        if op == 5:
            return 512
        if op == 6:
            return 0
_disk = _RamDisk(%d)
vfs.VfsLfs2.mkfs(_disk)
vfs.mount(vfs.VfsLfs2(_disk), '/tmp')
del _RamDisk, _disk
"""

# The image loaded at `romfs_start`, mounted in place at /rom unless the firmware did it at boot
# (the qemu port of MicroPython 1.29 does, from the board's ROMFS partition; 1.28's mounts none).
MOUNT_ROMFS = """
import sys, uctypes, vfs
if not [m for m in vfs.mount() if m[1] == '/rom']:
    vfs.mount(vfs.VfsRom(uctypes.bytearray_at(%d, %d)), '/rom')
    sys.path.append('/rom')
    sys.path.append('/rom/lib')
del uctypes
"""


class BoardError(Exception):
    """The code run on the board raised; the message is the board's traceback."""


class BoardFault(Exception):
    """The board crashed (HardFault & co.); the message is its register dump."""


class BoardTimeout(Exception):
    """The board did not answer in time; the message ends with what it printed last."""


def romfs_image(files):
    """A ROMFS image holding `files` ([(path in image, bytes)]), built by `mpy-lazy romfs`'s
    writer, so every mpy-lazy container in it starts at a multiple of its alignment."""
    from host_tools.romfs import AlignedRomWriter, container_alignment

    writer = AlignedRomWriter()
    tree = {}
    for path, data in files:
        *dirs, name = path.strip("/").split("/")
        node = tree
        for d in dirs:
            node = node.setdefault(d, {})
        node[name] = data

    def add(node):
        for name in sorted(node):
            if isinstance(node[name], dict):
                writer.opendir(name)
                add(node[name])
                writer.closedir()
            else:
                data = node[name]
                writer.mkfile_aligned(name, data, container_alignment(data, name))

    add(tree)
    return writer.finalise()


def env_firmware():
    """(firmware path, board name) from the environment, or (None, reason)."""
    firmware = os.environ.get("MICROPY_QEMU_FIRMWARE")
    if not firmware:
        return None, "MICROPY_QEMU_FIRMWARE is not set (build one: make firmware BOARD=QEMU_MICROBIT)"
    if not os.path.exists(firmware):
        return None, "MICROPY_QEMU_FIRMWARE=%s does not exist" % firmware
    board = os.environ.get("MICROPY_QEMU_BOARD", "MPS2_AN385")
    if board not in BOARDS:
        raise ValueError("MICROPY_QEMU_BOARD=%s: expected one of %s" % (board, ", ".join(BOARDS)))
    return firmware, board


class Qemu:
    def __init__(self, firmware, board, romfs=None, timeout=60, qemu_args=()):
        self.board = board
        self.timeout = timeout
        self.log = b""  # everything the board printed, for error messages
        self._pending = b""  # read from the board, not consumed yet
        spec = BOARDS[board]
        cmd = [qemu_binary(board), "-machine", spec["machine"]]
        cmd += spec["qemu_args"] + list(qemu_args)
        cmd += ["-semihosting"] + spec.get("console", ["-nographic", "-monitor", "none", "-serial", "stdio"])
        if romfs:
            size = os.path.getsize(romfs)
            if size > spec["romfs_size"]:
                raise ValueError("%s: %d bytes, the %s ROMFS partition holds %d"
                                 % (romfs, size, board, spec["romfs_size"]))
            cmd += ["-device", "loader,file=%s,addr=0x%x,force-raw=on" % (romfs, spec["romfs_start"])]
        if spec.get("load_elf") != "loader" and firmware.endswith(".elf") and os.path.exists(firmware[:-4] + ".bin"):
            # qemu loads an ELF segment at its load address with its .bss size, and upstream's
            # linker script puts .bss behind .data in flash: on MICROBIT that range overlaps the
            # ROMFS partition and qemu refuses. The raw image (at address 0) has no .bss.
            firmware = firmware[:-4] + ".bin"
        if spec.get("load_elf") == "loader":
            cmd += ["-device", "loader,file=%s,cpu-num=0" % firmware]
        else:
            cmd += ["-kernel", firmware]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        try:
            self._raw_repl()
            if romfs:
                self.exec(MOUNT_ROMFS % (spec["romfs_start"], spec["romfs_size"]))
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def _write(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _read_until(self, marker, deadline):
        """Read until `marker`; returns the bytes before it. Bytes after it stay buffered."""
        fd = self.proc.stdout.fileno()
        buf = self._pending
        while marker not in buf:
            if FAULT_MARKER in buf:
                # let the register dump finish, then report it
                end = time.monotonic() + 1
                while time.monotonic() < end and select.select([fd], [], [], 0.2)[0]:
                    more = os.read(fd, 4096)
                    if not more:
                        break
                    buf += more
                self.log += buf
                raise BoardFault(self._tail(buf, 2000))
            left = deadline - time.monotonic()
            if left <= 0:
                self.log += buf
                raise BoardTimeout("%s: no %r within the timeout; last output:\n%s"
                                   % (self.board, marker, self._tail(self.log, 800)))
            if select.select([fd], [], [], min(left, 0.5))[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    self.log += buf
                    raise BoardTimeout("%s: qemu exited (%s); last output:\n%s"
                                       % (self.board, self.proc.poll(), self._tail(self.log, 800)))
                buf += chunk
        head, _, self._pending = buf.partition(marker)
        self.log += head + marker
        return head

    @staticmethod
    def _tail(data, n):
        return data[-n:].decode("utf-8", "replace")

    def _raw_repl(self):
        deadline = time.monotonic() + self.timeout
        self._read_until(b">>> ", deadline)  # booted: the friendly REPL's first prompt
        self._write(b"\x01")  # ctrl-A: raw REPL
        self._read_until(RAW_PROMPT, deadline)

    def mount_ramdisk(self, kbytes=16):
        """A writable littlefs at /tmp, `kbytes` of the board's heap."""
        self.exec(RAMDISK % (kbytes * 2))

    def exec_raw(self, code, timeout=None):
        """Run `code`; returns (stdout, stderr) as text."""
        deadline = time.monotonic() + (timeout or self.timeout)
        if isinstance(code, str):
            code = code.encode()
        self._write(code + b"\x04")
        self._read_until(b"OK", deadline)
        out = self._read_until(b"\x04", deadline)
        err = self._read_until(b"\x04", deadline)
        self._read_until(b">", deadline)
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def exec(self, code, timeout=None):
        """Run `code`; returns its output; BoardError with the traceback if it raised."""
        out, err = self.exec_raw(code, timeout)
        if err:
            raise BoardError(out + err)
        return out


def main():
    import sys

    firmware, board = env_firmware()
    if not firmware:
        sys.exit(board)
    romfs = os.environ.get("MICROPY_QEMU_ROMFS")
    code = sys.stdin.read() if len(sys.argv) < 2 or sys.argv[1] == "-" else open(sys.argv[1]).read()
    try:
        with Qemu(firmware, board, romfs=romfs, timeout=float(os.environ.get("QEMU_TIMEOUT", 120))) as b:
            out, err = b.exec_raw(code)
    except (BoardFault, BoardTimeout) as e:
        sys.exit("%s: %s" % (type(e).__name__, e))
    sys.stdout.write(out.replace("\r\n", "\n"))
    if err:
        sys.stderr.write(err.replace("\r\n", "\n"))
        sys.exit(1)


if __name__ == "__main__":
    main()
