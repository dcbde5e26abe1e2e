"""The README's journeys (tests/journeys.py), host part: the user's Python step (torch export /
state_dict save), then every README command that runs on the host, as written, through the
shell with this venv's `mpy-lazy`, the last one `mpy-lazy run model.mpyl --script SCRIPT` (the
journey's board script on the MicroPython unix port, the container at /rom); and the board
script once more on the ROMFS image the Pico gets, mounted at /rom on the unix port (what
`mpremote romfs deploy` + `mpremote run` do on the Pico; the Pico itself:
tests/test_mpremote_rp2.py under `make emulate-test`). The script runs as written, and again
with its `x = ...` line giving a real input; every printout is checked against the peer: torch,
onnxruntime, TFLite Micro, and for int8 the reference interpreter's exact integers."""
import os

import numpy as np
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
    for mod in {"torch": ("torch", "onnxscript", "onnxruntime"), "crnn": ("torch", "onnxscript", "onnxruntime"),
                "onnx": ("onnx", "onnxruntime"), "tflite": ("tflite", "tflm_ref"),
                "weights": ("torch", "safetensors"), "weights_int8": ("torch", "safetensors")}[key]:
        pytest.importorskip(mod)
    case = journeys.Case(key, str(tmp_path))
    script = tmp_path / j.script_name
    script.write_text(j.script)
    outs = {command: journeys.run(command, str(tmp_path)) for command in j.host_commands()}
    # the laptop step as written: the board script on the unix port, via `mpy-lazy run`
    case.check(journeys.parse_output(outs[j.laptop_run()]), case.default_x(), rel=1e-5)
    # the image the Pico gets, mounted at /rom on the unix port as `mpremote romfs deploy` does
    image = str(tmp_path / "weights.romfs")
    assert os.path.exists(image)
    case.check(_board(j.script, image), case.default_x(), rel=1e-5)
    # the script with a real input, both ways
    x = case.real_x()
    script.write_text(journeys.with_input(j.script, x))
    case.check(journeys.parse_output(journeys.run(j.laptop_run(), str(tmp_path))), x, rel=1e-5)
    case.check(_board(journeys.with_input(j.script, x), image), x, rel=1e-5)


def test_weights_only_script_on_every_storage(tmp_path):
    """The README's net.py, as written and with a real input, on the unix port (`mpy-lazy run
    --script`) over the same weights packed f32, f16, int8 and int8-channel: each equal to torch
    on the container's real values (issue 32: on int8 containers it computed with the codes)."""
    for mod in ("torch", "safetensors"):
        pytest.importorskip(mod)
    case = journeys.Case("weights", str(tmp_path))
    x = case.real_x()
    (tmp_path / "net.py").write_text(journeys.with_input(journeys.NET_PY, x))
    for quantize in ("none", "f16", "int8", "int8-channel"):
        journeys.run("mpy-lazy pack weights.safetensors -o model.mpyl -q --quantize %s" % quantize, str(tmp_path))
        out = journeys.parse_output(journeys.run("mpy-lazy run model.mpyl --script net.py", str(tmp_path)))
        journeys.check_packed_weights(np.asarray(out["output"], np.float64), np.asarray(x, np.float64), case.model,
                                      str(tmp_path), 1e-5, quantized=quantize.startswith("int8"))


def test_every_journey_ends_with_the_board_script_on_the_pico_and_on_the_unix_port():
    for j in journeys.JOURNEYS:
        assert j.commands[-2:] == [j.board_run(), j.laptop_run()], j.key
        assert j.laptop_run().startswith("mpy-lazy run model.mpyl --script %s " % j.script_name), j.key
        assert "unix" in j.install, j.key  # the extra that brings the `micropython` binary


def _code_blocks(text):
    """[(language, body)] of the fenced code blocks in markdown text."""
    blocks, lang, body = [], None, None
    for line in text.splitlines():
        if line.startswith("```"):
            if body is None:
                lang, body = line[3:].strip(), []
            else:
                blocks.append((lang, "\n".join(body)))
                body = None
        elif body is not None:
            body.append(line)
    assert body is None, "unclosed code block"
    return blocks


def test_readme_journeys_are_the_commands_the_tests_run():
    """The README's journeys section shows every journey, and every code block in it is one the
    tests run: a journey's commands (all of them, in order), its Python step or its board script."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    head = "\n## From your model to a Pico\n"
    assert readme.count(head) == 1, "README.md has no journeys section (python tests/journeys.py prints it)"
    section = readme.split(head, 1)[1].split("\n## ", 1)[0]
    run = {"\n".join(j.commands) for j in journeys.JOURNEYS}
    python = {j.python.rstrip() for j in journeys.JOURNEYS if j.python} | {j.script.rstrip() for j in journeys.JOURNEYS}
    blocks = _code_blocks(section)
    for lang, body in blocks:
        assert body in (python if lang == "python" else run), (lang, body)
    assert {b for lang, b in blocks if lang != "python"} == run
    for j in journeys.JOURNEYS:
        assert "### %s\n" % j.title in section, j.title
        if j.python:
            assert ("python", j.python.rstrip()) in blocks, j.key
    assert {b for lang, b in blocks if lang == "python"} >= {journeys.PREDICT_PY.rstrip(), journeys.NET_PY.rstrip()}
