"""The arena of a model with many ops fits where the heap has room for it: declaring a Model
spreads the ops' objects over the heap, with the garbage of parsing each line between them, so
the arena's one block can find no hole even when the free total is ample (seen on the emulated
Pico with VWW: 180 KB free, 64.5 KB arena refused). A stored program (mpy_lazy/program.py)
makes no object per op and allocates its arena first, before checking the records.

On the unix port with a heap just large enough: declare + load + prepare fails with
MemoryError, from_container (the stored program) runs, and its outputs are TFLite Micro's."""
import os

import numpy as np
import pytest

from conftest import run_micropython
from host_util import ROOT

VWW = os.path.join(ROOT, "tests", "golden", "tflite", "vww_int8.tflite")

CODE = """
import gc
import mpy_lazy
from mpy_lazy import model
c = mpy_lazy.open(open(%r, 'rb').read())
x = bytearray(%r)
gc.collect()
try:
    if %r:
        m = model.declare(c)
        m.load(c)
        m.prepare()
    else:
        m = model.from_container(c)
except MemoryError:
    print('MemoryError')
else:
    o = m(x)
    print('OUT', [o[i] for i in range(m.outputs[0].size)])
"""


def test_a_spread_heap_still_takes_the_arena(tmp_path):
    from host_tools import cli
    import tflm_ref

    out = tmp_path / "vww.mpyl"
    assert cli.main(["pack", VWW, "-o", str(out), "-q"]) == 0
    x = tflm_ref.sample_inputs(VWW, 1, seed=3)[0]
    heap = 756000  # container (272 KB, in RAM here) + input + model: 736-778 KB split the two (measured)
    r = run_micropython(CODE % (str(out), x.astype(np.int8).tobytes(), True), heapsize=heap)
    assert r.stdout.strip() == "MemoryError", r.stdout + r.stderr  # the premise: the plain order fails
    r = run_micropython(CODE % (str(out), x.astype(np.int8).tobytes(), False), heapsize=heap)
    assert r.returncode == 0 and r.stdout.startswith("OUT "), r.stdout + r.stderr
    got = eval(r.stdout[4:])
    want = np.asarray(tflm_ref.run(VWW, [x])[0]).ravel().tolist()
    assert got == want
