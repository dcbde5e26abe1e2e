"""Hostile and broken inputs: exit 1, one `mpy-lazy: error:` line naming the input or tensor,
no output file, an existing output untouched, no temp files left behind."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from host_util import cli, ROOT, save_safetensors  # noqa: F401 (fixtures)


@pytest.fixture
def out(tmp_path):
    path = tmp_path / "out" / "model.mpyl"
    path.parent.mkdir()
    return path


def _fails_cleanly(cli, out, *args):
    line = cli.fails("pack", *args, "-o", out)
    assert os.listdir(out.parent) == [], "partial output left: %s" % os.listdir(out.parent)
    # the same command must not touch an existing output either
    out.write_bytes(b"previous contents")
    assert cli.fails("pack", *args, "-o", out) == line
    assert out.read_bytes() == b"previous contents" and os.listdir(out.parent) == [out.name]
    out.unlink()
    return line


def _safetensors_raw(path, header, data=b""):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return path


def test_missing_file(cli, tmp_path, out):
    line = _fails_cleanly(cli, out, tmp_path / "nope.safetensors")
    assert "nope.safetensors" in line and "No such file" in line


def test_unrecognised_and_empty_files(cli, tmp_path, out):
    (tmp_path / "junk.bin").write_bytes(b"hello, this is not a model")
    assert "junk.bin" in _fails_cleanly(cli, out, tmp_path / "junk.bin")
    (tmp_path / "empty.safetensors").write_bytes(b"")
    assert "empty.safetensors" in _fails_cleanly(cli, out, tmp_path / "empty.safetensors")


def test_corrupt_safetensors(cli, tmp_path, out):
    good = save_safetensors(tmp_path / "good.safetensors", {"w": np.ones((4, 4), np.float32)})
    data = open(good, "rb").read()
    (tmp_path / "trunc.safetensors").write_bytes(data[:-10])
    assert "trunc.safetensors" in _fails_cleanly(cli, out, tmp_path / "trunc.safetensors")
    bad = _safetensors_raw(tmp_path / "overlap.safetensors", {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12))
    assert "overlap.safetensors" in _fails_cleanly(cli, out, bad)
    bad = _safetensors_raw(tmp_path / "json.safetensors", {"a": "nonsense"}, bytes(8))
    assert "json.safetensors" in _fails_cleanly(cli, out, bad)


def test_corrupt_zip_and_torch(cli, tmp_path, out):
    np.savez(tmp_path / "m.npz", w=np.ones(100, np.float32))
    data = (tmp_path / "m.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:len(data) // 2])
    assert "cut.npz" in _fails_cleanly(cli, out, tmp_path / "cut.npz")
    (tmp_path / "fake.pt").write_bytes(b"\x80\x02garbage pickle")
    assert "fake.pt" in _fails_cleanly(cli, out, tmp_path / "fake.pt")


def test_unsupported_dtypes(cli, tmp_path, out):
    np.savez(tmp_path / "c.npz", ok=np.ones(2, np.float32), z=np.ones(2, np.complex64))
    line = _fails_cleanly(cli, out, tmp_path / "c.npz")
    assert "'z'" in line and "complex64" in line and "c.npz" in line
    np.savez(tmp_path / "s.npz", s=np.array(["text"]))
    assert "'s'" in _fails_cleanly(cli, out, tmp_path / "s.npz")
    bad = _safetensors_raw(tmp_path / "f8.safetensors",
                           {"f8": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}, bytes(2))
    assert "'f8'" in _fails_cleanly(cli, out, bad)


def test_bad_names_and_shapes(cli, tmp_path, out):
    long = "n" * 256
    src = save_safetensors(tmp_path / "long.safetensors", {long: np.ones(2, np.float32)})
    assert "256 bytes" in _fails_cleanly(cli, out, src)
    # 255 is fine, but its scales tensor name would be too long when quantized per channel
    src = save_safetensors(tmp_path / "l255.safetensors", {"w" * 255: np.ones((2, 2), np.float32)})
    cli.ok("pack", src, "-o", out, "-q")
    out.unlink()
    assert "#scales" in _fails_cleanly(cli, out, src, "--quantize", "int8-channel")
    utf8 = "é" * 128  # 256 bytes in UTF-8 but 128 characters
    np.savez(tmp_path / "u.npz", **{utf8: np.ones(1, np.float32)})
    assert "256 bytes" in _fails_cleanly(cli, out, tmp_path / "u.npz")
    np.savez(tmp_path / "zero.npz", empty=np.ones((3, 0), np.float32))
    line = _fails_cleanly(cli, out, tmp_path / "zero.npz")
    assert "'empty'" in line and "zero dimension" in line
    np.savez(tmp_path / "five.npz", deep=np.ones((1, 1, 1, 1, 2), np.float32))
    line = _fails_cleanly(cli, out, tmp_path / "five.npz")
    assert "'deep'" in line and "5 dimensions" in line


def test_container_over_4_gib(cli, tmp_path, out):
    # Two 2.5 GB tensors in a sparse file: refused from the shapes, before any data is read.
    n = 625_000_000  # f32 elements, 2.5 GB
    header = {"a": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]},
              "b": {"dtype": "F32", "shape": [n], "data_offsets": [4 * n, 8 * n]}}
    path = _safetensors_raw(tmp_path / "huge.safetensors", header)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) + 8 * n)
    line = _fails_cleanly(cli, out, path)  # first the --max-bytes limit (default 512 MiB)
    assert "5000000000 bytes" in line and "--max-bytes" in line, line
    assert "4 GiB" in _fails_cleanly(cli, out, path, "--max-bytes", "100G")
    header = {"a": {"dtype": "F32", "shape": [2 * n], "data_offsets": [0, 8 * n]}}
    path = _safetensors_raw(tmp_path / "one.safetensors", header)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) + 8 * n)
    line = _fails_cleanly(cli, out, path, "--max-bytes", "100G")
    assert "'a'" in line and "4 GiB" in line


def test_bad_options(cli, tmp_path, out):
    src = save_safetensors(tmp_path / "m.safetensors", {"w": np.ones(2, np.float32)})
    for align in ("3", "2", "8192", "0"):
        assert "--align" in _fails_cleanly(cli, out, src, "--align", align)
    line = cli.fails("pack", src, "-o", tmp_path / "no" / "such" / "dir.mpyl")
    assert "does not exist" in line


def test_real_cli_prints_one_line_and_no_traceback(tmp_path):
    """The installed entry point (a fresh process, warnings enabled) on a few bad inputs."""
    (tmp_path / "junk.bin").write_bytes(b"\x00" * 10)
    np.savez(tmp_path / "c.npz", z=np.ones(2, np.complex128))
    save_safetensors(tmp_path / "big.safetensors", {"w": np.array([[1e6, 1]], np.float32)})
    cases = [[tmp_path / "junk.bin"], [tmp_path / "c.npz"], [tmp_path / "missing.npz"],
             [tmp_path / "big.safetensors", "--quantize", "f16"]]
    for args in cases:
        r = subprocess.run([sys.executable, "-W", "default", "-m", "host_tools", "pack", *map(str, args),
                            "-o", str(tmp_path / "o.mpyl")], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 1 and r.stdout == "", r
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("mpy-lazy: error: "), r.stderr
        assert not (tmp_path / "o.mpyl").exists()


def test_closed_pipe_ends_quietly(tmp_path):
    """`mpy-lazy inspect m.mpyl | head -1` (issue 22): the reader leaves after one line; the
    command ends with status 0 and writes nothing to stderr (it used to print
    `mpy-lazy: error: Broken pipe`)."""
    src = save_safetensors(tmp_path / "m.safetensors",
                           {"t%03d" % i: np.full((4,), i, np.float32) for i in range(400)})
    out = tmp_path / "m.mpyl"
    assert subprocess.run([sys.executable, "-m", "host_tools", "pack", str(src), "-o", str(out), "-q"],
                          cwd=ROOT).returncode == 0
    for args in (["inspect", str(out)], ["inspect", str(out), "--json"], ["inspect", str(out), "--values", "t001"]):
        p = subprocess.Popen([sys.executable, "-m", "host_tools"] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ROOT)
        p.stdout.readline()
        p.stdout.close()  # the reader is gone: every later write hits a closed pipe
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0 and err == "", (args, p.returncode, err)


def test_every_cli_argument_has_help():
    from host_tools.cli import parser

    p = parser()
    subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    for name, sp in subs.choices.items():
        for a in sp._actions:
            assert a.help, "mpy-lazy %s: %s has no help text" % (name, a.option_strings or a.dest)
