# The graph runner (mpy_lazy.model) end to end: models declared from graph descriptions, with
# owned (init) params or bound from the golden containers, run on every kernel path of this
# interpreter and compared with `ref_run`, a plain-Python interpreter of graph descriptions
# written here from the op definitions (docs/FORMAT.md, TFLite Micro's reference kernels):
# int8 exactly, floats within float32 rounding. Also: the arena planner (values alive at the
# same time never share bytes; reshape aliases; in-place elementwise ops), clone(), report(),
# the model helpers (tolist, dequantize, quantize, predict), old `layers` chains, and the
# allocation of a forward pass. Parser errors: test_graph.py.
import array
import gc
import math
import struct

from rt_util import (IS_MICROPYTHON, Lcg, c_div, golden, golden_json, raises, ref_mbqm, ref_requant, small_board,
                     ref_softmax_row, weight_index)

import mpy_lazy
from mpy_lazy import ContainerError, backend, kernels, model
from mpy_lazy.model import Model


# --- a plain-Python interpreter of graph descriptions -----------------------------------------

def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def nums(s):
    return [int(v) for v in s.split(",")]


def pair(kv, key, default):
    if key not in kv:
        return default
    v = nums(kv[key])
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def pads(kv):
    v = nums(kv.get("pad", "0"))
    if len(v) == 1:
        return (v[0],) * 4
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    return tuple(v)  # top, left, bottom, right


def qof(kv):
    s, z = kv["q"].split(",")
    return (float(s), int(z))


def clamp_of(kv):
    return tuple(nums(kv["clamp"])) if "clamp" in kv else (-128, 127)


def act(v, kv):
    a = kv.get("act", "none")
    if a in ("relu", "relu6") and v < 0:
        v = 0.0
    if a == "relu6" and v > 6:
        v = 6.0
    return v


def ref_conv(x, shape, kv, T, q8, xq, dw):
    h, w, c = shape if len(shape) == 3 else (1, 1, shape[0])
    kh, kw = pair(kv, "k", None)
    sh, sw = pair(kv, "stride", (1, 1))
    dh, dwd = pair(kv, "dil", (1, 1))
    pt, pl, pb, pr = pads(kv)
    if dw:
        mult = int(kv.get("mult", "1"))
        oc, cpg, opg, layout = c * mult, 1, mult, kv.get("wl", "1hwo")
    else:
        oc = int(kv["out"])
        g = int(kv.get("groups", "1"))
        cpg, opg, layout = c // g, oc // g, kv.get("wl", "ohwi")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dwd * (kw - 1) - 1) // sw + 1
    W, B = T[kv["w"]], T.get(kv.get("b"))
    zx = xq[1] if q8 else 0
    if q8:
        M, (s_y, zy), (lo, hi) = T[kv["m"]], qof(kv), clamp_of(kv)
    # an array filled in place: a list appended among the loop's garbage fragments a board's heap
    y = array.array("i" if q8 else "f", bytes(4 * oh * ow * oc))
    j = 0
    for oy in range(oh):
        for ox in range(ow):
            for o in range(oc):
                acc = B[o] if B is not None else 0
                grp = o // opg
                for ky in range(kh):
                    iy = oy * sh - pt + ky * dh
                    for kx in range(kw):
                        ix = ox * sw - pl + kx * dwd
                        inside = 0 <= iy < h and 0 <= ix < w
                        for ci in range(cpg):  # int8: ZX is in the bias, padding reads ZX
                            acc += W[weight_index(layout, o, ky, kx, ci, oc, kh, kw, cpg)] * (
                                x[(iy * w + ix) * c + grp * cpg + ci] if inside else zx)
                y[j] = ref_requant(acc, M[o], M[oc + o], zy, lo, hi) if q8 else act(acc, kv)
                j += 1
    return y, ((oh, ow, oc) if len(shape) == 3 else (oc,))


def ref_linear(x, kv, T, q8):
    n_in, n_out = len(x), int(kv["out"])
    io = kv.get("wl", "oi") == "io"
    W, B = T[kv["w"]], T.get(kv.get("b"))
    y = []
    for o in range(n_out):
        acc = B[o] if B is not None else 0
        for i in range(n_in):  # int8: ZX is in the bias
            acc += (W[i * n_out + o] if io else W[o * n_in + i]) * x[i]
        if q8:
            M, (_, zy), (lo, hi) = T[kv["m"]], qof(kv), clamp_of(kv)
            y.append(ref_requant(acc, M[o], M[n_out + o], zy, lo, hi))
        else:
            y.append(act(acc, kv))
    return y, (n_out,)


def ref_tconv(x, shape, kv, T, q8, xq):
    """TFLM's reference transpose conv: every input pixel scattered over the outputs its taps
    reach, (x - ZX) x w summed; then requantized (int8) or the fused activation (float)."""
    h, w, c = shape
    oc = int(kv["out"])
    kh, kw = pair(kv, "k", None)
    sh, sw = pair(kv, "stride", (1, 1))
    pt, pl = pair(kv, "pad", (0, 0))
    oh, ow = pair(kv, "size", None)
    W, B = T[kv["w"]], T.get(kv.get("b"))
    zx = xq[1] if q8 else 0
    acc = [B[i % oc] if B is not None else 0 for i in range(oh * ow * oc)]
    for iy in range(h):
        for ix in range(w):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * sh + ky - pt, ix * sw + kx - pl
                    if 0 <= oy < oh and 0 <= ox < ow:
                        for o in range(oc):
                            for ci in range(c):
                                acc[(oy * ow + ox) * oc + o] += W[((o * kh + ky) * kw + kx) * c + ci] * (
                                    x[(iy * w + ix) * c + ci] - zx)
    if q8:
        M, (_, zy), (lo, hi) = T[kv["m"]], qof(kv), clamp_of(kv)
        return [ref_requant(acc[i], M[i % oc], M[oc + i % oc], zy, lo, hi) for i in range(len(acc))], (oh, ow, oc)
    return [act(v, kv) for v in acc], (oh, ow, oc)


def ref_pool(x, shape, kv, q8, is_max):
    h, w, c = shape
    kh, kw = pair(kv, "k", None)
    sh, sw = pair(kv, "stride", (kh, kw))
    pt, pl, pb, pr = pads(kv)
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    lo, hi = clamp_of(kv)
    y = []
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                vals = [x[(iy * w + ix) * c + ch] for iy in range(oy * sh - pt, oy * sh - pt + kh)
                        for ix in range(ox * sw - pl, ox * sw - pl + kw) if 0 <= iy < h and 0 <= ix < w]
                if is_max:
                    v = max(vals)
                elif q8:
                    s, n = sum(vals), len(vals)
                    v = c_div(s + n // 2, n) if s > 0 else c_div(s - n // 2, n)
                else:
                    v = sum(vals) / len(vals)
                if q8:
                    v = lo if v < lo else (hi if v > hi else v)
                else:
                    v = act(v, kv)
                y.append(v)
    return y, (oh, ow, c)


def ref_binary(op, a, b, kv, q8):
    (xa, sa, qa), (xb, sb, qb) = a, b
    n = max(len(xa), len(xb))
    shape = sa if len(xa) >= len(xb) else sb
    y = []
    for i in range(n):
        u, v = xa[i % len(xa)], xb[i % len(xb)]
        if not q8:
            y.append(act(u + v if op == "add" else u * v, kv))
            continue
        m, (lo, hi), zy = nums(kv["m"]), clamp_of(kv), qof(kv)[1]
        if op == "add":
            acc = ref_mbqm((u - qa[1]) * (1 << 20), m[0], m[1]) + ref_mbqm((v - qb[1]) * (1 << 20), m[2], m[3])
            y.append(ref_requant(acc, m[4], m[5], zy, lo, hi))
        else:
            y.append(ref_requant((u - qa[1]) * (v - qb[1]), m[0], m[1], zy, lo, hi))
    return y, shape


def ref_elementwise(op, x, kv):
    y = []
    for v in x:
        if op == "relu":
            v = max(v, 0.0)
        elif op == "relu6":
            v = min(max(v, 0.0), 6.0)
        elif op == "clip":
            v = min(max(v, float(kv["lo"])), float(kv["hi"]))
        elif op == "leakyrelu":
            v = v if v >= 0 else v * float(kv["alpha"])
        elif op == "sigmoid":
            v = 1.0 / (1.0 + math.exp(-v))
        else:
            v = math.tanh(v)
        y.append(v)
    return y


def ref_run(text, T, *inputs):
    """Outputs (a list of flat lists) of graph `text` with tensors T ({name: flat values,
    real values for float tensors}) on `inputs` (each in its input's layout order)."""
    vals = {}
    outs = []
    k = 0
    for line in text.split("\n"):
        parts = line.split()
        if not parts or parts[0][0] == "#":
            continue
        op = parts[0]
        kv = {}
        for tok in parts[1:]:
            key, v = tok.split("=", 1)
            kv[key] = v
        if op == "input":
            shape = tuple(nums(kv["shape"]))
            x = list(inputs[k])
            k += 1
            if kv.get("layout") == "chw":  # C, H, W order in; stored H, W, C
                c, hw = shape[2], shape[0] * shape[1]
                x = [x[(i % c) * hw + i // c] for i in range(len(x))]
            q8 = kv.get("dtype") == "i8"
            if not q8:
                x = [f32(v) for v in x]
            vals[kv["y"]] = (x, shape, qof(kv) if q8 else None)
            continue
        if op == "output":
            outs.append(list(vals[kv["x"]][0]))
            continue
        ins = [vals[n] for n in kv["x"].split(",")]
        x, shape, xq = ins[0]
        q8 = xq is not None
        yq = qof(kv) if "q" in kv else (xq if op in ("reshape", "lut", "pad") else None)
        if op in ("conv2d", "depthwise"):
            y, shape = ref_conv(x, shape, kv, T, q8, xq, op == "depthwise")
        elif op == "linear":
            y, shape = ref_linear(x, kv, T, q8)
        elif op == "tconv":
            y, shape = ref_tconv(x, shape, kv, T, q8, xq)
        elif op in ("maxpool", "avgpool"):
            y, shape = ref_pool(x, shape, kv, q8, op == "maxpool")
        elif op in ("add", "mul"):
            y, shape = ref_binary(op, ins[0], ins[1], kv, q8)
        elif op == "mean":
            h, w, c = shape
            y = []
            for ch in range(c):
                s = 0
                for i in range(h * w):
                    s += x[i * c + ch] - (xq[1] if q8 else 0)
                y.append(ref_requant(s, nums(kv["m"])[0], nums(kv["m"])[1], yq[1]) if q8 else s / (h * w))
            shape = (1, 1, c)
        elif op == "lut":
            y = [T[kv["t"]][v + 128] for v in x]
        elif op == "reshape":
            new = nums(kv["shape"])
            if -1 in new:
                rest = 1
                for d in new:
                    rest *= d if d != -1 else 1
                new[new.index(-1)] = len(x) // rest
            y = x
            if kv.get("order") == "chw" and len(shape) == 3:
                c, hw = shape[2], shape[0] * shape[1]
                y = [x[(i % hw) * c + i // hw] for i in range(len(x))]
            shape = tuple(new)
        elif op == "concat":  # each input's runs from the axis on, in turn, per outer index
            ax = int(kv.get("axis", len(shape) - 1))
            outer = 1
            for d in shape[:ax]:
                outer *= d
            y = []
            for r in range(outer):
                for v, s, _ in ins:
                    run = len(v) // outer
                    y += v[r * run:(r + 1) * run]
            shape = tuple(sum(s[ax] for _, s, _ in ins) if i == ax else d for i, d in enumerate(shape))
        elif op == "pad":
            t, l, b, r = nums(kv["pad"])
            h, w, c = shape
            zero = xq[1] if q8 else 0.0
            y = [zero] * ((h + t + b) * (w + l + r) * c)
            for iy in range(h):
                for ix in range(w):
                    for ch in range(c):
                        y[((iy + t) * (w + l + r) + ix + l) * c + ch] = x[(iy * w + ix) * c + ch]
            shape = (h + t + b, w + l + r, c)
        elif op == "softmax":
            n = shape[-1]
            y = []
            for r in range(len(x) // n):
                row = x[r * n:(r + 1) * n]
                if q8:
                    y += ref_softmax_row(row, T[kv["t"]], 255)
                else:
                    beta = float(kv.get("beta", "1"))
                    e = [math.exp(beta * (v - max(row))) for v in row]
                    y += [v / sum(e) for v in e]
        elif op == "quantize":
            s, z = yq
            y = []
            for v in x:
                r = f32(f32(v) / s)
                r = int(r + 0.5) if r >= 0 else -int(0.5 - r)
                y.append(max(-128, min(127, r + z)))
        elif op == "dequantize":
            y = [xq[0] * (v - xq[1]) for v in x]
            yq = None
        else:
            y = ref_elementwise(op, x, kv)
        vals[kv["y"]] = (y, shape, yq)
    return outs


# --- building and running models ----------------------------------------------------------------

def owned(text, tensors):
    """Model(text, init): every param initialized (owned) by init from a copy of `tensors`'
    value of its name (a param owns the array its init returns: writes would reach `tensors`)."""
    box = [None]
    m = Model(text, init=lambda shape, dtype: box[0])
    names = m.names()
    for pname, p in m.named_params():
        t = tensors[names[pname]]
        box[0] = t[:] if isinstance(t, array.array) else t  # a slice of an array is a copy
        p.val()
        assert p.state == "owned", pname
    m.prepare()
    return m


def make_tensors(text, seed):
    """Values for every tensor of `text`, by the kind of param that takes it: floats that are
    exact in float32, int8 weights (edges included), int32 biases, requantization tensors
    (multiplier 2**30..2**31-1, shift so that outputs land mostly inside int8), lut tables,
    softmax exp tables (Q0.31, exp(0) = INT32_MAX, zero beyond a diff_min)."""
    r = Lcg(seed)
    m = Model(text)
    names = m.names()
    out = {}
    # arrays filled in place, not lists: a list of boxed floats made among the generator's
    # garbage scatters live objects over a board's heap and fragments it
    for pname, p in m.named_params():  # "ops.<index>.<weight|bias|requant|table>"
        _, i, attr = pname.split(".")
        op = m.ops[int(i)]
        tname = names[pname]
        n = p.size
        if p.dtype == "f32":
            v = out[tname] = array.array("f", bytes(4 * n))
            scale = 64.0 if attr == "weight" else 32.0
            for j in range(n):
                v[j] = r.int(-64, 64) / scale
        elif attr == "weight" or (attr == "table" and p.dtype == "i8"):
            v = out[tname] = array.array("b", bytes(n))
            for j in range(n):
                v[j] = r.pick((-128, 127)) if r.chance(12) else r.int(-128, 127)
        elif attr == "bias":
            v = out[tname] = array.array("i", bytes(4 * n))
            for j in range(n):
                v[j] = r.int(-3000, 3000)
        elif attr == "requant":
            oc = n // 2
            taps = op.macs // op.y.size
            base = int(math.log(40.0 / (5500.0 * math.sqrt(taps))) / math.log(2.0))
            v = out[tname] = array.array("i", bytes(4 * n))
            for j in range(oc):
                v[j] = r.int(1 << 30, 2147483647)
                v[oc + j] = base + r.int(-1, 1)
        else:  # softmax table
            v = out[tname] = array.array("i", bytes(4 * 256))
            for d in range(201):
                v[d] = min(2147483647, int(math.exp(-d * 0.06) * 2147483648.0))
    assert sorted(out) == sorted(set(names.values()))
    return out


def close(got, want, what, rel=2e-5):
    assert len(got) == len(want), (what, len(got), len(want))
    top = max([abs(v) for v in want] + [1e-3])
    for i in range(len(want)):
        assert abs(got[i] - want[i]) <= rel * top + 1e-6, (what, i, got[i], want[i])


def outputs(m):
    return [m.tolist(i) for i in range(len(m.outputs))]


def check_paths(m, text, T, inputs, exact):
    """m(*inputs) on every kernel path equals ref_run; the paths agree with each other (exactly
    for int8, within 1e-5 relative for floats). Returns the outputs of the first path."""
    want = ref_run(text, T, *inputs)
    first = None
    try:
        for path in kernels.available():
            kernels.use(path)
            for _ in range(2):  # twice: the arena reuses the input's buffer, m() refills it
                m(*inputs)
                got = outputs(m)
                for i in range(len(want)):
                    if exact:
                        assert got[i] == want[i], (path, i, got[i], want[i])
                    else:
                        close(got[i], want[i], path)
            if first is None:
                first = got
            for i in range(len(got)):
                if exact:
                    assert got[i] == first[i], path
                else:
                    close(got[i], first[i], path + " vs " + kernels.available()[0], 1e-5)
    finally:
        kernels.use()
    return first


def lcg_inputs(m, seed):
    """Inputs for every graph input: int8 codes (edges included) or floats in [-2, 2]."""
    r = Lcg(seed)
    xs = []
    for v in m.inputs:
        if v.dtype == "i8":
            xs.append([r.pick((-128, 127)) if r.chance(10) else r.int(-128, 127) for _ in range(v.size)])
        else:
            xs.append([r.int(-256, 256) / 128.0 for _ in range(v.size)])
    return xs


# --- graphs -----------------------------------------------------------------------------------

FLOAT_BRANCHY = """input y=x shape=6,6,3
conv2d x=x y=a w=c1.w b=c1.b out=4 k=3 pad=1 act=relu6
depthwise x=a y=b w=dw.w b=dw.b k=3 pad=1,1,1,1 wl=o1hw
conv2d x=b y=c w=c2.w out=4 k=1 groups=2 wl=oihw
add x=a,c y=s act=relu
avgpool x=s y=p k=3 stride=2 pad=1
relu6 x=p y=p2
mean x=p2 y=g
reshape x=g y=v shape=4
linear x=v y=o w=fc.w b=fc.b out=5 wl=io
leakyrelu x=o y=l alpha=0.1
softmax x=l y=sm beta=0.5
output x=sm"""

FLOAT_TWO_IN_OUT = """input y=x shape=5,4,2 layout=chw
input y=z shape=3
pad x=x y=xp pad=1,0,0,1
conv2d x=xp y=a w=c.w out=3 k=2,3 dil=2,1 stride=1,2 b=c.b
clip x=a y=a2 lo=-0.5 hi=0.75
mul x=z,a2 y=mz
sigmoid x=mz y=sg
tanh x=a y=th
concat x=sg,th y=cat
maxpool x=cat y=mp k=2 pad=1 stride=1
reshape x=mp y=flat shape=-1 order=chw
linear x=flat y=o w=fc.w out=3 act=relu
output x=o
output x=th"""

INT8_BRANCHY = """input y=x shape=6,6,3 dtype=i8 q=0.05,-3
conv2d x=x y=a w=c1.w b=c1.b m=c1.m out=8 k=3 pad=1 q=0.1,2
depthwise x=a y=b w=dw.w b=dw.b m=dw.m k=3 pad=1 q=0.08,-1 clamp=-100,120
conv2d x=b y=c w=c2.w b=c2.b m=c2.m out=8 k=1 q=0.1,2
add x=a,c y=s q=0.15,0 m=1518500250,-1,1288490189,-2,1431655765,-19 clamp=0,127
lut x=s y=r t=lut.t q=0.15,0
maxpool x=r y=p k=2 q=0.15,0
avgpool x=p y=p2 k=2 stride=1 pad=1 q=0.15,0
mean x=p2 y=g q=0.1,-5 m=1503238554,-3
reshape x=g y=v shape=8
linear x=v y=o w=fc.w b=fc.b m=fc.m out=10 q=0.2,3
softmax x=o y=sm q=0.00390625,-128 t=sm.t
output x=sm"""

INT8_TWO_IN = """input y=x shape=4,4,2
input y=s shape=4 dtype=i8 q=0.01,0
quantize x=x y=q q=0.02,3
pad x=q y=qp pad=1,1,0,0 q=0.02,3
depthwise x=qp y=d w=dw.w m=dw.m k=2 mult=2 wl=1hwo q=0.03,-2
mul x=d,s y=mm q=0.05,1 m=1503238554,-7
concat x=mm,mm y=cat q=0.05,1
maxpool x=cat y=mp k=3 stride=2 pad=1,1,1,1 q=0.05,1 clamp=-20,100
dequantize x=mp y=f
output x=f
output x=mm"""


def test_float_models_all_paths():
    for seed, text in ((1, FLOAT_BRANCHY), (2, FLOAT_TWO_IN_OUT)):
        T = make_tensors(text, seed)
        m = owned(text, T)
        xs = lcg_inputs(m, seed + 10)
        check_paths(m, text, T, xs, exact=False)
        assert all(p.state == "owned" for p in m.params())


def test_int8_models_all_paths():
    for seed, text in ((3, INT8_BRANCHY), (4, INT8_TWO_IN)):
        T = make_tensors(text, seed)
        m = owned(text, T)
        xs = lcg_inputs(m, seed + 10)
        y = check_paths(m, text, T, xs, exact=m.outputs[0].dtype == "i8")
        if text is INT8_TWO_IN:  # mixed outputs: a float one, an int8 one
            want = ref_run(text, T, *xs)
            assert y[1] == want[1]
        else:  # not degenerate: outputs vary and are not all saturated
            assert len(set(y[0])) > 3, y


CONCAT_AXES = """input y=x shape=3,4,2
conv2d x=x y=a w=c.w out=2 k=2 pad=0,0,1,1
concat x=a,x,a y=h axis=0
concat x=a,x y=w axis=1
reshape x=w y=v shape=48
concat x=v,v y=z axis=0
output x=z
output x=h"""

INT8_CONCAT_AXES = """input y=x shape=3,4,2 dtype=i8 q=0.1,3
pad x=x y=p pad=1,0,0,0
concat x=p,x y=h axis=0 q=0.1,3
concat x=x,x,x y=w axis=1 q=0.1,3
concat x=w,w y=c q=0.1,3
output x=h
output x=c"""


TCONV = """input y=x shape=3,4,2 layout=chw
tconv x=x y=t w=t.w b=t.b out=3 k=3,2 size=7,9 stride=2 pad=1,0 act=relu
tconv x=t y=u w=u.w out=2 k=2 size=8,10 pad=1
output x=u"""

INT8_TCONV = """input y=x shape=3,4,2 dtype=i8 q=0.1,3
tconv x=x y=t w=t.w b=t.b m=t.m out=3 k=3,2 size=7,9 stride=2 pad=1,0 q=0.2,-5 clamp=-5,127
output x=t"""


def test_tconv_float_and_int8():
    for seed, text in ((7, TCONV), (8, INT8_TCONV)):
        T = make_tensors(text, seed)
        m = owned(text, T)
        y = check_paths(m, text, T, lcg_inputs(m, seed + 10), exact=seed == 8)
        assert len(set(y[0])) > 10  # (not saturated, not a constant)


def test_concat_along_h_w_and_vectors():
    for seed, text in ((5, CONCAT_AXES), (6, INT8_CONCAT_AXES)):
        T = make_tensors(text, seed)
        m = owned(text, T)
        assert [v.shape for v in m.outputs] == ([(96,), (9, 4, 2)] if seed == 5 else [(7, 4, 2), (3, 12, 4)])
        check_paths(m, text, T, lcg_inputs(m, seed + 10), exact=seed == 6)


def test_macs_and_names():
    m = Model(FLOAT_BRANCHY)
    assert m.macs() == 6 * 6 * 4 * 27 + 6 * 6 * 4 * 9 + 6 * 6 * 4 * 2 + 4 * 5
    names = m.names()
    assert names["ops.0.weight"] == "c1.w" and names["ops.0.bias"] == "c1.b" and names["ops.8.weight"] == "fc.w"
    assert sorted(n for n, _ in m.named_params()) == sorted(names)
    assert [p.state for p in m.params()] == ["uninit"] * len(names)  # declaring allocates no weights
    assert m.prog is None


# --- the planner --------------------------------------------------------------------------------

def lifetimes(m):
    """{id(value): (first, last)} from the op list alone: produced by op `first` (inputs: 0),
    read last by op `last` (outputs: past the end)."""
    life = {}
    for v in m.inputs:
        life[id(v)] = [0, 0]
    for i, op in enumerate(m.ops):
        life[id(op.y)] = [i, i]
        for x in op.x:
            if life[id(x)][1] < i:
                life[id(x)][1] = i
    for v in m.outputs:
        life[id(v)][1] = len(m.ops)
    return life


def buffer_of(v):
    while v.alias is not None:
        v = v.alias
    return v


def check_plan(m):
    """Values alive at the same time in different buffers never share arena bytes, except an
    int8 conv/depthwise/linear's output and its input dying there, when the output starts at
    least Op.lag() bytes before the input (for conv and depthwise at least brute_lag); values
    sharing a buffer are a reshape (the same bytes) or an in-place op whose input is dead from
    then on; every buffer lies inside the one arena (byte offsets, every dtype)."""
    life = lifetimes(m)
    by_buf = {}
    for v in m.values:
        by_buf.setdefault(id(buffer_of(v)), []).append(v)
    groups = list(by_buf.values())
    extent = 0
    for g in groups:
        root = buffer_of(g[0])
        assert all(v.offset == root.offset and v.dtype == root.dtype and v.size <= root.size for v in g)
        assert 0 <= root.offset and root.offset % (1 if root.dtype == "i8" else 4) == 0, root
        extent = max(extent, root.offset + root.nbytes())
    assert extent <= m.memory()["arena"]
    # kernel scratch planned in the arena: never over a value alive during its op
    for i, op in enumerate(m.ops):
        start = m._scratch[i]  # bytes
        if start < 0:
            assert not op.scratch
            continue
        end = start + 4 * op.scratch
        assert 0 <= start and end <= m.memory()["arena"]
        for v in m.values:
            if life[id(v)][0] <= i <= life[id(v)][1]:
                assert v.offset + v.nbytes() <= start or end <= v.offset, (i, v)
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            a, b = buffer_of(groups[i][0]), buffer_of(groups[j][0])
            if a.offset + a.nbytes() <= b.offset or b.offset + b.nbytes() <= a.offset:
                continue
            alive = [k for k in range(len(m.ops) + 1) if any(
                life[id(u)][0] <= k <= life[id(u)][1] and life[id(v)][0] <= k <= life[id(v)][1]
                for u in groups[i] for v in groups[j])]
            if alive:  # sharing bytes while both live: only an op writing over its dying input
                assert len(alive) == 1, (a, b, alive)
                op = m.ops[alive[0]]
                y, x = (a, b) if op.y is a else (b, a)
                assert op.y is y and buffer_of(op.x[0]) is x and x not in m.inputs, (a, b, op.name)
                assert op.name in ("conv2d", "depthwise", "linear") and y.dtype == "i8", op.name
                lag = op.lag()
                assert lag is not None and y.offset <= x.offset - lag, (op.name, lag, x.offset, y.offset)
                if op.name != "linear":
                    rec = [0, 0] + list(op.p)  # the record's word indices
                    assert brute_lag(rec) <= lag <= brute_lag(rec, exact=False) + 3, op.p
    shared = 0
    for i, op in enumerate(m.ops):
        y = op.y
        if y.alias is None:
            continue
        shared += 1
        assert y.alias is buffer_of(op.x[0]) and y.offset == op.x[0].offset
        if op.name == "reshape":
            continue
        assert op.inplace, op.name
        assert op.x[0] not in m.inputs and y.size == op.x[0].size
        for v in by_buf[id(buffer_of(y))]:  # nothing made before op i in the buffer is read after it
            if life[id(v)][0] < i:
                assert life[id(v)][1] <= i, (op.name, v)
    return shared


def brute_lag(p, exact=True):
    """The bytes an int8 conv's output must start before its input (conv record, mpy_lazy/_pure.py)
    so that no write reaches a byte read later, pixel by pixel: when output pixel j's window is
    read, pixels before j may be written. exact: the bytes the taps really read (dilation
    gaps, padding, the group's channels); else from each window's first in-bounds row and
    column, channel 0 (what Op.lag() computes in closed form)."""
    h, wd, c, oh, ow, oc = p[8], p[9], p[10], p[11], p[12], p[2]
    kh, kw, sh, sw, dh, dw, pt, pl, cpg, opg = p[13], p[14], p[15], p[16], p[17], p[18], p[19], p[20], p[25], p[26]
    firsts = []
    for oy in range(oh):
        for ox in range(ow):
            if not exact:
                firsts.append((max(0, oy * sh - pt) * wd + max(0, ox * sw - pl)) * c)
                continue
            lo = None
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy * sh - pt + ky * dh, ox * sw - pl + kx * dw
                    if 0 <= iy < h and 0 <= ix < wd:
                        # the first channel any output of this pixel reads: group 0's
                        at = (iy * wd + ix) * c
                        if lo is None or at < lo:
                            lo = at
            firsts.append(h * wd * c if lo is None else lo)  # all padding: reads nothing
    lag = 0
    later = h * wd * c
    for j in range(len(firsts) - 1, 0, -1):
        later = min(later, firsts[j])
        lag = max(lag, j * oc - later)
    return lag


def test_planner_branching_graph_with_residual():
    for text in (FLOAT_BRANCHY, INT8_BRANCHY, FLOAT_TWO_IN_OUT, INT8_TWO_IN):
        m = owned(text, make_tensors(text, 5))
        shared = check_plan(m)
        if text in (FLOAT_BRANCHY, INT8_BRANCHY):
            assert shared >= 2, shared
        # buffers are reused: the arena is smaller than every value (and int8 kernel scratch,
        # if the model plans it in the arena) side by side
        total = 0
        for v in m.values:
            total += v.size * (1 if v.dtype == "i8" else 4)
        for op in m.ops:
            total += 4 * op.scratch
        assert m.memory()["arena"] < total, (text, m.memory(), total)
    # the branchy graphs: reshape aliases (no copy); the residual add works in place in its
    # first input (read twice, it dies there), so does the elementwise op after it
    m = owned(FLOAT_BRANCHY, make_tensors(FLOAT_BRANCHY, 5))
    v = dict((x.name, x) for x in m.values)
    assert v["v"].alias is v["g"] and v["v"].offset == v["g"].offset
    assert v["p2"].alias is v["p"] and v["l"].alias is v["o"]
    assert v["s"].alias is v["a"] and v["c"].alias is None
    m = owned(INT8_BRANCHY, make_tensors(INT8_BRANCHY, 5))
    v = dict((x.name, x) for x in m.values)
    assert v["s"].alias is v["a"] and v["r"].alias is v["a"] and v["v"].alias is v["g"]


def random_conv(r, h, w, c, name):
    """An int8 conv2d or depthwise line of random geometry (stride, dilation, asymmetric
    padding, groups, channel multiplier) reading value x of shape h, w, c; its output y."""
    kh, kw, sh, sw = r.int(1, 3), r.int(1, 3), r.int(1, 2), r.int(1, 2)
    dh, dw = r.int(1, 2), r.int(1, 2)
    pads = [r.int(0, dh * (kh - 1)), r.int(0, dw * (kw - 1)), r.int(0, dh * (kh - 1)), r.int(0, dw * (kw - 1))]
    common = "w=%s.w b=%s.b m=%s.m k=%d,%d stride=%d,%d dil=%d,%d pad=%s q=0.1,%d" % (
        name, name, name, kh, kw, sh, sw, dh, dw, ",".join(str(p) for p in pads), r.int(-5, 5))
    if r.chance(2):
        return "depthwise x=x y=y %s mult=%d" % (common, r.int(1, 2))
    g = r.pick([d for d in (1, 2, 3) if c % d == 0])
    return "conv2d x=x y=y %s out=%d groups=%d" % (common, g * r.int(1, 3), g)


def test_conv_writes_over_its_dying_input():
    """An int8 conv or depthwise whose input dies there may write its output over the input,
    starting Op.lag() bytes before it or earlier (the planner's closed form: at least what a
    pixel-by-pixel walk of the windows needs, brute_lag; check_plan), and computes the same
    integers as ref_run on every path: random geometries, two such convs in a row."""
    r = Lcg(41)
    lagged = 0
    for case in range(30):
        h, w, c = r.int(3, 9), r.int(3, 9), r.int(1, 6)
        lines = ["input y=x shape=%d,%d,%d dtype=i8 q=0.05,-3" % (h, w, c),
                 "conv2d x=x y=a w=c0.w m=c0.m out=%d k=1 q=0.1,1" % c]  # a: not the graph input
        try:
            text = "\n".join(lines + [random_conv(r, h, w, c, "c1").replace("x=x y=y", "x=a y=b")])
            m = Model(text + "\noutput x=b")
            h2, w2, c2 = m.ops[1].y.shape
            text += "\n" + random_conv(r, h2, w2, c2, "c2").replace("x=x y=y", "x=b y=c") + "\noutput x=c"
            Model(text)
        except ContainerError:  # a kernel larger than the padded input
            continue
        T = make_tensors(text, case)
        m = owned(text, T)
        check_plan(m)
        a, b, c = m.ops[0].y, m.ops[1].y, m.ops[2].y
        lagged += (b.offset < a.offset + a.size and a.offset < b.offset + b.size) + (
            c.offset < b.offset + b.size and b.offset < c.offset + c.size)
        check_paths(m, text, T, lcg_inputs(m, case), exact=True)
    assert lagged >= 10, lagged


def test_in_place_only_when_the_input_dies():
    """relu would clobber a value still needed: through a reshape alias (y shares x's bytes) or
    a later reader, or a graph input or output. Then no in-place; results stay right."""
    text = """input y=x shape=2,2,3
relu x=x y=r0
reshape x=r0 y=flat shape=12
relu x=flat y=r1
reshape x=r0 y=back shape=12
add x=r1,back y=s
relu x=s y=r2
output x=r2
output x=s"""
    m = owned(text, {})
    v = dict((x.name, x) for x in m.values)
    assert v["r0"].alias is None  # its input is the graph input
    assert v["r1"].alias is None  # flat (= r0's bytes) is read again through `back`
    assert v["r2"].alias is None  # s is a graph output
    check_plan(m)
    xs = [[(i - 5) * 0.5 for i in range(12)]]
    check_paths(m, text, {}, xs, exact=False)
    m(xs[0])
    assert m.tolist(1) == [2 * max(0.0, a) for a in [(i - 5) * 0.5 for i in range(12)]]



def test_no_in_place_over_an_input_read_twice():
    """x * x (a square: YOLOv5's and SSD's detection heads): the value dies at the mul, but it
    is both inputs, so the output may not take its buffer (the check refuses an output over the
    record's second input)."""
    text = """input y=x shape=2,3
relu x=x y=r
mul x=r,r y=s
output x=s"""
    m = owned(text, {})
    v = dict((x.name, x) for x in m.values)
    assert v["s"].alias is None
    check_plan(m)
    xs = [[(i - 2) * 0.5 for i in range(6)]]
    m(xs[0])
    assert m.tolist() == [max(0.0, a) ** 2 for a in xs[0]]

CHAIN = """input y=x shape=8,8,4 dtype=i8 q=0.05,0
conv2d x=x y=a w=w1 m=m1 out=4 k=1 q=0.05,0
maxpool x=a y=b k=1 q=0.05,0
conv2d x=b y=c w=w3 m=m3 out=4 k=1 q=0.05,0
output x=c"""


def test_input_buffer_is_reused_and_refilled():
    """Like TFLite Micro the arena reuses the input's buffer once it is dead: m(x) refills it
    each call, so the same x gives the same y; m(m.input) after a call runs on what is left."""
    for text in (CHAIN, INT8_BRANCHY):
        T = make_tensors(text, 6)
        m = owned(text, T)
        x = lcg_inputs(m, 7)[0]
        want = ref_run(text, T, x)[0]
        m(x)
        assert m.tolist() == want
        xv = m.inputs[0]
        reused = [v.name for v in m.values if v is not xv and v.dtype == "i8" and v.offset < xv.offset + xv.size
                  and xv.offset < v.offset + v.size]
        if text is CHAIN:  # x, a, b, c of one size: b goes where x was, c over b (a 1x1 conv)
            assert reused == ["b", "c"], reused
            assert [m.input[i] for i in range(xv.size)] != x  # the call overwrote the input
        m(x)
        assert m.tolist() == want
        s, z = xv.q
        m.quantize([s * (v - z) for v in x])  # the same codes, from their real values
        assert [m.input[i] for i in range(len(x))] == x
        m(m.input)
        assert m.tolist() == want
        if text is CHAIN:
            m(m.input)  # the input was overwritten by the previous call: not the same result
            assert m.tolist() != want


def test_int8_input_as_bytes():
    """An int8 input given as bytes / bytearray / array('b') (one kernel call copies it, a
    C, H, W one transposed) runs as the same codes given as a list; so do other containers of
    the codes (array('h'), array('i'), a tuple) and of their real values (floats: quantized)."""
    import array

    for layout in ("hwc", "chw"):
        text = INT8_BRANCHY.replace("dtype=i8", "dtype=i8 layout=%s" % layout, 1)
        T = make_tensors(text, 19)
        m = owned(text, T)
        x = lcg_inputs(m, 20)[0]
        want = ref_run(text, T, x)[0]
        s, z = m.inputs[0].q
        reals = [s * (v - z) for v in x]
        for given in (x, array.array("b", x), bytes(array.array("b", x)), bytearray(array.array("b", x)),
                      memoryview(bytearray(array.array("b", x))), tuple(x), array.array("h", x),
                      array.array("i", x), reals, array.array("f", reals)):
            try:
                for path in kernels.available():
                    kernels.use(path)
                    m(given)
                    assert m.tolist() == want, (layout, type(given), path)
            finally:
                kernels.use()


def test_integer_input_out_of_range_is_refused():
    """Ints outside the input's integer range (a list, a tuple, array('h') into an int8 input;
    array('i') into an int16 one) are refused in one line naming the value (issue 32: 300
    wrapped to 44 silently); the range's ends run; bytes stay raw int8 bytes (200 is -56)."""
    import array

    for layout in ("hwc", "chw"):
        m = T = None  # (the last layout's model freed first: the M0's heap holds one)
        gc.collect()
        text = INT8_BRANCHY.replace("dtype=i8", "dtype=i8 layout=%s" % layout, 1)
        T = make_tensors(text, 19)
        m = owned(text, T)
        n = m.inputs[0].size
        try:
            for path in kernels.available():
                kernels.use(path)
                for bad in ([300] * n, tuple([0] * (n - 1) + [-129]), array.array("h", [128] * n)):
                    e = raises(ValueError, m, bad)
                    assert "int8's -128..127: give int8 codes" in str(e) and ("input 0: %d (item " % bad[-1]) in str(e), \
                        str(e)
                for ok in ([127] * n, [-128] * n):
                    m(ok)
                    assert m.tolist() == ref_run(text, T, ok)[0], (layout, path)
                m(bytes([200] * n))
                assert m.tolist() == ref_run(text, T, [-56] * n)[0]
        finally:
            kernels.use()
    text = "input y=a shape=4 dtype=i16 q=0.5,0\nquantize x=a y=b q=0.25,3 dtype=i8 m=1073741824,-6\noutput x=b"
    m = owned(text, make_tensors(text, 23))
    e = raises(ValueError, m, array.array("i", [0, 0, 40000, 0]))
    assert "input 0: 40000 (item 2) is outside int16's -32768..32767" in str(e), str(e)
    # a bool input takes 0 and 1 (the fuzzer's -32768 was called "outside int32's -2..1")
    text = "input y=a shape=4 dtype=bool\nnot x=a y=b\noutput x=b"
    m = owned(text, make_tensors(text, 29))
    e = raises(ValueError, m, [0, 1, 2, 0])
    assert str(e) == "input 0: 2 (item 2) is outside bool's 0..1: give 0 or 1, True or False", str(e)
    m([1, 0, 1, 0])
    assert m.tolist() == [0, 1, 0, 1], m.tolist()


def test_int16_input_as_array():
    """An int16 input (16x8 models) given as array('h') (copied by a kernel call per byte of
    its items, a C, H, W one transposed) runs as the same codes given as a list, as do other
    containers of them; on viper that copy allocates nothing."""
    import array

    for layout in ("hwc", "chw"):
        text = ("input y=a shape=2,3,4 dtype=i16 q=0.5,0 layout=%s\n"
                "quantize x=a y=b q=0.25,3 dtype=i8 m=1073741824,-6\n"
                "output x=b layout=%s" % (layout, layout))
        m = owned(text, make_tensors(text, 23))
        r = Lcg(24)
        x = [r.pick((-32768, 32767)) if r.chance(4) else r.int(-32768, 32767) for _ in range(24)]
        want = []
        for v in x:  # quantize: round(v x 0.5 / 0.25 / 2**7 ...) = mbqm(v, 2**30, -6) + 3, clamped
            want.append(max(-128, min(127, ref_mbqm(v, 1 << 30, -6) + 3)))
        xh = array.array("h", x)
        try:
            for path in kernels.available():
                kernels.use(path)
                for given in (x, xh, memoryview(xh), array.array("i", x), tuple(x)):
                    m(given)
                    assert m.tolist() == want, (layout, type(given), path)
                if IS_MICROPYTHON and path == "viper":
                    m(xh)
                    assert _alloc(m, xh) == 0, layout
        finally:
            kernels.use()


def test_memory_error_in_prepare_then_retry():
    """A MemoryError at any allocation of prepare() (injected here at each call of
    backend.typed_view, which prepare uses for the arena, the input/output views and the
    weights) leaves a model that a second prepare() makes whole: m(x) then gives the answer."""
    from mpy_lazy import backend

    text = INT8_BRANCHY
    T = make_tensors(text, 21)
    x = lcg_inputs(Model(text), 22)[0]
    want = ref_run(text, T, x)[0]
    real = backend.typed_view
    calls = [0, 0]  # calls so far, the call that fails

    def flaky(mv, dtype, n):
        calls[0] += 1
        if calls[0] == calls[1]:
            raise MemoryError("injected")
        return real(mv, dtype, n)

    def declared():
        box = [None]
        m = Model(text, init=lambda shape, dtype: box[0])
        names = m.names()
        for pname, p in m.named_params():
            box[0] = T[names[pname]]
            p.val()
        return m

    backend.typed_view = flaky
    try:
        calls[:] = [0, 0]
        declared().prepare()
        n = calls[0]
        assert n > 0
        for k in range(1, n + 1):
            m = declared()
            calls[:] = [0, k]
            raises(MemoryError, m.prepare)
            calls[1] = 0  # no more failures
            m.prepare()
            m(x)
            assert m.tolist() == want, k
    finally:
        backend.typed_view = real


# --- clone, report, memory ------------------------------------------------------------------------

def test_clone_has_its_own_arena():
    text = FLOAT_BRANCHY
    T = make_tensors(text, 8)
    m = owned(text, T)
    x1, x2 = lcg_inputs(m, 9)[0], lcg_inputs(m, 10)[0]
    y1 = ref_run(text, T, x1)[0]
    y2 = ref_run(text, T, x2)[0]
    try:
        for path in kernels.available():
            kernels.use(path)
            for arrays in (False, True):
                c = None  # (the last clone freed first)
                gc.collect()
                c = m.clone(arrays)
                assert c.memory() == m.memory()
                assert [p.state for p in c.params()] == ["owned"] * len(c.params())
                m(x1)
                y = m.output
                c(x2)
                assert c.output is not y
                close(m.tolist(), y1, "original after the clone ran")
                close(c.tolist(), y2, "clone")
                m(x2)
                m(x1)
                close(c.tolist(), y2, "clone after the original ran")
                assert c.params()[0].val() is not m.params()[0].val() or not arrays
    finally:
        kernels.use()


def test_param_writes_take_effect_after_prepare():
    """A param written (p[i] = x: in place when owned, copy-on-write when shared with a clone)
    is what the next forward pass after m.prepare() computes with, on every path; a clone's
    writes never reach the original. (Fails on CPython's 'ulab' (numpy) path: conv caches its
    weight and bias matrices on the op, and prepare()/clone() keep the stale cache.)"""
    text = FLOAT_BRANCHY
    T = make_tensors(text, 8)
    x = lcg_inputs(owned(text, T), 9)[0]
    y = ref_run(text, T, x)[0]
    T2 = dict(T)
    T2["c1.b"] = [100.0] + list(T["c1.b"][1:])
    T2["fc.w"] = [0.5] + list(T["fc.w"][1:])
    y2 = ref_run(text, T2, x)[0]
    try:
        for path in kernels.available():
            kernels.use(path)
            m = owned(text, T)
            m(x)
            for arrays in (False, True):
                c = m.clone(arrays)
                c(x)
                c.ops[0].bias[0] = 100.0
                c.ops[8].weight[0] = 0.5
                c.prepare()
                c(x)
                close(c.tolist(), y2, "%s: clone(%s) after writing its params" % (path, arrays))
                m(x)
                close(m.tolist(), y, "%s: original after its clone(%s) wrote" % (path, arrays))
            m.ops[0].bias[0] = 100.0
            m.ops[8].weight[0] = 0.5
            m.prepare()
            m(x)
            close(m.tolist(), y2, "%s: after writing params and prepare()" % path)
    finally:
        kernels.use()


def test_clone_of_an_unprepared_model():
    m = Model(FLOAT_BRANCHY, init=lambda shape, dtype: [0.25] * _size(shape))
    c = m.clone()
    assert c.prog is None and m.prog is None
    c.prepare()
    assert m.prog is None and c.prog is not None
    c([0.5] * 108)
    y = c.tolist()
    close(y, [0.2] * 5, "uniform weights: a uniform softmax")


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def test_report_and_memory():
    for text in (FLOAT_BRANCHY, INT8_BRANCHY):
        unprepared = Model(text)
        planned = unprepared.memory()  # planned without allocating
        assert unprepared.prog is None and planned["arena"] > 0
        m = owned(text, make_tensors(text, 11))
        mem = m.memory()
        r = mpy_lazy.report(m, show=False)
        assert r["arena"] == mem["arena"] and r["scratch"] == mem["scratch"]
        assert planned["arena"] <= mem["arena"] <= planned["arena"] + 4  # (+ stand-ins of empty arenas)
        assert planned["scratch"] <= mem["scratch"] <= planned["scratch"] + 4
        extent = 0
        for v in m.values:
            extent = max(extent, v.offset + v.nbytes())
        assert extent <= mem["arena"] == len(m.prog.A)
        assert r["ram"] == sum(p["ram"] for p in r["params"]) > 0
        assert len(r["params"]) == len(m.params())
        assert r["flash"] == 0 and r["pending"] == 0


# --- containers ---------------------------------------------------------------------------------

def json_tensors(name):
    """{tensor: values} of a golden container (real values for float tensors, codes for ints)."""
    d = golden_json(name + ".json")
    out = {}
    for t in d["tensors"]:
        out[t["name"]] = t["real"] if t["dtype"] in ("f32", "f16") else t["values"]
    return d, out


def test_golden_graph_containers_all_paths():
    for name in ("graph_int8", "graph_f32", "graph_f16"):
        desc, T = json_tensors(name)
        text = desc["meta"]["graph"]
        c = mpy_lazy.open(golden(name + ".mpyl"))
        m = model.from_container(c)
        # a stored program where the packer could write one (not for f16 biases)
        assert isinstance(m, model.Program) == (name != "graph_f16"), (name, m)
        d = model.declare(c)
        d.load(c)
        assert [p.state for p in d.params()] == ["bound"] * len([t for t in T if t != "graph.program"])
        xs = lcg_inputs(m, 12)
        check_paths(m, text, T, xs, exact=name == "graph_int8")
        check_paths(d, text, T, xs, exact=name == "graph_int8")
        if name == "graph_int8":
            assert abs(m.outputs[0].q[0] - 0.2) < 1e-7 and m.outputs[0].q[1] == -10  # (a program holds float32)
        ram = mpy_lazy.report(m, show=False)["ram"]
        if name == "graph_f16":  # weights decoded while running; at most the biases in RAM
            item = 8 if backend.kind() == "ulab" and not backend.SINGLE_FLOAT else 4  # (a double-float ulab)
            assert ram <= item * sum(len(v) for k, v in T.items() if k.endswith(".b")), ram
        else:
            assert ram == 0, ram
        assert c.verify() == len(c)


def test_older_program_version_runs_from_the_graph():
    """A container packed with an older program VERSION (2: records without the weight-block
    fields) runs from its graph description, compiled in RAM, with the same outputs; a program
    of a newer VERSION is refused."""
    from mpy_lazy import program

    d = golden_json("graph_int8.json")
    t = [t for t in d["tensors"] if t["name"] == "graph.program"][0]
    desc, T = json_tensors("graph_int8")
    for version in (2, program.VERSION + 1):
        buf = bytearray(golden("graph_int8.mpyl"))
        struct.pack_into("<i", buf, t["offset"] + 4 * program.H_VERSION, version)
        c = mpy_lazy.open(buf)
        if version > program.VERSION:
            e = raises(ContainerError, model.from_container, c)
            assert "repack" in str(e), str(e)
            continue
        m = model.from_container(c)
        assert not isinstance(m, model.Program), m
        x = lcg_inputs(m, 14)[0]
        m(x)
        assert m.tolist() == ref_run(desc["meta"]["graph"], T, x)[0]


def test_declare_and_load_separately():
    c = mpy_lazy.open(golden("graph_int8.mpyl"))
    m = model.declare(c)
    assert [p.state for p in m.params()] == ["uninit"] * 6
    assert m.load(c)["bound"] == 6
    m.prepare()
    desc, T = json_tensors("graph_int8")
    x = lcg_inputs(m, 13)[0]
    m(x)
    assert m.tolist() == ref_run(desc["meta"]["graph"], T, x)[0]
    # a description whose shapes do not match the container: load refuses, names the tensor
    text = desc["meta"]["graph"].replace("out=4", "out=5")
    e = raises(ContainerError, Model(text).load, c)
    assert e.field == "load" and "fc.w" in str(e) and e.mismatched
    text = desc["meta"]["graph"].replace("shape=4,4,2", "shape=4,4,3")  # conv in-channels
    e = raises(ContainerError, Model(text).load, c)
    assert e.field == "load" and "conv.w" in str(e)
    text = desc["meta"]["graph"].replace("w=fc.w", "w=fc.weight")
    e = raises(ContainerError, Model(text).load, c)
    assert "fc.weight" in str(e) and e.missing and e.unexpected == ["fc.w"]
    assert Model(text).load(c, strict=False)["bound"] == 5


def test_requant_tensors_outside_tflm_range_are_refused():
    """The int8 ops' `m` tensors (per channel: multipliers, then shifts) come from the container
    and are trusted by no one: like m= of add/mul/mean (the parser takes multipliers
    0..2**31-1, shifts -31..30) a value outside TFLite Micro's range is refused with
    ContainerError, by from_container() or at the latest by the first forward pass, on every
    path. (Unchecked, a shift of 10**9 makes _pure build a 10**9-bit integer, and viper shifts
    a machine word by it.)"""
    d = golden_json("graph_int8.json")
    x = [0] * 32
    for tname, oc in (("conv.m", 3), ("fc.m", 4)):
        t = [t for t in d["tensors"] if t["name"] == tname][0]
        for k, value in ((oc, 31), (oc + 1, 1000), (oc, -32), (0, -1), (1, -2147483648)):
            buf = bytearray(golden("graph_int8.mpyl"))
            struct.pack_into("<i", buf, t["offset"] + 4 * k, value)
            try:
                for path in kernels.available():
                    kernels.use(path)
                    try:
                        m = model.from_container(mpy_lazy.open(buf))
                        m(x)
                    except ContainerError as e:
                        # the check of every record names its line and field
                        assert e.field == "program" and e.tensor == "requant", (e.field, e.tensor, str(e))
                        assert str(e).startswith("graph line "), str(e)
                        continue
                    raise AssertionError("%s[%d] = %d accepted and run on %s: %s" % (
                        tname, k, value, path, m.tolist()))
            finally:
                kernels.use()


def test_bias_that_could_leave_int32_is_refused_at_load():
    """An int8 bias near the int32 limit (|b| + 128 x sum |w| past 2**31 - 1: an accumulator
    that could wrap) is refused with ContainerError naming the op's line and `bias` when the
    model is loaded, on every path, for the stored program and for the same graph declared in
    code (compiled on the board), never run to a silently wrapped output or a bare
    ValueError mid-inference."""
    d = golden_json("graph_int8.json")
    text = d["meta"]["graph"] if "meta" in d else d["graph"]
    for tname in ("conv.b", "fc.b"):
        t = [t for t in d["tensors"] if t["name"] == tname][0]
        for value in (2147483647, -2147483648, 2147480000):
            buf = bytearray(golden("graph_int8.mpyl"))
            struct.pack_into("<i", buf, t["offset"], value)
            c = mpy_lazy.open(buf)
            try:
                for path in kernels.available():
                    kernels.use(path)
                    for declared in (False, True):
                        try:
                            if declared:
                                m = Model(text)
                                m.load(c)
                                m.prepare()
                            else:
                                m = model.from_container(c)
                        except ContainerError as e:
                            assert e.tensor == "bias" and str(e).startswith("graph line "), (e.tensor, str(e))
                            continue
                        raise AssertionError("%s = %d loaded on %s (declared %s)" % (tname, value, path, declared))
            finally:
                kernels.use()


def test_quantized_weights_in_a_float_op_are_refused():
    """A float op bound to int8-quantized weights (a weights-only container packed with
    --quantize int8) is refused with ContainerError (by load, prepare or the first forward
    pass), not run on the int8 codes read as floats."""
    c = mpy_lazy.open(golden("int8.mpyl"))
    for text in ("input y=x shape=3\nlinear x=x y=o w=fc.weight b=fc.bias out=4\noutput x=o",
                 "input y=x shape=3\nlinear x=x y=o w=fc.weight b=fc.bias out=4 wl=oi act=relu\noutput x=o"):
        try:
            for path in kernels.available():
                kernels.use(path)
                m = Model(text)
                try:
                    m.load(c)
                    m.prepare()
                    m([0.5, -1.0, 2.0])
                except ContainerError as e:
                    assert "fc.weight" in str(e), str(e)
                    continue
                raise AssertionError("int8 weights run as floats on %s: %s" % (path, m.tolist()))
        finally:
            kernels.use()


def test_weights_only_container_has_no_model():
    for name in ("tiny", "int8", "ints"):
        c = mpy_lazy.open(golden(name + ".mpyl"))
        for fn in (model.from_container, model.declare):
            e = raises(ContainerError, fn, c)
            assert e.field == "graph" and "graph" in str(e) and "weights" in str(e)


def test_layers_chain_container():
    """An old container with a `layers` chain (C, H, W images, torch weights) runs as a graph;
    checked against a CHW computation written here."""
    desc, T = json_tensors("layers")
    c = mpy_lazy.open(golden("layers.mpyl"))
    m = model.from_container(c)
    assert "graph" not in desc["meta"] and "layers" in desc["meta"]
    x = [math.sin(i * 0.37) for i in range(25)]  # 1 x 5 x 5, C H W
    xf = [f32(v) for v in x]
    cw, cb = T["c.w"], T["c.b"]
    conv = []
    for o in range(2):  # conv 3x3 pad 1 + relu, CHW
        for yy in range(5):
            for xx in range(5):
                s = cb[o]
                for ky in range(3):
                    for kx in range(3):
                        iy, ix = yy + ky - 1, xx + kx - 1
                        if 0 <= iy < 5 and 0 <= ix < 5:
                            s += cw[o * 9 + ky * 3 + kx] * xf[iy * 5 + ix]
                conv.append(max(s, 0.0))
    pooled = []  # maxpool 2 (floor): 2 x 2 x 2, then flatten in C, H, W order
    for o in range(2):
        for yy in range(2):
            for xx in range(2):
                pooled.append(max(conv[o * 25 + (2 * yy + dy) * 5 + 2 * xx + dx] for dy in (0, 1) for dx in (0, 1)))
    logits = [T["fc.b"][o] + sum(T["fc.w"][o * 8 + i] * pooled[i] for i in range(8)) for o in range(3)]
    e = [math.exp(v - max(logits)) for v in logits]
    want = [v / sum(e) for v in e]
    try:
        for path in kernels.available():
            kernels.use(path)
            m(x)
            close(m.tolist(), want, path)
            assert m.predict(x) == want.index(max(want))
    finally:
        kernels.use()


def test_layers_chain_errors():
    from mpy_lazy.chain import to_graph

    for text in ("", "relu", "input shape=4\ninput shape=4", "input shape=4\nfrob",
                 "input shape=4\nlinear w=a in=4 out=2 in=4", "input shape=4\nrelu k=3"):
        e = raises(ContainerError, to_graph, text)
        assert e.field == "layers", text
    g = to_graph("input shape=3,2,2\nflatten\nlinear w=w in=12 out=2 t=1\nsoftmax")
    assert "layout=chw" in g and "order=chw" in g and "wl=io" in g


# --- model helpers ------------------------------------------------------------------------------

def test_tolist_dequantize_quantize_predict():
    desc, T = json_tensors("graph_int8")
    text = desc["meta"]["graph"]
    m = model.from_container(mpy_lazy.open(golden("graph_int8.mpyl")))
    s_in, z_in = m.inputs[0].q
    r = Lcg(14)
    reals = [r.int(-400, 400) / 50.0 for _ in range(32)]
    codes = []
    for f in reals:  # round(f / scale) half away from zero, + zero point, saturated
        q = f / s_in
        q = int(q + 0.5) if q >= 0 else -int(0.5 - q)
        codes.append(max(-128, min(127, q + z_in)))
    assert -128 in codes or 127 in codes  # saturation reached
    x = m.quantize(reals)
    assert x is m.input and [x[i] for i in range(32)] == codes
    want = ref_run(text, T, codes)[0]
    y = m(x)
    assert y is m.output
    got = m.tolist()
    assert got == want and all(isinstance(v, int) for v in got)
    s, z = m.outputs[0].q
    deq = m.dequantize()
    assert deq == [s * (v - z) for v in want]
    assert m.predict(codes) == want.index(max(want))
    assert m.predict(reals) == want.index(max(want))  # floats into an int8 input: quantized
    assert [y[i] for i in range(4)] == want
    e = raises(ValueError, m, codes[:-1])
    assert "31" in str(e) and "32" in str(e)
    # a float model: dequantize is tolist
    fm = model.from_container(mpy_lazy.open(golden("graph_f32.mpyl")))
    fm([0.1] * 50)
    assert fm.dequantize() == fm.tolist() and abs(sum(fm.tolist()) - 1.0) < 1e-5


def test_two_inputs_two_outputs():
    text = FLOAT_TWO_IN_OUT
    T = make_tensors(text, 15)
    m = owned(text, T)
    x, z = lcg_inputs(m, 16)
    want = ref_run(text, T, x, z)
    y = m(x, z)
    assert isinstance(y, tuple) and len(y) == 2
    close(m.tolist(0), want[0], "out 0")
    close(m.tolist(1), want[1], "out 1")
    assert m.predict(x, z) == want[0].index(max(want[0]))


# --- allocation of a forward pass ---------------------------------------------------------------

def _alloc(m, x):
    gc.collect()
    gc.disable()
    try:
        a0 = gc.mem_alloc()
        m(x)
        return gc.mem_alloc() - a0
    finally:
        gc.enable()


def test_int8_forward_pass_allocates_nothing_on_viper():
    """On MicroPython's viper path an int8 forward pass allocates 0 bytes (x: a pre-built list
    of ints); the pure path allocates a bounded amount (big-int products of the fixed point)."""
    if not IS_MICROPYTHON:
        return  # CPython: no gc.mem_alloc, no viper
    for text in (INT8_BRANCHY, "golden"):
        if text == "golden":
            c = mpy_lazy.open(golden("graph_int8.mpyl"))
            m = model.from_container(c)  # its stored program
            outputs = sum(op.y.size for op in model.declare(c).ops)
        else:
            m = owned(text, make_tensors(text, 17))
            outputs = sum(op.y.size for op in m.ops)
        x = lcg_inputs(m, 18)[0]
        xb = bytes([v & 0xFF for v in x])
        try:
            for path in kernels.available():
                kernels.use(path)
                m(x)  # the first call after a path change prepares
                if path == "pure" and small_board():
                    continue  # its big-int garbage outgrows a small heap with the gc off
                n = _alloc(m, x)
                if path in ("viper", "ulab"):
                    assert n == 0, (path, n)
                    assert _alloc(m, xb) == 0  # the input as bytes: one kernel call copies it
                else:
                    print("pure path: %d bytes allocated by one int8 forward pass (%d MACs, %d outputs)" % (
                        n, m.macs(), outputs))
                    assert n <= 16 * outputs + 4096, n
        finally:
            kernels.use()


U8_TEXT = ("input y=a shape=%s dtype=u8 q=0.5,128%s\nlut x=a y=b t=t1 q=0.25,-3\n"
           "lut x=b y=c t=t2 q=0.125,200 dtype=u8\noutput x=c%s")


def test_uint8_input_and_output():
    """A u8 input (bytes 0..255: bytes, bytearray, array('B'), a list, or floats quantized with
    its q into 0..255) and a u8 output (tolist 0..255, dequantize, predict), through lut: the
    table read at the input byte as int8 + 128, the output the table's bytes; every kernel
    path, 0 B allocated per inference on the integer path of a board."""
    import array

    r = Lcg(41)
    t1 = array.array("b", [r.int(-128, 127) for _ in range(256)])
    t2 = array.array("b", [r.int(-128, 127) for _ in range(256)])
    x = list(range(256))
    want = [t2[t1[b ^ 128] + 128] & 255 for b in x]
    for layout, shape in (("", "256"), (" layout=chw", "4,8,8")):
        text = U8_TEXT % (shape, layout, layout)
        m = owned(text, {"t1": t1, "t2": t2})
        assert m.inputs[0].dtype == m.outputs[0].dtype == "u8" and m.outputs[0].q == (0.125, 200)
        try:
            for path in kernels.available():
                kernels.use(path)
                for given in (x, bytes(x), bytearray(x), array.array("B", x)):
                    m(given)
                    assert m.tolist() == want, (path, layout, type(given))
                assert m.dequantize() == [0.125 * (q - 200) for q in want]
                assert m.predict(x) == want.index(max(want))
                for bad in (256, -1):
                    e = raises(ValueError, m, [0] * 255 + [bad])
                    assert "input 0: %d (item 255) is outside uint8's 0..255" % bad in str(e), str(e)
                m([-1000.0, 0.0, 0.24, 0.26, 63.5, 63.75, 1000.0] + [0.0] * 249)  # round(f / 0.5) + 128
                assert m.tolist()[:7] == [want[b] for b in (0, 128, 128, 129, 255, 255, 255)], path
        finally:
            kernels.use()
    m = owned(U8_TEXT % ("256", "", ""), {"t1": t1, "t2": t2})
    if IS_MICROPYTHON and kernels.path() != "pure":
        xb = bytes(x)
        m(xb)
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        m(xb)
        b = gc.mem_alloc()
        gc.enable()
        assert b - a == 0, b - a


def test_uint8_values_only_in_lut():
    """u8 values (a model's uint8 input or output) are read and written by lut, and moved by slice
    and reshape (TFLM's uint8 REVERSE_V2) only: any other op taking or making one is refused naming
    the op; a u8 zero point is 0..255, an i8 one -128..127."""
    for text, what in (
            ("input y=a shape=2,2 dtype=u8 q=1.0,0\ntranspose x=a y=b perm=1,0\noutput x=b", "transpose: u8 values"),
            ("input y=a shape=4\nquantize x=a y=b q=1.0,0 dtype=u8\noutput x=b", "quantize: u8 values"),
            ("input y=a shape=4 dtype=u8 q=1.0,0\nlut x=a y=b t=t q=1.0,0\nsoftmax x=b y=c q=0.00390625,-128 t=s "
             "dtype=u8\noutput x=c", "softmax"),
            ("input y=a shape=4\nlut x=a y=b t=t q=1.0,0\noutput x=b", "lut maps an i8 or u8 value"),
            ("input y=a shape=4 dtype=u8 q=1.0,256\noutput x=a", "zero point"),
            ("input y=a shape=4 dtype=i8 q=1.0,0\nlut x=a y=b t=t q=1.0,200\noutput x=b", "zero point")):
        e = raises(ContainerError, Model, text)
        assert what in str(e), (text, str(e))
    Model("input y=a shape=4 dtype=i8 q=1.0,0\nlut x=a y=b t=t q=1.0,200 dtype=u8\noutput x=b")
    Model("input y=a shape=4 dtype=u8 q=1.0,0\nreshape x=a y=b shape=2,2\noutput x=b")


def test_legacy_keys_are_refused_where_they_do_not_apply():
    """wz= (a legacy uint8 model's weight zero point) is int8 conv2d's and depthwise's, -128..127,
    and round=up int8 avgpool's: elsewhere one ContainerError naming the key and its line."""
    i8 = "input y=x shape=4,4,2 dtype=i8 q=0.1,0\n"
    for text, key in (("input y=x shape=4,4,2\nconv2d x=x y=o w=c.w out=2 k=1 wz=3\noutput x=o", "wz"),
                      (i8 + "conv2d x=x y=o w=c.w m=c.m b=c.b out=2 k=1 q=0.1,0 wz=200\noutput x=o", "wz"),
                      (i8 + "depthwise x=x y=o w=c.w m=c.m b=c.b k=1 q=0.1,0 wz=-129\noutput x=o", "wz"),
                      (i8 + "maxpool x=x y=o k=2 q=0.1,0 round=up\noutput x=o", "round"),
                      ("input y=x shape=4,4,2\navgpool x=x y=o k=2 round=up\noutput x=o", "round")):
        e = raises(ContainerError, Model, text)
        assert (e.tensor, e.field) == (key, "graph") and str(e).startswith("graph line 2: "), str(e)
    Model(i8 + "depthwise x=x y=o w=c.w m=c.m b=c.b k=1 q=0.1,0 wz=-128\navgpool x=o y=p k=2 q=0.1,0 round=up\noutput x=p")


def test_i64_values():
    """i64 values (8 bytes, two words): compared with their high words signed and their low words
    unsigned, min/max, moved, and a const of them; on every kernel path the same numbers. An i64
    code= other than 0 and -1, a constant i64 min/max operand as t= and an i64 select are refused."""
    text = ("input y=a shape=2,4 dtype=i64 q=1.0,0\ninput y=b shape=4 dtype=i64 q=1.0,0\n"
            "less x=a,b y=l\nmaximum x=a,b y=m q=1.0,0\nconst y=z shape=4 dtype=i64 code=-1\n"
            "greaterequal x=a,z y=g\nconcat x=m,a y=c axis=0 q=1.0,0\noutput x=l\noutput x=c\noutput x=g")
    big = 9223372036854775807
    a = [-big - 1, big, -1, 0, 1 << 31, (1 << 32) - 1, -(1 << 32), 5]
    b = [-big, big, 0, -1]
    want_l = [1 if a[i] < b[i % 4] else 0 for i in range(8)]
    want_m = [max(a[i], b[i % 4]) for i in range(8)]
    want_g = [1 if v >= -1 else 0 for v in a]
    m = Model(text)
    try:
        for path in kernels.available():
            kernels.use(path)
            m(a, b)
            assert m.tolist(0) == want_l, path
            assert m.tolist(1) == want_m + a, path
            assert m.tolist(2) == want_g, path
    finally:
        kernels.use()
    for text, what in (
            ("input y=a shape=4 dtype=i64 q=1.0,0\nconst y=c shape=4 dtype=i64 code=5\nequal x=a,c y=b\noutput x=b",
             "code=5"),
            ("input y=a shape=4 dtype=i64 q=1.0,0\nminimum x=a y=b t=t q=1.0,0\noutput x=b", "x=a,b"),
            ("input y=c shape=4 dtype=bool\ninput y=a shape=4 dtype=i64 q=1.0,0\nselect x=c,a,a y=b\noutput x=b",
             "not i64")):
        e = raises(ContainerError, Model, text)
        assert what in str(e), (text, str(e))
