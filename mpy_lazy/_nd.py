# Float kernels on ndarrays: the 'ulab' path (ulab.numpy on firmware that has it, numpy on
# CPython), the fast path of the float conv, depthwise, linear and tconv records (their rooms
# in mpy_lazy/ops hold the reference kernels: a kernel here returns True to leave a record to
# it, kernels.table). Imports nothing above it (backend, _arith). linear is a
# `dot` over the weights in place (where the backend can view them: f32 storage on a
# single-float ulab or numpy; else decoded once); conv2d and depthwise are per-kernel-position
# products on numpy only (ulab's 2-D arrays make them loops). What is made once per record (the
# weights as matrices) is kept in E.cache.
from . import backend
from ._arith import ACTS


def _np():
    return backend.np


def _arena(E):
    """The f32 arena as a flat ndarray, in place (made once per kernel path)."""
    nd = E.cache.get("arena")
    if nd is None:
        np = _np()
        if backend.kind() == "numpy":
            nd = np.frombuffer(E.A, dtype=np.float32)
        else:
            nd = np.frombuffer(E.A, dtype=np.float)
        E.cache["arena"] = nd
    return nd


def _matrix(E, slot, off, wdt, n, shape):
    np = _np()
    b = E.B[slot]
    if wdt == 1 and (backend.kind() == "numpy" or backend.SINGLE_FLOAT):
        if backend.kind() == "numpy":
            return np.frombuffer(b, dtype=np.float32, count=n, offset=off).reshape(shape)
        return np.frombuffer(b, dtype=np.float, count=n, offset=off).reshape(shape)
    # f16, or f32 on a double-float ulab: decoded once into the ndarray, kept (element by
    # element: a list of n boxed floats would take 4-5x the ndarray's bytes)
    vals = np.zeros(n, dtype=_arena(E).dtype)
    if wdt == 1:
        f = E.sf[slot]
        for i in range(n):
            vals[i] = f[off // 4 + i]
    else:
        import struct

        for i in range(n):
            vals[i] = struct.unpack_from("<e", b, off + 2 * i)[0]
    return vals.reshape(shape)


def fdense(E, P, k):
    np = _np()
    c = E.cache.get(k)
    n_in, n_out, wsi = P[k + 8], P[k + 2], P[k + 10]
    if c is None:
        shape = (n_out, n_in) if wsi == 1 else (n_in, n_out)
        wm = _matrix(E, P[k + 14], P[k + 15], P[k + 4], n_in * n_out, shape)
        bias = None
        if P[k + 11]:
            f = E.sf[P[k + 16]]
            b0 = P[k + 17] // 4
            bias = np.array([f[b0 + i] for i in range(n_out)], dtype=_arena(E).dtype)
        c = E.cache[k] = (wm, bias)
    a = _arena(E)
    xo, yo = P[k + 6] // 4, P[k + 7] // 4
    x = a[xo: xo + n_in]
    y = np.dot(c[0], x) if wsi == 1 else np.dot(x, c[0])
    if c[1] is not None:
        y = y + c[1]
    y = _act(np, y, P[k + 3])
    a[yo: yo + n_out] = y


def _act(np, y, act):
    """The fused activation of the act field (_arith.ACTS): 1 relu, 2 relu6, 3 finite."""
    lo_hi = ACTS[act]
    return y if lo_hi is None else np.minimum(np.maximum(y, lo_hi[0]), lo_hi[1])


def fconv(E, P, k):
    if backend.kind() != "numpy":
        return True  # ulab: 2-D arrays, the loops read the weights in place
    np = _np()
    h, w, c, oh, ow, oc, kh, kw = P[k + 8], P[k + 9], P[k + 10], P[k + 11], P[k + 12], P[k + 2], P[k + 13], P[k + 14]
    sh, sw, dh, dw, pt, pl = P[k + 15], P[k + 16], P[k + 17], P[k + 18], P[k + 19], P[k + 20]
    wso, wsy, wsx, wsc, cpg, opg = P[k + 21], P[k + 22], P[k + 23], P[k + 24], P[k + 25], P[k + 26]
    # the padded input must stay a usual size (a huge dilation with a huge pad is legal, and
    # runs on the loops)
    pb = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    pr = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pl)
    hp, wp = h + pt + pb, w + pl + pr
    if hp * wp > 4 * h * w + 1024:
        return True
    dwise = (P[k] & 255) == 17
    cache = E.cache.get(k)
    if cache is None:
        n = oc * kh * kw * cpg
        flat = _matrix(E, P[k + 32], P[k + 33], P[k + 4], n, (n,)).astype(np.float32)
        # element (o, ky, kx, ci) at o*WSO + ky*WSY + kx*WSX + ci*WSC: one matrix per tap
        o = np.arange(oc)[:, None]
        ci = np.arange(cpg)[None, :]
        mats = []
        for ky in range(kh):
            for kx in range(kw):
                idx = o * wso + ky * wsy + kx * wsx + ci * wsc  # (oc, cpg)
                m = flat[idx]
                mats.append(m[:, 0] if dwise else m.T)  # depthwise (oc,), conv (cpg, oc)
        bias = None
        if P[k + 28]:
            f = E.sf[P[k + 34]]
            b0 = P[k + 35] // 4
            bias = np.array([f[b0 + i] for i in range(oc)], dtype=np.float32)
        cache = E.cache[k] = (mats, bias)
    mats, bias = cache
    a = _arena(E)
    x = a[P[k + 6] // 4: P[k + 6] // 4 + h * w * c].reshape((h * w, c))
    if hp != h or wp != w:
        xp = np.zeros((hp * wp, c), dtype=np.float32)
        for r in range(h):
            xp[(r + pt) * wp + pl: (r + pt) * wp + pl + w, :] = x[r * w: r * w + w, :]
    else:
        xp = x
    y = a[P[k + 7] // 4: P[k + 7] // 4 + oh * ow * oc].reshape((oh * ow, oc))
    act = P[k + 3]
    for oy in range(oh):
        acc = None
        for ky in range(kh):
            r0 = (oy * sh + ky * dh) * wp
            for kx in range(kw):
                s0 = r0 + kx * dw
                patch = xp[s0: s0 + sw * (ow - 1) + 1: sw, :]
                m = mats[ky * kw + kx]
                if dwise:
                    if opg > 1:
                        patch = np.repeat(patch, opg, axis=1)
                    t = patch * m
                elif opg == oc:
                    t = np.dot(patch, m)
                else:  # grouped: one dot per group
                    t = np.concatenate([np.dot(patch[:, gi * cpg:(gi + 1) * cpg], m[:, gi * opg:(gi + 1) * opg])
                                        for gi in range(oc // opg)], axis=1)
                acc = t if acc is None else acc + t
        if bias is not None:
            acc = acc + bias
        acc = _act(np, acc, act)
        y[oy * ow:(oy + 1) * ow, :] = acc


fdepthwise = fconv


def ftconv(E, P, k):
    """Transpose conv (the ftconv record, ops/tconv.py's ftconv): per kernel tap, the input pixels that
    reach the output times that tap's [C, OC] matrix, added into every SH-th row and SW-th
    column of the output from the first one they reach."""
    if backend.kind() != "numpy":
        return True
    np = _np()
    oc, h, w, c, oh, ow, kh, kw = P[k + 2], P[k + 8], P[k + 9], P[k + 10], P[k + 11], P[k + 12], P[k + 13], P[k + 14]
    sh, sw, pt, pl = P[k + 15], P[k + 16], P[k + 17], P[k + 18]
    cache = E.cache.get(k)
    if cache is None:
        wm = _matrix(E, P[k + 22], P[k + 23], 1, oc * kh * kw * c, (oc, kh, kw, c)).astype(np.float32)
        mats = [wm[:, ky, kx, :].T.copy() for ky in range(kh) for kx in range(kw)]  # (C, OC) each
        bias = None
        if P[k + 20]:
            f = E.sf[P[k + 24]]
            b0 = P[k + 25] // 4
            bias = np.array([f[b0 + i] for i in range(oc)], dtype=np.float32)
        cache = E.cache[k] = (mats, bias)
    mats, bias = cache
    a = _arena(E)
    x = a[P[k + 6] // 4: P[k + 6] // 4 + h * w * c].reshape((h, w, c))
    acc = np.zeros((oh, ow, oc), dtype=np.float32)
    if bias is not None:
        acc += bias

    def span(n, out, s, pad, t):  # the input indices i with 0 <= i * s + t - pad < out
        i0 = max(0, -((t - pad) // s))
        i1 = min(n - 1, (out - 1 + pad - t) // s)
        return i0, i1, i0 * s + t - pad

    for ky in range(kh):
        iy0, iy1, oy0 = span(h, oh, sh, pt, ky)
        if iy1 < iy0:
            continue
        for kx in range(kw):
            ix0, ix1, ox0 = span(w, ow, sw, pl, kx)
            if ix1 < ix0:
                continue
            ny, nx = iy1 - iy0 + 1, ix1 - ix0 + 1
            t = np.dot(x[iy0:iy1 + 1, ix0:ix1 + 1, :].reshape((ny * nx, c)), mats[ky * kw + kx])
            acc[oy0: oy0 + (ny - 1) * sh + 1: sh, ox0: ox0 + (nx - 1) * sw + 1: sw, :] += t.reshape((ny, nx, oc))
    acc = _act(np, acc, P[k + 3])
    yo = P[k + 7] // 4
    a[yo: yo + oh * ow * oc] = acc.reshape(-1)
