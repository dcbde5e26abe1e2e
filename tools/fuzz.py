"""Fuzz the runtime's container reader and graph runner on CPython and on the MicroPython unix port.

    python tools/fuzz.py --count 100000 --seed 7     # both interpreters, prints the figures
    python tools/fuzz.py --count 1000000 --micropython-count 100000   # the first 10^5 on both
    python tools/fuzz.py --graphs --count 20000      # containers with a model, descriptions mutated
    python tools/fuzz.py --programs --count 20000    # packed models, stored program words mutated
    python tools/fuzz.py --atheris -runs=200000      # coverage-guided (atheris), CPython only

The seeded corpus (tools/fuzz_corpus.py) is written to temp files of length-prefixed records;
each interpreter runs `run_records()` from this file over them in a few batched processes and
prints one verdict line per input. Every input must either open with every view inside the
buffer and readable end to end, or raise ContainerError; both interpreters must give the same
verdict. A container with a model (metadata `graph` or `layers`) is also declared, loaded and
run: the graph runner must refuse it with ContainerError or run it, its int8 outputs the same
on the best kernel path and on 'pure' (and, for all-int8 graphs, on both interpreters). A
process that dies is a crash, one that stops answering a hang; both resume after the input.
Exit status 1 when anything but a clean verdict or a mismatch shows up.

This file also runs on MicroPython (the driver part: verdict, run_records)."""
import gc
import struct
import sys

_ROOT = __file__.rsplit("/", 2)[0] if __file__.count("/") >= 2 else ".."
if _ROOT not in sys.path:  # run as a script: the runtime of this tree
    sys.path.insert(0, _ROOT)

try:
    import uctypes
except ImportError:
    uctypes = None

import mpy_lazy
from mpy_lazy import ContainerError


def _address(b):
    if uctypes:
        return uctypes.addressof(b)
    import numpy

    return numpy.frombuffer(b, "u1").__array_interface__["data"][0]


def _touch(v, info):
    """Read every element every way a kernel can (tolist() only where the list of boxed
    values fits a small heap: on MicroPython 64K floats would take over 1 MB)."""
    n = info.size
    if n <= 4096 and len(v.tolist()) != n:
        return "tolist"
    a = v.array()
    for i in range(n):
        a[i]
    v[0]
    v[n - 1]
    v.real(0)
    v.real(n - 1)
    if info.dtype in ("f32", "f16", "i8"):
        v.dequantize()
    return None


def verdict(buf):
    """'ok <tensors>' (+ ' data_crc' when verify() refuses), 'ContainerError <field>', or
    'OOB ...' when a view is not exactly its bytes of `buf`. Other exceptions propagate."""
    try:
        c = mpy_lazy.open(buf)
    except ContainerError as e:
        return "ContainerError %s" % e.field
    size = len(buf)
    base = _address(buf) if size else 0
    names = c.names(aux=True)
    if len(names) != len(c):
        return "OOB names: %d of %d" % (len(names), len(c))
    for name in names:
        if name not in c:
            return "OOB lookup %r" % name
        info = c.info(name)
        start, end = info.offset, info.offset + info.nbytes
        if not (c.data_offset <= start and end <= c.file_size <= size):
            return "OOB %r: [%d, %d) outside [%d, %d)" % (name, start, end, c.data_offset, c.file_size)
        v = c.view(name)
        if len(v.mv) != info.nbytes or v.size != info.size:
            return "OOB %r: view of %d bytes, entry %d" % (name, len(v.mv), info.nbytes)
        if v.aligned and _address(v.mv) != base + start:
            return "OOB %r: view is not at buffer + %d" % (name, start)
        if bytes(v.mv) != bytes(buf[start:end]):
            return "OOB %r: view bytes differ from the buffer" % name
        bad = _touch(v, info)
        if bad:
            return "OOB %r: %s" % (name, bad)
    meta = c.meta
    try:
        c.verify()
        v = "ok %d" % len(names)
    except ContainerError as e:
        v = "ok %d %s" % (len(names), e.field)
    if "graph" in meta or "layers" in meta:
        meta = None
        v += " | " + graph_result(c)
    return v


def result(buf):
    try:
        return verdict(buf)
    except Exception as e:  # MemoryError included: the reader must size-check before allocating
        return "OTHER %s: %s" % (type(e).__name__, str(e).split("\n")[0][:100])


# --- the graph runner on a container's model ---------------------------------------------

GRAPH_BYTES = 100000  # values larger than this (in all) are not prepared: "big"
GRAPH_WORK = 20000  # nor graphs of more multiply-adds / window reads: "heavy"


def _work(m):
    w = 0
    for op in m.ops:
        k = (getattr(op, "kv", None) or {}).get("k") or ()  # pooling windows, kernels
        n = op.y.size * (k[0] * k[-1] if k else 1)
        macs = getattr(op, "macs", 0)
        w += (macs if macs > n else n) + op.y.size
        for x in op.x:
            w += x.size
    return w


_NONFINITE = (float("nan"), float("inf"), float("-inf"), 3.4e38, -3.4e38, 1e-45)


def _inputs(m, nonfinite=False):
    """Deterministic inputs; with nonfinite, the float ones hold NaN, +-Inf and extremes too."""
    out = []
    for v in m.inputs:
        if v.dtype == "i8":
            out.append([(i * 37) % 256 - 128 for i in range(v.size)])
        elif v.dtype == "u8":
            out.append([(i * 37) % 256 for i in range(v.size)])
        elif v.dtype == "bool":
            out.append([(i * 37) % 3 & 1 for i in range(v.size)])
        elif v.dtype != "f32":  # i16, i32 codes
            out.append([(i * 7919) % 65536 - 32768 for i in range(v.size)])
        elif nonfinite:
            out.append([_NONFINITE[i % 6] if i % 3 == 0 else ((i * 7) % 13) / 6.0 - 1.0 for i in range(v.size)])
        else:
            out.append([((i * 7) % 13) / 6.0 - 1.0 for i in range(v.size)])
    return out


def program_verdict(c, m):
    """What the program runner makes of a container's stored program (mpy_lazy/program.py):
    'refused <field>' (ContainerError at load), 'big' / 'heavy' (too large to run here:
    arena, or multiply-adds plus arena bytes per record), or 'ran <records> <digest>' after a
    forward pass on the best kernel path and on 'pure' (their integer outputs must agree:
    'MISMATCH' otherwise; digest: crc32 of the integer outputs, 'f' with float outputs; the
    run-time errors the format gives, on every path: 'index' where a gathernd record's indices
    (read from the model's input) fall outside its params, 'loop' where a WHILE runs past its
    most iterations). Each path starts from the state reset (overlap-add, framer, variables)."""
    from binascii import crc32

    from mpy_lazy import kernels
    from mpy_lazy.kinds import FLOATS, GATHERND, H_ARENA, H_RECORDS, NEXT

    P = m.P
    if P[H_ARENA] > GRAPH_BYTES:
        return "big"
    if kernels.macs(P) + P[H_ARENA] * P[H_RECORDS] > 20 * GRAPH_WORK:
        return "heavy"
    xs = _inputs(m, c._meta_get("fuzz") == "nonfinite")
    digests = []
    paths = kernels.available()
    floats = False
    try:
        for path in (paths[0], "pure") if paths[0] != "pure" else ("pure",):
            kernels.use(path)
            m.A[:] = bytes(len(m.A))  # a mutated program may read what it never wrote: the same zeros
            m.reset()  # (the state of the stateful ops: each path starts from it)
            try:
                m(*xs)
            except IndexError as e:  # (viper's has no message; a read past a buffer has another)
                if GATHERND not in _kinds(P) or str(e) and not str(e).startswith("gather_nd"):
                    raise
                digests.append("index")
                continue
            except RuntimeError as e:  # a WHILE past its most iterations: the format's run-time error
                if NEXT not in _kinds(P) or "next: more than" not in str(e):
                    raise
                digests.append("loop")
                continue
            b = bytearray()
            for i in range(len(m.outputs)):
                if m.outputs[i].dtype != "f32":
                    for q in m.tolist(i):
                        b.append(q & 0xFF)
                        b.append((q >> 8) & 0xFF)
                else:
                    floats = True
                    for f in m.tolist(i):
                        f + 0.0
            digests.append(crc32(b))
    finally:
        kernels.use()
    if digests[-1] != digests[0] and "loop" in digests and set(_kinds(P)) & set(FLOATS):
        # a WHILE whose condition comes from float values: each path rounds its float sums its
        # own way (ulab in float32, pure in the interpreter's floats), so the iteration counts
        # may differ where the values explode (a mutated while_f32: 3e26 after a few rounds)
        return "ran %d loop-f" % P[H_RECORDS]
    if digests[-1] != digests[0]:
        return "MISMATCH integer outputs of %s and pure" % paths[0]
    if digests[0] in ("index", "loop"):
        return "ran %d %s" % (P[H_RECORDS], digests[0])
    return "ran %d %s" % (P[H_RECORDS], "f" if floats else "%08x" % digests[0])


def _kinds(P):
    """The record kinds of program words P."""
    from mpy_lazy.kinds import H_FIRST, H_RECORDS

    out, k = [], P[H_FIRST]
    for _ in range(P[H_RECORDS]):
        out.append(P[k] & 255)
        k += P[k + 1]
    return out


def graph_verdict(c):
    """What the graph runner makes of the container's model: 'refused <field>' (declare, load
    or prepare raised ContainerError), 'big' / 'heavy' (too large to run here, decided from
    the declared values alone), or 'ran <ops> <digest>' after a forward pass on the best kernel
    path and on 'pure' (the int8 outputs of both must agree: 'MISMATCH' otherwise; digest is
    their crc32 when every value of the graph is int8, else 'f'). Other exceptions propagate."""
    from binascii import crc32

    from mpy_lazy import kernels, model, program

    if program.NAME in c:  # a stored program: what from_container() runs (where it can)
        try:
            m = model.from_container(c)
        except ContainerError as e:
            return "refused %s" % e.field
        if isinstance(m, program.Program):
            return program_verdict(c, m)
    try:
        m = model.declare(c)
        m.load(c)
    except ContainerError as e:
        return "refused %s" % e.field
    total = 0
    for v in m.values:
        total += v.size * (1 if v.dtype == "i8" else 4)
    if total > GRAPH_BYTES:
        return "big"
    if _work(m) > GRAPH_WORK:
        return "heavy"
    try:
        m.prepare()
    except ContainerError as e:
        return "refused %s" % e.field
    bad = _requant_out_of_range(m)
    if bad:  # running it would shift by up to 2**31 bits (a hang / a 200 MB int on 'pure')
        return "OTHER unchecked requant tensor: %s" % bad
    xs = _inputs(m, c._meta_get("fuzz") == "nonfinite")
    digests = []
    paths = kernels.available()
    try:
        for path in (paths[0], "pure") if paths[0] != "pure" else ("pure",):
            kernels.use(path)
            m.reset()  # (a model with state, lstm state=keep: each path from the initial state)
            try:
                m.reset()  # (the state of the stateful ops: each path starts from it)
                m(*xs)
            except ContainerError as e:  # prepare() refusing
                return "refused %s" % e.field
            except IndexError as e:  # a gathernd's indices outside its params (as in program_verdict)
                if "gathernd" not in [op.name for op in m.ops] or str(e) and not str(e).startswith("gather_nd"):
                    raise
                digests.append("index")
                continue
            b = bytearray()
            for i in range(len(m.outputs)):
                if m.outputs[i].dtype != "f32":
                    for q in m.tolist(i):
                        b.append(q & 0xFF)
                        b.append((q >> 8) & 0xFF)
                else:
                    for f in m.tolist(i):  # read every float (a view past its buffer would fail here)
                        f + 0.0
            digests.append(crc32(b))
    finally:
        kernels.use()
    if digests[-1] != digests[0]:
        return "MISMATCH integer outputs of %s and pure" % paths[0]
    if digests[0] == "index":
        return "ran %d index" % len(m.ops)
    floats = False
    for v in m.values:
        if v.dtype == "f32":
            floats = True
    return "ran %d %s" % (len(m.ops), "f" if floats else "%08x" % digests[0])


def _requant_out_of_range(m):
    """The first int8 requantization tensor value (multiplier, shift) outside what TFLite
    Micro produces (multiplier 0..2**31-1, shift -31..30) that the runtime accepted, or None."""
    for i in range(len(m.ops)):
        p = getattr(m.ops[i], "requant", None)
        if p is None or len(p.shape) != 2:  # (an lstm's or gru's: 1-D, checked by its record's check)
            continue
        oc = p.shape[1]
        for j in range(oc):
            mult, sh = int(p[j]), int(p[oc + j])
            if not 0 <= mult <= 2147483647 or not -31 <= sh <= 30:
                return "op %d (%s) channel %d: multiplier %d, shift %d" % (i, m.ops[i].name, j, mult, sh)
    return None


def graph_result(c):
    try:
        return graph_verdict(c)
    except Exception as e:
        return "OTHER %s: %s" % (type(e).__name__, str(e).split("\n")[0][:100])


def run_records(path, start=0, stop=None):
    """Driver: print '<index> <verdict>' for each record of `path` from index `start` (up to
    index `stop`, excluded)."""
    f = open(path, "rb")
    i = 0
    while stop is None or i < stop:
        head = f.read(4)
        if len(head) < 4:
            break
        data = f.read(struct.unpack("<I", head)[0])
        if len(data) > 16384 or i % 64 == 0:
            gc.collect()  # big inputs on a fragmented heap: keep the verdict about the reader
        if i >= start:
            print(i, result(data))
        i += 1
    f.close()
    print("END")


# --- host side (CPython) -------------------------------------------------------------------

def _micropython():
    import os
    import shutil

    env = os.environ.get("MICROPYTHON")
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    return env or (here if os.path.exists(here) else shutil.which("micropython"))


def _command(interp, path, start, stop):
    import os

    tools = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(tools)
    code = "import sys\nsys.path[:0] = [%r, %r]\nimport fuzz\nfuzz.run_records(%r, %d, %d)\n" % (
        root, tools, path, start, stop)
    if interp == "micropython":
        return [_micropython(), "-c", code]
    return [sys.executable, "-u", "-c", code]  # (unbuffered: each verdict seen as it comes)


def _run_batch(interp, path, count, timeout):
    """Verdicts of every record of `path` on `interp`; a dead process, or one that gives no
    verdict for `timeout` seconds (one input: a loaded machine slows a whole batch, not one
    input by minutes), marks the input it was on ('CRASH ...' / 'HANG') and the batch resumes
    after it."""
    import select
    import subprocess

    out = [None] * count
    start = 0
    while start < count:
        p = subprocess.Popen(_command(interp, path, start, count), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        lines, failure = [], None
        while True:
            if not select.select([p.stdout], [], [], timeout)[0]:
                p.kill()
                failure = "HANG"
                break
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
        stderr = p.communicate()[1]
        if failure is None and p.returncode != 0:
            failure = "CRASH rc=%d %s" % (p.returncode, (stderr.strip().splitlines() or [""])[-1][:120])
        for line in lines:
            if line != "END":
                i, v = line.split(" ", 1)
                out[int(i)] = v
        if failure is None and lines and lines[-1] == "END":
            break
        start = next(i for i in range(start, count) if out[i] is None)
        out[start] = failure or "CRASH no END line"
        start += 1
    return out


def run(count, seed, jobs=2, log=print, graphs=False, mp_count=None):
    """Run `count` inputs of the seeded corpus (graphs: of containers with a model, their
    descriptions mutated) on CPython, the first `mp_count` (default: all) on MicroPython too;
    returns the figures."""
    import fuzz_corpus

    if graphs == "programs":
        inputs = fuzz_corpus.program_corpus(count, seed)
    else:
        inputs = fuzz_corpus.graph_corpus(count, seed) if graphs else fuzz_corpus.corpus(count, seed)
    return run_inputs(inputs, count, seed, jobs, log, mp_count)


PART = 10000  # inputs per driver process
INPUT_TIMEOUT = 120  # seconds without a verdict: a hang (the slowest input takes a few seconds)


def run_inputs(inputs, count, seed=None, jobs=2, log=print, mp_count=None):
    """Run `count` inputs (an iterable of bytes) on CPython and the first `mp_count` (default:
    all) on MicroPython, `jobs` processes per interpreter; returns the figures (a dict). The
    inputs are written to temp files in parts of at most PART records."""
    import itertools
    import os
    import tempfile
    import time
    from concurrent.futures import ThreadPoolExecutor

    import fuzz_corpus

    mp_count = count if mp_count is None else min(mp_count, count)
    t0 = time.time()
    inputs = iter(inputs)
    sizes = []

    def sized(it):
        for b in it:
            sizes.append(len(b))
            yield b

    with tempfile.TemporaryDirectory(prefix="mpyl-fuzz-") as tmp:
        parts, step = [], min(PART, max(1, (count + jobs - 1) // jobs))
        for k in range(0, count, step):
            path = os.path.join(tmp, "part%d.bin" % len(parts))
            n = fuzz_corpus.write_records(path, sized(itertools.islice(inputs, step)))
            parts.append((path, k, n))
        gen = time.time() - t0
        t1 = time.time()
        done = {"cpython": t1, "micropython": t1}  # when each interpreter's last batch ended

        def timed(interp, *args):
            out = _run_batch(interp, *args)
            done[interp] = max(done[interp], time.time())
            return out

        with ThreadPoolExecutor(jobs) as cex, ThreadPoolExecutor(jobs) as mex:
            cf = [cex.submit(timed, "cpython", path, n, INPUT_TIMEOUT) for path, k, n in parts]
            mf = [mex.submit(timed, "micropython", path, min(n, mp_count - k), INPUT_TIMEOUT)
                  for path, k, n in parts if k < mp_count]
            verdicts = {"cpython": [v for f in cf for v in f.result()],
                        "micropython": [v for f in mf for v in f.result()]}
    figures = {"count": len(sizes), "seed": seed, "seconds": round(time.time() - t0, 1),
               "corpus_seconds": round(gen, 1), "total_bytes": sum(sizes),
               "largest_input": max(sizes, default=0), "mp_count": mp_count, "jobs": jobs}
    for interp, vs in verdicts.items():
        f = {"inputs": len(vs), "seconds": round(done[interp] - t1, 1), "ok": 0, "ok_bad_crc": 0, "refused": 0, "crashes": 0, "hangs": 0,
             "out_of_bounds": 0, "other_exceptions": 0, "examples": [],
             "graphs": 0, "graph_ran": 0, "graph_refused": 0, "graph_skipped": 0, "graph_other": 0,
             "graph_mismatch": 0, "other_messages": {}}
        for i, v in enumerate(vs):
            v, _, g = v.partition(" | ")  # container verdict | graph runner verdict
            key = ("ok_bad_crc" if v.count(" ") == 2 else "ok") if v.startswith("ok") else {
                "ContainerError": "refused", "CRASH": "crashes", "HANG": "hangs", "OOB": "out_of_bounds",
                "OTHER": "other_exceptions"}[v.split(" ")[0]]
            f[key] += 1
            bad = key not in ("ok", "ok_bad_crc", "refused")
            if g:
                f["graphs"] += 1
                gkey = {"ran": "graph_ran", "refused": "graph_refused", "big": "graph_skipped",
                        "heavy": "graph_skipped", "MISMATCH": "graph_mismatch"}.get(g.split(" ")[0], "graph_other")
                f[gkey] += 1
                bad = bad or gkey in ("graph_other", "graph_mismatch")
                if gkey == "graph_other":
                    f["other_messages"][g] = f["other_messages"].get(g, 0) + 1
            if bad and len(f["examples"]) < 5:
                f["examples"].append((i, v + (" | " + g if g else "")))
        figures[interp] = f
    mism = [(i, a, b) for i, (a, b) in enumerate(zip(verdicts["cpython"], verdicts["micropython"]))
            if _comparable(a) != _comparable(b)]
    figures["mismatches"] = len(mism)
    figures["mismatch_examples"] = mism[:5]
    fields = {}
    for v in verdicts["cpython"]:
        v, _, g = v.partition(" | ")
        if v.startswith("ContainerError"):
            fields[v.split(" ")[1]] = fields.get(v.split(" ")[1], 0) + 1
        if g.startswith("refused"):
            fields["model: " + g.split(" ")[1]] = fields.get("model: " + g.split(" ")[1], 0) + 1
    figures["refused_by_field"] = dict(sorted(fields.items(), key=lambda kv: -kv[1]))
    if log:
        report(figures, log)
    return figures


def _comparable(v):
    """A verdict as compared across interpreters: an exception's message differs between them
    (each is counted as a failure anyway), so only its type is compared."""
    out = []
    for part in v.split(" | "):
        if part.startswith(("refused", "big")):  # which check fires first may differ (MicroPython's
            part = "refused"  # heap refuses a large arena before the records are read)
        out.append(" ".join(part.split(" ")[:2]).rstrip(":") if part.startswith("OTHER") else part)
    return " | ".join(out)


def report(f, log=print):
    log("fuzz: %d inputs (seed %s, %d bytes, largest %d), %.1f s (corpus %.1f s)"
        % (f["count"], f["seed"], f["total_bytes"], f["largest_input"], f["seconds"], f["corpus_seconds"]))
    for interp in ("cpython", "micropython"):
        x = f[interp]
        log("%-11s inputs %d: opened %d (+%d with a bad data CRC), refused %d; crashes %d, hangs %d, "
            "out-of-bounds %d, other exceptions %d" % (interp, x["inputs"], x["ok"], x["ok_bad_crc"],
            x["refused"], x["crashes"], x["hangs"], x["out_of_bounds"], x["other_exceptions"]))
        log("%-11s %.1f s, %d inputs a second (%d processes, sharing the cores with the other "
            "interpreter)" % ("", x["seconds"], x["inputs"] / max(x["seconds"], 0.1), f.get("jobs", 0)))
        if x["graphs"]:
            log("%-11s models %d: ran %d, refused %d, too big to run %d; other exceptions %d, "
                "kernel paths disagreeing %d" % ("", x["graphs"], x["graph_ran"], x["graph_refused"],
                x["graph_skipped"], x["graph_other"], x["graph_mismatch"]))
        for ex in x["examples"]:
            log("    input %d: %s" % ex)
        for msg, n in sorted(x["other_messages"].items(), key=lambda kv: -kv[1])[:8]:
            log("    %d x %s" % (n, msg))
    log("mismatches between interpreters: %d (over the %d inputs both ran)" % (f["mismatches"], f["mp_count"]))
    for ex in f["mismatch_examples"]:
        log("    input %d: cpython %r, micropython %r" % ex)
    log("refused by field: " + ", ".join("%s %d" % kv for kv in f["refused_by_field"].items()))


def failed(f):
    return f["mismatches"] or any(f[i][k] for i in ("cpython", "micropython")
                                  for k in ("crashes", "hangs", "out_of_bounds", "other_exceptions",
                                            "graph_other", "graph_mismatch"))


def atheris_main(argv):
    """Coverage-guided fuzzing of verdict() with atheris (libFuzzer); seeds: the golden files."""
    import os
    import tempfile

    import atheris
    import fuzz_corpus
    import random

    # re-import the runtime with coverage instrumentation (only it: instrumenting every loaded
    # module costs most of a minute)
    global mpy_lazy, ContainerError
    for name in [m for m in sys.modules if m == "mpy_lazy" or m.startswith("mpy_lazy.")]:
        del sys.modules[name]
    with atheris.instrument_imports(include=["mpy_lazy"]):
        import mpy_lazy as instrumented
    mpy_lazy, ContainerError = instrumented, instrumented.ContainerError

    def one(data):
        v = result(data)
        if not (v.startswith("ok") or v.startswith("ContainerError")):
            raise AssertionError(v)

    seeds = os.path.join(tempfile.gettempdir(), "mpyl-atheris-seeds")  # rewritten on each run
    os.makedirs(seeds, exist_ok=True)
    golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "golden")
    for name in os.listdir(golden):
        if name.endswith(".mpyl"):
            with open(os.path.join(golden, name), "rb") as src, open(os.path.join(seeds, name), "wb") as dst:
                dst.write(src.read())
    rng = random.Random(0)
    for k in range(20):
        with open(os.path.join(seeds, "random%d.mpyl" % k), "wb") as f:
            f.write(fuzz_corpus.random_container(rng))
    if not any(not a.startswith("-") for a in argv):
        argv = argv + [seeds]
    atheris.Setup([sys.argv[0]] + argv, one)
    atheris.Fuzz()


def main(argv=None):
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--atheris"]:
        return atheris_main(argv[1:])
    p = argparse.ArgumentParser(description="Fuzz the container reader on CPython and MicroPython.")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2, help="processes per interpreter")
    p.add_argument("--micropython-count", type=int, metavar="N", help="run only the first N inputs on "
                   "MicroPython too (default: all); the rest on CPython alone")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    p.add_argument("--graphs", action="store_true", help="fuzz the graph runner: containers with a model "
                   "whose description (and now and then tensors) are mutated")
    p.add_argument("--programs", action="store_true", help="fuzz the program runner: packed models whose "
                   "stored program (graph.program) has words mutated, CRCs recomputed")
    args = p.parse_args(argv)
    graphs = "programs" if args.programs else args.graphs
    f = run(args.count, args.seed, args.jobs, graphs=graphs, mp_count=args.micropython_count)
    if args.json:
        import json

        with open(args.json, "w") as out:
            json.dump(f, out, indent=1)
    return 1 if failed(f) else 0


if __name__ == "__main__":
    sys.exit(main())
