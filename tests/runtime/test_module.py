# Modules, load() (binding by name, one error for every problem), state() and report().
import mpy_lazy
from mpy_lazy import Module, Param, ContainerError, load
from rt_util import golden, raises, crc32


class Linear(Module):
    def __init__(self, n_in, n_out, init=None):
        self.weight = Param((n_out, n_in), init=init)
        self.bias = Param((n_out,), init=init)


class Tiny(Module):
    def __init__(self, init=None):
        self.fc = Linear(4, 3, init)
        self.temperature = Param((), init=init)


def counting():
    calls = []

    def init(shape, dtype):
        calls.append(shape)
        n = 1
        for d in shape:
            n *= d
        return [1.0] * n

    return init, calls


def test_named_params_dotted_and_lists():
    class Stack(Module):
        def __init__(self):
            self.layers = [Linear(2, 2), Linear(2, 1)]
            self.pair = (Param((1,)), Param((2,)))
            self.note = "not a param"

    names = [n for n, _ in Stack().named_params()]
    assert names == ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight",
                     "pair.0", "pair.1"]


def test_load_binds_everything_without_init():
    init, calls = counting()
    m = Tiny(init)
    data = bytearray(golden("tiny.mpyl"))
    before = crc32(data)
    r = load(m, mpy_lazy.open(data))
    assert r == {"bound": 3, "missing": [], "unexpected": [], "mismatched": []}
    assert calls == []
    assert [s for _, s, _, _ in mpy_lazy.state(m)] == ["bound"] * 3
    assert m.fc.weight[4] == 1.5 and m.temperature[0] == 2.5
    assert crc32(data) == before


def test_strict_load_reports_every_problem_at_once():
    class Wrong(Module):
        def __init__(self):
            self.fc = Linear(3, 3)  # weight (3, 3): shape mismatch with (3, 4)
            self.extra = Param((2,))  # missing from the container
            # temperature not declared: unexpected

    m = Wrong()
    e = raises(ContainerError, load, m, mpy_lazy.open(golden("tiny.mpyl")))
    assert e.field == "load"
    assert e.missing == ["extra"] and e.unexpected == ["temperature"]
    assert len(e.mismatched) == 1 and e.mismatched[0].startswith("fc.weight: shape")
    msg = str(e)
    assert "extra" in msg and "temperature" in msg and "fc.weight" in msg
    assert [p.state for p in m.params()] == ["uninit"] * 3  # nothing bound


def test_non_strict_load_binds_what_matches():
    class Partial(Module):
        def __init__(self):
            self.fc = Linear(3, 3)
            self.extra = Param((2,))

    m = Partial()
    r = load(m, mpy_lazy.open(golden("tiny.mpyl")), strict=False)
    assert r["bound"] == 1 and r["missing"] == ["extra"] and r["unexpected"] == ["temperature"]
    assert m.fc.bias.state == "bound" and m.fc.weight.state == "uninit" and m.extra.state == "uninit"


def test_prefix_and_rename():
    c = mpy_lazy.open(golden("tiny.mpyl"))
    lin = Linear(4, 3)
    r = load(lin, c, prefix="fc.")  # only tensors under the prefix count as unexpected
    assert r["bound"] == 2 and lin.bias[0] == c.view("fc.bias")[0]

    class Renamed(Module):
        def __init__(self):
            self.dense = Linear(4, 3)
            self.t = Param(())

    m = Renamed()
    load(m, c, rename={"dense.weight": "fc.weight", "dense.bias": "fc.bias", "t": "temperature"})
    assert m.t[0] == 2.5 and m.dense.weight.state == "bound"
    e = raises(ContainerError, load, Renamed(), c, rename={"t": "temperature"})
    assert "dense.weight" in str(e) and e.unexpected == ["fc.bias", "fc.weight"]


def test_dtype_kinds():
    class Q(Module):
        def __init__(self, dtype="f32"):
            self.fc = Linear(4, 3)
            self.conv = Module()
            self.conv.weight = Param((2, 1, 2, 2), dtype)
            self.fc.bias.dtype = dtype

    c = mpy_lazy.open(golden("int8_channel.mpyl"))
    m = Q()
    r = load(m, c)  # float params take int8 tensors; AUX scales are not "unexpected"
    assert r["bound"] == 3 and m.conv.weight.view.dtype == "i8"
    assert abs(m.conv.weight[0] + 1.0) < 1e-6
    e = raises(ContainerError, load, Q("i32"), c)
    assert len(e.mismatched) == 2 and "dtype" in e.mismatched[0]


def test_state_and_report():
    init, calls = counting()
    m = Tiny(init)
    data = bytearray(golden("tiny.mpyl"))
    before = crc32(data)
    c = mpy_lazy.open(data)
    r = mpy_lazy.report(m, show=False)
    assert (r["flash"], r["ram"], r["pending"]) == (0, 0, 64)
    load(m, c)
    m.temperature[0] = 3.0  # copy-on-write: 4 bytes of RAM
    st = dict((n, (s, w, b)) for n, s, w, b in mpy_lazy.state(m))
    assert st == {"fc.bias": ("bound", "flash", 12), "fc.weight": ("bound", "flash", 48),
                  "temperature": ("owned", "ram", 4)}
    r = mpy_lazy.report(m)
    assert (r["flash"], r["ram"], r["pending"]) == (60, 4, 0)
    rows = dict((p["name"], p) for p in r["params"])
    assert rows["temperature"]["note"] == "copy-on-write" and rows["fc.weight"]["note"] == "flash view"
    assert calls == [] and crc32(data) == before


def test_report_counts_shared_arrays_once_and_unaligned_copies():
    class Two(Module):
        pass

    m = Two()
    m.a = Param((4,), init=lambda s, d: [1.0] * 4)
    m.a.val()
    m.b = m.a.clone()
    r = mpy_lazy.report(m, show=False)
    assert r["ram"] == 16 and [p["ram"] for p in r["params"]] == [16, 16]
    m.c = Param((3,))
    m.c.bind(mpy_lazy.open(golden("tiny.mpyl")).view("fc.bias"))
    m.d = m.c.clone()  # shares the View
    r = mpy_lazy.report(m, show=False)
    assert (r["flash"], r["ram"]) == (12, 16) and [p["flash"] for p in r["params"]] == [0, 0, 12, 12]
    data = golden("tiny.mpyl")
    for shift in (1, 2, 3):
        buf = bytearray(shift) + data
        t = Tiny()
        load(t, mpy_lazy.open(memoryview(buf)[shift:]))
        r = mpy_lazy.report(t, show=False)
        if r["ram"]:  # this shift made the f32 tensors unaligned
            assert (r["flash"], r["ram"]) == (0, 64)
            assert r["params"][0]["note"] == "unaligned: RAM copy"
            break
    else:
        assert False, "no unaligned shift"


def test_module_clone():
    init, calls = counting()
    m = Tiny(init)
    c = m.clone()
    assert calls == [] and c.fc is not m.fc and c.fc.weight is not m.fc.weight
    assert isinstance(c, Tiny) and isinstance(c.fc, Linear)
    load(c, mpy_lazy.open(golden("tiny.mpyl")))
    assert m.fc.weight.state == "uninit" and c.fc.weight.state == "bound"
    d = c.clone(arrays=True)
    assert [p.state for p in d.params()] == ["owned"] * 3
    d.fc.bias[0] = 9.0
    assert c.fc.bias[0] == 0.10000000149011612


# --- issue 12: tied weights, clones' own buffers, atomic load
class TiedNet(Module):
    """fc.weight is also out.weight (weight tying); one block reachable twice."""

    def __init__(self, init=None):
        self.fc = Linear(4, 3, init)
        self.out = Module()
        self.out.weight = self.fc.weight
        self.temperature = Param((), init=init)
        self.blocks = [Module()]
        self.again = self.blocks[0]  # the same submodule under two names
        self.blocks[0].scale = self.temperature  # and a param shared across submodules


def test_tied_weights_survive_clone():
    c = mpy_lazy.open(golden("tiny.mpyl"))
    m = TiedNet()
    assert [n for n, _ in m.named_params()] == ["again.scale", "fc.bias", "fc.weight"]
    for arrays in (False, True):
        k = m.clone(arrays)
        assert k.out.weight is k.fc.weight and k.fc.weight is not m.fc.weight
        assert k.again is k.blocks[0] and k.blocks[0].scale is k.temperature
        assert [n for n, _ in k.named_params()] == [n for n, _ in m.named_params()]
        load(k, c, rename={"again.scale": "temperature"})  # was: "load: 1 missing: out.weight"
        assert k.out.weight.state == "bound" and k.out.weight[5] == 3.0
    load(m, c, rename={"again.scale": "temperature"})
    for arrays in (False, True):  # bound originals: one clone (or one RAM copy) per Param
        k = m.clone(arrays)
        assert k.out.weight is k.fc.weight and k.blocks[0].scale is k.temperature
        assert k.fc.weight.state == ("owned" if arrays else "bound")
        k.out.weight[0] = -7.0
        assert k.fc.weight[0] == -7.0 and m.fc.weight[0] == 0.5
        r = mpy_lazy.report(k, show=False)
        assert len(r["params"]) == 3 and r["ram"] == (4 * (12 + 3 + 1) if arrays else 48)


def test_clone_has_its_own_buffers():
    """A plain Module's RAM buffers (its activations) are its own in a clone: m2(x) does not
    overwrite what m(x) returned. (The graph runner's Model.clone: its own arena, below.)"""
    import array

    class Scaler(Module):
        def __init__(self):
            self.w = Param((3,), init=lambda s, d: [1.0, 2.0, 3.0])
            self.y = array.array("f", [0.0] * 3)  # output buffer, reused by every call
            self.raw = bytearray(3)
            self.note = "shared"

        def __call__(self, x):
            w = self.w.val()
            for i in range(3):
                self.y[i] = w[i] * x
                self.raw[i] = i + int(x)
            return self.y

    m = Scaler()
    y = m(1.0)
    for arrays in (False, True):
        k = m.clone(arrays)
        assert k.y is not m.y and k.raw is not m.raw and k.note is m.note
        k(10.0)
        assert list(y) == [1.0, 2.0, 3.0] and list(m.raw) == [1, 2, 3]
        assert list(k.y) == [10.0, 20.0, 30.0]


def test_graph_model_clone_has_its_own_arena():
    from mpy_lazy import model

    c = mpy_lazy.open(golden("graph_int8.mpyl"))
    m = model.from_container(c)
    n = m.inputs[0].size
    x1 = [(i * 37) % 256 - 128 for i in range(n)]
    x2 = [(i * 91 + 5) % 256 - 128 for i in range(n)]
    y1 = m(x1)
    want1 = m.tolist()
    m(x2)
    want2 = m.tolist()
    m(x1)
    for arrays in (False, True):
        k = m.clone(arrays)
        assert k.output is not m.output  # an arena of its own
        k(x2)
        assert m.tolist() == want1 and [y1[i] for i in range(len(want1))] == want1  # untouched
        assert k.tolist() == want2


def test_load_is_all_or_nothing():
    c = mpy_lazy.open(golden("tiny.mpyl"))
    for strict in (True, False):
        calls = []

        def boom(v):
            calls.append(v.name)
            if len(calls) == 2:
                raise OSError("mapper failed")
            return v

        m = Tiny()
        for p in m.params():
            p.load_mapper(boom)
        m.temperature.val()  # owned before the load: must stay so
        before = m.temperature.val()
        raises(OSError, load, m, c, strict=strict)
        assert len(calls) == 2
        assert [p.state for p in m.params()] == ["uninit", "uninit", "owned"]  # was ['bound', ...]
        assert m.temperature.val() is before
    # a mapper returning a new value on the first param and raising on the second: no owned
    # array either
    m = Tiny()
    m.fc.bias.load_mapper(lambda v: [1.0, 2.0, 3.0])
    m.fc.weight.load_mapper(lambda v: 1 / 0)
    raises(ZeroDivisionError, load, m, c)
    assert [p.state for p in m.params()] == ["uninit"] * 3
    p = Param((3,)).load_mapper(lambda v: 1 / 0)
    raises(ZeroDivisionError, p.bind, c.view("fc.bias"))
    assert p.state == "uninit"
