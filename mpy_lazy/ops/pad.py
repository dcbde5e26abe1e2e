# pad a value: pad=top,left,bottom,right rows/columns around an H, W, C value, or pad= two
# integers per axis of any value (the begins of every axis, then the ends). mode=constant (the
# default) fills with code= (integer values) or value= (f32), by default 0 (integer values: the
# zero point, so padded elements are real zeros); mode=reflect / symmetric mirror the value
# without / with its edge (TFLite's MIRROR_PAD, ONNX's reflect).
from .._arith import f32_bits
from ..kinds import FILL, MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        rank = len(x.shape)
        p = kv["pad"]
        if len(p) == 4 and rank == 3:  # t, l, b, r of an H, W, C value
            p = (p[0], p[1], 0, p[2], p[3], 0)
        if len(p) != 2 * rank or min(p) < 0 or max(p) > 4096:
            raise self.fail("pad= needs top,left,bottom,right of an H,W,C value or a begin and an end for each "
                            "of the %d axes, each 0..4096" % rank, "pad")
        self.mode = kv.get("mode", "constant")
        if self.mode != "constant":
            for d in range(rank):  # (reflect reads pad elements past the edge, symmetric pad - 1)
                if max(p[d], p[rank + d]) > x.shape[d] - (self.mode == "reflect"):
                    raise self.fail("axis %d: %s padding %d, %d of %d elements" % (
                        d, self.mode, p[d], p[rank + d], x.shape[d]), "pad")
        self.keeps_q()
        key = "value" if x.dtype == "f32" else "code"
        if ("code" if key == "value" else "value") in kv:
            raise self.fail("%s values are padded with %s=" % (x.dtype, key), key)
        v = kv.get(key)
        lo, hi = {"i8": (-128, 127), "i16": (-32768, 32767)}.get(x.dtype, (-(1 << 31), (1 << 31) - 1))
        if key == "code" and v is not None and not lo <= v <= hi:
            raise self.fail("code=%d outside %s's %d..%d" % (v, x.dtype, lo, hi), "code")
        self.value = v
        self.pad = p
        shape = [x.shape[d] + p[d] + p[rank + d] for d in range(rank)]
        self.out = (check_shape(shape, n, "output"), x.dtype, x.q)

    def records(self, c):
        """mode=constant: the value everywhere, then the input moved into place. Mirrored: one
        move per block of the output that reads the input in order (along each axis: its
        interior, and each padded index alone), from the input only."""
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        es = ITEMSIZE[y.dtype]
        rank = len(x.shape)
        xs = [1] * (3 - rank) + list(x.shape)
        ys = [1] * (3 - rank) + list(y.shape)
        begin = [0] * (3 - rank) + list(self.pad[:rank])
        sx, sy = [xs[1] * xs[2], xs[2], 1], [ys[1] * ys[2], ys[2], 1]
        if self.mode == "constant":
            v = self.value
            if v is None:
                v = y.q[1] if y.q else 0
            elif y.dtype == "f32":
                v = f32_bits(v)
            at = c.off(y) + es * sum(begin[d] * sy[d] for d in range(3))
            return [c.record(FILL, [c.off(y), y.size, v, es]),
                    c.record(MOVE, [c.off(x), at, xs[1], xs[2], sx[1], 1, sy[1], 1, es, xs[0], sx[0], sy[0]])]
        runs = []  # per axis: (output index, input index, length)
        edge = 1 if self.mode == "reflect" else 0
        for d in range(3):
            b, n = begin[d], xs[d]
            e = ys[d] - n - b
            axis = [(i, b - i - 1 + edge, 1) for i in range(b)] + [(b, 0, n)]
            axis += [(b + n + i, n - 1 - i - edge, 1) for i in range(e)]
            runs.append(axis)
        out = []
        for o0, i0, n0 in runs[0]:
            for o1, i1, n1 in runs[1]:
                for o2, i2, n2 in runs[2]:
                    src = c.off(x) + es * (i0 * sx[0] + i1 * sx[1] + i2)
                    dst = c.off(y) + es * (o0 * sy[0] + o1 * sy[1] + o2)
                    out.append(c.record(MOVE, [src, dst, n1, n2, sx[1], 1, sy[1], 1, es, n0, sx[0], sy[0]]))
        return out
