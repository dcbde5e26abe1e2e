"""`make bench`: one table from one run, every figure measured here, on the `micropython` binary
(and the ulab path on $MICROPYTHON_ULAB when set), with TensorFlow Lite Micro measured in the
same run for the .tflite models.

    python bench/bench.py [--quick] [--no-pack] [--rounds N]

Models (bench/models.py): the digits demo's MLP and CNN (trained) and the four MLPerf Tiny models
(kws, vww, resnet8, ad; seeded weights), each exported to ONNX with torch's dynamo exporter and
packed f32 and int8 (calibrated), plus the .tflite fixture of the same architecture
(tests/golden/tflite) packed as it is ("tflite-int8"); and .tflite-only rows (tests/golden/thirdparty):
TFLM's micro_speech LSTM keyword spotter (49 steps of an int8 LSTM, 80 units), a 16x8 layer of
SEANet ("tflite-16x8": int16 activations, int8 weights; tflite-micro's seanet conv0) and the
hello_world sine model; tflite-micro's person_detect when PERSON_DETECT_TFLITE or PICO_TFLMICRO_DIR
gives its file (bench/models.py).

Memory (one micropython process, model after model, each after a warm-up: the same model
declared once and dropped, so the op modules and interned names are not counted and no figure
depends on which model ran first): weights = bytes the params read in place (flash on a board; the unix port reads the
container into RAM as a stand-in, never counted); arena/scratch = m.memory(); open+bind = heap for
mpy_lazy.open + load (binding every param: the old target, <= 1% of the weights + 2 KB); model =
heap kept by open + declare + load + prepare (the model's RAM, arena and scratch included); live =
heap after the first inference; B/inf = heap allocated by one inference (m(x) with its input,
gc.disable + gc.mem_alloc delta; the unix port boxes every float, so float models allocate there,
">heap" = more than the 64 MB heap).

Time: one persistent micropython process per binary holds every model; the driver asks for
batches of inferences (the input given again for every call) round-robin over every model x path:
per round 4 batches of about 12 ms each; for each .tflite model each of those batches is followed
by one of TFLM (tflite_micro's interpreter, its reference kernels, on CPython: set_input +
invoke), so the two sides of each ratio interleave closely. ROUNDS rounds (jobs of more than
0.5 s per inference: 3 rounds of one inference); each figure is the median over the batches, with
its spread ((max - min) / median); a ratio is the median of the ratios of adjacent batch pairs. The pure path runs only where affordable (models under 1 M MACs); the ulab build here
uses double floats, so its float models run the same Python loops as viper: only the small ones
are timed there.

Targets, [ok]/[FAIL] (exit status 1 when a median misses one): int8 and 16x8 0 bytes per inference
(viper, ulab); mpy-lazy RAM (live) <= TFLM arena + 2 KB; int8 and 16x8 time <= 3x TFLM's; issue 31's
<= 1.5x on KWS, VWW, ResNet-8 and person_detect, <= 3x on micro_speech and hello_world; open+bind <= 1% weights +
2 KB; the reader's work linear in the file size on MicroPython (bench/linear.py: timed here, counted
on CPython by make test); packing (bench/pack_bench.py, --no-pack skips it) >= 200 MB/s and peak RSS
<= the largest tensor + 64 MB."""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "build", "bench")
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import models  # noqa: E402  (bench/models.py)
from demo import micropython  # noqa: E402  ($MICROPYTHON, else the venv's binary)

HEAP = "64m"
ROUNDS = 9
SLOW_ROUNDS = 3  # jobs of more than SLOW seconds per inference: one inference per round
SLOW = 0.5
BATCH = 0.05  # seconds of inferences per timed batch (per side and round for the TFLM pairs)
SUB = 4  # a TFLM pair alternates SUB batches of each side per round
PURE_MAX_MACS = 1000000  # the pure path only below this (about 1-3 s per inference above)
ULAB_FLOAT_MAX_MACS = 1000000
RAM_SLACK = 2048
TIME_RATIO = 3.0
# issue 31's speed targets for the viper path (time / TFLM's, median of paired batches), by fixture
ISSUE31 = {"kws_int8": 1.5, "vww_int8": 1.5, "resnet8_int8": 1.5, "person_detect": 1.5, "micro_speech_lstm": 3.0,
           "hello_world_int8": 3.0}
TFLM_DTYPES = {"tflite-int8": "int8", "tflite-16x8": "int16"}  # rows run by TFLM too: their input type

_COMMON = r"""
import gc, sys, time, array
import mpy_lazy
from mpy_lazy import model, kernels

def read(p):
    with open(p, 'rb') as f:
        return f.read()

def model_input(m, data):
    # int8 input: the bytes themselves (m(x) copies them in with one kernel call); int16 input
    # (16x8): an array('h') over the int16 bytes; float input: an array('f') over the float32 bytes
    if m.inputs[0].dtype == 'i8':
        return data
    if m.inputs[0].dtype == 'i16':
        return array.array('h', data)
    return array.array('f', data)
"""

# Memory figures, one model after the other. JOBS = [(key, container, input file, [paths])]
MEASURE = _COMMON + r"""
import json

def warm_up(buf):
    # the op modules this model imports and the names interned on first use are the
    # runtime's: declared once and dropped, so no figure depends on the models run before
    w = model.from_container(mpy_lazy.open(buf))
    del w
    gc.collect()

def measure(key, path, ipath, paths):
    buf = read(path)      # stands in for flash (ROMFS) on the unix port: not counted
    data = read(ipath)
    kernels.use(paths[0])
    warm_up(buf)
    res = [0] * (4 * len(paths))   # per path: first us, live, alloc, us (no dict grows meanwhile)
    gc.collect()
    base = gc.mem_alloc()
    c = mpy_lazy.open(buf)
    gc.collect()
    a_open = gc.mem_alloc()
    m = model.declare(c)
    gc.collect()
    a_decl = gc.mem_alloc()
    m.load(c)
    gc.collect()
    a_load = gc.mem_alloc()
    m.prepare()
    gc.collect()
    a_prep = gc.mem_alloc()
    x = model_input(m, data)
    gc.collect()
    harness = gc.mem_alloc() - a_prep   # the input array: the benchmark's, not the model's
    for i in range(len(paths)):
        kernels.use(paths[i])
        t = time.ticks_us()
        m(x)
        res[4 * i] = time.ticks_diff(time.ticks_us(), t)
        gc.collect()
        res[4 * i + 1] = gc.mem_alloc() - base - harness
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        t = time.ticks_us()
        try:
            m(x)
            res[4 * i + 2] = gc.mem_alloc() - a
            res[4 * i + 3] = time.ticks_diff(time.ticks_us(), t)
        except MemoryError:
            res[4 * i + 2] = -1
            res[4 * i + 3] = None
        gc.enable()
        gc.collect()
    rep = mpy_lazy.report(m, show=False)   # after the heap figures: its result is garbage to them
    mem = m.memory()
    row = {'key': key, 'open': a_open - base, 'declare': a_decl - a_open,
           'bind': (a_open - base) + (a_load - a_decl), 'model': a_prep - base,
           'weights': rep['flash'], 'weights_ram': rep['ram'], 'arena': mem['arena'],
           'scratch': mem['scratch'], 'macs': m.macs()}
    for i in range(len(paths)):
        p = paths[i]
        row['first_us_' + p], row['live_' + p], row['alloc_' + p], row['us_' + p] = res[4 * i: 4 * i + 4]
    print('ROW', json.dumps(row))

for job in JOBS:
    measure(*job)
    gc.collect()
"""

# Timing server: reads commands on stdin, one per line:
#   load KEY CONTAINER INPUT   -> "ok"
#   time KEY PATH K            -> "t MICROSECONDS" for K inferences (input given each call)
SERVER = _COMMON + r"""
M = {}
kernels.use(PATH0)
while True:
    line = sys.stdin.readline()
    if not line:
        break
    w = line.split()
    if not w:
        continue
    if w[0] == 'load':
        buf = read(w[2])
        m = model.from_container(mpy_lazy.open(buf))
        M[w[1]] = [m, buf, model_input(m, read(w[3])), kernels.path()]
        buf = m = None
        gc.collect()
        print('ok')
    elif w[0] == 'time':
        e = M[w[1]]
        m, x = e[0], e[2]
        kernels.use(w[2])
        if e[3] != w[2]:   # first call on this path: prepares the ops for it (untimed)
            m(x)
            e[3] = w[2]
        k = int(w[3])
        # no gc.collect() here: right after one on this big heap the batch runs up to 2x slower
        # (measured); int8 inferences allocate nothing, so no collection happens inside a batch
        t = time.ticks_us()
        for _ in range(k):
            m(x)
        print('t', time.ticks_diff(time.ticks_us(), t))
    elif w[0] == 'quit':
        break
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def mpy_env():
    return dict(os.environ, MICROPYPATH=ROOT + ":.frozen")


def run_script(exe, code, timeout=1800):
    r = subprocess.run([exe, "-X", "heapsize=%s" % HEAP, "-c", code], capture_output=True, text=True,
                       env=mpy_env(), timeout=timeout)
    if r.returncode:
        sys.exit("bench: %s failed:\n%s%s" % (exe, r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


class Server:
    """A persistent micropython process holding models, timing batches on request."""

    def __init__(self, exe, path0):
        self.exe = exe
        self.p = subprocess.Popen([exe, "-X", "heapsize=%s" % HEAP, "-c", SERVER.replace("PATH0", repr(path0))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, bufsize=1, env=mpy_env())

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            err = self.p.stderr.read()
            sys.exit("bench: %s died on %r:\n%s" % (self.exe, line, err[-3000:]))
        return out.split()

    def load(self, e):
        self.ask("load %s %s %s" % (e.key, e.container, e.input_file))

    def time(self, key, path, k):
        return int(self.ask("time %s %s %d" % (key, path, k))[1]) / 1e6 / k

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


class Tflm:
    """TFLM (tflite_micro) on one .tflite: set_input + invoke, timed in batches."""

    def __init__(self, path, sample):
        import numpy as np
        import tflm_ref

        self.it = tflm_ref.interpreter(path)
        shape = tuple(int(d) for d in self.it.get_input_details(0)["shape"])
        self.x = np.ascontiguousarray(np.asarray(sample).reshape(shape))
        self.it.set_input(self.x, 0)
        self.it.invoke()

    def time(self, k):
        it, x = self.it, self.x
        t = time.perf_counter()
        for _ in range(k):
            it.set_input(x, 0)
            it.invoke()
        return (time.perf_counter() - t) / k


class Job:
    """One timed series: mpy-lazy on (entry, binary, path), optionally paired with TFLM. Each
    round runs SUB batches of about BATCH / SUB seconds (one inference per round for a slow
    job); with TFLM, each batch of ours is followed by one of TFLM's."""

    def __init__(self, entry, server, path, est, tflm=None, tflm_est=None):
        self.entry, self.server, self.path = entry, server, path
        slow = est > SLOW
        self.sub = 1 if slow else SUB
        self.k = max(1, min(5000, int(round(BATCH / SUB / max(est, 1e-6)))))
        self.rounds = SLOW_ROUNDS if slow else ROUNDS
        self.tflm = tflm
        self.tk = max(1, min(20000, int(round(BATCH / SUB / max(tflm_est or 1e-6, 1e-6))))) if tflm else 0
        self.ours, self.theirs, self.ratios = [], [], []

    def round(self):
        key = self.entry.key
        if not self.tflm:
            for _ in range(self.sub):
                self.ours.append(self.server.time(key, self.path, self.k))
            return
        for _ in range(self.sub):
            a = self.server.time(key, self.path, self.k)
            b = self.tflm.time(self.tk)
            self.ours.append(a)
            self.theirs.append(b)
            self.ratios.append(a / b)


def stats(xs):
    med = statistics.median(xs)
    return med, (max(xs) - min(xs)) / med if med else 0.0


def fmt_ms(s):
    ms = s * 1e3
    return "%.3f" % ms if ms < 1 else ("%.2f" % ms if ms < 100 else "%.0f" % ms)


def fmt_si(v):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return "%.1f%s" % (v / div, unit)
    return "%.0f" % v


def measure_memory(exe, entries, paths_of):
    jobs = [(e.key, e.container, e.input_file, paths_of(e)) for e in entries]
    jobs = [j for j in jobs if j[3]]
    out = run_script(exe, MEASURE.replace("JOBS", repr(jobs)))
    rows = {}
    for line in out.splitlines():
        if line.startswith("ROW "):
            r = json.loads(line[4:])
            rows[r["key"]] = r
    return rows


def main():
    global ROUNDS, SLOW_ROUNDS
    quick = "--quick" in sys.argv
    ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else (3 if quick else ROUNDS)
    SLOW_ROUNDS = min(SLOW_ROUNDS, ROUNDS)
    t0 = time.time()
    exe = micropython()
    ulab = os.environ.get("MICROPYTHON_ULAB")
    ulab = ulab if ulab and os.path.exists(ulab) else None

    # 1. the models (host)
    entries = models.prepare(OUT, log)
    present = [e for e in entries if e.container]
    t_prep = time.time() - t0

    # 2. memory, model after model: stock binary (viper; pure where affordable), ulab binary
    stage = {"models": t_prep}
    t1 = time.time()

    log("memory: micropython (viper, pure) ...")
    rows = measure_memory(exe, present, lambda e: ["viper"])
    pure_rows = measure_memory(exe, [e for e in present if rows[e.key]["macs"] <= PURE_MAX_MACS],
                               lambda e: ["pure"])
    for k, r in pure_rows.items():
        rows[k].update({kk: v for kk, v in r.items() if kk.endswith("_pure")})
    if ulab:
        log("memory: %s (ulab) ..." % ulab)
        ulab_rows = measure_memory(ulab, [e for e in present if e.dtype != "f32" or
                                          rows[e.key]["macs"] <= ULAB_FLOAT_MAX_MACS], lambda e: ["ulab"])
        for k, r in ulab_rows.items():
            rows[k].update({kk: v for kk, v in r.items() if kk.endswith("_ulab")})

    # 3. TFLM: arena (bisection with the real allocator) and a first invoke time
    import numpy as np
    import tflm_ref

    stage["memory"] = time.time() - t1
    t1 = time.time()
    log("TFLM: arena sizes ...")
    tflm = {}
    for e in present:
        if e.dtype in TFLM_DTYPES:
            with open(e.input_file, "rb") as f:
                sample = np.frombuffer(f.read(), TFLM_DTYPES[e.dtype])
            t = Tflm(e.fixture, sample)
            tflm[e.key] = {"arena": tflm_ref.arena_bytes(e.fixture), "runner": t, "est": t.time(3)}

    # 4. time: interleaved rounds
    stage["TFLM arenas"] = time.time() - t1
    servers = {"micropython": Server(exe, "viper")}
    if ulab:
        servers["ulab"] = Server(ulab, "ulab")
    jobs = []
    for e in present:
        r = rows[e.key]

        def est(p):
            return (r.get("us_" + p) or r.get("first_us_" + p)) / 1e6

        servers["micropython"].load(e)
        t = tflm.get(e.key)
        jobs.append(Job(e, servers["micropython"], "viper", est("viper"),
                        t["runner"] if t else None, t["est"] if t else None))
        if "first_us_pure" in r:
            jobs.append(Job(e, servers["micropython"], "pure", est("pure")))
        if ulab and "first_us_ulab" in r:
            servers["ulab"].load(e)
            jobs.append(Job(e, servers["ulab"], "ulab", est("ulab")))
    n_rounds = max(j.rounds for j in jobs)
    log("time: %d jobs, %d rounds ..." % (len(jobs), n_rounds))
    t_time = time.time()
    for rnd in range(n_rounds):
        for j in jobs:
            if rnd >= j.rounds:
                continue
            j.round()
        log("  round %d/%d (%.0f s)" % (rnd + 1, n_rounds, time.time() - t_time))
    for s in servers.values():
        s.close()
    stage["timing"] = time.time() - t_time
    timing = {(j.entry.key, j.path): j for j in jobs}

    # 5. the table
    paths = ["viper", "pure"] + (["ulab"] if ulab else [])
    mp_version = subprocess.run([exe, "-c", "import sys; print(sys.version.split(';')[1].strip())"],
                                capture_output=True, text=True).stdout.strip()
    print()
    print("mpy-lazy bench: MicroPython unix port (x64; objects ~2x a 32-bit board's), %s%s; %d rounds, medians"
          % (mp_version, "; ulab path on %s" % ulab if ulab else "", n_rounds))
    head = "%-7s %-11s %8s %6s %7s %9s %8s %6s" % ("model", "dtype", "weights", "arena", "scratch",
                                                   "open+bind", "prepared", "live")
    for p in paths:
        head += " %8s" % ("B/inf " + p[:2])
    for p in paths:
        head += " %9s %4s" % (p + " ms", "+-%")
    for p in paths:
        head += " %8s" % ("MAC/s " + p[:2])
    print(head)
    print("-" * len(head))
    targets = []
    alloc_miss, bind_rows, bind_miss = [], 0, []
    int8_rows = 0
    for e in entries:
        if not e.container:
            print("%-7s %-11s  skipped: %s" % (e.model, e.dtype, e.note))
            continue
        r = rows[e.key]
        line = "%-7s %-11s %8d %6d %7d %9d %8d %6d" % (
            e.model, e.dtype, r["weights"], r["arena"], r["scratch"], r["bind"], r["model"], r["live_viper"])
        for p in paths:
            a = r.get("alloc_" + p)
            line += " %8s" % ("-" if a is None else (">heap" if a < 0 else a))
            if e.dtype != "f32" and p in ("viper", "ulab") and a is not None:
                int8_rows += 1
                if a != 0:
                    alloc_miss.append("%s %s %s B" % (e.key, p, a))
        for p in paths:
            j = timing.get((e.key, p))
            if j:
                med, spread = stats(j.ours)
                line += " %9s %4.0f" % (fmt_ms(med), 100 * spread)
            else:
                line += " %9s %4s" % ("-", "")
        for p in paths:
            j = timing.get((e.key, p))
            line += " %8s" % (fmt_si(r["macs"] / stats(j.ours)[0]) if j else "-")
        print(line)
        limit = r["weights"] // 100 + 2048
        bind_rows += 1
        if r["bind"] > limit:
            bind_miss.append("%s %d > %d" % (e.key, r["bind"], limit))
    print("weights: bytes read in place (flash); arena/scratch: m.memory(); open+bind: heap of mpy_lazy.open + load;")
    print("prepared: heap kept by open+declare+load+prepare (arena and scratch included); live: heap after the first")
    print("inference (viper); B/inf: heap allocated by one inference, GC off (>heap: more than %s; the unix port boxes"
          % HEAP)
    print("floats); ms: median time per inference, +-%: (max-min)/median over the batches; '-': not run (pure: models")
    print("over %s MACs; ulab: float models over %s MACs, where the double-float ulab build runs the same Python"
          % (fmt_si(PURE_MAX_MACS), fmt_si(ULAB_FLOAT_MAX_MACS)))
    print("loops as viper).")

    # TFLM comparison
    print()
    print("vs TensorFlow Lite Micro, the same .tflite files: mpy-lazy (viper, micropython) and TFLM (tflite_micro")
    print("%s, reference kernels, CPython): %d rounds x %d adjacent batch pairs, medians (ratio: min..max over the pairs)"
          % (_tflm_version(), ROUNDS, SUB))
    head2 = "%-16s %8s %7s %6s %6s %6s %6s %10s %7s  %-13s %8s %8s %18s  %-6s" % (
        "fixture", "mpy RAM", "arena", "decl", "bind", "prep", "1st", "TFLM arena", "+2 KB", "RAM", "mpy ms",
        "TFLM ms", "ratio", "<=3x")
    print(head2)
    print("-" * len(head2))
    ram_miss, time_miss, n_tflm = [], [], 0
    fast_miss, fast_n = [], 0
    for e in entries:
        if e.dtype not in TFLM_DTYPES:
            continue
        name = os.path.basename(e.fixture)[:-7]
        if not e.container:
            print("%-16s skipped: %s" % (name, e.note))
            continue
        n_tflm += 1
        r = rows[e.key]
        t = tflm[e.key]
        j = timing[(e.key, "viper")]
        ram = r["live_viper"]
        limit = t["arena"] + RAM_SLACK
        ram_ok = ram <= limit
        if not ram_ok:
            ram_miss.append("%s %d > %d" % (name, ram, limit))
        ours, _ = stats(j.ours)
        theirs, _ = stats(j.theirs)
        ratios = j.ratios
        ratio = statistics.median(ratios)
        time_ok = ratio <= TIME_RATIO
        if not time_ok:
            time_miss.append("%s %.1fx" % (name, ratio))
        if name in ISSUE31:
            fast_n += 1
            if ratio > ISSUE31[name]:
                fast_miss.append("%s %.2fx > %.1fx" % (name, ratio, ISSUE31[name]))
        prep = r["model"] - r["bind"] - r["declare"] - r["arena"] - r["scratch"]
        print("%-16s %8d %7d %6d %6d %6d %6d %10d %7d  %-13s %8s %8s %18s  %-6s" % (
            name, ram, r["arena"] + r["scratch"], r["declare"], r["bind"], prep, ram - r["model"], t["arena"],
            limit, "[%s] %.2fx" % ("ok" if ram_ok else "FAIL", ram / t["arena"]), fmt_ms(ours), fmt_ms(theirs),
            "%.2fx %.2f..%.2f" % (ratio, min(ratios), max(ratios)), "[%s]" % ("ok" if time_ok else "FAIL")))
    print("mpy RAM: the model's whole live heap after its first inference = arena (+ scratch) + decl (ops, values,")
    print("params: model.declare) + bind (container + views: open + load) + prep (what prepare adds besides the arena:")
    print("kernel parameter arrays, views) + 1st (what the first inference adds and keeps). TFLM arena: the smallest")
    print("arena_size with which TFLM allocates and invokes (tflm_ref.arena_bytes; 64-bit host build: its persistent")
    print("structs are pointer-sized, as the unix port's objects are). ratio: mpy ms / TFLM ms of adjacent batches, median.")

    # targets
    targets.append(("int8, 16x8: 0 bytes allocated per inference (viper, ulab paths; %d rows)" % int8_rows,
                    "MISS: " + ", ".join(alloc_miss) if alloc_miss else "all 0", not alloc_miss))
    targets.append(("mpy-lazy RAM <= TFLM arena + 2 KB (%d .tflite models)" % n_tflm,
                    "MISS: " + ", ".join(ram_miss) if ram_miss else "all within", not ram_miss))
    targets.append(("int8, 16x8 time <= 3x TFLM's, median of paired-batch ratios (%d .tflite models)" % n_tflm,
                    "MISS: " + ", ".join(time_miss) if time_miss else "all within", not time_miss))
    targets.append(("issue 31: time <= 1.5x TFLM's on KWS, VWW, ResNet-8, person_detect; <= 3x on micro_speech, "
                    "hello_world (%d of 6 run)" % fast_n,
                    "MISS: " + ", ".join(fast_miss) if fast_miss else "all within", not fast_miss))
    targets.append(("open+bind heap <= 1%% weights + 2 KB (%d rows)" % bind_rows,
                    "MISS: " + ", ".join(bind_miss) if bind_miss else "all within", not bind_miss))
    print()
    t1 = time.time()
    import linear

    lin_rows = linear.run(exe)
    lin_ok = linear.report(lin_rows)
    stage["linear"] = time.time() - t1
    worst = max(lin_rows, key=lambda r: r[4] / r[3])
    targets.append(("reader work linear on MicroPython: large/small time per byte <= %.0fx (%d cases)"
                    % (linear.LIMIT, len(lin_rows)), "worst %.2fx (%s)" % (worst[4] / worst[3], worst[0]), lin_ok))
    if "--no-pack" not in sys.argv:
        print()
        t1 = time.time()
        rows_pack = run_pack_bench(1 if quick else 3)
        stage["pack"] = time.time() - t1
        for pr in rows_pack:
            targets.append(("pack %s: >= 200 MB/s, peak RSS <= largest tensor + 64 MB" % pr["mode"],
                            "%.0f MB/s, %.0f MB RSS (median of %d)" % (pr["mb_per_s"], pr["peak_rss_mb"], pr["repeat"]),
                            pr["ok"]))
    print()
    print("Targets:")
    failed = False
    for what, detail, ok in targets:
        failed |= ok is False
        print("  [%s] %-72s %s" % ({True: "ok", False: "FAIL", None: "--"}[ok], what, detail))
    for e in entries:
        if not e.container:
            print("  note: %s %s skipped: %s" % (e.model, e.dtype, e.note))
    print("bench done in %.0f s (%s)" % (time.time() - t0, ", ".join("%s %.0f s" % kv for kv in stage.items())))
    return 1 if failed else 0


def run_pack_bench(repeat):
    """bench/pack_bench.py in a fresh interpreter: its children's peak RSS (os.wait4) would
    otherwise start from this process's pages (torch, onnx...), copied by fork before exec."""
    code = ("import json, sys; sys.path.insert(0, %r); import pack_bench; "
            "rows = pack_bench.run(repeat=%d); print('JSON', json.dumps(rows))" % (HERE, repeat))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if r.returncode:
        sys.exit("bench: pack_bench failed:\n%s%s" % (r.stdout[-3000:], r.stderr[-3000:]))
    rows = []
    for line in r.stdout.splitlines():
        if line.startswith("JSON "):
            rows = json.loads(line[5:])
        else:
            print(line)
    return rows


def _tflm_version():
    try:
        from importlib.metadata import version

        return version("tflite-micro")
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
