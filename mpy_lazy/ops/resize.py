# resize: an H,W,C value to size=OH,OW (TFLite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR,
# ONNX's Resize). The coordinates are made at pack time, as the source model defines them
# (TFLM's align_corners / half_pixel_centers arithmetic, or ONNX's coordinate modes), into
# t=, an i32 table: OH entries for the rows, then OW for the columns. interp=nearest (the
# default): one source index each, elements of any dtype copied. interp=bilinear: i0, i1, d
# each (the two neighbours and the weight of i1): int8 in 1/1024 (TFLM's integer kernel), f32
# as a float's bits. The output has the input's q.
from .._arith import bits_f32, rec, slot_view
from ..kinds import FRESIZE, RESIZE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

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
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        h, w, ch = x.shape
        kind = FRESIZE if self.bilinear and x.dtype == "f32" else RESIZE
        return [c.record(kind, [1 if self.bilinear else 0, ITEMSIZE[x.dtype], c.off(x), c.off(y), h, w, ch,
                                y.shape[0], y.shape[1]] + c.ref(self.table))]


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {RESIZE: 'resize', FRESIZE: 'fresize'}
FAST = '_viper_elem'


def check(r, E):
    """resize: 2 MODE (0 nearest, 1 bilinear) 3 ES 4 XO 5 YO 6 H 7 W 8 C 9 OH 10 OW 11-12 table
    (i32: OH rows then OW columns; nearest: an index each; bilinear: i0, i1, d each)."""
    fl = r.kind == FRESIZE
    mode = r.range(2, "mode", 1 if fl else 0, 1)
    es = r.es(3)
    if (fl and es != 4) or (mode and not fl and es != 1):
        r.fail("dtype", "%d bytes per element for this mode" % es)
    h, w, c, oh, ow = r.dims((6, "h"), (7, "w"), (8, "c"), (9, "oh"), (10, "ow"))
    if h * w * c > 1 << 24 or oh * ow * c > 1 << 24:
        r.fail("oh", "more than 2**24 elements")
    r.region(4, "x", h * w * c * es, es)
    r.region(5, "y", oh * ow * c * es, es)
    step = 3 if mode else 1
    r.tensor(11, "table", ("i32",), 4 * step * (oh + ow))
    t = E.words(r[11], r[12], step * (oh + ow))
    for i in range(oh + ow):
        top = h if i < oh else w
        for j in range(min(step, 2)):
            if not 0 <= t[step * i + j] < top:
                r.fail("table", "entry %d: index %d outside 0..%d" % (step * i + j, t[step * i + j], top - 1))
        if mode:
            d = t[step * i + 2]
            if fl:
                d = bits_f32(d)
                ok = d - d == 0 and -2.0 <= d <= 2.0
            else:  # every weighted sum of int8 stays within int32: |1024 - d| + |d| < 4096
                ok = -1535 <= d <= 2559
            if not ok:
                r.fail("table", "entry %d: weight %r" % (step * i + 2, d))


# resize record: 2 MODE (0 nearest, 1 bilinear) 3 ES 4 XO 5 YO (bytes) 6 H 7 W 8 C 9 OH 10 OW
# 11-12 table (i32, made at pack time: OH entries for the rows then OW for the columns; nearest:
# the source index; bilinear: i0, i1, d with d the weight of i1 in 1/1024). Bilinear is int8
# only (TFLM's ResizeBilinearInteger: the four products summed, rounded half away from zero by
# 2**20, cast to int8); nearest copies elements of any size (f32 too).

def resize(E, P, k):
    p = rec(P, k)
    mode, es = p[2], p[3]
    a = E.view(es)
    t, t0 = E.s32[p[11]], p[12] // 4
    xo, q = p[4] // es, p[5] // es
    w, c, oh, ow = p[7], p[8], p[9], p[10]
    if mode == 0:
        for oy in range(oh):
            row = xo + t[t0 + oy] * w * c
            for ox in range(ow):
                s = row + t[t0 + oh + ox] * c
                for ch in range(c):
                    a[q] = a[s + ch]
                    q += 1
        return
    for oy in range(oh):
        r0, r1, dy = xo + t[t0 + 3 * oy] * w * c, xo + t[t0 + 3 * oy + 1] * w * c, t[t0 + 3 * oy + 2]
        for ox in range(ow):
            b = t0 + 3 * (oh + ox)
            c0, c1, dx = t[b] * c, t[b + 1] * c, t[b + 2]
            w00, w10 = (1024 - dy) * (1024 - dx), dy * (1024 - dx)
            w01, w11 = (1024 - dy) * dx, dy * dx
            for ch in range(c):
                v = a[r0 + c0 + ch] * w00 + a[r1 + c0 + ch] * w10 + a[r0 + c1 + ch] * w01 + a[r1 + c1 + ch] * w11
                v = (v + 524288) >> 20 if v > 0 else -((524288 - v) >> 20)
                v &= 255
                a[q] = v - 256 if v > 127 else v
                q += 1


# resize record (f32, bilinear): as the integer one (resize above), d an f32 (its bits) in the
# table: TFLM's float ResizeBilinear, y = sum of the four neighbours weighted (1 - dy)(1 - dx),
# dy (1 - dx), (1 - dy) dx, dy dx.

def fresize(E, P, k):
    a = E.af
    t, tf, t0 = slot_view(E.B[P[k + 11]], "i32"), E.sf[P[k + 11]], P[k + 12] // 4
    xo, q = P[k + 4] // 4, P[k + 5] // 4
    w, c, oh, ow = P[k + 7], P[k + 8], P[k + 9], P[k + 10]
    for oy in range(oh):
        r0, r1, dy = xo + t[t0 + 3 * oy] * w * c, xo + t[t0 + 3 * oy + 1] * w * c, tf[t0 + 3 * oy + 2]
        for ox in range(ow):
            b = t0 + 3 * (oh + ox)
            c0, c1, dx = t[b] * c, t[b + 1] * c, tf[b + 2]
            for ch in range(c):
                a[q] = a[r0 + c0 + ch] * (1.0 - dy) * (1.0 - dx) + a[r1 + c0 + ch] * dy * (1.0 - dx) + \
                    a[r0 + c1 + ch] * (1.0 - dy) * dx + a[r1 + c1 + ch] * dy * dx
                q += 1
