# Walks every public object and method of the runtime over one open container and tries to
# write through everything it hands out (issue 13 item 4: no public path writes to flash).
# Each write must be refused (TypeError, ValueError: read-only) or land in a copy: after every
# attempt `unchanged()` (the caller's hash of the container's bytes) must still hold.
# Run by tests/runtime/test_writes.py (bytes and, on CPython, an mmap ACCESS_READ) and by
# tests/host/test_readonly_mapping.py (MicroPython with the container in a read-only mapping:
# a write that got through would kill the process with SIGSEGV). CPython and MicroPython.
import mpy_lazy
from mpy_lazy import Module, Param

REFUSED = (TypeError, ValueError, AttributeError, NotImplementedError)


class Node(Module):
    pass


def module_for(c):
    """A module tree with one Param per (non-AUX) tensor the runtime can hold."""
    m = Node()
    for name in c.names():
        info = c.info(name)
        if info.dtype not in ("f32", "f16", "i8", "u8", "i16", "u16", "i32", "u32"):
            continue
        dtype = "f32" if info.dtype in ("f32", "f16") or info.quant else info.dtype
        node = m
        parts = name.split(".")
        for part in parts[:-1]:
            if not hasattr(node, part) or not isinstance(getattr(node, part), Module):
                setattr(node, part, Node())
            node = getattr(node, part)
        setattr(node, parts[-1], Param(info.shape, dtype))
    return m


class Walker:
    def __init__(self, c, unchanged):
        self.c = c
        self.unchanged = unchanged
        self.refused = 0  # write attempts refused
        self.copied = 0  # write attempts that landed in a copy
        self.steps = 0

    def check(self, what):
        self.steps += 1
        assert self.unchanged(), "container bytes changed after: " + what

    def attempt(self, what, fn):
        """Try a write; it must be refused or leave the container's bytes as they were."""
        try:
            fn()
        except REFUSED:
            self.refused += 1
        else:
            self.copied += 1
        self.check(what)

    def writes(self, what, a, n, floats=True):
        """Every way to write into an array-like `a` of n elements."""
        if a is None or n == 0:
            return
        x = 1.5 if floats else 1

        def item():
            a[0] = x

        def last():
            a[n - 1] = x

        def neg():
            a[-1] = x

        def sl():
            a[0:1] = [x]

        def inplace():
            b = a
            b += 1  # numpy / ulab in place; a list or wrapper: TypeError or a new object
            b *= 2

        for name, fn in (("[0]=", item), ("[n-1]=", last), ("[-1]=", neg), ("[0:1]=", sl),
                         ("in place", inplace)):
            self.attempt("%s %s" % (what, name), fn)

    def view(self, v):
        what = "view %s" % v.name
        info = v.info
        n = v.size
        assert v.shape == tuple(info.shape) and v.nbytes == info.nbytes
        vals = v.tolist()
        assert len(vals) == n and len(v) == n
        if n:
            assert v[0] == vals[0] and v[-1] == vals[-1] and v[n - 1] == vals[-1]
            v.real(0)
        repr(v)
        v.check()
        v.ram_bytes
        floats = v.dtype in ("f32", "f16")
        a = v.array()
        if n:
            assert [a[i] for i in range(n)] == [v[i] for i in range(n)] or floats
            assert list(a[0:n]) == [a[i] for i in range(n)]
            assert [x for x in a] == [a[i] for i in range(n)]
        self.writes(what + ".array()", a, n, floats)
        self.writes(what + ".array() again", v.array(), n, floats)
        b = v.buffer()
        assert bytes(b) == bytes(v.buffer())
        self.writes(what + ".buffer()", b, len(b), False)

        def setitem():
            v[0] = 1

        self.attempt(what + "[0]=", setitem)
        s = v.scales()
        if s is not None:
            self.view(s)
            self.writes(what + ".scales().array()", s.array(), s.size)
        if v.dtype in ("f32", "f16", "i8") and n:
            out = v.dequantize()
            out[0] = 7.0  # a RAM array of ours
            v.dequantize(out)
            self.check(what + ".dequantize()")
            for target in (v, s):  # another view's memory as the output
                if target is not None and target.dtype == "f32" and target.size == n:
                    self.attempt(what + ".dequantize(out=view.array())",
                                 lambda: v.dequantize(target.array()))

    def container(self):
        c = self.c
        names = c.names(aux=True)
        assert len(c) == len(names) and c.count(aux=True) == len(names)
        assert c.count() == len(c.names())
        for name in names:
            assert name in c
            info = c.info(name)
            repr(info)
            info.shape, info.dtype, info.nbytes, info.offset, info.quant
            if info.dtype not in ("f32", "f16", "i8", "u8", "i16", "u16", "i32", "u32"):
                continue  # a safetensors dtype the board cannot read
            c.check(name)
            self.view(c.view(name))
        c.verify()
        meta = c.meta
        if meta:
            k = list(meta)[0]
            meta[k] = "changed"  # the decoded dict is ours
        self.check("container")

    def params(self):
        c = self.c
        m = module_for(c)
        seen = []
        for _, p in m.named_params():
            p.load_mapper(lambda v: seen.append(v.name) or v)
        mpy_lazy.load(m, c, strict=False)
        assert len(seen) == len(m.params())
        mpy_lazy.state(m)
        mpy_lazy.report(m, show=False)
        for name, p in m.named_params():
            what = "param %s" % name
            assert p.state == "bound"
            v = p.view
            floats = p.dtype in ("f32", "f16")
            r = p.val()
            if r is not v:  # a float param over int8 codes: their real values, read-only
                self.writes(what + ".val()", r, p.size, floats)
            self.writes(what + ".val().array()", v.array(), p.size, floats)
            p.record()
            c1 = p.clone()
            self.writes(what + ".clone().view.array()", c1.view.array(), p.size, floats)
            c1[0] = 1  # copy-on-write
            assert c1.state == "owned" and p.state == "bound"
            self.check(what + " clone copy-on-write")
            deep = p.clone(arrays=True)
            self.writes(what + ".clone(arrays=True).mut()", deep.mut(), p.size, floats)
            before = p[0]
            p[p.size - 1] = 1
            a = p.mut()
            a[0] = 2
            assert p.state == "owned" and p.view is None and v[0] == v.tolist()[0]
            assert v.real(0) == before
            self.check(what + " copy-on-write")
        # mappers that try to write, and one returning the view's own memory
        m = module_for(c)

        def writer(v):
            try:
                v.array()[0] = 1
            except REFUSED:
                pass
            return v

        def save_writer(v):
            try:
                v.array()[0] = 1
            except REFUSED:
                pass
            return v

        for _, p in m.named_params():
            p.load_mapper(writer).save_mapper(save_writer)
        mpy_lazy.load(m, c, strict=False)
        self.check("writing load mappers")
        for _, p in m.named_params():
            p.record()
        self.check("writing save mappers")
        m = module_for(c)
        for _, p in m.named_params():
            p.load_mapper(lambda v: v.array())
        mpy_lazy.load(m, c, strict=False)
        for name, p in m.named_params():
            # the view's own memory: stays bound, reported as flash, writes copy first
            assert p.state == "bound", (name, p.state)
            assert p.memory()[1] == p.view.ram_bytes
            p[0] = 3
            assert p.state == "owned"
        self.check("load mapper returning view.array()")
        for arrays in (False, True):
            m = module_for(c)
            mpy_lazy.load(m, c, strict=False)
            mc = m.clone(arrays)
            for _, p in mc.named_params():
                self.writes("Module.clone(%s)" % arrays, p.mut(), p.size, p.dtype in ("f32", "f16"))
        self.check("module clones")

    def model(self):
        from mpy_lazy import model

        c = self.c
        if c._meta_get("graph") is None and c._meta_get("layers") is None:
            return
        m = model.from_container(c)
        x = []
        for v in m.inputs:
            x.append([((i * 37) % 256 - 128) if v.dtype == "i8" else ((i % 7) - 3) / 4.0 for i in range(v.size)])
        m(*x)
        first = m.tolist()
        m.predict(*x)
        m.dequantize()
        mpy_lazy.report(m, show=False)
        self.check("model run")
        params = getattr(m, "params", None)  # a stored program has none: its weights are the container's
        for arrays in (False, True):
            k = m.clone(arrays)
            k(*x)
            assert k.tolist() == first
            for p in (k.params() if params else ()):
                if p.state == "bound":
                    self.writes("model clone param .view.array()", p.view.array(), p.size, p.dtype in ("f32", "f16"))
                p.mut()
            k(*x)
            self.check("model clone(%s)" % arrays)
        for p in (m.params() if params else ()):
            p[0] = p[0]
        m(*x)
        self.check("model params written")


def walk(c, unchanged):
    """Everything above over container c; returns the Walker (its counters)."""
    w = Walker(c, unchanged)
    w.container()
    w.params()
    w.model()
    return w
