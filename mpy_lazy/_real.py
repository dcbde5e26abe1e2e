# Param.val() of a float param bound to int8 codes (mpy_lazy/param.py): the codes' real values,
# read in place. In its own module: imported only when such a param's val() is first called.
from ._readonly import ReadOnlyArray


class RealView(ReadOnlyArray):
    """The real values of a quantized tensor, read in place from the container: r[i] is
    scale * (code - zero_point) (per channel: that channel's scale), as p[i] and View.real(i)
    give it. r[i] (negative i; a slice gives a list), len(r), iteration, tolist(), shape,
    size; read-only (item assignment raises TypeError: use Param.mut()). It has no zero-copy
    array of real values: dequantize() copies them into a RAM f32 array, and `view` is the View
    (the raw codes: view[i], view.array(); scale and zero point in view.info)."""

    dtype = "f32"  # its values' type (the codes are view.dtype)

    def __init__(self, view):
        ReadOnlyArray.__init__(self, view._array(), view)  # the codes, zero-copy (never written)
        info = view.info
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
    def view(self):
        return self._view

    @property
    def shape(self):
        return self._view.shape

    @property
    def size(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.tolist()[i]
        q = int(ReadOnlyArray.__getitem__(self, i))  # the code (its index checked)
        if self._inner:
            return float(self._s[(i % self._n) // self._inner % self._channels]) * q
        return self._s * (q - self._zp)

    def tolist(self):
        return [self[i] for i in range(self._n)]

    def dequantize(self, out=None):
        """The real values as a new (or the given) flat RAM f32 array."""
        return self._view.dequantize(out)

    def array(self):
        raise TypeError("int8 codes have no zero-copy array of real values: dequantize() copies "
                        "them to RAM; .view.array() is the codes")

    def __repr__(self):
        return "<RealView %s %s%s>" % (self._view.name, self._view.dtype, self.shape)
