# linear (fully connected): y = W x + b over the input read flat (in NHWC order, as TFLite's
# FULLY_CONNECTED reads a 4-D input). W is [out, in] (wl=oi: torch, TFLite), [in, out]
# (wl=io: ONNX MatMul) or, int8 with out a multiple of 8, [out/8, 8 in] (wl=oi8: what mpy-lazy
# pack writes, the order in which the assembler kernel reads 8 outputs at once), read in place
# through strides.
from .. import check
from ..graph import clamp
from . import Op as Base, act_code, ints, wdtype


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        n_in, n_out = ins[0].size, kv["out"]
        if not 1 <= n_out <= 65535:
            raise self.fail("out=%d: must be 1..65535" % n_out, "out")
        wl = kv.get("wl", "oi")
        t = wl == "io"
        hasb = "b" in kv
        wshape = (n_in, n_out) if t else (n_out, n_in)
        dt = self.quantized(("i8", "i16"))
        q8 = dt != "f32"
        self.wb = 0
        if wl == "oi8":
            if n_out % 8 or dt != "i8":
                raise self.fail("wl=oi8 is for int8 values and out a multiple of 8 (out=%d, %s)" % (n_out, dt), "wl")
            self.wb = 3
            wshape = (n_out // 8, 8 * n_in)
        # the kernels' record from word 2 (mpy_lazy/_pure.py, "dense record"): OC ZY LO HI XO YO
        # NIN WSO WSI HASB, then (int8) scratch, tensors and WB; record() fills XO, YO
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n, dt)
            if dt == "i16" and ins[0].q[1] != 0:
                raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
            self.acc64 = 1 if kv.get("acc", "64") == "64" and dt == "i16" else 0
            ws = (8 * n_in, 8) if self.wb else (1, n_out) if t else (n_in, 1)
            self.p = ints((n_out, kv["q"][1], lo, hi, 0, 0, n_in) + ws + (1 if hasb else 0,))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, n_out), "i32", init)
            if hasb:
                self.param("bias", "b", (n_out,), "i32", init)
        else:
            self.p = ints((n_out, act_code(kv), 0, 0, 0, 0, n_in, 1 if t else n_in, n_out if t else 1,
                           1 if hasb else 0))
            self.param("weight", "w", wshape, "f32", init)
            if hasb:
                self.param("bias", "b", (n_out,), "f32", init)
        self.out = ((n_out,), dt, kv.get("q"))

    @property
    def macs(self):
        return self.p[6] * self.p[0]

    @property
    def scratch(self):
        """int32 words. int8: the accumulators, then the input as int32 (at most
        check.DENSE_COL of it at a time). float with f16 weights: one decoded row."""
        p = self.p
        if self.y.dtype == "i8":
            return p[0] + min(p[6], check.DENSE_COL)
        if self.y.dtype != "f32":
            return p[0] * 2 + p[6]
        v = self.weight.view
        if v is None or v.dtype != "f16":
            return 0
        return p[6] if p[8] == 1 else p[0]

    def lag(self):
        # int8: every accumulator is summed before the first output is written (the float
        # loop writes as it goes); oi8: the assembler writes 8 outputs at a time, each block
        # once it is summed, so the last block's reads come after OC - 8 writes
        if self.y.dtype != "i8":
            return None
        return self.p[0] - 8 if self.wb else 0

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        s = c.scratch
        w, b = c.ref(self.weight, self.y.dtype == "f32"), c.ref(getattr(self, "bias", None))
        if self.y.dtype == "i8":
            return [c.record(check.DENSE, p + [s, s + 4 * p[0]] + w + b + c.ref(self.requant) + [self.wb])]
        if self.y.dtype == "i16":
            return [c.record(check.DENSE16, p + [s, s + 8 * p[0]] + w + b + c.ref(self.requant) + [self.acc64])]
        p[2] = wdtype(self.weight)
        return [c.record(check.FDENSE, p + [0, s] + w + b + [0, 0])]
