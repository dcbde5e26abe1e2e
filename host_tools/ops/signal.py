"""The host's half of the signal library: TFLite Micro's custom ops Signal* (signal/micro/kernels;
micro_speech's audio front end), converted from the model into the graph description for the
runtime's room mpy_lazy/ops/signal.py (docs/OPS.md). Their options are flexbuffer maps
(custom_options), read with flatbuffers' own flexbuffers module. uint32 tensors are the board's
int32 values (the same bits); SignalFilterBank's uint64 output becomes lo, hi uint32 pairs, read
only by SignalFilterBankSquareRoot. op_<Name>(r): r the reader (host_tools.tflite_import)."""
import math

import numpy as np

from ..ir import Node

# the tensor types each op takes, inputs and outputs (TFLM's interpreter the peer on micro_speech's
# front ends, every value: tests/host/test_thirdparty.py, test_tflite_signal.py)
TYPES = {
    "CUSTOM SignalWindow": "int16", "CUSTOM SignalFftAutoScale": "int16 int32",
    "CUSTOM SignalRfft": "int16 int32 float32",
    "CUSTOM SignalEnergy": "int16 uint32", "CUSTOM SignalFilterBank": "uint32 int16 uint64",
    "CUSTOM SignalFilterBankSquareRoot": "uint64 int32 uint32", "CUSTOM SignalFilterBankSpectralSubtraction": "uint32",
    "CUSTOM SignalPCAN": "uint32 int16", "CUSTOM SignalFilterBankLog": "uint32 int16", "CUSTOM SignalDelay": "int16",
    "CUSTOM SignalStacker": "int16 bool", "CUSTOM SignalFramer": "int16 bool",
    "CUSTOM SignalOverlapAdd": "int16 float32", "CUSTOM SignalIrfft": "int16 int32 float32",
}
MAX_FFT = 1 << 15


def options(r, *keys):
    """The op's custom options (a flexbuffer map): the integers of `keys` (bools as 0/1)."""
    from flatbuffers import flexbuffers

    raw = r.op.CustomOptionsAsNumpy()
    if not isinstance(raw, np.ndarray) or not raw.size:
        raise r.err("no custom options (a flexbuffer map)")
    try:
        m = flexbuffers.GetRoot(bytes(raw.tobytes())).AsMap
        got = {k: m[k] for k in m.Keys.Value}
    except Exception as e:
        raise r.err("custom options are not a flexbuffer map: %s" % e)
    out = []
    for k in keys:
        v = got.get(k)
        if v is None:
            raise r.err("custom options lack %r" % k)
        v = v.AsBool if v.IsBool else v.AsInt
        if not -(1 << 31) <= v < 1 << 31:
            raise r.err("%s=%d: not an int32" % (k, v))
        out.append(int(v))
    return out


def _types(r, ins, outs):
    for where, idx, want in (("input", r.ins, ins), ("output", r.outs, outs)):
        if len(idx) != len(want):
            raise r.err("%d %ss: the op has %d" % (len(idx), where, len(want)))
        for j, (i, t) in enumerate(zip(idx, want)):
            typ = r.tensor(i)[2]
            if typ != t:
                raise r.err("%s %d (tensor %d) is %s: %s expected" % (where, j, i, typ, t))


def _const(r, j, n=None):
    """Input j: a constant int16 vector (of n values)."""
    v = r.data(r.ins[j])
    if v is None or v.ndim != 1 or (n is not None and v.size != n):
        raise r.err("input %d must be a constant int16 vector%s" % (j, "" if n is None else " of %d" % n))
    return v


def _node(r, op, xs, i, yshape, dt="i32", **attrs):
    """A graph op writing tensor i, an int32/uint32 value of `yshape` (a scalar: one value), or
    of `dt`."""
    y = "t%d" % i if isinstance(i, int) else i
    r.ir.shapes[y] = tuple(yshape)
    if dt not in ("bool", "f32"):
        r.ir.q[y] = (1.0, 0)
    r.ir.dtypes[y] = dt
    r.ir.nodes.append(Node(op, xs, y, r.what, **attrs))
    return y


def _ranks(r, *which):
    """TFLM's Prepare takes these tensors (("input" or "output", index, rank)) of that rank only
    (signal/micro/kernels: NumDimensions)."""
    for where, j, rank in which:
        shape = r.tensor((r.ins if where == "input" else r.outs)[j])[1]
        if len(shape) != rank:
            raise r.err("%s %d of shape %s: %s expected (TFLM takes rank %d only)"
                        % (where, j, list(shape), "a vector" if rank == 1 else "a scalar", rank))


def _size(r, i):
    return int(np.prod(r.tensor(i)[1], dtype=np.int64))


def op_SignalWindow(r):
    _types(r, ("INT16", "INT16"), ("INT16",))
    shift, = options(r, "shift")
    w = _const(r, 1)
    n = _size(r, r.ins[0])
    if r.tensor(r.outs[0])[1] != r.tensor(r.ins[0])[1] or not len(r.tensor(r.ins[0])[1]) or n % w.size or not 0 <= shift <= 31:
        raise r.err("a window of %d over %d values, shift %d (0..31)" % (w.size, n, shift))
    node = r.emit("window", [r.value(r.ins[0])], opts=(shift,), shape=(w.size,))
    node.t["w"] = r.add("window", w.astype(np.int16))


def op_SignalFftAutoScale(r):
    _types(r, ("INT16",), ("INT16", "INT32"))
    x = r.value(r.ins[0])
    if len(r.tensor(r.ins[0])[1]) != 1 or r.tensor(r.outs[0])[1] != r.tensor(r.ins[0])[1] or r.tensor(r.outs[1])[1]:
        raise r.err("a vector in, the vector and a scalar out")
    bits = _node(r, "fftbits", [x], r.outs[1], (1,))
    r.emit("fftscale", [x, bits])


def twiddles(nfft, inverse=False, dt="i16"):
    """kiss_fft's tables for an nfft-point real FFT: the nfft/2-point complex FFT's twiddles
    (kiss_fft_alloc), then kiss_fftr's nfft/4 super twiddles (kiss_fftr_alloc), as re, im pairs:
    int16 / int32 floor(0.5 + SAMP_MAX cos|sin(phase)) in double precision (SAMP_MAX 32767 or
    2**31 - 1; a board's 32-bit floats would differ), float32 (float) cos|sin(phase); inverse:
    the phases negated (the inverse FFT's)."""
    n = nfft // 2
    sign = -1 if inverse else 1
    top = {"i16": 32767, "i32": 2147483647}.get(dt)

    def pair(phase):
        if top is None:
            return [math.cos(phase), math.sin(phase)]
        return [math.floor(.5 + top * math.cos(phase)), math.floor(.5 + top * math.sin(phase))]

    out = []
    for i in range(n):
        out += pair(sign * -2 * math.pi * i / n)
    for i in range(n // 2):
        out += pair(sign * -3.14159265358979323846264338327 * ((i + 1) / n + .5))
    return np.array(out, {"i16": np.int16, "i32": np.int32, "f32": np.float32}[dt])


_FFT_TYPES = {7: ("INT16", "i16"), 2: ("INT32", "i32"), 0: ("FLOAT32", "f32")}  # TensorType -> (name, dtype)


def _fft_type(r, typ, what):
    if typ not in _FFT_TYPES:
        raise r.err("%s of tensor type %d: mpy-lazy runs int16 (7), int32 (2) and float32 (0)" % (what, typ))
    name, dt = _FFT_TYPES[typ]
    _types(r, (name,), (name,))
    return dt


def op_SignalRfft(r):
    nfft, typ = options(r, "fft_length", "T")
    dt = _fft_type(r, typ, "SignalRfft")
    xs, ys = r.tensor(r.ins[0])[1], r.tensor(r.outs[0])[1]
    if not 4 <= nfft <= MAX_FFT or nfft & (nfft - 1):
        raise r.err("fft_length %d: mpy-lazy runs powers of two 4..%d" % (nfft, MAX_FFT))
    if len(xs) != len(ys) or list(xs[:-1]) != list(ys[:-1]) or ys[-1] != nfft + 2 or xs[-1] > nfft:
        raise r.err("input %s, output %s: frames of at most %d in, %d out" % (list(xs), list(ys), nfft, nfft + 2))
    node = r.emit("rfft", [r.value(r.ins[0])], opts=(nfft,))
    node.t["t"] = r.add("twiddles", twiddles(nfft, dt=dt))


def op_SignalEnergy(r):
    _types(r, ("INT16",), ("UINT32",))
    end, start = options(r, "end_index", "start_index")
    _ranks(r, ("input", 0, 1), ("output", 0, 1))
    n = _size(r, r.outs[0])
    if len(r.tensor(r.ins[0])[1]) != 1 or 2 * n != _size(r, r.ins[0]) or not 0 <= start <= end <= n:
        raise r.err("bins start_index %d .. end_index %d over %d complex values in, %d out (0 <= start <= end <= %d)"
                    % (start, end, _size(r, r.ins[0]) // 2, n, n))
    r.emit("energy", [r.value(r.ins[0])], opts=(start, end))


def op_SignalFilterBank(r):
    _types(r, ("UINT32",) + ("INT16",) * 5, ("UINT64",))
    ch, = options(r, "num_channels")
    _ranks(r, ("input", 0, 1), ("output", 0, 1))
    w, u = _const(r, 1), _const(r, 2)
    fs, ws, wd = _const(r, 3, ch + 1), _const(r, 4, ch + 1), _const(r, 5, ch + 1)
    nin = _size(r, r.ins[0])
    if w.size != u.size or _size(r, r.outs[0]) != ch or not 1 <= ch <= 65535:
        raise r.err("%d weights, %d unweights, %d channels, %d outputs" % (w.size, u.size, ch, _size(r, r.outs[0])))
    for i in range(ch + 1):
        if min(fs[i], ws[i], wd[i]) < 0 or fs[i] + wd[i] > nin or ws[i] + wd[i] > w.size:
            raise r.err("channel %d: bins %d+%d of %d, weights %d+%d of %d" % (i, fs[i], wd[i], nin, ws[i], wd[i],
                                                                                 w.size))
    y = _node(r, "filterbank", [r.value(r.ins[0])], r.outs[0], (2 * ch,), opts=(ch, w.size))
    r.ir.nodes[-1].t["w"] = r.add("tables", np.concatenate([w, u, fs, ws, wd]).astype(np.int16))
    return y


def op_SignalFilterBankSquareRoot(r):
    _types(r, ("UINT64", "INT32"), ("UINT32",))
    _ranks(r, ("input", 0, 1), ("input", 1, 0), ("output", 0, 1))
    if r.data(r.ins[1]) is not None:
        raise r.err("a constant scale: mpy-lazy takes SignalFftAutoScale's")
    r.emit("fbsqrt", [r.value(r.ins[0]), r.value(r.ins[1])])


def op_SignalFilterBankSpectralSubtraction(r):
    _types(r, ("UINT32",), ("UINT32", "UINT32"))
    keys = ("smoothing", "one_minus_smoothing", "alternate_smoothing", "alternate_one_minus_smoothing",
            "min_signal_remaining", "smoothing_bits", "spectral_subtraction_bits", "clamping", "num_channels")
    o = options(r, *keys)
    _ranks(r, ("input", 0, 1), ("output", 0, 1), ("output", 1, 1))
    n = _size(r, r.ins[0])
    if o[8] != n or _size(r, r.outs[0]) != n or _size(r, r.outs[1]) != n:
        raise r.err("num_channels %d over %d values" % (o[8], n))
    for k, v in zip(keys, o):
        if v < 0 or k.endswith("_bits") and v > 31:
            raise r.err("%s=%d out of range" % (k, v))
    both = "t%d.both" % r.outs[0]
    r.ir.shapes[both] = (2 * n,)
    r.ir.q[both] = (1.0, 0)
    r.ir.dtypes[both] = "i32"
    r.ir.nodes.append(Node("specsub", [r.value(r.ins[0])], both, r.what, opts=tuple(o[:8])))
    for j, i in enumerate(r.outs):  # the output, then the noise estimate
        _node(r, "slice", [both], i, (n,), begin=(j * n,), end=((j + 1) * n,))


def op_SignalPCAN(r):
    _types(r, ("UINT32", "UINT32", "INT16"), ("UINT32",))
    shift, = options(r, "snr_shift")
    _ranks(r, ("input", 0, 1), ("input", 1, 1), ("output", 0, 1))
    lut = _const(r, 2)
    n = _size(r, r.ins[0])
    if _size(r, r.ins[1]) != n or lut.size < 125 or not 0 <= shift <= 63:
        raise r.err("signal of %d, noise of %d, a gain table of %d (125 needed), snr_shift %d"
                    % (n, _size(r, r.ins[1]), lut.size, shift))
    node = r.emit("pcan", [r.value(r.ins[0]), r.value(r.ins[1])], opts=(shift,), shape=(lut.size,))
    node.t["t"] = r.add("gain", lut.astype(np.int16))


def op_SignalFilterBankLog(r):
    _types(r, ("UINT32",), ("INT16",))
    bits, scale = options(r, "input_correction_bits", "output_scale")
    _ranks(r, ("input", 0, 1), ("output", 0, 1))
    if not 0 <= bits <= 31 or scale < 0:
        raise r.err("input_correction_bits %d (0..31), output_scale %d" % (bits, scale))
    r.emit("fblog", [r.value(r.ins[0])], opts=(bits, scale))


def op_SignalDelay(r):
    _types(r, ("INT16",), ("INT16",))
    d, = options(r, "delay_length")
    if r.tensor(r.outs[0])[1] != r.tensor(r.ins[0])[1] or not 0 <= d <= 65535:
        raise r.err("output of shape %s for input %s, delay_length %d (0..65535)"
                    % (list(r.tensor(r.outs[0])[1]), list(r.tensor(r.ins[0])[1]), d))
    r.emit("delay", [r.value(r.ins[0])], opts=(d,))


def op_SignalStacker(r):
    _types(r, ("INT16",), ("INT16", "BOOL"))
    c, left, right, step = options(r, "num_channels", "stacker_left_context", "stacker_right_context",
                                   "stacker_step")
    x, y, valid = (r.tensor(i)[1] for i in (r.ins[0], r.outs[0], r.outs[1]))
    frames = left + right + 1
    if (list(x) != [c] or list(y) != [c * frames] or list(valid) or min(c, left, right) < 0
            or not 1 <= step <= frames or frames > 32767):
        raise r.err("input %s, outputs %s and %s for num_channels %d, left %d, right %d, step %d "
                    "(1..left + right + 1; left + right + 1 <= 32767)"
                    % (list(x), list(y), list(valid), c, left, right, step))
    _flagged(r, "stacker", (c * frames,), opts=(left, right, step))


def _flagged(r, op, shape, **attrs):
    """An op of two outputs, int16 values of `shape` and a bool valid flag (TFLM's stacker and
    framer): a graph op writing both (the flag last), two slices and a cast to bool."""
    n = int(np.prod(shape))
    both = "t%d.both" % r.outs[0]
    _node(r, op, [r.value(r.ins[0])], both, (n + 1,), "i16", **attrs)
    flat = both + ".y" if len(shape) > 1 else r.outs[0]
    _node(r, "slice", [both], flat, (n,), "i16", begin=(0,), end=(n,))
    if flat != r.outs[0]:
        _node(r, "reshape", [flat], r.outs[0], shape, "i16", shape=tuple(shape))
    _node(r, "slice", [both], both + ".valid", (1,), "i16", begin=(n,), end=(n + 1,))
    _node(r, "cast", [both + ".valid"], r.outs[1], (1,), "bool", dtype="bool")


def op_SignalFramer(r):
    _types(r, ("INT16",), ("INT16", "BOOL"))
    size, step, prefill = options(r, "frame_size", "frame_step", "prefill")
    x, y, valid = (list(r.tensor(i)[1]) for i in (r.ins[0], r.outs[0], r.outs[1]))
    row = x[-1] if x else 0
    if (not 1 <= step <= row or row % step or y != x[:-1] + [row // step, size] or valid or size < 1
            or size + step > 32767 or prefill and size < step):
        raise r.err("input %s, outputs %s and %s for frame_size %d, frame_step %d, prefill %d (steps "
                    "dividing the last axis, size + step <= 32767, a prefill: step <= size)"
                    % (x, y, valid, size, step, prefill))
    _flagged(r, "framer", tuple(y), opts=(size, step, prefill))


def op_SignalOverlapAdd(r):
    typ = r.tensor(r.ins[0])[2]
    _types(r, (typ,), (typ,))
    if typ not in ("INT16", "FLOAT32"):
        raise r.err("input of type %s: int16 or float32" % typ)
    step, = options(r, "frame_step")
    x, y = (list(r.tensor(i)[1]) for i in (r.ins[0], r.outs[0]))
    if len(x) < 2 or not 1 <= step <= x[-1] or y != x[:-2] + [x[-2] * step]:
        raise r.err("input %s, output %s for frame_step %d (frames: the last two axes; 1 <= step <= "
                    "frame size)" % (x, y, step))
    dt = "f32" if typ == "FLOAT32" else "i16"
    flat = "t%d.flat" % r.outs[0] if len(y) > 1 else r.outs[0]
    _node(r, "overlap", [r.value(r.ins[0])], flat, (int(np.prod(y)),), dt, opts=(step, x[-2], x[-1]))
    if flat != r.outs[0]:
        _node(r, "reshape", [flat], r.outs[0], tuple(y), dt, shape=tuple(y))


def op_SignalIrfft(r):
    nfft, typ = options(r, "fft_length", "T")
    dt = _fft_type(r, typ, "SignalIrfft")
    xs, ys = list(r.tensor(r.ins[0])[1]), list(r.tensor(r.outs[0])[1])
    if not 4 <= nfft <= MAX_FFT or nfft & (nfft - 1):
        raise r.err("fft_length %d: mpy-lazy runs powers of two 4..%d" % (nfft, MAX_FFT))
    if not xs or xs[:-1] != ys[:-1] or xs[-1] != nfft + 2 or ys[-1] != nfft:
        raise r.err("input %s, output %s: frames of %d in, %d out" % (xs, ys, nfft + 2, nfft))
    flat = "t%d.flat" % r.outs[0] if len(ys) > 1 else r.outs[0]
    _node(r, "irfft", [r.value(r.ins[0])], flat, (int(np.prod(ys)),), dt, opts=(nfft,))
    r.ir.nodes[-1].t["t"] = r.add("twiddles", twiddles(nfft, inverse=True, dt=dt))
    if flat != r.outs[0]:
        _node(r, "reshape", [flat], r.outs[0], tuple(ys), dt, shape=tuple(ys))
