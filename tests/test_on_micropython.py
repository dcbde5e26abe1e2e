"""Run every test function of tests/runtime/ on the real MicroPython unix port.

pytest also collects those files directly on CPython, so each runtime test runs on both
interpreters. Firmware tests (firmware/) run the same files on emulated boards."""
import ast
import os

import pytest

from conftest import RUNTIME_TESTS, run_micropython


def _runtime_tests():
    for fname in sorted(os.listdir(RUNTIME_TESTS)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        with open(os.path.join(RUNTIME_TESTS, fname)) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield pytest.param(fname[:-3], node.name, id="%s::%s" % (fname[:-3], node.name))


@pytest.mark.parametrize("module,func", list(_runtime_tests()))
def test_runtime_on_micropython(module, func):
    r = run_micropython("import %s\n%s.%s()\nprint('MPY-TEST-OK')\n" % (module, module, func))
    out = r.stdout + r.stderr
    if "MPY-TEST-SKIP:" in r.stdout:
        pytest.skip(r.stdout.split("MPY-TEST-SKIP:", 1)[1].strip().splitlines()[0])
    assert r.returncode == 0 and "MPY-TEST-OK" in r.stdout, out
