"""tests/golden/tflm_*.mpyl and .json (the third-party models and TFLite Micro's outputs that
tests/runtime/test_tflm_models.py checks every kernel path against, on the unix port and the
emulated boards) are what tests/golden/make_tflm_golden.py makes today: the packer's output and
TFLM's (the tflite-micro wheel) outputs have not drifted."""
import os
import sys

from host_util import GOLDEN

sys.path.insert(0, GOLDEN)
import make_tflm_golden  # noqa: E402


def test_tflm_golden_files_are_current(tmp_path):
    made = make_tflm_golden.build(str(tmp_path))
    assert len(made) == 2 * len(make_tflm_golden.MODELS)
    drifted = [f for f in made
               if (tmp_path / f).read_bytes() != open(os.path.join(GOLDEN, f), "rb").read()]
    assert not drifted, "tests/golden/tflm_* drifted (run tests/golden/make_tflm_golden.py if intended): %s" % drifted


def test_each_runtime_test_has_its_model():
    """Every model the generator makes is checked by a test of test_tflm_models.py and back."""
    with open(os.path.join(os.path.dirname(GOLDEN), "runtime", "test_tflm_models.py")) as f:
        src = f.read()
    names = set(make_tflm_golden.MODELS)
    checked = set(line.split('check("')[1].split('"')[0] for line in src.splitlines() if 'check("' in line)
    assert checked == names, (checked ^ names)
