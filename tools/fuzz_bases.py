"""Write the fuzzers' small base models (tests/golden/fuzz/bases/*.tflite, *.onnx) from the tests.

    python tools/fuzz_bases.py          # runs the tests below (a few minutes), picks, writes
    python tools/fuzz_bases.py DIR...   # picks from the models under DIRs (the --basetemp of a run)

The program fuzzer (tools/fuzz.py --programs) and the .tflite fuzzer (tools/fuzz_tflite.py)
mutate packed models; their first bases predate most record kinds. The one-op models the tests
write with TFLM's schema (tests/host/test_tflite*.py: each checked against TFLM there) cover
them, with the small torch models exported to ONNX by tests/host/test_models_elem.py and
test_torch_families.py (float layernorm, groupnorm, tconv: kinds no .tflite gives). This runs
those tests with a kept temporary folder, packs every model they wrote with
`mpy-lazy pack`, and keeps a small set whose stored programs hold every record kind from
FIRST_NEW on at least twice where the tests give two different programs with it (smallest
containers first: the fuzzers run faster on small ones; none whose arena is too large for the
fuzzer to run, tools/fuzz.py GRAPH_BYTES). Models the tests mean to be refused do
not pack and are left out. A name is the test's folder and the model's file name."""
import contextlib
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (ROOT, os.path.join(ROOT, "tools")):
    if p not in sys.path:
        sys.path.insert(0, p)

OUT = os.path.join(ROOT, "tests", "golden", "fuzz", "bases")
FIRST_NEW = 42  # the kinds of issue 29 and after (mpy_lazy/kinds.py)
MAX_BYTES = 64 << 10  # containers larger than this are left out (slow to fuzz; the small ones cover)
COPIES = 2
TESTS = ("test_models_elem.py", "test_torch_families.py")  # and every test_tflite*.py


def kinds_of(container):
    """The record kinds of a packed container's stored program (a sorted tuple), or None."""
    import fuzz_corpus

    try:
        data, off, _, starts, _ = fuzz_corpus._program_base(container)
    except Exception:  # no program (a model the packer keeps as a graph description only)
        return None
    return tuple(sorted({struct.unpack_from("<i", data, off + 4 * s)[0] & 255 for s in starts}))


def arena(container):
    """The arena bytes a packed container's stored program declares."""
    import fuzz_corpus
    from mpy_lazy.kinds import H_ARENA

    data, off, _, _, _ = fuzz_corpus._program_base(container)
    return struct.unpack_from("<i", data, off + 4 * H_ARENA)[0]


def pack(path, tmp):
    """The container `mpy-lazy pack` makes of `path` (bytes), or None when it refuses."""
    from host_tools import cli

    dst = os.path.join(tmp, "out.mpyl")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = cli.main(["pack", path, "-o", dst, "-q"])
        except Exception:
            return None
    if rc:
        return None
    with open(dst, "rb") as f:
        return f.read()


def candidates(folder, tmp):
    """[(container size, kinds, file name, model bytes)] of every .tflite and .onnx
    under `folder` that packs."""
    from mpy_lazy.kinds import KINDS

    from fuzz import GRAPH_BYTES

    out, seen = [], set()
    for d, _, files in sorted(os.walk(folder)):
        for fname in sorted(files):
            if not fname.endswith((".tflite", ".onnx")):
                continue
            path = os.path.join(d, fname)
            with open(path, "rb") as f:
                model = f.read()
            if model in seen:
                continue
            seen.add(model)
            c = pack(path, tmp)
            ks = kinds_of(c) if c else None
            if not ks or len(c) > MAX_BYTES or not any(FIRST_NEW <= k < KINDS for k in ks) or arena(c) > GRAPH_BYTES:
                continue
            test = os.path.basename(d).rstrip("0123456789")
            stem, ext = os.path.splitext(fname)
            out.append((len(c), ks, "%s-%s%s" % (test.replace("test_", "")[:24].strip("_"), stem, ext), model))
    return out


def pick(cands):
    """Greedy: while some kind from FIRST_NEW is held by fewer than COPIES picks (and a candidate
    not yet picked has it), take the candidate that raises the most such counts, the smallest first."""
    from mpy_lazy.kinds import KINDS

    count = {k: 0 for c in cands for k in c[1] if FIRST_NEW <= k < KINDS}
    chosen, left = [], list(cands)
    while True:
        def gain(c):
            return sum(1 for k in set(c[1]) if k in count and count[k] < COPIES)
        best = max(left, key=lambda c: (gain(c), -c[0]), default=None)
        if best is None or gain(best) == 0:
            return chosen
        left.remove(best)
        chosen.append(best)
        for k in best[1]:
            if k in count:
                count[k] += 1


def run_tests(tmp):
    """The candidates among the models the tests write (None if a test fails)."""
    temp = os.path.join(tmp, "pytest")
    tests = sorted(os.path.join("tests", "host", n) for n in os.listdir(os.path.join(ROOT, "tests", "host"))
                   if n.startswith("test_tflite") and n.endswith(".py") or n in TESTS)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", temp,
                        "-o", "tmp_path_retention_policy=all", "-o", "tmp_path_retention_count=100000"] + tests,
                       cwd=ROOT)
    return candidates(temp, tmp) if r.returncode == 0 else None


def main(argv=None):
    folders = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="mpyl-fuzz-bases-") as tmp:
        cands = [c for d in folders for c in candidates(d, tmp)] if folders else run_tests(tmp)
    if cands is None:
        print("the tests failed: no bases written", file=sys.stderr)
        return 1
    chosen = pick(sorted(cands, key=lambda t: (t[0], t[2])))
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    taken = set()
    for size, ks, name, model in chosen:
        while name in taken:  # the same file name from two parametrized runs of a test
            stem, ext = os.path.splitext(name)
            name = stem + "_" + ext
        taken.add(name)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(model)
        print("%-60s %6d B  kinds %s" % (name, size, " ".join(map(str, ks))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
