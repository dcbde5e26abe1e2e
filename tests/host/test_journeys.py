"""The README's journeys (tests/journeys.py), host part: the user's Python step (torch export /
state_dict save), then every README command that runs on the host, as written, through the
shell with this venv's `mpy-lazy`; then the journey's board script on the MicroPython unix port
with the ROMFS image mounted at /rom (what `mpremote romfs deploy` + `mpremote run` do on the
Pico; the Pico itself: tests/test_mpremote_rp2.py under `make emulate-test`). The script runs as
written, and once more with its `x = ...` line giving a real input; both printouts are checked
against the peer: torch, onnxruntime, TFLite Micro, and for int8 the reference interpreter's
exact integers."""
import os

import pytest

import journeys
from conftest import ROOT, run_micropython

MOUNT = "import vfs\nvfs.mount(vfs.VfsRom(open(%r, 'rb').read()), '/rom')\n"


def _board(script, image):
    r = run_micropython(MOUNT % image + script)
    assert r.returncode == 0, r.stdout + r.stderr
    return journeys.parse_output(r.stdout)


@pytest.mark.parametrize("key", [j.key for j in journeys.JOURNEYS])
def test_journey_on_the_host(key, tmp_path):
    j = journeys.BY_KEY[key]
    for mod in {"torch": ("torch", "onnxscript", "onnxruntime"), "onnx": ("onnx", "onnxruntime"),
                "tflite": ("tflite", "tflm_ref"), "weights": ("torch", "safetensors")}[key]:
        pytest.importorskip(mod)
    case = journeys.Case(key, str(tmp_path))
    for command in j.host_commands():
        journeys.run(command, str(tmp_path))
    image = str(tmp_path / "weights.romfs")
    assert os.path.exists(image)
    case.check(_board(j.script, image), case.default_x(), rel=1e-5)
    x = case.real_x()
    case.check(_board(journeys.with_input(j.script, x), image), x, rel=1e-5)


def test_readme_has_the_journeys():
    """Once the README carries the journeys section, it shows exactly these commands and scripts."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    if "## From your model to a Pico" not in readme:
        pytest.skip("README.md has no journeys section yet (python tests/journeys.py prints it)")
    for j in journeys.JOURNEYS:
        assert "\n".join(j.commands) in readme, j.key
        if j.python:
            assert j.python.rstrip() in readme, j.key
        assert j.script.rstrip() in readme, j.key
