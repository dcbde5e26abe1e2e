# maxpool and avgpool over k windows with stride and (asymmetric) padding, NHWC. Padded
# positions are skipped: the average is over the in-bounds elements (TFLite's SAME pooling,
# ONNX's count_include_pad=0). int8: the output has the input's quantization (as TFLite
# requires), the fused activation is clamp=.
from .. import kernels
from ..graph import check_shape, clamp, pairs
from . import Op as Base, act_range, ints


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        h, w, c = x.shape
        kh, kw = pairs(kv, "k", None, n)
        sh, sw = pairs(kv, "stride", (kh, kw), n)
        pad = kv.get("pad", (0,))
        if len(pad) == 1:
            pad = pad * 4
        elif len(pad) == 2:
            pad = (pad[0], pad[1], pad[0], pad[1])
        if len(pad) != 4:
            raise self.fail("pad= takes 1, 2 or 4 integers (top,left,bottom,right)", "pad")
        for i, v in enumerate(pad):
            if not 0 <= v < (kh if i % 2 == 0 else kw):
                raise self.fail("pad %s: each must be >= 0 and smaller than k" % (pad,), "pad")
        oh = (h + pad[0] + pad[2] - kh) // sh + 1
        ow = (w + pad[1] + pad[3] - kw) // sw + 1
        if oh < 1 or ow < 1:
            raise self.fail("window %dx%d larger than the padded input %dx%d" % (kh, kw, h, w), "k")
        if self.int8():
            if tuple(kv["q"]) != tuple(x.q):
                raise self.fail("int8 pooling keeps the input's q=%s,%d" % x.q, "q")
            lo, hi = clamp(kv, n)
            # the kernels' parameter layout (mpy_lazy/_pure.py, "pool p"); prepare() writes the
            # arena offsets XO, YO. The op keeps nothing else (heap is scarce).
            self.p = ints((0, 0, c, x.q[1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pad[0], pad[1]))
        else:
            self.geom = (h, w, c, oh, ow, kh, kw, sh, sw, pad[0], pad[1])
            self.lo, self.hi = act_range(kv)
        self.out = (check_shape((oh, ow, c), n, "output"), x.dtype, kv.get("q"))

    def prepare(self, m, scr=None):
        if self.y.dtype != "i8":
            self.m = m
        else:
            self.p[6], self.p[7] = self.x[0].offset, self.y.offset
            self.b = (m.arena,)


    def run(self):
        if self.y.dtype == "i8":
            if self.name == "maxpool":
                kernels.i8.maxpool(self.b, self.p)
            else:
                kernels.i8.avgpool(self.b, self.p)
            return
        h, w, c, oh, ow, kh, kw, sh, sw, pt, pl = self.geom
        a = self.m.farena
        xo, k = self.x[0].offset, self.y.offset
        is_max = self.name == "maxpool"
        lo, hi = self.lo, self.hi
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    s = None
                    cnt = 0
                    for ky in range(kh):
                        iy = oy * sh - pt + ky
                        if iy < 0 or iy >= h:
                            continue
                        for kx in range(kw):
                            ix = ox * sw - pl + kx
                            if 0 <= ix < w:
                                v = a[xo + (iy * w + ix) * c + ch]
                                if is_max:
                                    if s is None or v > s:
                                        s = v
                                else:
                                    s = v if s is None else s + v
                                    cnt += 1
                    if not is_max:
                        s = s / cnt
                    if lo is not None and s < lo:
                        s = lo
                    if hi is not None and s > hi:
                        s = hi
                    a[k] = s
                    k += 1
