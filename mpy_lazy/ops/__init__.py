# Ops of the graph description, one per module. An op is the Prepare half of a TensorFlow
# Lite Micro kernel: it reads its line of the description, checks it against its
# input values, computes its output value, declares the Params of its tensors, and compiles
# itself into records of the program (mpy_lazy/program.py) that the kernels run:
#
#   __init__(kv, ins, n, init)  declare: check the keys against the input values, compute the
#                               output Value (shape, dtype, quantization), declare the Params
#                               of its tensors (nothing bound, nothing allocated)
#   records(c)                  its records, once the arena is planned (c: the compiler in
#                               mpy_lazy/model.py: c.off(value), c.ref(param), c.scratch,
#                               c.record(kind, fields)); check(r, E) below them checks them
#   lag()                       whether the output may be written over the input when the
#                               input dies at this op (the planner asks; default no)
#
# `scratch` (int32 words) is the arena room its kernel needs while it runs, planned like a
# value alive during the op only. `kv` (the description's keys) exists during __init__ only:
# an op keeps what it needs as attributes.
#
# A module of this package is an op's room (docs/OPS.md): the Op class above, and the runtime
# half of its record kinds (their layout, check and reference kernel), which a stored program
# imports for the kinds it has (kernels.room; kernels.op finds the Op of an op name). The
# graph module is imported by the Op methods that need it (a stored program runs without it).
import array

from ..module import Module
from ..param import Param


class Op(Module):
    """Base of every op: `name` (the description's op), `n` (its line), `x` (input Values),
    `y` (output Value), `kv` (its keys). Tensor keys become Params named after the key."""

    scratch = 0
    persist = 0  # bytes of state kept across calls (planned apart from every value: Model.plan)
    inplace = False  # the output may share the input's buffer (elementwise, same size)

    def __init__(self, name, kv, ins, n):
        self.name = name
        self.kv = kv
        self.x = ins
        self.n = n
        self.tensors = ()  # (Param attribute, tensor name) pairs, for load()

    def lag(self):
        """Whether the output may overlap the first input when that input dies at this op
        (graph.plan): None, no; an int L >= 0, yes if the output starts at least L bytes
        before the input (the kernel writes no byte it reads later). Elementwise ops of one
        size work in place instead (`inplace`)."""
        return None

    def fail(self, msg, key=None):
        from ..graph import fail

        return fail(getattr(self, "n", 0), "%s: %s" % (self.name, msg), key)

    def param(self, attr, key, shape, dtype, init=None):
        """Declare Param `attr` for the tensor named by kv[key] (shape checked at load)."""
        p = Param(shape, dtype, init)
        setattr(self, attr, p)
        self.tensors += ((attr, self.kv[key]),)
        return p

    def int8(self):
        """True when the op runs on int8 values (its only integer dtype: other integer inputs
        are refused): int8() is quantized() for ops that have int8 kernels only."""
        return self.quantized(("i8",)) == "i8"

    def quantized(self, dtypes):
        """The dtype the op runs on: 'f32', or one of the integer `dtypes` it has kernels for
        (then it needs q= for its output, whose zero point fits that dtype); every input has
        it (quantize/dequantize cross)."""
        from ..graph import zero_point

        dt = self.x[0].dtype
        for v in self.x:
            if v.dtype != dt:
                raise self.fail("inputs mix %s and %s (add quantize/dequantize)" % (dt, v.dtype))
        if dt == "f32":
            for key in ("q", "m", "clamp"):
                if key in self.kv:
                    raise self.fail("%s= is for integer ops; the input is f32" % key, key)
            return dt
        if dt not in dtypes:
            raise self.fail("takes %s values, not %s" % (" or ".join(("f32",) + tuple(dtypes)), dt), "x")
        if "q" not in self.kv:
            raise self.fail("%s op needs q=scale,zero_point for its output" % dt, "q")
        zero_point(self.kv["q"], dt, self.n)
        return dt

    def keeps_q(self):
        """A data-moving op: its output has the input's q (q= optional, and then equal)."""
        x = self.x[0]
        for v in self.x:
            if v.dtype != x.dtype or tuple(v.q or ()) != tuple(x.q or ()):
                raise self.fail("inputs of one dtype and q (%s %s, %s %s)" % (x.dtype, x.q, v.dtype, v.q), "x")
        q = self.kv.get("q")
        if q is not None and (x.q is None or tuple(q) != tuple(x.q)):
            raise self.fail("q= must be the input's quantization (%s)" % (x.q,), "q")

    def needs(self, *keys):
        for key in keys:
            if key not in self.kv:
                raise self.fail("int8 op needs %s=" % key, key)

    def operands(self):
        """The output shape numpy's broadcasting gives the inputs (self.x, at most 3
        dimensions), and the inputs that do not repeat over it (`spread`: copied out at its
        shape into the scratch by operand_fields, which this sizes)."""
        from ..graph import ITEMSIZE

        ins = self.x
        oshape = ins[0].shape
        for v in ins[1:]:
            oshape = broadcast(oshape, v.shape)
            if oshape is None:
                raise self.fail("shapes %s do not broadcast" % ", ".join(str(v.shape) for v in ins), "x")
        if len(oshape) > 3:
            raise self.fail("shapes broadcast to %s: more than 3 dimensions" % (oshape,), "x")
        self.spread = tuple([i for i, v in enumerate(ins) if not repeats(v.shape, oshape)])
        size = 1
        for d in oshape:
            size *= d
        for i in self.spread:
            self.scratch += (size * ITEMSIZE[ins[i].dtype] + 3) // 4
        return oshape

    def operand_fields(self, c):
        """(move records, arena offsets, repeat counts) of the inputs as operands() planned
        them: each read at its offset, repeating every BC elements of the output."""
        from ..graph import ITEMSIZE
        from ..kinds import MOVE

        y, xs = self.y, self.x
        out = []
        offs = [c.off(v) for v in xs]
        bcs = [v.size for v in xs]
        at = c.scratch
        for i in self.spread:
            es = ITEMSIZE[xs[i].dtype]
            out.append(c.record(MOVE, spread(xs[i].shape, y.shape, offs[i], at, es)))
            offs[i], bcs[i] = at, y.size
            at += (y.size * es + 3) // 4 * 4
        return out, offs, bcs

    def float_only(self):
        if self.x[0].dtype != "f32":
            raise self.fail("takes f32 values (int8 models use lut)")


def ints(values):
    return array.array("i", values)


def act_code(kv):
    """The fused float activation of a record: 0 none, 1 relu, 2 relu6, 3 finite (clamped to
    +-FLT_MAX: TFLite's kernels with no fused activation, so an overflow gives FLT_MAX, not inf,
    where TFLite's does; relu too stops at FLT_MAX)."""
    return {"none": 0, "relu": 1, "relu6": 2, "finite": 3}[kv.get("act", "none")]


def wdtype(p):
    """How a float weight Param is stored for the kernels: 1 f32, 2 f16 (a bound f16 tensor;
    RAM arrays are compiled as f32). A float op bound to quantized weights is refused."""
    v = p.view if p.state == "bound" else None
    if v is None:
        return 1
    if v.dtype not in ("f32", "f16"):
        from ..container import ContainerError

        raise ContainerError("tensor %r is %s%s; this op reads f32 (int8 weights run in int8 models: "
                             "mpy-lazy pack --quantize int8 --calibrate)" % (
                                 v.name, v.dtype, " (quantized)" if v.info.quant else ""), v.name, "dtype")
    return 2 if v.dtype == "f16" else 1


# shapes of elementwise ops of several operands (add, sub, mul; comparisons, logical, select)

def broadcast(s1, s2):
    """numpy's broadcast of shapes s1 and s2 (aligned at their last dimensions), or None."""
    n = max(len(s1), len(s2))
    s1 = (1,) * (n - len(s1)) + tuple(s1)
    s2 = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for d1, d2 in zip(s1, s2):
        if d1 != d2 and d1 != 1 and d2 != 1:
            return None
        out.append(d1 if d2 == 1 else d2)
    return tuple(out)


def spread(shape, oshape, so, do, es):
    """The move record's fields copying a value of `shape` from byte so to do at `oshape`
    (which it broadcasts to): a stride 0 along each dimension of 1."""
    n = len(oshape)
    s = (1,) * (n - len(shape)) + tuple(shape)
    s = (1,) * (3 - n) + s
    o = (1,) * (3 - n) + tuple(oshape)
    pss = s[1] * s[2] if s[0] > 1 else 0
    ss = s[2] if s[1] > 1 else 0
    sj = 1 if s[2] > 1 else 0
    return [so, do, o[1], o[2], ss, sj, o[2], 1, es, o[0], pss, o[1] * o[2]]


def repeats(small, big):
    """Whether a value of shape `small` repeats over one of shape `big` as the kernels repeat
    their second input (every len(small) elements): its shape, leading 1s aside, is big's
    trailing dimensions (an empty one: a single value)."""
    i = 0
    while i < len(small) and small[i] == 1:
        i += 1
    s = tuple(small[i:])
    return len(s) <= len(big) and tuple(big[len(big) - len(s):]) == s
