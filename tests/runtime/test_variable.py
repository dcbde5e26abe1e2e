# Resource variables (mpy_lazy/ops/variable.py): a var's value is state kept from one call to
# the next, read (copied out) and assigned (copied in) in order; reset() restores its initial
# value (its tensor, else the zero point's byte). The description's rules (only read and
# assign take a variable, each its current value) and the var record's check. TFLM itself is
# the peer in tests/host/test_tflite_state.py.
import array
import gc

from rt_util import raises

from mpy_lazy import ContainerError, kernels
from mpy_lazy.model import Model

# a delay line: y = the previous call's x next to this one's; the state starts at `init`
DELAY = """input y=x shape=4 dtype=i8 q=0.1,3
var y=s shape=4 dtype=i8 q=0.1,3%s
read x=s y=old
concat x=old,x y=y q=0.1,3
assign x=s,x y=s1
output x=y
"""


def _delay(init=None):
    m = Model(DELAY % (" t=s.init" if init is not None else ""), init=lambda shape, dtype: array.array("b", init))
    if init is not None:
        m.ops[0].initial.val()  # owned: its init's array
    m.prepare()
    return m


def test_variable_keeps_state_across_calls_and_reset_restores_it():
    for init in (None, [5, -6, 7, -128]):
        first = [3] * 4 if init is None else init  # (no tensor: every byte the zero point's)
        for path in kernels.available():
            kernels.use(path)
            m = _delay(init)
            m(bytes([1, 2, 3, 4]))
            assert m.tolist() == first + [1, 2, 3, 4], (path, m.tolist())
            m(bytes([9, 8, 7, 6]))
            assert m.tolist() == [1, 2, 3, 4, 9, 8, 7, 6]
            m.reset()
            m(bytes([0, 0, 0, 1]))
            assert m.tolist() == first + [0, 0, 0, 1]
    kernels.use(None)


def test_variable_inference_allocates_nothing():
    m = _delay([1, 2, 3, 4])
    x = bytes([1, 2, 3, 4])
    m(x)
    gc.collect()
    gc.disable()
    a = gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0
    m(x)
    b = gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0
    gc.enable()
    if kernels.viper() is not None:
        assert b - a == 0, b - a


def test_variable_is_never_overlapped():
    m = _delay()
    m.plan()
    s = m.ops[0].y
    lo, hi = s.offset, s.offset + s.nbytes()
    for v in m.values:
        if v is not s and v.root() is not s:
            assert v.root().offset >= hi or v.root().offset + v.nbytes() <= lo, v


def test_variable_rules_are_refused_in_one_line():
    head = "input y=x shape=4 dtype=i8 q=0.1,3\nvar y=s shape=4 dtype=i8 q=0.1,3\n"
    bad = {
        "relu x=s y=r\noutput x=r": "is a variable: read it first",
        "assign x=x,x y=s1\noutput x=s1": "is no variable",
        "assign x=s,x y=s1\nread x=s y=r\noutput x=r": "before its assign (use 's1')",
        "output x=s": "is a variable: output a read of it",
        "read x=s y=r q=0.2,3\noutput x=r": "q= must be the input's quantization",
    }
    for tail, msg in bad.items():
        e = raises(ContainerError, Model, head + tail)
        assert msg in str(e), (tail, str(e))
    e = raises(ContainerError, Model, head.replace("dtype=i8 q=0.1,3\n", "dtype=i8\n", 1)
               .replace("var y=s shape=4 dtype=i8 q=0.1,3", "var y=s shape=4 dtype=i16") + "read x=s y=r\noutput x=r")
    assert "needs q=" in str(e), str(e)
    e = raises(ContainerError, Model, head + "assign x=s,x,x y=s1\nread x=s1 y=r\noutput x=r")
    assert "x=variable,value" in str(e), str(e)


def test_var_record_fields_are_checked():
    from mpy_lazy.program import Program

    m = _delay([1, 2, 3, 4])
    P, B = m.compile()
    k = P[6]
    assert P[k] & 255 == 84
    for i, v, field in ((5, 9, "dtype"), (3, 1 << 27, "shape"), (4, 300, "zero_point"), (2, -4, "y"),
                        (6, 7, "initial")):
        Q = array.array("i", P)
        Q[k + i] = v
        e = raises(ContainerError, Program, Q, B)
        assert field in str(e) and "var" in str(e), (i, str(e))
