# resize: an H,W,C value to size=OH,OW (TFLite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR,
# ONNX's Resize). The coordinates are made at pack time, as the source model defines them
# (TFLM's align_corners / half_pixel_centers arithmetic, or ONNX's coordinate modes), into
# t=, an i32 table: OH entries for the rows, then OW for the columns. interp=nearest (the
# default): one source index each, elements of any dtype copied. interp=bilinear: i0, i1, d
# each (the two neighbours and the weight of i1): int8 in 1/1024 (TFLM's integer kernel), f32
# as a float's bits. The output has the input's q.
from .. import check
from ..graph import ITEMSIZE, check_shape
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 3:
            raise self.fail("takes an H,W,C value", "x")
        self.keeps_q()
        size = kv["size"]
        if len(size) != 2:
            raise self.fail("size=oh,ow", "size")
        self.bilinear = kv.get("interp", "nearest") == "bilinear"
        if self.bilinear and x.dtype not in ("i8", "f32"):
            raise self.fail("bilinear resize takes i8 or f32 values, not %s" % x.dtype, "x")
        shape = check_shape((size[0], size[1], x.shape[2]), n, "size")
        self.param("table", "t", ((3 if self.bilinear else 1) * (shape[0] + shape[1]),), "i32", init)
        self.out = (shape, x.dtype, x.q)

    def records(self, c):
        x, y = self.x[0], self.y
        h, w, ch = x.shape
        kind = check.FRESIZE if self.bilinear and x.dtype == "f32" else check.RESIZE
        return [c.record(kind, [1 if self.bilinear else 0, ITEMSIZE[x.dtype], c.off(x), c.off(y), h, w, ch,
                                y.shape[0], y.shape[1]] + c.ref(self.table))]
