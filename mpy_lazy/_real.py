# Param.val() of a float param bound to int8 codes (mpy_lazy/param.py): the codes' real values,
# read in place. In its own module: imported only when such a param's val() is first called.


class RealView:
    """The real values of a quantized tensor, read in place from the container: r[i] is
    scale * (code - zero_point) (per channel: that channel's scale), as p[i] and View.real(i)
    give it. r[i] (negative i; a slice gives a list), len(r), iteration, tolist(), shape,
    size; read-only (item assignment raises TypeError: use Param.mut()). It has no zero-copy
    array of real values: dequantize() copies them into a RAM f32 array, and `view` is the View
    (the raw codes: view[i], view.array(); scale and zero point in view.info)."""

    def __init__(self, view):
        info = view.info
        self.view = view  # keeps the container alive: _q reads it in place
        self._q = view._array()  # the codes, zero-copy (never written)
        self._n = view.size
        self._zp = info.zero_point
        self._s = info.scale
        self._inner = 0  # per channel: elements per step of the channel axis
        if info.quant == 2:
            self._s = view.scales()._array()
            inner = 1
            for d in info.shape[info.axis + 1:]:
                inner *= d
            self._inner = inner
            self._channels = info.shape[info.axis]
        elif info.quant != 1:
            self._s = 1.0  # not quantized (an int tensor): its values are its stored ints

    @property
    def shape(self):
        return self.view.shape

    @property
    def size(self):
        return self._n

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        n = self._n
        if isinstance(i, slice):
            return self.tolist()[i]
        if i < 0:
            i += n
        if not 0 <= i < n:  # uctypes arrays do not check: reading past the end reads anything
            raise IndexError("index out of range")
        if self._inner:
            return float(self._s[(i // self._inner) % self._channels]) * int(self._q[i])
        return self._s * (int(self._q[i]) - self._zp)

    def __setitem__(self, i, x):
        raise TypeError("read-only: the container's memory (write through Param.mut() or p[i] = x)")

    def tolist(self):
        return [self[i] for i in range(self._n)]

    def dequantize(self, out=None):
        """The real values as a new (or the given) flat RAM f32 array."""
        return self.view.dequantize(out)

    def array(self):
        raise TypeError("int8 codes have no zero-copy array of real values: dequantize() copies "
                        "them to RAM; .view.array() is the codes")

    def __repr__(self):
        return "<RealView %s %s%s>" % (self.view.name, self.view.dtype, self.shape)
