# conv2d (groups, dilation, asymmetric padding) and depthwise (channel multiplier), NHWC.
#
# Weights in place, in the layout the model came with (key wl): conv2d `ohwi` (TFLite, and
# what mpy-lazy pack writes) or `oihw` (torch); depthwise `1hwo` (TFLite) or `o1hw` (torch).
# The kernels walk them through element strides, so no layout is ever copied.
# int8: per-channel requantization multipliers and shifts in tensor m ([2, out] int32), bias
# int32, input zero point from the input value, output q=, fused activation as clamp=.
import array

from .. import kernels
from ..graph import check_shape, clamp, pairs
from . import Op as Base, act_range, check_requant, i32, ints, kbuf, typed

# int32 accumulators of the int8 kernels (at least one pixel's): they are requantized every
# RP = ACC // OC output pixels, so the scratch, which lies in the arena beside the op's input
# and output, stays small (a whole output row of them added 1-2 KB to the arena's peak; 32
# rather than 64 takes 128 bytes off the digits CNN's peak for 0.1-1.0 more cycles per MAC on
# the Pico: VWW 17.5 -> 18.5, whose early layers have 8 and 16 channels)
ACC = 32


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        dw = name == "depthwise"
        shape = x.shape
        if dw and len(shape) == 1:  # a per-channel affine on a vector (a standalone BatchNorm)
            shape = (1, 1, shape[0])
        if len(shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        h, w, c = shape
        kh, kw = pairs(kv, "k", None, n)
        sh, sw = pairs(kv, "stride", (1, 1), n)
        dh, dwid = pairs(kv, "dil", (1, 1), n)
        pad = kv.get("pad", (0,))
        if len(pad) == 1:
            pad = pad * 4
        elif len(pad) == 2:
            pad = (pad[0], pad[1], pad[0], pad[1])
        if len(pad) != 4:
            raise self.fail("pad= takes 1, 2 or 4 integers (top,left,bottom,right)", "pad")
        ext_h, ext_w = dh * (kh - 1) + 1, dwid * (kw - 1) + 1
        for i, v in enumerate(pad):
            if not 0 <= v < (ext_h if i % 2 == 0 else ext_w):
                raise self.fail("pad %s: each must be >= 0 and smaller than the kernel" % (pad,), "pad")
        oh = (h + pad[0] + pad[2] - ext_h) // sh + 1
        ow = (w + pad[1] + pad[3] - ext_w) // sw + 1
        if oh < 1 or ow < 1:
            raise self.fail("kernel %dx%d larger than the padded input %dx%d" % (ext_h, ext_w, h, w), "k")
        if dw:
            mult = kv.get("mult", 1)
            if not 1 <= mult <= 4096:
                raise self.fail("mult=%d: must be 1..4096" % mult, "mult")
            oc, cpg, opg = c * mult, 1, mult
            if kv.get("wl", "1hwo") == "1hwo":
                wshape, ws = (1, kh, kw, oc), (1, kw * oc, oc, 1)
            else:
                wshape, ws = (oc, 1, kh, kw), (kh * kw, kw, 1, 1)
        else:
            oc, g = kv["out"], kv.get("groups", 1)
            if not 1 <= g <= c or c % g or not 1 <= oc <= 65535 or oc % g:
                raise self.fail("out=%d, groups=%d do not divide %d input channels" % (oc, g, c), "groups")
            cpg, opg = c // g, oc // g
            if kv.get("wl", "ohwi") == "ohwi":
                wshape, ws = (oc, kh, kw, cpg), (kh * kw * cpg, kw * cpg, cpg, 1)
            else:
                wshape, ws = (oc, cpg, kh, kw), (cpg * kh * kw, kw, 1, kh * kw)
        out_shape = check_shape((oh, ow, oc) if len(x.shape) == 3 else (oc,), n, "output")
        # H W C OH OW | OC | KH KW SH SW DH DW PT PL WSO WSY WSX WSC CPG OPG (kernel order after OC)
        geom = (h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dwid, pad[0], pad[1]) + ws + (cpg, opg)
        hasb = "b" in kv
        q8 = self.int8()
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n)
            # the kernels' parameter layout (mpy_lazy/_pure.py, "conv / depthwise p"); prepare()
            # writes the arena offsets XO, YO. The op keeps nothing else of its geometry.
            rp = max(1, min(ow, ACC // oc))
            self.p = ints((0, 0, oc, kv["q"][1], lo, hi, 0, 0) + geom[:5] + geom[6:]
                          + (x.q[1], 1 if hasb else 0, rp))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, oc), "i32", init)
            if hasb:
                self.param("bias", "b", (oc,), "i32", init)
        else:
            self.geom = geom
            self.pads = pad
            self.hasb = hasb
            self.wl = kv.get("wl")
            self.lo, self.hi = act_range(kv)
            self.param("weight", "w", wshape, "f32", init)
            if "b" in kv:
                self.param("bias", "b", (oc,), "f32", init)
            self.fscratch = kh * kw * cpg  # one decoded f16 filter
        self.out = (out_shape, "i8" if q8 else "f32", kv.get("q"))

    # macs and scratch are read from the kernel's parameters (int8) or geometry (float), not
    # kept: every attribute of an op costs heap on the board
    @property
    def macs(self):
        p = getattr(self, "p", None)
        if p is not None:
            return p[11] * p[12] * p[2] * p[13] * p[14] * p[25]  # OH OW OC KH KW CPG
        g = self.geom
        return g[3] * g[4] * g[5] * g[6] * g[7] * g[18]

    @property
    def scratch(self):
        """int32 scratch of the int8 kernels: RP pixels' accumulators, then one pixel's window
        (conv2d) or a row of C zero points that padded taps read (depthwise in assembler)."""
        p = getattr(self, "p", None)
        if p is None:
            return 0
        window = max(p[13] * p[14], (p[10] + 3) // 4) if self.name == "depthwise" else p[13] * p[14] * p[25]
        return p[29] * p[2] + window

    def lag(self):
        """int8: the kernels (every path) compute output pixels in raster order and write
        each after reading its window, so the output may lie over the dying input, L bytes
        before it, if no write reaches a byte a later window reads: when pixel j's window is
        read, pixels before j may be written (to yo + j*OC), and the first byte any window
        from j on reads is xo + min(first(j), first of the next output row). L is the largest
        j*OC - that, over j. Each term is concave in the row and the column (separable), so
        its maximum is at an end or beside the kink where padding stops: a few candidates."""
        if self.y.dtype != "i8":
            return None
        p = self.p
        c, oh, ow, oc, sh, sw, pt, pl = p[10], p[11], p[12], p[2], p[15], p[16], p[19], p[20]
        wc = p[9] * c
        rows = [oy for oy in (0, 1, pt // sh - 1, pt // sh, pt // sh + 1, oh - 2, oh - 1) if 0 <= oy < oh]
        cols = [ox for ox in (0, 1, pl // sw, pl // sw + 1, ow - 1) if 0 <= ox < ow]
        a = max([oy * ow * oc - max(0, oy * sh - pt) * wc for oy in rows])
        b = max([ox * oc - max(0, ox * sw - pl) * c for ox in cols])
        lag = max(0, a + b)
        for oy in rows:
            if oy + 1 < oh:  # the next row's first window starts at its first column
                lag = max(lag, (oy * ow + ow - 1) * oc - max(0, (oy + 1) * sh - pt) * wc)
        return (lag + 3) // 4 * 4  # the arena's offsets stay word-aligned

    def prepare(self, m, scr=None):
        x, y = self.x[0], self.y
        if y.dtype == "i8":
            p = self.p
            p[6], p[7] = x.offset, y.offset
            bias = kbuf(self.bias, "i32") if p[28] else p
            n = p[29] * p[2]  # RP * OC
            check_requant(self, typed(self.requant, "i32"), p[2])
            self.b = (m.arena, kbuf(self.weight, "i8"), bias, kbuf(self.requant, "i32"),
                      i32(scr[:4 * n], n), i32(scr[4 * n:], self.scratch - n))
            return
        self.m = m
        self._wk = self._bnd = None  # ndarray copies of the weights: made again from what they are now
        v = self.weight.view
        self.wt = None if v is not None and v.dtype == "f16" else typed(self.weight, "f32")
        self.bv = typed(self.bias, "f32") if self.hasb else None
        # the ndarray path pads the input into an unplanned scratch: only for pads of a usual
        # size (a huge dilation with a huge pad is legal, and runs on the scalar loop)
        g = self.geom
        hp, wp = g[0] + g[12] + self.pads[2], g[1] + g[13] + self.pads[3]
        self.ndok = hp * wp <= 4 * g[0] * g[1] + 1024

    def run(self):
        if self.y.dtype == "i8":
            k = kernels.i8
            if self.name == "depthwise":
                k.depthwise(self.b, self.p)
            else:
                k.conv(self.b, self.p)
            return
        if kernels.nd() and self.m.nd is not None and self.ndok and _numpy():
            return self._run_nd()
        self._run_float()

    def _filter(self, o, row):
        """Weights of output channel o: (indexable, base index)."""
        g = self.geom
        if self.wt is not None:
            return self.wt, o * g[14]
        wso = g[14]
        n = g[6] * g[7] * g[18]
        v = self.weight.view
        if wso == n:  # the filter is contiguous: decode it into the row
            kernels.f16(v.mv, o * wso, row, n)
            return row, 0
        return None, 0

    def _run_float(self):
        h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl, wso, wsy, wsx, wsc, cpg, opg = self.geom
        a = self.m.farena
        xo, yo = self.x[0].offset, self.y.offset
        bv, lo, hi = self.bv, self.lo, self.hi
        row = self.m.fscratch
        if self.wt is None and wso != kh * kw * cpg:  # f16 in a non-contiguous layout: whole tensor
            wt, step = _decoded(self.weight.view, row), True
        else:
            step = False
        for o in range(oc):
            if step:
                base = o * wso
            else:
                wt, base = self._filter(o, row)
            ci0 = (o // opg) * cpg
            for oy in range(oh):
                y0 = oy * sh - pt
                for ox in range(ow):
                    x0 = ox * sw - pl
                    s = bv[o] if bv is not None else 0.0
                    for ky in range(kh):
                        iy = y0 + ky * dh
                        if iy < 0 or iy >= h:
                            continue
                        for kx in range(kw):
                            ix = x0 + kx * dw
                            if ix < 0 or ix >= w:
                                continue
                            xi = xo + (iy * w + ix) * c + ci0
                            wi = base + ky * wsy + kx * wsx
                            for ci in range(cpg):
                                s += wt[wi] * a[xi + ci]
                                wi += wsc
                    if lo is not None and s < lo:
                        s = lo
                    if hi is not None and s > hi:
                        s = hi
                    a[yo + (oy * ow + ox) * oc + o] = s

    def _run_nd(self):
        from .. import backend

        np = backend.np
        h, w, c, oh, ow, oc, kh, kw, sh, sw, dh, dw, pt, pl, wso, wsy, wsx, wsc, cpg, opg = self.geom
        m = self.m
        x = m.nd_view(self.x[0]).reshape((h * w, c))
        hp, wp = h + pt + self.pads[2], w + pl + self.pads[3]
        if hp != h or wp != w:
            xp = m.nd_scratch("pad", hp * wp * c).reshape((hp * wp, c))
            xp[:, :] = 0.0
            for r in range(h):
                xp[(r + pt) * wp + pl: (r + pt) * wp + pl + w, :] = x[r * w: r * w + w, :]
        else:
            xp, wp = x, w
        wk = _weights_nd(self, np)  # (kh * kw, cpg, oc) for conv, (kh * kw, oc) for depthwise
        y = m.nd_view(self.y).reshape((oh * ow, oc))
        dwise = self.name == "depthwise"
        for oy in range(oh):
            acc = None
            for ky in range(kh):
                r0 = (oy * sh + ky * dh) * wp
                for kx in range(kw):
                    s0 = r0 + kx * dw
                    patch = xp[s0: s0 + sw * (ow - 1) + 1: sw, :]
                    if dwise:
                        if opg > 1:
                            patch = np.concatenate([patch[:, i // opg: i // opg + 1] for i in range(oc)], axis=1)
                        t = patch * wk[ky * kw + kx]
                    elif opg == oc:
                        t = np.dot(patch, wk[ky * kw + kx])
                    else:  # grouped: one dot per group
                        t = np.concatenate([np.dot(patch[:, gi * cpg:(gi + 1) * cpg],
                                                   wk[ky * kw + kx][:, gi * opg:(gi + 1) * opg])
                                            for gi in range(oc // opg)], axis=1)
                    acc = t if acc is None else acc + t
            if self.bv is not None:
                acc = acc + _bias_nd(self, np)
            lo, hi = self.lo, self.hi
            if lo is not None:
                acc = np.maximum(acc, lo)
            if hi is not None:
                acc = np.minimum(acc, hi)
            y[oy * ow:(oy + 1) * ow, :] = acc


def _decoded(view, row):
    """A whole f16 tensor decoded once into RAM (f16 weights in a layout whose filters are not
    contiguous: rare)."""
    out = array.array("f", bytes(4 * view.size))
    kernels.f16(view.mv, 0, out, view.size)
    return out


def _numpy():
    """The ndarray conv path needs numpy's n-d views of the weights (CPython); on ulab (2-D,
    no f16) conv runs the loops, which read the weights in place."""
    from .. import backend

    return backend.kind() == "numpy"


def _weights_nd(op, np):
    """The weights as one matrix per kernel position: views of the tensor (f16: a decoded
    copy), made once."""
    cache = getattr(op, "_wk", None)
    if cache is not None:
        return cache
    h, w, c, oh, ow, oc, kh, kw = op.geom[:8]
    cpg = op.geom[18]
    v = op.weight.val()
    if op.weight.state != "bound":
        flat = np.asarray(v, dtype=np.float32)
    else:
        flat = np.frombuffer(v.mv, "<f2" if v.dtype == "f16" else "<f4").astype(np.float32)
    wl = op.wl
    if op.name == "depthwise":
        if wl == "o1hw":
            w3 = flat.reshape((oc, kh, kw))
            mats = [w3[:, ky, kx] for ky in range(kh) for kx in range(kw)]
        else:
            w3 = flat.reshape((kh, kw, oc))
            mats = [w3[ky, kx, :] for ky in range(kh) for kx in range(kw)]
    elif wl == "oihw":
        w4 = flat.reshape((oc, cpg, kh, kw))
        mats = [w4[:, :, ky, kx].T for ky in range(kh) for kx in range(kw)]
    else:
        w4 = flat.reshape((oc, kh, kw, cpg))
        mats = [w4[:, ky, kx, :].T for ky in range(kh) for kx in range(kw)]
    op._wk = mats
    return mats


def _bias_nd(op, np):
    cache = getattr(op, "_bnd", None)
    if cache is None:
        cache = op._bnd = np.array([op.bv[i] for i in range(op.geom[5])], dtype=np.float32)
    return cache
