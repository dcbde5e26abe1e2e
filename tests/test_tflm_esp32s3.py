"""TFLite Micro with esp-nn, built for the ESP32-S3's core (firmware/esp32s3/tflm, `make
tflm-esp32s3`), on qemu-system-xtensa: the peer of bench/xtensa.py --peer. MLPerf Tiny's KWS
(in the repository) on one seeded input gives TFLM's outputs (the tflite-micro wheel's reference
kernels) byte for byte, on the warm-up and the timed Invoke; a wrong input size is a clean error.

Needs TFLM_ESP32S3_ELF (the built tflm_esp32s3.elf) and MPY_LAZY_XTENSA_PREFIX (its qemu,
bin/qemu-system-xtensa); skipped without them, except under MPY_LAZY_REQUIRE_EMULATORS=1.
The image layout is checked without either."""
import os
import struct
import sys

import pytest

from conftest import ROOT, emulator_unavailable

sys.path.insert(0, os.path.join(ROOT, "bench"))
import tflm_esp32s3  # noqa: E402
import tflm_ref  # noqa: E402

KWS = os.path.join(ROOT, "tests", "golden", "thirdparty", "mlperf-tiny", "kws_ref_model.tflite")


@pytest.fixture(scope="module")
def board():
    elf = os.environ.get("TFLM_ESP32S3_ELF")
    prefix = os.environ.get("MPY_LAZY_XTENSA_PREFIX")
    if not elf or not os.path.isfile(elf):
        emulator_unavailable("TFLM_ESP32S3_ELF is not a built tflm_esp32s3.elf (make tflm-esp32s3)")
    qemu = os.path.join(prefix or "", "bin", "qemu-system-xtensa")
    if not prefix or not os.access(qemu, os.X_OK):
        emulator_unavailable("MPY_LAZY_XTENSA_PREFIX has no bin/qemu-system-xtensa (make xtensa-toolchain)")
    return elf, qemu


def test_image_layout():
    img = tflm_esp32s3.image(b"m" * 37, b"\x01\x02\x03")
    magic, model_off, model_len, input_off, input_len = struct.unpack_from("<5I", img)
    assert (magic, model_len, input_len) == (0x4D4C4654, 37, 3)
    assert model_off % 16 == 0 and input_off % 16 == 0 and input_off >= model_off + 37
    assert img[model_off:model_off + 37] == b"m" * 37
    assert img[input_off:] == b"\x01\x02\x03"


def test_kws_equals_tflm_on_the_core(board):
    elf, qemu = board
    x = tflm_ref.sample_inputs(KWS, 1, seed=3)[0]
    r = tflm_esp32s3.run(elf, KWS, x.tobytes(), qemu=qemu)
    want = tflm_ref.run(KWS, [x])[0]
    want = (want[0] if isinstance(want, tuple) else want).tobytes()
    assert r["output"] == want
    assert r["warm_output"] == want
    assert r["instructions"] > 2656768  # at least one per MAC of KWS
    assert 0 < r["arena_used"] < 512 * 1024


def test_wrong_input_size_is_a_clean_error(board):
    elf, qemu = board
    with pytest.raises(tflm_esp32s3.TflmEsp32s3Error, match="input is 5 bytes, the model's inputs take 490"):
        tflm_esp32s3.run(elf, KWS, b"\0" * 5, qemu=qemu)
