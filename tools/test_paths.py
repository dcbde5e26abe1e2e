"""Run tests from fresh clones at several path lengths (`make test-paths`).

MicroPython's heap holds the checkout's, the temporary directory's and HOME's paths, so a test
whose outcome depends on the heap's layout can pass in one folder and fail in another. This
clones the repository's HEAD to directories whose paths are exactly 20, 35, 50, 65 and 80
characters long (by default), and runs the heap-sensitive test files there (or the pytest
paths given: `tests` for all) with HOME and TMPDIR (pytest's temporary directories) at the
other lengths. It prints one line per clone and exits non-zero if any run failed.

    python tools/test_paths.py [--lengths 20,35,50,65,80] [--keep] [pytest paths...]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAP_TESTS = ["tests/host/test_lowmem.py", "tests/host/test_paths.py", "tests/host/test_arena_fragmentation.py",
              "tests/host/test_runtime_memory.py", "tests/runtime/test_graph_limits.py"]


VENV = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))  # make test-paths: .venv


def padded(base, length, tag):
    """A path under `base` exactly `length` characters long (its last part padded with `tag`)."""
    pad = length - len(base) - 1
    if pad < 1:
        raise SystemExit("test_paths: %s is too long for a %d-character path" % (base, length))
    return os.path.join(base, (tag * pad)[:pad])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="20,35,50,65,80", help="checkout path lengths (characters)")
    ap.add_argument("--keep", action="store_true", help="keep the clones")
    ap.add_argument("tests", nargs="*", default=HEAP_TESTS, help="pytest paths, relative to the checkout")
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mpl", dir="/tmp")
    failed = 0
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
        for i, length in enumerate(lengths):
            clone = padded(base, length, "c")
            # HOME and the temporary directory: the lengths of the next clones (all three the
            # same when one length is given)
            home = padded(base, lengths[(i + 1) % len(lengths)], "h")
            tmp = padded(base, lengths[(i + 2) % len(lengths)], "t")
            for d in (home, tmp):
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
            subprocess.run(["git", "clone", "-q", ROOT, clone], check=True)
            # the clone uses this venv (tests that run make find it set up): older inputs than
            # its stamp, so make does not rebuild it
            os.symlink(VENV, os.path.join(clone, ".venv"))
            for name in ("pyproject.toml", "requirements-dev.txt"):
                os.utime(os.path.join(clone, name), (0, 0))
            env = dict(os.environ, HOME=home, TMPDIR=tmp)
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "--basetemp", os.path.join(tmp, "pt")] + args.tests,
                               cwd=clone, env=env, capture_output=True, text=True)
            last = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
            print("checkout %d chars, HOME %d, tmp %d: %s" % (len(clone), len(home), len(tmp), last), flush=True)
            if r.returncode:
                failed += 1
                print(r.stdout[-4000:] + r.stderr[-2000:])
            if not args.keep:
                shutil.rmtree(clone)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print("test_paths: %s" % ("%d run(s) failed" % failed if failed else "all passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
