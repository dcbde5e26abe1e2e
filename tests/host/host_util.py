"""Helpers and fixtures shared by the host tests. (No conftest.py here: a second module named
`conftest` would shadow tests/conftest.py for `from conftest import ...`.)"""
import json
import os

import pytest

from host_tools.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")


class Cli:
    """Runs `mpy-lazy ARGS` in-process; returns (exit code, stdout, stderr)."""

    def __init__(self, capsys):
        self.capsys = capsys

    def __call__(self, *args):
        self.capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = self.capsys.readouterr()
        return rc, out, err

    def ok(self, *args):
        rc, out, err = self(*args)
        assert rc == 0, err
        return out

    def fails(self, *args):
        """The command fails the expected way: exit 1, exactly one `mpy-lazy: error:` line."""
        rc, out, err = self(*args)
        assert rc == 1, (out, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("mpy-lazy: error: "), err
        return lines[0]

    def inspect(self, path, values=()):
        args = ["inspect", "--json", path]
        for v in values:
            args += ["--values", v]
        return json.loads(self.ok(*args))


def save_safetensors(path, tensors):
    from safetensors.numpy import save_file

    save_file(tensors, str(path))
    return str(path)


def by_name(report):
    return {t["name"]: t for t in report["tensors"]}


def values(report, name):
    for v in report["values"]:
        if v["name"] == name:
            return v
    raise KeyError(name)


def assert_aligned(report, alignment):
    for t in report["tensors"]:
        assert t["offset"] % alignment == 0, t


@pytest.fixture
def cli(capsys):
    return Cli(capsys)


@pytest.fixture(scope="session")
def torch_mod():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return torch
