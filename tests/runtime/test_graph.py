# The graph description parser and checker (mpy_lazy/graph.py, the ops' declare step): every
# broken description is refused with a ContainerError of field 'graph' naming the line (counted
# like a text editor: comments and blank lines included) before anything is allocated; valid
# lines give the values their keys mean. Models that run: test_model.py.
from rt_util import IS_MICROPYTHON, raises, small_board

from mpy_lazy import ContainerError, graph
from mpy_lazy.model import Model

F = "input y=a shape=4,4,2"  # an f32 H, W, C value `a` (line 1)
Q = "input y=a shape=4,4,2 dtype=i8 q=0.1,0"  # the same, int8
V = "input y=a shape=4"  # an f32 vector


def refused(lines, line, *words):
    """Model(text) raises ContainerError field 'graph' whose message names `line` (None: an
    error of the whole description) and contains every word."""
    text = "\n".join(lines)
    e = raises(ContainerError, Model, text)
    msg = str(e)
    assert e.field == "graph", (text, e.field, msg)
    if line is None:
        assert "graph line" not in msg, (text, msg)
    else:
        assert ("graph line %d:" % line) in msg, (text, msg)
    for w in words:
        assert w in msg, (text, msg, w)
    return e


def test_syntax_errors():
    refused([V, "frobnicate x=a y=b", "output x=b"], 2, "unknown op", "frobnicate")
    refused(["\n# a comment", "", V, "", "frob x=a y=b"], 6, "unknown op")  # lines counted as in the file
    refused([V, "relu x=a y=b k=3"], 2, "relu takes no key", "'k'")
    refused([V, "relu x=a y=b x=a"], 2, "given twice")
    refused([V, "relu x=a y=b junk"], 2, "key=value")
    refused([V, "relu x=a y="], 2, "key=value")
    refused([V, "relu =a y=b"], 2, "key=value")
    refused([V, "relu x=a y=b,c"], 2, "not a valid name")
    refused([V, "add x=a,,a y=b"], 2, "not a list of names")
    refused([V, "relu x=a y=" + "n" * 256], 2, "not a valid name")
    refused(["input y=a shape=4,x"], 1, "shape=4,x", "integers")
    refused(["input y=a shape=4.5"], 1, "integers")
    refused(["input y=a shape=" + ",".join(["1"] * 9)], 1, "too many numbers")
    refused([V, "leakyrelu x=a y=b alpha=fast"], 2, "a number")
    refused([V, "leakyrelu x=a y=b alpha=1,2"], 2, "one number")
    refused([F, "conv2d x=a y=b w=w out=2.0 k=1"], 2, "out=")
    refused([F, "conv2d x=a y=b w=w out=2 k=1 act=gelu"], 2, "act=gelu", "relu6")
    refused(["input y=a shape=4 dtype=u64"], 1, "dtype=u64")
    refused(["input y=a shape=4,4,2 layout=nchw"], 1, "layout=nchw")
    refused([F, "conv2d x=a y=b w=w out=2 k=1 wl=hwio"], 2, "wl=hwio", "ohwi")
    refused([F, "depthwise x=a y=b w=w k=1 wl=ohwi"], 2, "wl=ohwi", "1hwo")
    refused([V, "linear x=a y=b w=w out=2 wl=oihw"], 2, "wl=oihw")


def test_non_finite_numbers_and_bad_q():
    for bad in ("nan", "inf", "-inf", "1e999"):
        refused([V, "leakyrelu x=a y=b alpha=" + bad], 2, "not finite")
        refused([V, "clip x=a y=b lo=%s hi=1" % bad], 2, "not finite")
        refused(["input y=a shape=4 dtype=i8 q=%s,0" % bad], 1, "not finite")
    refused([V, "softmax x=a y=b beta=nan"], 2, "not finite")
    for q in ("0,0", "-0.1,0"):
        refused(["input y=a shape=4 dtype=i8 q=" + q], 1, "scale > 0")
    for q in ("0.1,128", "0.1,-129"):
        refused(["input y=a shape=4 dtype=i8 q=" + q], 1, "zero point", "-128..127")
    refused(["input y=a shape=4 dtype=i16 q=0.1,32768"], 1, "zero point", "-32768..32767")
    for q in ("0.1", "0.1,2.5", "0.1,1,2", "x,1", "0.1,"):
        refused(["input y=a shape=4 dtype=i8 q=" + q], 1, "scale,zero_point")


def test_missing_keys_and_names():
    refused([V, "linear x=a y=b out=2"], 2, "linear needs w=")
    refused(["input y=a"], 1, "input needs shape=")
    refused([V, "output"], 2, "output needs x=")
    refused([F, "conv2d x=a y=b w=w k=3"], 2, "needs out=")
    refused([F, "maxpool x=a y=b"], 2, "needs k=")
    refused([V, "clip x=a y=b lo=0"], 2, "needs hi=")
    refused([V, "quantize x=a y=b"], 2, "needs q=")
    refused([V, "relu x=zz y=b"], 2, "'zz'", "no value defined above")
    refused([V, "add x=a,zz y=b"], 2, "'zz'")
    refused([V, "relu x=b y=c", "relu x=a y=b"], 2, "'b'")  # used before it is defined
    refused([V, "relu x=a y=a"], 2, "'a'", "defined twice")
    refused([V, "relu x=a y=b", "relu x=a y=b"], 3, "defined twice")
    refused([V, V], 2, "defined twice")
    refused([V, "relu x=a y=b", "output x=zz"], 3, "output 'zz'")
    refused([V], None, "input and one output")
    refused([V, "relu x=a y=b"], None, "input and one output")
    refused(["", "# nothing but a comment", "  "], None, "empty")
    refused([""], None, "empty")


def test_shapes_and_values():
    refused(["input y=a shape=0"], 1, "1..65535")
    refused(["input y=a shape=65536"], 1, "1..65535")
    refused(["input y=a shape=-4"], 1, "1..65535")
    refused(["input y=a shape=1,1,1,1"], 1, "1 to 3")
    refused(["input y=a shape=4097,4097,1"], 1, "more than %d elements" % graph.MAX_SIZE)
    big = "input y=a shape=4096,4096,1"  # exactly MAX_SIZE: allowed, the conv output is not
    assert graph.check_shape((4096, 4096, 1), 1) == (4096, 4096, 1)
    refused([big, "conv2d x=a y=b w=w out=2 k=1"], 2, "more than")
    refused([big, "pad x=a y=b pad=1,0,0,0"], 2, "more than")
    refused([F, "reshape x=a y=b shape=5"], 2, "5", "32")
    refused([F, "reshape x=a y=b shape=3,-1"], 2, "shape")  # 32 is no multiple of 3
    refused([F, "reshape x=a y=b shape=-1,-1"], 2, "shape")
    refused(["input y=a shape=4", "layout=chw"], 2, "unknown op")
    refused(["input y=a shape=4 layout=chw"], 1, "layout=chw")
    refused(["input y=a shape=4 dtype=i8"], 1, "q=")
    refused(["input y=a shape=4 q=0.1,0"], 1, "q=")


def test_ascii_numbers_only():
    """One grammar on both interpreters: ASCII digits, no '_', tokens split at ASCII spaces,
    tabs and CRs only (CPython's int() reads Arabic-Indic and fullwidth digits and '1_0',
    MicroPython's does not; CPython's split() also splits at Unicode spaces)."""
    for k in ("3,\u0663", "\uff13", "1_0", "+-1", "3.0", "0x3"):
        refused([F, "maxpool x=a y=b k=" + k], 2, "k=", "integers")
    for alpha in ("1_0.5", "1e", "1.2.3", ".", "e5", "\u0661.5"):
        refused([V, "leakyrelu x=a y=b alpha=" + alpha], 2, "alpha=", "a number")
    refused(["input y=a shape=4 dtype=i8 q=0.1,\uff10"], 1, "scale,zero_point")
    refused([V, "relu x=a\u00a0y=b"], 2, "not a valid name")  # a no-break space joins the tokens
    refused([V, "relu x=a\u3000y=b"], 2, "not a valid name")
    ok = Model("\n".join([V, "leakyrelu\tx=a  y=b alpha=-1.5E-1\r", "output x=b"]))
    assert ok is not None


def test_conv_and_pool_geometry():
    refused([F, "conv2d x=a y=b w=w out=3 k=1 groups=2"], 2, "groups")  # 3 outputs in 2 groups
    refused([F, "conv2d x=a y=b w=w out=4 k=1 groups=3"], 2, "groups")  # 2 channels in 3 groups
    refused([F, "conv2d x=a y=b w=w out=4 k=1 groups=0"], 2, "groups")
    refused([F, "conv2d x=a y=b w=w out=0 k=1"], 2, "out=0")
    refused([F, "conv2d x=a y=b w=w out=70000 k=1"], 2, "out=70000")
    refused(["input y=a shape=2,2,1", "conv2d x=a y=b w=w out=1 k=3"], 2, "larger than")
    refused(["input y=a shape=2,5,1", "conv2d x=a y=b w=w out=1 k=2 dil=2"], 2, "larger than")
    refused([F, "conv2d x=a y=b w=w out=1 k=3 pad=3"], 2, "pad")
    refused([F, "conv2d x=a y=b w=w out=1 k=3,1 pad=0,1"], 2, "pad")  # width pad 1 >= kernel width 1
    refused([F, "conv2d x=a y=b w=w out=1 k=3 pad=1,1,1"], 2, "pad")
    refused([F, "conv2d x=a y=b w=w out=1 k=0"], 2, "k=0")
    refused([F, "conv2d x=a y=b w=w out=1 k=1,2,3"], 2, "k=1,2,3")
    refused([F, "conv2d x=a y=b w=w out=1 k=1 stride=0"], 2, "stride=0")
    refused([F, "conv2d x=a y=b w=w out=1 k=1 dil=0"], 2, "dil=0")
    refused([V, "conv2d x=a y=b w=w out=1 k=1"], 2, "H,W,C")
    refused([F, "depthwise x=a y=b w=w k=1 mult=0"], 2, "mult")
    refused([F, "maxpool x=a y=b k=2 pad=2"], 2, "pad")
    refused([F, "avgpool x=a y=b k=5"], 2, "larger than")
    refused([F, "maxpool x=a y=b k=2 stride=0"], 2, "stride=0")
    refused([V, "maxpool x=a y=b k=2"], 2, "H,W,C")
    refused([V, "mean x=a y=b"], 2, "H,W,C")
    refused([F, "pad x=a y=b pad=1,1"], 2, "pad")
    refused([F, "pad x=a y=b pad=1,1,1,4097"], 2, "pad")
    refused([V, "pad x=a y=b pad=1,1,1,1"], 2, "H,W,C")


def test_dtype_rules():
    refused([Q, "conv2d x=a y=b w=w out=3 k=1 m=m"], 2, "needs q=")  # int8 op without q=
    refused([Q, "conv2d x=a y=b w=w out=3 k=1 q=0.1,0"], 2, "needs m=")
    refused([Q, "linear x=a y=b w=w out=3 m=m"], 2, "q=")
    refused([Q, "add x=a,a y=b m=1,1,1,1,1,1"], 2, "q=")
    refused([F, "add x=a,a y=b q=0.1,0"], 2, "q=", "f32")  # f32 op with q=
    refused([V, "linear x=a y=b w=w out=2 m=m"], 2, "m=", "f32")
    refused([F, "maxpool x=a y=b k=2 clamp=0,1"], 2, "clamp=", "f32")
    refused([Q, "input y=f shape=4,4,2", "add x=a,f y=b q=0.1,0 m=1,-1,1,-1,1,-1"], 3, "mix")
    refused([Q, "input y=f shape=4,4,2", "concat x=f,a y=b"], 3, "mix")
    refused([Q, "relu x=a y=b"], 2, "f32")  # float activations take f32 values (int8: lut)
    refused([Q, "sigmoid x=a y=b"], 2, "f32")
    refused([F, "lut x=a y=b t=t q=0.1,0"], 2, "i8")
    refused([Q, "quantize x=a y=b q=0.1,0"], 2, "m=")  # int8 -> int8 rescales
    refused([F, "quantize x=a y=b q=0.1,0 dtype=f32"], 2, "integer", "i16")
    refused([F, "dequantize x=a y=b"], 2, "integer")
    refused([Q, "softmax x=a y=b q=0.1,-128 t=t"], 2, "1/256")  # int8 softmax output q
    refused([Q, "softmax x=a y=b q=0.00390625,0 t=t"], 2, "1/256")
    refused([Q, "softmax x=a y=b q=0.00390625,-128"], 2, "t=")
    refused(["input y=a shape=4096 dtype=i8 q=0.1,0", "softmax x=a y=b q=0.00390625,-128 t=t"], 2, "4095")
    refused([F, "softmax x=a y=b t=t"], 2, "t=")
    refused([Q, "maxpool x=a y=b k=2 q=0.2,0"], 2, "q=")  # int8 pooling keeps the input's q
    refused([Q, "maxpool x=a y=b k=2 q=0.1,0 clamp=5,1"], 2, "clamp")
    refused([Q, "maxpool x=a y=b k=2 q=0.1,0 clamp=-129,0"], 2, "clamp")
    refused([Q, "maxpool x=a y=b k=2 q=0.1,0 clamp=1"], 2, "clamp")
    refused([Q, "pad x=a y=b pad=1,1,1,1 q=0.2,0"], 2, "q")
    refused([Q, "reshape x=a y=b shape=32 q=0.2,0"], 2, "q=")
    refused([F, "reshape x=a y=b shape=32 q=0.2,0"], 2, "q=")
    refused([Q, "concat x=a,a y=b q=0.2,0"], 2, "q")
    refused([Q, "mean x=a y=b q=0.1,0 m=1"], 2, "m=")
    refused([Q, "mean x=a y=b q=0.1,0 m=2147483648,0"], 2, "m=")
    refused([Q, "mean x=a y=b q=0.1,0 m=1073741824,31"], 2, "m=")


def test_binary_and_concat_shapes():
    refused([F, "add x=a y=b"], 2, "two inputs")
    refused([F, "add x=a,a,a y=b"], 2, "two inputs")
    refused([F, "input y=v shape=3", "add x=a,v y=b"], 3, "do not broadcast")
    refused([F, "input y=v shape=4,2,2", "mul x=a,v y=b"], 3, "do not broadcast")
    Model("\n".join([F, "input y=v shape=4,2", "add x=v,a y=b", "output x=b"]))  # (4, 2) repeats over (4, 4, 2)
    Model("\n".join([F, "input y=v shape=1,1,1", "mul x=a,v y=b", "output x=b"]))
    # numpy's broadcasting: move records copy the operands out at the output's shape
    m = Model("\n".join([F, "input y=v shape=4,1,2", "input y=w shape=1,3,1", "sub x=v,w y=b", "output x=b"]))
    assert m.outputs[0].shape == (4, 3, 2)
    # a constant operand (t=, shape=, tq= its quantization when integer)
    refused([F, "add x=a y=b t=c shape=4,1,2"], 2, "trailing dimensions")
    refused([F, "add x=a,a y=b shape=2"], 2, "shape= and tq=")
    refused([F, "add x=a y=b t=c tq=0.1,0"], 2, "tq= is for an integer")
    refused([Q, "add x=a y=b t=c q=0.1,0 m=1,-1,1,-1,1,-1"], 2, "tq=")
    refused([Q, "mul x=a y=b t=c tq=0.1,200 q=0.1,0 m=1,-1"], 2, "zero point")
    refused([Q, "mul x=a,a y=b t=c tq=0.1,0 q=0.1,0 m=1,-1"], 2, "x=a t=tensor")
    Model("\n".join([Q, "sub x=a y=b t=c shape=4,2 tq=0.1,0 q=0.1,0 m=1,-1,1,-1,1,-1", "output x=b"]))
    refused([F, "input y=v shape=4,2,2", "concat x=a,v y=b"], 3, "outside axis 2")
    refused([F, "input y=v shape=4,2,2", "concat x=a,v y=b axis=0"], 3, "outside axis 0")
    refused([F, "concat x=a,a y=b axis=3"], 2, "axis=3")
    refused([F, "input y=v shape=4", "concat x=a,v y=b axis=0"], 3, "outside axis 0")
    refused([Q, "add x=a,a y=b q=0.1,0 m=1,-1"], 2, "6 integers")
    refused([Q, "mul x=a,a y=b q=0.1,0 m=1,-1,1,-1,1,-1"], 2, "2 integers")
    refused([Q, "add x=a,a y=b q=0.1,0 m=2147483648,-1,1,-1,1,-1"], 2, "m=")
    refused([Q, "add x=a,a y=b q=0.1,0 m=1,-32,1,-1,1,-1"], 2, "m=")
    refused([Q, "mul x=a,a y=b q=0.1,0 m=1,31"], 2, "m=")
    refused([Q, "mul x=a,a y=b q=0.1,0 m=-1,0"], 2, "m=")
    refused([Q, "add x=a,a y=b q=0.1,0 m=1,-1,1,-1,1,-1 clamp=3,2"], 2, "clamp")
    refused([V, "clip x=a y=b lo=1 hi=0"], 2, "lo <= hi")


def test_too_many_lines():
    if small_board():
        return  # a 50 KB description: a unix-port / CPython test

    def parse_all(lines):
        n = 0
        for _ in graph.parse("\n".join(lines)):  # a generator: nothing kept per line
            n += 1
        return n

    lines = [V] + ["relu x=a y=r%d" % i for i in range(graph.MAX_LINES)]
    e = raises(ContainerError, parse_all, lines)
    assert e.field == "graph" and ("graph line %d: more than %d ops" % (graph.MAX_LINES + 1, graph.MAX_LINES)) in str(e)
    lines = lines[:graph.MAX_LINES - 1] + ["# comments do not count", "", "output x=r0"]
    assert parse_all(lines) == graph.MAX_LINES
    if not IS_MICROPYTHON:  # 4096 declared ops take more than the unix port's 2 MB heap
        refused(lines[:-3] + ["relu x=a y=extra", "output x=r0"], graph.MAX_LINES + 1, "more than")
        assert len(Model("\n".join(lines)).ops) == graph.MAX_LINES - 2


def test_parse_values():
    """What each kind of key parses to (graph.parse checks syntax only)."""
    ops = list(graph.parse("\r\n# c\n\tconv2d  x=a y=b w=c.w out=3 k=3,1 pad=1,2,3,0 q=0.5,-3 act=relu m=c.m\r\n"
                      "add x=p,q y=s m=1,-2,3,-4,5,-6 clamp=-5,7\nleakyrelu x=s y=t alpha=-2.5e-1\n"
                      "input y=i shape=2,3,4 dtype=i8 q=0.25,127 layout=chw\noutput x=t"))
    assert [(n, op) for n, op, _ in ops] == [(3, "conv2d"), (4, "add"), (5, "leakyrelu"), (6, "input"), (7, "output")]
    kv = ops[0][2]
    assert kv == {"x": "a", "y": "b", "w": "c.w", "out": 3, "k": (3, 1), "pad": (1, 2, 3, 0), "q": (0.5, -3),
                  "act": "relu", "m": "c.m"}
    assert ops[1][2] == {"x": ["p", "q"], "y": "s", "m": (1, -2, 3, -4, 5, -6), "clamp": (-5, 7)}
    assert ops[2][2]["alpha"] == -0.25
    assert ops[3][2] == {"y": "i", "shape": (2, 3, 4), "dtype": "i8", "q": (0.25, 127), "layout": "chw"}
    assert graph.pairs({"k": (3,)}, "k", None, 1) == (3, 3)
    assert graph.pairs({}, "stride", (1, 1), 1) == (1, 1)
    e = raises(ContainerError, graph.pairs, {"k": (1, 2, 3)}, "k", None, 9)
    assert "graph line 9" in str(e) and e.field == "graph"


def test_declared_model_shapes():
    """A valid description: shapes, dtypes and q of every value, params declared with the
    shapes of their layouts, nothing bound or allocated."""
    m = Model("\n".join([
        "input y=x shape=9,8,3 dtype=i8 q=0.5,-1",
        "conv2d x=x y=a w=cw m=cm out=6 k=3,2 stride=2,1 pad=1,0,1,1 dil=1,2 groups=3 q=0.25,4",
        "depthwise x=a y=b w=dw m=dm k=3 mult=2 pad=1 q=0.25,4 wl=o1hw",
        "maxpool x=b y=c k=2 q=0.25,4",
        "reshape x=c y=d shape=-1,12",
        "linear x=d y=e w=fw b=fb m=fm out=5 wl=io q=0.1,0",
        "output x=e"]))
    shapes = [(v.name, v.shape, v.dtype, v.q) for v in m.values]
    assert shapes == [("x", (9, 8, 3), "i8", (0.5, -1)), ("a", (5, 7, 6), "i8", (0.25, 4)),
                      ("b", (5, 7, 12), "i8", (0.25, 4)), ("c", (2, 3, 12), "i8", (0.25, 4)),
                      ("d", (6, 12), "i8", (0.25, 4)), ("e", (5,), "i8", (0.1, 0))]
    params = dict((n, (p.shape, p.dtype, p.state)) for n, p in m.named_params())
    assert params == {"ops.0.weight": ((6, 3, 2, 1), "i8", "uninit"), "ops.0.requant": ((2, 6), "i32", "uninit"),
                      "ops.1.weight": ((12, 1, 3, 3), "i8", "uninit"), "ops.1.requant": ((2, 12), "i32", "uninit"),
                      "ops.4.weight": ((72, 5), "i8", "uninit"), "ops.4.bias": ((5,), "i32", "uninit"),
                      "ops.4.requant": ((2, 5), "i32", "uninit")}
    assert m.prog is None
    assert m.macs() == 5 * 7 * 6 * 6 + 5 * 7 * 12 * 9 + 72 * 5
