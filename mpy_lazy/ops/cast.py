# cast: a value to another dtype (TFLite's CAST): integer codes as numbers, not as quantized
# reals (an integer output has q=1.0,0 unless given). Integer to integer keeps the low bits;
# integer to f32 rounds to the nearest f32; f32 to integer truncates toward zero, saturates,
# and gives 0 for NaN (the tflite-micro interpreter's results).
from .._arith import rec
from ..kinds import CAST, FCAST
from . import Op as Base

_CODE = {"f32": 1, "i8": 3, "i16": 5, "i32": 7, "bool": 3}  # FORMAT.md's dtype codes (bool: bytes 0, 1)


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import zero_point

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        dt = kv["dtype"]
        q = None
        if dt != "f32":
            q = kv.get("q", (1.0, 0))
            zero_point(q, dt, n)
        elif "q" in kv:
            raise self.fail("an f32 output takes no q=", "q")
        self.out = (x.shape, dt, q)

    def records(self, c):
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        if "f32" in (x.dtype, y.dtype):
            return [c.record(FCAST, [c.off(x), c.off(y), y.size, _CODE[x.dtype], _CODE[y.dtype]])]
        return [c.record(CAST, [c.off(x), c.off(y), y.size, ITEMSIZE[x.dtype], ITEMSIZE[y.dtype]])]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {CAST: 'cast', FCAST: 'fcast'}
FAST = '_viper_elem'


_TYPE_ES = {1: 4, 3: 1, 5: 2, 7: 4}  # FORMAT.md's dtype codes -> bytes per element


def check(r, E):
    """cast: 2 XO 3 YO 4 N 5 6 the input's and output's bytes per element (integers), or dtype
    codes (fcast: one of them f32)."""
    n = r.range(4, "x", 1, 1 << 24)
    if r.kind == FCAST:
        xt, yt = r[5], r[6]
        if xt not in _TYPE_ES or yt not in _TYPE_ES or 1 not in (xt, yt):
            r.fail("dtype", "dtype codes %d, %d (1 f32, 3 i8, 5 i16, 7 i32; one of them f32)" % (xt, yt))
        xes, yes = _TYPE_ES[xt], _TYPE_ES[yt]
    else:
        xes, yes = r.es(5), r.es(6)
    r.region(2, "x", n * xes, xes)
    r.region(3, "y", n * yes, yes)


# cast record (integer to integer): 2 XO 3 YO (bytes) 4 N 5 XES 6 YES (bytes per element): TFLM's
# static_cast, a narrowing keeping the low bits (two's complement wrap).

def cast(E, P, k):
    p = rec(P, k)
    xes, yes = p[5], p[6]
    src, dst = E.view(xes), E.view(yes)
    xo, yo = p[2] // xes, p[3] // yes
    bits = 8 * yes
    for i in range(p[4]):
        v = src[xo + i] & ((1 << bits) - 1)
        dst[yo + i] = v - (1 << bits) if v >> (bits - 1) else v


# cast record (one side f32): 2 XO 3 YO (bytes) 4 N 5 XT 6 YT (dtype codes: 1 f32, 3 i8, 5 i16,
# 7 i32). TFLM's CAST: an integer becomes the nearest f32; an f32 is truncated toward zero and
# saturated to the integer's range, NaN giving 0 (what the tflite-micro interpreter gives).

_CODE_ES = (0, 4, 0, 1, 0, 2, 0, 4)


def fcast(E, P, k):
    xt, yt = P[k + 5], P[k + 6]
    xes, yes = _CODE_ES[xt], _CODE_ES[yt]
    src = E.af if xt == 1 else E.view(xes)
    dst = E.af if yt == 1 else E.view(yes)
    xo, yo, n = P[k + 2] // xes, P[k + 3] // yes, P[k + 4]
    top = (1 << (8 * yes - 1)) - 1
    for i in range(n):
        v = src[xo + i]
        if yt != 1:
            if v != v:
                v = 0
            elif v >= top:
                v = top
            elif v <= -top - 1:
                v = -top - 1
            else:
                v = int(v)
        dst[yo + i] = v
