"""The int8 pipeline for float graphs (`mpy-lazy pack --quantize int8 --calibrate inputs.npy`):
TensorFlow Lite's full-integer scheme, so the board runs int8 in, int8 out, int32 accumulators
and fixed-point requantization, with no float between the input and the output.

1. calibrate(): run the float model over representative inputs (onnxruntime, on the ONNX file
   the graph came from; calibrate_graph(): the host reference interpreter on the graph itself,
   for a float .tflite) and record each graph value's range;
2. quantize(): per value an asymmetric int8 scale and zero point (0.0 exactly representable);
   per-channel symmetric int8 weights; int32 biases (scale = input scale x weight scale); per
   op the fixed-point multipliers and shifts TFLite Micro computes (host_tools.tflm), the
   fused activation as an int8 clamp, lookup tables for elementwise functions, TFLM's softmax.
Values that must share a quantization (pooling, reshape, pad, concat) get the union of their
ranges, as TFLite's converter does."""
import math

import numpy as np

from . import tflm
from .container import PackError
from .ir import Graph, Node

_SAME_Q = ("maxpool", "avgpool", "reshape", "pad", "concat", "transpose", "slice", "resize", "minimum",
           "maximum")
_FLOAT_FN = {
    "relu": lambda v: max(v, 0.0),
    "relu6": lambda v: min(max(v, 0.0), 6.0),
    "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v)),
    "tanh": math.tanh,
}


MIN_SAMPLES = 10  # fewer cannot stand for the inputs a model will see


def _shape(shape):
    return "(%s)" % ", ".join(str(int(d)) for d in shape)


def load_samples(path, graph):
    """Representative inputs, one (N, *input shape) array per model input: a .npy (or a .npz of
    one array) for a model of one input, a .npz of one array per input, named as the inputs,
    for several; each in the model's own input layout (N, C, H, W for an ONNX image model;
    N, H, W, C for a .tflite), checked: the order (samples in the other order are named as
    such), the batch dimension, finite values, at least MIN_SAMPLES of them, as many of each
    input. PackError with one line otherwise."""
    from .readers import load_arrays

    data = load_arrays(path, "--calibrate")
    names = [i[0] for i in graph.inputs]
    npz = hasattr(data, "files")
    if len(names) == 1 and npz:
        if len(data.files) != 1:
            raise PackError("--calibrate %s: a .npz of %d arrays%s: give one, the samples of the model's input %r"
                            % (path, len(data.files), " (%s)" % ", ".join(data.files) if data.files else "", names[0]))
        arrays = [data[data.files[0]]]
    elif len(names) == 1:
        arrays = [data]
    elif not npz or sorted(data.files) != sorted(names):
        raise PackError("--calibrate %s: %s; the model has %d inputs (%s): give a .npz of one array of samples per "
                        "input, named as the inputs (numpy.savez(\"samples.npz\", **{name: samples, ...}))"
                        % (path, "a .npz of %s" % (", ".join(data.files) or "no arrays") if npz else "one array",
                           len(names), ", ".join(names)))
    else:
        arrays = [data[n] for n in names]
    xs = [_checked(path, a, inp) for a, inp in zip(arrays, graph.inputs)]
    if len({len(x) for x in xs}) > 1:
        raise PackError("--calibrate %s: %s samples of the inputs %s: give as many of each (one example each)"
                        % (path, ", ".join(str(len(x)) for x in xs), ", ".join(names)))
    return xs


def _checked(path, data, inp):
    """The samples `data` of the model's input `inp` (name, shape, layout), checked, as float32."""
    if data.dtype.kind not in "biuf":
        raise PackError("--calibrate %s: values of dtype %s (numbers expected)" % (path, data.dtype))
    data = np.asarray(data, dtype=np.float32)
    name, shape, layout = inp
    shape = tuple(int(d) for d in shape)
    if layout == "chw":
        want, order, other, fix = (shape[2], shape[0], shape[1]), "N, C, H, W (torch's order)", shape, \
            "samples.transpose(0, 3, 1, 2)"
        if shape[0] == 1:  # a conv1d input (C, L) may come without its H of 1
            alt = (shape[2], shape[1])
        else:
            alt = None
    else:
        want, order, other, fix, alt = shape, "N, %s" % ("H, W, C" if len(shape) == 3 else "features"), \
            ((shape[2], shape[0], shape[1]) if len(shape) == 3 else None), "samples.transpose(0, 2, 3, 1)", None
    expected = "(N, %s)" % _shape(want)[1:-1]
    got = tuple(data.shape)
    if got[1:] not in (want, alt):
        if got in (want, alt):
            raise PackError("--calibrate %s: one sample of shape %s without the batch dimension: the model's "
                            "input %r takes %s, %s, with N >= %d (e.g. numpy.stack of your samples)"
                            % (path, _shape(got), name, expected, order, MIN_SAMPLES))
        if other is not None and other != want and got[1:] == tuple(other):
            raise PackError("--calibrate %s: samples of shape %s are in the other order: the model's input %r "
                            "takes %s, %s: %s gives it" % (path, _shape(got), name, expected, order, fix))
        raise PackError("--calibrate %s: samples of shape %s, the model's input %r takes %s, %s"
                        % (path, _shape(got), name, expected, order))
    if len(data) < MIN_SAMPLES:
        raise PackError("--calibrate %s: %d sample%s: give at least %d typical inputs (a few dozen to a few "
                        "hundred), shape %s" % (path, len(data), "" if len(data) == 1 else "s", MIN_SAMPLES, expected))
    bad = ~np.isfinite(data)
    if bad.any():
        raise PackError("--calibrate %s: %d NaN or Inf values in the samples (the first in sample %d)"
                        % (path, int(bad.sum()), int(np.argmax(bad.reshape(len(data), -1).any(1)))))
    if not data.any():  # zeros calibrate every range to 0..0: the int8 model would answer alike for all
        raise PackError("--calibrate %s: every sample is all zeros: give typical inputs (real data the model "
                        "will see), not a placeholder" % path)
    if (data == data[:1]).all():
        raise PackError("--calibrate %s: all %d samples are the same: give typical inputs (real data the model "
                        "will see), not one repeated" % (path, len(data)))
    return data  # (N, C, L) for a conv1d input stays so: onnxruntime takes it as it is


def _onnx_values(onnx_model, graph, samples):
    """Per sample, {graph value: its float values} by onnxruntime on the ONNX model."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(onnx_model) if isinstance(onnx_model, str) else onnx_model
    wanted = {n.y for n in graph.nodes} | {i[0] for i in graph.inputs}
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for o in node.output:
            if o in wanted and o not in known:
                model.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
                known.add(o)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise PackError("calibration: onnxruntime cannot load the model: %s" % str(e).splitlines()[0])
    names = [o.name for o in sess.get_outputs()]
    ins = [i[0] for i in graph.inputs]
    # each ONNX input's samples (the graph's input of its name, else of its place), in batch 1
    # of its own ONNX shape (a time-major sequence is (T, 1, F))
    feeds = [(inp.name, samples[ins.index(inp.name) if inp.name in ins else k],
              [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape])
             for k, inp in enumerate(sess.get_inputs())]
    # values onnxruntime does not name (made by the importer): copies of their input where the
    # importer only reshaped; else (an unrolled GRU) the host reference on the float graph
    unnamed = [n for n in graph.nodes if n.y not in known and n.y not in ins]
    ref = None
    if any(n.op != "reshape" for n in unnamed):
        ref = _graph_values(graph, samples)
    for i in range(len(samples[0])):
        outs = sess.run(names, {name: x[i: i + 1].reshape(shape) for name, x, shape in feeds})
        vals = {k: v for k, v in zip(names, outs) if k in wanted}
        for name, x in zip(ins, samples):
            vals[name] = x[i]
        if ref is not None:
            rv = next(ref)
            for n in unnamed:
                vals[n.y] = rv[n.y]
        for n in reversed(graph.nodes):  # values onnxruntime does not name (made by the importer):
            if n.op == "reshape" and n.y in vals and n.x[0] not in vals:  # a reshape's input holds its values
                vals[n.x[0]] = vals[n.y]
        for n in graph.nodes:  # else the values of the op's input (a data move, a pad)
            if n.y not in vals and n.x[0] in vals:
                vals[n.y] = vals[n.x[0]]
        yield _with_cells(graph, vals)


def _graph_values(graph, samples):
    """Per sample, {graph value: its float values} by the host reference interpreter running
    the float graph itself (every value made an output to be seen)."""
    import copy

    from . import reference

    g = copy.copy(graph)
    g.outputs = list(graph.outputs) + [n.y for n in graph.nodes if n.y not in graph.outputs]
    g.out_layouts = {}  # every value in its stored (H, W, C) order: a range does not care
    text = g.text()
    tensors = {k: np.asarray(v, np.float32) for k, v in graph.tensors.items()}
    for i in range(len(samples[0])):
        try:
            outs = reference.run(text, tensors, *[x[i] for x in samples])
        except (KeyError, ValueError) as e:
            raise PackError("calibration: the reference interpreter cannot run the float graph: %s" % e)
        vals = dict(zip(g.outputs, outs))
        for inp, x in zip(graph.inputs, samples):
            vals[inp[0]] = x[i]
        yield _with_cells(graph, vals)


def _with_cells(graph, vals):
    """vals with, for each float lstm, its cell state over every step (value `y#cell`): what
    TFLite's calibrator records of an LSTM's cell state, the int16 scale's source."""
    for n in graph.nodes:
        if n.op != "lstm" or n.x[0] not in vals:
            continue
        hid = n.attrs["out"]
        w, r, b = (np.asarray(graph.tensors[n.t[k]], np.float64) for k in ("w", "r", "b"))
        h, c, cells = np.zeros(hid), np.zeros(hid), []
        for xt in np.asarray(vals[n.x[0]], np.float64).reshape(-1, w.shape[1]):
            z = w @ xt + r @ h + b
            i, f, o = (1.0 / (1.0 + np.exp(-z[k * hid:(k + 1) * hid])) for k in (0, 1, 3))
            c = f * c + i * np.tanh(z[2 * hid:3 * hid])
            h = o * np.tanh(c)
            cells.append(c)
        vals[n.y + "#cell"] = np.array(cells)
    return vals


def _ranges(values, progress=None):
    ranges = {}
    for vals in values:
        for k, v in vals.items():
            lo, hi = float(np.min(v)), float(np.max(v))
            if k in ranges:
                lo, hi = min(lo, ranges[k][0]), max(hi, ranges[k][1])
            ranges[k] = (lo, hi)
        if progress:
            progress.update(1)
    return ranges


def calibrate(onnx_model, graph, samples, progress=None):
    """{value: (min, max)} of every graph value over the samples, by onnxruntime."""
    return _ranges(_onnx_values(onnx_model, graph, samples), progress)


def calibrate_graph(graph, samples, progress=None):
    """{value: (min, max)} of every graph value over the samples, by the host reference
    interpreter (host_tools/reference.py) running the float graph itself: how a float .tflite
    is calibrated (no onnxruntime, no TensorFlow), with the ranges TFLite's converter records
    (converter_ranges)."""
    if any(n.op == "var" for n in graph.nodes):
        raise PackError("--quantize int8: a model with resource variables (state kept across calls) is not "
                        "quantized here; convert it with TFLite's full-integer quantization "
                        "(converter._experimental_variable_quantization = True) and pack that")
    return converter_ranges(graph, _ranges(_graph_values(graph, samples), progress))


def values(source, graph, samples):
    """The per-sample value iterator of a calibration: source is an ONNX file (onnxruntime) or
    None (the reference interpreter on the graph)."""
    return _onnx_values(source, graph, samples) if source is not None else _graph_values(graph, samples)


def saturation(vals, q):
    """{value: (saturated, total)}: how many of the calibration values of each int8 value
    quantize outside -128..127 with its chosen (scale, zero point) (they saturate on the board)."""
    out = {}
    for sample in vals:
        for k, v in sample.items():
            if k not in q:
                continue
            s, z = q[k]
            codes = np.floor(np.asarray(v, np.float64) / s + 0.5) + z
            n = int(np.count_nonzero((codes < -128) | (codes > 127)))
            a, b = out.get(k, (0, 0))
            out[k] = (a + n, b + int(np.size(v)))
    return out


# Ops TFLite's interpreter may run in place (an output written over a dying input of the same
# size: tflite/arena_planner.cc IdentifyInPlaceTensors, the kernels' inplace_operator flags), with
# the inputs that may be shared, in the order they are tried.
_INPLACE = {"add": (0, 1), "mul": (0, 1), "softmax": (0,)}


def converter_ranges(graph, ranges):
    """The ranges TFLite's converter records for the same float graph: its calibrator
    (tflite/tools/optimize/calibration/calibrator.cc, LoggingEval) logs every op's inputs again
    after the op ran, so an input the interpreter shared with the op's output (in place) is also
    given the output's values. Its recorded range is then the union of both, and so is its int8
    quantization (a conv feeding a residual ADD gets the ADD's range). Emulated here so that a
    float .tflite quantized by `pack --quantize int8` equals the converter's int8 model; the rule
    is the arena planner's: the input is not a model input, has no reader but this op (and is no
    model output), has the output's size (more than 2 elements), the output is no model output."""
    ranges = dict(ranges)
    graph_in = {i[0] for i in graph.inputs}
    refs = {}
    for n in graph.nodes:
        for x in n.x:
            refs[x] = refs.get(x, 0) + 1
    for v in list(graph.outputs) + list(graph_in):
        refs[v] = refs.get(v, 0) + 1
    size = {k: int(np.prod(s)) for k, s in graph.shapes.items()}
    shared = {}  # value -> the value whose buffer it uses
    for n in graph.nodes:
        if n.op not in _INPLACE or n.y in graph.outputs:
            continue
        for i in _INPLACE[n.op]:
            if i >= len(n.x):
                continue
            x = n.x[i]
            if x in graph_in or refs.get(x, 0) > 1 or size.get(x) != size.get(n.y) or size.get(x, 0) <= 2:
                continue
            if refs.get(shared.get(x, x), 0) > 1:
                continue
            shared[n.y] = shared.get(x, x)
            lo, hi = ranges[x]
            ranges[x] = (min(lo, ranges[n.y][0]), max(hi, ranges[n.y][1]))
            break
    return ranges


def qparams(lo, hi):
    """(scale, zero point) covering [lo, hi] with 0.0 exact (TFLite's asymmetric int8)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo < 1e-30:
        return 1.0, 0
    scale = tflm.f32((hi - lo) / 255.0)
    zp = tflm.tf_round(-128 - lo / scale)
    return scale, max(-128, min(127, zp))


def _groups(graph, ranges):
    """Union of the ranges of values that must share a quantization."""
    parent = {}

    def find(v):
        while parent.get(v, v) != v:
            v = parent[v]
        return v

    for n in graph.nodes:
        if n.op in _SAME_Q:
            for x in n.x:
                a, b = find(x), find(n.y)
                if a != b:
                    parent[a] = b
    union = {}
    for v, r in ranges.items():
        root = find(v)
        lo, hi = union.get(root, r)
        union[root] = (min(lo, r[0]), max(hi, r[1]))
    return {v: union[find(v)] for v in ranges}


def quantize(graph, ranges):
    """The int8 graph of a float graph, given every value's calibrated range."""
    ranges = _groups(graph, ranges)
    out = Graph()
    out.inputs = list(graph.inputs)
    out.outputs = list(graph.outputs)
    out.out_layouts = dict(graph.out_layouts)
    out.shapes = dict(graph.shapes)
    q = out.q
    for name, _, _ in graph.inputs:
        q[name] = qparams(*ranges[name])
    for n in graph.nodes:
        if n.y not in ranges:
            raise PackError("calibration: no range for value %r (%s)" % (n.y, n.src))
        if n.op == "softmax":
            q[n.y] = (1.0 / 256, -128)
        elif n.op in _SAME_Q:
            q[n.y] = q[n.x[0]]
        else:
            q[n.y] = qparams(*ranges[n.y])
        if n.op in _RECURRENT:
            new = _RECURRENT[n.op](n, graph, out, ranges)
        else:
            new = _node(n, graph, out)
        out.nodes += new if isinstance(new, list) else [new]
    return out


def _gate_weights(w, hid):
    """An LSTM's [4H, n] (a GRU's [3H, n]) float weights as int8 codes, each gate's H rows
    symmetric per tensor as TFLite's converter quantizes an LSTM's eight weight tensors (narrow
    range, max |w| / 127), and the gates' scales."""
    codes, scales = [], []
    for g in range(len(w) // hid):
        block = np.asarray(w[g * hid:(g + 1) * hid], np.float64)
        top = float(np.max(np.abs(block)))
        s = tflm.f32(top / 127.0) if top > 0 else 1.0
        scales.append(s)
        codes.append(np.clip(np.rint(block / s), -127, 127))
    return np.concatenate(codes).astype(np.int8), scales


def _lstm(n, src, g, ranges):
    """The int8 lstm of a float one, as TFLite's converter quantizes UNIDIRECTIONAL_SEQUENCE_LSTM
    (so the model runs as its .tflite twin would on TFLM): int8 weights per gate, int32 biases at
    input scale x weight scale, the hidden state on the output's quantization, the cell state
    int16 with a power-of-two scale covering its calibrated range (PowerOfTwoBound / 32768), the
    gates at TFLM's fixed Q3.12 / Q0.15."""
    q = g.q
    hid = n.attrs["out"]
    (s_x, z_x), (s_h, z_h) = q[n.x[0]], q[n.y]
    wq, ws = _gate_weights(src.tensors[n.t["w"]], hid)
    rq, rs = _gate_weights(src.tensors[n.t["r"]], hid)
    b = np.asarray(src.tensors[n.t["b"]], np.float64)
    bq = _bias_codes(n, b, float(s_x) * np.repeat(np.asarray(ws, np.float64), hid), src.tensors[n.t["w"]])
    try:
        bias = np.concatenate([tflm.fold_input_zero_point(bq, wq, 0, z_x),
                               tflm.fold_input_zero_point(None, rq, 0, z_h)])
    except ValueError as e:
        raise PackError("%s: %s" % (n.src, e))
    lo, hi = ranges.get(n.y + "#cell", (0.0, 0.0))
    top = max(abs(lo), abs(hi))
    power = int(math.ceil(math.log2(top))) - 15 if top > 0 else -15  # PowerOfTwoBound(top) = 2**(power + 15)
    new = Node("lstm", n.x, n.y, n.src, **dict(n.attrs, cell=power))
    for key, arr, scales in (("w", wq, ws), ("r", rq, rs)):
        new.t[key] = n.t[key]
        g.tensors[n.t[key]] = arr
        g.wquant[n.t[key]] = (np.repeat(np.asarray(scales, np.float32), hid), 0)
    new.t["b"] = n.t["b"]
    g.tensors[n.t["b"]] = bias
    new.t["m"] = g.add_tensor(n.y + ".requant", np.array(tflm.lstm_params(s_x, ws, s_h, rs, 2.0 ** power, hid),
                                                         dtype=np.int32))
    new.t["t"] = g.add_tensor(n.y + ".sigmoid", np.array(tflm.SIGMOID16, dtype=np.int32).astype(np.uint16)
                              .view(np.int16))
    return new


def _gru(n, src, g, ranges):
    """The int8 gru of a float one (mpy_lazy/ops/gru.py; TFLite has no GRU: built as its LSTM
    is quantized): int8 weights symmetric per gate, the input products' int32 biases at input
    scale x weight scale (x's zero point folded in), the hidden state int16 Q0.15 (zero point 0:
    the recurrent biases at 2**-15 x weight scale), every product requantized to Q3.12, y on
    its calibrated quantization."""
    q = g.q
    hid = n.attrs["out"]
    (s_x, z_x), (s_y, _) = q[n.x[0]], q[n.y]
    w, r = src.tensors[n.t["w"]], src.tensors[n.t["r"]]
    wq, ws = _gate_weights(w, hid)
    rq, rs = _gate_weights(r, hid)
    b = np.asarray(src.tensors[n.t["b"]], np.float64)
    bx = _bias_codes(n, b[:3 * hid], float(s_x) * np.repeat(np.asarray(ws, np.float64), hid), w)
    bh = _bias_codes(n, b[3 * hid:], tflm.GATE_OUT * np.repeat(np.asarray(rs, np.float64), hid), r)
    try:
        bias = np.concatenate([tflm.fold_input_zero_point(bx, wq, 0, z_x), bh.astype(np.int32)])
    except ValueError as e:
        raise PackError("%s: %s" % (n.src, e))
    worst = np.abs(bh) + 32768 * np.abs(rq.astype(np.int64)).sum(axis=1)  # h int16: r h's accumulators
    if np.max(worst) > 2 ** 31 - 1:
        raise PackError("%s: the int32 accumulator of the recurrent products could overflow (hidden size %d)"
                        % (n.src, hid))
    m = []
    for s_in, scales in ((s_x, ws), (tflm.GATE_OUT, rs)):
        ms = [tflm.quantize_multiplier(float(np.float32(tflm.f32(s_in)) * np.float32(tflm.f32(s))) / tflm.GATE_SCALE)
              for s in scales]
        m += [v for v, _ in ms for _ in range(hid)] + [e for _, e in ms for _ in range(hid)]
    m += list(tflm.quantize_multiplier(tflm.GATE_OUT / tflm.f32(s_y)))
    new = Node("gru", n.x, n.y, n.src, **n.attrs)
    for key, arr, scales in (("w", wq, ws), ("r", rq, rs)):
        new.t[key] = n.t[key]
        g.tensors[n.t[key]] = arr
        g.wquant[n.t[key]] = (np.repeat(np.asarray(scales, np.float32), hid), 0)
    new.t["b"] = n.t["b"]
    g.tensors[n.t["b"]] = bias
    new.t["m"] = g.add_tensor(n.y + ".requant", np.array(m, dtype=np.int32))
    new.t["t"] = g.add_tensor(n.y + ".sigmoid", np.array(tflm.SIGMOID16, dtype=np.int32).astype(np.uint16)
                              .view(np.int16))
    return new


_RECURRENT = {"lstm": _lstm, "gru": _gru}


def _weights(w, axis):
    """Per-channel symmetric int8 codes of w along `axis` and their float32 scales."""
    w = np.asarray(w, dtype=np.float64)
    other = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=other) if other else np.abs(w)
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shp = [1] * w.ndim
    shp[axis] = -1
    codes = np.clip(np.rint(w / scales.astype(np.float64).reshape(shp)), -127, 127).astype(np.int8)
    return codes, scales


def _bias_codes(n, bias, scale, w, axis=0):
    """The int32 codes of a float bias at `scale` per output channel (input scale x weight
    scale); PackError naming the channel and the fix when one does not fit in int32."""
    bq = np.rint(np.asarray(bias, np.float64) / scale)
    if np.any(np.abs(bq) > 2 ** 31 - 1):
        k = int(np.argmax(np.abs(bq)))
        w = np.moveaxis(np.asarray(w, np.float64), axis, 0).reshape(len(bq), -1)
        raise PackError("%s: the bias of output %d (%.6g) does not fit in int32 at its int8 scale %.3g (the input's "
                        "scale x the weights' max |w| %.3g / 127): calibrate on typical inputs (the calibrated range of "
                        "its input %r is too narrow; -v lists every range), or retrain so that output's weights "
                        "are not tiny next to its bias" % (n.src, k, bias[k], scale[k], float(np.max(np.abs(w[k]))),
                                                           n.x[0]))
    return bq


def _node(n, src, g):
    q = g.q
    new = Node(n.op, n.x, n.y, n.src, **dict(n.attrs))
    act = new.attrs.pop("act", None) if n.op not in ("relu", "relu6") else None
    s_out, z_out = q[n.y]
    if n.op in ("conv2d", "depthwise", "linear"):
        s_in = q[n.x[0]][0]
        axis = 3 if n.op == "depthwise" else 0
        wq, scales = _weights(src.tensors[n.t["w"]], axis)
        wname = n.t["w"]
        g.tensors[wname] = wq
        g.wquant[wname] = (scales, axis)
        new.t["w"] = wname
        c = len(scales)
        bias = src.tensors[n.t["b"]].astype(np.float64) if "b" in n.t else np.zeros(c)
        bq = _bias_codes(n, bias, float(s_in) * scales.astype(np.float64), src.tensors[n.t["w"]], axis)
        bname = n.t.get("b") or g.add_tensor(n.y + ".bias", None)
        try:
            g.tensors[bname] = tflm.fold_input_zero_point(bq, wq, axis, q[n.x[0]][1])
        except ValueError as e:
            raise PackError("%s: %s" % (n.src, e))
        new.t["b"] = bname
        mult, shift = tflm.conv_multipliers(s_in, scales, s_out)
        new.t["m"] = g.add_tensor(n.y + ".requant", np.array([mult, shift], dtype=np.int32))
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op == "tconv":  # TFLite's TRANSPOSE_CONV: per-channel weights, an int32 bias, z_x in the kernel
        s_in = q[n.x[0]][0]
        wq, scales = _weights(src.tensors[n.t["w"]], 0)
        g.tensors[n.t["w"]] = wq
        g.wquant[n.t["w"]] = (scales, 0)
        new.t = dict(n.t)
        if "b" in n.t:
            bq = _bias_codes(n, src.tensors[n.t["b"]].astype(np.float64), float(s_in) * scales.astype(np.float64),
                             src.tensors[n.t["w"]])
            g.tensors[n.t["b"]] = bq.astype(np.int32)
        mult, shift = tflm.conv_multipliers(s_in, scales, s_out)
        new.t["m"] = g.add_tensor(n.y + ".requant", np.array([mult, shift], dtype=np.int32))
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op == "add":
        new.attrs["m"] = tflm.add_params(q[n.x[0]][0], q[n.x[1]][0], s_out)
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op == "sub":
        new.attrs["m"] = tflm.sub_params(q[n.x[0]][0], q[n.x[1]][0], s_out)
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op == "mul":
        new.attrs["m"] = tflm.mul_params(q[n.x[0]][0], q[n.x[1]][0], s_out)
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op in ("maxpool", "avgpool"):
        new.attrs["clamp"] = tflm.activation_range(act, s_out, z_out)
    elif n.op == "mean":
        h, w, _ = g.shapes[n.x[0]]
        new.attrs["m"] = tflm.mean_params(q[n.x[0]][0], s_out, h * w)
    elif n.op == "softmax":
        if n.attrs.get("beta") not in (None, 1.0):  # (a float .tflite's beta 1 is None: not written)
            raise PackError("%s: int8 softmax with beta != 1 is not supported" % n.src)
        new.t["t"] = g.add_tensor(n.y + ".exp", np.array(tflm.softmax_table(q[n.x[0]][0]), dtype=np.int32))
    elif n.op in ("relu", "relu6", "clip", "leakyrelu", "sigmoid", "tanh"):
        fn = _FLOAT_FN.get(n.op)
        if n.op == "clip":
            lo, hi = n.attrs["lo"], n.attrs["hi"]
            fn = lambda v: min(max(v, lo), hi)  # noqa: E731
        elif n.op == "leakyrelu":
            alpha = n.attrs["alpha"]
            fn = lambda v: v if v >= 0 else alpha * v  # noqa: E731
        s_in, z_in = q[n.x[0]]
        table = tflm.float_table(fn, s_in, z_in, s_out, z_out)
        new = Node("lut", n.x, n.y, n.src)
        new.t["t"] = g.add_tensor(n.y + ".lut", np.array(table, dtype=np.int8))
    elif n.op in ("reshape", "pad", "concat", "transpose", "slice"):
        pass
    elif n.op in _ELEM:
        return _ELEM[n.op](n, src, g, new)
    else:
        raise PackError("%s: %s has no int8 version" % (n.src, n.op))
    return new


# --- elementwise ops, resize, layernorm: as TFLite's converter quantizes them where TFLite has
# the op (HARD_SWISH, PRELU, DIV, MINIMUM, MAXIMUM, RESIZE_*: TFLM's integer arithmetic), a
# table of the float function otherwise (HardSigmoid, Gelu), float between dequantize and
# quantize for LayerNormalization, GroupNorm and InstanceNorm (TFLite has no such ops)

def _hardswish(n, src, g, new):
    (s_in, z_in), (s_out, z_out) = g.q[n.x[0]], g.q[n.y]
    try:
        table = tflm.hard_swish_table(s_in, z_in, s_out, z_out)
    except ValueError as e:
        raise PackError("%s: %s" % (n.src, e))
    new = Node("lut", n.x, n.y, n.src)
    new.t["t"] = g.add_tensor(n.y + ".lut", np.array(table, dtype=np.int8))
    return new


def _float_lut(n, src, g, new):
    if n.op == "hardsigmoid":
        alpha, beta = n.attrs.get("alpha", 0.2), n.attrs.get("beta", 0.5)
        fn = lambda v: min(1.0, max(0.0, alpha * v + beta))  # noqa: E731
    elif n.attrs.get("approx") == "tanh":
        fn = lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))  # noqa: E731
    else:
        fn = lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))  # noqa: E731
    new = Node("lut", n.x, n.y, n.src)
    new.t["t"] = g.add_tensor(n.y + ".lut", np.array(tflm.float_table(fn, *(g.q[n.x[0]] + g.q[n.y])), np.int8))
    return new


def _minmax(n, src, g, new):
    """One quantization for the inputs and the output (the converter's); a constant operand
    quantized with it."""
    if "t" in n.t:
        s, z = g.q[n.x[0]]
        r = src.tensors[n.t["t"]].astype(np.float64) / s
        r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(-r + 0.5))  # (half away from zero)
        new.t["t"] = g.add_tensor(n.t["t"], np.clip(r + z, -128, 127).astype(np.int8))
    return new


def _prelu(n, src, g, new):
    """alpha as the converter quantizes it: symmetric int8, one scale (zero point 0)."""
    alpha = src.tensors[n.t["w"]].astype(np.float64)
    s_a = tflm.f32(max(float(np.max(np.abs(alpha))), 1e-30) / 127.0)
    new.t["w"] = g.add_tensor(n.t["w"], np.clip(np.rint(alpha / s_a), -127, 127).astype(np.int8))
    (s_in, z_in), (s_out, z_out) = g.q[n.x[0]], g.q[n.y]
    m1, s1, m2, s2 = tflm.prelu_params(s_in, s_a, s_out)
    new.attrs["m"] = (m2, s2, 0)
    new.t["t"] = g.add_tensor(n.y + ".lut", np.array(tflm.prelu_table(z_in, z_out, m1, s1), np.int8))
    return new


def _div(n, src, g, new):
    s_out, z_out = g.q[n.y]
    m, s = tflm.div_params(g.q[n.x[0]][0], g.q[n.x[1]][0], s_out)
    if s > 22:
        raise PackError("%s: the int8 quotient's multiplier is above 2**22 (a divisor range far wider "
                        "than the quotient's)" % n.src)
    new.attrs["m"] = (m, s)
    new.t["t"] = g.add_tensor(n.y + ".recip", np.array(tflm.reciprocal_table(), np.int32))
    new.attrs["clamp"] = tflm.activation_range(n.attrs.get("act"), s_out, z_out)
    return new


def _resize(n, src, g, new):
    """Nearest: the float graph's indices. Bilinear: TFLM's integer coordinates for the TFLite
    flags the ONNX mode maps to."""
    if n.attrs.get("interp") != "bilinear":
        new.t["t"] = g.add_tensor(n.t["t"], src.tensors[n.t["t"]])
        return new
    flags = getattr(n, "tflite_flags", None)
    if flags is None:
        raise PackError("%s: an int8 bilinear resize needs a coordinate mode TFLite has" % n.src)
    table = tflm.resize_table(g.shapes[n.x[0]], n.attrs["size"], True, flags[0], flags[1], integer=True)
    new.t["t"] = g.add_tensor(n.t["t"], table)
    return new


def _float_island(n, src, g, new):
    """dequantize, the float op (layernorm, groupnorm), quantize."""
    xf, yf = n.x[0] + ".f", n.y + ".f"
    g.shapes[xf] = g.shapes[yf] = g.shapes[n.y]
    new = Node(n.op, [xf], yf, n.src, **dict(n.attrs))
    for key, name in n.t.items():
        new.t[key] = name
        g.tensors[name] = src.tensors[name]
    return [Node("dequantize", n.x, xf, n.src), new, Node("quantize", [yf], n.y, n.src)]


_ELEM = {"hardswish": _hardswish, "hardsigmoid": _float_lut, "gelu": _float_lut, "minimum": _minmax,
         "maximum": _minmax, "prelu": _prelu, "div": _div, "resize": _resize,
         "layernorm": _float_island, "groupnorm": _float_island}
