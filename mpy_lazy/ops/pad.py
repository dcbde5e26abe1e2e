# pad an H, W, C value with pad=top,left,bottom,right rows/columns of zeros (int8: the zero
# point, so padded elements are real zeros).
from ..kinds import FILL, MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        if len(x.shape) != 3:
            raise self.fail("needs an H,W,C input, got %s" % (x.shape,), "x")
        p = kv["pad"]
        if len(p) != 4 or min(p) < 0 or max(p) > 4096:
            raise self.fail("pad= needs top,left,bottom,right, each 0..4096", "pad")
        self.keeps_q()
        h, w, c = x.shape
        self.pad = p
        self.out = (check_shape((h + p[0] + p[2], w + p[1] + p[3], c), n, "output"), x.dtype, x.q)

    def records(self, c):
        """The padding value everywhere, then the input's rows moved into place."""
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        h, w, ch = x.shape
        t, l = self.pad[0], self.pad[1]
        ow = y.shape[1]
        es = ITEMSIZE[y.dtype]
        return [c.record(FILL, [c.off(y), y.size, y.q[1] if y.q else 0, es]),
                c.record(MOVE, [c.off(x), c.off(y) + (t * ow + l) * ch * es, h, w * ch, w * ch, 1, ow * ch, 1,
                                es, 1, 0, 0])]
