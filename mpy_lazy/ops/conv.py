# conv2d (groups, dilation, asymmetric padding) and depthwise (channel multiplier), NHWC.
#
# Weights in place, in the layout the model came with (key wl): conv2d `ohwi` (TFLite) or `oihw`
# (torch), or `ohwi8` (int8: what mpy-lazy pack writes when the outputs are a multiple of 8:
# [out/8, kh, kw, 8 C/groups], output channel 8 b + j's weight for input channel ci at
# [b, ky, kx, 8 ci + j]: the order in which the assembler conv reads 8 outputs at once);
# depthwise `1hwo` (TFLite) or `o1hw` (torch). The kernels walk them through element strides
# (and output-channel blocks, WB), so no layout is ever copied.
# int8: per-channel requantization multipliers and shifts in tensor m ([2, out] int32), bias
# int32, input zero point from the input value, output q=, fused activation as clamp=.
import array

from .. import check
from ..graph import check_shape, clamp, pairs
from . import Op as Base, act_code, ints, wdtype

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
            wl = kv.get("wl", "ohwi")
            if wl == "ohwi":
                wshape, ws = (oc, kh, kw, cpg), (kh * kw * cpg, kw * cpg, cpg, 1)
            elif wl == "ohwi8":
                if oc % 8 or g != 1:
                    raise self.fail("wl=ohwi8 needs groups 1 and out a multiple of 8, got %d, groups %d" % (oc, g), "wl")
                wshape, ws = (oc // 8, kh, kw, 8 * cpg), (8 * kh * kw * cpg, 8 * kw * cpg, 8 * cpg, 8)
            else:
                wshape, ws = (oc, cpg, kh, kw), (cpg * kh * kw, kw, 1, kh * kw)
        out_shape = check_shape((oh, ow, oc) if len(x.shape) == 3 else (oc,), n, "output")
        hasb = "b" in kv
        dt = self.quantized(("i8", "i16"))
        q8 = dt != "f32"
        # the kernels' record from word 2 (mpy_lazy/_pure.py, "conv / depthwise record"):
        # OC ZY LO HI XO YO H W C OH OW KH KW SH SW DH DW PT PL WSO WSY WSX WSC CPG OPG ZX HASB RP,
        # then (int8) scratch, tensors and WB; record() fills XO, YO (arena offsets) and the
        # float fields. 16x8: ZX is ACC64
        self.wb = 3 if not dw and kv.get("wl") == "ohwi8" else 0
        if self.wb and dt != "i8":
            raise self.fail("wl=ohwi8 is for int8 values (the 16x8 and float kernels read ohwi/oihw)", "wl")
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n, dt)
            rp = max(1, min(ow, ACC // oc))
            if dt == "i16" and x.q[1] != 0:
                raise self.fail("an int16 input has zero point 0 (TFLM's 16x8 kernels)", "x")
            zx = (1 if kv.get("acc", "64") == "64" else 0) if dt == "i16" else x.q[1]
            self.p = ints((oc, kv["q"][1], lo, hi, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwid, pad[0], pad[1])
                          + ws + (cpg, opg, zx, 1 if hasb else 0, rp))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, oc), "i32", init)
            if hasb:
                self.param("bias", "b", (oc,), "i32", init)
        else:
            self.p = ints((oc, act_code(kv), 0, 0, 0, 0, h, w, c, oh, ow, kh, kw, sh, sw, dh, dwid, pad[0], pad[1])
                          + ws + (cpg, opg, 0, 1 if hasb else 0, 0))
            self.param("weight", "w", wshape, "f32", init)
            if hasb:
                self.param("bias", "b", (oc,), "f32", init)
        self.out = (out_shape, dt, kv.get("q"))

    @property
    def macs(self):
        p = self.p
        return p[9] * p[10] * p[0] * p[11] * p[12] * p[23]  # OH OW OC KH KW CPG

    @property
    def scratch(self):
        """int32 words of scratch. int8: RP pixels' accumulators, then one pixel's window
        (conv2d) or a row of C zero points that padded taps read (depthwise in assembler).
        float with f16 weights: one decoded filter (the whole tensor if a filter is not
        contiguous)."""
        p = self.p
        n = p[11] * p[12] * p[23]  # KH KW CPG
        if self.y.dtype == "f32":
            v = self.weight.view
            if v is None or v.dtype != "f16":
                return 0
            return n if p[19] == n else n * p[0]
        window = max(p[11] * p[12], (p[8] + 3) // 4) if self.name == "depthwise" else n
        return p[27] * p[0] * (2 if self.y.dtype == "i16" else 1) + window

    def lag(self):
        """int8: bytes the output may start before its dying input (check.conv_lag: the same
        rule the program's check enforces, with the outputs the Thumb kernels write early:
        ohwi8's blocks of 8, depthwise's groups of 4)."""
        if self.y.dtype != "i8":
            return None  # (16x8: the planner gives the output its own bytes)
        kind = check.DEPTHWISE if self.name == "depthwise" else check.CONV
        early = check.conv_early(kind, self.p[0], self.p[24], self.wb)  # (p[24]: OPG)
        return check.conv_lag([0, 0] + list(self.p), 0, early)

    def records(self, c):
        p = list(self.p)
        p[4], p[5] = c.off(self.x[0]), c.off(self.y)
        s = c.scratch
        dw = self.name == "depthwise"
        w, b = c.ref(self.weight, self.y.dtype == "f32"), c.ref(getattr(self, "bias", None))
        if self.y.dtype == "i8":
            acc = 4 * p[27] * p[0]
            return [c.record(check.DEPTHWISE if dw else check.CONV,
                             p + [s, s + acc] + w + b + c.ref(self.requant) + [self.wb])]
        if self.y.dtype == "i16":
            acc = 8 * p[27] * p[0]
            return [c.record(check.DW16 if dw else check.CONV16,
                             p + [s, s + acc] + w + b + c.ref(self.requant))]
        p[2] = wdtype(self.weight)
        return [c.record(check.FDEPTHWISE if dw else check.FCONV, p + [0, s] + w + b + [0, 0])]
