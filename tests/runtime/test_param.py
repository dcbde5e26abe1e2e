# Param state machine (mpy_lazy/param.py docstring). The first seven tests re-express the lazy
# clone checklist of Burn PR #4703; then copy-on-write, clone(arrays=True), mappers, re-entrancy.
import mpy_lazy
from mpy_lazy import Param, ContainerError
from rt_util import golden, golden_json, raises, crc32, skip, small_board


class Counter:
    """An init function that counts its calls and gives different values on each call."""

    def __init__(self):
        self.calls = 0

    def __call__(self, shape, dtype):
        self.calls += 1
        n = 1
        for d in shape:
            n *= d
        return [self.calls * 10.0 + i for i in range(n)]


def values(p):
    return [p[i] for i in range(p.size)]


# --- lazy clone checklist
def test_clone_of_uninitialized_does_not_init():
    init = Counter()
    p = Param((2, 3), init=init)
    c = p.clone()
    assert init.calls == 0
    assert p.state == "uninit" and c.state == "uninit"
    assert c.shape == (2, 3) and c.dtype == "f32" and c.nbytes == 24


def test_clone_of_initialized_has_equal_values():
    p = Param((4,), init=Counter())
    p.val()
    c = p.clone()
    assert c.state == "owned" and values(c) == values(p) == [10.0, 11.0, 12.0, 13.0]


def test_lazy_clone_has_shape_on_access():
    p = Param((3, 2), init=Counter())
    c = p.clone()
    a = c.val()
    assert len(a) == 6 and c.size == 6 and c.shape == (3, 2) and c.state == "owned"


def test_lazy_clones_init_independently():
    init = Counter()
    p = Param((3,), init=init)
    a, b = p.clone(), p.clone()
    va, vb = values(a), values(b)
    assert init.calls == 2 and va != vb


def test_access_to_lazy_clone_leaves_original_lazy():
    init = Counter()
    p = Param((3,), init=init)
    c = p.clone()
    vc = values(c)
    assert init.calls == 1 and p.state == "uninit"
    vp = values(p)
    assert init.calls == 2 and vp != vc


def test_init_mapper_on_lazy_clone_leaves_original_alone():
    p = Param((2,), init=lambda s, d: [1.0, 2.0])
    c = p.clone().init_mapper(lambda a: [x * 100 for x in a])
    assert p.state == "uninit" and c.state == "uninit"  # the mapper did not run init
    assert values(c) == [100.0, 200.0]
    assert values(p) == [1.0, 2.0]


def test_load_into_fresh_module_runs_no_init():
    init = Counter()

    class Net(mpy_lazy.Module):
        def __init__(self):
            self.fc = mpy_lazy.Module()
            self.fc.weight = Param((3, 4), init=init)
            self.fc.bias = Param((3,), init=init)
            self.temperature = Param((), init=init)

    data = golden("tiny.mpyl")
    m = Net()
    mpy_lazy.load(m, mpy_lazy.open(data))
    assert init.calls == 0
    assert values(m.fc.bias) == [0.10000000149011612, -0.20000000298023224, 0.30000001192092896]
    assert m.temperature[0] == 2.5 and m.fc.weight[5] == 3.0
    assert init.calls == 0


# --- init once, re-entrancy, failures, flags
def test_init_runs_once():
    init = Counter()
    p = Param((2,), init=init)
    a = p.val()
    assert p.val() is a and p.mut() is a and values(p) == [10.0, 11.0]
    assert init.calls == 1


def test_reentrant_val_raises_and_param_stays_lazy():
    calls = []

    def init(shape, dtype):
        calls.append(1)
        if len(calls) == 1:
            p.val()  # re-entrant: refused, not recursed
        return [7.0, 8.0]

    p = Param((2,), init=init)
    e = raises(RuntimeError, p.val)
    assert "init" in str(e)
    assert p.state == "uninit" and len(calls) == 1
    assert values(p) == [7.0, 8.0] and len(calls) == 2 and p.state == "owned"


def test_failing_init_leaves_param_uninit():
    def bad(shape, dtype):
        raise OSError("no entropy")

    p = Param((2,), init=bad)
    raises(OSError, p.val)
    assert p.state == "uninit"
    raises(ValueError, Param((3,), init=lambda s, d: [1.0]).val)  # wrong element count


def test_known_without_init_and_trainable_flag():
    init = Counter()
    p = Param((5, 2), dtype="i16", init=init, trainable=True)
    assert p.shape == (5, 2) and p.dtype == "i16" and p.size == 10 and p.nbytes == 20 and len(p) == 10
    p.trainable = False
    c = p.clone()
    assert not c.trainable and init.calls == 0
    assert p.memory() == (0, 0, 20, "not initialized")
    raises(ValueError, Param, (2,), "f64")


def test_default_init_is_zeros():
    p = Param((3,))
    assert values(p) == [0.0, 0.0, 0.0] and p.memory()[1] == 12


# --- bound params, copy-on-write, clone(arrays=True)
def bound(name, tensor, data, shape, dtype="f32"):
    c = mpy_lazy.open(data)
    p = Param(shape, dtype, init=Counter())
    p.bind(c.view(tensor))
    return p


def test_bound_param_reads_in_place():
    for data in (golden("tiny.mpyl"), bytearray(golden("tiny.mpyl"))):
        p = bound("w", "fc.weight", data, (3, 4))
        assert p.state == "bound" and p.view is not None and p.val() is p.view
        assert p.memory() == (48, 0, 0, "flash view")
        assert p[1] == -1.25


def test_copy_on_write_never_touches_container():
    for data in (golden("tiny.mpyl"), bytearray(golden("tiny.mpyl"))):
        before = crc32(data)
        c = mpy_lazy.open(data)
        p = Param((3, 4))
        p.bind(c.view("fc.weight"))
        shared = p.clone()
        p[0] = 42.0
        a = p.mut()
        assert p.mut() is a  # copied once
        assert p.state == "owned" and p.memory()[:2] == (0, 48) and p.memory()[3] == "copy-on-write"
        assert p[0] == 42.0 and p[1] == -1.25
        assert shared.state == "bound" and shared[0] == 0.5  # the clone still reads the container
        assert c.view("fc.weight")[0] == 0.5
        assert crc32(data) == before
        c.verify()


def test_clone_arrays_true_is_independent():
    data = bytearray(golden("tiny.mpyl"))
    before = crc32(data)
    p = bound("w", "fc.weight", data, (3, 4))
    c = p.clone(arrays=True)
    assert c.state == "owned" and p.state == "bound"
    c[0] = -9.0
    assert p[0] == 0.5 and c[0] == -9.0
    q = Param((2,), init=lambda s, d: [1.0, 2.0])
    q.val()
    d = q.clone(arrays=True)
    assert d.val() is not q.val()
    d[0] = 5.0
    q[1] = 6.0
    assert values(q) == [1.0, 6.0] and values(d) == [5.0, 2.0]
    u = Param((2,), init=Counter()).clone(arrays=True)
    assert u.state == "uninit"
    assert crc32(data) == before


def test_owned_clone_shares_until_write():
    p = Param((3,), init=lambda s, d: [1.0, 2.0, 3.0])
    a = p.val()
    c = p.clone()
    assert c.val() is a  # shared, no copy yet
    assert "shared" in p.memory()[3]
    c[0] = 100.0  # the writer copies first
    assert c.val() is not a and p.val() is a
    assert values(p) == [1.0, 2.0, 3.0] and values(c) == [100.0, 2.0, 3.0]
    p[1] = 200.0  # now the only holder: writes in place, no second copy
    assert p.val() is a and values(p) == [1.0, 200.0, 3.0] and values(c) == [100.0, 2.0, 3.0]


def test_quantized_and_f16_params():
    data8, data16 = bytearray(golden("int8.mpyl")), bytearray(golden("f16.mpyl"))
    before = crc32(data8), crc32(data16)
    p = bound("w", "fc.weight", data8, (4, 3))
    assert p.view.dtype == "i8" and p[0] == p.view.real(0) and abs(p[1] + 1.0) < 1e-6
    real = values(p)
    deq = p.view.dequantize()
    a = p.mut()  # float param: copy-on-write gives real values
    assert p.state == "owned" and p.view is None
    for i in range(12):
        assert abs(a[i] - real[i]) < 1e-6 and a[i] == deq[i]
    q = bound("b", "fc.weight", golden("int8_channel.mpyl"), (3, 4))
    assert abs(q[1] + 1.0) < 1e-6 and q.memory()[0] == 12
    h = bound("h", "fc.weight", data16, (2, 3), "f16")
    hv = values(h)
    h[0] = 1.5
    assert h.state == "owned" and h.memory()[1] == 24  # f16 held as f32 in RAM
    assert values(h)[1:] == hv[1:]
    assert (crc32(data8), crc32(data16)) == before


def test_float_param_val_is_real_values_for_every_storage():
    """val()[i] == p[i] == the real value for a float param bound to f32, f16, int8 and
    per-channel int8 (issue 32: val() of int8 codes gave the codes: -47.4 for -0.333); the codes
    stay in place (p.view), clones stay bound, nothing is written."""
    for name, tensor, shape in (("tiny.mpyl", "fc.weight", (3, 4)), ("f16.mpyl", "fc.weight", (2, 3)),
                                ("int8.mpyl", "fc.weight", (4, 3)), ("int8_channel.mpyl", "conv.weight", (2, 1, 2, 2))):
        data = bytearray(golden(name))
        before = crc32(data)
        t = [t for t in golden_json(name[:-5] + ".json")["tensors"] if t["name"] == tensor][0]
        want = t["real"]
        p = bound("w", tensor, data, shape)
        v = p.val()
        n = len(want)
        assert len(v) == n and p.state == "bound" and p.memory()[1] == p.view.ram_bytes
        for i in range(n):
            assert abs(v[i] - want[i]) < 1e-6 * max(1.0, abs(want[i])), (name, i, v[i], want[i])
            assert v[i] == p[i] == v[i - n]
        assert [x for x in v] == v.tolist() == [v[i] for i in range(n)]
        assert raises(IndexError, lambda: v[n]) is not None
        if p.view.info.quant:
            assert v is not p.view and p.val() is v and v.view is p.view  # made once per View
            assert p.view.tolist() == t["values"]  # the codes, as stored
            assert v[1:3] == v.tolist()[1:3]
            raises(TypeError, v.__setitem__, 0, 1.0)
            raises(TypeError, v.array)
            d = v.dequantize()
            assert [abs(d[i] - want[i]) < 1e-6 for i in range(n)] == [True] * n
            assert p.record() is p.view  # a save gets the codes as stored
            k = p.clone()
            assert k.state == "bound" and k.val()[1] == v[1]
        else:
            assert v is p.view
        assert crc32(data) == before


def test_int_param_copy_keeps_dtype():
    data = bytearray(golden("ints.mpyl"))
    before = crc32(data)
    p = bound("c", "i32", data, (4,), "i32")
    p[1] = 1000
    assert values(p) == [-2147483648, 1000, 6, 2147483647] and p.memory()[1] == 16
    assert crc32(data) == before


def test_bind_refuses_wrong_shape_or_kind():
    c = mpy_lazy.open(golden("ints.mpyl"))
    e = raises(ContainerError, Param((3,), "i32").bind, c.view("i32"))
    assert e.field == "shape" and e.tensor == "i32"
    e = raises(ContainerError, Param((4,), "f32").bind, c.view("i32"))
    assert e.field == "dtype"
    e = raises(ContainerError, Param((4,), "i16").bind, c.view("i32"))
    assert e.field == "dtype"
    q = mpy_lazy.open(golden("int8.mpyl"))
    e = raises(ContainerError, Param((4, 3), "i16").bind, q.view("fc.weight"))
    assert e.field == "dtype"
    # an i8 param takes a quantized int8 tensor's codes (what the int8 kernels read); its items
    # are the codes, not the real values
    v = q.view("fc.weight")
    p = Param((4, 3), "i8")
    p.bind(v)
    assert p.state == "bound" and [p[i] for i in range(12)] == v.tolist()
    p[0] = 5  # copy-on-write keeps codes
    assert p.state == "owned" and p[0] == 5 and [p[i] for i in range(1, 12)] == v.tolist()[1:]


# --- mappers
def test_load_mapper():
    c = mpy_lazy.open(golden("tiny.mpyl"))
    seen = []
    p = Param((3,)).load_mapper(lambda v: seen.append(v.name) or v)
    orig = Param((3,))
    scaled = orig.clone().load_mapper(lambda v: [2 * v[i] for i in range(v.size)])
    p.bind(c.view("fc.bias"))
    assert seen == ["fc.bias"] and p.state == "bound"  # returned the view: stays bound
    scaled.bind(c.view("fc.bias"))
    assert scaled.state == "owned" and scaled.memory()[3] == "load_mapper"
    assert abs(scaled[2] - 0.6) < 1e-6
    orig.bind(c.view("fc.bias"))  # the clone's mapper is not the original's
    assert orig.state == "bound"


def test_save_mapper_and_record():
    p = Param((2,), init=lambda s, d: [1.0, 2.0])
    c = p.clone().save_mapper(lambda a: [x + 1 for x in a])
    assert list(p.record()) == [1.0, 2.0]
    assert list(c.record()) == [2.0, 3.0]


def test_init_mapper_after_init_refused():
    p = Param((2,))
    p.val()
    raises(RuntimeError, p.init_mapper, lambda a: a)
    b = bound("w", "fc.bias", golden("tiny.mpyl"), (3,))
    raises(RuntimeError, b.init_mapper, lambda a: a)


def test_mappers_compose_in_order():
    p = Param((1,), init=lambda s, d: [1.0]).init_mapper(lambda a: [a[0] + 1]).init_mapper(lambda a: [a[0] * 10])
    assert p[0] == 20.0


# --- issue 12 item 6: the busy state, refusals during init, threads, shares after a drop
def test_busy_state_is_reported_and_refusals_are_clean():
    seen = {}
    c = mpy_lazy.open(golden("tiny.mpyl"))

    def init(shape, dtype):
        seen["state"] = p.state
        seen["memory"] = p.memory()
        seen["bind"] = raises(RuntimeError, p.bind, c.view("fc.bias"))
        seen["mapper"] = raises(RuntimeError, p.init_mapper, lambda a: a)
        seen["val"] = raises(RuntimeError, p.val)
        seen["clone"] = p.clone().state
        return [1.0, 2.0, 3.0]

    p = Param((3,), init=init)
    assert values(p) == [1.0, 2.0, 3.0]
    assert seen["state"] == "busy" and seen["memory"] == (0, 0, 12, "init running")  # was 'uninit'
    assert "own init" in str(seen["bind"])  # was: silently overwritten by the init's result
    assert "running" in str(seen["mapper"])  # was: "init already happened"
    assert "own init" in str(seen["val"])
    assert seen["clone"] == "uninit"
    assert p.state == "owned" and p.memory()[3] == "init"
    p.bind(c.view("fc.bias"))  # after init: binding is fine
    assert p.state == "bound"


def test_threads_share_one_init():
    """Threads call val() on a slow init while the main thread does too: init runs once and
    every caller gets its array (was: the other threads got the re-entrancy error meant for
    an init calling its own param). A bind() from another thread waits for the init, then
    binds. (A board's port may allow one extra thread only: the RP2040 runs it on core 1.)"""
    try:
        import _thread
    except ImportError:
        skip("no _thread on this port")
    import sys
    import time

    if sys.platform == "rp2":
        import machine

        # SIO FIFO_ST: its reserved bits read 0 on an RP2040; rp2040js (core 0 only, no
        # inter-core FIFO) answers 0xffffffff, and _thread would wait for core 1 forever
        if machine.mem32[0xD0000050] >> 4:
            skip("emulated RP2040 without core 1: _thread cannot start a thread")

    def sleep_ms(ms):
        if hasattr(time, "sleep_ms"):
            time.sleep_ms(ms)
        else:
            time.sleep(ms / 1000)

    def wait(cond):
        for _ in range(300):
            if cond():
                return True
            sleep_ms(10)
        return False

    calls = []

    def slow(shape, dtype):
        calls.append(1)
        sleep_ms(100)
        return [5.0, 6.0]

    n = 1 if small_board() else 3
    p = Param((2,), init=slow)
    lock = _thread.allocate_lock()
    results = []

    def worker():
        try:
            r = list(p.val())
        except Exception as e:  # reported to the main thread
            r = "%s: %s" % (type(e).__name__, e)
        with lock:
            results.append(r)

    for _ in range(n):
        _thread.start_new_thread(worker, ())
    sleep_ms(20)
    mine = list(p.val())  # the main thread too (the init may be running in a worker)
    assert wait(lambda: len(results) == n), results
    assert len(calls) == 1, calls
    assert mine == [5.0, 6.0] and results == [[5.0, 6.0]] * n, results
    assert p.state == "owned"
    # bind() from the main thread while a worker runs the init: the bind waits, then wins
    calls.clear()
    p = Param((3,), init=lambda s, d: calls.append(1) or sleep_ms(100) or [0.0, 0.0, 0.0])
    c = mpy_lazy.open(golden("tiny.mpyl"))
    done = []
    _thread.start_new_thread(lambda: done.append(list(p.val())), ())
    assert wait(lambda: p.state == "busy")
    p.bind(c.view("fc.bias"))
    assert p.state == "bound" and len(calls) == 1
    assert wait(lambda: done) and done == [[0.0, 0.0, 0.0]] and len(calls) == 1


def test_copy_on_write_after_a_clone_is_dropped():
    """Documented (docs/RUNTIME.md, Param): the share count cannot know that a clone was
    garbage collected (MicroPython has no reference counts, no weak references and no __del__
    for Python classes), so the survivor's next write copies once more, then writes in place."""
    import gc

    p = Param((3,), init=lambda s, d: [1.0, 2.0, 3.0])
    a = p.val()
    k = p.clone()
    assert k.val() is a and "shared" in p.memory()[3]
    k = None
    gc.collect()
    p[0] = 9.0  # one copy: the dropped clone may still be alive for all the param knows
    b = p.val()
    assert b is not a and p.memory()[3] == "copy-on-write" and values(p) == [9.0, 2.0, 3.0]
    p[1] = 8.0  # now unshared: in place
    assert p.val() is b and values(p) == [9.0, 8.0, 3.0]
    k = p.clone()
    k[2] = 0.0  # the clone copies; the original is alone again, but still counts the clone
    assert values(p) == [9.0, 8.0, 3.0] and values(k) == [9.0, 8.0, 0.0]
    p[2] = 1.0
    assert p.val() is b  # k released its share when it copied: p writes in place
