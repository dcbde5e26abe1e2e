# maxpool and avgpool over k windows with stride and (asymmetric) padding, NHWC. Padded
# positions are skipped: the average is over the in-bounds elements (TFLite's SAME pooling,
# ONNX's count_include_pad=0). int8: the output has the input's quantization (as TFLite
# requires), the fused activation is clamp=.
from .. import check
from ..graph import check_shape, clamp, pairs
from . import Op as Base, act_code, ints


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
        # the kernels' record from word 2 (mpy_lazy/_pure.py, "pool record"): C ZY LO HI XO YO H W
        # C OH OW KH KW SH SW - - PT PL (float: ACT for ZY); record() fills XO, YO
        if self.int8():
            if tuple(kv["q"]) != tuple(x.q):
                raise self.fail("int8 pooling keeps the input's q=%s,%d" % x.q, "q")
            lo, hi = clamp(kv, n)
            self.p = ints((c, x.q[1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pad[0], pad[1]))
        else:
            self.p = ints((c, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pad[0], pad[1]))
        self.out = (check_shape((oh, ow, c), n, "output"), x.dtype, kv.get("q"))

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        mx = self.name == "maxpool"
        if self.y.dtype == "i8":
            return [c.record(check.MAXPOOL if mx else check.AVGPOOL, p)]
        return [c.record(check.FMAXPOOL if mx else check.FAVGPOOL, p)]
