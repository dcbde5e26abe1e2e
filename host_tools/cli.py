"""`mpy-lazy` command line: pack, inspect, verify, romfs, run, freeze.

Expected failures exit with status 1 and one line `mpy-lazy: error: <reason>` on stderr."""
import argparse
import re
import sys

from . import __version__
from .container import PackError


def _pair(text, option):
    if "=" not in text:
        raise PackError("%s %r: expected KEY=VALUE" % (option, text))
    return tuple(text.split("=", 1))


def _regexes(patterns, option):
    out = []
    for p in patterns or ():
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise PackError("%s %r: bad regular expression: %s" % (option, p, e))
    return out


def cmd_pack(args):
    from . import convert, kernel_layout
    from .atomic import check_output
    from .pack import MAX_BYTES, pack, parse_size, select
    from .readers import check_input, detect, read

    check_output(args.output)  # before any input is read: -o /dev/null, a FIFO, a directory
    for path in [args.graph, args.calibrate]:
        if path:
            check_input(path)
    max_bytes = parse_size(args.max_bytes) if args.max_bytes else MAX_BYTES
    notes = []
    opts = dict(allow_nonfinite=args.allow_nonfinite, max_bytes=max_bytes, notes=notes)
    include = _regexes(args.include, "--include")
    exclude = _regexes(args.exclude, "--exclude")
    renames = [_pair(r, "--rename") for r in args.rename or ()]
    meta = [_pair(m, "--meta") for m in args.meta or ()]
    if any(k == "graph" for k, _ in meta):
        raise PackError("--meta: the key 'graph' is written by pack (use --graph FILE)")
    model = None
    kinds = [detect(p) for p in args.inputs]
    models = [p for p, k in zip(args.inputs, kinds) if k in ("onnx", "tflite")]
    if len(args.inputs) > 1 and models and not (args.weights_only or args.graph):
        raise PackError("%s is a model: pack it on its own to run it on the board, or add --weights-only "
                        "to merge only its weights with the other files" % models[0])
    if args.weights_only or args.graph or not models:
        if args.calibrate:
            raise PackError("--calibrate needs a model (ONNX), not weight files")
        if args.graph:
            try:
                with open(args.graph, encoding="utf-8") as f:
                    text = f.read().strip()
            except (OSError, UnicodeDecodeError) as e:
                raise PackError("--graph %s: %s" % (args.graph, getattr(e, "strerror", None) or e))
            srcs = select([s for p in args.inputs for s in read(p)], include, exclude, renames)
            meta.append(("graph", convert.weights_graph(text, {s.name: s.shape for s in srcs})))
            (entries, layout), _ = convert.pack_graph(args.inputs, args.output, None, meta, sources=srcs,
                                                      quantize=args.quantize, alignment=args.align,
                                                      quiet=args.quiet, **opts)
        else:
            entries, layout = pack(args.inputs, args.output, quantize=args.quantize, alignment=args.align,
                                   include=include, exclude=exclude, renames=renames, meta=meta,
                                   quiet=args.quiet, **opts)
        if not args.graph and not args.quiet:
            print("weights only (no graph): declare the model in code and bind them with mpy_lazy.load()")
    else:
        if include or exclude or renames:
            raise PackError("--include/--exclude/--rename select tensors: they go with --weights-only")
        if len(args.inputs) != 1:
            raise PackError("pack one model file at a time (or add --weights-only to merge weights)")
        g = convert.graph_of(args.inputs[0], args.quantize, args.calibrate, args.quiet, verbose=args.verbose)
        if g.int8():
            kernel_layout.for_kernels(g)  # weights in the order the board's kernels read them
        model = g.check()  # checked once already: the model for the summary
        meta.append(("graph", g.text()))
        (entries, layout), _ = convert.pack_graph(
            args.inputs, args.output, g, meta, alignment=args.align, quiet=args.quiet,
            label=args.quantize if not g.int8() or args.quantize != "none" else "int8", **opts)
    if args.quiet:
        return 0
    for note in notes:
        print(note)
    if model is not None:
        mem = model.memory()
        print("graph: %d ops, %d MACs per inference, %s; arena %d bytes + scratch %d bytes"
              % (len(model.ops), model.macs(), "int8" if g.int8() else "float", mem["arena"], mem["scratch"]))
        if args.verbose:
            for line in convert.calibration_summary(g):
                print(line)
    quantized = [e for e in entries if getattr(e, "error", None) is not None]
    if quantized:
        width = max(len(e.name) for e in quantized)
        print("%-*s  %-4s  %s" % (width, "tensor", "as", "max abs error"))
        for e in quantized:
            print("%-*s  %-4s  %.6g" % (width, e.name, e.dtype, e.error))
    prog = [e for e in entries if e.name == convert.PROGRAM]
    print("wrote %s: %d tensors%s, %d bytes (data %d bytes at offset %d, alignment %d)"
          % (args.output, len(entries) - len(prog), " and the program (%d bytes)" % prog[0].nbytes if prog else "",
             layout.file_size, layout.file_size - layout.data_offset, layout.data_offset, layout.alignment))
    return 0


def cmd_inspect(args):
    from .inspect import inspect
    from .readers import check_input

    check_input(args.file)
    return inspect(args.file, as_json=args.json, values=args.values)


def cmd_verify(args):
    from .inspect import verify
    from .readers import check_input

    check_input(args.file)
    verify(args.file, quiet=True)  # structure and CRCs first: values are only worth reading then
    if not args.allow_nonfinite:
        nonfinite(args.file)
    return verify(args.file, quiet=args.quiet)


def nonfinite(path):
    """PackError naming the float tensors (f32, f16, per-channel scales) that hold NaN or Inf
    (or scales <= 0): what `pack` refuses unless --allow-nonfinite, reported by `verify`."""
    import numpy as np

    from .inspect import open_container

    c, _buf = open_container(path)
    bad = []
    for name in c.names(aux=True):
        info = c.info(name)
        if info.dtype not in ("f32", "f16"):
            continue
        a = np.frombuffer(c.view(name).mv, "<f4" if info.dtype == "f32" else "<f2")
        nan = inf = neg = 0
        for i in range(0, a.size, 1 << 20):  # bounded temporaries on large tensors
            x = a[i:i + (1 << 20)]
            nan += int(np.isnan(x).sum())
            inf += int(np.isinf(x).sum())
            if info.aux:
                neg += int((x <= 0).sum())
        if nan or inf or neg:
            bad.append("%r (%d NaN, %d Inf%s of %d)" % (name, nan, inf, ", %d scales <= 0" % neg if neg else "",
                                                      a.size))
    if bad:
        raise PackError("%s: non-finite float values in %d tensor%s: %s (a model computes NaN from "
                        "them; --allow-nonfinite accepts them)" % (path, len(bad), "" if len(bad) == 1 else "s",
                                                                    ", ".join(bad[:3]) + (", ..." if len(bad) > 3 else "")))


def cmd_romfs(args):
    from .atomic import check_output
    from .readers import check_input
    from .romfs import build_romfs

    check_output(args.output)
    for path in args.files:
        check_input(path)
    placed = build_romfs(args.files, args.output, subdir=args.dir)
    if not args.quiet:
        for name, offset, size, alignment in placed:
            print("%-40s offset %8d  %8d bytes  alignment %d" % (name, offset, size, alignment))
        print("wrote %s (mount with vfs.VfsRom; deploy with `mpremote romfs deploy %s`)"
              % (args.output, args.output))
    return 0


def cmd_freeze(args):
    from .atomic import check_output
    from .freeze import freeze
    from .readers import check_input

    check_output(args.output)
    check_input(args.file)
    line = freeze(args.file, args.output, manifest=args.manifest)
    if not args.quiet:
        print("wrote %s; add this line to your manifest.py:" % args.output)
        print(line)
    return 0


def cmd_run(args):
    from .readers import check_input
    from .run import run_model, run_script

    check_input(args.file)
    if args.script:
        if args.input or args.output:
            raise PackError("--script runs your own board script: --input and --output go without it")
        return run_script(args.file, args.script[0], args.script[1:], binary=args.micropython)
    for path in args.input or ():
        check_input(path)
    return run_model(args.file, args.input or (), args.output, args.repeat, binary=args.micropython,
                     progress=sys.stderr if sys.stderr.isatty() else None)


def parser():
    p = argparse.ArgumentParser(prog="mpy-lazy", description="Pack model weights for MicroPython "
                                "(mpy-lazy container, docs/FORMAT.md).")
    p.add_argument("--version", action="version", version="mpy-lazy " + __version__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("pack", help="pack an ONNX or .tflite model (graph + weights), or weight files "
                       "(--weights-only), into a container")
    s.add_argument("inputs", nargs="+", metavar="INPUT", help="an ONNX or .tflite model, or weight files "
                   "(.safetensors, .pt/.pth, .npz, .npy; the format is read from the content)")
    s.add_argument("-o", "--output", required=True, metavar="OUT.mpyl", help="the container to write "
                   "(atomically: nothing is left behind on an error)")
    s.add_argument("--quantize", default="none", choices=["none", "f16", "int8", "int8-channel"],
                   help="models: none (f32), f16 (weights), int8 (the integer pipeline: needs --calibrate; "
                   "int8-channel is the same). --weights-only: float storage f32, f16, int8 per tensor or "
                   "per channel (tensors with 2+ dims)")
    s.add_argument("--align", type=int, default=16, help="tensor alignment in bytes (power of 2, 4..4096)")
    s.add_argument("--include", action="append", metavar="REGEX", help="keep only matching names")
    s.add_argument("--exclude", action="append", metavar="REGEX", help="drop matching names")
    s.add_argument("--rename", action="append", metavar="OLD=NEW", help="replace name prefix OLD by NEW")
    s.add_argument("--meta", action="append", metavar="KEY=VALUE", help="add a metadata entry")
    s.add_argument("--calibrate", metavar="INPUTS.npy", help="representative inputs for --quantize int8 "
                   "(.npy or .npz, shape (N, *input shape); several inputs: a .npz of one array per input, "
                   "named as the inputs): the int8 pipeline's activation scales")
    s.add_argument("--weights-only", action="store_true", help="pack the tensors of weight files (merged) "
                   "with no graph, for a model declared in code")
    s.add_argument("--graph", metavar="FILE", help="a graph description (docs/FORMAT.md) for the packed "
                   "weights, checked against them")
    s.add_argument("--allow-nonfinite", action="store_true", help="store NaN and Inf float weights as they "
                   "are (refused by default; int8 cannot hold them at all)")
    s.add_argument("--max-bytes", metavar="SIZE", help="refuse inputs whose tensors unpack to more than "
                   "SIZE bytes (K/M/G suffixes; default 512M): a small compressed file cannot fill the memory")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no summary, no "
                   "progress bar)")
    s.add_argument("-v", "--verbose", action="store_true", help="with --calibrate: print the calibration "
                   "summary (per value: float range, int8 scale and zero point, saturated calibration values)")
    s.set_defaults(fn=cmd_pack)

    s = sub.add_parser("inspect", help="print a container's tensor table")
    s.add_argument("file", metavar="FILE", help="a container (.mpyl)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--values", action="append", metavar="NAME",
                   help="also print this tensor's stored and real (dequantized) values")
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("verify", help="check structure, every CRC and that float values are finite "
                       "(exit 0 ok, 1 bad)")
    s.add_argument("file", metavar="FILE", help="a container (.mpyl)")
    s.add_argument("--allow-nonfinite", action="store_true", help="do not report NaN/Inf float values")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing; the exit status says it")
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("romfs", help="build a ROMFS image with each container aligned")
    s.add_argument("files", nargs="+", metavar="FILE", help="containers (or any files) to put in the image")
    s.add_argument("-o", "--output", required=True, metavar="OUT.romfs", help="the ROMFS image to write "
                   "(`mpremote romfs deploy OUT.romfs` writes it to a board)")
    s.add_argument("--dir", help="put the files under this subdirectory of the image")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    s.set_defaults(fn=cmd_romfs)

    s = sub.add_parser("run", help="run a container on the MicroPython unix port as a board runs it "
                       "(the container mounted at /rom): its model on an input, or your board script")
    s.add_argument("file", metavar="MODEL.mpyl", help="the container (mounted as /rom/MODEL.mpyl in a ROMFS image)")
    s.add_argument("--input", action="append", metavar="X.npy", help="the input, in the model's own order "
                   "(C, H, W for an ONNX model from torch; batch dimension optional): int8 codes (dtype int8) "
                   "or real values; once per input. Default: a seeded random input of the right shape")
    s.add_argument("--output", metavar="Y.npy", help="save the outputs' real (dequantized) values, in the "
                   "caller's order and shape (a .npz for several outputs)")
    s.add_argument("--repeat", type=int, default=10, help="inferences to time (the median is printed; "
                   "default 10)")
    s.add_argument("--script", nargs="+", metavar=("SCRIPT.py", "ARG"), help="run this board script "
                   "instead (`mpremote run SCRIPT.py` without a board): /rom mounted, mpy_lazy importable; "
                   "words after it are its sys.argv[1:]")
    s.add_argument("--micropython", metavar="PATH", help="the unix port binary (default: $MPY_LAZY_MICROPYTHON, "
                   "else the `micropython` of the extra mpy-lazy[unix], next to this Python or on PATH)")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("freeze", help="write a Python module holding the container as bytes")
    s.add_argument("file", metavar="FILE", help="a container (.mpyl)")
    s.add_argument("-o", "--output", required=True, metavar="OUT.py", help="the module to write (freeze it "
                   "into a firmware with the manifest line printed)")
    s.add_argument("--manifest", help="also append the freeze line to this manifest.py")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    s.set_defaults(fn=cmd_freeze)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:
        # the reader of our output went away (`mpy-lazy inspect m.mpyl | head`): end quietly,
        # and keep Python from complaining again when it flushes stdout at exit
        try:
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except PackError as e:
        print("mpy-lazy: error: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mpy-lazy: error: interrupted", file=sys.stderr)
        return 1
    except MemoryError:
        print("mpy-lazy: error: out of memory", file=sys.stderr)
        return 1
    except OSError as e:  # disk full, permissions, ...
        name = " %s:" % e.filename if getattr(e, "filename", None) else ""
        print("mpy-lazy: error:%s %s" % (name, e.strerror or e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
