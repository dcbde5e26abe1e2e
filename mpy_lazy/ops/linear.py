# linear (fully connected): y = W x + b over the input read flat (in NHWC order, as TFLite's
# FULLY_CONNECTED reads a 4-D input). W is [out, in] (wl=oi: torch, TFLite) or [in, out]
# (wl=io: ONNX MatMul), read in place through strides.
from .. import kernels
from ..graph import clamp
from . import Op as Base, act_range, check_requant, i32, ints, kbuf, typed


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        n_in, n_out = ins[0].size, kv["out"]
        if not 1 <= n_out <= 65535:
            raise self.fail("out=%d: must be 1..65535" % n_out, "out")
        t = kv.get("wl", "oi") == "io"
        dims = (n_in, n_out, 1 if t else n_in, n_out if t else 1)  # IN OUT WSO WSI
        hasb = "b" in kv
        wshape = (n_in, n_out) if t else (n_out, n_in)
        q8 = self.int8()
        if q8:
            self.needs("m")
            lo, hi = clamp(kv, n)
            # the kernel's parameter layout (mpy_lazy/_pure.py, "dense p"); prepare() writes XO, YO
            self.p = ints((0, 0, n_out, kv["q"][1], lo, hi, 0, 0, n_in, dims[2], dims[3],
                           1 if hasb else 0))
            self.param("weight", "w", wshape, "i8", init)
            self.param("requant", "m", (2, n_out), "i32", init)
            if "b" in kv:
                self.param("bias", "b", (n_out,), "i32", init)
        else:
            self.dims = dims
            self.hasb = hasb
            self.lo, self.hi = act_range(kv)
            self.param("weight", "w", wshape, "f32", init)
            if "b" in kv:
                self.param("bias", "b", (n_out,), "f32", init)
            self.fscratch = n_out if t else n_in  # one decoded f16 row
        self.out = ((n_out,), "i8" if q8 else "f32", kv.get("q"))

    # macs and scratch from the kernel's parameters (int8) or dims (float), not kept: every
    # attribute of an op costs heap on the board
    @property
    def macs(self):
        p = getattr(self, "p", None)
        return p[8] * p[2] if p is not None else self.dims[0] * self.dims[1]

    @property
    def scratch(self):
        """int8: the accumulators, then the input as int32."""
        p = getattr(self, "p", None)
        return p[2] + p[8] if p is not None else 0

    def lag(self):
        # int8: every accumulator is summed before the first output is written (the float
        # loop writes as it goes)
        return 0 if self.y.dtype == "i8" else None

    def prepare(self, m, scr=None):
        x, y = self.x[0], self.y
        if y.dtype == "i8":
            p = self.p
            n_in, n_out = p[8], p[2]
            p[6], p[7] = x.offset, y.offset
            bias = kbuf(self.bias, "i32") if p[11] else p
            check_requant(self, typed(self.requant, "i32"), n_out)
            self.b = (m.arena, kbuf(self.weight, "i8"), bias, kbuf(self.requant, "i32"),
                      i32(scr[:4 * n_out], n_out), i32(scr[4 * n_out:], n_in))
            return
        self.m = m
        v = self.weight.view
        self.f16 = v is not None and v.dtype == "f16"
        self.wt = None if self.f16 else typed(self.weight, "f32")
        self.bv = typed(self.bias, "f32") if self.hasb else None
        self.wnd = None

    def run(self):
        if self.y.dtype == "i8":
            kernels.i8.dense(self.b, self.p)
            return
        if kernels.nd() and self.m.nd is not None:
            return self._run_nd()
        n_in, n_out, wso, wsi = self.dims
        a = self.m.farena
        xo, yo = self.x[0].offset, self.y.offset
        bv, lo, hi = self.bv, self.lo, self.hi
        row = self.m.fscratch
        wt = self.wt
        if wsi == 1:  # [out, in]: a dot product per output
            for o in range(n_out):
                if self.f16:
                    kernels.f16(self.weight.view.mv, o * n_in, row, n_in)
                    wt, k = row, 0
                else:
                    k = o * n_in
                s = bv[o] if bv is not None else 0.0
                for i in range(n_in):
                    s += wt[k + i] * a[xo + i]
                a[yo + o] = s
        else:  # [in, out]: accumulate one input row at a time
            for o in range(n_out):
                a[yo + o] = bv[o] if bv is not None else 0.0
            for i in range(n_in):
                xi = a[xo + i]
                if self.f16:
                    kernels.f16(self.weight.view.mv, i * n_out, row, n_out)
                    wt, k = row, 0
                else:
                    k = i * n_out
                for o in range(n_out):
                    a[yo + o] += wt[k + o] * xi
        if lo is not None or hi is not None:
            for o in range(n_out):
                s = a[yo + o]
                if lo is not None and s < lo:
                    a[yo + o] = lo
                elif hi is not None and s > hi:
                    a[yo + o] = hi

    def _run_nd(self):
        from .. import backend

        np = backend.np
        n_in, n_out, wso, wsi = self.dims
        if self.wnd is None:  # the weights as a backend matrix: in place where the backend can
            v = self.weight.val()
            shape = (n_out, n_in) if wsi == 1 else (n_in, n_out)
            if self.weight.state != "bound":
                self.wnd = np.array(v, dtype=self.m.nd.dtype).reshape(shape)
            elif v.dtype == "f32" and (backend.kind() == "numpy" or backend.SINGLE_FLOAT):
                self.wnd = np.frombuffer(v.mv, dtype=self.m.nd.dtype).reshape(shape)
            else:  # f16, or f32 on a double-float ulab: decoded once to RAM
                self.wnd = np.array(v.dequantize(), dtype=self.m.nd.dtype).reshape(shape)
            if self.bv is not None:
                self.bnd = np.array([self.bv[i] for i in range(n_out)], dtype=self.m.nd.dtype)
        x = self.m.nd_view(self.x[0])
        y = np.dot(self.wnd, x) if wsi == 1 else np.dot(x, self.wnd)
        if self.bv is not None:
            y = y + self.bnd
        if self.lo is not None:
            y = np.maximum(y, self.lo)
        if self.hi is not None:
            y = np.minimum(y, self.hi)
        self.m.nd_view(self.y)[:] = y
