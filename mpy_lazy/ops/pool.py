# maxpool and avgpool over k windows with stride and (asymmetric) padding, NHWC. Padded
# positions are skipped: the average is over the in-bounds elements (TFLite's SAME pooling,
# ONNX's count_include_pad=0). int8 and int16: the output has the input's quantization (as
# TFLite requires), the fused activation is clamp=.
from .._arith import ACTS, rec
from ..kinds import AVGPOOL, AVGPOOL16, AVGPOOL_U8, FAVGPOOL, FMAXPOOL, MAXPOOL, MAXPOOL16
from . import Op as Base, act_code, ints


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape, clamp, pairs

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
        # the kernels' record from word 2 ("pool record" below): C ZY LO HI XO YO H W
        # C OH OW KH KW SH SW - - PT PL (float: ACT for ZY); record() fills XO, YO
        dt = self.quantized(("i8", "i16"))
        if dt != "f32":
            if tuple(kv["q"]) != tuple(x.q):
                raise self.fail("integer pooling keeps the input's q=%s,%d" % x.q, "q")
            lo, hi = clamp(kv, n, dt)
            self.p = ints((c, x.q[1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pad[0], pad[1]))
        else:
            self.p = ints((c, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, 1, 1, pad[0], pad[1]))
        self.up = kv.get("round") == "up"  # (avgpool_u8: a legacy uint8 model's, halves rounded up)
        if self.up and (name != "avgpool" or dt != "i8"):
            raise self.fail("round=up is int8 avgpool's (legacy uint8 models)", "round")
        self.out = (check_shape((oh, ow, c), n, "output"), x.dtype, kv.get("q"))

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        mx = self.name == "maxpool"
        if self.y.dtype == "i8":
            return [c.record(MAXPOOL if mx else (AVGPOOL_U8 if self.up else AVGPOOL), p)]
        if self.y.dtype == "i16":
            return [c.record(MAXPOOL16 if mx else AVGPOOL16, p)]
        return [c.record(FMAXPOOL if mx else FAVGPOOL, p)]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {MAXPOOL: 'maxpool', AVGPOOL: 'avgpool', FMAXPOOL: 'fmaxpool', FAVGPOOL: 'favgpool',
           MAXPOOL16: 'maxpool16', AVGPOOL16: 'avgpool16', AVGPOOL_U8: 'avgpool_u8'}


def check(r, E):
    fl = r.kind in (FMAXPOOL, FAVGPOOL)
    h, w, c, oh, ow = r.dims((8, "h"), (9, "w"), (10, "c"), (11, "oh"), (12, "ow"))
    kh, kw, sh, sw = r.dims((13, "k"), (14, "k"), (15, "stride"), (16, "stride"))
    pt, pl = r.range(19, "pad", 0, kh - 1), r.range(20, "pad", 0, kw - 1)
    if (oh - 1) * sh - pt >= h or (ow - 1) * sw - pl >= w:
        r.fail("oh", "a window lies wholly in the padding (nothing to pool)")
    if h * w * c > 1 << 24 or oh * ow * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    size = 4 if fl else 2 if r.kind in (MAXPOOL16, AVGPOOL16) else 1
    if r.kind == AVGPOOL16 and kh * kw > 65536:  # (TFLM sums in int32)
        r.fail("k", "a %dx%d window: the int16 sum could overflow int32" % (kh, kw))
    r.region(6, "x", h * w * c * size, size)
    r.region(7, "y", oh * ow * c * size, size)
    r.range(2, "c", c, c)
    r.range(17, "dil", 1, 1)
    r.range(18, "dil", 1, 1)
    if fl:
        r.range(3, "act", 0, 3)
    else:
        r.clamp(size)



# pool record: 2 C 3 ZY 4 LO 5 HI 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW
# (17, 18 unused) 19 PT 20 PL; maxpool16, avgpool16: the same over int16 values (XO, YO bytes)

def maxpool(E, P, k):
    """Max over the in-bounds part of each window, clamped to [LO, HI]."""
    _pool(E, P, k, True)


def avgpool(E, P, k):
    """Mean over the in-bounds part of each window (TFLM: rounded half away from zero,
    same scale in and out), clamped to [LO, HI]."""
    _pool(E, P, k, False)


def avgpool_u8(E, P, k):
    """avgpool with TFLite's uint8 rounding (legacy uint8 models, int8 codes u - 128): the
    mean of the uint8 values rounded half up, (sum + n/2) / n; the same as half up on the
    codes' sum, which the kernels compute on sum + 128 n >= 0."""
    _pool(E, P, k, False, 1, True)


def maxpool16(E, P, k):
    _pool(E, P, k, True, 2)


def avgpool16(E, P, k):
    _pool(E, P, k, False, 2)


def _pool(E, P, k, is_max, es=1, up=False):
    p = rec(P, k)
    a = E.a16 if es == 2 else E.a8
    xo, yo, h, wd, c, oh, ow = p[6] // es, p[7] // es, p[8], p[9], p[10], p[11], p[12]
    kh, kw, sh, sw, pt, pl, lo, hi = p[13], p[14], p[15], p[16], p[19], p[20], p[4], p[5]
    q = yo
    for oy in range(oh):
        for ox in range(ow):
            for ch in range(c):
                s = (-32768 if es == 2 else -128) if is_max else 0
                n = 0
                for ky in range(kh):
                    iy = oy * sh - pt + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pl + kx
                        if 0 <= ix < wd:
                            v = a[xo + (iy * wd + ix) * c + ch]
                            if is_max:
                                if v > s:
                                    s = v
                            else:
                                s += v
                                n += 1
                if up:
                    s = (s + 128 * n + n // 2) // n - 128
                elif not is_max:
                    if s > 0:
                        s = (s + n // 2) // n
                    else:
                        s = -((-s + n // 2) // n)
                a[q] = lo if s < lo else (hi if s > hi else s)
                q += 1


# pool record (f32): 2 C 3 ACT 6 XO 7 YO 8 H 9 W 10 C 11 OH 12 OW 13 KH 14 KW 15 SH 16 SW 19 PT 20 PL

def fmaxpool(E, P, k):
    _fpool(E, P, k, True)


def favgpool(E, P, k):
    _fpool(E, P, k, False)


def _fpool(E, P, k, is_max):
    p = [P[k + i] for i in range(21)]
    a = E.af
    h, w, c, oh, ow, kh, kw, sh, sw, pt, pl = p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], p[16], p[19], p[20]
    xo, q = p[6] // 4, p[7] // 4
    lo, hi = ACTS[p[3]] or (None, None)
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
                a[q] = s
                q += 1
