# slice (TFLite's STRIDED_SLICE with positive strides, ONNX's Slice) and transpose (a
# permutation of the H, W, C axes: TFLite's TRANSPOSE, ONNX's Transpose): data movement only,
# one move record of up to three nested loops, elements of any dtype (the bytes are copied).
from ..kinds import MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        nd = len(x.shape)
        self.keeps_q()
        if name == "slice":
            begin, end = kv["begin"], kv["end"]
            stride = kv.get("stride", (1,) * nd)
            if not len(begin) == len(end) == len(stride) == nd:
                raise self.fail("begin, end and stride take %d integers (the value's axes)" % nd, "begin")
            shape = []
            for d in range(nd):
                b, e, st = begin[d], end[d], stride[d]
                if not 0 <= b < e <= x.shape[d] or not 1 <= st <= 65535:
                    raise self.fail("axis %d: begin %d, end %d, stride %d outside 0 <= begin < end <= %d, "
                                    "stride >= 1" % (d, b, e, st, x.shape[d]), "begin")
                shape.append((e - b + st - 1) // st)
            self.spec = (tuple(begin), tuple(stride))
        else:
            perm = kv["perm"]
            if sorted(perm) != list(range(nd)):
                raise self.fail("perm=%s: a permutation of the %d axes" % (",".join(map(str, perm)), nd), "perm")
            shape = [x.shape[d] for d in perm]
            self.spec = tuple(perm)
        self.out = (check_shape(shape, n, "output"), x.dtype, x.q)

    def records(self, c):
        from ..graph import ITEMSIZE

        x, y = self.x[0], self.y
        es = ITEMSIZE[x.dtype]
        xs = list(x.shape)
        ys = list(y.shape)
        # element strides of each axis of x
        stride_x = [1] * len(xs)
        for d in range(len(xs) - 2, -1, -1):
            stride_x[d] = stride_x[d + 1] * xs[d + 1]
        if self.name == "slice":
            begin, step = self.spec
            start = sum(begin[d] * stride_x[d] for d in range(len(xs)))
            src = [stride_x[d] * step[d] for d in range(len(xs))]  # per output axis
        else:
            start = 0
            src = [stride_x[d] for d in self.spec]
        stride_y = [1] * len(ys)
        for d in range(len(ys) - 2, -1, -1):
            stride_y[d] = stride_y[d + 1] * ys[d + 1]
        while len(ys) < 3:  # a vector or a matrix: outer loops of one turn
            ys.insert(0, 1)
            src.insert(0, 0)
            stride_y.insert(0, 0)
        return [c.record(MOVE, [c.off(x) + start * es, c.off(y), ys[1], ys[2], src[1], src[2], stride_y[1],
                                stride_y[2], es, ys[0], src[0], stride_y[0]])]
