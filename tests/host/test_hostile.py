"""Hostile inputs and hostile surroundings for `mpy-lazy pack` (docs/RELIABILITY.md): corrupted
files of every input format, pickles with payloads, headers claiming huge tensors, NaN/Inf,
outputs that cannot be written, a full disk. Always: exit 1 with one line naming the input (or
the output), no partial output, no temp file, an earlier output left intact; or, where the
damage only touched tensor bytes, a container that opens and verifies.
(tests/host/test_errors.py has the single-case errors; this file sweeps.)"""
import json
import os
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

from host_util import ROOT, cli, save_safetensors, torch_mod  # noqa: F401 (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

# Runs many `pack` calls in one child process (a crash in a parser would end it, and the test
# would see which case it was on). Each case: pack INPUT -o OUT, an existing OUT or not.
BATCH = r"""
import contextlib, io, json, os, sys
sys.path.insert(0, %(root)r)
from host_tools.cli import main
import mpy_lazy
cases = json.load(open(sys.argv[1]))
for case in cases:
    out = case["out"]
    if case["previous"]:
        open(out, "wb").write(b"previous contents")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["pack", case["input"], "-o", out, "-q"] + case["args"])
    result = {"rc": rc, "err": err.getvalue(), "files": sorted(os.listdir(os.path.dirname(out)))}
    if os.path.exists(out):
        data = open(out, "rb").read()
        result["previous_intact"] = data == b"previous contents"
        if rc == 0:
            c = mpy_lazy.open(data)
            result["verified"] = c.verify()
        os.remove(out)
    print(json.dumps(result), flush=True)
print("BATCH-END")
"""


def run_batch(tmp_path, cases):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    r = subprocess.run([sys.executable, "-c", BATCH % {"root": ROOT}, str(path)], capture_output=True,
                       text=True, timeout=600)
    lines = r.stdout.splitlines()
    results = [json.loads(line) for line in lines if line.startswith("{")]
    assert r.returncode == 0 and lines[-1:] == ["BATCH-END"], (
        "child died on case %d: %s\n%s" % (len(results), cases[len(results)], r.stderr[-3000:]))
    return results


def check_results(cases, results):
    """The contract for each case; returns (packed, refused) counts."""
    packed = refused = 0
    for case, res in zip(cases, results):
        name = os.path.basename(case["input"])
        out = os.path.basename(case["out"])
        if res["rc"] == 0:
            packed += 1
            assert res["files"] == [out] and res["verified"] >= 1, (case, res)
            continue
        refused += 1
        lines = res["err"].splitlines()
        assert res["rc"] == 1 and len(lines) == 1 and lines[0].startswith("mpy-lazy: error: "), (case, res)
        assert name in lines[0], (case, res)
        assert "Traceback" not in res["err"]
        if case["previous"]:
            assert res["files"] == [out] and res["previous_intact"], (case, res)
        else:
            assert res["files"] == [], (case, res)
    return packed, refused


def _inputs(d, torch):
    """One small valid file per input format (the ONNX one has float_data and raw_data)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    tensors = {"fc.weight": rng.standard_normal((6, 5)).astype(np.float32),
               "fc.bias": rng.standard_normal(6).astype(np.float32),
               "steps": np.array([3, 4], dtype=np.int64)}
    files = {"safetensors": save_safetensors(d / "m.safetensors", tensors)}
    np.savez(d / "m.npz", **tensors)
    np.savez_compressed(d / "mz.npz", **tensors)
    np.save(d / "m.npy", tensors["fc.weight"])
    files.update(npz=str(d / "m.npz"), npz_compressed=str(d / "mz.npz"), npy=str(d / "m.npy"))
    state = {k: torch.from_numpy(v) for k, v in tensors.items()}
    torch.save(state, d / "m.pt")
    torch.save(state, d / "legacy.pt", _use_new_zipfile_serialization=False)
    files.update(torch=str(d / "m.pt"), torch_legacy=str(d / "legacy.pt"))
    inits = [numpy_helper.from_array(v, k) for k, v in tensors.items()]
    inits.append(helper.make_tensor("small", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]))
    g = helper.make_graph([], "g", [], [], inits)
    onnx.save(helper.make_model(g), str(d / "m.onnx"))
    files["onnx"] = str(d / "m.onnx")
    return files


def test_truncated_and_bit_flipped_inputs_of_every_format(tmp_path, torch_mod):
    """Every input format, truncated at 40 lengths (all of the first 24 bytes, then spread)
    and with 1..3 random bits flipped at 60 places (seeded): ~700 packs in all."""
    src = tmp_path / "src"
    src.mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    outdir = tmp_path / "out"
    outdir.mkdir()
    rng = random.Random(7)
    cases = []
    for kind, path in _inputs(src, torch_mod).items():
        data = open(path, "rb").read()
        ext = os.path.splitext(path)[1]
        lengths = sorted(set(list(range(24)) + [len(data) * k // 16 for k in range(1, 16)] + [len(data) - 1]))
        variants = [("cut%d" % n, data[:n]) for n in lengths]
        for k in range(60):
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            variants.append(("flip%d" % k, bytes(b)))
        for tag, blob in variants:
            p = bad / ("%s-%s%s" % (kind, tag, ext))
            p.write_bytes(blob)
            cases.append({"input": str(p), "out": str(outdir / "o.mpyl"), "args": [],
                          "previous": len(cases) % 2 == 0})
    results = run_batch(tmp_path, cases)
    packed, refused = check_results(cases, results)
    print("hostile inputs: %d cases, %d packed (damage in tensor bytes only), %d refused"
          % (len(cases), packed, refused))
    assert refused > len(cases) // 2 and packed > 0


class Payload:
    """Unpickling this creates the marker file: the proof that a pickle payload ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_payloads_are_refused_never_run(tmp_path, torch_mod):
    import pickle

    torch = torch_mod
    marker = str(tmp_path / "PAYLOAD-RAN")
    files = []
    torch.save({"w": torch.ones(2), "x": Payload(marker)}, tmp_path / "zip.pt")
    torch.save({"w": torch.ones(2), "x": Payload(marker)}, tmp_path / "legacy.pt",
               _use_new_zipfile_serialization=False)
    files += [tmp_path / "zip.pt", tmp_path / "legacy.pt"]
    for proto in (2, 4, 5):
        p = tmp_path / ("raw%d.pkl" % proto)
        p.write_bytes(pickle.dumps({"w": np.ones(2, np.float32), "x": Payload(marker)}, protocol=proto))
        files.append(p)
    arr = np.empty(1, dtype=object)
    arr[0] = Payload(marker)
    np.save(tmp_path / "obj.npy", arr, allow_pickle=True)
    np.savez(tmp_path / "obj.npz", w=np.ones(2, np.float32), x=arr)
    files += [tmp_path / "obj.npy", tmp_path / "obj.npz"]
    assert not os.path.exists(marker)
    outdir = tmp_path / "out"
    outdir.mkdir()
    cases = [{"input": str(f), "out": str(outdir / "o.mpyl"), "args": [], "previous": i % 2 == 0}
             for i, f in enumerate(files)]
    packed, refused = check_results(cases, run_batch(tmp_path, cases))
    assert refused == len(files) and not os.path.exists(marker)
    # control: the same files do run their payload when unpickled without weights_only
    with open(tmp_path / "raw2.pkl", "rb") as f:
        pickle.load(f)
    assert os.path.exists(marker)


def _safetensors_raw(path, header, data=b""):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return str(path)


def test_headers_claiming_huge_tensors_allocate_nothing(tmp_path):
    """Headers claiming 2**31-element tensors over 64 real bytes: refused from the header,
    in a child whose address space is capped at 1.5 GiB (allocating the claim would fail
    there with 'Unable to allocate'), and whose peak RSS stays small."""
    import io
    import zipfile

    import onnx
    from onnx import TensorProto, helper

    n = 1 << 31
    files = [
        _safetensors_raw(tmp_path / "f32.safetensors", {"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}, bytes(64)),
        _safetensors_raw(tmp_path / "short.safetensors", {"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 64]}}, bytes(64)),
        _safetensors_raw(tmp_path / "i8.safetensors", {"w": {"dtype": "I8", "shape": [n], "data_offsets": [0, n]}}, bytes(64)),
    ]
    for name, descr in (("i8.npz", "|i1"), ("f32.npz", "<f4")):
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(head, {"descr": descr, "fortran_order": False, "shape": (n,)})
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("w.npy", head.getvalue() + bytes(64))
        files.append(str(tmp_path / name))
        (tmp_path / name.replace(".npz", ".npy")).write_bytes(head.getvalue() + bytes(64))
        files.append(str(tmp_path / name.replace(".npz", ".npy")))
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n], raw_data=bytes(64))
    onnx.save(helper.make_model(helper.make_graph([], "g", [], [], [t])), str(tmp_path / "m.onnx"))
    files.append(str(tmp_path / "m.onnx"))
    code = ("import resource, subprocess, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))\n"
            "r = subprocess.run([sys.executable, '-m', 'host_tools', 'pack', sys.argv[1], '-o', sys.argv[2]],"
            " capture_output=True, text=True)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "print(r.stderr.strip())\n")
    for f in files:
        out = tmp_path / "out.mpyl"
        r = subprocess.run([sys.executable, "-c", code, f, str(out)], capture_output=True, text=True, cwd=ROOT)
        rc, maxrss_kb = map(int, r.stdout.splitlines()[0].split())
        lines = r.stdout.splitlines()[1:]
        assert rc == 1 and len(lines) == 1 and lines[0].startswith("mpy-lazy: error: "), r.stdout + r.stderr
        assert os.path.basename(f) in lines[0], lines[0]
        assert "allocate" not in lines[0] and "out of memory" not in lines[0], lines[0]
        assert maxrss_kb < 300 * 1024, (f, maxrss_kb)
        assert not out.exists() and os.listdir(tmp_path).count("out.mpyl") == 0


def test_nan_and_inf_name_the_tensor(cli, tmp_path):
    good = np.ones((3, 4), np.float32)
    for bad_value in (np.nan, np.inf, -np.inf):
        w = good.copy()
        w[2, 1] = bad_value
        src = save_safetensors(tmp_path / "m.safetensors", {"a.ok": good, "b.bad": w, "c.ok": good})
        for mode in ("int8", "int8-channel"):
            out = tmp_path / "q.mpyl"
            out.write_bytes(b"previous contents")
            line = cli.fails("pack", src, "-o", out, "--quantize", mode)
            assert "'b.bad'" in line and "m.safetensors" in line and "NaN or Inf" in line, line
            assert out.read_bytes() == b"previous contents"
            assert sorted(os.listdir(tmp_path)) == ["m.safetensors", "q.mpyl"]
        line = cli.fails("pack", src, "-o", tmp_path / "f32.mpyl")  # float storage: refused unless asked
        assert "'b.bad'" in line and "m.safetensors" in line and "--allow-nonfinite" in line, line
        assert sorted(os.listdir(tmp_path)) == ["m.safetensors", "q.mpyl"]
        cli.ok("pack", src, "-o", tmp_path / "f32.mpyl", "-q", "--allow-nonfinite")  # kept as they are
        line = cli.fails("verify", tmp_path / "f32.mpyl")  # and verify reports them
        assert "'b.bad'" in line and ("1 NaN" in line if bad_value != bad_value else "1 Inf" in line), line
        assert cli.ok("verify", tmp_path / "f32.mpyl", "--allow-nonfinite").endswith("OK (structure and 3 tensor CRCs)\n")
        (tmp_path / "f32.mpyl").unlink()
    # a float64 value beyond the float32 range
    src = tmp_path / "big.npz"
    np.savez(src, ok=good, huge=np.array([1.0, 1e300]))
    line = cli.fails("pack", src, "-o", tmp_path / "q.mpyl")
    assert "'huge'" in line and "big.npz" in line and "float32 range" in line


def _mount(*args):
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def test_outputs_that_cannot_be_written(cli, tmp_path):
    """Root ignores permission bits, so: a path under a regular file (ENOTDIR), /proc, and a
    read-only bind mount (when the sandbox allows mounting)."""
    src = save_safetensors(tmp_path / "m.safetensors", {"w": np.ones((4, 4), np.float32)})
    (tmp_path / "afile").write_bytes(b"x")
    targets = [tmp_path / "afile" / "o.mpyl", "/proc/o.mpyl", tmp_path]
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "o.mpyl").write_bytes(b"previous contents")
    mounted = _mount("--bind", "-o", "ro", str(ro), str(ro))
    try:
        if mounted:
            targets.append(ro / "o.mpyl")
        for out in targets:
            line = cli.fails("pack", src, "-o", out)
            assert str(out) in line and ".tmp" not in line, line
        if mounted:
            assert os.listdir(ro) == ["o.mpyl"] and (ro / "o.mpyl").read_bytes() == b"previous contents"
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)])
    assert sorted(os.listdir(tmp_path)) == ["afile", "m.safetensors", "ro"]


def _pack_limited(src, out, limit):
    """pack in a child with RLIMIT_FSIZE (SIGXFSZ ignored: writes past it fail with EFBIG)."""
    code = ("import resource, signal, subprocess, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))\n"
            "sys.exit(subprocess.run([sys.executable, '-m', 'host_tools', 'pack', %r, '-o', %r]).returncode)\n"
            % (limit, limit, str(src), str(out)))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_disk_full(tmp_path):
    """A 256 KiB container onto a 64 KiB tmpfs (when mounting works) and under a 100 KB
    RLIMIT_FSIZE: exit 1, one line naming the output, the earlier output intact, no temp file."""
    src = save_safetensors(tmp_path / "m.safetensors", {"w": np.ones((256, 256), np.float32)})
    small = tmp_path / "small"
    small.mkdir()
    runs = []
    mounted = _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small))
    try:
        if mounted:
            out = small / "o.mpyl"
            out.write_bytes(b"previous contents")
            r = subprocess.run([sys.executable, "-m", "host_tools", "pack", str(src), "-o", str(out)],
                               capture_output=True, text=True, cwd=ROOT)
            runs.append((r, out, "No space left"))
            assert os.listdir(small) == ["o.mpyl"] and out.read_bytes() == b"previous contents"
    finally:
        if mounted:
            subprocess.run(["umount", str(small)])
    limited = tmp_path / "limited"
    limited.mkdir()
    out = limited / "o.mpyl"
    out.write_bytes(b"previous contents")
    runs.append((_pack_limited(src, out, 100_000), out, "File too large"))
    assert os.listdir(limited) == ["o.mpyl"] and out.read_bytes() == b"previous contents"
    for r, out, reason in runs:
        assert r.returncode == 1 and r.stdout == "", r
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith("mpy-lazy: error: %s: cannot write: %s" % (out, reason)), r.stderr
    # with room, the same command succeeds (the limit was the only problem)
    r = _pack_limited(src, out, 10_000_000)
    assert r.returncode == 0, r.stderr
    assert os.listdir(limited) == ["o.mpyl"] and out.read_bytes()[:4] == b"MPYL"
