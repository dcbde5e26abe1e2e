"""Builds firmware/tflm_pico (TFLite Micro for the emulated Pico, the peer of `make bench-emulated`)
out of tree from checkouts you made: nothing is fetched.

    python bench/tflm_pico_build.py [--build-dir DIR] [--dual-core] [-j N]
    (make tflm-pico: the same, into BUILD_DIR/tflm-pico)

needs PICO_TFLMICRO_DIR (raspberrypi/pico-tflmicro, tested at dfea53b9), PICO_SDK_PATH (pico-sdk
2.2.0), PICOTOOL_DIR or picotool_DIR (the directory of an installed picotool 2.2.0's
picotoolConfig.cmake), cmake, make and arm-none-eabi-gcc; leaves DIR/tflm_pico.uf2 and .elf
(TFLM_PICO_UF2). Core 0 only unless --dual-core (a real Pico: rp2040js does not emulate core 1);
the ELF is checked either way. Steps and versions: docs/FIRMWARE.md, firmware/tflm_pico/NOTES.md."""
import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tflm_pico import PICO_TFLMICRO_TESTED, ROOT, SOURCE_DIR, TflmPicoError, _need  # noqa: E402

PICO_SDK_TESTED = "2.2.0"
DUAL_CORE_SYMBOL = "multicore_launch_core1"  # what pico-tflmicro's dual-core matrix multiply calls


def _git_head(path):
    r = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def _sdk_version(sdk):
    """"2.2.0" from pico-sdk's pico_sdk_version.cmake, or None."""
    try:
        with open(os.path.join(sdk, "pico_sdk_version.cmake")) as f:
            text = f.read()
    except OSError:
        return None
    parts = [re.search(r"set\(PICO_SDK_VERSION_%s (\d+)\)" % k, text) for k in ("MAJOR", "MINOR", "REVISION")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None


def _step(cmd, log, what):
    """Runs cmd with its output appended to the log; on failure, TflmPicoError with its first error line."""
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        with open(log) as f:
            lines = f.read().splitlines()
        first = [i for i, ln in enumerate(lines) if re.search(r"CMake Error|error:|Error \d", ln)]
        if not first:
            why = lines[-1].strip() if lines else "exit status %d" % r.returncode
        else:  # with CMake's message, the indented lines after "CMake Error at ...:"
            i = first[0]
            more = [ln.strip() for ln in itertools.takewhile(lambda ln: ln.startswith(" ") or not ln.strip(),
                                                              lines[i + 1:i + 12]) if ln.strip()]
            why = " ".join([lines[i].strip()] + more) if lines[i].startswith("CMake Error") else lines[i].strip()
        raise TflmPicoError("tflm_pico: %s failed: %s (full log: %s)" % (what, why[:400], log))


def _symbols(elf):
    nm = shutil.which("arm-none-eabi-nm")
    _need(nm, "tflm_pico: arm-none-eabi-nm not found (apt-get install binutils-arm-none-eabi)")
    r = subprocess.run([nm, elf], capture_output=True, text=True)
    _need(r.returncode == 0, "tflm_pico: arm-none-eabi-nm %s: %s" % (elf, r.stderr.strip()[-200:]))
    return {ln.split()[-1] for ln in r.stdout.splitlines() if ln.strip()}


def build(build_dir, tflmicro_dir=None, sdk_dir=None, picotool_dir=None, dual_core=False, jobs=2):
    """firmware/tflm_pico built into build_dir (configured, or reconfigured, and compiled); returns
    the path of tflm_pico.uf2. Paths default to PICO_TFLMICRO_DIR, PICO_SDK_PATH and PICOTOOL_DIR
    (or picotool_DIR). Raises TflmPicoError, one line, when something is missing or fails."""
    tflmicro_dir = tflmicro_dir or os.environ.get("PICO_TFLMICRO_DIR")
    sdk_dir = sdk_dir or os.environ.get("PICO_SDK_PATH")
    picotool_dir = picotool_dir or os.environ.get("PICOTOOL_DIR") or os.environ.get("picotool_DIR")
    for tool, pkg in (("cmake", "cmake"), ("make", "make"), ("arm-none-eabi-gcc", "gcc-arm-none-eabi"),
                      ("arm-none-eabi-g++", "libstdc++-arm-none-eabi-newlib")):
        _need(shutil.which(tool), "tflm_pico: %s not found (apt-get install %s)" % (tool, pkg))
    _need(tflmicro_dir, "tflm_pico: PICO_TFLMICRO_DIR is not set: a checkout of "
                        "https://github.com/raspberrypi/pico-tflmicro at %s" % PICO_TFLMICRO_TESTED[:8])
    _need(os.path.isfile(os.path.join(tflmicro_dir, "src", "tensorflow", "lite", "micro", "micro_interpreter.h")),
          "tflm_pico: PICO_TFLMICRO_DIR=%s is not a pico-tflmicro checkout (no src/tensorflow/lite/micro/)"
          % tflmicro_dir)
    _need(sdk_dir, "tflm_pico: PICO_SDK_PATH is not set: a pico-sdk %s checkout (e.g. a MicroPython v1.28.0 "
                   "checkout's lib/pico-sdk)" % PICO_SDK_TESTED)
    _need(os.path.isfile(os.path.join(sdk_dir, "pico_sdk_init.cmake")),
          "tflm_pico: PICO_SDK_PATH=%s is not a pico-sdk checkout (no pico_sdk_init.cmake)" % sdk_dir)
    _need(picotool_dir and os.path.isfile(os.path.join(picotool_dir, "picotoolConfig.cmake")),
          "tflm_pico: PICOTOOL_DIR is not set or has no picotoolConfig.cmake: install picotool %s "
          "(docs/FIRMWARE.md, RP2040 section; else pico-sdk would try to download it)" % PICO_SDK_TESTED)
    head, version = _git_head(tflmicro_dir), _sdk_version(sdk_dir)
    if head != PICO_TFLMICRO_TESTED:
        print("tflm_pico: note: pico-tflmicro at %s, tested at %s" % (head or "an unknown commit (no git checkout)",
                                                                     PICO_TFLMICRO_TESTED[:8]), file=sys.stderr)
    if version != PICO_SDK_TESTED:
        print("tflm_pico: note: pico-sdk %s, tested with %s" % (version or "of unknown version", PICO_SDK_TESTED),
              file=sys.stderr)

    build_dir = os.path.abspath(build_dir)
    os.makedirs(build_dir, exist_ok=True)
    log = os.path.join(build_dir, "tflm_pico_build.log")
    open(log, "w").close()
    _step(["cmake", "-S", SOURCE_DIR, "-B", build_dir, "-DPICO_TFLMICRO_DIR=" + os.path.abspath(tflmicro_dir),
           "-DPICO_SDK_PATH=" + os.path.abspath(sdk_dir), "-Dpicotool_DIR=" + os.path.abspath(picotool_dir),
           "-DTFLM_PICO_DUAL_CORE=" + ("ON" if dual_core else "OFF")], log, "cmake (configure)")
    _step(["cmake", "--build", build_dir, "--target", "tflm_pico", "-j", str(jobs)], log, "compiling")
    uf2 = os.path.join(build_dir, "tflm_pico.uf2")
    elf = os.path.join(build_dir, "tflm_pico.elf")
    _need(os.path.isfile(uf2) and os.path.isfile(elf), "tflm_pico: the build left no %s (log: %s)" % (uf2, log))
    launches = DUAL_CORE_SYMBOL in _symbols(elf)
    _need(launches == dual_core, "tflm_pico: %s %s %s: not the %s-core build asked for" % (
        elf, "calls" if launches else "lacks", DUAL_CORE_SYMBOL, "dual" if dual_core else "single"))
    return uf2


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/tflm_pico_build.py", description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("TFLM_PICO_BUILD", os.path.join(ROOT, "build", "tflm-pico")))
    ap.add_argument("--dual-core", action="store_true",
                    help="pico-tflmicro's dual-core matrix multiply as shipped (a real Pico; another build dir)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        uf2 = build(args.build_dir, dual_core=args.dual_core, jobs=args.jobs)
    except TflmPicoError as e:
        print(e)
        return 1
    print("built %s in %.0f s (%s core): TFLM_PICO_UF2=%s" % (
        uf2, time.monotonic() - t0, "dual" if args.dual_core else "single", uf2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
