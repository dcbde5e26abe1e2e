# A constant value (TFLite's FILL and ZEROS_LIKE, and the constant operands of comparisons,
# logical ops and select; i64 minimum, maximum): `t=` a tensor of the value's shape and dtype (a
# bool one stored as u8, an i64 one as i32 words, the last dimension doubled),
# copied into the arena by a load record (ops/binary.py), or one number repeated by a fill
# record (ops/move.py): `value=` for f32, `code=` for integers and bool. No input; it runs where
# the description puts it, and its value lives in the arena until its last reader.
from .._arith import f32_bits
from ..kinds import FILL, LOAD
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import RANGE, check_shape, zero_point

        Base.__init__(self, name, kv, ins, n)
        if ins:
            raise self.fail("takes no input", "x")
        shape = check_shape(kv["shape"], n)
        dt = kv.get("dtype", "f32")
        q = kv.get("q")
        if dt in ("f32", "bool") and q is not None:
            raise self.fail("q= is for an integer value", "q")
        if dt not in ("f32", "bool"):
            q = q or (1.0, 0)
            zero_point(q, dt, n)
        given = [k for k in ("t", "value", "code") if k in kv]
        if len(given) != 1 or given[0] == ("code" if dt == "f32" else "value"):
            raise self.fail("takes one of t=tensor, %s" % ("value=number" if dt == "f32" else "code=integer"),
                            given[-1] if given else "t")
        if "t" in kv:  # (bool: stored as u8; i64: as its i32 words, the low first)
            words = tuple(shape[:-1]) + (2 * shape[-1],)
            self.param("weight", "t", words if dt == "i64" else shape, {"bool": "u8", "i64": "i32"}.get(dt, dt), init)
        elif dt == "f32":
            self.word = f32_bits(kv["value"])
        else:
            lo, hi = RANGE[dt]
            if not lo <= kv["code"] <= hi:
                raise self.fail("code=%d outside %s's %d..%d" % (kv["code"], dt, lo, hi), "code")
            if dt == "i64" and kv["code"] not in (0, -1):  # (a fill writes one word: give t= for others)
                raise self.fail("code=%d: an i64 code= is 0 or -1 (others: t=)" % kv["code"], "code")
            self.word = kv["code"]
        self.out = (shape, dt, q)

    def records(self, c):
        from ..graph import ITEMSIZE

        y = self.y
        es = ITEMSIZE[y.dtype]
        if hasattr(self, "weight"):
            return [c.record(LOAD, [c.off(y), y.size * es] + c.ref(self.weight))]
        return [c.record(FILL, [c.off(y), y.size, self.word, es])]
