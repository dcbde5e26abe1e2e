# Kernels that read weights in place (from their flash views): linear, conv2d, max/avg pool,
# relu, softmax, argmax; for f32, f16 and int8 (per-tensor, per-channel) weights.
#
# Three paths, picked at import time (best available), switchable with use():
#   'ulab'  ulab.numpy on firmware that has it, numpy on CPython: frombuffer views of the
#           weights, no copy (f16, and f32 on a double-float ulab, are decoded per layer into a
#           reused scratch: ulab has no f16 dtype).
#   'viper' stock MicroPython: int8 weights x int8 activations (quantized per layer,
#           symmetric) with int32 accumulation in viper, one float rescale per output; f32/f16
#           weights run the pure loops over typed views.
#   'pure'  plain Python, runs anywhere; int8 follows the same integer arithmetic as 'viper'.
#
# Activations: on 'viper'/'pure' a flat array('f') in C, H, W order; on 'ulab' an ndarray,
# 1-D for vectors and 2-D (C * H, W) for images (ulab is often built with 2 dimensions).
# Working buffers (quantized input, accumulators, decoded rows) are module scratch arrays,
# grown once and reused; pass out= to reuse activation buffers too (the layer runner does).
import array
import math
import struct
import sys

from . import backend
from .container import ContainerError

try:
    import uctypes
except ImportError:
    uctypes = None

_viper = None
if sys.implementation.name == "micropython":
    try:
        from . import _viper
    except Exception:  # a port without the native emitter
        _viper = None

_path = None


def available():
    """Kernel paths this interpreter can run, best first."""
    paths = ["ulab"] if backend.kind() else []
    if _viper is not None:
        paths.append("viper")
    paths.append("pure")
    return paths


def use(name=None):
    """Select the kernel path ('ulab', 'viper' or 'pure'; None = best available)."""
    global _path
    ok = available()
    if name is None:
        name = ok[0]
    if name not in ok:
        raise ValueError("kernel path %r not available here (have %s)" % (name, ", ".join(ok)))
    _path = name
    return name


def path():
    return _path or use()


# --- weights -----------------------------------------------------------------------------

_UCT = {"f32": "FLOAT32", "i8": "INT8"}
_CAST = {"f32": "f", "i8": "b"}


def _typed(mv, dtype, n):
    """Flat indexable of the stored values of an f32 or i8 buffer, without a copy."""
    if hasattr(mv, "cast"):  # CPython
        return mv.cast("B").cast(_CAST[dtype])
    if uctypes is None:
        raise ContainerError("no typed view of %s data without uctypes" % dtype)
    layout = {"a": (uctypes.ARRAY | 0, getattr(uctypes, _UCT[dtype]) | n)}
    return uctypes.struct(uctypes.addressof(mv), layout, uctypes.LITTLE_ENDIAN).a


class Weight:
    """A weight tensor as the kernels read it: its bytes in place plus how to make reals of
    them (real = scale * (q - zero_point) per tensor, scales[c] * q per channel `axis`)."""

    # defaults for what only some weights set (instance attributes cost heap)
    scale = None
    zero_point = 0
    scales = None
    axis = 0
    _nd = None  # cached backend ndarray
    _vals = None  # cached decoded values

    def __init__(self, mv, dtype, shape, scale=None, zero_point=0, scales=None, axis=0, keep=None,
                 typed=None):
        if dtype not in ("f32", "f16", "i8"):
            raise ContainerError("kernels take f32, f16 or i8 weights, not %s" % dtype)
        self.mv = mv  # None for a RAM array (then `typed` is that array)
        self.dtype = dtype
        self.shape = tuple(shape)
        n = 1
        for d in self.shape:
            n *= d
        self.size = n
        if mv is not None and len(mv) != n * backend.ITEMSIZE[dtype]:
            raise ContainerError("weight of shape %s needs %d bytes, has %d"
                                 % (self.shape, n * backend.ITEMSIZE[dtype], len(mv)))
        self.quant = 2 if scales is not None else (1 if scale is not None else 0)
        if dtype == "i8" and not self.quant:
            raise ContainerError("i8 weight without a scale")
        if self.quant == 1:
            self.scale, self.zero_point = scale, zero_point
        elif self.quant == 2:
            self.scales, self.axis = scales, axis
        self.keep = keep  # the View (or array) that owns mv
        if typed is None and dtype != "f16":
            typed = _typed(mv, dtype, n)
        self.typed = typed

    def nd(self):
        """backend ndarray of the stored values (frombuffer: no copy); None for f16 on ulab and
        f32 on a double-float ulab (decode with decode_into)."""
        if self._nd is None:
            np = backend.np
            if self.mv is None:  # RAM array
                t = self.typed
                self._nd = np.array(t, dtype=_float()) if isinstance(t, array.array) else t.reshape((self.size,))
            elif backend.kind() == "numpy":
                self._nd = np.frombuffer(self.mv, {"f32": "<f4", "f16": "<f2", "i8": "i1"}[self.dtype])
            elif self.dtype == "i8":
                self._nd = np.frombuffer(self.mv, dtype=np.int8)
            elif self.dtype == "f32" and np.array([0.0]).itemsize == 4:
                self._nd = np.frombuffer(self.mv, dtype=_float())
        return self._nd

    def values(self):
        """All real values as a flat float array decoded once and kept (for small tensors:
        biases of non-f32 dtype)."""
        if self.dtype == "f32":
            return self.typed
        if self._vals is None:
            v = array.array("f", bytes(4 * self.size))
            for i in range(self.size):
                v[i] = self.real(i)
            self._vals = v
        return self._vals

    def real(self, i):
        if self.dtype == "f16":
            return struct.unpack_from("<e", self.mv, 2 * i)[0]
        q = self.typed[i]
        if self.quant == 1:
            return self.scale * (q - self.zero_point)
        if self.quant == 2:
            inner = 1
            for d in self.shape[self.axis + 1:]:
                inner *= d
            return self.scales[(i // inner) % self.shape[self.axis]] * q
        return q


def weight(src):
    """Weight from a container View (what a bound Param's val() returns), a Weight, or an
    owned RAM float array (array('f') / ndarray) with a `shape` given by the caller."""
    if isinstance(src, Weight) or src is None:
        return src
    info = src.info
    scales = None
    if info.quant == 2:
        sv = src.scales()
        scales = _typed(sv.mv, "f32", sv.size)
    return Weight(src.mv, src.dtype, src.shape, info.scale if info.quant == 1 else None,
                  info.zero_point, scales, info.axis, keep=src)


def raw(buf, dtype, shape, scale=None, zero_point=0, scales=None, axis=0):
    """Weight over raw little-endian bytes (no container): scales is a flat float sequence."""
    return Weight(memoryview(buf), dtype, shape, scale, zero_point, scales, axis, keep=buf)


def ram_weight(values, shape):
    """Weight over an owned RAM f32 array (array('f') or ndarray), e.g. a Param after mut()."""
    return Weight(None, "f32", shape, keep=values, typed=values)


# --- scratch ------------------------------------------------------------------------------

_scratch = {}


def _buf(role, typecode, n):
    """A module scratch array of at least n items, reused across calls and layers."""
    a = _scratch.get(role)
    if a is None or len(a) < n:
        a = array.array(typecode, bytes(n * (4 if typecode in "fi" else 1)))
        _scratch[role] = a
    return a


def _np_scratch(n, role="np"):
    np = backend.np
    a = _scratch.get(role)
    if a is None or a.size < n:
        a = np.zeros(n, dtype=_float())
        _scratch[role] = a
    return a[:n]


def scratch_bytes():
    """Bytes held by the kernels' scratch buffers."""
    return sum(backend.array_nbytes(a) for a in _scratch.values())


def free_scratch():
    _scratch.clear()


def decode_into(w, out, first=0, n=None):
    """Real values first..first+n of an f16/f32 weight into out[0:n] (f16: viper bit
    conversion where available, else struct)."""
    n = w.size - first if n is None else n
    if w.dtype == "f16":
        if _viper is not None and isinstance(out, array.array):
            _viper.f16_to_f32(w.mv, first, out, n)
            return out
        i = 0
        while i < n:
            m = min(32, n - i)
            vals = struct.unpack_from("<%de" % m, w.mv, 2 * (first + i))
            for j in range(m):
                out[i + j] = vals[j]
            i += m
        return out
    t = w.typed
    for i in range(n):
        out[i] = t[first + i]
    return out


# --- activations --------------------------------------------------------------------------

def act(values, shape=None):
    """An activation for the current path from a flat sequence of floats (C, H, W order)."""
    n = len(values)
    if path() == "ulab":
        np = backend.np
        a = np.array([float(v) for v in values], dtype=_float())
        if shape is not None and len(shape) == 3:
            a = a.reshape((shape[0] * shape[1], shape[2]))
        return a
    out = array.array("f", bytes(4 * n))
    for i in range(n):
        out[i] = values[i]
    return out


def tolist(a):
    """Flat list of floats of an activation (either representation)."""
    if isinstance(a, array.array):
        return list(a)
    return [float(v) for v in a.flatten()]


def _float():
    """The backend's float dtype: float32 on numpy, ulab's float (f32 or f64 by build)."""
    np = backend.np
    return np.float32 if backend.kind() == "numpy" else np.float


def _new(n):
    return array.array("f", bytes(4 * n))


def _quantize(x, n, q):
    """Symmetric per-tensor int8 quantization of x[0:n] into q (round half to even); returns
    the scale (0.0 for an all-zero x). _viper.quantize is the same loop compiled native."""
    if path() == "viper":
        return _viper.quantize(x, n, q)
    amax = 0.0
    for i in range(n):
        v = x[i]
        if v > amax:
            amax = v
        elif -v > amax:
            amax = -v
    if amax == 0.0:
        return 0.0
    inv = 127.0 / amax
    for i in range(n):
        q[i] = round(x[i] * inv)
    return amax / 127.0


def _rescale(acc, out, n, s, scales=None):
    """out[o] = acc[o] * s (per tensor) or acc[o] * (s * scales[o]) (per channel)."""
    if path() == "viper":
        return _viper.rescale(acc, out, n, s, scales)
    if scales is None:
        for o in range(n):
            out[o] = acc[o] * s
    else:
        for o in range(n):
            out[o] = acc[o] * (s * scales[o])


def _zero(a, n):
    for i in range(n):
        a[i] = 0


# --- linear ---------------------------------------------------------------------------------

def linear(x, w, b=None, t=0, out=None):
    """y = W x + b. W is [out, in] (torch layout), or [in, out] when t=1 (ONNX MatMul)."""
    w = weight(w)
    if len(w.shape) != 2:
        raise ContainerError("linear weight must be 2-D, is %s" % (w.shape,))
    n_in, n_out = (w.shape[0], w.shape[1]) if t else (w.shape[1], w.shape[0])
    if path() == "ulab":
        return _linear_nd(x, w, b, t, n_in, n_out)
    if out is None:
        out = _new(n_out)
    # every buffer (a non-f32 bias decodes once) before the float loops: their garbage floats
    # leave the heap in small holes until the next collection
    bv = weight(b).values() if b is not None else None
    if w.dtype == "i8":
        _linear_i8(x, w, t, n_in, n_out, out)
    else:
        _linear_f(x, w, t, n_in, n_out, out)
    if bv is not None:
        for o in range(n_out):
            out[o] += bv[o]
    return out


def _linear_f(x, w, t, n_in, n_out, out):
    if w.dtype == "f16":
        row = _buf("row", "f", n_out if t else n_in)
    wt = w.typed
    if t:  # [in, out]: walk rows of W, one input at a time
        for o in range(n_out):
            out[o] = 0.0
        for i in range(n_in):
            xi = x[i]
            k = i * n_out
            if w.dtype == "f16":
                decode_into(w, row, k, n_out)
                for o in range(n_out):
                    out[o] += row[o] * xi
            else:
                for o in range(n_out):
                    out[o] += wt[k + o] * xi
        return
    k = 0
    for o in range(n_out):
        s = 0.0
        if w.dtype == "f16":
            decode_into(w, row, k, n_in)
            for i in range(n_in):
                s += row[i] * x[i]
        else:
            for i in range(n_in):
                s += wt[k + i] * x[i]
        out[o] = s
        k += n_in


def _linear_i8(x, w, t, n_in, n_out, out):
    q = _buf("q", "b", n_in)
    acc = _buf("acc", "i", n_out)
    out_axis = 1 if t else 0
    if w.quant == 2 and w.axis != out_axis:  # scales along the input: fold them into x first
        xs = _buf("xs", "f", n_in)
        for i in range(n_in):
            xs[i] = x[i] * w.scales[i]
        x = xs
    sx = _quantize(x, n_in, q)
    if sx == 0.0:
        _zero(out, n_out)
        return
    if path() == "viper":
        (_viper.dense_i8_t if t else _viper.dense_i8)(w.mv, q, acc, n_in, n_out)
    else:
        _dense_i8_pure(w.typed, q, acc, n_in, n_out, t)
    if w.quant == 1:
        zp = w.zero_point
        if zp:
            sq = 0
            for i in range(n_in):
                sq += q[i]
            for o in range(n_out):
                acc[o] -= zp * sq
        _rescale(acc, out, n_out, sx * w.scale)
    elif w.axis == out_axis:
        _rescale(acc, out, n_out, sx, w.scales)
    else:
        _rescale(acc, out, n_out, sx)


def _dense_i8_pure(wt, q, acc, n_in, n_out, t):
    if t:
        for o in range(n_out):
            acc[o] = 0
        k = 0
        for i in range(n_in):
            xi = q[i]
            if xi:
                for o in range(n_out):
                    acc[o] += wt[k + o] * xi
            k += n_out
        return
    k = 0
    for o in range(n_out):
        s = 0
        for i in range(n_in):
            s += wt[k + i] * q[i]
        acc[o] = s
        k += n_in


def _nd_weight(w, shape2):
    """The stored values as a backend ndarray of shape2 (f16, and f32 on a double-float ulab,
    decoded into the reused scratch)."""
    a = w.nd()
    if a is None:  # ulab: no f16 dtype (and maybe no f32): decode into the reused scratch
        a = decode_into(w, _np_scratch(w.size))
    return a.reshape(shape2)


def _bias_nd(b):
    np = backend.np
    b = weight(b)
    a = b.nd() if b.dtype != "i8" else None
    if a is None:
        v = b.values()
        a = np.array([v[i] for i in range(b.size)], dtype=_float())
    return a


def _scales_nd(w, n):
    np = backend.np
    if backend.kind() == "numpy":
        return np.asarray(w.scales, dtype=np.float32)
    return np.array([w.scales[i] for i in range(n)], dtype=_float())


def _linear_nd(x, w, b, t, n_in, n_out):
    np = backend.np
    a = _nd_weight(w, w.shape)
    x = x.reshape((n_in,)) if len(x.shape) != 1 else x
    if w.quant == 2 and w.axis != (1 if t else 0):
        x = x * _scales_nd(w, n_in)
    y = np.dot(x, a) if t else np.dot(a, x)  # a new array: the rest works in place on it
    if backend.kind() == "numpy":
        y = y.astype(np.float32)
    if w.quant == 1:
        if w.zero_point:
            y -= w.zero_point * np.sum(x)
        y *= w.scale
    elif w.quant == 2 and w.axis == (1 if t else 0):
        y *= _scales_nd(w, n_out)
    if b is not None:
        y += _bias_nd(b)
    return y


# --- conv2d ---------------------------------------------------------------------------------

def conv_shape(shape, w_shape, stride, pad):
    c, h, wd = shape
    o, ci, kh, kw = w_shape
    if ci != c:
        raise ContainerError("conv2d weight has %d input channels, input has %d" % (ci, c))
    oh = (h + 2 * pad[0] - kh) // stride[0] + 1
    ow = (wd + 2 * pad[1] - kw) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise ContainerError("conv2d kernel %dx%d larger than padded input %dx%d" % (kh, kw, h, wd))
    return (o, oh, ow)


def conv2d(x, shape, w, b=None, stride=(1, 1), pad=(0, 0), out=None):
    """Cross-correlation like torch.nn.Conv2d (groups 1, dilation 1, zero padding), batch 1.
    x has shape (C, H, W); W is [O, C, KH, KW]."""
    w = weight(w)
    if len(w.shape) != 4:
        raise ContainerError("conv2d weight must be 4-D, is %s" % (w.shape,))
    if w.quant == 1 and w.zero_point:
        raise ContainerError("conv2d needs a symmetric int8 weight (zero_point 0)")
    if w.quant == 2 and w.axis != 0:
        raise ContainerError("conv2d per-channel scales must be on axis 0")
    o, oh, ow = conv_shape(shape, w.shape, stride, pad)
    if path() == "ulab":
        return _conv_nd(x, shape, w, b, stride, pad, oh, ow)
    if out is None:
        out = _new(o * oh * ow)
    c, h, wd = shape
    ph, pw = pad
    hp, wp = h + 2 * ph, wd + 2 * pw
    bv = weight(b).values() if b is not None else None  # before the float loops (see linear)
    if w.dtype == "i8":
        _conv_i8(x, shape, w, stride, pad, oh, ow, out)
    else:
        xp = x
        if ph or pw:  # zero-padded copy: the inner loops then need no bounds checks
            xp = _buf("xpad", "f", c * hp * wp)
            _zero(xp, c * hp * wp)
            for ci in range(c):
                for y in range(h):
                    src = (ci * h + y) * wd
                    dst = (ci * hp + y + ph) * wp + pw
                    for xx in range(wd):
                        xp[dst + xx] = x[src + xx]
        _conv_f(xp, c, hp, wp, w, stride, oh, ow, out)
    if bv is not None:
        n = oh * ow
        for oc in range(o):
            bo = bv[oc]
            base = oc * n
            for i in range(n):
                out[base + i] += bo
    return out


def _conv_f(xp, c, hp, wp, w, stride, oh, ow, out):
    o, _, kh, kw = w.shape
    sh, sw = stride
    ksize = c * kh * kw
    if w.dtype == "f16":
        wt = _buf("row", "f", ksize)
    else:
        wt = w.typed
    a = 0
    for oc in range(o):
        if w.dtype == "f16":
            decode_into(w, wt, oc * ksize, ksize)
            w0 = 0
        else:
            w0 = oc * ksize
        for y in range(oh):
            for xo in range(ow):
                s = 0.0
                wk = w0
                for ci in range(c):
                    row = (ci * hp + y * sh) * wp + xo * sw
                    for ky in range(kh):
                        for kx in range(kw):
                            s += wt[wk + kx] * xp[row + kx]
                        wk += kw
                        row += wp
                out[a] = s
                a += 1


def _conv_i8(x, shape, w, stride, pad, oh, ow, out):
    c, h, wd = shape
    o, _, kh, kw = w.shape
    ph, pw = pad
    hp, wp = h + 2 * ph, wd + 2 * pw
    q = _buf("q", "b", c * hp * wp)
    _zero(q, c * hp * wp)
    n_out = o * oh * ow
    acc = _buf("acc", "i", n_out)
    # quantize straight into the padded layout: channel by channel rows of wd values
    amax = 0.0
    n = c * h * wd
    for i in range(n):
        v = x[i]
        if v > amax:
            amax = v
        elif -v > amax:
            amax = -v
    if amax == 0.0:
        _zero(out, n_out)
        return
    inv = 127.0 / amax
    for ci in range(c):
        for y in range(h):
            src = (ci * h + y) * wd
            dst = (ci * hp + y + ph) * wp + pw
            for xx in range(wd):
                q[dst + xx] = round(x[src + xx] * inv)
    sx = amax / 127.0
    if path() == "viper":
        dims = _buf("dims", "i", 10)
        d = (c, hp, wp, o, kh, kw, stride[0], stride[1], oh, ow)
        for i in range(10):
            dims[i] = d[i]
        _viper.conv_i8(w.mv, q, acc, dims)
    else:
        _conv_i8_pure(w.typed, q, acc, c, hp, wp, o, kh, kw, stride, oh, ow)
    n = oh * ow
    for oc in range(o):
        s = sx * (w.scales[oc] if w.quant == 2 else w.scale)
        base = oc * n
        for i in range(n):
            out[base + i] = acc[base + i] * s


def _conv_i8_pure(wt, q, acc, c, hp, wp, o, kh, kw, stride, oh, ow):
    sh, sw = stride
    ksize = c * kh * kw
    a = 0
    for oc in range(o):
        for y in range(oh):
            for xo in range(ow):
                s = 0
                wk = oc * ksize
                for ci in range(c):
                    row = (ci * hp + y * sh) * wp + xo * sw
                    for ky in range(kh):
                        for kx in range(kw):
                            s += wt[wk + kx] * q[row + kx]
                        wk += kw
                        row += wp
                acc[a] = s
                a += 1


def _conv_nd(x, shape, w, b, stride, pad, oh, ow):
    # im2col with 2-D slices only: x is (C * H, W); cols is (C * KH * KW, OH * OW)
    np = backend.np
    c, h, wd = shape
    o, _, kh, kw = w.shape
    ph, pw = pad
    sh, sw = stride
    hp, wp = h + 2 * ph, wd + 2 * pw
    x = x.reshape((c * h, wd))
    # the padded input and the im2col matrix live in module scratch, reused by every call and
    # layer: after the first call a forward pass needs no large new block but the results
    if ph or pw:
        xp = _np_scratch(c * hp * wp, "nd_xpad").reshape((c * hp, wp))
        xp[:, :] = 0.0
        for ci in range(c):
            xp[ci * hp + ph: ci * hp + ph + h, pw: pw + wd] = x[ci * h: ci * h + h, :]
    else:
        xp = x
    cols = _np_scratch(c * kh * kw * oh * ow, "nd_cols").reshape((c * kh * kw, oh * ow))
    r = 0  # every element of cols is written below
    for ci in range(c):
        for ky in range(kh):
            for kx in range(kw):
                top = ci * hp + ky
                patch = xp[top: top + sh * (oh - 1) + 1: sh, kx: kx + sw * (ow - 1) + 1: sw]
                cols[r, :] = patch.flatten()
                r += 1
    a = _nd_weight(w, (o, c * kh * kw))
    y = np.dot(a, cols)  # a new array: the rest works in place on it
    if backend.kind() == "numpy":
        y = y.astype(np.float32)
    if w.quant == 1:
        y *= w.scale
    elif w.quant == 2:
        y *= _scales_nd(w, o).reshape((o, 1))
    if b is not None:
        y += _bias_nd(b).reshape((o, 1))
    return y.reshape((o * oh, ow))


# --- pooling, activations -----------------------------------------------------------------

def pool_shape(shape, k, stride):
    c, h, w = shape
    oh = (h - k[0]) // stride[0] + 1
    ow = (w - k[1]) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise ContainerError("pool kernel %dx%d larger than input %dx%d" % (k[0], k[1], h, w))
    return (c, oh, ow)


def maxpool(x, shape, k, stride=None, out=None):
    return _pool(x, shape, k, stride or k, out, True)


def avgpool(x, shape, k, stride=None, out=None):
    return _pool(x, shape, k, stride or k, out, False)


def _pool(x, shape, k, stride, out, is_max):
    c, h, wd = shape
    _, oh, ow = pool_shape(shape, k, stride)
    kh, kw = k
    sh, sw = stride
    if path() == "ulab":
        np = backend.np
        x = x.reshape((c * h, wd))
        y = np.zeros((c * oh, ow), dtype=_float())
        for ci in range(c):
            acc = None
            for ky in range(kh):
                for kx in range(kw):
                    top = ci * h + ky
                    p = x[top: top + sh * (oh - 1) + 1: sh, kx: kx + sw * (ow - 1) + 1: sw]
                    acc = p if acc is None else (np.maximum(acc, p) if is_max else acc + p)
            y[ci * oh: ci * oh + oh, :] = acc if is_max else acc / (kh * kw)
        return y.astype(np.float32) if backend.kind() == "numpy" else y
    if out is None:
        out = _new(c * oh * ow)
    a = 0
    inv = 1.0 / (kh * kw)
    for ci in range(c):
        for y in range(oh):
            for xo in range(ow):
                base = (ci * h + y * sh) * wd + xo * sw
                m = x[base] if is_max else 0.0
                for ky in range(kh):
                    row = base + ky * wd
                    for kx in range(kw):
                        v = x[row + kx]
                        if is_max:
                            if v > m:
                                m = v
                        else:
                            m += v
                out[a] = m if is_max else m * inv
                a += 1
    return out


def relu(x):
    """In place where the activation is a flat array; returns the result."""
    if not isinstance(x, array.array):
        return backend.np.maximum(x, 0.0)
    for i in range(len(x)):
        if x[i] < 0.0:
            x[i] = 0.0
    return x


def softmax(x):
    """In place where the activation is a flat array; returns the result."""
    if not isinstance(x, array.array):
        np = backend.np
        e = np.exp(x - np.max(x))
        return e / np.sum(e)
    m = max(x)
    s = 0.0
    for i in range(len(x)):
        v = math.exp(x[i] - m)
        x[i] = v
        s += v
    for i in range(len(x)):
        x[i] /= s
    return x


def argmax(x):
    if not isinstance(x, array.array):
        return int(backend.np.argmax(x.flatten() if len(x.shape) > 1 else x))
    best = 0
    for i in range(1, len(x)):
        if x[i] > x[best]:
            best = i
    return best
