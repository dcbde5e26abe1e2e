"""A reference interpreter of graph descriptions in numpy, written separately from the runtime's
kernels: the tests compare the board's integers with it (and with TFLite Micro itself for
.tflite models). Float ops in float64, int8 ops in int64 with TFLite Micro's arithmetic
(host_tools.tflm): int8, and int16 activations with int8 weights (16x8) and int64
accumulators. Slow and simple on purpose: every op is a few lines of numpy."""
import math

import numpy as np

from mpy_lazy.graph import RANGE, parse

from .tflm import mbqm64_np, mbqm_np, rdbpot_np, srdhm_np

_KEEPS_Q = ("reshape", "pad", "concat", "slice", "transpose", "resize", "depth2space", "space2depth",
            "broadcast", "update", "read", "assign")


def run(text, tensors, *inputs, state=None):
    """Outputs (numpy arrays) of the graph for the inputs, given in each input's layout (C, H, W
    data for layout=chw); each output in its own layout as the runtime's tolist() gives it (H, W,
    C, or C, H, W for `output ... layout=chw`). tensors: name -> numpy array as stored. state: a
    dict kept by the caller from one run to the next, holding the state of the ops that keep
    one (lstm state=keep, svdf) as a board's program does between calls; None: every run
    starts from the initial state."""
    vals, q, dts, outs = {}, {}, {}, []
    state = {} if state is None else state
    k = 0
    lines = list(parse(text))
    ops = [i for i, (_, op, _) in enumerate(lines) if op not in ("input", "output")]
    counts = {}
    at = 0
    root = {}  # an assign's value -> its variable: every version is the variable's one buffer, even
    for _, op, kv in lines:  # an assign a branch skips (its value then read after the branch)
        if op == "var":
            root[kv["y"]] = kv["y"]
        elif op == "assign" and kv["x"][0] in root:
            v = root[kv["y"]] = root[kv["x"][0]]
            vals[kv["y"]] = _Var(v)
            line = _var_line(lines, v)
            dts[kv["y"]] = line.get("dtype", "f32")
            if "q" in line:
                q[kv["y"]] = line["q"]
    while at < len(lines):
        _, op, kv = lines[at]
        at += 1
        if op in _CONTROL:  # IF and WHILE on the board: go on elsewhere (mpy_lazy/ops/control.py)
            to = _CONTROL[op](kv, vals, counts)
            if to is not None:
                i = ops.index(at - 1) + to
                at = ops[i] if i < len(ops) else ops[-1] + 1
            continue
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
        if op == "var":  # a variable: its value lives in `state` (read and assign copy it)
            vals[kv["y"]] = _Var(kv["y"])
            dts[kv["y"]] = kv.get("dtype", "f32")
            if "q" in kv:
                q[kv["y"]] = kv["q"]
            if kv["y"] not in state:
                state[kv["y"]] = _initial(kv, tensors)
            continue
        if op == "output":
            y = vals[kv["x"]]
            outs.append(y.transpose(2, 0, 1) if kv.get("layout") == "chw" else y)
            continue
        if op == "const":  # (no input)
            vals[kv["y"]], dts[kv["y"]] = _const(kv, tensors), kv.get("dtype", "f32")
            if dts[kv["y"]] not in ("f32", "bool"):
                q[kv["y"]] = kv.get("q", (1.0, 0))
            continue
        xs = kv["x"] if isinstance(kv["x"], list) else [kv["x"]]
        ins = [vals[n] for n in xs]
        qin = [q.get(n) for n in xs]
        if op in ("add", "sub", "mul") and "t" in kv:  # a constant second operand
            shape = kv.get("shape", (ins[0].shape[-1],))
            ins.append(_t(tensors, kv["t"], np.float64 if "q" not in kv else np.int64).reshape(shape))
            qin.append(kv.get("tq"))
            if kv.get("rev"):  # sub: t - x
                ins, qin = ins[::-1], qin[::-1]
        kv = dict(kv, dtype=_out_dtype(op, kv, dts[xs[-1] if op in ("gathernd", "select") else xs[0]]),
                  x_dtype=dts[xs[-1] if op == "select" else xs[0]], op=op)
        if op in _STATEFUL:
            y = _OPS[op](ins, kv, qin, tensors, state)
        else:
            y = _OPS[op](ins, kv, qin, tensors)
        vals[kv["y"]] = y
        dts[kv["y"]] = kv["dtype"]
        if "q" in kv:
            q[kv["y"]] = kv["q"]
        elif op == "select" and qin[1] is not None:
            q[kv["y"]] = qin[1]
        elif op == "cast" and kv["dtype"] != "f32":
            q[kv["y"]] = (1.0, 0)
        elif op in _KEEPS_Q and qin[0] is not None:
            q[kv["y"]] = qin[0]
    return outs


def _out_dtype(op, kv, x_dtype):
    if op == "reduce" and kv["fn"] in ("argmax", "argmin"):
        return "i32"
    if op in _COMPARE or op in ("and", "or", "not"):
        return "bool"
    if op == "cast" or op in ("quantize", "softmax") and "dtype" in kv:
        return kv["dtype"]
    if op in ("quantize", "lut"):
        return kv.get("dtype", "i8")
    if op == "dequantize":
        return "f32"
    if op == "gathernd" and "t" in kv:  # (the params tensor's)
        return kv.get("dtype", "f32")
    if op in ("fftbits", "energy", "filterbank", "fbsqrt", "specsub", "pcan"):
        return "i32"
    if op in ("rfft", "irfft") and x_dtype in ("i32", "f32"):
        return x_dtype
    if op in ("window", "fftscale", "rfft", "fblog", "delay", "stacker", "framer", "irfft"):
        return "i16"
    return x_dtype


def _t(tensors, name, dt=np.float64):
    return np.asarray(tensors[name]).astype(dt)


def _clamp(v, kv):
    """The output clamp: clamp= or the whole range of the output's integer dtype."""
    lo, hi = kv.get("clamp", RANGE[kv["dtype"]])
    return np.clip(v, lo, hi)


FLT_MAX = float(np.finfo(np.float32).max)

def _act(v, kv):
    a = kv.get("act", "none")
    if a == "relu":  # (at most FLT_MAX, as TFLite's fused relu)
        return np.clip(v, 0.0, FLT_MAX)
    if a == "relu6":
        return np.clip(v, 0.0, 6.0)
    if a == "finite":  # (TFLite's kNone: float32's range; NaN stays NaN)
        return np.clip(v, -FLT_MAX, FLT_MAX)
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
    w = _t(tensors, kv["w"], dt) - kv.get("wz", 0)  # (wz: a legacy uint8 model's weight zero point)
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
    w = _t(tensors, kv["w"], dt) - kv.get("wz", 0)
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


def _repeated(ins):
    """The two operands with their leading 1s dropped (numpy then broadcasts them as the board
    does, aligned at their last dimensions), and the output's shape."""
    out = np.broadcast_shapes(*[x.shape for x in ins])

    def trim(x):
        shape = list(x.shape)
        while shape and shape[0] == 1:
            shape.pop(0)
        return x.reshape(shape)

    return trim(ins[0]), trim(ins[1]), out


def add(ins, kv, qin, tensors, sign=1):
    """TFLM's integer add and sub: both inputs shifted left (20 bits for int8, 15 for int16),
    rescaled to a common scale, added (or subtracted), requantized."""
    if "q" not in kv:
        a, b, out = _repeated(ins)
        return _act(a + sign * b, kv).reshape(out)
    a, b, out = _repeated(ins)
    if kv["dtype"] == "i32":  # TFLM's unquantized int32: two's complement wraparound
        return _clamp(_wrap32(a + sign * b), kv).reshape(out)
    qa, qb = qin
    m1, s1, m2, s2, m, s = kv["m"]
    shift = 15 if kv["dtype"] == "i16" else 20
    sa = rdbpot_np(srdhm_np((a - qa[1]) << shift, m1), -s1)
    sb = rdbpot_np(srdhm_np((b - qb[1]) << shift, m2), -s2)
    y = rdbpot_np(srdhm_np(sa + sign * sb, m), -s) + kv["q"][1]
    return _clamp(y, kv).reshape(out)


def sub(ins, kv, qin, tensors):
    return add(ins, kv, qin, tensors, -1)


def mul(ins, kv, qin, tensors):
    if "q" not in kv:
        a, b, out = _repeated(ins)
        return _act(a * b, kv).reshape(out)
    a, b, out = _repeated(ins)
    if kv["dtype"] == "i32":
        return _clamp(_wrap32(a * b), kv).reshape(out)
    qa, qb = qin
    y = mbqm_np((a - qa[1]) * (b - qb[1]), kv["m"][0], kv["m"][1]) + kv["q"][1]
    return _clamp(y, kv).reshape(out)


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
        if kv.get("round") == "up":  # TFLite's uint8 kernels: half up (legacy uint8 models)
            return (s + n // 2) // n
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


def reduce(ins, kv, qin, tensors):
    """TFLM's reductions: float32 sums in x's order (each partial rounded to float32), max from
    -FLT_MAX, min from FLT_MAX; integer sums in int64 less ZX x count, requantized; max/min of the
    codes from the type's extreme; argmax/argmin the first index of the extreme (int32); all:
    bool values (0 or 1), 1 where every one is."""
    x, fn = ins[0], kv["fn"]
    axes = tuple(kv.get("axes", ()))
    if fn == "all":
        return np.all(x != 0, axis=axes, keepdims=True).astype(np.int64)
    if fn in ("argmax", "argmin"):
        return (np.argmax if fn == "argmax" else np.argmin)(x, axis=axes[0], keepdims=True).astype(np.int64)
    if "q" not in kv:
        f = x.astype(np.float32)
        if fn in ("max", "min"):
            top = np.float32(np.finfo(np.float32).max)
            edge = np.full([1 if d in axes else s for d, s in enumerate(f.shape)], -top if fn == "max" else top)
            op = np.maximum if fn == "max" else np.minimum
            return op(edge, (f.max if fn == "max" else f.min)(axis=axes, keepdims=True)).astype(np.float64)
        moved = np.moveaxis(f, axes, range(len(axes))).reshape((-1,) + tuple(d for k, d in enumerate(f.shape)
                                                                            if k not in axes))
        total = np.zeros(moved.shape[1:], np.float32)
        for row in moved:  # (TFLM's order: one float32 addition per element)
            total = (total + row).astype(np.float32)
        if fn == "mean":
            total = (total / np.float32(moved.shape[0])).astype(np.float32)
        return total.reshape([1 if d in axes else s for d, s in enumerate(f.shape)]).astype(np.float64)
    lo, hi = RANGE[kv["x_dtype"]]
    if fn in ("max", "min"):
        edge = np.full([1 if d in axes else s for d, s in enumerate(x.shape)], lo if fn == "max" else hi)
        return (np.maximum if fn == "max" else np.minimum)(edge, (x.max if fn == "max" else x.min)(
            axis=axes, keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    acc = x.sum(axis=axes, keepdims=True) - qin[0][1] * count
    return np.clip(mbqm_np(acc, kv["m"][0], kv["m"][1]) + kv["q"][1], lo, hi)


def cumsum(ins, kv, qin, tensors):
    """TFLM's CUMSUM along `axis`: float32 partial sums; int8: (x - z_x) << 19 added in int32
    (wrapping) from -z_x << 19, each sum z_y + mbqm(sum, m), saturated."""
    x = np.moveaxis(ins[0], kv.get("axis", -1), 0)
    if kv.get("reverse"):
        x = x[::-1]
    out = np.empty(x.shape, np.float64 if "q" not in kv else np.int64)
    if "q" not in kv:
        s = np.zeros(x.shape[1:], np.float32)
        for t in range(len(x)):
            new = (s + x[t].astype(np.float32)).astype(np.float32)
            out[t] = s if kv.get("exclusive") else new
            s = new
    else:
        z = qin[0][1]
        s = np.full(x.shape[1:], _wrap32(np.int64(-z) << 19), np.int64)
        for t in range(len(x)):
            new = _wrap32(s + ((x[t] - z) << 19))
            acc = s if kv.get("exclusive") else new
            out[t] = np.clip(mbqm_np(acc, kv["m"][0], kv["m"][1]) + kv["q"][1], -128, 127)
            s = new
    if kv.get("reverse"):
        out = out[::-1]
    return np.moveaxis(out, 0, kv.get("axis", -1))


def batchmatmul(ins, kv, qin, tensors):
    """TFLM's BATCH_MATMUL: B products (M x K) (K x N), either operand stored transposed (adj)
    or shared by every batch (bcast). Float: float32 products and sums in k's order; integers:
    sum((l - z_l)(r - z_r)) requantized (int16: TFLM's int64 mbqm)."""
    from .tflm import mbqm64_np

    b, m, k, n = kv["size"]
    ax, ay = kv.get("adj", (0, 0))
    bl, br = kv.get("bcast", (0, 0))
    rhs = ins[1] if len(ins) > 1 else _t(tensors, kv["w"], np.float64 if "q" not in kv else np.int64)
    lhs = ins[0].reshape(1 if bl else b, *((k, m) if ax else (m, k)))
    rhs = rhs.reshape(1 if br else b, *((n, k) if ay else (k, n)))
    lhs = np.broadcast_to(lhs.swapaxes(1, 2) if ax else lhs, (b, m, k))
    rhs = np.broadcast_to(rhs.swapaxes(1, 2) if ay else rhs, (b, k, n))
    if "q" not in kv:
        out = np.zeros((b, m, n), np.float32)
        for t in range(k):
            prod = (lhs[:, :, t:t + 1].astype(np.float32) * rhs[:, t:t + 1, :].astype(np.float32)).astype(np.float32)
            out = (out + prod).astype(np.float32)
        return out.astype(np.float64).reshape(kv["shape"])
    zl = qin[0][1]
    zr = (qin[1] if len(ins) > 1 else kv["tq"])[1]
    acc = np.einsum("bmk,bkn->bmn", lhs.astype(np.int64) - zl, rhs.astype(np.int64) - zr)
    lo, hi = RANGE[kv["x_dtype"]]
    mq = mbqm_np(acc, *kv["m"]) if kv["x_dtype"] == "i8" else mbqm64_np(acc, *kv["m"])
    return np.clip(mq + kv["q"][1], lo, hi).reshape(kv["shape"])


def _as_f32(v):
    return np.asarray(v, np.float32)


def logsoftmax(ins, kv, qin, tensors):
    """TFLM's float LOG_SOFTMAX over the last axis: x - max - log(sum exp(x - max)), in float32;
    int8: host_tools.tflm.log_softmax_np (TFLM's fixed point) from the packed table."""
    if "q" in kv:
        from .tflm import log_softmax_np

        rsd, rls, diff_min = kv["m"]
        return log_softmax_np(ins[0], 0, 0, rsd, rls, diff_min, [int(v) for v in _t(tensors, kv["t"], np.int64)])
    x = _as_f32(ins[0])
    rows = x.reshape(-1, x.shape[-1])
    top = rows.max(axis=1, keepdims=True)
    total = np.zeros((len(rows), 1), np.float32)
    for j in range(rows.shape[1]):
        total = _as_f32(total + _as_f32(np.exp(_as_f32(rows[:, j:j + 1] - top))))
    return _as_f32(_as_f32(rows - top) - _as_f32(np.log(total))).reshape(x.shape).astype(np.float64)


def l2norm(ins, kv, qin, tensors):
    """TFLM's float L2_NORMALIZATION over the last axis: x / max(sqrt(sum x^2), 1e-6), in float32;
    int8: per row the inverse square root of sum (x - z_x)^2 (TFLM's fixed point), each x - z_x
    through mbqm by it with 7 more bits: codes of 1/128."""
    if "q" in kv:
        from .tflm import inv_sqrt, mbqm

        d = ins[0].reshape(-1, ins[0].shape[-1]) - qin[0][1]
        out = np.empty(d.shape, np.int64)
        for i, row in enumerate(d):
            m, s = inv_sqrt(int((row * row).sum()))
            out[i] = [min(127, max(-128, mbqm(int(v), m, s + 7))) for v in row]
        return out.reshape(ins[0].shape)
    x = _as_f32(ins[0])
    rows = x.reshape(-1, x.shape[-1])
    total = np.zeros((len(rows), 1), np.float32)
    for j in range(rows.shape[1]):
        total = _as_f32(total + _as_f32(rows[:, j:j + 1] * rows[:, j:j + 1]))
    norm = np.maximum(_as_f32(np.sqrt(total)), np.float32(1e-6))
    return _as_f32(rows / norm).reshape(x.shape).astype(np.float64)


def l2pool(ins, kv, qin, tensors):
    """TFLM's L2_POOL_2D: sqrt(sum of squares / count) over each window's in-bounds elements."""
    x = _as_f32(ins[0])
    h, w, c = x.shape
    kh, kw = kv["k"]
    sh, sw = kv.get("stride", kv["k"])
    pt, pl, pb, pr = kv.get("pad", (0, 0, 0, 0))
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    out = np.zeros((oh, ow, c), np.float64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * sh - pt, ox * sw - pl
            win = x[max(0, y0):min(h, y0 + kh), max(0, x0):min(w, x0 + kw)].reshape(-1, c)
            total = np.zeros(c, np.float32)
            for v in win:
                total = _as_f32(total + _as_f32(v * v))
            out[oy, ox] = np.sqrt(_as_f32(total / np.float32(len(win))).astype(np.float64)).astype(np.float32)
    return _act(out, kv)


def _elementwise(fn):
    def op(ins, kv, qin, tensors):
        return np.vectorize(fn(kv))(ins[0]).astype(np.float64)
    return op


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def lut(ins, kv, qin, tensors):
    """y = t[x + 128]; a u8 input's code b reads t[b ^ 128] (its byte as int8, + 128), a u8
    output is the table's bytes."""
    t = _t(tensors, kv["t"], np.int64)
    y = t[(ins[0] & 255) ^ 128]
    return y & 255 if kv["dtype"] == "u8" else y


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


def _rescaled(floats):
    """An activation: `floats` on float values; on int16 ones TFLM's RELU / RELU6,
    clamp(zo + mbqm(x - zi, m, s)) to clamp= (m default 2**30, 1: x itself)."""
    def op(ins, kv, qin, tensors):
        if "q" not in kv:
            return floats(ins, kv, qin, tensors)
        return _clamp(mbqm_np(ins[0] - qin[0][1], *kv.get("m", (1 << 30, 1))) + kv["q"][1], kv)
    return op


def abs_(ins, kv, qin, tensors):
    """Float |x|, or TFLM's integer ABS: clamp(zo + mbqm(|x - zi|, m, s))."""
    x = ins[0]
    if "q" not in kv:
        return np.abs(x)
    return _clamp(mbqm_np(np.abs(x - qin[0][1]), *kv["m"]) + kv["q"][1], kv)


def slice_(ins, kv, qin, tensors):
    x = ins[0]
    stride = kv.get("stride", (1,) * x.ndim)
    return x[tuple(slice(b, None if e < 0 else e, st) for b, e, st in zip(kv["begin"], kv["end"], stride))]


def broadcast(ins, kv, qin, tensors):
    return np.broadcast_to(ins[0], kv["shape"])


def gathernd(ins, kv, qin, tensors):
    """TFLM's GATHER_ND on the flat params (from_pos = sum(index x stride)), a flat output."""
    shape = kv["shape"]
    p = (ins[1] if len(ins) > 1 else _t(tensors, kv["t"], np.float64 if kv["dtype"] == "f32" else np.int64)).reshape(-1)
    idx = ins[0].reshape(-1, ins[0].shape[-1]) if ins[0].ndim else ins[0].reshape(1, 1)
    nd = idx.shape[1]
    size = int(np.prod(shape[nd:]))
    strides = [int(np.prod(shape[j + 1:])) for j in range(nd)]
    out = []
    for row in idx:
        at = int(sum(int(v) * c for v, c in zip(row, strides)))
        if not 0 <= at <= p.size - size:
            raise IndexError("gather_nd: a slice starts at element %d, outside the params' %d" % (at, p.size))
        out.append(p[at:at + size])
    return np.concatenate(out)


def update(ins, kv, qin, tensors):
    """TFLM's DYNAMIC_UPDATE_SLICE: starts clamped to 0..dim - update's (a batch's left out)."""
    x, u = ins[0], ins[1]
    if "begin" in kv:
        begin = kv["begin"]
    else:
        s = [int(v) for v in ins[2].reshape(-1)][ins[2].size - x.ndim:]
        begin = [min(max(0, v), d - e) for v, d, e in zip(s, x.shape, u.shape)]
    y = x.copy()
    y[tuple(slice(b, b + e) for b, e in zip(begin, u.shape))] = u
    return y


def transpose(ins, kv, qin, tensors):
    return ins[0].transpose(kv["perm"])


def depth2space(ins, kv, qin, tensors):
    b = kv["block"]
    h, w, c = ins[0].shape
    return ins[0].reshape(h, w, b, b, c // (b * b)).transpose(0, 2, 1, 3, 4).reshape(h * b, w * b, c // (b * b))


def space2depth(ins, kv, qin, tensors):
    b = kv["block"]
    h, w, c = ins[0].shape
    return ins[0].reshape(h // b, b, w // b, b, c).transpose(0, 2, 1, 3, 4).reshape(h // b, w // b, b * b * c)


def tconv(ins, kv, qin, tensors):
    """Transpose convolution: input pixel (iy, ix) adds x x w[:, ky, kx, :] to output pixel
    (iy * stride + ky - pad_top, ix * stride + kx - pad_left) when inside size=oh,ow
    (int8: x less its zero point, then requantized; float: the fused activation)."""
    int8 = "q" in kv
    x = ins[0] - qin[0][1] if int8 else ins[0]
    h, wd, c = x.shape
    w = _t(tensors, kv["w"], np.int64 if int8 else np.float64)  # (OC, KH, KW, C)
    oc, kh, kw, _ = w.shape
    sh, sw = _pair(kv.get("stride", (1,)))
    pt, pl = _pair(kv.get("pad", (0,)))
    oh, ow = kv["size"]
    acc = np.zeros((oh, ow, oc), dtype=object if kv["dtype"] == "i16" else (np.int64 if int8 else np.float64))
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * sh + ky - pt, ix * sw + kx - pl
                    if 0 <= oy < oh and 0 <= ox < ow:
                        acc[oy, ox] += w[:, ky, kx, :] @ x[iy, ix]
    if "b" in kv:
        acc = acc + _t(tensors, kv["b"], np.int64 if int8 else np.float64)
    return _requant(acc, kv, tensors, qin) if int8 else _act(acc, kv)


def concat(ins, kv, qin, tensors):
    return np.concatenate(ins, axis=kv.get("axis", -1))


def pad(ins, kv, qin, tensors):
    x = ins[0]
    p = list(kv["pad"])
    if len(p) == 4 and x.ndim == 3:  # t, l, b, r of an H, W, C value
        p = [p[0], p[1], 0, p[2], p[3], 0]
    widths = [(p[d], p[x.ndim + d]) for d in range(x.ndim)]
    mode = kv.get("mode", "constant")
    if mode != "constant":
        return np.pad(x, widths, mode=mode)
    v = kv.get("value", kv.get("code", qin[0][1] if qin[0] is not None else 0))
    return np.pad(x, widths, constant_values=v)


def softmax(ins, kv, qin, tensors):
    x = ins[0]
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    if "q" not in kv:
        z = rows * kv.get("beta", 1.0)  # softmax(beta x): from the largest beta x (beta may be < 0)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
    if kv.get("x_dtype") == "i16":
        return _softmax_i16(rows, kv, tensors).reshape(x.shape)
    from .tflm import one_over_one_plus_x

    exps = _t(tensors, kv["t"], np.int64)
    out = np.zeros_like(rows)
    dt = kv.get("dtype", "i8")
    bits = 16 if dt == "i16" else 8  # the output's: exponent 31 - bits, offset its minimum
    lo, hi = RANGE[dt]
    for r, row in enumerate(rows):
        e = exps[row.max() - row]
        total = int(rdbpot_np(e, 12).sum())
        head = 32 - total.bit_length()
        scale = one_over_one_plus_x(((total << head) & 0xFFFFFFFF) - (1 << 31))
        out[r] = np.clip(rdbpot_np(srdhm_np(scale, e), 12 - head + 31 - bits) + lo, lo, hi)
    return out.reshape(x.shape)


def _softmax_i16(rows, kv, tensors):
    """TFLM's SoftmaxInt16: each row's differences from its largest, scaled (m) into the exp
    table, the sum's reciprocal through the 1 / (1 + x) table, both read with interpolation."""
    t = _t(tensors, kv["t"], np.int64)

    def lookup(table, v):
        i = 256 + (v >> 7)
        return table[i] + (((table[i + 1] - table[i]) * (v & 127) + 64) >> 7)

    out = np.zeros_like(rows)
    for r, row in enumerate(rows):
        e = lookup(t[:513], np.clip(mbqm_np(row - row.max(), *kv["m"]) + 32767, -32768, 32767))
        total = int(e.sum())
        head = 32 - total.bit_length()
        recip = int(lookup(t[513:], int(np.clip((((total << (head - 1)) + 8192) >> 14) - 98304, -32768, 32767))))
        out[r] = np.clip((e * recip + (1 << (30 - head))) >> (31 - head), 0, 32767)
    return out


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


# --- elementwise ops, cast, resize, layernorm, groupnorm -------------------------------------

def _second(ins, kv, tensors):
    """The second operand (a value, or the constant tensor t= / w=) as an array broadcast over
    the first: its shape, one value per channel, or one value (docs/FORMAT.md)."""
    x = ins[0]
    if len(ins) > 1:
        b = ins[1]
    else:
        b = np.asarray(tensors[kv["w" if "w" in kv else "t"]]).astype(x.dtype)
    if b.shape == x.shape:
        return b
    return np.broadcast_to(b.reshape(-1), x.shape) if b.size > 1 else np.full(x.shape, b.reshape(-1)[0], x.dtype)


def minimum(ins, kv, qin, tensors):
    """TFLM's MINIMUM: el1 < el2 ? el1 : el2 (integers: the stored codes)."""
    a, b = ins[0], _second(ins, kv, tensors)
    return np.where(a < b, a, b)


def maximum(ins, kv, qin, tensors):
    a, b = ins[0], _second(ins, kv, tensors)
    return np.where(a > b, a, b)


def div(ins, kv, qin, tensors):
    """Float: IEEE division, a fused activation. int8: TFLM's DIV (host_tools.tflm.div_np)."""
    from .tflm import div_np

    a, b = ins[0], _second(ins, kv, tensors)
    if "q" not in kv:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = a.astype(np.float32) / b.astype(np.float32)
        return _act(y.astype(np.float64), kv)
    if kv["dtype"] == "i32":  # C's quotient, truncated toward zero
        q = np.abs(a) // np.abs(b)
        return _clamp(_wrap32(np.where((a < 0) != (b < 0), -q, q)), kv)
    m, s = kv["m"]
    lo, hi = kv.get("clamp", RANGE["i8"])
    return div_np(a, b, qin[0][1], qin[1][1], kv["q"][1], m, s, lo, hi)


def prelu(ins, kv, qin, tensors):
    """Float: x if x >= 0 else x alpha. int8 (TFLM's PRELU): x >= z_x from the table t (the
    packer's clamp(z_y + mbqm(x - z_x, m1, s1))), else clamp(z_y + mbqm((x - z_x)(alpha - ZA),
    M, S)); int16 (m=M1,S1,M,S,ZA): the first half through mbqm(x - z_x, M1, S1) too."""
    x, alpha = ins[0], _second(ins, kv, tensors)
    if "q" not in kv:
        return np.where(x >= 0, x, (x.astype(np.float32) * alpha.astype(np.float32)).astype(np.float64))
    d = x - qin[0][1]
    if len(kv["m"]) == 5:  # int16, int8 alpha: both halves per element
        m1, s1, m, s, za = kv["m"]
        lo, hi = kv.get("clamp", RANGE["i16"])
        neg = np.clip(mbqm_np(d * (alpha - za), m, s) + kv["q"][1], lo, hi)
        return np.where(d >= 0, np.clip(mbqm_np(d, m1, s1) + kv["q"][1], lo, hi), neg)
    m, s, za = kv["m"]
    neg = np.clip(mbqm_np(d * (alpha - za), m, s) + kv["q"][1], *kv.get("clamp", RANGE["i8"]))
    return np.where(d >= 0, _t(tensors, kv["t"], np.int64)[x + 128], neg)


def cast(ins, kv, qin, tensors):
    """TFLM's CAST: integers wrap to the narrower type, become the nearest f32; f32 is
    truncated toward zero and saturated (NaN: 0)."""
    x, dt = ins[0], kv["dtype"]
    if dt == "f32":
        return x.astype(np.float32).astype(np.float64)
    lo, hi = RANGE[dt]
    if kv["x_dtype"] == "f32":
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x, nan=0.0)), lo, hi)).astype(np.int64)
    if dt == "bool":  # (the runtime keeps the low byte: a flag's 0 or 1)
        return x & 255
    bits = {"i8": 8, "i16": 16, "i32": 32}[dt]
    return (x + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def resize(ins, kv, qin, tensors):
    """From the packer's table (docs/FORMAT.md): nearest copies x[row[oy], col[ox]]; bilinear
    weighs the neighbours of (row, col) by d (int8: TFLM's ResizeBilinearInteger, d in 1/1024,
    the sum rounded half away from zero by 2**20; f32: d a float)."""
    x = ins[0]
    oh, ow = kv["size"]
    t = np.asarray(tensors[kv["t"]]).astype(np.int64).reshape(-1)
    if kv.get("interp", "nearest") == "nearest":
        return x[t[:oh]][:, t[oh:]]
    rows, cols = t[:3 * oh].reshape(oh, 3), t[3 * oh:].reshape(ow, 3)
    if kv["dtype"] == "f32":
        dy = rows[:, 2].astype(np.int32).view(np.float32).astype(np.float64)[:, None, None]
        dx = cols[:, 2].astype(np.int32).view(np.float32).astype(np.float64)[None, :, None]
    else:
        dy, dx = rows[:, 2][:, None, None], cols[:, 2][None, :, None]
    one = 1.0 if kv["dtype"] == "f32" else 1024
    r0, r1, c0, c1 = x[rows[:, 0]], x[rows[:, 1]], rows, cols
    v = (r0[:, cols[:, 0]] * (one - dy) * (one - dx) + r1[:, cols[:, 0]] * dy * (one - dx)
         + r0[:, cols[:, 1]] * (one - dy) * dx + r1[:, cols[:, 1]] * dy * dx)
    if kv["dtype"] == "f32":
        return v.astype(np.float32).astype(np.float64)
    v = np.where(v > 0, (v + (1 << 19)) // (1 << 20), -((-v + (1 << 19)) // (1 << 20)))
    return (v + 128) % 256 - 128


def layernorm(ins, kv, qin, tensors):
    """ONNX's LayerNormalization of each group (over=c: the last axis; w: the W axis of a 1,W,C
    value; all: everything): mean, variance (mean of squared differences), (x - mean) /
    sqrt(variance + eps) x gamma + beta; sums in element order, in double, each result an f32."""
    x = ins[0]
    over = kv.get("over", "c")
    g = x.reshape(-1, x.shape[-1]) if over == "c" else (x[0].T if over == "w" else x.reshape(1, -1))
    gam = _t(tensors, kv["w"]).reshape(-1)
    bet = _t(tensors, kv["b"]).reshape(-1) if "b" in kv else np.zeros(len(gam))
    eps = float(np.float32(kv.get("eps", 1e-5)))
    out = np.zeros(g.shape)
    for i, row in enumerate(g.tolist()):
        s = 0.0
        for v in row:
            s += v
        mean = s / len(row)
        s = 0.0
        for v in row:
            s += (v - mean) * (v - mean)
        inv = 1.0 / math.sqrt(s / len(row) + eps)
        out[i] = [(v - mean) * inv * float(gm) + float(bt) for v, gm, bt in zip(row, gam, bet)]
    out = out.astype(np.float32).astype(np.float64)
    return out.reshape(x.shape) if over != "w" else out.T.reshape(x.shape)


def groupnorm(ins, kv, qin, tensors):
    """torch's GroupNorm (InstanceNorm: a group per channel) over a value's channels (its last
    axis): each group of C / groups consecutive channels over all pixels: mean, variance (mean
    of squared differences), (x - mean) / sqrt(variance + eps) x gamma[c] + beta[c]; sums in
    stored order (pixel by pixel, the group's channels within a pixel), in double, each result
    an f32."""
    x = ins[0]
    c = x.shape[-1]
    cg = c // kv.get("groups", c)
    v = x.reshape(-1, c)
    gam = _t(tensors, kv["w"]).reshape(-1).tolist()
    bet = _t(tensors, kv["b"]).reshape(-1).tolist()
    eps = float(np.float32(kv.get("eps", 1e-5)))
    out = np.zeros(v.shape)
    for c0 in range(0, c, cg):
        rows = v[:, c0:c0 + cg].tolist()
        n = len(rows) * cg
        s = 0.0
        for r in rows:
            for e in r:
                s += e
        mean = s / n
        s = 0.0
        for r in rows:
            for e in r:
                s += (e - mean) * (e - mean)
        inv = 1.0 / math.sqrt(s / n + eps)
        out[:, c0:c0 + cg] = [[(e - mean) * inv * gam[c0 + j] + bet[c0 + j] for j, e in enumerate(r)]
                              for r in rows]
    return out.astype(np.float32).astype(np.float64).reshape(x.shape)


def _hardswish(v):
    return v * min(6.0, max(0.0, v + 3.0)) / 6.0


def _gelu(kv):
    if kv.get("approx") == "tanh":
        return lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    return lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))

def _wrap32(v):
    return (np.asarray(v, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)


def _sigmoid_q15(v, table):
    """TFLM's int16 Logistic (reference_integer_ops::Logistic): v is the Q3.12 input times 3;
    interpolation in the uint16 sigmoid table, 9 fraction bits; Q0.15 out."""
    a = np.abs(v)
    hi = a >> 9
    idx = np.minimum(hi, 254)
    lo_t, hi_t = table[idx], table[idx + 1]
    r = np.where(hi >= 255, 0x7FFF << 10, (lo_t << 9) + (a & 511) * (hi_t - lo_t))
    return np.where(v >= 0, r + 512, (1 << 25) - r + 511) >> 10


def _tanh_q15(v, table):
    """TFLM's int16 Tanh (reference_integer_ops::Tanh) of the scaled input v: tanh(x) =
    2 sigmoid(2x) - 1 from the same table, 8 fraction bits; Q0.15 out."""
    a = np.abs(v)
    hi = a >> 8
    idx = np.minimum(hi, 254)
    lo_t, hi_t = table[idx], table[idx + 1]
    r = np.where(hi >= 255, 0xFFFF << 8, (lo_t << 8) + (a & 255) * (hi_t - lo_t))
    return np.where(v >= 0, r - (1 << 23) + 128, (1 << 23) + 127 - r) >> 8


def _int16_or(floats, q15):
    """An activation: `floats` on float values; on int16 ones TFLM's LOGISTIC / TANH: x scaled
    by m=multiplier,shift (multiplier 0: 3 x 2**shift) then `q15` through the sigmoid table."""
    def op(ins, kv, qin, tensors):
        if "q" not in kv:
            return floats(ins, kv, qin, tensors)
        m, s = kv["m"]
        if m == 0:
            m, s = 3 << s, 0
        v = (ins[0] * m + ((1 << (s - 1)) if s > 0 else 0)) >> s
        return q15(v, _t(tensors, kv["t"], np.int64) & 0xFFFF)
    return op


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm(ins, kv, qin, tensors, state):
    """One LSTM layer over the rows of x (gates i, f, c, o). Float: g = act(W x_t + b + R h),
    c = f c + i g (clipped), h = o tanh(c). int8: TFLM's integer LSTM (lstm_eval.h): the two
    products requantized to int16 Q3.12 apart and added with saturation, the gates through
    TFLM's int16 sigmoid/tanh (Q0.15), c and h by its int16 multiplications. int16 (16x8): the
    same with int64 sums requantized by TFLM's int64 MultiplyByQuantizedMultiplier, no
    recurrent bias, h int16."""
    x = ins[0]
    hid = kv["out"]
    key = kv["y"]
    int8 = "q" in kv
    w = _t(tensors, kv["w"], np.int64 if int8 else np.float64)
    r = _t(tensors, kv["r"], np.int64 if int8 else np.float64)
    b = _t(tensors, kv["b"], np.int64 if int8 else np.float64)
    clip = kv.get("clip", 0.0)
    zh = kv["q"][1] if int8 else 0
    h, c = (np.full(hid, zh, np.int64 if int8 else np.float64), np.zeros(hid, np.int64 if int8 else np.float64))
    if kv.get("state") == "keep" and key in state:
        h, c = state[key]
    ys = []
    if not int8:
        for xt in x:
            z = w @ xt + b + r @ h
            i, f, g, o = _sig(z[:hid]), _sig(z[hid:2 * hid]), np.tanh(z[2 * hid:3 * hid]), _sig(z[3 * hid:])
            c = f * c + i * g
            if clip > 0:
                c = np.clip(c, -clip, clip)
            h = o * np.tanh(c)
            ys.append(h)
    else:
        m = _t(tensors, kv["m"], np.int64)
        table = _t(tensors, kv["t"], np.int64) & 0xFFFF
        mx, sx, mh, sh = (m[k * 4 * hid:(k + 1) * 4 * hid] for k in range(4))  # per row
        e = m[16 * hid:]  # f c's and i g's multipliers, their shifts, o tanh(c)'s multiplier and shift
        p = kv["cell"]
        # TFLM's Tanh(cell_state_scale_power): the input times 3 << (12 + p), or times 3 and
        # shifted right (rounding) by -(12 + p)
        lsh = 12 + p
        qclip = min(int(clip * 2.0 ** -p), 32767) if clip > 0 else None
        wide = kv["dtype"] == "i16"
        for xt in x:
            if wide:
                gx = np.clip(mbqm64_np(b + w @ xt, mx, sx), -32768, 32767)
                gh = np.clip(mbqm64_np(r @ h, mh, sh), -32768, 32767)
            else:
                gx = np.clip(mbqm_np(_wrap32(b[:4 * hid] + w @ xt), mx, sx), -32768, 32767)
                gh = np.clip(mbqm_np(_wrap32(b[4 * hid:] + r @ h), mh, sh), -32768, 32767)
            z = np.clip(gx + gh, -32768, 32767)
            i, f, o = (_sigmoid_q15(3 * z[k * hid:(k + 1) * hid], table) for k in (0, 1, 3))
            g = _tanh_q15(3 * z[2 * hid:3 * hid], table)
            c = np.clip(np.clip(mbqm_np(f * c, e[0], e[2]), -32768, 32767)
                        + np.clip(mbqm_np(i * g, e[1], e[3]), -32768, 32767), -32768, 32767)
            if qclip is not None:
                c = np.clip(c, -qclip, qclip)
            tc = _tanh_q15(c * (3 << lsh) if lsh >= 0 else (3 * c + (1 << (-lsh - 1))) >> -lsh, table)
            h = np.clip(zh + mbqm_np(tc * o, e[4], e[5]), *((-32768, 32767) if wide else (-128, 127)))
            ys.append(h)
    if kv.get("state") == "keep":
        state[key] = (h, c)
    return np.array(ys)


def gru(ins, kv, qin, tensors, state):
    """One GRU layer over the rows of x (gates z, r, n; linear_before_reset=1). Float:
    z, r = sigmoid(W x + bx + R h + bh), n = tanh(Wn x + bxn + r (Rn h + bhn)), h = n + z (h - n).
    int8 (mpy_lazy/ops/gru.py): each product requantized to int16 Q3.12 apart, the gates through
    TFLM's int16 sigmoid/tanh (Q0.15), h int16 Q0.15, y h requantized to int8."""
    x = ins[0]
    hid = kv["out"]
    h3 = 3 * hid
    key = kv["y"]
    int8 = "q" in kv
    dt = np.int64 if int8 else np.float64
    w, r, b = (_t(tensors, kv[k], dt) for k in ("w", "r", "b"))
    h = np.zeros(hid, dt)
    if kv.get("state") == "keep" and key in state:
        h = state[key]
    ys = []
    if not int8:
        for xt in x:
            gx, gh = w @ xt + b[:h3], r @ h + b[h3:]
            z, rg = _sig(gx[:hid] + gh[:hid]), _sig(gx[hid:2 * hid] + gh[hid:2 * hid])
            n = np.tanh(gx[2 * hid:] + rg * gh[2 * hid:])
            h = n + z * (h - n)
            ys.append(h)
    else:
        m = _t(tensors, kv["m"], np.int64)
        table = _t(tensors, kv["t"], np.int64) & 0xFFFF
        mx, sx, mh, sh = (m[k * h3:(k + 1) * h3] for k in range(4))  # per row
        zy = kv["q"][1]
        for xt in x:
            gx = np.clip(mbqm_np(_wrap32(b[:h3] + w @ xt), mx, sx), -32768, 32767)
            gh = np.clip(mbqm_np(_wrap32(b[h3:] + r @ h), mh, sh), -32768, 32767)
            zr = _sigmoid_q15(3 * np.clip(gx[:2 * hid] + gh[:2 * hid], -32768, 32767), table)
            z, rg = zr[:hid], zr[hid:]
            n = _tanh_q15(3 * np.clip(gx[2 * hid:] + rdbpot_np(rg * gh[2 * hid:], 15), -32768, 32767), table)
            h = np.clip(n + rdbpot_np(z * (h - n), 15), -32768, 32767)
            ys.append(np.clip(zy + mbqm_np(h, m[4 * h3], m[4 * h3 + 1]), -128, 127))
    if kv.get("state") == "keep":
        state[key] = h
    return np.array(ys)


def svdf(ins, kv, qin, tensors, state):
    """TFLM's integer SVDF: the state (F filters x memory steps, initially its zero point) moves
    one step; each filter's newest entry is its feature product requantized, saturated to the
    state's dtype, plus the state's zero point (wrapping around that dtype as TFLM's cast); each
    unit sums its rank filters' time products (int32, wrapping) and its bias, requantized.
    Float (no q=): the newest entry w_f . x, each unit act(b + its filters' t_f . state_f), in
    float32 as TFLM's."""
    if "q" not in kv:
        return _fsvdf(ins[0].reshape(-1), kv, tensors, state)
    x = ins[0].reshape(-1) - qin[0][1]
    w = _t(tensors, kv["w"], np.int64)
    tw = _t(tensors, kv["t"], np.int64)
    b = _t(tensors, kv["b"], np.int64)
    filters, mem = tw.shape
    zs = kv["sq"][1]
    lo, hi = RANGE[kv.get("sdtype", "i16")]
    s = state.get(kv["y"])
    if s is None:
        s = np.full(filters * mem, zs, np.int64)
    s = np.concatenate([s[1:], s[:1]])  # (the last slot of each filter is rewritten below)
    m1, s1, m2, s2 = kv["m"]
    new = np.clip(mbqm_np(_wrap32(w @ x), m1, s1), lo, hi) + zs
    s = s.reshape(filters, mem)
    s[:, -1] = (new - lo) % (hi - lo + 1) + lo
    acc = (tw * (s - zs)).sum(axis=1)
    units = kv["out"]
    acc = _wrap32(acc.reshape(units, -1).sum(axis=1) + b)
    state[kv["y"]] = s.reshape(-1)
    return np.clip(mbqm_np(acc, m2, s2) + kv["q"][1], -128, 127)


def _fsvdf(x, kv, tensors, state):
    f32 = np.float32
    w, tw = _t(tensors, kv["w"], f32), _t(tensors, kv["t"], f32)
    filters, mem = tw.shape
    s = state.get(kv["y"])
    if s is None:
        s = np.zeros(filters * mem, f32)
    s = np.concatenate([s[1:], s[:1]]).reshape(filters, mem)
    s[:, -1] = w @ x.astype(f32)
    acc = (tw * s).sum(axis=1, dtype=f32).reshape(kv["out"], -1).sum(axis=1, dtype=f32)
    acc = acc + _t(tensors, kv["b"], f32)
    state[kv["y"]] = s.reshape(-1)
    return _act(acc.astype(np.float64), kv)


def _var_line(lines, name):
    for _, op, kv in lines:
        if op == "var" and kv["y"] == name:
            return kv


def _branch(kv, vals, counts):
    return None if vals[kv["x"]].reshape(-1)[0] else 1 + kv["skip"]


def _loop(kv, vals, counts):
    counts[kv["y"]] = 0
    vals[kv["y"]] = kv["y"]


def _next(kv, vals, counts):
    counts[kv["x"]] += 1
    if counts[kv["x"]] > kv["max"]:
        raise RuntimeError("next: more than %d iterations (a WHILE that does not end?)" % kv["max"])
    return -kv["back"]


_CONTROL = {"branch": _branch, "jump": lambda kv, vals, counts: 1 + kv["skip"], "loop": _loop, "next": _next}


class _Var(str):
    """A variable's value in `vals`: the name of its state entry."""


def _initial(kv, tensors):
    """A var's first value: its tensor t, else every byte the zero point's low byte (TFLM's
    memset of a new resource buffer)."""
    dt = {"f32": np.float32, "i8": np.int8, "i16": np.int16, "i32": np.int32}[kv.get("dtype", "f32")]
    n = int(np.prod(kv["shape"]))
    if "t" in kv:
        v = np.asarray(tensors[kv["t"]], dt).reshape(-1)
    else:
        v = np.full(n * np.dtype(dt).itemsize, kv["q"][1] & 255 if "q" in kv else 0, np.uint8).view(dt)
    return v.reshape(kv["shape"]).astype(np.float64 if dt is np.float32 else np.int64)


def read(ins, kv, qin, tensors, state):
    return state[ins[0]].copy()


def assign(ins, kv, qin, tensors, state):
    state[ins[0]] = np.asarray(ins[1]).reshape(state[ins[0]].shape).copy()
    return _Var(ins[0])


# --- the signal library (TFLM's signal/src: micro_speech's audio front end) -------------------
# uint32 values are held as int32 bits by the graph (the board's): read with _u32, written with
# _wrap32. The FFT is kiss_fft's 16-bit fixed point, restated here stage by stage.

def _u32(v):
    return np.asarray(v, np.int64) & 0xFFFFFFFF


def _msb(v):
    """MostSignificantBit32/64 of GCC's build: the bit length (32 for 0)."""
    v = [int(x) for x in np.asarray(v).reshape(-1)]
    return np.array([x.bit_length() if x else 32 for x in v], np.int64)


def _i16(v):
    return (np.asarray(v, np.int64) + 32768) % 65536 - 32768


def window(ins, kv, qin, tensors):
    w = np.asarray(tensors[kv["w"]], np.int64)
    x = ins[0].reshape(-1, w.size)
    return np.clip((x * w) >> kv["opts"][0], -32768, 32767).reshape(-1)


def fftbits(ins, kv, qin, tensors):
    top = 0
    for v in ins[0].reshape(-1).tolist():  # MaxAbs16: an int16 (|-32768| wraps to -32768)
        if v > top:
            top = v
        elif -v > top:
            top = int(_i16(-v))
    return np.array([max(16 - int(_msb(top & 0xFFFFFFFF)[0]) - 1, 0)], np.int64)


def fftscale(ins, kv, qin, tensors):
    return _i16(ins[0] << (int(ins[1][0]) & 31))


def _twiddle_mul(a, t):
    """kiss_fft's C_MUL in Q15, each part rounded and stored as an int16."""
    re = _i16((a[..., 0] * t[..., 0] - a[..., 1] * t[..., 1] + 16384) >> 15)
    im = _i16((a[..., 0] * t[..., 1] + a[..., 1] * t[..., 0] + 16384) >> 15)
    return np.stack([re, im], axis=-1)


def _fixdiv(a, k):
    return _i16((a * (32767 // k) + 16384) >> 15)


def _kiss(f, tw, stride, inv=False):
    """kiss_fft (FIXED_POINT 16) of the complex int16 rows f [n, 2]: radix 4 while n is a multiple
    of 4, then radix 2; twiddles tw [N, 2] of the full size, taken every `stride`; inv: the
    inverse FFT's radix-4 turn (tw then the inverse twiddles)."""
    n = len(f)
    p = 4 if n % 4 == 0 else 2
    m = n // p
    parts = [f[j::p] if m > 1 else f[j:j + 1] for j in range(p)]
    if m > 1:
        parts = [_kiss(q, tw, stride * p, inv) for q in parts]
    fo = [_fixdiv(q, p) for q in parts]
    j = np.arange(m)
    if p == 2:
        t = _twiddle_mul(fo[1], tw[j * stride])
        return np.concatenate([_i16(fo[0] + t), _i16(fo[0] - t)])
    s0, s1, s2 = (_twiddle_mul(fo[q], tw[q * j * stride]) for q in (1, 2, 3))
    s5, f0 = _i16(fo[0] - s1), _i16(fo[0] + s1)
    s3, s4 = _i16(s0 + s2), _i16(s0 - s2)
    y1 = np.stack([_i16(s5[:, 0] + s4[:, 1]), _i16(s5[:, 1] - s4[:, 0])], axis=-1)
    y3 = np.stack([_i16(s5[:, 0] - s4[:, 1]), _i16(s5[:, 1] + s4[:, 0])], axis=-1)
    if inv:
        y1, y3 = y3, y1
    return np.concatenate([_i16(f0 + s3), y1, _i16(f0 - s3), y3])


def _fft(ins, kv, tensors, inverse):
    """rfft and irfft of int32 and float32 values: the runtime's kiss_fft (mpy_lazy/ops/signal.py:
    FIXED_POINT 32 and float, written once) over lists, frame by frame (float sums unrounded)."""
    from mpy_lazy.ops import signal as room

    nfft = kv["opts"][0]
    n = nfft // 2
    g = kv["x_dtype"] == "i32"
    t = [int(v) if g else float(v) for v in np.asarray(tensors[kv["t"]]).reshape(-1)]
    x = ins[0]
    out = []
    for fr in x.reshape(-1, nfft + 2 if inverse else x.shape[-1]):
        fr = [int(v) if g else float(v) for v in fr]
        w, y = [0] * nfft, [0] * (nfft if inverse else nfft + 2)
        if inverse:
            room._fftri(fr, 0, w, 0, y, 0, t, 0, nfft, g)
        else:
            room._work_g(w, 0, fr + [0] * (nfft - len(fr)), 0, 1, n, t, 0, 0, g)
            room._fftr_post(w, 0, y, 0, t, 2 * n, n, g)
        out += y
    return np.array(out, np.int64 if g else np.float64)


def rfft(ins, kv, qin, tensors):
    """kiss_fftr of each zero-padded frame: nfft/2 + 1 complex int16, as re, im pairs."""
    if kv["x_dtype"] != "i16":
        return _fft(ins, kv, tensors, False)
    nfft = kv["opts"][0]
    n = nfft // 2
    t = np.asarray(tensors[kv["t"]], np.int64).reshape(-1, 2)
    tw, sup = t[:n], t[n:]
    x = ins[0]
    frames = x.reshape(-1, x.shape[-1])
    out = []
    for fr in frames:
        z = np.zeros(nfft, np.int64)
        z[:fr.size] = fr
        c = _kiss(z.reshape(n, 2), tw, 1)
        y = np.zeros((n + 1, 2), np.int64)
        tdc = _fixdiv(c[0], 2)
        y[0, 0], y[n, 0] = _i16(tdc[0] + tdc[1]), _i16(tdc[0] - tdc[1])
        for k in range(1, n // 2 + 1):
            fpk = _fixdiv(c[k], 2)
            fpnk = _fixdiv(np.array([c[n - k, 0], _i16(-c[n - k, 1])]), 2)
            f1k, f2k = _i16(fpk + fpnk), _i16(fpk - fpnk)
            tw_ = _twiddle_mul(f2k, sup[k - 1])
            y[k] = [_i16((f1k[0] + tw_[0]) >> 1), _i16((f1k[1] + tw_[1]) >> 1)]
            y[n - k] = [_i16((f1k[0] - tw_[0]) >> 1), _i16((tw_[1] - f1k[1]) >> 1)]
        out.append(y.reshape(-1))
    return np.concatenate(out)


def irfft(ins, kv, qin, tensors):
    """kiss_fftri (FIXED_POINT 16) of each frame of nfft/2 + 1 complex int16: nfft int16."""
    if kv["x_dtype"] != "i16":
        return _fft(ins, kv, tensors, True)
    nfft = kv["opts"][0]
    n = nfft // 2
    t = np.asarray(tensors[kv["t"]], np.int64).reshape(-1, 2)
    tw, sup = t[:n], t[n:]
    out = []
    for fr in ins[0].reshape(-1, n + 1, 2).astype(np.int64):
        z = np.zeros((n, 2), np.int64)
        z[0] = _fixdiv(np.array([_i16(fr[0, 0] + fr[n, 0]), _i16(fr[0, 0] - fr[n, 0])]), 2)
        for k in range(1, n // 2 + 1):
            fk = _fixdiv(fr[k], 2)
            fnkc = _fixdiv(np.array([fr[n - k, 0], _i16(-fr[n - k, 1])]), 2)
            fek, tmp = _i16(fk + fnkc), _i16(fk - fnkc)
            fok = _twiddle_mul(tmp, sup[k - 1])
            z[k] = _i16(fek + fok)
            z[n - k] = [_i16(fek[0] - fok[0]), _i16(-_i16(fek[1] - fok[1]))]
        out.append(_kiss(z, tw, 1, inv=True).reshape(-1))
    return np.concatenate(out)


def energy(ins, kv, qin, tensors):
    start, end = kv["opts"]
    c = ins[0].reshape(-1, 2)
    e = (c[:, 0] * c[:, 0] + c[:, 1] * c[:, 1]) & 0xFFFFFFFF
    e[:start] = 0
    e[end:] = 0
    return _wrap32(e)


def filterbank(ins, kv, qin, tensors):
    """Each channel's weighted sum of the energies (uint64, as lo, hi uint32 words); a channel
    adds the unweighted energies of the one before it (TFLM's FilterbankAccumulateChannels)."""
    ch, nw = kv["opts"]
    t = np.asarray(tensors[kv["w"]], np.int64)
    w, u = t[:nw], t[nw:2 * nw]
    fs, ws, wd = (t[2 * nw + i * (ch + 1):2 * nw + (i + 1) * (ch + 1)] for i in range(3))
    x = _u32(ins[0])
    sums, carry = [], 0
    for i in range(ch + 1):
        sl = slice(int(ws[i]), int(ws[i] + wd[i]))
        e = x[int(fs[i]):int(fs[i] + wd[i])]
        acc = (carry + int((w[sl] * e).sum())) % (1 << 64)
        carry = int((u[sl] * e).sum())
        sums.append(acc)
    return _wrap32(np.array([[v & 0xFFFFFFFF, v >> 32] for v in sums[1:]], np.int64).reshape(-1))


def _isqrt_tflm(n, bits):
    """Sqrt32/Sqrt64: the bitwise root with its last-bit rounding (unless all ones)."""
    res = 0
    top = (bits - n.bit_length()) | 1
    bit = 1 << (bits - 1 - top)
    for _ in range((bits - 1 - top) // 2 + 1):
        if n >= res + bit:
            n -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if n > res and res != (1 << (bits // 2)) - 1:
        res += 1
    return res


def fbsqrt(ins, kv, qin, tensors):
    pairs = _u32(ins[0]).reshape(-1, 2)
    s = int(ins[1][0]) & 31
    out = []
    for lo, hi in pairs.tolist():
        v = lo | hi << 32
        r = 0 if v == 0 else _isqrt_tflm(v, 32 if v >> 32 == 0 else 64)
        out.append(r >> s)
    return _wrap32(np.array(out, np.int64))


def specsub(ins, kv, qin, tensors, state):
    """Spectral subtraction; the noise estimate (state) carries to the next run: [out, noise]."""
    sm, om, asm, aom, floor_m, sb, ssb, clamp = kv["opts"]
    x = _u32(ins[0]).astype(object)  # (Python integers: uint64 products)
    noise = state.get(kv["y"], np.zeros(x.size, np.int64).astype(object))
    odd = np.arange(x.size) % 2 == 1
    s_, o_ = np.where(odd, asm, sm).astype(object), np.where(odd, aom, om).astype(object)
    up = (x << sb) & 0xFFFFFFFF
    noise = ((up * s_ + noise * o_) >> ssb) & 0xFFFFFFFF
    est = np.minimum(noise, up)
    if clamp:
        noise = est
    state[kv["y"]] = noise
    y = np.maximum((up - est) >> sb, ((x * floor_m) >> ssb) & 0xFFFFFFFF)
    return _wrap32(np.concatenate([y, noise]).astype(np.int64))


def pcan(ins, kv, qin, tensors):
    lut = np.asarray(tensors[kv["t"]], np.int64)
    x, noise = _u32(ins[0]), _u32(ins[1])
    out = []
    for v, e in zip(x.tolist(), noise.tolist()):
        if e <= 2:
            gain = int(lut[e])
        else:  # WideDynamicFunction
            i = e.bit_length()
            b = 4 * i - 6
            frac = ((e << (11 - i)) if i < 11 else (e >> (i - 11))) & 0x3FF
            r = (int(lut[b + 2]) * frac) >> 5
            r = int(_wrap32(r + ((int(lut[b + 1]) & 0xFFFFFFFF) << 5)))
            r = int(_wrap32(r * frac))
            gain = int(_i16(((r + (1 << 14)) >> 15) + int(lut[b])))
        snr = ((v * (gain & 0xFFFFFFFF)) >> kv["opts"][0]) & 0xFFFFFFFF
        out.append(((snr * snr) & 0xFFFFFFFF) >> 20 if snr < 2 << 12 else ((snr >> 6) - 64) & 0xFFFFFFFF)
    return _wrap32(np.array(out, np.int64))


_LOG_LUT = None


def fblog(ins, kv, qin, tensors):
    """Log32 of each (x << correction bits) > 1, at most 32767 (signal/src/log.cc)."""
    global _LOG_LUT
    if _LOG_LUT is None:
        from mpy_lazy.ops.signal import _LOG_LUT as lut  # (TFLM's table of 130 constants)
        _LOG_LUT = lut
    bits, scale = kv["opts"]
    out = []
    for v in ((_u32(ins[0]) << bits) & 0xFFFFFFFF).tolist():
        if v <= 1:
            out.append(0)
            continue
        i = v.bit_length() - 1
        frac = (v - (1 << i)) << (16 - i) if i < 16 else (v - (1 << i)) >> (i - 16)
        seg = frac >> 9
        c0, c1 = _LOG_LUT[seg], _LOG_LUT[seg + 1]
        log2 = ((i << 16) + frac + c0 + (((c1 - c0) * (frac - 512 * seg)) >> 16)) & 0xFFFFFFFF
        loge = ((45426 * log2 + 32768) >> 16) & 0xFFFFFFFF
        out.append(min((((scale * loge) & 0xFFFFFFFF) + 32768 & 0xFFFFFFFF) >> 16, 32767))
    return np.array(out, np.int64)


# --- float functions of one operand: computed in float64 on the float32 input, rounded once

def _f32(fn):
    def op(ins, kv, qin, tensors):
        with np.errstate(all="ignore"):
            return fn(ins[0].astype(np.float32).astype(np.float64)).astype(np.float32).astype(np.float64)
    return op


def _rsqrt(ins, kv, qin, tensors):
    """1.f / sqrtf(x): the square root rounded to float32 first."""
    with np.errstate(all="ignore"):
        s = np.sqrt(ins[0].astype(np.float64)).astype(np.float32)
        return (np.float32(1) / s).astype(np.float64)


def _round(ins, kv, qin, tensors):
    """TFLM's RoundToNearest: halves to the even neighbour."""
    x = ins[0].astype(np.float32).astype(np.float64)
    f = np.floor(x)
    with np.errstate(invalid="ignore"):
        d = x - f
        up = (d > 0.5) | ((d == 0.5) & (np.fmod(f, 2) != 0))
    return np.where(up, f + 1, f)


# --- constants, comparisons, logical ops, select (bool values: 0 or 1) -----------------------

def _const(kv, tensors):
    shape, dt = kv["shape"], kv.get("dtype", "f32")
    if "t" in kv:
        t = np.asarray(tensors[kv["t"]])
        if dt == "i64":  # (stored as its i32 words, the low first)
            t = np.ascontiguousarray(t.astype("<i4")).view("<i8")
        return t.reshape(shape).astype(np.float64 if dt == "f32" else np.int64)
    if dt == "f32":
        return np.full(shape, float(np.float32(kv["value"])))
    return np.full(shape, kv["code"], np.int64)


_COMPARE = {"equal": np.equal, "notequal": np.not_equal, "less": np.less, "lessequal": np.less_equal,
            "greater": np.greater, "greaterequal": np.greater_equal}


def _compare(ins, kv, qin, tensors):
    """Numbers compared (f32, i32, bool); i8 codes as TFLM rescales them: MBQMSmallerThanOneExp(
    (q - z) << 8, the multiplier of the input's scale), TFLM's formula here (the kernel reads
    the packer's table of it)."""
    a, b = ins
    if kv["x_dtype"] == "i8":
        from .tflm import quantize_multiplier

        def rescale(v, q):
            m, s = quantize_multiplier(float(np.float32(q[0])))
            return rdbpot_np(srdhm_np((v - q[1]) * 256, m), -s)
        a, b = rescale(a, qin[0]), rescale(b, qin[1])
    return _COMPARE[kv["op"]](a, b).astype(np.int64)


def _logical(ins, kv, qin, tensors):
    a = ins[0] != 0
    if kv["op"] == "not":
        return (~a).astype(np.int64)
    b = ins[1] != 0
    return ((a & b) if kv["op"] == "and" else (a | b)).astype(np.int64)


def _select(ins, kv, qin, tensors):
    c, a, b = ins
    return np.where(c != 0, a, b)


# --- squared difference, floor division and modulo, add_n ----------------------------------

def _sqdiff(ins, kv, qin, tensors):
    """float32: (a - b) rounded, squared; i32: wrapped; i8, i16: TFLM's SquaredDifference (each
    operand (x - z) << LS rescaled by MBQMSmallerThanOneExp, the difference squared, MBQM)."""
    a, b = ins
    if kv["x_dtype"] == "f32":
        with np.errstate(over="ignore"):
            d = a.astype(np.float32) - b.astype(np.float32)
            return (d * d).astype(np.float64)
    if kv["x_dtype"] == "i32":
        d = (a - b + 2 ** 31) % 2 ** 32 - 2 ** 31
        return (d * d + 2 ** 31) % 2 ** 32 - 2 ** 31
    ls = 7 if kv["x_dtype"] == "i8" else 0
    m1, s1, m2, s2, m, s = kv["m"]
    d = rdbpot_np(srdhm_np((a - qin[0][1]) << ls, m1), -s1) - rdbpot_np(srdhm_np((b - qin[1][1]) << ls, m2), -s2)
    return np.clip(mbqm_np(d * d, m, s) + kv["q"][1], *kv.get("clamp", RANGE[kv["x_dtype"]]))


def _floordiv(ins, kv, qin, tensors):
    """TFLM's FloorDiv<float>: floor of the doubles' quotient, to float32."""
    with np.errstate(all="ignore"):
        return np.floor(ins[0] / ins[1]).astype(np.float32).astype(np.float64)


def _floormod(ins, kv, qin, tensors):
    """TFLM's FloorMod<float>: fmod, plus b where the sign differs from b's (a float32 sum)."""
    a, b = ins[0].astype(np.float32), ins[1].astype(np.float32)
    with np.errstate(all="ignore"):
        t = np.fmod(a, b)
        return np.where((t != 0) & ((b < 0) != (t < 0)), t + b, t).astype(np.float64)


def _addn(ins, kv, qin, tensors):
    """float32: the inputs summed in order; int8: TFLM's AddN ((-z + sum (x - z)) << 19,
    MBQMSmallerThanOneExp, clamped)."""
    if kv["x_dtype"] == "f32":
        acc = ins[0].astype(np.float32)
        with np.errstate(over="ignore"):
            for x in ins[1:]:
                acc = acc + x.astype(np.float32)
        return acc.astype(np.float64)
    z = qin[0][1]
    acc = -z + sum(x - z for x in ins)
    acc = (acc * (1 << 19) + 2 ** 31) % 2 ** 32 - 2 ** 31
    m, s = kv["m"]
    return np.clip(rdbpot_np(srdhm_np(acc, m), -s) + kv["q"][1], *kv.get("clamp", RANGE["i8"]))


def stacker(ins, kv, qin, tensors, state):
    """Frames stacked left + right + 1 at a time, advanced by step: the stack then its valid flag
    (TFLM's circular buffer: the first frame counts left + 1 times; the frames held are state).
    Not valid: the stack is the last one given (TFLM leaves its output as it was)."""
    left, right, step = kv["opts"]
    x = ins[0].reshape(1, -1)
    held, out = state.get(kv["y"], (None, np.zeros((left + right + 1) * x.size + 1, np.int64)))
    held = np.repeat(x, left + 1, axis=0) if held is None else np.concatenate([held, x])
    out = out.copy()
    out[-1] = len(held) == left + right + 1
    if out[-1]:
        out[:-1] = held.reshape(-1)
        held = held[step:]
    state[kv["y"]] = (held, out)
    return out


def framer(ins, kv, qin, tensors, state):
    """Each row (the last axis) cut into frames of size samples advancing by step, then the valid
    flag (TFLM's circular buffer per row: the samples not yet framed are state; prefill: size -
    step zeros first). A frame not yet full is the last one given (TFLM leaves it)."""
    size, step, prefill = kv["opts"]
    rows = ins[0].reshape(-1, ins[0].shape[-1])
    n = rows.shape[1] // step
    held, out = state.get(kv["y"], ([np.zeros(size - step if prefill else 0, np.int64)] * len(rows),
                                    np.zeros(len(rows) * n * size + 1, np.int64)))
    out, held, valid = out.copy(), list(held), 1
    for i, row in enumerate(rows):
        for f in range(n):
            held[i] = np.concatenate([held[i], row[f * step:(f + 1) * step]])
            if len(held[i]) < size:
                valid = 0
            else:
                at = (i * n + f) * size
                out[at:at + size] = held[i][:size]
                held[i] = held[i][step:]
    out[-1] = valid
    state[kv["y"]] = (held, out)
    return out


def overlap(ins, kv, qin, tensors, state):
    """Each row of frames (the last two axes) added up overlapping by step (int16: saturated;
    float32: float32 sums); the sums not yet given out are state."""
    x = ins[0]
    step, n, size = kv["opts"]
    f32 = kv["x_dtype"] == "f32"
    frames = x.reshape(-1, n, size).astype(np.float32 if f32 else np.int64)
    acc = state.get(kv["y"], np.zeros((len(frames), size), frames.dtype)).copy()
    out = np.zeros((len(frames), n * step), frames.dtype)
    for f in range(n):
        acc = acc + frames[:, f]
        if not f32:
            acc = np.clip(acc, -32768, 32767)
        out[:, f * step:(f + 1) * step] = acc[:, :step]
        acc = np.concatenate([acc[:, step:], np.zeros((len(frames), step), acc.dtype)], axis=1)
    state[kv["y"]] = acc
    return out.reshape(-1).astype(np.float64 if f32 else np.int64)


_STATEFUL = ("lstm", "gru", "svdf", "read", "assign", "specsub", "delay", "stacker", "framer", "overlap")
def delay(ins, kv, qin, tensors, state):
    """Each row (the last axis) delayed by D samples, its last D kept (state) for the next run."""
    x = ins[0]
    rows = x.reshape(-1, x.shape[-1])
    d = kv["opts"][0]
    both = np.concatenate([state.get(kv["y"], np.zeros((rows.shape[0], d), np.int64)), rows], axis=1)
    state[kv["y"]] = both[:, rows.shape[1]:]
    return both[:, :rows.shape[1]].reshape(x.shape)



_OPS = {
    "conv2d": conv2d, "depthwise": depthwise, "linear": linear, "add": add, "mul": mul,
    "sub": sub, "slice": slice_, "transpose": transpose, "depth2space": depth2space,
    "space2depth": space2depth, "tconv": tconv, "leakyrelu": leakyrelu,
    "maxpool": maxpool, "avgpool": avgpool, "mean": mean, "lut": lut, "reshape": reshape,
    "concat": concat, "pad": pad, "softmax": softmax, "quantize": quantize, "dequantize": dequantize,
    "lstm": lstm, "gru": gru, "svdf": svdf, "read": read, "assign": assign,
    "relu": _rescaled(_elementwise(lambda kv: lambda v: max(v, 0.0))),
    "relu6": _rescaled(_elementwise(lambda kv: lambda v: min(max(v, 0.0), 6.0))),
    "clip": _elementwise(lambda kv: lambda v: min(max(v, kv["lo"]), kv["hi"])),
    "sigmoid": _int16_or(_elementwise(lambda kv: _sigmoid), lambda v, t: _sigmoid_q15(v, t)),
    "tanh": _int16_or(_elementwise(lambda kv: math.tanh), lambda v, t: _tanh_q15(v, t)),
    "hardswish": _elementwise(lambda kv: _hardswish),
    "hardsigmoid": _elementwise(lambda kv: lambda v: min(1.0, max(0.0, kv.get("alpha", 0.2) * v + kv.get("beta", 0.5)))),
    "gelu": _elementwise(_gelu),
    "minimum": minimum, "maximum": maximum, "div": div, "prelu": prelu, "cast": cast, "resize": resize,
    "layernorm": layernorm,
    "groupnorm": groupnorm,
    "abs": abs_,
    "broadcast": broadcast,
    "gathernd": gathernd, "update": update,
    "reduce": reduce,
    "cumsum": cumsum,
    "batchmatmul": batchmatmul,
    "logsoftmax": logsoftmax, "l2norm": l2norm, "l2pool": l2pool,
    "window": window, "fftbits": fftbits, "fftscale": fftscale, "rfft": rfft, "energy": energy,
    "filterbank": filterbank, "fbsqrt": fbsqrt, "specsub": specsub, "pcan": pcan, "fblog": fblog,
    "neg": _f32(np.negative), "sqrt": _f32(np.sqrt), "rsqrt": _rsqrt, "square": _f32(np.square),
    "exp": _f32(np.exp), "log": _f32(np.log), "sin": _f32(np.sin), "cos": _f32(np.cos),
    "floor": _f32(np.floor), "ceil": _f32(np.ceil), "round": _round, "elu": _f32(lambda x: np.where(x < 0, np.expm1(x), x)),
    "equal": _compare, "notequal": _compare, "less": _compare, "lessequal": _compare, "greater": _compare,
    "greaterequal": _compare, "and": _logical, "or": _logical, "not": _logical, "select": _select,
    "sqdiff": _sqdiff, "floordiv": _floordiv, "floormod": _floormod, "addn": _addn,
    "delay": delay,
    "stacker": stacker,
    "framer": framer,
    "overlap": overlap,
    "irfft": irfft,
}
