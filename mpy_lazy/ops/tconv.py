# tconv: transpose convolution (TFLite's TRANSPOSE_CONV, ONNX's ConvTranspose without groups
# or dilation), NHWC, weights OHWI ([out, kh, kw, C]). The output size is given (size=oh,ow):
# output pixel (oy, ox) sums, over the taps with oy + pad_top - ky = iy * stride (and the same
# for x) inside the input, (x - zero point) x w. int8 (int32 accumulators) and 16x8 (int16
# values, int64 accumulators): TFLite Micro's arithmetic. Float (f32 weights; f16 ones are
# decoded into RAM): the same sums in float, act= fused.
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
        sh, sw = pairs(kv, "stride", (1, 1), n)
        oh, ow = pairs(kv, "size", None, n)
        pad = kv.get("pad", (0,))
        if len(pad) == 1:
            pad = pad * 2
        if len(pad) != 2 or not 0 <= pad[0] < kh or not 0 <= pad[1] < kw:
            raise self.fail("pad=top,left: each >= 0 and smaller than the kernel", "pad")
        oc = kv["out"]
        if not 1 <= oc <= 65535:
            raise self.fail("out=%d: must be 1..65535" % oc, "out")
        dt = self.quantized(("i8", "i16"))
        hasb = "b" in kv
        if dt == "f32":
            # the float record (mpy_lazy/_float.py): the integer one with ACT for ZY, no requantization
            self.p = ints((oc, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, pad[0], pad[1], 0,
                           1 if hasb else 0))
            self.param("weight", "w", (oc, kh, kw, c), "f32", init)
            if hasb:
                self.param("bias", "b", (oc,), "f32", init)
            self.out = (check_shape((oh, ow, oc), n, "output"), dt, None)
            return
        self.needs("m")
        lo, hi = clamp(kv, n, dt)
        if dt == "i16" and x.q[1] != 0:
            raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
        # the kernel's record from word 2 (mpy_lazy/_pure.py, "transpose conv record")
        self.p = ints((oc, kv["q"][1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, pad[0], pad[1], x.q[1],
                       1 if hasb else 0))
        self.param("weight", "w", (oc, kh, kw, c), "i8", init)
        self.param("requant", "m", (2, oc), "i32", init)
        if hasb:
            self.param("bias", "b", (oc,), "i32", init)
        self.scratch = oc * (2 if dt == "i16" else 1)
        self.out = (check_shape((oh, ow, oc), n, "output"), dt, kv["q"])

    @property
    def macs(self):
        p = self.p
        return p[6] * p[7] * p[8] * p[0] * p[11] * p[12]

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        if self.y.dtype == "f32":
            return [c.record(check.FTCONV, p + [0] + c.ref(self.weight) + c.ref(getattr(self, "bias", None)))]
        kind = check.TCONV16 if self.y.dtype == "i16" else check.TCONV
        return [c.record(kind, p + [c.scratch] + c.ref(self.weight) + c.ref(getattr(self, "bias", None))
                         + c.ref(self.requant))]
