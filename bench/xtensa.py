"""The MLPerf Tiny int8 models on the ESP32-S3's core: boards/qemu/ESP32S3 (MicroPython v1.28.0,
mpy_lazy frozen, viper kernels through the xtensawin emitter) in qemu-system-xtensa with
`-icount shift=0`, where each executed instruction advances the virtual clock by exactly 1 ns.

For each model (bench/tflm_pico.py's peer_models: MLPerf Tiny's own .tflite files, KWS's in the
repository, VWW, ResNet-8 and the anomaly detector from MLPERF_TINY_DIR): `mpy-lazy pack`, one
ROMFS image with the container and one seeded int8 input (tests/tflm_ref.py's sample_inputs(path,
1, seed=3), as bench/emulated.py), one boot; a warm-up inference, then one timed between two
time.ticks_us() reads. Prints per model: MACs, instructions per inference (virtual microseconds
x 1000: the count is exact to the thousand), instructions per MAC, the heap one inference
allocates (gc disabled) and whether the output equals TFLM's (the tflite-micro wheel) byte for
byte. Exit status 1 if an output differs.

--peer ELF (or TFLM_ESP32S3_ELF): TFLite Micro compiled for the same core with the same toolchain
(firmware/esp32s3/tflm: esp-tflite-micro with esp-nn, `make tflm-esp32s3`) runs each model on the
same input (bench/tflm_esp32s3.py), measured the same way (CCOUNT at 240 MHz under `-icount
shift=0`); the table gets its instructions, mpy-lazy's ratio to them and whether its output equals
the wheel's too.

    MICROPY_QEMU_FIRMWARE=/opt/build/qemu-ESP32S3/firmware.elf QEMU_SYSTEM_XTENSA=/opt/xtensa/bin/qemu-system-xtensa \\
    MLPERF_TINY_DIR=/opt/src/tiny .venv/bin/python bench/xtensa.py

qemu is not cycle-accurate: instructions, not cycles (the LX7's pipeline, caches, flash and PSRAM
wait states are not modelled)."""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from firmware.qemu_run import Qemu  # noqa: E402
from host_tools import cli  # noqa: E402
from host_tools.romfs import build_image  # noqa: E402

BOARD_CODE = r'''
import gc, time, mpy_lazy
from mpy_lazy import model, kernels
kernels.use('viper')
m = model.from_container(mpy_lazy.open('/rom/%(name)s.mpyl'))
x = open('/rom/%(name)s.in', 'rb').read()
m(x)
t0 = t1 = a0 = a1 = 0  # every global made before measuring: a new one grows the globals dict
gc.collect()
gc.disable()
a0 = gc.mem_alloc()
t0 = time.ticks_us()
m(x)
t1 = time.ticks_us()
a1 = gc.mem_alloc()
gc.enable()
print('XTENSA', repr((m.macs(), time.ticks_diff(t1, t0), a1 - a0, bytes(m.output).hex())))
'''


def run(firmware, timeout, log, peer=None):
    import tflm_esp32s3
    import tflm_pico
    import tflm_ref

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models, skipped = tflm_pico.peer_models(tmp)
        for name, why in skipped:
            log("skipped %s: %s" % (name, why))
        for name, src in models:
            if name == "person_detect":
                continue
            path = os.path.join(tmp, name + ".mpyl")
            if cli.main(["pack", src, "-o", path, "-q"]):
                raise SystemExit("bench/xtensa.py: packing %s failed" % src)
            x = tflm_ref.sample_inputs(src, 1, seed=3)[0]
            with open(path, "rb") as f:
                container = f.read()
            image = os.path.join(tmp, name + ".romfs")
            with open(image, "wb") as f:
                f.write(build_image([(name + ".mpyl", container), (name + ".in", x.tobytes())])[0])
            log("%s: %d-byte container on the ESP32-S3 core ..." % (name, len(container)))
            with Qemu(firmware, "ESP32S3", romfs=image, timeout=timeout,
                      qemu_args=["-icount", "shift=0"]) as board:
                out = board.exec(BOARD_CODE % {"name": name}, timeout=timeout)
            line = [ln for ln in out.splitlines() if ln.startswith("XTENSA ")][0]
            macs, us, alloc, y = eval(line[7:])
            want = tflm_ref.run(src, [x])[0]
            want = (want[0] if isinstance(want, tuple) else want).tobytes()
            row = dict(name=name, macs=macs, insns=us * 1000, alloc=alloc, equal=bytes.fromhex(y) == want)
            if peer:
                log("%s: TFLM (esp-nn) on the ESP32-S3 core ..." % name)
                r = tflm_esp32s3.run(peer, src, x.tobytes(), timeout=timeout)
                row.update(peer_insns=r["instructions"], peer_equal=r["output"] == want, peer_arena=r["arena_used"])
            rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--firmware", default=os.environ.get("MICROPY_QEMU_FIRMWARE"),
                    help="boards/qemu/ESP32S3's firmware.elf (default MICROPY_QEMU_FIRMWARE)")
    ap.add_argument("--peer", nargs="?", const=os.environ.get("TFLM_ESP32S3_ELF", ""), default=None,
                    help="also run TFLM with esp-nn on the core: its tflm_esp32s3.elf (default TFLM_ESP32S3_ELF; "
                         "make tflm-esp32s3)")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    if args.peer is not None and not os.path.isfile(args.peer):
        sys.exit("bench/xtensa.py: --peer: no tflm_esp32s3.elf (make tflm-esp32s3, then --peer ELF or TFLM_ESP32S3_ELF)")
    if not args.firmware or not os.path.exists(args.firmware):
        sys.exit("bench/xtensa.py: no firmware (make firmware BOARD=QEMU_ESP32S3, then --firmware or "
                 "MICROPY_QEMU_FIRMWARE)")
    import tflm_esp32s3

    try:
        rows = run(args.firmware, args.timeout, lambda m: print(m, file=sys.stderr), peer=args.peer)
    except tflm_esp32s3.TflmEsp32s3Error as e:
        sys.exit("bench/xtensa.py: %s" % e)
    yes = lambda ok: "yes" if ok else "**no**"  # noqa: E731
    if args.peer:
        print("| model | MACs | mpy-lazy instructions / inference | TFLM + esp-nn instructions / inference "
              "| mpy-lazy / TFLM | mpy-lazy instructions / MAC | TFLM instructions / MAC | outputs = TFLM wheel's |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %s | %s | %.2f | %.2f | %.2f | %s |" % (
                r["name"], format(r["macs"], ","), format(r["insns"], ","), format(r["peer_insns"], ","),
                r["insns"] / r["peer_insns"], r["insns"] / r["macs"], r["peer_insns"] / r["macs"],
                yes(r["equal"] and r["peer_equal"])))
        return 0 if all(r["equal"] and r["peer_equal"] for r in rows) else 1
    print("| model | MACs | instructions / inference | instructions / MAC | heap / inference | output = TFLM's |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %.2f | %d B | %s |" % (
            r["name"], format(r["macs"], ","), format(r["insns"], ","), r["insns"] / r["macs"], r["alloc"],
            yes(r["equal"])))
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
