"""The arena of a model with many ops fits where the heap has room for it: declaring a Model
spreads the ops' objects over the heap, with the garbage of parsing each line between them, so
the arena's one block can find no hole even when the free total is ample (seen on the emulated
Pico with VWW: 180 KB free, 64.5 KB arena refused). A stored program (mpy_lazy/program.py)
makes no object per op and allocates its arena first, before checking the records.

On the unix port with a heap 8 KB above the least the stored program needs (found by bisection):
declare + load + prepare fails with MemoryError, from_container (the stored program) runs, and
its outputs are TFLite Micro's."""
import os

import numpy as np
import pytest

from conftest import run_micropython
from host_util import ROOT

VWW = os.path.join(ROOT, "tests", "golden", "tflite", "vww_int8.tflite")

CODE = """
import gc, os
def _read(p):  # one block of the file's size (read() grows its buffer, needing up to twice that)
    b = bytearray(os.stat(p)[6])
    with open(p, 'rb') as f:
        f.readinto(b)
    return b
try:  # (at the smallest heaps the bisection tries, the read itself is what fails)
    buf = _read(%r)  # first, into the empty heap: the runtime's modules compiled from source
    x = bytearray(%r)  # (the unix port) then spread over it, leaving no 272 KB hole in a 480 KB heap
    gc.collect()
    import mpy_lazy
    from mpy_lazy import model
    c = mpy_lazy.open(buf)
    gc.collect()
    if %r:
        m = model.declare(c)
        m.load(c)
        m.prepare()
    else:
        m = model.from_container(c)
except MemoryError:
    print('MemoryError')
else:
    m(x)
    print('OUT', m.tolist())
"""


def _runs(out, x, declare, heap):
    r = run_micropython(CODE % (str(out), x, declare), heapsize=heap)
    assert r.returncode == 0 and r.stdout.split()[:1] in (["MemoryError"], ["OUT"]), r.stdout + r.stderr
    return r.stdout


def test_a_spread_heap_still_takes_the_arena(tmp_path):
    from host_tools import cli
    import tflm_ref

    out = tmp_path / "vww.mpyl"
    assert cli.main(["pack", VWW, "-o", str(out), "-q"]) == 0
    x = tflm_ref.sample_inputs(VWW, 1, seed=3)[0]
    xb = x.astype(np.int8).tobytes()
    # the smallest heap (4 KB steps) where the stored program runs: the container (272 KB, in
    # RAM here), the input, the runtime's modules and the model
    lo, hi = 256 << 10, 2048 << 10
    assert _runs(out, xb, False, hi).startswith("OUT ")
    while hi - lo > 4096:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _runs(out, xb, False, mid).startswith("OUT ") else (mid, hi)
    heap = hi + 8192  # with room to spare, the per-op objects still leave no hole for the arena
    assert _runs(out, xb, True, heap).strip() == "MemoryError"
    got = _runs(out, xb, False, heap)
    assert got.startswith("OUT ")
    want = np.asarray(tflm_ref.run(VWW, [x])[0]).ravel().tolist()
    assert eval(got[4:]) == want
