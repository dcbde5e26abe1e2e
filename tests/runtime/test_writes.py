# Writes never reach the container. Every public way to change a param (item assignment,
# in-place ops on mut(), mappers, clone, clone(arrays=True), Module.clone) and every way to
# run a packed graph model (forward passes on each kernel path, clones run and written, param
# writes, the model helpers) works over a container held in a bytearray, where an accidental
# write would land; the bytes must hash the same afterwards. Runs on CPython and MicroPython.
import mpy_lazy
from mpy_lazy import Module, Param, kernels, model
from rt_util import IS_MICROPYTHON, crc32, golden

GOLDENS = ("tiny", "f16", "int8", "int8_channel", "ints", "align64", "graph_int8", "graph_f32", "graph_f16",
           "layers")


class Node(Module):
    pass


def model_for(c):
    """A module tree with one Param per (non-AUX) tensor: 'fc.weight' -> m.fc.weight."""
    m = Node()
    for name in c.names():
        info = c.info(name)
        dtype = "f32" if info.dtype in ("f32", "f16") or info.quant else info.dtype
        node = m
        parts = name.split(".")
        for part in parts[:-1]:
            if not hasattr(node, part):
                setattr(node, part, Node())
            node = getattr(node, part)
        setattr(node, parts[-1], Param(info.shape, dtype))
    return m


class Guard:
    """A golden container in a bytearray, and a check that its bytes never changed."""

    def __init__(self, name):
        self.name = name
        self.buf = bytearray(golden(name + ".mpyl"))
        self.crc = crc32(self.buf)
        self.copy = bytes(self.buf)
        self.c = mpy_lazy.open(self.buf)

    def loaded(self):
        m = model_for(self.c)
        mpy_lazy.load(m, self.c)
        return m

    def check(self, what):
        assert crc32(self.buf) == self.crc and bytes(self.buf) == self.copy, (self.name, what)
        assert self.c.verify() == len(self.c)


def reals(p):
    return [p[i] for i in range(p.size)]


def is_float(p):
    return p.dtype in ("f32", "f16")


def change(a, i, floats):
    """Change element i of a RAM array in place, staying inside the dtype's range."""
    if floats:
        a[i] += 1
        a[i] *= 3
    else:
        a[i] //= 2
        a[i] += 1


def each(fn):
    for name in GOLDENS:
        g = Guard(name)
        fn(g)
        g.check(fn.__name__)


def test_item_assignment_copies_on_write():
    def run(g):
        for _, p in g.loaded().named_params():
            before = reals(p)
            view = p.view
            p[p.size - 1] = 7
            p[0] = 99
            assert p.state == "owned" and p.view is None and p[0] == 99
            assert view.real(0) == before[0]  # the container still holds the old value
            g.check("p[i] = x")

    each(run)


def test_in_place_ops_on_mut():
    def run(g):
        for _, p in g.loaded().named_params():
            a = p.mut()
            for i in range(p.size):
                change(a, i, is_float(p))
            if hasattr(a, "shape"):  # numpy / ulab: whole-array in-place ops
                a *= 0  # (ulab has no in-place //: `a //= 2` would rebind a to a new array)
                a += 1
                assert a[p.size - 1] == 1
            g.check("mut() in place")
            b = p.mut()  # owned now: the same array, no new copy
            assert b is a
            b[0] = 0
        g.check("mut() again")

    each(run)


def test_mappers():
    def run(g):
        m = model_for(g.c)
        for _, p in m.named_params():
            p.load_mapper(lambda v: v)  # keeps the view
        mpy_lazy.load(m, g.c)
        for _, p in m.named_params():
            assert p.state == "bound"
            p.save_mapper(lambda v: v)
            p.record()
        g.check("identity mappers")

        def changed(floats):
            def mapper(v):
                a = v.dequantize() if floats else v.tolist()
                for i in range(len(a)):
                    change(a, i, floats)
                return a

            return mapper

        m = model_for(g.c)
        for _, p in m.named_params():
            p.load_mapper(changed(is_float(p))).save_mapper(lambda v: v)
        mpy_lazy.load(m, g.c)
        for _, p in m.named_params():
            assert p.state == "owned"
            p[0] = 1
            r = p.record()
            r[0] = 5  # writing into what record() returns: the owned array
        g.check("value mappers")

    each(run)


def test_clones():
    def run(g):
        m = g.loaded()
        for _, p in m.named_params():
            before = reals(p)
            c = p.clone()
            assert c.state == "bound" and c.view is p.view
            c[0] = 42
            deep = p.clone(arrays=True)
            assert deep.state == "owned"
            a = deep.mut()
            for i in range(deep.size):
                change(a, i, is_float(deep))
            assert reals(p) == before and p.state == "bound"
            g.check("param clones")
        for arrays in (False, True):
            mc = m.clone(arrays)
            for _, p in mc.named_params():
                p[0] = 13
                p.mut()[p.size - 1] = 17
            g.check("Module.clone(%s)" % arrays)
        for _, p in m.named_params():  # owned originals shared with clones, written on both sides
            p.mut()
            c = p.clone()
            c[0] = 1
            p[0] = 2
            assert c[0] == 1 and p[0] == 2
        g.check("owned clones")

    each(run)


def test_views_and_dequantize_do_not_write():
    def run(g):
        for name in g.c.names(aux=True):
            v = g.c.view(name)
            v.array()
            v.tolist()
            if v.dtype in ("f32", "f16", "i8"):
                out = v.dequantize()
                out[0] = 1234
                v.dequantize(out)
                for i in range(len(out)):
                    out[i] = -1
        g.check("views")

    each(run)


def model_inputs(m, seed):
    """Deterministic inputs for every input of graph model m (int8 codes or floats)."""
    k = seed
    out = []
    for v in m.inputs:
        vals = []
        for _ in range(v.size):
            k = (k * 1103515245 + 12345) & 0x7FFFFFFF
            vals.append((k >> 16) % 256 - 128 if v.dtype == "i8" else ((k >> 16) % 512) / 128.0 - 2.0)
        out.append(vals)
    return out


def params(m):
    """A declared model's Params; none for a stored program (its weights are the container's
    tensors, read in place; nothing to write)."""
    return m.params() if hasattr(m, "params") else []


def exercise(g, m, what):
    """Every public way to run and change graph model m, on every kernel path, checking the
    container after each: forward passes (twice: scratch and arena reused), predict, the
    output helpers, quantize, clones (sharing and copying) run and written, param writes."""
    xs = model_inputs(m, 7)
    try:
        for path in kernels.available():
            kernels.use(path)
            m(*xs)
            first = m.tolist()
            m(*xs)
            assert m.tolist() == first
            m.predict(*xs)
            m.dequantize()
            if m.inputs[0].dtype == "i8":
                s, z = m.inputs[0].q
                m.quantize([s * (v - z) for v in xs[0]])
                m(m.input)
                assert m.tolist() == first
            g.check("%s: forward passes on %s" % (what, path))
            for arrays in (False, True):
                c = m.clone(arrays)
                c(*xs)
                assert c.tolist() == first
                for p in params(c):
                    p[0] = p[0] + 1 if p.dtype in ("f32", "f16") else p[0] // 2  # copy-on-write, or the clone's copy
                    a = p.mut()
                    a[p.size - 1] = 0
                if params(c):
                    c.prepare()
                c(*xs)
                c.predict(*xs)
                g.check("%s: clone(%s) written and run on %s" % (what, arrays, path))
            m(*xs)
            assert m.tolist() == first  # the clones' writes never reached the original
    finally:
        kernels.use()
    c = m.clone()
    for p in params(m):
        assert p.state == "bound"
        p[0] = 1  # the original's own params, copy-on-write
        p.mut()[p.size - 1] = 1
        assert p.state == "owned"
    if params(m):
        m.prepare()
    m(*xs)
    c(*xs)
    mpy_lazy.report(m, show=False)
    mpy_lazy.report(c, show=False)
    g.check("%s: the original's params written" % what)


def test_graph_models_do_not_write():
    for name in ("graph_int8", "graph_f32", "layers"):
        g = Guard(name)
        m = model.from_container(g.c)
        exercise(g, m, name)
        # declared, loaded non-strictly, prepared by hand
        d = model.declare(g.c)
        d.load(g.c, strict=False)
        d.prepare()
        d(*model_inputs(d, 3))
        g.check(name + ": declare/load/prepare")


def test_f16_graph_model_does_not_write():
    """The f16 float graph (weights and biases f16: decoded while running)."""
    g = Guard("graph_f16")
    exercise(g, model.from_container(g.c), "graph_f16")


def test_the_guard_would_see_a_write():
    # The check above can fail: a View's memoryview is the container's memory. On MicroPython
    # over a bytearray it is writable (so kernels must never write it); CPython hands out
    # read-only views.
    g = Guard("tiny")
    v = g.c.view("fc.weight")
    if IS_MICROPYTHON:
        v.mv[0] ^= 1
        assert crc32(g.buf) != g.crc
    else:
        try:
            v.mv[0] ^= 1
        except TypeError:
            pass
        else:
            raise AssertionError("CPython view is writable")
        assert crc32(g.buf) == g.crc


def test_public_api_hands_out_no_writable_alias():
    """Issue 13 item 4: everything the public API hands out over a container's memory is
    read-only or a copy. The walk (rt_walk.py) tries to write through every object it gets;
    the container is an immutable bytes here (a write through a uctypes or ulab alias would
    still land in it on MicroPython) and, on CPython, a read-only mmap too.
    tests/host/test_readonly_mapping.py runs the same walk with the container in a read-only
    mapping under MicroPython."""
    import rt_walk

    for name in GOLDENS:
        data = golden(name + ".mpyl")
        crc = crc32(data)
        w = rt_walk.walk(mpy_lazy.open(data), lambda: crc32(data) == crc)
        assert w.refused > 0 and w.steps > 10, name
    import test_safetensors as st  # a plain safetensors file too (its byte writer)

    data = st.build([t for t in st.ALL if t[3]], meta=[("k", "v")])
    crc = crc32(data)
    rt_walk.walk(mpy_lazy.open(data), lambda: crc32(data) == crc)
    if IS_MICROPYTHON:
        return
    import mmap
    import rt_util

    for name in ("int8_channel", "graph_f16"):
        with open(rt_util.GOLDEN_DIR + "/" + name + ".mpyl", "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        crc = crc32(m)
        rt_walk.walk(mpy_lazy.open(m), lambda: crc32(m) == crc)
