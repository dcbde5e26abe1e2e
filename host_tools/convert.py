"""Model files -> a graph the board can run: what `mpy-lazy pack` does with an ONNX (or
TFLite) model. Import the graph, quantize it (f16 weights, or the int8 pipeline with
calibration), check it with the runtime's own parser, and hand the packer its tensors."""
import os
import sys

import numpy as np

from .container import PackError
from .readers import Source, detect


def graph_of(path, quantize="none", calibrate=None, quiet=False, verbose=False):
    """The ir.Graph to pack for a model file: checked, with tensors in their stored form.
    verbose: an int8 graph made here carries `calibration` (see _int8) for the summary."""
    kind = detect(path)
    if kind in ("onnx", "tflite"):
        try:
            if kind == "onnx":
                from .onnx_import import from_onnx

                g = from_onnx(path)
            else:
                from .tflite_import import from_tflite

                g = from_tflite(path)
        except PackError as e:  # every message names the file
            raise e if str(path) in str(e) else PackError("%s: %s" % (path, e))
    else:
        raise PackError("%s holds weights only (%s, no graph): add --weights-only to pack them for a "
                        "model declared in code, or --graph FILE with a graph description, or pack "
                        "an ONNX or .tflite export to run it with model.from_container()" % (path, kind))
    if g.int8() and (quantize != "none" or calibrate is not None):
        raise PackError("%s is int8 already (its own scales, run as TFLite Micro runs it): pack it without "
                        "%s" % (path, " and ".join(([] if quantize == "none" else ["--quantize " + quantize])
                                                    + ([] if calibrate is None else ["--calibrate"]))))
    if quantize in ("int8", "int8-channel"):
        if calibrate is None:
            raise PackError("--quantize %s needs --calibrate INPUTS.npy: representative inputs (a few "
                            "dozen to a few hundred, shape (N, *input shape)) to choose the activations' "
                            "int8 scales" % quantize)
        else:
            g = _int8(path, g, calibrate, quiet, verbose)
    elif calibrate is not None:
        raise PackError("--calibrate is for --quantize int8")
    elif quantize == "f16":
        for name, arr in list(g.tensors.items()):
            if arr.dtype == np.float32 and arr.ndim >= 2:
                g.tensors[name] = arr.astype(np.float16)
    try:
        g.check()
    except PackError as e:  # every message names the file
        raise e if str(path) in str(e) else PackError("%s: %s" % (path, e))
    return g


def _int8(path, g, calibrate, quiet, verbose=False):
    """The int8 graph of float graph g: calibrated on the samples by running the float model
    (onnxruntime on an ONNX file; the host reference interpreter on a float .tflite's graph),
    then quantized as TFLite's converter does (host_tools/int8.py). verbose: the result carries
    `calibration`: {'samples': N, 'ranges': {value: (min, max)}, 'saturated': {value:
    (count, total)}} (a second pass over the samples counts the values the chosen int8
    quantization saturates)."""
    from . import int8

    samples = int8.load_samples(calibrate, g)
    source = None if detect(path) == "tflite" else path
    bar = None
    if not quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(samples[0]) * (2 if verbose else 1), desc="calibrating", unit="sample",
                   file=sys.stderr, leave=False)
    try:
        if source is None:
            ranges = int8.calibrate_graph(g, samples, bar)
        else:
            ranges = int8.calibrate(path, g, samples, bar)
        try:
            out = int8.quantize(g, ranges)
        except PackError:
            if verbose:  # the ranges the refusal comes from, before it (scales as quantize would choose)
                g.calibration = {"samples": len(samples[0]), "ranges": ranges, "saturated": None}
                grouped = int8._groups(g, ranges)
                for line in calibration_summary(g, {v: int8.qparams(*r) for v, r in grouped.items()}):
                    print(line)
            raise
        if verbose:
            def counted():
                for vals in int8.values(source, g, samples):
                    yield vals
                    if bar is not None:
                        bar.update(1)
            out.calibration = {"samples": len(samples[0]), "ranges": ranges,
                               "saturated": int8.saturation(counted(), out.q)}
    finally:
        if bar is not None:
            bar.close()
    return out


def calibration_summary(g, q=None):
    """Lines of the -v summary of an int8 graph made by calibration: per value (as `inspect`
    names it) its op, source, calibrated range, chosen scale and zero point (g.q, or q), and how
    many calibration values fall outside its int8 range (saturated None: not counted)."""
    cal = getattr(g, "calibration", None)
    if not cal:
        return []
    q = g.q if q is None else q
    _, names = g._text()
    rows = [(i[0], "input", "the model's input") for i in g.inputs]
    rows += [(n.y, n.op, n.src.split(": ")[-1] if n.src else "") for n in g.nodes]
    table = []
    for value, op, src in rows:
        lo, hi = cal["ranges"].get(value, (float("nan"), float("nan")))
        s, z = q.get(value, (float("nan"), "-"))
        if cal["saturated"] is None:
            counted = "-"
        else:
            sat, total = cal["saturated"].get(value, (0, 0))
            counted = "%d of %d%s" % (sat, total, " (%.2f%%)" % (100.0 * sat / total) if sat and total else "")
        table.append((names.get(value, value), op, src[:40], "%.6g" % lo, "%.6g" % hi, "%.6g" % s, str(z), counted))
    head = ("value", "op", "from", "min", "max", "scale", "zp", "saturated")
    widths = [max(len(r[k]) for r in table + [head]) for k in range(len(head))]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    lines = ["calibration: %d samples; per value its float range, the int8 scale and zero point chosen, and "
             "the calibration values outside that int8 range (saturated on the board)" % cal["samples"],
             (fmt % head).rstrip()]
    lines += [(fmt % r).rstrip() for r in table]
    return lines


def sources(g, origin):
    """The graph's tensors as packer Sources (int8 weights carry their per-channel scales)."""
    out = []
    for name, arr in g.tensors.items():
        arr = np.ascontiguousarray(arr)
        s = Source(name, arr.shape, arr.dtype.name, origin, lambda arr=arr: arr)
        if name in g.wquant:
            s.scales = g.wquant[name]
        out.append(s)
    return out


def weights_graph(text, tensors):
    """A graph description given with --graph for weight files: checked against the tensors
    (name -> shape) that will be packed."""
    from mpy_lazy import ContainerError
    from mpy_lazy.model import Model

    try:
        m = Model(text)
    except ContainerError as e:
        raise PackError("--graph: %s" % e)
    names = m.names()
    for pname, p in m.named_params():
        t = names[pname]
        if t not in tensors:
            raise PackError("--graph: no tensor %r among the inputs" % t)
        if tuple(tensors[t]) != tuple(p.shape):
            raise PackError("--graph: tensor %r has shape %s, its op needs %s" % (t, tuple(tensors[t]), p.shape))
    return text


def origin(path):
    return os.path.basename(path)


PROGRAM = "graph.program"


def pack_graph(inputs, output, g, meta, **opts):
    """Pack a graph model with its program (docs/FORMAT.md "Program"): every op compiled to
    a record of integers, the offsets of its weights in this very container included, so the
    board runs it from flash with no Python object per op. Two passes: the container is
    written once with a program of the right size (its records' lengths do not depend on
    where the weights land), declared and compiled from that file exactly as a board would,
    then written again with the program; the result is opened and its program checked as the
    board checks it. Returns pack()'s (entries, layout) and whether a program was written
    (not for weights a program cannot read in place: f16 biases of a --graph weights pack)."""
    import tempfile

    import mpy_lazy
    from mpy_lazy import model as mmodel
    from mpy_lazy import program

    from .pack import pack
    from .readers import Source

    text = dict(meta)["graph"]
    size = len(mmodel.Model(text).compile(ref=lambda p, f16=False: [0, 0])[0])
    srcs = sources(g, origin(inputs[0])) if g is not None else opts.pop("sources")
    opts.pop("sources", None)
    words = np.zeros(size, np.int32)
    prog = Source(PROGRAM, (size,), "int32", "the compiled graph", lambda: words)
    prog.aux = True  # not a model parameter: load() and the tensor listings pass it by
    fd, tmp = tempfile.mkstemp(suffix=".mpyl", dir=os.path.dirname(os.path.abspath(output)) or ".")
    os.close(fd)
    try:
        pack(inputs, tmp, meta=meta, sources=srcs + [prog], **dict(opts, quiet=True))
        c = mpy_lazy.open(tmp)
        m = mmodel.declare(c)
        m.load(c)
        P, B = m.compile()
        c = None
    finally:
        os.unlink(tmp)
    if len(B) > 1 or len(P) != size:  # a tensor read from RAM (f16 bias): no program
        return pack(inputs, output, meta=meta, sources=srcs, **opts), False
    words = np.asarray(P, dtype=np.int32)
    out = pack(inputs, output, meta=meta, sources=srcs + [prog], **opts)
    c = mpy_lazy.open(output)
    try:
        program.load(c)  # the board's checks, on the host: refuse what the board would refuse
    except mpy_lazy.ContainerError as e:
        os.unlink(output)
        raise PackError("%s: %s" % (inputs[0], e))
    return out, True
