# Runs on MicroPython (the unix port here, or a board): mount the ROMFS image, open each model
# container in place, build the model from its graph description (model.from_container), run
# the held-out test set.
#
#   micropython run_board.py IMAGE [PATH ...]     (unix port: the image file stands in for flash)
#   on a board with the image in its ROMFS partition: import run_board; run_board.main()
#   (firmware/emulate_digits.py sends this file's functions over the raw REPL, then calls main)
#
# PATH: kernel paths to run ('ulab', 'viper', 'pure'; default: the best available).
# A path may carry a sample limit, e.g. pure:60 (every (360/60)th test image).
# main(only=[...]) runs only the named containers (e.g. ['mlp-int8']).
#
# The input: test.mpyl holds the images as uint8 pixels 0..16 (x, N*64) and the labels (y); the
# models see pixel * input_scale (1/16). A 17-entry table per model maps a pixel to the model's
# input value: that float for a float input; for an int8 input (int8 ONNX pipeline, .tflite) the
# float quantized with the input's own (scale, zero_point), round half away from zero (TFLite's
# QUANTIZE), saturated to -128..127: the same integers m.quantize() would store. Each image is
# written straight into the model's input in the arena (m.input, HWC order), nothing allocated.
#
# Prints per model x path:
#   RESULT <container> <path> <correct> <n> <ms/image>
#   HEAP <container> <path> open+bind=B after_forward=B free=B macs=N arena=B scratch=B
#        per_inf=B model=B
#   PRED <container> <path> <one predicted digit per image evaluated>
# and per model:
#   LUT <container> <17 input values, pixel 0..16>
#   REPORT <container>  followed by mpy_lazy.report(m)'s table, then  END <container>
# Heap figures are measured after warm_up() (see there). open+bind: heap held by mpy_lazy.open
# + the model's declaration + binding its weights (no arena yet); model: all the model keeps
# after prepare (adds the arena and scratch); after_forward: all it keeps after a first forward
# pass on this path; per_inf: heap allocated by one inference (fill + forward + argmax) with the
# GC off, -1 when that is more than the free heap (the unix port boxes floats: float models
# allocate there, boards built with 32-bit floats less; int8 models nothing on viper).
import gc
import sys
import time

import mpy_lazy
from mpy_lazy import kernels, model


def mount(image=None, where="/rom"):
    import vfs

    if image is not None:  # unix port: read the image into RAM; on a board it is in flash
        with open(image, "rb") as f:
            buf = f.read()
        vfs.mount(vfs.VfsRom(buf), where)
    return where


def quantize(f, q):
    """round(f / scale) + zero_point, half away from zero, saturated to int8."""
    r = f / q[0]
    r = int(r + 0.5) if r >= 0 else -int(0.5 - r)
    r += q[1]
    return -128 if r < -128 else (127 if r > 127 else r)


def input_table(m, scale, levels=17):
    """The model's input value for each pixel level 0..levels-1 (see the header)."""
    v = m.inputs[0]
    if v.dtype == "i8":
        return [quantize(p * scale, v.q) for p in range(levels)]
    return [p * scale for p in range(levels)]


def input_order(m):
    """Where the j-th value of an image (row-major C, H, W order, as the test set stores it)
    goes in m.input (H, W, C order); the identity for one channel."""
    v = m.inputs[0]
    n = v.size
    c = v.shape[-1]
    if c == 1 or m.layouts[0] != "chw":
        return list(range(n))
    hw = n // c
    return [(j % hw) * c + j // hw for j in range(n)]


def evaluate(m, xs, ys, table, order, step=1, preds=None):
    """(correct, evaluated) over every step-th image; preds (a bytearray) gets each prediction
    as an ASCII digit."""
    n = len(ys)
    row = len(order)
    inp = m.input
    correct = 0
    done = 0
    for i in range(0, n, step):
        k = i * row
        for j in range(row):
            inp[order[j]] = table[xs[k + j]]
        p = m.predict(inp)
        if preds is not None:
            preds[done] = 48 + p  # ASCII digit
        if p == ys[i]:
            correct += 1
        done += 1
    return correct, done


def one_alloc(m, xs, table, order):
    """Heap allocated by one inference (fill, forward, argmax), GC off; -1 if that is more
    than the free heap."""
    gc.collect()
    gc.disable()
    try:
        a = gc.mem_alloc()
        inp = m.input
        for j in range(len(order)):
            inp[order[j]] = table[xs[j]]
        m.predict(inp)
        return gc.mem_alloc() - a
    except MemoryError:
        return -1
    finally:
        gc.enable()


def warm_up(path):
    """Declare, bind, prepare and run the model once, then drop it: the op modules it imports
    and the names the interpreter interns on first use are the runtime's, not the model's, so
    the heap figures measured next do not depend on which model ran first."""
    m = model.from_container(mpy_lazy.open(path))
    m()
    del m
    gc.collect()


def run_container(root, fname, paths, xs, ys, scale, preds):
    """One container on every path (its own function: nothing of it outlives the call, so
    the next container's heap figures start clean)."""
    name = fname[:-5]
    kernels.use(None)
    warm_up(root + "/" + fname)
    gc.collect()
    before = gc.mem_alloc()
    c = mpy_lazy.open(root + "/" + fname)
    m = model.declare(c)
    m.load(c)
    gc.collect()
    bound = gc.mem_alloc() - before
    m.prepare()
    gc.collect()
    prepared = gc.mem_alloc() - before
    table = input_table(m, scale)
    order = input_order(m)
    gc.collect()
    aux = gc.mem_alloc() - before - prepared  # the harness's table and order: not the model's
    print("LUT", name, " ".join(str(v) for v in table))
    for spec in paths:
        path, _, limit = spec.partition(":")
        kernels.use(path)
        step = max(1, len(ys) // int(limit)) if limit else 1
        m()  # prepares the ops for this path (new input/output views) and runs once
        evaluate(m, xs, ys, table, order, len(ys))  # one image
        gc.collect()
        live = gc.mem_alloc()
        per_inf = one_alloc(m, xs, table, order)
        t = time.ticks_ms()
        correct, n = evaluate(m, xs, ys, table, order, step, preds)
        ms = time.ticks_diff(time.ticks_ms(), t) / n
        mem = m.memory()
        gc.collect()
        print("RESULT %s %s %d %d %.3f" % (name, path, correct, n, ms))
        print("HEAP %s %s open+bind=%d after_forward=%d free=%d macs=%d arena=%d scratch=%d "
              "per_inf=%d model=%d" % (name, path, bound, live - before - aux, gc.mem_free(),
                                       m.macs(), mem["arena"], mem["scratch"], per_inf, prepared))
        print("PRED %s %s %s" % (name, path, str(bytes(preds[:n]), "ascii")))
    print("REPORT", name)
    mpy_lazy.report(m)
    print("END", name)


def main(image=None, paths=None, where="/rom", only=None):
    import os

    root = mount(image, where)
    test = mpy_lazy.open(root + "/test.mpyl")
    xs = test.view("x").mv  # u8: a memoryview of the bytes indexes to ints, allocating nothing
    ys = test.view("y").mv  # (a ulab ndarray would box every element it returns)
    scale = float(test.meta["input_scale"])
    files = sorted(f for f in os.listdir(root) if f.endswith(".mpyl") and f != "test.mpyl")
    if only:
        files = [f for f in files if f[:-5] in only]
    paths = paths or [kernels.available()[0]]
    preds = bytearray(len(ys))
    for fname in files:
        run_container(root, fname, paths, xs, ys, scale, preds)
        gc.collect()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: micropython run_board.py IMAGE [PATH[:N] ...]")
        sys.exit(2)
    main(sys.argv[1], sys.argv[2:] or None)
