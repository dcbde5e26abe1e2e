# svdf: TFLite's SVDF (a rank-R singular value decomposition filter over time), int8 as
# TFLite Micro's reference kernel (svdf_common.cc, EvalIntegerSvdfReference). The state holds
# the last `memory` activations of each of the F = out x rank filters (int16, or int8 with
# sdtype=i8; quantization sq=scale,zero_point) and persists from one call to the next, as TFLM's
# variable tensor does across Invoke() (Program.reset() starts it again at its zero point).
# Per call: the state shifts one step left; each filter's newest entry is
# clamp(mbqm(w_f . (x - z_x), m1, s1)) + z_s (stored with the state dtype's wraparound, as
# TFLM's cast); acc_f = t_f . (state_f - z_s); y_u = clamp(z_y + mbqm(b_u + sum of the rank
# filters of unit u, m2, s2)). w [F, in] i8, t [F, memory] of the state's dtype, b [out] i32,
# m=m1,s1,m2,s2. (TFLM applies no fused activation in its integer SVDF: neither does this.)
from .. import check
from ..graph import zero_point
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if not self.int8():
            raise self.fail("svdf runs int8 (TFLM's integer SVDF)", "x")
        units, rank, mem = kv["out"], kv["rank"], kv["memory"]
        for key, v in (("out", units), ("rank", rank), ("memory", mem)):
            if not 1 <= v <= 65535:
                raise self.fail("%s=%d: must be 1..65535" % (key, v), key)
        filters = units * rank
        if filters > 65535 or filters * mem > 1 << 22:
            raise self.fail("%d filters x %d steps of state: too large" % (filters, mem), "memory")
        self.sdt = kv.get("sdtype", "i16")
        zero_point(kv["sq"], self.sdt, n, "sq")
        m = kv["m"]
        if len(m) != 4:
            raise self.fail("m=m1,s1,m2,s2", "m")
        self.p = (filters, x.size, mem, units, x.q[1], kv["sq"][1], kv["q"][1]) + tuple(m)
        self.param("weight", "w", (filters, x.size), "i8", init)
        self.param("time", "t", (filters, mem), self.sdt, init)
        self.param("bias", "b", (units,), "i32", init)
        self.out = ((units,), "i8", kv["q"])

    @property
    def macs(self):
        f, nin, mem = self.p[0], self.p[1], self.p[2]
        return f * (nin + mem)

    @property
    def scratch(self):
        return self.p[0] + self.p[3] + self.p[1]  # int32: the filters' sums, the units', x - z_x

    @property
    def persist(self):
        es = 2 if self.sdt == "i16" else 1
        return (self.p[0] * self.p[2] * es + 3) // 4 * 4

    def records(self, c):
        f, nin, mem, units, zx, zs, zy, m1, s1, m2, s2 = self.p
        return [c.record(check.SVDF, [f, nin, mem, units, c.off(self.x[0]), c.off(self.y), c.state,
                                      2 if self.sdt == "i16" else 1, zx, zs, zy, m1, s1, m2, s2, c.scratch]
                         + c.ref(self.weight) + c.ref(self.time) + c.ref(self.bias))]
