# The graph description (docs/FORMAT.md, "Graph description", metadata key `graph`): parsing
# and checking. Trusts nothing: every op, key, number and name is checked here, and every shape
# against its inputs, before anything is allocated; a failure is a ContainerError naming the
# line and the key (field 'graph').
#
# A description is ops in execution order, one per line: `op key=value ...`. Ops name their
# input values (x=a[,b...]) and their output value (y=name); `input` and `output` lines name
# the graph's inputs and outputs. Activations are NHWC: a value's shape is (N,) or (H, W, C).
from .container import ContainerError
from .kinds import FILL, MOVE

ITEMSIZE = {"i8": 1, "i16": 2, "i32": 4, "f32": 4, "u8": 1, "bool": 1, "i64": 8}
RANGE = {"i8": (-128, 127), "i16": (-32768, 32767), "i32": (-2147483648, 2147483647), "u8": (0, 255), "bool": (0, 1),
         "i64": (-9223372036854775808, 9223372036854775807)}

MAX_DIM = 65535  # one dimension of a value
MAX_SIZE = 1 << 24  # elements of one value
MAX_LINES = 4096

# Key kinds: v value name, vs value names, t tensor name, i int, is ints, f float, q scale,zp,
# e:<a|b|...> one of the words. Per op: (required keys, optional keys).
_FLOAT_ACT = "e:none|relu|relu6|finite"
_KINDS = {
    "x": "v", "y": "v", "w": "t", "b": "t", "t": "t", "out": "i", "k": "is", "stride": "is",
    "pad": "is", "dil": "is", "groups": "i", "mult": "i", "shape": "is", "clamp": "is",
    "q": "q", "tq": "q", "lo": "f", "hi": "f", "alpha": "f", "beta": "f", "act": _FLOAT_ACT,
    "dtype": "e:f32|i8|i16|i32|u8|bool|i64", "layout": "e:hwc|chw", "order": "e:hwc|chw", "begin": "is",
    "end": "is", "perm": "is", "acc": "e:32|64", "size": "is", "r": "t", "cell": "i", "clip": "f",
    "state": "e:keep|zero", "rank": "i", "memory": "i", "sq": "q", "sdtype": "e:i8|i16",
    "interp": "e:nearest|bilinear", "eps": "f", "over": "e:c|w|all", "approx": "e:none|tanh",
    "value": "f", "code": "i", "mode": "e:constant|reflect|symmetric", "block": "i",
}
_KINDS["axis"] = "i"
_KINDS["rev"] = "i"
_KINDS["fn"] = "e:sum|mean|max|min|argmax|argmin|all"
_KINDS["axes"] = "is"
_KINDS["exclusive"] = "i"
_KINDS["reverse"] = "i"
_KINDS["adj"] = "is"
_KINDS["bcast"] = "is"
_KINDS["opts"] = "is"
_KINDS["skip"] = "i"
_KINDS["back"] = "i"
_KINDS["max"] = "i"
_KINDS["wz"] = "i"  # the int8 weights' zero point (legacy uint8 models' conv2d / depthwise)
_KINDS["round"] = "e:away|up"  # avgpool's halves: TFLM's int8 (away from zero), TFLite's uint8 (up)
_CONV = ("b", "stride", "pad", "dil", "act", "q", "m", "clamp", "acc")
OPS = {
    "input": (("y", "shape"), ("dtype", "q", "layout")),
    "output": (("x",), ("layout",)),
    "conv2d": (("x", "y", "w", "out", "k"), _CONV + ("groups", "wl", "wz")),
    "depthwise": (("x", "y", "w", "k"), _CONV + ("mult", "wl", "wz")),
    "linear": (("x", "y", "w", "out"), ("b", "wl", "act", "q", "m", "clamp", "acc")),
    "tconv": (("x", "y", "w", "out", "k", "size"), ("b", "stride", "pad", "act", "q", "m", "clamp", "acc")),
    "add": (("x", "y"), ("act", "q", "m", "clamp", "t", "shape", "tq")),
    "sub": (("x", "y"), ("act", "q", "m", "clamp", "t", "shape", "tq", "rev")),
    "mul": (("x", "y"), ("act", "q", "m", "clamp", "t", "shape", "tq")),
    "maxpool": (("x", "y", "k"), ("stride", "pad", "act", "q", "clamp")),
    "avgpool": (("x", "y", "k"), ("stride", "pad", "act", "q", "clamp", "round")),
    "mean": (("x", "y"), ("q", "m")),
    "relu": (("x", "y"), ("q", "m", "clamp")),
    "relu6": (("x", "y"), ("q", "m", "clamp")),
    "clip": (("x", "y", "lo", "hi"), ()),
    "leakyrelu": (("x", "y", "alpha"), ("q", "m")),
    "sigmoid": (("x", "y"), ("q", "m", "t")),
    "tanh": (("x", "y"), ("q", "m", "t")),
    "lut": (("x", "y", "t", "q"), ("dtype",)),
    "reshape": (("x", "y", "shape"), ("order", "q")),
    "concat": (("x", "y"), ("q", "axis")),
    "pad": (("x", "y", "pad"), ("q", "value", "code", "mode")),
    "slice": (("x", "y", "begin", "end"), ("stride", "q")),
    "transpose": (("x", "y", "perm"), ("q",)),
    "depth2space": (("x", "y", "block"), ("q",)),
    "space2depth": (("x", "y", "block"), ("q",)),
    "softmax": (("x", "y"), ("beta", "q", "m", "t", "dtype")),
    "lstm": (("x", "y", "w", "r", "b", "out"), ("q", "m", "t", "cell", "clip", "state")),
    "gru": (("x", "y", "w", "r", "b", "out"), ("q", "m", "t", "state")),
    "svdf": (("x", "y", "w", "t", "b", "out", "rank", "memory"), ("q", "m", "sq", "sdtype", "act")),
    "quantize": (("x", "y", "q"), ("dtype", "m")),
    "dequantize": (("x", "y"), ()),
    # elementwise ops, cast, resize, layernorm, groupnorm
    "hardswish": (("x", "y"), ()),
    "hardsigmoid": (("x", "y"), ("alpha", "beta")),
    "gelu": (("x", "y"), ("approx",)),
    "minimum": (("x", "y"), ("t", "shape", "q")),
    "maximum": (("x", "y"), ("t", "shape", "q")),
    "div": (("x", "y"), ("act", "q", "m", "clamp", "t", "shape")),
    "prelu": (("x", "y", "w"), ("shape", "q", "m", "t")),
    "cast": (("x", "y", "dtype"), ("q",)),
    "resize": (("x", "y", "size", "t"), ("interp", "q")),
    "layernorm": (("x", "y", "w"), ("b", "eps", "over")),
    "groupnorm": (("x", "y", "w", "b"), ("groups", "eps")),
    "abs": (("x", "y"), ("q", "m")),
    "broadcast": (("x", "y", "shape"), ("q",)),
    "gathernd": (("x", "y", "shape"), ("t", "dtype", "q")),
    "update": (("x", "y"), ("begin", "q")),
    # resource variables (ops/variable.py): state kept across calls
    "var": (("y", "shape"), ("dtype", "q", "t")),
    "read": (("x", "y"), ("q",)),
    "assign": (("x", "y"), ("q",)),
    "reduce": (("x", "y", "fn"), ("axes", "q", "m")),
    "cumsum": (("x", "y"), ("axis", "exclusive", "reverse", "q", "m")),
    "batchmatmul": (("x", "y", "size"), ("w", "adj", "bcast", "shape", "q", "m", "tq")),
    "logsoftmax": (("x", "y"), ("q", "m", "t")),
    "l2norm": (("x", "y"), ("q",)),
    "l2pool": (("x", "y", "k"), ("stride", "pad", "act")),
    # the signal library (ops/signal.py): opts= the op's integer options
    "window": (("x", "y", "w", "opts"), ("shape", "q")),
    "fftbits": (("x", "y"), ("q",)),
    "fftscale": (("x", "y"), ("q",)),
    "rfft": (("x", "y", "t", "opts"), ("q",)),
    "energy": (("x", "y", "opts"), ("q",)),
    "filterbank": (("x", "y", "w", "opts"), ("q",)),
    "fbsqrt": (("x", "y"), ("q",)),
    "specsub": (("x", "y", "opts"), ("q",)),
    "pcan": (("x", "y", "t", "opts"), ("shape", "q")),
    "fblog": (("x", "y", "opts"), ("q",)),
    # float functions of one operand (ops/unary.py)
    "neg": (("x", "y"), ()), "sqrt": (("x", "y"), ()), "rsqrt": (("x", "y"), ()), "square": (("x", "y"), ()),
    "exp": (("x", "y"), ()), "log": (("x", "y"), ()), "sin": (("x", "y"), ()), "cos": (("x", "y"), ()),
    "floor": (("x", "y"), ()), "ceil": (("x", "y"), ()), "round": (("x", "y"), ()), "elu": (("x", "y"), ()),
    # a constant value: a tensor's values, or one value repeated (ops/const.py)
    "const": (("y", "shape"), ("t", "value", "code", "dtype", "q")),
    # comparisons, logical ops, select: bool values (ops/compare.py)
    "equal": (("x", "y"), ("t",)), "notequal": (("x", "y"), ("t",)), "less": (("x", "y"), ("t",)),
    "lessequal": (("x", "y"), ("t",)), "greater": (("x", "y"), ("t",)), "greaterequal": (("x", "y"), ("t",)),
    "and": (("x", "y"), ()), "or": (("x", "y"), ()), "not": (("x", "y"), ()), "select": (("x", "y"), ("q",)),
    # squared difference, floor division and modulo, sums (ops/arith.py)
    "sqdiff": (("x", "y"), ("q", "m", "clamp")), "floordiv": (("x", "y"), ()), "floormod": (("x", "y"), ()),
    "addn": (("x", "y"), ("q", "m", "clamp")),
    "delay": (("x", "y", "opts"), ("q",)),
    "stacker": (("x", "y", "opts"), ("q",)),
    "framer": (("x", "y", "opts"), ("q",)),
    "overlap": (("x", "y", "opts"), ("q",)),
    "irfft": (("x", "y", "t", "opts"), ("q",)),
    # control flow (ops/control.py): IF and WHILE whose condition the board computes
    "branch": (("x", "y", "skip"), ()), "jump": (("y", "skip"), ()), "loop": (("y",), ()),
    "next": (("x", "y", "back", "max"), ()),
}
NAMES = {k: k for k in OPS}  # a parsed op name -> the module's own string (shared, not copied)
# op name -> its room (the module of mpy_lazy/ops holding its class Op: kernels.op)
ROOMS = {
    "conv2d": "conv", "depthwise": "conv", "linear": "linear", "add": "binary", "sub": "binary", "mul": "binary",
    "tconv": "tconv", "slice": "slice", "transpose": "slice",
    "depth2space": "slice", "space2depth": "slice",
    "maxpool": "pool", "avgpool": "pool", "mean": "mean", "relu": "act", "relu6": "act",
    "clip": "act", "leakyrelu": "act", "sigmoid": "act", "tanh": "act", "lut": "act",
    "reshape": "reshape", "concat": "concat", "pad": "pad", "softmax": "softmax",
    "quantize": "quant", "dequantize": "quant", "lstm": "lstm", "gru": "gru", "svdf": "svdf",
    "hardswish": "act", "hardsigmoid": "act", "gelu": "act", "minimum": "elementwise", "maximum": "elementwise",
    "div": "elementwise", "prelu": "elementwise", "cast": "cast", "resize": "resize", "layernorm": "layernorm",
    "groupnorm": "groupnorm",
    "abs": "act",
    "broadcast": "slice",
    "gathernd": "index", "update": "index",
    "var": "variable", "read": "variable", "assign": "variable",
    "reduce": "reduce",
    "cumsum": "cumsum",
    "batchmatmul": "matmul",
    "logsoftmax": "normalize", "l2norm": "normalize", "l2pool": "normalize",
    "neg": "unary", "sqrt": "unary", "rsqrt": "unary", "square": "unary", "exp": "unary", "log": "unary",
    "sin": "unary", "cos": "unary", "floor": "unary", "ceil": "unary", "round": "unary", "elu": "unary",
    "const": "const",
    "equal": "compare", "notequal": "compare", "less": "compare", "lessequal": "compare", "greater": "compare",
    "greaterequal": "compare", "and": "compare", "or": "compare", "not": "compare", "select": "compare",
    "sqdiff": "arith", "floordiv": "arith", "floormod": "arith", "addn": "arith",
}
ROOMS.update({"window": "signal", "fftbits": "signal", "fftscale": "signal", "rfft": "signal", "energy": "signal",
              "filterbank": "signal", "fbsqrt": "signal", "specsub": "signal", "pcan": "signal", "fblog": "signal",
              "delay": "signal",
              "stacker": "signal",
              "framer": "signal",
              "overlap": "signal",
              "irfft": "signal"})
ROOMS.update({"branch": "control", "jump": "control", "loop": "control", "next": "control"})
# `x` takes several values in these ops; `m` is a tensor name in the weighted ops, else ints;
# `wl` (weight layout) takes the words of the op.
_MULTI_X = ("add", "sub", "mul", "concat", "minimum", "maximum", "div", "gathernd", "update", "assign",
            "batchmatmul", "fftscale", "fbsqrt", "pcan", "equal", "notequal", "less", "lessequal",
            "greater", "greaterequal", "and", "or", "select", "sqdiff", "floordiv", "floormod", "addn")
_WL = {"conv2d": "e:ohwi|oihw|ohwi8", "depthwise": "e:1hwo|o1hw", "linear": "e:oi|io|oi8", "tconv": "e:ohwi"}


def fail(n, msg, key=None):
    """ContainerError for description line n."""
    return ContainerError("graph line %d: %s" % (n, msg), key, "graph")


def _name_ok(s):
    if not s or len(s) > 255:
        return False
    for ch in s:
        if ch in ",= \t\r":
            return False
    return True


def _digits(s, i):
    """The index after the ASCII digits of s from i."""
    while i < len(s) and "0" <= s[i] <= "9":
        i += 1
    return i


def _number_ok(s, real):
    """s is an ASCII integer ([+-]digits) or, if real, a decimal number ([+-] digits [. digits]
    [e [+-] digits], or 'inf'/'nan' words, refused later as not finite): the one grammar both
    interpreters' int() and float() read alike (CPython's also take other scripts' digits, '_'
    and Unicode spaces; MicroPython's do not)."""
    i = 1 if s[:1] in ("+", "-") else 0
    if real and s[i:].lower() in ("inf", "nan", "infinity"):
        return True
    j = _digits(s, i)
    if not real:
        return i < j == len(s)
    k = j
    if k < len(s) and s[k] == ".":
        k = _digits(s, k + 1)
    if k == i or k == i + 1 and s[i] == ".":
        return False  # no digit before the exponent
    if k < len(s) and s[k] in "eE":
        e = k + 1 + (1 if s[k + 1: k + 2] in ("+", "-") else 0)
        k = _digits(s, e)
        if k == e:
            return False
    return k == len(s)


def _value(kind, key, val, n):
    if kind in ("v", "t"):
        if not _name_ok(val):
            raise fail(n, "%s=%s: not a valid name" % (key, val), key)
        return val
    if kind == "vs":
        names = val.split(",")
        for s in names:
            if not _name_ok(s):
                raise fail(n, "%s=%s: not a list of names" % (key, val), key)
        return names
    if kind[0] == "e":
        if val not in kind[2:].split("|"):
            raise fail(n, "%s=%s: expected one of %s" % (key, val, kind[2:]), key)
        return val
    parts = val.split(",")
    if len(parts) > 8:
        raise fail(n, "%s=%s: too many numbers" % (key, val), key)
    try:
        for v in parts:
            if not _number_ok(v, kind == "f" or (kind == "q" and v is parts[0])):
                raise ValueError
        if kind == "f":
            nums = [float(v) for v in parts]
        elif kind == "q":
            if len(parts) != 2:
                raise ValueError
            nums = [float(parts[0]), int(parts[1])]
        else:
            nums = [int(v) for v in parts]
    except ValueError:
        raise fail(n, "%s=%s: expected %s" % (key, val, {"f": "a number", "q": "scale,zero_point"}.get(
            kind, "integers")), key)
    for v in nums:
        if v - v != 0:  # nan, inf
            raise fail(n, "%s=%s: not finite" % (key, val), key)
    if kind == "q":  # (the zero point's range is its value's dtype's: checked with the dtype)
        if not nums[0] > 0 or not -2147483648 <= nums[1] <= 2147483647:
            raise fail(n, "q=%s: needs scale > 0 and an int32 zero point" % val, key)
        return (nums[0], nums[1])
    if kind in ("i", "f"):
        if len(nums) != 1:
            raise fail(n, "%s=%s: expected one number" % (key, val), key)
        return nums[0]
    return tuple(nums)


def parse(text):
    """(line number, op, {key: value}) for each op of a graph description, one at a time (a
    generator: no list of every line is kept); checks ops, keys and the syntax of every value
    (their meaning is checked by the ops)."""
    count = 0
    n = 0
    for line in text.split("\n"):
        n += 1
        # tokens: split at ASCII spaces, tabs and CRs only (str.split() also splits at Unicode
        # spaces on CPython and not on MicroPython: one grammar on both)
        parts = [t for t in line.replace("\t", " ").replace("\r", " ").split(" ") if t]
        if not parts or parts[0][0] == "#":
            continue
        if count >= MAX_LINES:
            raise fail(n, "more than %d ops" % MAX_LINES)
        op = parts[0]
        if op not in OPS:
            raise fail(n, "unknown op %r" % op)
        req, opt = OPS[op]
        kv = {}
        for tok in parts[1:]:
            i = tok.find("=")
            if i <= 0 or i == len(tok) - 1:
                raise fail(n, "expected key=value, got %r" % tok)
            key, val = tok[:i], tok[i + 1:]
            if key not in req and key not in opt:
                raise fail(n, "%s takes no key %r" % (op, key), key)
            if key in kv:
                raise fail(n, "key %r given twice" % key, key)
            if key == "x" and op in _MULTI_X:
                kind = "vs"
            elif key == "m":
                kind = "t" if op in _WL or op in ("lstm", "gru") else "is"
            elif key == "wl":
                kind = _WL[op]
            else:
                kind = _KINDS[key]
            kv[key] = _value(kind, key, val, n)
        for key in req:
            if key not in kv:
                raise fail(n, "%s needs %s=" % (op, key), key)
        count += 1
        yield n, op, kv
    if not count:
        raise ContainerError("graph: empty description", None, "graph")


class Value:
    """An activation: shape (N,) or (H, W, C), dtype 'f32', 'bool' (bytes 0 or 1: comparisons,
    logical ops, select's condition), or an integer dtype ('i8', 'i16', 'i32'; 'u8', a model's
    uint8 input or output, which only lut reads and writes) with q = (scale, zero point). The planner sets `offset` (bytes into the arena);
    `alias` is the value whose buffer it shares (a reshape, an in-place op). Six attributes,
    no more (the lifetimes live in the model until it is planned)."""

    offset = 0
    alias = None

    def __init__(self, name, shape, dtype, q=None):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.q = q
        n = 1
        for d in shape:
            n *= d
        self.size = n

    def nbytes(self):
        return self.size * ITEMSIZE[self.dtype]

    def root(self):
        v = self
        while v.alias is not None:
            v = v.alias
        return v

    def __repr__(self):
        return "<Value %s %s%s>" % (self.name, self.dtype, self.shape)


def check_shape(shape, n, key="shape"):
    if not 1 <= len(shape) <= 3:
        raise fail(n, "%s %s: values have 1 to 3 dimensions (N or H,W,C)" % (key, shape), key)
    size = 1
    for d in shape:
        if not 1 <= d <= MAX_DIM:
            raise fail(n, "%s %s: dimensions are 1..%d" % (key, shape, MAX_DIM), key)
        size *= d
    if size > MAX_SIZE:
        raise fail(n, "%s %s: more than %d elements" % (key, shape, MAX_SIZE), key)
    return tuple(shape)


def pairs(kv, key, default, n, count=2, low=1):
    """kv[key] as a tuple of `count` ints >= low (a single int is repeated)."""
    v = kv.get(key)
    if v is None:
        return default
    if len(v) == 1:
        v = v * count
    if len(v) != count:
        raise fail(n, "%s=%s: expected 1 or %d integers" % (key, ",".join(str(i) for i in v), count), key)
    for i in v:
        if not low <= i <= MAX_DIM:
            raise fail(n, "%s=%s: each must be %d..%d" % (key, ",".join(str(i) for i in v), low, MAX_DIM), key)
    return v


def clamp(kv, n, dtype="i8"):
    """The integer clamp (lo, hi) of an op's output, default the whole range of its dtype."""
    r = RANGE[dtype]
    v = kv.get("clamp", r)
    if len(v) != 2 or not r[0] <= v[0] <= v[1] <= r[1]:
        raise fail(n, "clamp=%s: expected lo,hi with %d <= lo <= hi <= %d" % (v, r[0], r[1]), "clamp")
    return v


def zero_point(q, dtype, n, key="q"):
    """q's zero point, checked against dtype's range."""
    r = RANGE[dtype]
    if not r[0] <= q[1] <= r[1]:
        raise fail(n, "q=%r,%d: the zero point of an %s value is %d..%d" % (q[0], q[1], dtype, r[0], r[1]), key)
    return q[1]


def plan(values, life, align=4, pairs=None):
    """Arena byte offsets for every value (TFLite Micro's greedy planner): buffers sorted by size,
    largest first (later values first among equals), each put at the lowest offset where it
    overlaps no placed buffer alive at the same time (life: {id(value): (first op, last op)}).
    Values sharing a buffer (alias) get their root's offset. pairs: {id(v): (partner, lag, v is
    the output)} for an op's output that may overlap its dying input if it starts `lag` bytes
    before it or earlier (Model._pairs). Returns the arena size in bytes."""
    pairs = pairs or {}
    bufs = [(-v.nbytes(), -life[id(v)][0], life[id(v)][1], i) for i, v in enumerate(values) if v.alias is None]
    bufs.sort()  # i last: MicroPython's sort is not stable
    placed = []  # (value, first, last)
    top = 0
    for _, first, last, i in bufs:
        v = values[i]
        first = -first
        size = (v.nbytes() + align - 1) // align * align
        pair = pairs.get(id(v))
        # the offsets v may not start at: (lo, hi) open, one per live placed buffer
        gaps = []
        for p, pfirst, plast in placed:
            if pfirst <= last and first <= plast:
                end = p.offset + (p.nbytes() + align - 1) // align * align
                lo = p.offset - size
                # (a lag as large as the output is no overlap at all: the usual rule holds)
                if pair is not None and pair[0] is p and pair[1] < (v if pair[2] else p).nbytes():
                    if pair[2]:  # v is the output: at or before p's start - lag
                        lo = p.offset - pair[1]
                    else:  # v is the input: p starts at or before v's start - lag
                        end = p.offset + pair[1]
                gaps.append((lo, end))
        gaps.sort()
        off = 0
        for lo, hi in gaps:
            if off <= lo:
                break
            if off < hi:
                off = hi
        v.offset = off
        placed.append((v, first, last))
        if off + size > top:
            top = off + size
    for v in values:
        if v.alias is not None:
            v.offset = v.root().offset
    return top


def words4(records):
    """The records with each MOVE and FILL of 8-byte (i64) elements made two of 4-byte words:
    the low words, then the high ones (strides doubled), so the kernels move words only."""
    out = []
    for r in records:
        kind = r[0] & 255
        if kind == MOVE and r[10] == 8:
            lo = r[:]
            lo[10] = 4
            for j in (6, 7, 8, 9, 12, 13):
                lo[j] *= 2
            hi = lo[:]
            hi[2] += 4
            hi[3] += 4
            out += [lo, hi]
        elif kind == FILL and r[5] == 8:  # (a code whose high word is its sign: 0, -1)
            out.append(r[:3] + [2 * r[3], r[4], 4])
        else:
            out.append(r)
    return out
