"""`make emulate-demo`: the digits models (examples/digits) on the emulated boards.

Each board boots its firmware with examples/digits/out/digits.romfs in its ROMFS partition
(mounted at /rom); examples/digits/run_board.py's functions go over the raw REPL and run one
model x dtype on the viper path, then the ulab path. One boot per model: the kernels keep their
scratch buffers for later calls, so a shared session would make a model's heap figures depend on
the models run before it. Prints one table: accuracy,
heap taken by open+bind and live after the first forward pass (gc.mem_alloc deltas after
gc.collect), free heap after the run, and emulated ms/image (a relative figure: neither emulator
is cycle-accurate).

Boards: qemu MPS2_AN385 (Cortex-M3) and MICROBIT (Cortex-M0), all models, all 360 test images;
rp2040js Pico (RP2040, about 4.5x slower than real time): the int8 and .tflite models on every 6th
image (60), all 360 with --full. A board whose firmware or emulator is missing is skipped with
a one-line reason (--require-all: exit status 1 instead). Exit status 1 when no board can run,
or a board failed or gave no result for a model.

Firmware: BUILD_DIR/qemu-<BOARD>/firmware.elf and BUILD_DIR/rp2/firmware.uf2 (BUILD_DIR from
--build-dir, else the environment, else ./build); MICROPY_QEMU_FIRMWARE with MICROPY_QEMU_BOARD
and MPY_LAZY_RP2_UF2 (as the tests use them) override the board they name."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS = os.path.join(ROOT, "examples", "digits")
IMAGE = os.path.join(DIGITS, "out", "digits.romfs")
sys.path.insert(0, ROOT)

from firmware import rp2_run  # noqa: E402
from firmware.qemu_run import BoardError, BoardFault, BoardTimeout, Qemu, qemu_binary  # noqa: E402

MODELS = ("mlp", "cnn")
DTYPES = ("f32", "f16", "int8", "tflite")
PATHS = ("viper", "ulab")
RP2_DTYPES = ("int8", "tflite")  # the RP2040 has no FPU: the integer models are its fast path
RP2_SUBSET = 60  # test images per model on rp2040js without --full (every 6th of 360)


def board_code():
    """run_board.py without its command-line entry point (on a board `__name__` is '__main__'
    in the raw REPL, and its sys.exit would soft-reset the board)."""
    with open(os.path.join(DIGITS, "run_board.py")) as f:
        src = f.read()
    head, sep, _ = src.partition('\nif __name__ == "__main__":')
    if not sep:
        raise SystemExit("emulate_digits: run_board.py has no __main__ block to strip")
    return head + "\n"


def call(container, paths):
    return "main(None, %r, only=[%r])\n" % (list(paths), container)


def boards(build_dir):
    """[(name, kind, firmware path)], environment overrides applied."""
    found = [
        ("qemu MPS2_AN385", "MPS2_AN385", os.path.join(build_dir, "qemu-MPS2_AN385", "firmware.elf")),
        ("qemu MICROBIT", "MICROBIT", os.path.join(build_dir, "qemu-MICROBIT", "firmware.elf")),
        ("rp2040js Pico", "rp2", os.path.join(build_dir, "rp2", "firmware.uf2")),
    ]
    env_qemu = os.environ.get("MICROPY_QEMU_FIRMWARE")
    env_board = os.environ.get("MICROPY_QEMU_BOARD", "MPS2_AN385")
    env_uf2 = os.environ.get("MPY_LAZY_RP2_UF2")
    out = []
    for name, kind, path in found:
        if kind == "rp2" and env_uf2:
            path = env_uf2
        elif kind == env_board and env_qemu:
            path = env_qemu
        out.append((name, kind, path))
    return out


def missing(kind, firmware):
    """Why this board cannot run here, or None."""
    if not os.path.isfile(firmware):
        return "%s not found (make firmware BOARD=%s)" % (
            firmware, "RPI_PICO_MPY_LAZY" if kind == "rp2" else "QEMU_" + kind)
    if kind == "rp2":
        return rp2_run.tools_missing()
    qemu = qemu_binary(kind)
    if not shutil.which(qemu):
        return "%s not found (%s)" % (qemu, "make xtensa-toolchain" if "xtensa" in qemu
                                      else "apt-get install qemu-system-arm")
    return None


def ensure_image():
    """The demo's ROMFS image, made by the demo's own steps when missing (trains on first use)."""
    if os.path.exists(IMAGE):
        return IMAGE
    sys.path.insert(0, DIGITS)
    import demo
    from tqdm import tqdm

    print("%s is missing: running the demo's train + pack steps" % os.path.relpath(IMAGE, ROOT))
    demo.train.main(lambda total, desc: tqdm(total=total, desc=desc, unit="epoch"))
    with tqdm(total=len(demo.train.MODELS) * len(demo.DTYPES) + 1, desc="pack + romfs", unit="file") as bar:
        demo.pack_all(bar)
    return IMAGE


def parse(stdout):
    sys.path.insert(0, DIGITS)
    import demo

    results, heap, _ = demo.parse(stdout)
    return results, heap


def run_qemu(kind, firmware, image, containers, timeout, log):
    out = []
    for cont in containers:
        log("  %s ..." % cont)
        with Qemu(firmware, kind, romfs=image, timeout=60) as board:
            board.exec(board_code())
            out.append(board.exec(call(cont, PATHS), timeout=timeout))
    return "\n".join(out)


def run_rp2(firmware, image, containers, paths, timeout, log):
    with tempfile.TemporaryDirectory() as tmp:
        pico = rp2_run.Pico(firmware, tmp)
        code = os.path.join(tmp, "run_board.py")
        with open(code, "w") as f:
            f.write(board_code())
        out = []
        for cont in containers:
            log("  %s ..." % cont)
            script = os.path.join(tmp, cont + ".py")
            with open(script, "w") as f:
                f.write(call(cont, paths))
            rc, results, err = pico.run([code, script], image, timeout)
            if rc:
                raise BoardFault("rp2040js exit %d: %s" % (rc, err.strip()[-800:]))
            for res in results:
                if res.get("err"):
                    raise BoardError(res["out"] + res["err"])
                out.append(res.get("out", ""))
    return "\n".join(out)


def table(rows):
    head = ("board", "model", "dtype", "path", "correct", "open+bind heap",
            "heap after first forward", "free heap", "emulated ms/image")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * 5]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="emulate_digits.py",
        description="Run the digits models from the ROMFS image on the emulated boards "
                    "(qemu MPS2_AN385, qemu MICROBIT, rp2040js Pico) and print one table.")
    ap.add_argument("--build-dir", default=os.environ.get("BUILD_DIR") or os.path.join(ROOT, "build"),
                    help="where the firmwares are: qemu-<BOARD>/firmware.elf, rp2/firmware.uf2 "
                         "(default: $BUILD_DIR, else ./build)")
    ap.add_argument("--full", action="store_true",
                    help="rp2040js: all 360 test images (default: every 6th; qemu always runs all)")
    ap.add_argument("--require-all", action="store_true",
                    help="a board that cannot run is an error, not a skip")
    ap.add_argument("--timeout", type=int, default=1800,
                    help="seconds per model (one emulator run each; default 1800)")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    runnable, skipped = [], 0
    for name, kind, firmware in boards(args.build_dir):
        reason = missing(kind, firmware)
        if reason:
            print("skip %s: %s" % (name, reason))
            skipped += 1
        else:
            runnable.append((name, kind, firmware))
    if skipped and args.require_all:
        print("emulate_digits: --require-all and %d board(s) cannot run" % skipped)
        return 1
    if not runnable:  # a table of nothing is not a result
        print("no emulated board to run: see make firmware-help")
        return 1
    image = ensure_image()

    rows, failed = [], False
    for name, kind, firmware in runnable:
        dtypes = RP2_DTYPES if kind == "rp2" else DTYPES
        containers = ["%s-%s" % (m, d) for m in MODELS for d in dtypes]
        log("%s: %s" % (name, firmware))
        try:
            if kind == "rp2":
                paths = PATHS if args.full else ["%s:%d" % (p, RP2_SUBSET) for p in PATHS]
                stdout = run_rp2(firmware, image, containers, paths, args.timeout, log)
            else:
                stdout = run_qemu(kind, firmware, image, containers, args.timeout, log)
        except (BoardError, BoardFault, BoardTimeout, subprocess.TimeoutExpired) as e:
            print("FAILED %s: %s: %s" % (name, type(e).__name__, str(e).strip()[-800:]))
            failed = True
            continue
        results, heap = parse(stdout)
        for cont in containers:
            model, dtype = cont.split("-")
            for path in PATHS:
                if (cont, path) not in results:
                    print("FAILED %s: no result for %s %s" % (name, cont, path))
                    failed = True
                    continue
                correct, n, ms = results[(cont, path)]
                h = heap[(cont, path)]
                rows.append((name, model, dtype, path, "%d/%d" % (correct, n),
                             "{:,} B".format(int(h["open+bind"])),
                             "{:,} B".format(int(h["after_forward"])),
                             "{:,} B".format(int(h["free"])), "%.1f" % ms))
    if rows:
        print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
