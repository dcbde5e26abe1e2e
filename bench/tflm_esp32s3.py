"""TensorFlow Lite Micro on the ESP32-S3's core in qemu: the peer of bench/xtensa.py --peer.

  build(build_dir)                   -> path of tflm_esp32s3.elf: firmware/esp32s3/tflm (esp-tflite-micro
                                        with esp-nn, bare metal) built against ESP_TFLITE_MICRO_DIR and
                                        ESP_NN_DIR with the toolchain in XTENSA_PREFIX (make)
  image(model, input_bytes)          -> the bytes main.cc reads at 0x3E000000 (header, .tflite, input)
  run(elf, tflite_path, input_bytes) -> dict: instructions, warm_instructions, ccount, output (bytes),
                                        outputs, arena_used, console

One firmware for every model: qemu's generic loader puts the model image in the data RAM, where
bench/xtensa.py puts mpy-lazy's ROMFS image; TFLM reads the .tflite in place. qemu runs with
`-icount shift=0` (each instruction advances the virtual clock by 1 ns) and the core's CCOUNT
counts that clock at 240 MHz: instructions = CCOUNT x 1000 / 240, the measure bench/xtensa.py
takes for mpy-lazy (there from time.ticks_us(), itself CCOUNT / 240).

    python bench/tflm_esp32s3.py --elf ELF model.tflite ...   (a quick look; bench/xtensa.py --peer
                                                               is the comparison)"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIR = os.path.join(ROOT, "firmware", "esp32s3", "tflm")
IMAGE_ADDR = 0x3E000000  # main.cc's TFLM_IMAGE_ADDR
MAGIC = 0x4D4C4654  # "TFLM"
CPU_MHZ = 240  # the core's clock as build_qemu.sh imports it: CCOUNT's rate
# tested: espressif/esp-tflite-micro 1.4.0 at 99f49e1, espressif/esp-nn at d45b843
ESP_TFLITE_MICRO_TESTED = "99f49e1"
ESP_NN_TESTED = "d45b843"


class TflmEsp32s3Error(RuntimeError):
    """A build or run that could not be done; the message says why, on one line."""


def build(build_dir, tflm_dir=None, nn_dir=None, prefix=None, arch="generic"):
    """firmware/esp32s3/tflm built into build_dir (make); returns the ELF's path."""
    tflm_dir = tflm_dir or os.environ.get("ESP_TFLITE_MICRO_DIR")
    nn_dir = nn_dir or os.environ.get("ESP_NN_DIR")
    prefix = prefix or os.environ.get("XTENSA_PREFIX", "/opt/xtensa")
    if not tflm_dir or not nn_dir:
        raise TflmEsp32s3Error("tflm_esp32s3: set ESP_TFLITE_MICRO_DIR and ESP_NN_DIR (checkouts of "
                               "espressif/esp-tflite-micro %s and espressif/esp-nn %s)"
                               % (ESP_TFLITE_MICRO_TESTED, ESP_NN_TESTED))
    r = subprocess.run(["make", "-C", SOURCE_DIR, "-j%s" % os.environ.get("JOBS", "2"),
                        "ESP_TFLITE_MICRO_DIR=" + tflm_dir, "ESP_NN_DIR=" + nn_dir, "XTENSA_PREFIX=" + prefix,
                        "BUILD=" + os.path.abspath(build_dir), "ESP_NN_ARCH=" + arch],
                       capture_output=True, text=True)
    if r.returncode:
        why = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()] or ["make failed"]
        raise TflmEsp32s3Error("tflm_esp32s3: build failed: %s" % why[-1][:400])
    return os.path.join(os.path.abspath(build_dir), "tflm_esp32s3.elf")


def image(model, input_bytes):
    """main.cc's image: u32 magic, model offset, model bytes, input offset, input bytes; the model
    16-byte aligned (TFLM reads its buffers in place), then the input."""
    model_off = 32
    input_off = model_off + (len(model) + 15) // 16 * 16
    head = struct.pack("<5I", MAGIC, model_off, len(model), input_off, len(input_bytes))
    return (head.ljust(model_off, b"\0") + bytes(model)).ljust(input_off, b"\0") + bytes(input_bytes)


def qemu_binary():
    return os.environ.get("QEMU_SYSTEM_XTENSA") or os.path.join(
        os.environ.get("XTENSA_PREFIX", "/opt/xtensa"), "bin", "qemu-system-xtensa")


def run(elf, tflite_path, input_bytes, timeout=600, qemu=None):
    """Run `elf` on the model at tflite_path with input_bytes (every input tensor's bytes, in
    order). Returns a dict:
      instructions       of the timed Invoke() (after a warm-up one), CCOUNT x 1000 / 240
      warm_instructions  of the warm-up Invoke()
      ccount             CCOUNT of the timed Invoke()
      arena_used         interpreter.arena_used_bytes()
      output             bytes of output 0 after the timed Invoke(); outputs: every output's
      warm_output        bytes of output 0 after the warm-up
      console            what the firmware printed
    Raises TflmEsp32s3Error on a qemu error, a timeout, an exception on the core or a TFLM error."""
    qemu = qemu or qemu_binary()
    name = os.path.basename(tflite_path)
    if not os.access(qemu, os.X_OK):
        raise TflmEsp32s3Error("tflm_esp32s3: no %s (firmware/esp32s3/build_qemu.sh; or set QEMU_SYSTEM_XTENSA)" % qemu)
    with open(tflite_path, "rb") as f:
        data = image(f.read(), input_bytes)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "image.bin")
        with open(path, "wb") as f:
            f.write(data)
        cmd = [qemu, "-machine", "sim", "-cpu", "esp32s3", "-semihosting", "-icount", "shift=0",
               "-display", "none", "-monitor", "none", "-serial", "none",
               "-device", "loader,file=%s,cpu-num=0" % elf,
               "-device", "loader,file=%s,addr=0x%x,force-raw=on" % (path, IMAGE_ADDR)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise TflmEsp32s3Error("tflm_esp32s3: qemu did not finish %s within %d s" % (name, timeout))
    lines = r.stdout.splitlines()
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    if r.returncode or errors or "DONE" not in lines:
        why = errors or (r.stderr.strip().splitlines() or lines or ["exit status %d" % r.returncode])[-2:]
        raise TflmEsp32s3Error("tflm_esp32s3: %s: %s" % (name, " | ".join(why)[:600]))
    fields = {}
    for ln in lines:
        key, _, rest = ln.partition(" ")
        fields[key] = rest
    status = {k: dict(kv.split("=") for kv in fields.get(k, "").split()) for k in ("ALLOCATE", "WARM", "INVOKE")}
    if any(status[k].get("status") != "0" for k in status):
        raise TflmEsp32s3Error("tflm_esp32s3: TFLM failed on %s: %s" % (name, " | ".join(lines[-6:])))
    outputs = []
    while "OUT%d" % len(outputs) in fields:
        outputs.append(bytes.fromhex(fields["OUT%d" % len(outputs)]))
    ccount = int(status["INVOKE"]["ccount"])
    return dict(instructions=ccount * 1000 // CPU_MHZ,
                warm_instructions=int(status["WARM"]["ccount"]) * 1000 // CPU_MHZ, ccount=ccount,
                arena_used=int(fields["ARENA_USED"]), output=outputs[0], outputs=outputs,
                warm_output=bytes.fromhex(fields["WARM_OUT0"]), console=r.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/tflm_esp32s3.py", description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help=".tflite files")
    ap.add_argument("--elf", default=os.environ.get("TFLM_ESP32S3_ELF"), help="tflm_esp32s3.elf (default "
                    "TFLM_ESP32S3_ELF)")
    ap.add_argument("--seed", type=int, default=3, help="seed of the int8 input (tflm_ref.sample_inputs)")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tflm_ref

    if not args.elf:
        sys.exit("bench/tflm_esp32s3.py: no --elf (make tflm-esp32s3)")
    bad = 0
    for path in args.models:
        x = tflm_ref.sample_inputs(path, 1, seed=args.seed)[0]
        try:
            r = run(args.elf, path, x.tobytes())
        except TflmEsp32s3Error as e:
            print(e)
            return 1
        want = tflm_ref.run(path, [x])[0]
        same = (want[0] if isinstance(want, tuple) else want).tobytes() == r["output"]
        bad += not same
        print("%s: %s instructions, arena %d B, output %s TFLM wheel's" % (
            os.path.basename(path), format(r["instructions"], ","), r["arena_used"], "=" if same else "!="))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
