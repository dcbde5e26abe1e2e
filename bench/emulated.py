"""`make bench-emulated`: mpy-lazy against TensorFlow Lite Micro, and cycles per multiply-accumulate,
on the emulated Pico (rp2040js).

First, the peer: the same .tflite files (MLPerf Tiny's own KWS, VWW, ResNet-8 and anomaly
detector, tflite-micro's person_detect: bench/tflm_pico.py's peer_models) on the same int8 input
(tests/tflm_ref.py's sample_inputs(path, 1, seed=3)) through mpy-lazy's firmware (thumb path, one
boot per model) and TFLite Micro's C++ for the Pico (firmware/tflm_pico, bench/tflm_pico.py:
CMSIS-NN, -O3, core 0), both timed between the same two marks (stores to 0x4005800C that the
rp2040js runners record: one m(x) against one Invoke()), the outputs compared byte for byte;
one table of cycles, their ratio, RAM (TFLM's arena_used_bytes() against the heap mpy-lazy keeps
after its first inference, gc.mem_alloc deltas, and its arena, measured after a warm-up build of the
same model; and apart, the import heap: what that warm-up left from a fresh boot, the runtime and the
model's rooms), bytes allocated per inference and flash (firmware + model on each side). TFLM_PICO_UF2 names the
TFLM firmware (`make tflm-pico`: bench/tflm_pico_build.py, firmware/tflm_pico/NOTES.md); without it
the peer's columns are skipped. VWW, ResNet-8 and the anomaly detector come from MLPERF_TINY_DIR
(a mlcommons/tiny checkout; KWS's file is in tests/golden/thirdparty), person_detect from
PERSON_DETECT_TFLITE (the .tflite) or PICO_TFLMICRO_DIR (a pico-tflmicro checkout, which holds it
as a C array); a model without its source is skipped, with the reason.

Then rp2040js advances the RP2040's timer by each instruction's cycles (125 MHz), so
`time.ticks_us()` on the emulated board is a deterministic cycle counter (1 us = 125 cycles; the
same figures on every run). The board times, per kernel path:
  - single int8 ops at the shapes of issue 15: dense 64x256 and 256x64, conv2d 3x3 16->16 on
    16x16, depthwise 3x3 on 25x5x64 (one-op graph containers with seeded weights);
  - ulab's float `dot` on the same dense shapes (int8 weights viewed in place);
  - whole int8 inferences: the digits MLP and CNN, KWS, ResNet-8 and VWW (the .tflite fixtures);
and prints cycles, cycles per MAC, and for whole models the sum of their ops' kernel cycles
against the end-to-end cycles. The firmware must have the current runtime frozen in
(make firmware BOARD=RPI_PICO_MPY_LAZY ...); MPY_LAZY_RP2_UF2 or --uf2 points at it.

Next to the peer table, cycles per MAC by layer type (1x1 and 3x3 conv, depthwise 3x3, dense):
one-op int8 .tflite models at the MLPerf Tiny models' layer shapes through both firmwares (LAYERS
below; --layers: that table alone). --models kws_ref_model,... runs only those peer models.

What rp2040js models and what it does not: docs/FIRMWARE.md ("Cycle counts on rp2040js")."""
import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from host_tools import cli, tflm  # noqa: E402
from host_tools.ir import Graph, Node  # noqa: E402
from host_tools import convert, kernel_layout  # noqa: E402

TFLITE = os.path.join(ROOT, "tests", "golden", "tflite")
MODELS = ("vww_int8", "resnet8_int8", "kws_int8", "digits_cnn_int8", "digits_mlp_int8")  # largest first
MARK = 0x4005800C  # the watchdog's SCRATCH0: the runners record a store to it as a mark


def op_graph(kind, seed=0):
    """A one-op int8 graph at one of issue 15's shapes: (Graph, MACs)."""
    rng = np.random.default_rng(seed)
    g = Graph()
    if kind.startswith("dense"):
        n_in, n_out = (256, 64) if kind == "dense 64x256" else (64, 256)
        shape, wshape = (n_in,), (n_out, n_in)
        n = Node("linear", ["x"], "y", kind, out=n_out)
        oc, macs = n_out, n_in * n_out
    elif kind == "conv 3x3":
        shape, wshape = (16, 16, 16), (16, 3, 3, 16)
        n = Node("conv2d", ["x"], "y", kind, out=16, k=(3, 3), pad=(1, 1, 1, 1))
        oc, macs = 16, 16 * 16 * 16 * 9 * 16
    else:  # depthwise 3x3
        shape, wshape = (25, 5, 64), (1, 3, 3, 64)
        n = Node("depthwise", ["x"], "y", kind, k=(3, 3), pad=(1, 1, 1, 1))
        oc, macs = 64, 25 * 5 * 64 * 9
    w = rng.integers(-127, 128, wshape).astype(np.int8)
    g.inputs = [("x", shape, "hwc")]
    g.outputs = ["y"]
    g.q = {"x": (0.02, -3), "y": (0.05, 4)}
    g.shapes = {"x": shape}
    scales = np.full(oc, 0.01, np.float32)
    n.t["w"] = g.add_tensor("w", w)
    g.wquant["w"] = (scales, 3 if kind.startswith("depthwise") else 0)
    n.t["b"] = g.add_tensor("b", rng.integers(-2000, 2000, oc).astype(np.int32))
    mult, shift = tflm.conv_multipliers(0.02, scales, 0.05)
    n.t["m"] = g.add_tensor("m", np.array([mult, shift], dtype=np.int32))
    g.nodes = [n]
    g.check()
    return g, macs


KERNELS = ("dense 64x256", "dense 256x64", "conv 3x3", "depthwise 3x3")


def build(tmp):
    """The ROMFS image holding the one-op containers and the models: {name: MACs or None}."""
    files, macs = [], {}
    for i, kind in enumerate(KERNELS):
        g, n = op_graph(kind, i)
        name = "k%d" % i
        path = os.path.join(tmp, name + ".mpyl")
        kernel_layout.for_kernels(g)  # the weights' order `mpy-lazy pack` writes (blocks of 8)
        convert.pack_graph([path], path, g, [("graph", g.text())], quiet=True, label="int8")
        files.append(path)
        macs[name] = (kind, n)
    for m in MODELS:
        src = os.path.join(TFLITE, m + ".tflite")
        if not os.path.exists(src):
            continue
        path = os.path.join(tmp, m + ".mpyl")
        if cli.main(["pack", src, "-o", path, "-q"]):
            raise SystemExit("bench-emulated: packing %s failed" % src)
        files.append(path)
        macs[m] = (m, None)
    image = os.path.join(tmp, "bench.romfs")
    if cli.main(["romfs"] + files + ["-o", image, "-q"]):
        raise SystemExit("bench-emulated: building the ROMFS image failed")
    return image, macs


BOARD = r'''
import gc, time, micropython
import mpy_lazy
from mpy_lazy import model, kernels, check
def cycles(f, reps):
    t0 = time.ticks_us()
    for _ in range(reps):
        f()
    return time.ticks_diff(time.ticks_us(), t0) * 125 // reps
def empty():
    pass
CALL = cycles(empty, 20)
def report(name, paths, reps):
    c = mpy_lazy.open('/rom/%s.mpyl' % name)
    # the input first (VWW: 27 KB), from the graph's input line, so it does not split the heap
    shape = [l for l in c.meta['graph'].split('\n') if l.startswith('input ')][0].split('shape=')[1].split()[0]
    c = None
    n = 1
    for d in shape.split(','):
        n *= int(d)
    x = bytearray(n)
    for i in range(n):
        x[i] = (i * 37) & 255
    gc.collect()
    a0 = gc.mem_alloc()  # the model's RAM: open, from_container and the first inference
    try:
        m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    except MemoryError as e:
        print('FAIL', repr((name, 'MemoryError %s; heap free %d' % (e, gc.mem_free()))))
        return
    m(x)
    gc.collect()
    print('RAM', repr((name, gc.mem_alloc() - a0, m.memory()['arena'])))
    for path in paths:
        if path not in kernels.available():
            continue
        kernels.use(path)
        m(x)
        out = m.tolist()
        whole = cycles(lambda: m(x), reps) - CALL
        print('ROW', repr((name, path, m.macs(), whole, sum(out))))
        K = m._K  # (the program's own table: its kinds' modules only)
        for kind, k in check.records(m.P):  # one line each: VWW leaves the Pico's heap nearly full
            print('OP', repr((name, path, check.word(check.NAMES, kind), kernels.record_macs(m.P, k),
                              cycles(lambda: K[kind](m, m.P, k), reps) - CALL)))
    del m
    gc.collect()
@micropython.asm_thumb
def _no_loop(r0):
    mov(r0, 0)
def loop_share(name, reps):
    # a layer's cycles against its assembler's: the op run as is, then with the Thumb kernels
    # (dots, dw; conv8, dw4: their MAC loops and requantization) replaced by an empty assembler
    # function (the difference: the assembler's cycles)
    from mpy_lazy import _thumb
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    kernels.use('thumb')
    m(bytes(m.inputs[0].size))
    kind, k = check.records(m.P)[0]
    K = m._K
    def run():
        K[kind](m, m.P, k)
    full = cycles(run, reps) - CALL
    names = ('dots', 'dw', 'conv8', 'dw4')
    saved = [getattr(_thumb, n) for n in names]
    for n in names:
        setattr(_thumb, n, _no_loop)
    try:
        rest = cycles(run, reps) - CALL
    finally:
        for n, f in zip(names, saved):
            setattr(_thumb, n, f)
    print('LOOP', repr((name, full, full - rest)))
def ulab_dot(n_out, n_in):
    try:
        from ulab import numpy as np
    except ImportError:
        return
    w = np.frombuffer(bytearray((i * 37) & 255 for i in range(n_out * n_in)), dtype=np.int8).reshape((n_out, n_in))
    x = np.zeros(n_in)
    c = cycles(lambda: np.dot(w, x), 3) - CALL
    print('ULAB', repr((n_out, n_in, c)))
'''


def run(uf2, image, macs, timeout):
    from firmware import rp2_run

    calls = []
    # the largest models first, while the heap is least fragmented
    for name, (kind, n) in sorted(macs.items(), key=lambda kv: kv[1][1] is not None):
        paths = ("thumb", "viper", "pure") if n is not None and n < 50000 else ("thumb", "viper")
        calls.append("report(%r, %r, %d)\n" % (name, paths, 2 if n is None else 3))
    calls.append("".join("loop_share(%r, 3)\n" % name for name, (_, n) in macs.items() if n is not None))
    calls.append("ulab_dot(64, 256)\nulab_dot(256, 64)\n")
    with tempfile.TemporaryDirectory() as tmp:
        pico = rp2_run.Pico(uf2, tmp)
        scripts = []
        for i, code in enumerate([BOARD] + calls):
            p = os.path.join(tmp, "s%d.py" % i)
            with open(p, "w") as f:
                f.write(code)
            scripts.append(p)
        rc, results, err = pico.run(scripts, image, timeout)
    if rc:
        raise SystemExit("bench-emulated: rp2040js exit %d: %s" % (rc, err.strip()[-600:]))
    rows, ulab, failed, loops, ram = [], [], [], {}, {}
    for r in results:
        if r.get("err"):
            raise SystemExit("bench-emulated: board error: %s" % r["err"][-600:])
        for line in r.get("out", "").splitlines():
            if line.startswith("ROW "):
                name, path, n, whole, total = eval(line[4:])
                rows.append((name, path, n, whole, [], total))
            elif line.startswith("OP "):
                name, path, op, n, c = eval(line[3:])
                rows[-1][4].append((op, n, c))
            elif line.startswith("ULAB "):
                ulab.append(eval(line[5:]))
            elif line.startswith("LOOP "):
                name, full, loop = eval(line[5:])
                loops[name] = (full, loop)
            elif line.startswith("FAIL "):
                failed.append(eval(line[5:]))
            elif line.startswith("RAM "):
                name, live, arena = eval(line[4:])
                ram[name] = (live, arena)
    return rows, ulab, failed, loops, ram


# The inner loops' floors, from their instructions and the M0+'s cycles (rp2040js's, the
# datasheet's: ldr/ldrsb/str 2, ldm 1 + N, taken branch 2, the rest 1; weights and inputs read
# with no wait state: the real Pico's XIP cache misses on flash are not modelled)
FLOORS = """floors of the inner loops (cycles per MAC from their instruction counts):
  conv8 (conv2d ohwi8, dense oi8): 2 input bytes x 8 outputs per iteration = 16 MACs in 73 cycles
    (per byte: ldrsb 2 + 2 x (ldr 2 + 4 x (mul 1 + add 1) + 6 sign-extracting shifts) + index 1;
    weight pointer 1, branch 2): 4.56 cycles/MAC; requantization 41 cycles per output (two
    16-bit products for |acc| < 2**15, else four: 61)
  dw4 (depthwise, 4 channels): one tap's 4 MACs in 30 cycles (ldm 2, 2 x ldr 2, 4 x mul + add,
    12 shifts, pointer 1, cmp + branch 3): 7.5 cycles/MAC, + 41 cycles per output of
    requantization (3x3: 4.6 per MAC): 12.1 cycles/MAC for a 3x3 layer
  a MAC on Thumb-1 is at least mul 1 + add 1 + 1 to extract a packed int8: 3 cycles/MAC"""


def table(rows, ulab, macs, loops):
    print("Cycles on the emulated Pico (rp2040js, 125 MHz; deterministic), one inference or op call")
    print("%-18s %-6s %10s %12s %9s %14s %9s" % ("kernel / model", "path", "MACs", "cycles", "cyc/MAC",
                                                  "sum of ops", "e2e/ops"))
    print("-" * 84)
    for name, path, n, whole, ops, _ in rows:
        label = macs[name][0]
        opsum = sum(c for _, _, c in ops)
        print("%-18s %-6s %10d %12d %9.1f %14d %9.2f" % (label, path, n, whole, whole / max(n, 1), opsum,
                                                         whole / max(opsum, 1)))
    for n_out, n_in, c in ulab:
        n = n_out * n_in
        print("%-18s %-6s %10d %12d %9.1f" % ("dense %dx%d" % (n_out, n_in), "ulab", n, c, c / n))
    print()
    print("thumb: one layer (the op's run: gathering, MAC loop, requantization) against its assembler kernel")
    print("(conv8 / dw4: MAC loop and requantization; dots: the MAC loop)")
    print("%-18s %10s %12s %9s %12s %9s %11s" % ("kernel", "MACs", "layer cyc", "cyc/MAC", "asm cyc",
                                                 "cyc/MAC", "layer/asm"))
    for name, (full, loop) in loops.items():
        kind, n = macs[name]
        print("%-18s %10d %12d %9.1f %12d %9.1f %11.2f" % (kind, n, full, full / n, loop, loop / n,
                                                          full / max(loop, 1)))
    print(FLOORS)
    print()
    sums = {}
    for name, path, _, _, _, total in rows:
        sums.setdefault(name, set()).add(total)
    bad = [macs[name][0] for name, t in sums.items() if len(t) > 1]
    print("outputs of every path agree" if not bad else "OUTPUTS DIFFER BETWEEN PATHS: %s" % ", ".join(bad))
    print()
    print("Per op of the whole models: op, MACs, cycles and cycles/MAC on thumb, then on viper")
    by = {(name, path): ops for name, path, _, _, ops, _ in rows}
    for name in sums:
        if macs[name][1] is not None or (name, "thumb") not in by:
            continue
        print("  %s:" % name)
        for (op, m, c), (_, _, v) in zip(by[(name, "thumb")], by.get((name, "viper"), [])):
            print("    %-10s %9d %11d %7s %11d %7s" % (op, m, c, "%.1f" % (c / m) if m else "", v,
                                                    "%.1f" % (v / m) if m else ""))


def ram_table(ram, macs):
    """The models' RAM on the board (32-bit objects) against TFLM's arena for the same .tflite
    (tflite-micro from PyPI: an x64 build, whose own structures hold 64-bit pointers)."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tflm_ref

    print()
    print("RAM on the emulated Pico: heap the model keeps after its first inference (arena and")
    print("objects, mpy_lazy.open to m(x); the caller's input not counted), against TFLM's arena")
    print("%-18s %10s %10s %10s %12s %8s" % ("model", "mpy-lazy", "arena", "objects", "TFLM arena", "<= +1KB"))
    for name, (live, arena) in ram.items():
        if macs[name][1] is not None:
            continue  # a one-op graph: no .tflite
        t = tflm_ref.arena_bytes(os.path.join(TFLITE, name + ".tflite"))
        print("%-18s %10d %10d %10d %12d %8s" % (macs[name][0], live, arena, live - arena, t,
                                                "ok" if live <= arena + 1024 else "no"))


# --- the peer: TFLite Micro on the same .tflite files -------------------------------------------

PEER_BOARD = r'''
import gc, machine
B0 = 0
def warm(name):
    # a fresh boot: the runtime and the rooms (ops modules) this model's kinds need are imported
    # by a warm-up build and inference of the same model, then dropped; what stays (modules,
    # classes, the kernels table, names interned by the first build) is the import heap, counted
    # apart from the model's own heap. Its own script: the REPL between scripts overwrites the C
    # stack, so no stale word keeps the dropped model reachable while the model is measured.
    global B0
    gc.collect()
    B0 = gc.mem_alloc()
    import mpy_lazy
    from mpy_lazy import model, kernels
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    kernels.use('thumb')
    m(open('/rom/%s.in' % name, 'rb').read())
def peer(name):
    import mpy_lazy
    from mpy_lazy import model, kernels
    gc.collect()
    imported = gc.mem_alloc() - B0
    x = open('/rom/%s.in' % name, 'rb').read()
    gc.collect()
    a0 = gc.mem_alloc()  # the model's RAM: open, from_container and the first inference
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    kernels.use('thumb')
    m(x)
    gc.collect()
    kept = gc.mem_alloc() - a0
    a1 = gc.mem_alloc()
    machine.mem32[0x4005800C] = 3
    m(x)
    machine.mem32[0x4005800C] = 4
    a2 = gc.mem_alloc()
    print('PEER', repr((name, m.macs(), kept, m.memory()['arena'], a2 - a1, bytes(m.output).hex(), imported)))
    del m
    gc.collect()
'''


def run_peer(uf2, tflm_uf2, timeout, only=None):
    """Both sides on the peer models (bench/tflm_pico.py's peer_models: MLPerf Tiny's own files and
    person_detect): [row dicts], [(name, why skipped)], the TFLM side's reason for being absent (or
    None). One boot per model, its container and input alone in the ROMFS image (together they
    outgrow the partition). only: the names to run (None: all)."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import tflm_pico
    import tflm_ref
    from firmware import rp2_run
    from host_tools.romfs import build_image

    with tempfile.TemporaryDirectory() as tmp:
        srcs, skipped = tflm_pico.peer_models(tmp)
        srcs = {name: src for name, src in srcs if only is None or name in only}
        board = os.path.join(tmp, "board.py")
        with open(board, "w") as f:
            f.write(PEER_BOARD)
        pico = rp2_run.Pico(uf2, tmp)
        rows, inputs = [], {}
        for name, src in srcs.items():
            path = os.path.join(tmp, name + ".mpyl")
            if cli.main(["pack", src, "-o", path, "-q"]):
                raise SystemExit("bench-emulated: packing %s failed" % src)
            x = tflm_ref.sample_inputs(src, 1, seed=3)[0]
            inputs[name] = x
            with open(path, "rb") as f:
                container = f.read()
            image = os.path.join(tmp, name + ".romfs")
            with open(image, "wb") as f:
                f.write(build_image([(name + ".mpyl", container), (name + ".in", x.tobytes())])[0])
            scripts = []
            for step in ("warm", "peer"):  # one script each (PEER_BOARD's warm)
                scripts.append(os.path.join(tmp, "%s_%s.py" % (step, name)))
                with open(scripts[-1], "w") as f:
                    f.write("%s(%r)\n" % (step, name))
            rc, results, err = pico.run([board] + scripts, image, timeout)
            if rc:
                raise SystemExit("bench-emulated: rp2040js exit %d on %s: %s" % (rc, name, err.strip()[-600:]))
            r = [r for r in results if "script" in r][-1]
            if r.get("err"):
                raise SystemExit("bench-emulated: board error on %s: %s" % (name, r["err"][-600:]))
            line = [ln for ln in r["out"].splitlines() if ln.startswith("PEER ")][0]
            _, macs, kept, arena, alloc, out, imported = eval(line[5:])
            marks = r.get("marks", {})
            rows.append(dict(name=name, macs=macs, kept=kept, arena=arena, alloc=alloc, out=bytes.fromhex(out),
                             imported=imported, cycles=marks["4"] - marks["3"], container=len(container)))
        firmware = rp2_run.LAYOUT.uf2_end(uf2)
        why = None if tflm_uf2 and os.path.exists(tflm_uf2) else (
            "TFLM_PICO_UF2 is not set" if not tflm_uf2 else "TFLM_PICO_UF2=%s does not exist" % tflm_uf2)
        for row in rows:
            row["firmware"] = firmware
            src = srcs[row["name"]]
            want = tflm_ref.run(src, [inputs[row["name"]]])[0]
            row["wheel"] = (want[0] if isinstance(want, tuple) else want).tobytes()
            if why is None:
                try:
                    row["tflm"] = tflm_pico.run(tflm_uf2, src, inputs[row["name"]].tobytes(), timeout=timeout)
                except tflm_pico.TflmPicoError as e:
                    row["tflm_error"] = str(e)
    return rows, skipped, why


def peer_table(rows, skipped, why):
    """Prints the table; returns the targets missed."""
    import tflm_pico  # on sys.path since run_peer

    print("mpy-lazy (thumb path) against TensorFlow Lite Micro (pico-tflmicro, CMSIS-NN, -O3, core 0) on the")
    print("emulated Pico (rp2040js, 125 MHz): one inference between the same two marks, same .tflite, same input")
    if why:
        print("(TFLM columns skipped: %s; build the TFLM firmware with make tflm-pico: docs/FIRMWARE.md)" % why)
    print("%-45s %9s %12s %12s %6s %9s %11s %15s %7s %6s %17s %17s" % (
        "model", "MACs", "TFLM cycles", "mpy-lazy", "ratio", "outputs", "TFLM arena", "heap (arena)", "import",
        "B/inf", "TFLM flash", "mpy-lazy flash"))
    missed = []
    for r in rows:
        t = r.get("tflm")
        same = r["out"] == r["wheel"] and (t is None or t["output"] == r["out"])
        ratio = r["cycles"] / t["cycles"] if t else None
        print("%-45s %9d %12s %12d %6s %9s %11s %15s %7d %6d %17s %17s" % (
            tflm_pico.label(r["name"]), r["macs"], t["cycles"] if t else "-", r["cycles"], "%.2f" % ratio if t else "-",
            "identical" if same else "DIFFER", t["arena_used"] if t else "-", "%d (%d)" % (r["kept"], r["arena"]),
            r["imported"], r["alloc"], "%d+%d" % (t["flash_firmware"], t["model_bytes"]) if t else "-",
            "%d+%d" % (r["firmware"], r["container"])))
        if "tflm_error" in r:
            print("  TFLM: %s" % r["tflm_error"])
        for bad, what in ((not same, "outputs differ"), (ratio is not None and ratio > 1.0, "slower than TFLM"),
                          (r["kept"] > r["arena"] + 1024, "heap kept > arena + 1 KB"),
                          (r["alloc"] != 0, "allocates per inference")):
            if bad:
                missed.append("%s: %s" % (r["name"], what))
    print("heap: what the model keeps after its first inference (open, from_container, m(x)), measured after a")
    print("warm-up build of the same model, dropped; import: what that warm-up left from a fresh boot (the runtime,")
    print("the model's rooms, the kernels table, names interned by a first build): the model's code, not its RAM")
    print("flash: firmware + model (TFLM: the UF2's extent, one firmware for every model, and the .tflite,")
    print("read in place; mpy-lazy: the MicroPython firmware with the runtime frozen in, and the container)")
    for name, reason in skipped:
        print("%s skipped: %s" % (name, reason))
    print("targets (mpy-lazy / TFLM <= 1.00, outputs identical, heap kept <= arena + 1 KB, 0 B per "
          "inference): %s" % ("ok" if not missed else "MISSED: " + "; ".join(missed)))
    print()
    return missed


# --- cycles per MAC by layer type, against TFLite Micro (issue 31) ------------------------------
# One-op int8 .tflite models at the MLPerf Tiny models' own layer shapes, written with TFLM's
# schema module (tests/host/test_tflite_elem.py's model/_opts), run through both firmwares:
# TFLM's Invoke() against mpy-lazy's op (its record's kernel call) and whole m(x) (the input copy
# included), each between two marks; the outputs compared byte for byte.
LAYERS = (  # name, op, input HWC (dense: (1, 1, IN)), OC, kernel, stride
    ("1x1 conv 64->64, 25x5 (KWS)", "conv", (25, 5, 64), 64, 1, 1),
    ("1x1 conv 8->16, 48x48 (VWW)", "conv", (48, 48, 8), 16, 1, 1),
    ("3x3 conv 16->16, 32x32 (ResNet-8)", "conv", (32, 32, 16), 16, 3, 1),
    ("3x3 conv 3->8 s2, 96x96 (VWW)", "conv", (96, 96, 3), 8, 3, 2),
    ("depthwise 3x3, 25x5x64 (KWS)", "depthwise", (25, 5, 64), 64, 3, 1),
    ("depthwise 3x3, 48x48x8 (VWW)", "depthwise", (48, 48, 8), 8, 3, 1),
    ("dense 640->128 (AD)", "dense", (1, 1, 640), 128, 1, 1),
)


def layer_tflite(op, hwc, oc, k, stride, seed):
    """A one-op int8 .tflite (bytes), its input (int8 array) and MACs: seeded weights and inputs,
    output scale set from the accumulators' spread so the outputs use the int8 range."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
    from test_tflite_elem import S, _opts, model

    rng = np.random.default_rng(seed)
    h, w, c = hwc
    sx, zx, sw = 0.02, -128, 0.01
    x = rng.integers(-128, 128, (1, h, w, c)).astype(np.int8)
    if op == "dense":
        wshape, taps = (oc, c), c
        shapes, macs = [(1, c), (1, oc)], c * oc
    else:
        oh, ow = -(-h // stride), -(-w // stride)  # padding SAME
        wshape = (1, k, k, c) if op == "depthwise" else (oc, k, k, c)
        taps = k * k * (1 if op == "depthwise" else c)
        shapes, macs = [(1, h, w, c), (1, oh, ow, oc)], oh * ow * oc * taps
    wt = rng.integers(-127, 128, wshape).astype(np.int8)
    bias = rng.integers(-2000, 2000, oc).astype(np.int32)
    sy = sx * sw * np.sqrt(taps) * 147 * 73 / 40  # ~ the accumulators' spread over 40 codes
    tensors = [(shapes[0], "i8", (sx, zx), None), (wshape, "i8", (sw, 0), wt), ((oc,), "i32", (sx * sw, 0), bias),
               (shapes[1], "i8", (sy, -3), None)]
    if op == "dense":
        code, opts = S.BuiltinOperator.FULLY_CONNECTED, _opts("FullyConnectedOptions", fusedActivationFunction=0)
        x = x.reshape(1, c)
    elif op == "depthwise":
        code = S.BuiltinOperator.DEPTHWISE_CONV_2D
        opts = _opts("DepthwiseConv2DOptions", padding=S.Padding.SAME, strideW=stride, strideH=stride,
                     depthMultiplier=1, dilationWFactor=1, dilationHFactor=1)
    else:
        code = S.BuiltinOperator.CONV_2D
        opts = _opts("Conv2DOptions", padding=S.Padding.SAME, strideW=stride, strideH=stride,
                     dilationWFactor=1, dilationHFactor=1)
    return model(code, tensors, [0], [3], [0, 1, 2], opts), x, macs


LAYER_BOARD = r"""
import gc, machine
def layer(name):
    import mpy_lazy
    from mpy_lazy import model, kernels, check
    gc.collect()
    x = open('/rom/%s.in' % name, 'rb').read()
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    kernels.use('thumb')
    m(x)
    K = m._K
    kind, k = max(check.records(m.P), key=lambda r: kernels.record_macs(m.P, r[1]))
    machine.mem32[0x4005800C] = 5
    K[kind](m, m.P, k)
    machine.mem32[0x4005800C] = 6
    machine.mem32[0x4005800C] = 3
    m(x)
    machine.mem32[0x4005800C] = 4
    h = 0  # the output's int8 values folded into one int (its bytes as hex would not fit the heap)
    out = m.output
    for j in range(m.outputs[0].size):
        h = (h * 31 + out[j] + 128) % 1000003
    print('LAYER', repr((name, h)))
    del m, x
    gc.collect()
"""


def _fold(y):
    """LAYER_BOARD's digest of int8 output bytes."""
    h = 0
    for v in np.frombuffer(y, np.int8).tolist():
        h = (h * 31 + v + 128) % 1000003
    return h


def layers(uf2, tflm_uf2, timeout):
    """Runs LAYERS on both firmwares and prints the table (TFLM's columns need tflm_uf2)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import tflm_pico
    from firmware import rp2_run
    from host_tools.romfs import build_image

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files, srcs = [], {}
        for i, (label, op, hwc, oc, k, stride) in enumerate(LAYERS):
            name = "layer%d" % i
            data, x, macs = layer_tflite(op, hwc, oc, k, stride, i)
            src = os.path.join(tmp, name + ".tflite")
            with open(src, "wb") as f:
                f.write(data)
            path = os.path.join(tmp, name + ".mpyl")
            if cli.main(["pack", src, "-o", path, "-q"]):
                raise SystemExit("bench-emulated: packing %s failed" % label)
            with open(path, "rb") as f:
                files += [(name + ".mpyl", f.read()), (name + ".in", x.tobytes())]
            srcs[name] = (label, src, x, macs)
        image = os.path.join(tmp, "layers.romfs")
        with open(image, "wb") as f:
            f.write(build_image(files)[0])
        scripts = [os.path.join(tmp, "board.py")]
        with open(scripts[0], "w") as f:
            f.write(LAYER_BOARD)
        for name in srcs:
            scripts.append(os.path.join(tmp, "run_%s.py" % name))
            with open(scripts[-1], "w") as f:
                f.write("layer(%r)\n" % name)
        rc, results, err = rp2_run.Pico(uf2, tmp).run(scripts, image, timeout)
        if rc:
            raise SystemExit("bench-emulated: rp2040js exit %d: %s" % (rc, err.strip()[-600:]))
        for r in [r for r in results if "script" in r][1:]:  # (after board.py)
            if r.get("err"):
                raise SystemExit("bench-emulated: board error: %s" % r["err"][-600:])
            line = [ln for ln in r["out"].splitlines() if ln.startswith("LAYER ")][0]
            name, digest = eval(line[6:])
            label, src, x, macs = srcs[name]
            marks = r["marks"]
            row = dict(label=label, macs=macs, op=marks["6"] - marks["5"], whole=marks["4"] - marks["3"],
                       digest=digest)
            if tflm_uf2 and os.path.exists(tflm_uf2):
                t = tflm_pico.run(tflm_uf2, src, x.tobytes(), timeout=timeout)
                row["tflm"], row["same"] = t["cycles"], _fold(t["output"]) == digest
            rows.append(row)
    print("Cycles per MAC by layer type on the emulated Pico (rp2040js): one-op int8 .tflite models at the MLPerf")
    print("Tiny models' layer shapes; TFLM: Invoke() (pico-tflmicro, CMSIS-NN); mpy-lazy: the op's kernel call, and")
    print("m(x) (+ the input copy)")
    print("%-36s %8s %11s %7s %11s %7s %11s %7s %6s %9s" % (
        "layer", "MACs", "TFLM cyc", "c/MAC", "op cyc", "c/MAC", "m(x) cyc", "c/MAC", "ratio", "outputs"))
    for r in rows:
        t = r.get("tflm")
        print("%-36s %8d %11s %7s %11d %7.2f %11d %7.2f %6s %9s" % (
            r["label"], r["macs"], t or "-", "%.2f" % (t / r["macs"]) if t else "-", r["op"], r["op"] / r["macs"],
            r["whole"], r["whole"] / r["macs"], "%.2f" % (r["op"] / t) if t else "-",
            "-" if not t else "identical" if r["same"] else "DIFFER"))
    print("ratio: mpy-lazy's op / TFLM's Invoke()")
    return [r["label"] for r in rows if r.get("tflm") and not r["same"]]


# --- LSTM and 16x8 models on the emulated Pico: RAM and bytes per inference (issue 20) ----------
# Self-contained (its own ROMFS image and boot): the models' heap on the board against the arena
# TFLM uses for the same .tflite, and what one inference allocates. tflite-micro's third-party
# fixtures (tests/golden/thirdparty): the micro_speech LSTM keyword spotter (int8, 80 units, 49
# steps), the MNIST LSTM (int8, 20 units, 28 steps), SEANet's conv0 layer quantized 16x8 (int16
# activations, int8 weights). TFLM's figure is arena_used_bytes() of the tflite-micro wheel's
# interpreter (an x64 build: its persistent structs hold 64-bit pointers, larger than on the
# Pico) after one invoke: the RecordingMicroAllocator's "Arena allocation total"
# (tests/tflm_ref.allocation_report).
THIRDPARTY = os.path.join(ROOT, "tests", "golden", "thirdparty", "tflite-micro")
RNN_16X8 = (("micro_speech_lstm", "int8 LSTM"), ("mnist_lstm_int8", "int8 LSTM"), ("seanet_conv0", "16x8 conv"))
RNN_16X8_SLACK = 2048  # target: mpy-lazy's heap <= TFLM's arena + 2 KB

RNN_16X8_BOARD = r"""
import gc, time, array
import mpy_lazy
from mpy_lazy import model, kernels, program, check, backend, kinds, _arith
for _m in ('conv', 'linear', 'binary', 'pool', 'mean', 'act', 'reshape', 'concat', 'pad', 'softmax', 'quant',
           'lstm', 'svdf', 'tconv', 'slice', 'cast', 'elementwise'):
    __import__('mpy_lazy.ops.' + _m)
try:
    from mpy_lazy import _viper_recurrent
except ImportError:
    pass
def digest(m):
    # the output's values folded into one small int (no list of them: SEANet's are 35,840)
    out = m.output
    h = 0
    for j in range(m.outputs[0].size):
        h = (h * 31 + out[j] + 40000) % 1000003
    return h
def _input(name, i16):
    # in a function of its own: the file's bytes, garbage once the array is made, must not stay
    # in a slot of rnn16's frame (the GC scans frames conservatively; a stale reference freed
    # while the model is measured made its heap read 5 KB low)
    with open('/rom/%s.in' % name, 'rb') as f:
        data = f.read()
    return array.array('h', data) if i16 else data
def rnn16(name, paths, i16):
    x = _input(name, i16)  # the caller's input: not the model's RAM
    # one model per boot, the runtime's modules imported above (frozen: what their import keeps
    # is the runtime's, not the model's), and no warm-up model: a dropped model's arena can stay
    # reachable from a stale word on the C stack (the GC is conservative) until other code
    # overwrites it, and a warm-up freed during the measurement made the figure read low
    gc.collect()
    a0 = gc.mem_alloc()
    m = model.from_container(mpy_lazy.open('/rom/%s.mpyl' % name))
    kernels.use(paths[0])
    m(x)
    gc.collect()
    kept = gc.mem_alloc() - a0
    first = digest(m)
    for path in paths:
        kernels.use(path)
        m.reset()
        m(x)  # the first call on a path prepares it
        m.reset()
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        t = time.ticks_us()
        m(x)
        us = time.ticks_diff(time.ticks_us(), t)
        alloc = gc.mem_alloc() - a
        gc.enable()
        y1 = digest(m)
        m(x)  # state carried over (the LSTMs): TFLM's second invoke
        y2 = digest(m)
        print('RNN16', repr((name, path, kept, m.memory()['arena'], alloc, us * 125, m.macs(), first, y1, y2)))
    m = None
    gc.collect()
"""


def _digest(y):
    """The board's digest() of an output: its values in order, folded into one small int."""
    h = 0
    for v in np.asarray(y).ravel().tolist():
        h = (h * 31 + int(v) + 40000) % 1000003
    return h


def rnn_16x8(uf2, timeout):
    """Runs the section on the emulated Pico and prints its table; returns the misses."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tflm_ref
    from firmware import rp2_run
    from host_tools.romfs import build_image

    files, expect, i16 = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, _ in RNN_16X8:
            src = os.path.join(THIRDPARTY, name + ".tflite")
            path = os.path.join(tmp, name + ".mpyl")
            if cli.main(["pack", src, "-o", path, "-q"]):
                raise SystemExit("bench-emulated: packing %s failed" % src)
            x = tflm_ref.sample_inputs(src, 1, seed=2026)[0]
            i16[name] = x.dtype == np.int16
            y = tflm_ref.run(src, [x, x])  # two invokes on one interpreter: the state carried over
            expect[name] = (_digest(y[0]), _digest(y[1]), tflm_ref.allocation_report(src)["total"])
            with open(path, "rb") as f:
                files.append((name + ".mpyl", f.read()))
            files.append((name + ".in", x.tobytes()))
        image = os.path.join(tmp, "rnn16.romfs")
        with open(image, "wb") as f:
            f.write(build_image(files)[0])
        board = os.path.join(tmp, "board.py")
        with open(board, "w") as f:
            f.write(RNN_16X8_BOARD)
        pico = rp2_run.Pico(uf2, tmp)
        rows = []
        for name, _ in RNN_16X8:  # one boot per model
            call = os.path.join(tmp, "call.py")
            with open(call, "w") as f:
                f.write("rnn16(%r, ('thumb', 'viper'), %r)\n" % (name, i16[name]))
            rc, results, err = pico.run([board, call], image, timeout)
            if rc:
                raise SystemExit("bench-emulated: rp2040js exit %d: %s" % (rc, err.strip()[-600:]))
            for r in results:
                if r.get("err"):
                    raise SystemExit("bench-emulated: board error: %s" % r["err"][-600:])
                rows += [eval(line[6:]) for line in r.get("out", "").splitlines() if line.startswith("RNN16 ")]
    print()
    print("LSTM and 16x8 models on the emulated Pico (tflite-micro's fixtures, seeded input): heap the model")
    print("keeps after its first inference (mpy_lazy.open to m(x): arena, state and objects; the caller's")
    print("input not counted), bytes one inference allocates (gc off), cycles of one inference; TFLM arena:")
    print("arena_used_bytes() of the tflite-micro wheel's interpreter after one invoke (an x64 build: 64-bit")
    print("pointers in its structs); outputs: both inferences (the state carried over) equal TFLM's")
    print("%-20s %-9s %-6s %9s %7s %10s %9s %10s %9s %5s %8s" % (
        "model", "kind", "path", "mpy heap", "arena", "TFLM arena", "<= +2KB", "B/inf", "cycles", "c/MAC",
        "outputs"))
    misses = []
    kinds = dict(RNN_16X8)
    for name, path, kept, arena, alloc, cyc, macs, first, y1, y2 in rows:
        e1, e2, tflm_arena = expect[name]
        ok_out = first == y1 == e1 and y2 == e2
        ok_ram = kept <= tflm_arena + RNN_16X8_SLACK
        print("%-20s %-9s %-6s %9d %7d %10d %9s %10d %9d %5.1f %8s" % (
            name, kinds[name], path, kept, arena, tflm_arena, "[%s]" % ("ok" if ok_ram else "FAIL"), alloc, cyc,
            cyc / max(macs, 1), "TFLM's" if ok_out else "DIFFER"))
        if not ok_out:
            misses.append("%s %s: outputs differ from TFLM's" % (name, path))
        if not ok_ram:
            misses.append("%s: heap %d > TFLM arena %d + %d" % (name, kept, tflm_arena, RNN_16X8_SLACK))
        if alloc:
            misses.append("%s %s: %d bytes per inference" % (name, path, alloc))
    if len(rows) != 2 * len(RNN_16X8):
        misses.append("%d of %d rows came back" % (len(rows), 2 * len(RNN_16X8)))
    print("targets (0 B per inference, heap <= TFLM arena + 2 KB, TFLM's outputs): %s"
          % ("all met" if not misses else "MISS: " + "; ".join(misses)))
    return misses


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/emulated.py", description=__doc__.split("\n")[0])
    ap.add_argument("--uf2", default=os.environ.get("MPY_LAZY_RP2_UF2"))
    ap.add_argument("--tflm-uf2", default=os.environ.get("TFLM_PICO_UF2"),
                    help="TFLite Micro's firmware for the peer columns (firmware/tflm_pico/NOTES.md)")
    ap.add_argument("--peer", action="store_true", help="only the table against TFLite Micro")
    ap.add_argument("--layers", action="store_true",
                    help="only the cycles per MAC by layer type (one-op models), against TFLite Micro")
    ap.add_argument("--models", help="comma-separated peer models to run (default: all; e.g. kws_ref_model)")
    ap.add_argument("--timeout", type=int, default=3600)
    args = ap.parse_args(argv)
    if not args.uf2 or not os.path.exists(args.uf2):
        print("bench-emulated: no RP2040 firmware: set MPY_LAZY_RP2_UF2 (make firmware BOARD=RPI_PICO_MPY_LAZY)")
        return 1
    if args.layers:
        return 1 if layers(args.uf2, args.tflm_uf2, args.timeout) else 0
    only = set(args.models.split(",")) if args.models else None
    missed = peer_table(*run_peer(args.uf2, args.tflm_uf2, args.timeout, only))
    missed += ["%s: outputs differ" % name for name in layers(args.uf2, args.tflm_uf2, args.timeout)]
    print()
    if args.peer:
        return 1 if missed else 0
    with tempfile.TemporaryDirectory() as tmp:
        image, macs = build(tmp)
        rows, ulab, failed, loops, ram = run(args.uf2, image, macs, args.timeout)
    table(rows, ulab, macs, loops)
    ram_table(ram, macs)
    for name, why in failed:
        print("%s did not run on the board: %s" % (name, why))
    misses = rnn_16x8(args.uf2, args.timeout)  # LSTM and 16x8 models: RAM, B/inf (section above)
    return 1 if failed or missed or misses else 0


if __name__ == "__main__":
    sys.exit(main())
