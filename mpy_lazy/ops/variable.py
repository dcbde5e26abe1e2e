# variable: TFLite's resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, and the
# init subgraph CALL_ONCE runs): state a streaming model keeps from one call to the next, as
# TFLite Micro keeps it in its resource buffers (micro_resource_variable.cc).
#
#   var y=s shape=12 dtype=i8 q=0.0078,-1 t=s.init   a variable: its value `s` lives in the arena
#                                                     apart from every other value, across calls
#   read x=s y=v                                      v = a copy of the variable (READ_VARIABLE)
#   assign x=s,v y=s1                                 the variable's bytes = v's (ASSIGN_VARIABLE);
#                                                     s1 names its new value (same buffer)
#
# A var line comes before every op; its value starts as the tensor t (the values CALL_ONCE's
# init subgraph assigns, computed at pack time), else every byte at the zero point's low byte
# (TFLM's memset of a new resource buffer). Program.reset() restores it: mpy-lazy's reset starts
# the model as it was loaded (TFLM's MicroInterpreter::Reset() zeroes resource buffers instead
# and does not run CALL_ONCE's subgraph again). Reads and assigns are byte copies (move
# records, ops/move.py); the var's record runs no code per call.
from .._arith import slot_view
from ..kinds import MOVE, VAR
from . import Op as Base

_CODE = {"f32": 1, "i8": 3, "u8": 4, "i16": 5, "i32": 7}  # docs/FORMAT.md's dtype codes
_ITEM = {1: 4, 3: 1, 4: 1, 5: 2, 7: 4}
_DTYPE = {1: "f32", 3: "i8", 4: "u8", 5: "i16", 7: "i32"}


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        if name == "var":
            self._var(kv, n, init)
        elif name == "read":
            self.keeps_q()
            x = ins[0]
            self.out = (x.shape, x.dtype, x.q)
        else:  # assign
            if len(ins) != 2:
                raise self.fail("x=variable,value", "x")
            s, v = ins
            if v.dtype != s.dtype or v.size != s.size or tuple(v.q or ()) != tuple(s.q or ()):
                raise self.fail("value %s%s q=%s does not fit the variable (%s%s q=%s)"
                                % (v.dtype, v.shape, v.q, s.dtype, s.shape, s.q), "x")
            self.keeps_q()
            self.out = (s.shape, s.dtype, s.q)

    def _var(self, kv, n, init):
        from ..graph import check_shape, zero_point

        shape = check_shape(kv["shape"], n)
        dt = kv.get("dtype", "f32")
        q = kv.get("q")
        if (dt == "f32") != (q is None):
            raise self.fail("an integer variable needs q=scale,zero_point, an f32 one has none", "q")
        if q is not None:
            zero_point(q, dt, n)
        if "t" in kv:
            self.param("initial", "t", shape, dt, init)
        self.out = (shape, dt, q)

    @property
    def keeps(self):
        """The output is state kept across calls (a var: alive over the whole program)."""
        return self.name == "var"

    @property
    def alias(self):
        """assign's output is the variable's buffer (its new value)."""
        return self.name == "assign"

    def records(self, c):
        y = self.y
        if self.name == "var":
            p = getattr(self, "initial", None)
            return [c.record(VAR, [c.off(y), y.nbytes(), y.q[1] & 255 if y.q else 0,
                                   _CODE[y.dtype] if p is not None else 0] + c.ref(p))]
        src = self.x[-1]  # read: the variable; assign: the value
        from ..graph import ITEMSIZE

        es = ITEMSIZE[src.dtype]
        return [c.record(MOVE, [c.off(src), c.off(y), 1, src.size, 0, 1, 0, 1, es, 1, 0, 0])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

KERNELS = {VAR: 'var'}
FAST = None  # no fast path: its kernel reads no typed view


def check(r, E):
    n = r.range(3, "shape", 1, r.arena)
    dt = r[5]
    if dt and dt not in _ITEM:
        r.fail("dtype", "code %d (1 f32, 3 i8, 4 u8, 5 i16, 7 i32, 0 no initial tensor)" % dt)
    r.region(2, "y", n, _ITEM.get(dt, 1))
    r.range(4, "zero_point", 0, 255)
    if dt:
        r.tensor(6, "initial", (_DTYPE[dt],), n)
    else:
        r.absent(6, "initial")


# var record: 2 YO (the variable's arena bytes) 3 N (bytes) 4 V (the byte every one starts at
# without an initial tensor) 5 DT (the initial tensor's dtype code; 0: none) 6 7 initial tensor

def var(E, P, k):
    """Nothing per call: the variable's bytes are state (start() sets them)."""


def start(E, P, k):
    """The variable's initial bytes (Program.reset): the initial tensor's, else V in each."""
    A = E.A
    yo, n = P[k + 2], P[k + 3]
    if P[k + 5]:
        src = slot_view(E.B[P[k + 6]], "i8")
        o = P[k + 7]
        for i in range(n):
            A[yo + i] = src[o + i] & 255
    else:
        v = P[k + 4]
        for i in range(yo, yo + n):
            A[i] = v
