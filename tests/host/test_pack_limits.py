"""Issue 13 (item 5) and issue 14 (pack-time honesty): what `mpy-lazy pack` does with special
files, inputs that expand to far more memory than they take on disk, non-finite weights, and
training checkpoints. Always one line, exit 1, nothing written; or a container plus one line on
stdout saying what was left out. Peak memory is measured in a child process (ru_maxrss)."""
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from host_util import ROOT, cli, save_safetensors, torch_mod  # noqa: F401 (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

# peak RSS from /proc (VmHWM): ru_maxrss would carry the forking pytest process's peak over exec
CHILD = r"""
import contextlib, io, json, sys
sys.path.insert(0, %(root)r)
from host_tools.cli import main
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
base = hwm()
err, out = io.StringIO(), io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "err": err.getvalue(), "out": out.getvalue(), "base_kb": base, "peak_kb": hwm()}))
"""


def child(*args, timeout=120):
    """`mpy-lazy ARGS` in a fresh process: exit code, stderr, stdout and its peak RSS growth
    (KiB above what the interpreter and the CLI's imports take)."""
    r = subprocess.run([sys.executable, "-c", CHILD % {"root": ROOT}] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.splitlines()[-1])
    res["grew_mb"] = (res["peak_kb"] - res["base_kb"]) / 1024
    return res


def one_line(res):
    lines = res["err"].splitlines()
    assert res["rc"] == 1 and len(lines) == 1 and lines[0].startswith("mpy-lazy: error: "), res
    assert "\x1b" not in lines[0] and "Traceback" not in res["err"]
    return lines[0]


# --- special files ---------------------------------------------------------------------------

def test_fifo_and_device_inputs_are_refused_without_blocking(cli, tmp_path):
    # opening a FIFO for reading waits for a writer: format detection used to hang forever
    fifo = tmp_path / "in.safetensors"
    os.mkfifo(fifo)
    good = save_safetensors(tmp_path / "w.safetensors", {"w": np.ones(3, np.float32)})
    graph = tmp_path / "g.txt"
    os.mkfifo(graph)
    out = tmp_path / "o.mpyl"
    for args in (["pack", fifo], ["pack", good, fifo, "--weights-only"], ["inspect", fifo],
                 ["verify", fifo], ["pack", good, "--graph", graph], ["pack", "/dev/zero"],
                 ["romfs", fifo], ["freeze", fifo]):
        if args[0] in ("pack", "romfs", "freeze"):
            args = args + ["-o", out]
        res = child(*args, timeout=60)
        line = one_line(res)
        bad = str(graph) if "--graph" in args else "/dev/zero" if "/dev/zero" in args else str(fifo)
        assert bad in line and ("FIFO" in line or "character device" in line), line
        assert sorted(os.listdir(tmp_path)) == ["g.txt", "in.safetensors", "w.safetensors"]


def test_special_outputs_are_refused_not_replaced(cli, tmp_path, monkeypatch):
    # os.replace onto a FIFO, a socket or /dev/null would swap the special file for a regular
    # one (as root, /dev/null itself); refused before any input is read
    src = save_safetensors(tmp_path / "w.safetensors", {"w": np.ones(3, np.float32)})
    fifo = tmp_path / "out_fifo.py"  # freeze writes NAME.py
    os.mkfifo(fifo)
    sock_path = tmp_path / "out_sock.py"
    sock = socket.socket(socket.AF_UNIX)
    with monkeypatch.context() as m:  # bound by its relative name: a socket's path has 107 bytes
        m.chdir(tmp_path)  # at most, a long temporary directory's is more
        sock.bind("out_sock.py")
    try:
        targets = [(fifo, "FIFO"), (sock_path, "socket"), ("/dev/null", "character device")]
        for target, kind in targets:
            before = os.stat(target)
            for cmd in (["pack", src], ["romfs", src], ["freeze", src]):
                line = cli.fails(*cmd, "-o", target)
                assert str(target) in line and kind in line and "regular file" in line, line
                after = os.stat(target)
                assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode), target
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
        assert sorted(os.listdir(tmp_path)) == ["out_fifo.py", "out_sock.py", "w.safetensors"]
    finally:
        sock.close()


# --- memory: inputs that expand --------------------------------------------------------------

def _npz_bomb(path, n_floats):
    """A real .npz whose one member ('w', float32 zeros) is n_floats * 4 bytes uncompressed and
    about a thousandth of that on disk: the deflate stream is one 1 MiB block of zeros,
    compressed once and repeated (each segment is flushed, so they are independent)."""
    hdr = {"descr": "<f4", "fortran_order": False, "shape": (n_floats,)}
    import io

    h = io.BytesIO()
    np.lib.format.write_array_header_1_0(h, hdr)
    header = h.getvalue()
    mib = 1 << 20
    assert (4 * n_floats) % mib == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = bytearray(c.compress(header) + c.flush(zlib.Z_FULL_FLUSH))
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    seg = c.compress(bytes(mib)) + c.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(header)
    zeros = bytes(mib)
    for _ in range(4 * n_floats // mib):
        stream += seg
        crc = zlib.crc32(zeros, crc)
    stream += zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # the final (empty) block
    size = len(header) + 4 * n_floats
    name = b"w.npy"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(stream), size, len(name), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(stream), size,
                          len(name), 0, 0, 0, 0, 0, 0)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(name),
                      len(local) + len(name) + len(stream), 0)
    with open(path, "wb") as f:
        f.write(local + name + stream + central + name + end)
    return path


def test_npz_expanding_beyond_max_bytes_is_refused_before_reading(tmp_path):
    # 1 GiB of zeros in a 1 MB .npz: refused from its header by the default limit (512 MiB),
    # the memory never used; a 64 MiB one packs by default and is refused with --max-bytes 16M
    big = _npz_bomb(tmp_path / "big.npz", 1 << 28)
    assert os.path.getsize(big) < 2 << 20
    res = child("pack", big, "-o", tmp_path / "o.mpyl")
    line = one_line(res)
    assert "big.npz" in line and "1073741824 bytes" in line and "--max-bytes" in line, line
    assert res["grew_mb"] < 50, res
    small = _npz_bomb(tmp_path / "small.npz", 1 << 24)
    res = child("pack", small, "-o", tmp_path / "o.mpyl", "--max-bytes", "16M")
    assert "67108864 bytes" in one_line(res) and res["grew_mb"] < 50, res
    assert sorted(os.listdir(tmp_path)) == ["big.npz", "small.npz"]
    # control: what the limit saves (this one is read, and the measure sees it)
    res = child("pack", small, "-o", tmp_path / "o.mpyl", "-q")
    assert res["rc"] == 0 and res["grew_mb"] > 60, res
    assert os.path.getsize(tmp_path / "o.mpyl") > 64 << 20


def test_max_bytes_option(cli, tmp_path):
    src = save_safetensors(tmp_path / "w.safetensors", {"a": np.ones(1000, np.float32),
                                                         "b": np.ones(24, np.float64)})  # 4192 bytes
    assert "4192 bytes, more than --max-bytes 4191" in cli.fails("pack", src, "-o", tmp_path / "o.mpyl",
                                                                 "--max-bytes", "4191")
    cli.ok("pack", src, "-o", tmp_path / "o.mpyl", "--max-bytes", "4192", "-q")
    cli.ok("pack", src, "-o", tmp_path / "o.mpyl", "--max-bytes", "1K", "--include", "b", "-q")  # selected only
    for bad in ("lots", "0", "-5", "1.5G"):
        assert "--max-bytes" in cli.fails("pack", src, "-o", tmp_path / "o.mpyl", "--max-bytes", bad)


def test_onnx_external_data_is_read_only_up_to_the_tensor_size(tmp_path):
    # a 32-byte tensor whose external data has no `length`, in a 1 GiB (sparse) file: onnx
    # would read the file to its end; the packer reads 32 bytes. A wrong length is refused.
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    data = tmp_path / "weights.bin"
    with open(data, "wb") as f:
        f.write(np.arange(8, dtype=np.float32).tobytes())
        f.truncate(1 << 30)

    def model(name, **extra):
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[8])
        t.data_location = TensorProto.EXTERNAL
        for k, v in dict(dict(location="weights.bin", offset="0"), **extra).items():
            e = t.external_data.add()
            e.key, e.value = k, v
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], [t])
        path = tmp_path / name
        onnx.save(helper.make_model(g), str(path))
        return path

    res = child("pack", model("m.onnx"), "--weights-only", "-o", tmp_path / "o.mpyl", "-q")
    assert res["rc"] == 0 and res["grew_mb"] < 100, res
    import mpy_lazy

    c = mpy_lazy.open((tmp_path / "o.mpyl").read_bytes())
    assert c.view("w").tolist() == list(range(8))
    res = child("pack", model("bad.onnx", length=str(1 << 30)), "--weights-only", "-o", tmp_path / "p.mpyl")
    line = one_line(res)
    assert "bad.onnx" in line and "'w'" in line and "length 1073741824" in line and "32 bytes" in line, line
    assert res["grew_mb"] < 100
    fifo = tmp_path / "fifo.bin"
    os.mkfifo(fifo)
    res = child("pack", model("f.onnx", location="fifo.bin"), "--weights-only", "-o", tmp_path / "p.mpyl",
                timeout=60)
    assert "fifo.bin" in one_line(res) and "FIFO" in res["err"]


# --- non-finite weights ----------------------------------------------------------------------

def test_nonfinite_weights_refused_by_pack_reported_by_verify(cli, tmp_path):
    w = np.ones((4, 4), np.float32)
    w[1, 2], w[3, 3] = np.nan, -np.inf
    src = save_safetensors(tmp_path / "m.safetensors", {"fc.weight": w, "fc.bias": np.zeros(4, np.float32)})
    for q in ("none", "f16"):
        line = cli.fails("pack", src, "-o", tmp_path / "o.mpyl", "--quantize", q)
        assert "'fc.weight'" in line and "1 NaN and 1 Inf" in line and "--allow-nonfinite" in line, line
        assert not os.path.exists(tmp_path / "o.mpyl")
        cli.ok("pack", src, "-o", tmp_path / "o.mpyl", "--quantize", q, "--allow-nonfinite", "-q")
        line = cli.fails("verify", tmp_path / "o.mpyl")
        assert "o.mpyl" in line and "'fc.weight' (1 NaN, 1 Inf of 16)" in line and "fc.bias" not in line, line
        cli.ok("verify", tmp_path / "o.mpyl", "--allow-nonfinite")
        os.unlink(tmp_path / "o.mpyl")
    # a model (ONNX) with a NaN initializer: the same rule on the graph path
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g), str(tmp_path / "m.onnx"))
    line = cli.fails("pack", tmp_path / "m.onnx", "-o", tmp_path / "g.mpyl")
    assert "NaN" in line and "--allow-nonfinite" in line, line


def test_verify_reports_bad_per_channel_scales(cli, tmp_path):
    # scales are f32 AUX tensors the reader does not check (docs/RELIABILITY.md, known limits)
    src = save_safetensors(tmp_path / "m.safetensors", {"w": np.arange(12, dtype=np.float32).reshape(3, 4)})
    cli.ok("pack", src, "-o", tmp_path / "o.mpyl", "--quantize", "int8-channel", "-q")
    cli.ok("verify", tmp_path / "o.mpyl")
    import mpy_lazy

    buf = bytearray((tmp_path / "o.mpyl").read_bytes())
    info = mpy_lazy.open(bytes(buf)).info("w#scales")
    struct.pack_into("<f", buf, info.offset, float("inf"))
    struct.pack_into("<f", buf, info.offset + 4, -1.0)
    e = 64 + 64 * info.index
    struct.pack_into("<I", buf, e + 32, zlib.crc32(buf[info.offset:info.offset + info.nbytes]))
    d = struct.unpack_from("<I", buf, 44)[0]
    struct.pack_into("<I", buf, 60, zlib.crc32(buf[64:d], zlib.crc32(buf[0:60])))
    (tmp_path / "o.mpyl").write_bytes(bytes(buf))
    line = cli.fails("verify", tmp_path / "o.mpyl")
    assert "'w#scales' (0 NaN, 1 Inf, 1 scales <= 0 of 3)" in line, line


# --- training checkpoints, pickled modules (issue 14) ----------------------------------------

def test_checkpoint_dicts_pack_the_model_and_say_what_was_left_out(cli, tmp_path, torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    sd = model.state_dict()
    layouts = {
        "a.pt": ({"model": sd, "optimizer": opt.state_dict(), "epoch": 3},
                 "packed its 'model' entry (4 tensors), left out 'optimizer' (12 optimizer state tensors), 'epoch'"),
        "b.pt": ({"state_dict": sd, "optimizer_states": [opt.state_dict()], "epoch": 3, "global_step": 10},
                 "packed its 'state_dict' entry (4 tensors), left out 'optimizer_states' (12 optimizer state "
                 "tensors), 'epoch', 'global_step'"),
        "c.pt": ({"model_state_dict": sd, "optimizer_state_dict": opt.state_dict(), "loss": torch.tensor(0.5)},
                 "packed its 'model_state_dict' entry (4 tensors), left out 'optimizer_state_dict' (12 "
                 "optimizer state tensors), 'loss' (1 tensor)"),
        "d.pt": (dict(sd, optimizer=opt.state_dict()),  # weights at the top, the optimizer beside them
                 "packed the model's weights (4 tensors), left out 'optimizer' (12 optimizer state tensors)"),
    }
    for name, (obj, note) in layouts.items():
        torch.save(obj, tmp_path / name)
        out = cli.ok("pack", tmp_path / name, "-o", tmp_path / "o.mpyl")
        lines = [x for x in out.splitlines() if "training checkpoint" in x]
        assert lines == ["%s: a training checkpoint: %s" % (name, note)], out
        rows = {t["name"]: t for t in cli.inspect(tmp_path / "o.mpyl")["tensors"]}
        assert set(rows) == set(sd), rows  # the state_dict's own names: what mpy_lazy.load binds
        import mpy_lazy

        c = mpy_lazy.open((tmp_path / "o.mpyl").read_bytes())
        for k, v in sd.items():
            assert c.view(k).tolist() == v.reshape(-1).tolist()
        assert "training checkpoint" not in cli.ok("pack", tmp_path / name, "-o", tmp_path / "o.mpyl", "-q")
    torch.save(sd, tmp_path / "plain.pt")  # a plain state_dict: no note
    assert "training checkpoint" not in cli.ok("pack", tmp_path / "plain.pt", "-o", tmp_path / "o.mpyl")


def test_pickled_module_is_refused_in_plain_words(cli, tmp_path, torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    torch.save(model, tmp_path / "model.pt")
    line = cli.fails("pack", tmp_path / "model.pt", "-o", tmp_path / "o.mpyl")
    assert "\x1b" not in line and "\t" not in line
    assert line == ("mpy-lazy: error: %s: holds a pickled model object (Sequential, from torch.save(model)), "
                    "not a state_dict; mpy-lazy does not unpickle objects (that could run code): save the "
                    "weights with torch.save(model.state_dict(), 'model.pt') and pack that file"
                    % (tmp_path / "model.pt")), line
    assert not os.path.exists(tmp_path / "o.mpyl")
