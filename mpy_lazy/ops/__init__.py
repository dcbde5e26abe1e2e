# Ops of the graph runner, one per module, each in the two steps of a TFLite Micro kernel:
#
#   __init__(kv, ins, n, init)  declare: check the keys against the input values, compute the
#                               output Value (shape, dtype, quantization), declare the Params
#                               of its tensors (nothing bound, nothing allocated)
#   prepare(m, scr)             once, after load() and the arena plan: views of the weights,
#                               the kernel's parameter array, the buffers it works in (scr:
#                               its `scratch` int32 as a memoryview of the arena, or None)
#   run()                       a forward pass: allocates nothing on the int8 path
#   lag()                       whether the output may be written over the input when the
#                               input dies at this op (the planner asks; default no)
#
# `scratch` (int32 elements) and `fscratch` (floats) are what run() needs besides the arena;
# the model allocates the largest of its ops' once and shares it. `kv` (the description's keys)
# exists during __init__ only: an op keeps what it needs as attributes (heap is scarce).
import array

from .. import kernels
from ..container import ContainerError
from ..graph import fail
from ..module import Module
from ..param import Param

# op name -> module of this package holding class Op (imported on first use)
_MODULES = {
    "conv2d": "conv", "depthwise": "conv", "linear": "linear", "add": "binary", "mul": "binary",
    "maxpool": "pool", "avgpool": "pool", "mean": "mean", "relu": "act", "relu6": "act",
    "clip": "act", "leakyrelu": "act", "sigmoid": "act", "tanh": "act", "lut": "act",
    "reshape": "reshape", "concat": "concat", "pad": "pad", "softmax": "softmax",
    "quantize": "quant", "dequantize": "quant",
}


def get(name):
    mod = __import__("mpy_lazy.ops." + _MODULES[name], None, None, ("Op",))
    return mod.Op


class Op(Module):
    """Base of every op: `name` (the description's op), `n` (its line), `x` (input Values),
    `y` (output Value), `kv` (its keys). Tensor keys become Params named after the key."""

    scratch = 0
    fscratch = 0
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
        return fail(getattr(self, "n", 0), "%s: %s" % (self.name, msg), key)

    def param(self, attr, key, shape, dtype, init=None):
        """Declare Param `attr` for the tensor named by kv[key] (shape checked at load)."""
        p = Param(shape, dtype, init)
        setattr(self, attr, p)
        self.tensors += ((attr, self.kv[key]),)
        return p

    def int8(self):
        """True when the op runs on int8 values: its inputs are i8, and then it needs q=."""
        dt = self.x[0].dtype
        for v in self.x:
            if v.dtype != dt:
                raise self.fail("inputs mix %s and %s (add quantize/dequantize)" % (dt, v.dtype))
        if dt == "i8" and "q" not in self.kv:
            raise self.fail("int8 op needs q=scale,zero_point for its output", "q")
        if dt == "f32":
            for key in ("q", "m", "clamp"):
                if key in self.kv:
                    raise self.fail("%s= is for int8 ops; the input is f32" % key, key)
        return dt == "i8"

    def needs(self, *keys):
        for key in keys:
            if key not in self.kv:
                raise self.fail("int8 op needs %s=" % key, key)

    def float_only(self):
        if self.x[0].dtype != "f32":
            raise self.fail("takes f32 values (int8 models use lut)")


def ints(values):
    return array.array("i", values)


def buf(p):
    """The bytes a kernel reads for Param p: the container's memory (bound) or the RAM array
    (owned: initialized, or copied on write)."""
    v = p.val()
    return v.mv if p.state == "bound" else _plain(v)


def typed(p, dtype):
    """Indexable of the stored values of Param p (f32/i8/i32), without a copy (an f16 tensor
    read as f32 is decoded once, into RAM the report counts)."""
    from ..backend import typed_view

    v = p.val()
    if p.state != "bound":
        return _plain(v)
    if v.dtype != dtype:
        if dtype == "f32" and v.dtype == "f16":
            a = v.array()  # decoded to f32 once where the backend has no f16 (counted in report)
            if getattr(a, "dtype", None) is not None and str(a.dtype) == "float16":  # numpy: keeps f16
                a = a.astype("float32")
            return _plain(a)
        raise ContainerError("tensor %r is %s%s; this op reads %s (int8 weights run in int8 models: "
                             "mpy-lazy pack --quantize int8 --calibrate)" % (
                                 v.name, v.dtype, " (quantized)" if v.info.quant else "", dtype), v.name, "dtype")
    return typed_view(v.mv, dtype, v.size)


def check_requant(op, mq, n):
    """Refuse multipliers and shifts outside TFLM's ranges (values from a file: trust nothing):
    multipliers 0..2**31-1 (a negative int32 is one above), shifts -31..30."""
    for c in range(n):
        if mq[c] < 0 or not -31 <= mq[n + c] <= 30:
            raise ContainerError("%s: requantization of channel %d: multiplier %d, shift %d (TFLM takes "
                                 "0..2**31-1 and -31..30)" % (op.name, c, mq[c], mq[n + c]), None, "m")


def kbuf(p, dtype):
    """What the current int8 kernels read for Param p: viper takes the bytes as they are (no
    object made), the pure kernels a typed view (signed items)."""
    from .. import _pure

    if kernels.i8 is _pure:
        return typed(p, dtype)
    return buf(p)


def i32(mv, n):
    """An int32 scratch buffer (a memoryview of arena bytes) as the int8 kernels take it."""
    from .. import _pure
    from ..backend import typed_view

    return typed_view(mv, "i32", n) if kernels.i8 is _pure else mv


def _plain(a):
    """A RAM array whose items are Python numbers, read without allocating: numpy's items are
    numpy scalars (int8 arithmetic would wrap) and indexing a ulab ndarray makes an object per
    item (192 bytes each, measured), so kernels get a memoryview of it (no copy)."""
    if isinstance(a, array.array):
        return a
    try:
        return memoryview(a)
    except TypeError:  # not a buffer
        return a


def act_range(kv):
    """Float clamp of a fused activation: (lo, hi), None for no bound."""
    a = kv.get("act", "none")
    if a == "relu":
        return 0.0, None
    if a == "relu6":
        return 0.0, 6.0
    return None, None
