"""Fuzz the .tflite reader against TensorFlow Lite Micro: structure-aware mutants of real models.

    python tools/fuzz_tflite.py --count 100000 --seed 13 [--jobs 2] [--json FILE]

Each mutant is a small real model (the .tflite fixtures and tflite-micro's own test models in
tests/golden) with one to three fields changed through TFLite's own schema object API (TFLM's
schema_py_generated): a tensor's type, shape, quantization arrays, flags or buffer; a
buffer's bytes (truncated, extended, emptied, or other weights); an operator's inputs, outputs,
opcode, options table or an option's value; the model's inputs and outputs. Then, each in a
forked process (so a crash or hang of either side is caught and counted):
  - `mpy-lazy pack` must exit 0 or refuse in one line (exit 1); anything else is a failure;
  - TFLite Micro (the tflite-micro wheel) runs it or refuses it (or crashes: counted);
  - a packed model is loaded by the runtime (CPython, 'pure' kernels) and run on the same
    seeded input as TFLM. It must give TFLM's outputs (integers equal; floats within 1e-4
    relative), or have been refused by pack. A model the runtime refuses after pack accepted
    it, or runs where TFLM refuses it, or answers otherwise, is a failure.
Each base model runs unmutated first (it must give TFLM's answer); those runs are not counted
as mutants. Exit status 1 if any failure shows up; the figures are printed (docs/RELIABILITY.md)."""
import os
import pickle
import random
import select
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (ROOT, os.path.join(ROOT, "tests")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

BASES = ("tests/golden/tflite/digits_cnn_int8.tflite", "tests/golden/tflite/digits_mlp_int8.tflite",
         "tests/golden/tflite/digits_cnn_f32.tflite", "tests/golden/tflite/ops_int8.tflite",
         "tests/golden/tflite/digits_mlp_float_io.tflite") + tuple(
    "tests/golden/thirdparty/tflite-micro/%s.tflite" % n for n in (
        "hello_world_int8", "seanet_add16", "seanet_conv15", "seanet_leaky_relu18", "seanet_pad0",
        "seanet_quantize1", "seanet_strided_slice0", "seanet_sub1", "seanet_sub0",
        "keyword_scrambled", "mnist_lstm_int8")) + tuple(
    "tests/golden/tflite/%s.tflite" % n for n in ("elem_int8", "elem_f32", "resize_int8", "cast_f32"))
# the ops of issue 29 on: control flow, state variables, the signal library, and the one-op
# models tools/fuzz_bases.py picks from the tests (tests/golden/fuzz/bases)
BASES += tuple("tests/golden/tflite/%s.tflite" % n for n in ("cond_f32", "while_f32", "stream_f32", "stream_int8")) + (
    "tests/golden/thirdparty/tflite-micro/audio_preprocessor_int8.tflite",) + tuple(sorted(
        "tests/golden/fuzz/bases/" + n for n in os.listdir(os.path.join(ROOT, "tests/golden/fuzz/bases"))
        if n.endswith(".tflite") and n not in (
            "tflite_control-never.tflite", "tflite_control-while_if_input.tflite",  # (WHILEs that end on some inputs only)
            "signal_ops-energy.tflite")))  # (TFLM leaves the output bins outside start..end unwritten)
INDEX = "indices outside the params: both fail at run time"  # (GATHER_ND's indices, a model input)
INTS = (0, 1, -1, 2, 3, 4, 7, 8, 16, 127, 128, -128, 255, 256, 32767, 65535, 65536, 2 ** 31 - 1, -2 ** 31)
FLOATS = (0.0, -0.0, 1.0, -1.0, 1e-45, 1e-30, 1e30, 3.4e38, float("inf"), float("nan"), 0.5, 2.0)
TIMEOUT = 60  # seconds for one mutant's pack + run, or TFLM's run
TFLM_ARENA = 8 << 20  # bytes: more than any base model needs (a model that needs more: refused)


def _schema():
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as S

    return S


# --- mutations of schema.ModelT --------------------------------------------------------------

def _tensor(rng, m):
    sg = m.subgraphs[0]
    return sg.tensors[rng.randrange(len(sg.tensors))]


def t_type(rng, m):
    S = _schema()
    _tensor(rng, m).type = rng.choice((S.TensorType.FLOAT32, S.TensorType.INT8, S.TensorType.INT16,
                                       S.TensorType.INT32, S.TensorType.INT64, S.TensorType.UINT8,
                                       S.TensorType.FLOAT16, S.TensorType.BOOL, 200))


def t_shape(rng, m):
    t = _tensor(rng, m)
    shape = list(t.shape if t.shape is not None else [])
    what = rng.randrange(4)
    if what == 0 and shape:
        k = rng.randrange(len(shape))
        shape[k] = rng.choice((0, -1, -2, 1, 2, shape[k] + 1, shape[k] - 1, 65536, 2 ** 31 - 1))
    elif what == 1 and shape:
        del shape[rng.randrange(len(shape))]
    elif what == 2:
        shape.insert(rng.randrange(len(shape) + 1), rng.choice((1, 2, 3)))
    else:
        rng.shuffle(shape)
    t.shape = shape


def t_quant(rng, m):
    S = _schema()
    t = _tensor(rng, m)
    q = t.quantization or S.QuantizationParametersT()
    t.quantization = q
    what = rng.randrange(5)
    scales = list(q.scale if q.scale is not None else [])
    zps = list(q.zeroPoint if q.zeroPoint is not None else [])
    if what == 0:
        q.scale = [rng.choice(FLOATS)] * max(1, len(scales)) if rng.random() < 0.5 else scales + [0.1]
    elif what == 1:
        q.zeroPoint = [] if rng.random() < 0.3 else [rng.choice(INTS)] * max(1, len(zps))
    elif what == 2:
        q.quantizedDimension = rng.choice((0, 1, 2, 3, 4, -1, 100))
    elif what == 3 and scales:
        q.scale = scales[: rng.randrange(len(scales))]
    else:
        t.quantization = None


def t_flags(rng, m):
    S = _schema()
    t = _tensor(rng, m)
    what = rng.randrange(3)
    if what == 0:
        t.isVariable = not t.isVariable
    elif what == 1:
        t.buffer = rng.choice((0, len(m.buffers), len(m.buffers) + 5, rng.randrange(len(m.buffers))))
    else:
        t.sparsity = S.SparsityParametersT()


def b_data(rng, m):
    """A buffer's bytes: truncated, extended, emptied, or other values of the same length
    (other weights: then the answers must still be TFLM's)."""
    full = [b for b in m.buffers if b.data is not None and len(b.data)]
    if not full:
        return
    b = rng.choice(full)
    data = bytes(bytearray(b.data))
    what = rng.randrange(5)
    if what == 0:
        data = data[: rng.randrange(len(data))]
    elif what == 1:
        data = data + bytes(rng.choice((1, 4, 64)))
    elif what == 2:
        data = b""
    else:  # new values, twice as often: the valid mutants
        data = bytes(rng.randrange(256) for _ in range(len(data)))
    b.data = np.frombuffer(data, np.uint8) if data else None


def o_io(rng, m):
    sg = m.subgraphs[0]
    op = sg.operators[rng.randrange(len(sg.operators))]
    n = len(sg.tensors)
    lst = list(op.inputs) if rng.random() < 0.7 else list(op.outputs)
    what = rng.randrange(4)
    if what == 0 and lst:
        lst[rng.randrange(len(lst))] = rng.choice((-1, n, n + 100, rng.randrange(n)))
    elif what == 1 and lst:
        del lst[rng.randrange(len(lst))]
    elif what == 2:
        lst.append(rng.choice((-1, rng.randrange(n))))
    elif lst:
        lst[rng.randrange(len(lst))] = rng.randrange(n)
    if rng.random() < 0.7:
        op.inputs = lst
    else:
        op.outputs = lst


def o_code(rng, m):
    S = _schema()
    sg = m.subgraphs[0]
    op = sg.operators[rng.randrange(len(sg.operators))]
    if rng.random() < 0.5:
        op.opcodeIndex = rng.choice((0, len(m.operatorCodes), rng.randrange(len(m.operatorCodes))))
    else:
        c = m.operatorCodes[rng.randrange(len(m.operatorCodes))]
        code = rng.choice([v for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_")
                           and isinstance(v, int)][:160])
        c.builtinCode = code
        c.deprecatedBuiltinCode = min(code, 127)


def o_options(rng, m):
    """One field of an operator's options table set to a limit, or the table swapped for
    another op's or dropped."""
    S = _schema()
    sg = m.subgraphs[0]
    op = sg.operators[rng.randrange(len(sg.operators))]
    o = op.builtinOptions
    what = rng.randrange(5)
    if o is not None and what < 3:
        fields = [k for k, v in vars(o).items() if isinstance(v, (int, float, bool)) and not k.startswith("_")]
        if fields:
            f = rng.choice(fields)
            v = getattr(o, f)
            setattr(o, f, rng.choice(FLOATS) if isinstance(v, float) else rng.choice(INTS + (v + 1, v - 1)))
            return
    if what == 3:
        other = sg.operators[rng.randrange(len(sg.operators))]
        op.builtinOptionsType, op.builtinOptions = other.builtinOptionsType, other.builtinOptions
    elif what == 4:
        op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.NONE, None
    else:
        p = S.Pool2DOptionsT()
        p.strideW = p.strideH = p.filterWidth = p.filterHeight = 1
        op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.Pool2DOptions, p


def g_io(rng, m):
    sg = m.subgraphs[0]
    n = len(sg.tensors)
    lst = list(sg.inputs) if rng.random() < 0.5 else list(sg.outputs)
    if lst and rng.random() < 0.5:
        lst[rng.randrange(len(lst))] = rng.choice((n, -1, rng.randrange(n)))
    else:
        lst.append(rng.randrange(n))
    if rng.random() < 0.5:
        sg.inputs = lst
    else:
        sg.outputs = lst


MUTATIONS = (t_type, t_shape, t_shape, t_quant, t_quant, t_flags, b_data, b_data, b_data, o_io, o_io,
             o_code, o_options, o_options, o_options, g_io)


def _write(m):
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def mutant(rng, base):
    """One mutated copy (bytes) of base (bytes), or None when the schema cannot write it."""
    import tflm_ref

    m = tflm_ref.read_model(base)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        rng.choice(MUTATIONS)(rng, m)
    try:
        return _write(m)
    except Exception:
        return None


# --- one mutant, each side in a forked process ----------------------------------------------

def _forked(fn, *args):
    """fn(*args) in a forked child: its result, or ('CRASH', status) / ('HANG',)."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            out = fn(*args)
        except BaseException as e:  # noqa: B036 (the child reports everything)
            out = ("EXC", "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:150] if str(e) else ""))
        with os.fdopen(w, "wb") as f:
            f.write(pickle.dumps(out))
        os._exit(0)
    os.close(w)
    data, deadline = b"", time.time() + TIMEOUT
    with os.fdopen(r, "rb") as f:
        while True:
            left = deadline - time.time()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return ("HANG",)
            chunk = os.read(f.fileno(), 1 << 16)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    if not data:
        return ("CRASH", status)
    return pickle.loads(data)


def _inputs(specs, seed):
    """Seeded inputs for [(dtype, size)]: integer codes over the type's range, floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for dt, n in specs:
        if dt == "f32":
            out.append(rng.standard_normal(n).astype(np.float32))
        elif dt in ("bool", "u8"):
            out.append(rng.integers(0, 2 if dt == "bool" else 256, size=n))
        else:
            top = {"i8": 128, "i16": 32768, "i32": 1 << 20}[dt]
            out.append(rng.integers(-top, top, size=n))
    return out


def ours(path, seed):
    """Pack (the real CLI) and run on the runtime: ('refused', line), ('load', message) (pack
    accepted, the runtime refused), or ('ran', specs, outputs)."""
    import io
    from contextlib import redirect_stderr

    import mpy_lazy
    from host_tools import cli
    from mpy_lazy import kernels, model

    out = path + ".mpyl"
    err = io.StringIO()
    with redirect_stderr(err):
        rc = cli.main(["pack", path, "-o", out, "-q"])
    if rc != 0:
        lines = err.getvalue().strip().splitlines()
        if rc == 1 and len(lines) == 1 and lines[0].startswith("mpy-lazy: error: "):
            return ("refused", lines[0])
        return ("PACK", "exit %d: %r" % (rc, err.getvalue()[:200]))
    with open(out, "rb") as f:
        data = f.read()
    kernels.use("pure")
    try:
        m = model.from_container(mpy_lazy.open(data))
    except mpy_lazy.ContainerError as e:
        return ("load", str(e))
    specs = [(v.dtype, v.size) for v in m.inputs]
    try:
        m(*[x.tolist() for x in _inputs(specs, seed)])
    except IndexError as e:  # a GATHER_ND index (a model input) outside the params: TFLM's invoke fails too
        if not str(e).startswith("gather_nd"):
            raise
        return ("index", specs, str(e))
    return ("ran", specs, [m.tolist(i) for i in range(len(m.outputs))])


def theirs(path, specs, seed):
    """TFLM on the same input values: ('ran', outputs) or ('refused', message)."""
    import tflm_ref

    errors = []
    try:
        with open(path, "rb") as f:
            data = f.read()
        with tflm_ref._stderr_to(errors):  # TFLM prints its reason on stderr
            it = tflm_ref._rt.Interpreter.from_bytes(data, arena_size=TFLM_ARENA)
        xs = _inputs(specs, seed)
        for k, x in enumerate(xs):
            d = it.get_input_details(k)
            if int(np.prod(d["shape"])) != x.size:
                return ("shape", "input %d: TFLM takes %s, the container %d values" % (k, list(d["shape"]), x.size))
            it.set_input(x.astype(d["dtype"]).reshape(d["shape"]), k)
        it.invoke()
        outs = []
        k = 0
        while True:
            try:
                y = np.ascontiguousarray(it.get_output(k)).reshape(-1)
                if y.dtype in (np.uint32, np.uint64):  # as the runtime holds them: int32 bits, uint64 lo, hi words
                    y = y.view(np.int32)
                outs.append(y.tolist())
            except (IndexError, RuntimeError, ValueError):
                break
            k += 1
        return ("ran", outs)
    except (RuntimeError, ValueError) as e:
        why = " ".join(" ".join(errors).split())[:200]
        return ("refused", (str(e).splitlines()[0][:100] if str(e) else type(e).__name__) + ": " + why)


FLT_MAX = float(np.finfo(np.float32).max)


def _same(a, b):
    """True (the same answer), "overflow" (both overflowed float32: see below), False."""
    if len(a) != len(b):
        return False
    close, over_ours, over_tflm = True, False, False
    for x, y in zip(a, b):
        ints = np.asarray(y).dtype.kind in "iub"  # (TFLM's integer outputs: equal, to the last code)
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            return False
        if ints:
            if not np.array_equal(x, y):
                return False
            continue
        over_tflm = over_tflm or bool(np.any(np.isnan(y) | (np.abs(y) >= FLT_MAX)))
        over_ours = over_ours or bool(np.any(np.isnan(x) | (np.abs(x) >= FLT_MAX / 4)))
        finite = y[np.isfinite(y)]
        if not np.allclose(x, y, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0),
                           equal_nan=True):
            close = False
    if close:
        return True
    # Where float32 overflowed inside the model (TFLM's output then holds +-FLT_MAX, inf or NaN),
    # the answer depends on each side's arithmetic: TFLM's float32 sums pass FLT_MAX where
    # the host's float64 ones (CPython, the unix port; a board's floats are float32 like TFLM's)
    # do not, and every later op differs. Both sides at float32's edge is counted apart.
    return "overflow" if over_tflm and over_ours else False


def verdict(path, seed):
    """('clean', kind) or ('FAIL', kind, detail) for one mutant file."""
    mine = _forked(ours, path, seed)
    if mine[0] == "refused":
        return ("clean", "refused by pack")
    if mine[0] == "index":
        tf = _forked(theirs, path, mine[1], seed)
        if tf[0] == "refused":
            return ("clean", INDEX)
        return ("FAIL", "an index error where TFLM runs", "%s | TFLM %s" % (mine[2], str(tf)[:200]))
    if mine[0] != "ran":
        return ("FAIL", {"load": "pack accepted, the runtime refused", "PACK": "pack did not refuse cleanly",
                         "EXC": "exception", "CRASH": "pack/runtime crashed", "HANG": "pack/runtime hung"}[mine[0]],
                str(mine[1:])[:300])
    tf = _forked(theirs, path, mine[1], seed)
    if tf[0] != "ran":
        return ("FAIL", "ran where TFLM refuses", "%s %s" % (tf[0], str(tf[1:])[:200]))
    same = _same(mine[2], tf[1])
    if not same and _div_undefined(path, mine[2], tf[1]):
        return ("clean", "ran, TFLM's answer but where its int8 DIV is undefined")
    if not same:
        return ("FAIL", "another answer than TFLM's", "ours %s | TFLM %s" % (str(mine[2])[:120], str(tf[1])[:120]))
    return ("clean", "ran, TFLM's answer" + (", both overflowing float32" if same == "overflow" else ""))


def _div_undefined(path, ours, tflm):
    """Whether every element where the answers differ is an int8 DIV's output (a model output)
    where mpy-lazy gives the quotient 0, its zero point: where TFLM's int8 DIV is undefined in
    C (a divisor at its zero point, or a shift of 32 or more; tests/host/test_tflite_elem.py
    checks those cases one by one), and the x86 wheel's answer is not a Cortex-M's."""
    import tflm_ref

    S = _schema()
    try:
        m = tflm_ref.read_model(path)
        sg = m.subgraphs[0]
        zps = {}
        for op in sg.operators:
            if m.operatorCodes[op.opcodeIndex].builtinCode == S.BuiltinOperator.DIV:
                t = sg.tensors[op.outputs[0]]
                if t.type == S.TensorType.INT8 and t.quantization is not None:
                    zps[op.outputs[0]] = int(t.quantization.zeroPoint[0])
        outs = list(sg.outputs)
    except Exception:
        return False
    for k, (x, y) in enumerate(zip(ours, tflm)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        bad = x != y
        if bad.any() and (k >= len(outs) or outs[k] not in zps or np.any(x[bad] != zps[outs[k]])):
            return False
    return True


def _one(item):
    """In a pool worker (single-threaded, so forking it is safe): the verdict of one mutant."""
    i, name, data, seed, tmp, keep = item
    path = os.path.join(tmp, "m%d.tflite" % i)
    with open(path, "wb") as f:
        f.write(data)
    try:
        v = verdict(path, seed * 1000003 + i)
        if keep and v[0] == "FAIL":  # the failing mutant, to reproduce with --one
            with open(os.path.join(keep, "%s-%d.tflite" % (name[:-7], i)), "wb") as f:
                f.write(data)
        return i, name, v
    finally:
        for p in (path, path + ".mpyl"):
            if os.path.exists(p):
                os.unlink(p)


def _warm():
    """Import what the forked children use once, in the worker (not in each child)."""
    import mpy_lazy.model  # noqa: F401
    import tflm_ref  # noqa: F401
    from host_tools import cli  # noqa: F401
    from host_tools import tflite_import  # noqa: F401


def run(count, seed, jobs=2, log=print, keep=None):
    import multiprocessing

    rng = random.Random(seed)
    bases = []
    for b in BASES:
        with open(os.path.join(ROOT, b), "rb") as f:
            bases.append((os.path.basename(b), f.read()))
    figures = {"count": count, "seed": seed, "kinds": {}, "failures": {}, "examples": [], "unwritable": 0,
               "unchanged": 0, "bases": {}, "by_base": {}}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="mpyl-fuzz-tflite-") as tmp:
        def work():
            import tflm_ref

            # Each base as it is first (it must run and give TFLM's answer: the harness's own
            # check), numbered -1, -2, ...; then count mutants, each one written by the schema
            # and different from its base as the schema writes it.
            plain = {}
            for k, (name, base) in enumerate(bases):
                plain[name] = _write(tflm_ref.read_model(base))
                yield -1 - k, name, base, seed, tmp, keep
            i = tries = 0
            while i < count:
                name, base = bases[tries % len(bases)]
                tries += 1
                data = mutant(rng, base)
                if data is None:
                    figures["unwritable"] += 1
                    continue
                if data == plain[name]:  # the mutation changed nothing (e.g. a shuffled 1-D shape)
                    figures["unchanged"] += 1
                    continue
                yield i, name, data, seed, tmp, keep
                i += 1

        with multiprocessing.get_context("fork").Pool(jobs, initializer=_warm) as pool:
            for done, res in enumerate(pool.imap_unordered(_one, work(), chunksize=4), 1):
                _collect(res, figures)
                done -= len(bases)
                if log and done > 0 and done % 1000 == 0:  # progress: a long run shows where it is
                    log("  %d/%d mutants, %d failures, %.0f s" % (done, count, sum(figures["failures"].values()),
                                                               time.time() - t0))
    figures["seconds"] = round(time.time() - t0, 1)
    if log:
        report(figures, log)
    return figures


def _collect(res, f):
    i, name, v = res
    key = v[1]
    if i < 0:  # an unmutated base: counted apart; anything but TFLM's answer is a failure
        f["bases"][name] = key
        if v[0] == "FAIL" or key not in ("ran, TFLM's answer", INDEX):
            key = "unmutated base: " + key
            f["failures"][key] = f["failures"].get(key, 0) + 1
            f["examples"].append((i, name, key, v[2] if v[0] == "FAIL" else ""))
        return
    f["kinds"][key] = f["kinds"].get(key, 0) + 1
    b = f["by_base"].setdefault(name, {})
    b[key] = b.get(key, 0) + 1
    if v[0] == "FAIL":
        f["failures"][key] = f["failures"].get(key, 0) + 1
        if len(f["examples"]) < 20:
            f["examples"].append((i, name, key, v[2]))


def report(f, log=print):
    total = sum(f["kinds"].values())
    log("fuzz .tflite: %d mutants of %d models (seed %s; %d more the schema could not write, %d that changed "
        "nothing), %.1f s" % (total, len(BASES), f["seed"], f["unwritable"], f["unchanged"], f["seconds"]))
    log("  the %d models unmutated: %d ran and gave TFLM's answer"
        % (len(f["bases"]), sum(v == "ran, TFLM's answer" for v in f["bases"].values())))
    for k, n in sorted(f["kinds"].items(), key=lambda kv: -kv[1]):
        log("  %-40s %d" % (k, n))
    log("failures: %d" % sum(f["failures"].values()))
    for ex in f["examples"]:
        log("  mutant %d of %s: %s: %s" % ex)


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=2000,
                   help="mutants to run (each one written by the schema and different from its base)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    p.add_argument("--keep", metavar="DIR", help="write each failing mutant to DIR")
    p.add_argument("--one", metavar="FILE", help="the verdict of one .tflite file (seed --seed)")
    args = p.parse_args(argv)
    if args.one:
        print(verdict(args.one, args.seed))
        return 0
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    f = run(args.count, args.seed, args.jobs, keep=args.keep)
    if args.json:
        import json

        with open(args.json, "w") as out:
            json.dump(f, out, indent=1)
    return 1 if f["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
