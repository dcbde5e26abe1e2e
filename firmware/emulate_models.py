"""`make emulate-demo` (second table): the MLPerf Tiny int8 models on the emulated boards.

KWS (DS-CNN) and ResNet-8 as int8 containers made two ways - from torch (examples/mlperf_tiny,
seeded weights, exported to ONNX, `mpy-lazy pack --quantize int8 --calibrate`) and from the
.tflite fixtures (tests/golden/tflite, TFLite's converter) - go into one ROMFS image. Each board
boots with it, opens every container in place, runs the same seeded int8 inputs and prints the
outputs, which must equal the host's (the runtime on CPython; for the .tflite models TFLite
Micro's too, where the tflite-micro package is installed), with the heap the model keeps (the
arena included), the arena, the free heap, the bytes one inference allocates (gc disabled) and
the emulated time of one inference (relative figure: the emulators are not cycle-accurate).

Boards and firmware as in firmware/emulate_digits.py (--build-dir, MICROPY_QEMU_FIRMWARE,
MPY_LAZY_RP2_UF2); exit status 1 when a board's outputs differ from the host's."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from firmware import rp2_run  # noqa: E402
from firmware.emulate_digits import boards, missing  # noqa: E402
from firmware.qemu_run import BoardError, BoardFault, BoardTimeout, Qemu  # noqa: E402

MODELS = ("kws", "resnet8")
INPUTS = 2  # seeded int8 inputs per model


def build(workdir, log):
    """Containers {name: path}, the ROMFS image path, and {name: (inputs, host outputs)}."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "mlperf_tiny"))
    import models  # examples/mlperf_tiny/models.py
    import mpy_lazy
    from host_tools import cli
    from mpy_lazy import model, kernels

    files = {}
    for name in MODELS:
        log("  %s: torch -> ONNX -> int8" % name)
        onnx_path = os.path.join(workdir, name + ".onnx")
        models.export_onnx(models.build(name), onnx_path, dynamo=True)
        shape = models.INPUT_SHAPES[name]
        cal = np.random.default_rng(0).standard_normal((32,) + tuple(shape)).astype(np.float32)
        cal_path = os.path.join(workdir, name + "_cal.npy")
        np.save(cal_path, cal)
        out = os.path.join(workdir, name + "-onnx.mpyl")
        if cli.main(["pack", onnx_path, "-o", out, "--quantize", "int8", "--calibrate", cal_path, "-q"]):
            raise SystemExit("emulate_models: packing %s failed" % onnx_path)
        files[name + "-onnx"] = out
        tfl = os.path.join(ROOT, "tests", "golden", "tflite", name + "_int8.tflite")
        if os.path.exists(tfl):
            out = os.path.join(workdir, name + "-tflite.mpyl")
            if cli.main(["pack", tfl, "-o", out, "-q"]):
                raise SystemExit("emulate_models: packing %s failed" % tfl)
            files[name + "-tflite"] = out
    image = os.path.join(workdir, "mlperf.romfs")
    if cli.main(["romfs"] + list(files.values()) + ["-o", image, "-q"]):
        raise SystemExit("emulate_models: building the ROMFS image failed")
    expect = {}
    kernels.use("pure")
    for key, path in files.items():
        with open(path, "rb") as f:
            m = model.from_container(mpy_lazy.open(f.read()))
        xs = [inputs(m.inputs[0].size, seed) for seed in range(1, INPUTS + 1)]
        ys = []
        for x in xs:
            m(x)
            ys.append(m.tolist())
        expect[key] = (xs, ys)
        if key.endswith("-tflite"):
            _check_tflm(key, xs, ys, log)
    return files, image, expect


def inputs(n, seed):
    """n int8 codes as bytes from a seeded LCG (the boards run the same code: no input is
    sent to them)."""
    s = seed
    out = bytearray(n)
    for i in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        out[i] = (s >> 16) & 0xFF
    return bytes(out)


def _check_tflm(key, xs, ys, log):
    """The host outputs of a .tflite model against TFLite Micro (when installed)."""
    try:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import tflm_ref
    except ImportError:
        log("  (tflite-micro not installed: %s not checked against TFLM)" % key)
        return
    path = os.path.join(ROOT, "tests", "golden", "tflite", key.split("-")[0] + "_int8.tflite")
    shape = tuple(int(d) for d in tflm_ref.io_details(path)[0][0]["shape"])
    for x, y in zip(xs, ys):
        ref = tflm_ref.run(path, [np.frombuffer(x, dtype=np.int8).reshape(shape)])[0]
        if list(np.asarray(ref).reshape(-1)) != y:
            raise SystemExit("emulate_models: %s: the host runtime differs from TFLM" % key)
    log("  %s: host outputs == TFLM's" % key)


BOARD_CODE = """
import gc, time
import mpy_lazy
from mpy_lazy import model
def inputs(n, seed):
    s = seed
    out = bytearray(n)
    for i in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        out[i] = (s >> 16) & 0xFF
    return out
def run_one(name, count):
    gc.collect()
    a0 = gc.mem_alloc()
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    gc.collect()
    kept = gc.mem_alloc() - a0
    outs = []
    ms = 0
    xs = [inputs(m.inputs[0].size, seed) for seed in range(1, count + 1)]
    for x in xs:
        t0 = time.ticks_ms()
        m(x)
        ms = time.ticks_diff(time.ticks_ms(), t0)
        outs.append(m.tolist())
    gc.collect()
    gc.disable()
    b0 = gc.mem_alloc()
    m(xs[0])
    alloc = gc.mem_alloc() - b0
    gc.enable()
    mem = m.memory()
    print('RESULT', repr((name, outs, kept, mem['arena'] + mem['scratch'], gc.mem_free(), alloc, ms)))
"""


def board_calls(expect):
    return ["run_one(%r, %d)\n" % (key, len(xs)) for key, (xs, _) in expect.items()]


def parse(stdout):
    out = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            name, outs, kept, arena, free, alloc, ms = eval(line[7:])
            out[name] = (outs, kept, arena, free, alloc, ms)
    return out


def run_board(name, kind, firmware, image, expect, timeout, log):
    calls = board_calls(expect)
    if kind == "rp2":
        with tempfile.TemporaryDirectory() as tmp:
            pico = rp2_run.Pico(firmware, tmp)
            scripts = []
            for i, code in enumerate([BOARD_CODE] + calls):
                path = os.path.join(tmp, "s%d.py" % i)
                with open(path, "w") as f:
                    f.write(code)
                scripts.append(path)
            rc, results, err = pico.run(scripts, image, timeout)
            if rc:
                raise BoardFault("rp2040js exit %d: %s" % (rc, err.strip()[-800:]))
            for res in results:
                if res.get("err"):
                    raise BoardError(res["out"] + res["err"])
            return parse("\n".join(r.get("out", "") for r in results))
    out = []
    for code in calls:  # one boot per model: its heap figures are its own
        log("  %s ..." % code.split("'")[1])
        with Qemu(firmware, kind, romfs=image, timeout=60) as board:
            board.exec(BOARD_CODE)
            out.append(board.exec(code, timeout=timeout))
    return parse("\n".join(out))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="emulate_models.py", description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--require-all", action="store_true", help="a board that cannot run is an error")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per emulator run")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    runnable = []
    for name, kind, firmware in boards(args.build_dir):
        reason = missing(kind, firmware)
        if reason:
            print("skip %s: %s" % (name, reason))
            if args.require_all:
                return 1
        else:
            runnable.append((name, kind, firmware))
    if not runnable:
        print("no emulated board to run")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        log("host: packing and running %s" % ", ".join(MODELS))
        files, image, expect = build(tmp, log)
        rows, failed = [], False
        for name, kind, firmware in runnable:
            log("%s: %s" % (name, firmware))
            try:
                got = run_board(name, kind, firmware, image, expect, args.timeout, log)
            except (BoardError, BoardFault, BoardTimeout, subprocess.TimeoutExpired) as e:
                print("FAILED %s: %s: %s" % (name, type(e).__name__, str(e).strip()[-800:]))
                failed = True
                continue
            for key, (xs, ys) in expect.items():
                if key not in got:
                    print("FAILED %s: no result for %s" % (name, key))
                    failed = True
                    continue
                outs, kept, arena, free, alloc, ms = got[key]
                same = outs == ys
                failed |= not same or alloc != 0
                rows.append((name, key, "%d/%d equal" % (sum(o == y for o, y in zip(outs, ys)), len(ys)),
                             "{:,} B".format(kept), "{:,} B".format(arena), "{:,} B".format(free),
                             "%d B" % alloc, "%d" % ms))
    head = ("board", "model", "int8 outputs vs host", "model heap (arena incl.)", "arena",
            "free heap", "alloc/inference", "emulated ms/inference")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * 3 + "---:|" * 5)
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
