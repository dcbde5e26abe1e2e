"""A reference interpreter of graph descriptions in numpy, written separately from the runtime's
kernels: the tests compare the board's integers with it (and with TFLite Micro itself for
.tflite models). Float ops in float64, int8 ops in int64 with TFLite Micro's arithmetic
(host_tools.tflm): int8, and int16 activations with int8 weights (16x8) and int64
accumulators. Slow and simple on purpose: every op is a few lines of numpy."""
import math

import numpy as np

from mpy_lazy.graph import RANGE, parse

from .tflm import mbqm64_np, mbqm_np, rdbpot_np, srdhm_np

_KEEPS_Q = ("reshape", "pad", "concat", "slice", "transpose")


def run(text, tensors, *inputs):
    """Outputs (numpy arrays) of the graph for the inputs, given in each input's layout (C, H, W
    data for layout=chw); each output in its own layout as the runtime's tolist() gives it (H, W,
    C, or C, H, W for `output ... layout=chw`). tensors: name -> numpy array as stored."""
    vals, q, dts, outs = {}, {}, {}, []
    k = 0
    for _, op, kv in parse(text):
        if op == "input":
            shape = kv["shape"]
            x = np.asarray(inputs[k]).reshape(-1)
            k += 1
            if kv.get("layout") == "chw":
                x = x.reshape(shape[2], shape[0], shape[1]).transpose(1, 2, 0)
            dts[kv["y"]] = kv.get("dtype", "f32")
            vals[kv["y"]] = x.reshape(shape).astype(np.float64 if dts[kv["y"]] == "f32" else np.int64)
            if "q" in kv:
                q[kv["y"]] = kv["q"]
            continue
        if op == "output":
            y = vals[kv["x"]]
            outs.append(y.transpose(2, 0, 1) if kv.get("layout") == "chw" else y)
            continue
        xs = kv["x"] if isinstance(kv["x"], list) else [kv["x"]]
        ins = [vals[n] for n in xs]
        qin = [q.get(n) for n in xs]
        kv = dict(kv, dtype=_out_dtype(op, kv, dts[xs[0]]), x_dtype=dts[xs[0]])
        y = _OPS[op](ins, kv, qin, tensors)
        vals[kv["y"]] = y
        dts[kv["y"]] = kv["dtype"]
        if "q" in kv:
            q[kv["y"]] = kv["q"]
        elif op in _KEEPS_Q and qin[0] is not None:
            q[kv["y"]] = qin[0]
    return outs


def _out_dtype(op, kv, x_dtype):
    if op == "quantize":
        return kv.get("dtype", "i8")
    if op == "dequantize":
        return "f32"
    return x_dtype


def _t(tensors, name, dt=np.float64):
    return np.asarray(tensors[name]).astype(dt)


def _clamp(v, kv):
    """The output clamp: clamp= or the whole range of the output's integer dtype."""
    lo, hi = kv.get("clamp", RANGE[kv["dtype"]])
    return np.clip(v, lo, hi)


def _act(v, kv):
    a = kv.get("act", "none")
    if a == "relu":
        return np.maximum(v, 0.0)
    if a == "relu6":
        return np.clip(v, 0.0, 6.0)
    return v


def _requant(acc, kv, tensors, qin, channels_last=True):
    m = _t(tensors, kv["m"], np.int64)
    if kv["dtype"] == "i16" and kv.get("acc", "64") == "64":  # 16x8 with int64 accumulators
        y = mbqm64_np(acc, m[0], m[1])
    else:  # int32 accumulators (a 16x8 one may wrap, as TFLM's C does)
        y = mbqm_np((np.asarray(acc, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31), m[0], m[1])
    return _clamp(y + kv["q"][1], kv)


def _conv_common(x, w4, b, kv, groups, int8, zx=0):
    """x (H, W, C); w4 (OC, KH, KW, CPG); returns the accumulators (OH, OW, OC). int8: the
    bias holds -zx * sum(w) (docs/FORMAT.md), so padded positions read zx."""
    h, wd, c = x.shape
    oc, kh, kw, cpg = w4.shape
    sh, sw = _pair(kv.get("stride", (1,)))
    dh, dw = _pair(kv.get("dil", (1,)))
    p = kv.get("pad", (0,))
    p = p * 4 if len(p) == 1 else (p[0], p[1], p[0], p[1]) if len(p) == 2 else p
    xp = np.full((h + p[0] + p[2], wd + p[1] + p[3], c), zx, dtype=x.dtype)
    xp[p[0]:p[0] + h, p[1]:p[1] + wd] = x
    oh = (h + p[0] + p[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + p[1] + p[3] - dw * (kw - 1) - 1) // sw + 1
    acc = np.zeros((oh, ow, oc), dtype=x.dtype)
    opg = oc // groups
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
            for g in range(groups):
                acc[:, :, g * opg:(g + 1) * opg] += patch[:, :, g * cpg:(g + 1) * cpg] @ \
                    w4[g * opg:(g + 1) * opg, ky, kx, :].T
    if b is not None:
        acc += b
    return acc


def _pair(v):
    return (v[0], v[0]) if len(v) == 1 else tuple(v)


def conv2d(ins, kv, qin, tensors):
    x = ins[0]
    int8 = "q" in kv
    dt = np.int64 if int8 else np.float64
    w = _t(tensors, kv["w"], dt)
    if kv.get("wl") == "oihw":
        w = w.transpose(0, 2, 3, 1)
    elif kv.get("wl") == "ohwi8":  # [out/8, kh, kw, 8 C]: output 8 b + j, input ci at [b, ky, kx, 8 ci + j]
        nb, kh, kw, c8 = w.shape
        w = w.reshape(nb, kh, kw, c8 // 8, 8).transpose(0, 4, 1, 2, 3).reshape(8 * nb, kh, kw, c8 // 8)
    b = _t(tensors, kv["b"], dt) if "b" in kv else None
    acc = _conv_common(x, w, b, kv, kv.get("groups", 1), int8, qin[0][1] if int8 else 0)
    return _requant(acc, kv, tensors, qin) if int8 else _act(acc, kv)


def depthwise(ins, kv, qin, tensors):
    x = ins[0]
    vec = x.ndim == 1
    if vec:
        x = x.reshape(1, 1, -1)
    int8 = "q" in kv
    dt = np.int64 if int8 else np.float64
    w = _t(tensors, kv["w"], dt)
    if kv.get("wl") == "o1hw":
        w = w[:, 0]  # (OC, KH, KW)
    else:
        w = w[0].transpose(2, 0, 1)
    c = x.shape[2]
    mult = kv.get("mult", 1)
    xr = np.repeat(x, mult, axis=2)  # output channel o reads input channel o // mult
    b = _t(tensors, kv["b"], dt) if "b" in kv else None
    acc = _conv_common(xr, w[:, :, :, None], b, kv, c * mult, int8, qin[0][1] if int8 else 0)
    y = _requant(acc, kv, tensors, qin) if int8 else _act(acc, kv)
    return y.reshape(-1) if vec else y


def linear(ins, kv, qin, tensors):
    x = ins[0].reshape(-1)
    int8 = "q" in kv
    dt = np.int64 if int8 else np.float64
    w = _t(tensors, kv["w"], dt)
    if kv.get("wl") == "io":
        w = w.T
    elif kv.get("wl") == "oi8":  # [out/8, 8 in]: output 8 b + j, input i at [b, 8 i + j]
        w = w.reshape(w.shape[0], -1, 8).transpose(0, 2, 1).reshape(8 * w.shape[0], -1)
    acc = w @ x
    if "b" in kv:
        acc = acc + _t(tensors, kv["b"], dt)
    return _requant(acc, kv, tensors, qin) if int8 else _act(acc, kv)


def _broadcast(a, b):
    if a.shape == b.shape:
        return a, b
    if b.size == a.shape[-1]:
        return a, b.reshape(-1)
    return b, a.reshape(-1)


def add(ins, kv, qin, tensors, sign=1):
    """TFLM's integer add and sub: both inputs shifted left (20 bits for int8, 15 for int16),
    rescaled to a common scale, added (or subtracted), requantized."""
    if "q" not in kv:
        a, b = _broadcast(*ins)
        return _act(a + sign * b, kv)
    (a, qa), (b, qb) = (ins[0], qin[0]), (ins[1], qin[1])
    if a.shape != b.shape and a.size == b.shape[-1]:
        (a, qa), (b, qb) = (b, qb), (a, qa)
    m1, s1, m2, s2, m, s = kv["m"]
    shift = 15 if kv["dtype"] == "i16" else 20
    sa = rdbpot_np(srdhm_np((a - qa[1]) << shift, m1), -s1)
    sb = rdbpot_np(srdhm_np((b.reshape(-1) if b.shape != a.shape else b) - qb[1] << shift, m2), -s2)
    y = rdbpot_np(srdhm_np(sa + sign * sb, m), -s) + kv["q"][1]
    return _clamp(y, kv)


def sub(ins, kv, qin, tensors):
    return add(ins, kv, qin, tensors, -1)


def mul(ins, kv, qin, tensors):
    if "q" not in kv:
        a, b = _broadcast(*ins)
        return _act(a * b, kv)
    (a, qa), (b, qb) = (ins[0], qin[0]), (ins[1], qin[1])
    if a.shape != b.shape and a.size == b.shape[-1]:
        (a, qa), (b, qb) = (b, qb), (a, qa)
    if b.shape != a.shape:
        b = b.reshape(-1)
    y = mbqm_np((a - qa[1]) * (b - qb[1]), kv["m"][0], kv["m"][1]) + kv["q"][1]
    return _clamp(y, kv)


def _pool(ins, kv, reduce):
    x = ins[0]
    h, w, c = x.shape
    kh, kw = _pair(kv["k"])
    sh, sw = _pair(kv.get("stride", (kh, kw)))
    p = kv.get("pad", (0,))
    p = p * 4 if len(p) == 1 else (p[0], p[1], p[0], p[1]) if len(p) == 2 else p
    oh = (h + p[0] + p[2] - kh) // sh + 1
    ow = (w + p[1] + p[3] - kw) // sw + 1
    y = np.zeros((oh, ow, c), dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * sh - p[0], ox * sw - p[1]
            win = x[max(y0, 0):min(y0 + kh, h), max(x0, 0):min(x0 + kw, w)].reshape(-1, c)
            y[oy, ox] = reduce(win)
    return y


def maxpool(ins, kv, qin, tensors):
    y = _pool(ins, kv, lambda win: win.max(axis=0))
    return _clamp(y, kv) if "q" in kv else _act(y, kv)


def avgpool(ins, kv, qin, tensors):
    if "q" not in kv:
        return _act(_pool(ins, kv, lambda win: win.mean(axis=0)), kv)

    def rounded_mean(win):  # TFLM: (sum +- n/2) / n, truncated toward zero
        s, n = win.sum(axis=0), len(win)
        return np.where(s > 0, (s + n // 2) // n, -((-s + n // 2) // n))

    return _clamp(_pool(ins, kv, rounded_mean), kv)


def mean(ins, kv, qin, tensors):
    x = ins[0]
    h, w, c = x.shape
    if "q" not in kv:
        return x.reshape(-1, c).mean(axis=0).reshape(1, 1, c)
    acc = x.reshape(-1, c).sum(axis=0) - qin[0][1] * h * w
    y = mbqm_np(acc, kv["m"][0], kv["m"][1]) + kv["q"][1]
    return np.clip(y, -128, 127).reshape(1, 1, c)


def _elementwise(fn):
    def op(ins, kv, qin, tensors):
        return np.vectorize(fn(kv))(ins[0]).astype(np.float64)
    return op


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def lut(ins, kv, qin, tensors):
    t = _t(tensors, kv["t"], np.int64)
    return t[ins[0] + 128]


def reshape(ins, kv, qin, tensors):
    x = ins[0]
    shape = list(kv["shape"])
    if -1 in shape:
        i = shape.index(-1)
        shape[i] = x.size // int(np.prod([d for d in shape if d != -1]))
    if kv.get("order") == "chw" and x.ndim == 3:
        x = x.transpose(2, 0, 1)
    return x.reshape(shape)


def leakyrelu(ins, kv, qin, tensors):
    """Float, or TFLM's integer leaky relu: x - zp scaled by m_identity (x >= zp) or m_alpha."""
    x = ins[0]
    if "q" not in kv:
        return np.where(x >= 0, x, x * kv["alpha"])
    mi, si, ma, sa = kv["m"]
    d = x - qin[0][1]
    y = np.where(d >= 0, mbqm_np(d, mi, si), mbqm_np(d, ma, sa)) + kv["q"][1]
    return _clamp(y, kv)


def slice_(ins, kv, qin, tensors):
    x = ins[0]
    stride = kv.get("stride", (1,) * x.ndim)
    return x[tuple(slice(b, e, st) for b, e, st in zip(kv["begin"], kv["end"], stride))]


def transpose(ins, kv, qin, tensors):
    return ins[0].transpose(kv["perm"])


def tconv(ins, kv, qin, tensors):
    """Transpose convolution: input pixel (iy, ix) adds x x w[:, ky, kx, :] to output pixel
    (iy * stride + ky - pad_top, ix * stride + kx - pad_left) when inside size=oh,ow."""
    x = ins[0] - qin[0][1]
    h, wd, c = x.shape
    w = _t(tensors, kv["w"], np.int64)  # (OC, KH, KW, C)
    oc, kh, kw, _ = w.shape
    sh, sw = _pair(kv.get("stride", (1,)))
    pt, pl = _pair(kv.get("pad", (0,)))
    oh, ow = kv["size"]
    acc = np.zeros((oh, ow, oc), dtype=object if kv["dtype"] == "i16" else np.int64)
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * sh + ky - pt, ix * sw + kx - pl
                    if 0 <= oy < oh and 0 <= ox < ow:
                        acc[oy, ox] += w[:, ky, kx, :] @ x[iy, ix]
    if "b" in kv:
        acc = acc + _t(tensors, kv["b"], np.int64)
    return _requant(acc, kv, tensors, qin)


def concat(ins, kv, qin, tensors):
    return np.concatenate(ins, axis=-1)


def pad(ins, kv, qin, tensors):
    x = ins[0]
    t, l, b, r = kv["pad"]
    v = qin[0][1] if qin[0] is not None else 0
    return np.pad(x, ((t, b), (l, r), (0, 0)), constant_values=v)


def softmax(ins, kv, qin, tensors):
    x = ins[0]
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    if "q" not in kv:
        z = rows * kv.get("beta", 1.0)  # softmax(beta x): from the largest beta x (beta may be < 0)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
    from .tflm import one_over_one_plus_x

    exps = _t(tensors, kv["t"], np.int64)
    out = np.zeros_like(rows)
    for r, row in enumerate(rows):
        e = exps[row.max() - row]
        total = int(rdbpot_np(e, 12).sum())
        head = 32 - total.bit_length()
        scale = one_over_one_plus_x(((total << head) & 0xFFFFFFFF) - (1 << 31))
        out[r] = np.clip(rdbpot_np(srdhm_np(scale, e), 12 - head + 23) - 128, -128, 127)
    return out.reshape(x.shape)


def quantize(ins, kv, qin, tensors):
    s, z = kv["q"]
    lo, hi = RANGE[kv["dtype"]]
    if kv["x_dtype"] != "f32":  # integer -> integer: TFLM's requantize
        m, sh = kv["m"]
        return np.clip(mbqm_np(ins[0] - qin[0][1], m, sh) + z, lo, hi)
    r = ins[0].astype(np.float32) / np.float32(s)
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(-r + 0.5))
    return np.clip(r + z, lo, hi).astype(np.int64)


def dequantize(ins, kv, qin, tensors):
    s, z = qin[0]
    return (s * (ins[0] - z)).astype(np.float32).astype(np.float64)


_OPS = {
    "conv2d": conv2d, "depthwise": depthwise, "linear": linear, "add": add, "mul": mul,
    "sub": sub, "slice": slice_, "transpose": transpose, "tconv": tconv, "leakyrelu": leakyrelu,
    "maxpool": maxpool, "avgpool": avgpool, "mean": mean, "lut": lut, "reshape": reshape,
    "concat": concat, "pad": pad, "softmax": softmax, "quantize": quantize, "dequantize": dequantize,
    "relu": _elementwise(lambda kv: lambda v: max(v, 0.0)),
    "relu6": _elementwise(lambda kv: lambda v: min(max(v, 0.0), 6.0)),
    "clip": _elementwise(lambda kv: lambda v: min(max(v, kv["lo"]), kv["hi"])),
    "sigmoid": _elementwise(lambda kv: _sigmoid),
    "tanh": _elementwise(lambda kv: math.tanh),
}
