# Helpers shared by the runtime tests. These tests run unchanged on CPython (collected by pytest)
# and on the MicroPython unix port (driven by tests/test_on_micropython.py), so they use nothing
# but plain asserts and this module.
import sys

IS_MICROPYTHON = sys.implementation.name == "micropython"

_here = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
TESTS_DIR = _here.rsplit("/", 1)[0] if "/" in _here else ".."
GOLDEN_DIR = TESTS_DIR + "/golden"


def golden(name):
    """Bytes of tests/golden/<name>."""
    with open(GOLDEN_DIR + "/" + name, "rb") as f:
        return f.read()


def golden_json(name):
    import json

    with open(GOLDEN_DIR + "/" + name) as f:
        return json.load(f)


def raises(exc_type, fn, *args, **kwargs):
    """Call fn and return the exception it raised; fail unless it is an exc_type."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError("%s did not raise %s" % (fn, exc_type.__name__))


def crc32(data):
    import binascii

    return binascii.crc32(data) & 0xFFFFFFFF


def skip(reason):
    """Skip the calling test: pytest.skip on CPython, a marker line + exit on MicroPython."""
    if IS_MICROPYTHON:
        print("MPY-TEST-SKIP:", reason)
        raise SystemExit(0)
    import pytest

    pytest.skip(reason)
