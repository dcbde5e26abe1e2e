# slice (TFLite's STRIDED_SLICE, REVERSE_V2 (stride -1), ONNX's Slice), transpose (a permutation
# of the H, W, C axes: TFLite's TRANSPOSE, ONNX's Transpose), depth2space and space2depth
# (block=b: TFLite's DEPTH_TO_SPACE and SPACE_TO_DEPTH of an H, W, C value, the channels in
# TFLite's order), broadcast (TFLite's BROADCAST_TO: numpy's broadcast_to): data movement only, move records of up to three nested loops (one; b x b for
# the block ops), elements of any dtype (the bytes are copied).
from ..kinds import MOVE
from . import Op as Base


class Op(Base):
    def __init__(self, name, kv, ins, n, init=None):
        from ..graph import check_shape

        Base.__init__(self, name, kv, ins, n)
        x = ins[0]
        nd = len(x.shape)
        self.keeps_q()
        if name in ("depth2space", "space2depth"):
            b = kv["block"]
            if nd != 3 or not 1 <= b <= 65535:
                raise self.fail("needs an H,W,C value and block >= 1, got %s, block %d" % (x.shape, b), "block")
            h, w, ch = x.shape
            if name == "depth2space" and ch % (b * b):
                raise self.fail("%d channels: not a multiple of block x block = %d" % (ch, b * b), "block")
            if name == "space2depth" and (h % b or w % b):
                raise self.fail("height %d, width %d: not multiples of block %d" % (h, w, b), "block")
            shape = [h * b, w * b, ch // (b * b)] if name == "depth2space" else [h // b, w // b, ch * b * b]
            self.spec = b
        elif name == "slice":
            begin, end = kv["begin"], kv["end"]
            stride = kv.get("stride", (1,) * nd)
            if not len(begin) == len(end) == len(stride) == nd:
                raise self.fail("begin, end and stride take %d integers (the value's axes)" % nd, "begin")
            shape = []
            for d in range(nd):
                b, e, st = begin[d], end[d], stride[d]
                if not (0 <= b < e <= x.shape[d] and 1 <= st <= 65535 or
                        -1 <= e < b < x.shape[d] and -65535 <= st <= -1):
                    raise self.fail("axis %d: begin %d, end %d, stride %d outside 0 <= begin < end <= %d, "
                                    "stride >= 1 (or %d > begin > end >= -1, stride <= -1: backwards)"
                                    % (d, b, e, st, x.shape[d], x.shape[d]), "begin")
                shape.append((e - b + st - 1) // st if st > 0 else (b - e - st - 1) // -st)
            self.spec = (tuple(begin), tuple(stride))
        elif name == "broadcast":
            shape = kv["shape"]
            lead = len(shape) - nd
            if lead < 0 or any(x.shape[d] not in (1, shape[lead + d]) for d in range(nd)):
                raise self.fail("shape=%s: %s does not broadcast to it" % (",".join(map(str, shape)), x.shape),
                                "shape")
            self.spec = lead
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
        if self.name in ("depth2space", "space2depth"):
            return self._blocks(c, es)
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
        elif self.name == "broadcast":  # (stride 0 along an axis of 1 the output repeats)
            start = 0
            src = [0] * self.spec + [stride_x[d] if xs[d] > 1 else 0 for d in range(len(xs))]
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

    def _blocks(self, c, es):
        """Block (i, j) of every b x b block of the image: one move each, the pixels of the small
        image (H, W of the deep one) with its C / (b x b) channels."""
        b = self.spec
        deep, wide = (self.x[0], self.y) if self.name == "depth2space" else (self.y, self.x[0])
        h, w, ch = deep.shape
        cs = ch // (b * b)  # the wide image's channels
        ww = w * b  # its width
        out = []
        for i in range(b):
            for j in range(b):
                d = [c.off(deep) + es * (i * b + j) * cs, w * ch, ch]  # offset, plane and row strides
                s = [c.off(wide) + es * (i * ww + j) * cs, b * ww * cs, b * cs]
                src, dst = (d, s) if self.name == "depth2space" else (s, d)
                out.append(c.record(MOVE, [src[0], dst[0], w, cs, src[2], 1, dst[2], 1, es, h, src[1], dst[1]]))
        return out
