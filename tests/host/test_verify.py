"""`mpy-lazy verify` (the runtime reader underneath) catches any flipped byte."""
import os
import shutil

import pytest

from host_util import cli, GOLDEN  # noqa: F401 (fixtures)


@pytest.mark.parametrize("name", ["tiny", "int8_channel", "ints"])
def test_verify_catches_a_flipped_byte_anywhere_that_matters(cli, tmp_path, name):
    src = os.path.join(GOLDEN, name + ".mpyl")
    data = open(src, "rb").read()
    assert cli.ok("verify", src).endswith("OK (structure and %d tensor CRCs)\n"
                                          % len(cli.inspect(src)["tensors"]))
    report = cli.inspect(src)
    data_offset = min(t["offset"] for t in report["tensors"])
    # every byte of every tensor, and every byte of the header, tables and strings
    positions = [p for t in report["tensors"] for p in range(t["offset"], t["offset"] + t["nbytes"])]
    positions += list(range(0, 52)) + list(range(60, data_offset))
    bad = tmp_path / "bad.mpyl"
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 0x01
        bad.write_bytes(flipped)
        rc, out, err = cli("verify", bad)
        assert rc == 1, "flipped byte %d not detected" % pos
        assert err.startswith("mpy-lazy: error: ") and len(err.splitlines()) == 1


def test_verify_and_inspect_refuse_non_containers(cli, tmp_path):
    (tmp_path / "x.mpyl").write_bytes(b"not a container at all" * 4)
    assert "x.mpyl" in cli.fails("verify", tmp_path / "x.mpyl")
    assert "x.mpyl" in cli.fails("inspect", tmp_path / "x.mpyl")
    (tmp_path / "empty.mpyl").write_bytes(b"")
    assert "empty.mpyl" in cli.fails("verify", tmp_path / "empty.mpyl")
    assert "missing.mpyl" in cli.fails("verify", tmp_path / "missing.mpyl")
    src = os.path.join(GOLDEN, "tiny.mpyl")
    shutil.copy(src, tmp_path / "t.mpyl")
    with open(tmp_path / "t.mpyl", "r+b") as f:
        f.truncate(300)
    assert "t.mpyl" in cli.fails("verify", tmp_path / "t.mpyl")


def test_inspect_table_and_values(cli):
    src = os.path.join(GOLDEN, "int8.mpyl")
    out = cli.ok("inspect", src, "--values", "fc.weight")
    assert "fc.weight" in out and "int8/tensor scale=" in out and "alignment 16" in out
    assert "meta quantize = int8" in out and "values fc.weight [4, 3]:" in out
    # a name not there: what it holds, or the near names (issue 32: a bare KeyError, "'nope'")
    line = cli.fails("inspect", src, "--values", "nope")
    assert "--values nope: no tensor of that name" in line and "it holds fc.bias, fc.weight" in line, line
    line = cli.fails("inspect", src, "--values", "fc.weigth", "--json")
    assert "did you mean 'fc.weight'?" in line, line
