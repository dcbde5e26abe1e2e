# View.array() on MicroPython (mpy_lazy/container.py): the zero-copy typed array of a tensor,
# read-only. In its own module: imported only when array() is first called on MicroPython.


class ReadOnlyArray:
    """What View.array() hands out on MicroPython: the zero-copy typed array of a tensor (a
    uctypes or ulab array over the container, which has no read-only mode and would write to
    flash), read-only. a[i] (negative i; a slice gives a list), len(a), iteration, tolist(); item
    assignment raises TypeError. Holds the View (and so the container buffer) alive."""

    def __init__(self, a, view):
        self._a = a
        self._view = view
        self._n = view.size

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
        return self._a[i]

    def __setitem__(self, i, x):
        raise TypeError("read-only: the container's memory (copy it, or use Param.mut())")

    def tolist(self):
        a = self._a
        return [a[i] for i in range(self._n)]

    @property
    def dtype(self):
        return self._view.dtype

    def __repr__(self):
        return "<ReadOnlyArray %s[%d]>" % (self._view.dtype, self._n)
