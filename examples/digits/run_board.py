# Runs on MicroPython (the unix port here, or a board): mount the ROMFS image, open each model
# container in place, build the model from its layer description, run the held-out test set.
#
#   micropython run_board.py IMAGE [PATH ...]     (unix port: the image file stands in for flash)
#   on a board with the image in its ROMFS partition: import run_board; run_board.main()
#   (firmware/emulate_digits.py sends this file's functions over the raw REPL, then calls main)
#
# PATH: kernel paths to run ('ulab', 'viper', 'pure'; default: the best available).
# A path may carry a sample limit, e.g. pure:60 (every (360/60)th test image).
# main(only=[...]) runs only the named containers (e.g. ['mlp-int8']).
# Prints per model x path:  RESULT <container> <path> <correct> <n> <ms/image>
#                           HEAP <container> <path> open+bind=B after_forward=B free=B macs=N
import gc
import sys
import time

import mpy_lazy
from mpy_lazy import model, nn


def mount(image=None, where="/rom"):
    import vfs

    if image is not None:  # unix port: read the image into RAM; on a board it is in flash
        with open(image, "rb") as f:
            buf = f.read()
        vfs.mount(vfs.VfsRom(buf), where)
    return where


def evaluate(m, xs, ys, scale, step=1):
    n = len(ys)
    row = len(xs) // n
    inp = nn._new(row)
    correct = 0
    done = 0
    for i in range(0, n, step):
        k = i * row
        for j in range(row):
            inp[j] = xs[k + j] * scale
        if m.predict(inp) == ys[i]:
            correct += 1
        done += 1
    return correct, done


def main(image=None, paths=None, where="/rom", only=None):
    import os

    root = mount(image, where)
    test = mpy_lazy.open(root + "/test.mpyl")
    xs = test.view("x").array()
    ys = test.view("y").array()
    scale = float(test.meta["input_scale"])
    files = sorted(f for f in os.listdir(root) if f.endswith(".mpyl") and f != "test.mpyl")
    if only:
        files = [f for f in files if f[:-5] in only]
    paths = paths or [nn.available()[0]]
    for fname in files:
        gc.collect()
        before = gc.mem_alloc()
        c = mpy_lazy.open(root + "/" + fname)
        m = model.from_container(c)
        gc.collect()
        bound = gc.mem_alloc() - before
        for spec in paths:
            name, _, limit = spec.partition(":")
            nn.use(name)
            step = max(1, len(ys) // int(limit)) if limit else 1
            m(nn._new(64) if name != "ulab" else [0.0] * 64)  # first call allocates buffers
            gc.collect()
            live = gc.mem_alloc()
            t = time.ticks_ms()
            correct, n = evaluate(m, xs, ys, scale, step)
            ms = time.ticks_diff(time.ticks_ms(), t) / n
            gc.collect()
            print("RESULT %s %s %d %d %.3f" % (fname[:-5], name, correct, n, ms))
            print("HEAP %s %s open+bind=%d after_forward=%d free=%d macs=%d" % (
                fname[:-5], name, bound, live - before, gc.mem_free(), m.macs()))
        print("REPORT", fname[:-5])
        mpy_lazy.report(m)
        del m, c


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: micropython run_board.py IMAGE [PATH[:N] ...]")
        sys.exit(2)
    main(sys.argv[1], sys.argv[2:] or None)
