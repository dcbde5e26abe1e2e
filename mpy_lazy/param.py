"""Param: a model parameter that allocates nothing until it is used.

States (`p.state`) and what the param holds:

    'uninit'  an init function, shape, dtype, trainable flag. shape, dtype, size and nbytes
              are known; no array exists.
    'bound'   a read-only View into a container: the bytes stay where the container is
              (flash, on a board); no RAM copy.
    'owned'   a flat RAM array (backend ndarray, else array.array; f16 is held as f32),
              possibly shared copy-on-write with clones.

Transitions:

    uninit --val() / mut() / p[i] / p[i]=x--> owned   init runs once, then the init mappers
    uninit --bind() / load()---------------> bound    init never runs (and is dropped)
    bound  --mut() / p[i]=x----------------> owned    copy-on-write: one RAM copy (float params
                                                      get real values: f16 decoded, int8 scaled)
    owned  --bind() / load()---------------> bound    the RAM array is released
    bound|owned --bind() with load mappers giving a new array--> owned

    clone()            same state: uninit shares the init function (nothing allocated, each
                       clone inits on its own, so two clones of a random init differ); bound
                       shares the View; owned shares the array copy-on-write (the first write
                       on either side copies).
    clone(arrays=True) bound/owned: an owned independent RAM copy; uninit: stays uninit (there
                       is nothing to copy; it already inits independently).

Invariants:
  - init runs at most once per Param object. val() called again while the init function runs
    (re-entrantly, from its own code) raises RuntimeError instead of recursing; if init
    raises, the param stays uninit and the next val() tries again.
  - the container's bytes are never written: only owned arrays are writable, and mut() /
    p[i] = x go through copy-on-write first.
  - shape and dtype never change; bind() refuses a tensor of another shape or kind.
  - setting `trainable` (a plain attribute) never runs init.
  - mappers are per param: init_mapper/load_mapper/save_mapper on a clone never affect the
    original (mapper lists are immutable tuples, replaced, never appended to in place).

Not thread-safe (the MicroPython unix port's threads have no GIL): init params from one thread.
"""
import array

from . import backend
from .backend import ITEMSIZE
from .container import ContainerError

_NO_MAPS = ((), (), ())  # init, load, save mappers
# Counts every change of what a param holds (bind, init, copy-on-write, ...): a prepared model
# compares it on each call and prepares again when it moved (its kernels hold buffers).
changes = [0]


def _zeros(shape, dtype):
    n = 1
    for d in shape:
        n *= d
    return backend.new_array(dtype, n)


def compatible(dtype, info):
    """None if a param of `dtype` can bind tensor `info`, else why not. Float params take f32,
    f16 and int8-quantized tensors (their real values); int params need the same int dtype (an
    i8 param takes quantized int8 too: its codes, as the int8 kernels read them)."""
    if dtype in ("f32", "f16"):
        if info.dtype in ("f32", "f16") or info.quant:
            return None
    elif info.dtype == dtype and (not info.quant or dtype == "i8"):
        return None
    return "a %s param cannot hold a%s %s tensor" % (dtype, " quantized" if info.quant else "", info.dtype)


class Param:
    """A lazy model parameter; states and transitions in this module's docstring."""

    # defaults shared by every Param until one sets its own (instance attributes cost heap)
    _maps = _NO_MAPS
    _shared = None  # owned and shared with clones: [number of sharers]
    _note = None  # how an owned array came to be: init, copy-on-write, clone, load_mapper
    dtype = "f32"
    trainable = True

    def __init__(self, shape, dtype="f32", init=None, trainable=True):
        """init(shape, dtype) returns the values (ndarray, array.array, list, any iterable of
        size elements, flat or not); the param takes ownership of what it returns. None: zeros."""
        if dtype not in ITEMSIZE:
            raise ValueError("unknown dtype %r" % dtype)
        self.shape = tuple(shape)
        if dtype != "f32":
            self.dtype = dtype
        if not trainable:
            self.trainable = False
        self._state = "uninit"
        self._src = init or _zeros  # init fn / View / array, by state

    @property
    def state(self):
        return "uninit" if self._state == "busy" else self._state

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        """Bytes of the declared dtype: size x itemsize (known without init)."""
        return self.size * ITEMSIZE[self.dtype]

    @property
    def view(self):
        """The View when bound, else None."""
        return self._src if self._state == "bound" else None

    def val(self):
        """The value: bound -> the View (read-only); owned -> the RAM array; uninit -> runs
        init (once) and returns the new RAM array. Do not write into what val() returns; use
        mut() or p[i] = x."""
        if self._state == "uninit":
            self._initialize()
        elif self._state == "busy":
            raise RuntimeError("Param.val() called from the param's own init function")
        return self._src

    def _initialize(self):
        init = self._src
        self._state = "busy"
        try:
            a = init(self.shape, self.dtype)
            for f in self._maps[0]:
                a = f(a)
            a = backend.to_array(a, self.dtype, self.size)
        except BaseException:
            self._state = "uninit"
            raise
        self._own(a, "init")

    def _own(self, a, note):
        self._release()
        self._state, self._src, self._note = "owned", a, note
        changes[0] += 1

    def _release(self):
        if self._shared is not None:
            self._shared[0] -= 1
            self._shared = None

    def mut(self):
        """A writable RAM array of the value (flat). Bound: copied to RAM first, once; owned and
        shared with a clone: copied first, once; uninit: init runs."""
        self.val()
        if self._state == "bound":
            self._own(self._copy_view(self._src), "copy-on-write")
        elif self._shared is not None and self._shared[0] > 1:
            self._own(backend.copy_array(self._src), "copy-on-write")
        return self._src

    def _copy_view(self, view):
        if self.dtype in ("f32", "f16"):
            return view.dequantize()
        if backend.np_dtype(self.dtype) is not None:
            return backend.copy_array(view.array())
        return array.array(backend.TYPECODE[self.dtype], bytes(view.mv))  # little-endian targets

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        """Flat element i: a real value for a float param (a bound int8 tensor dequantized), the
        stored value for an int param (an i8 param's int8 codes)."""
        v = self.val()
        return v.real(i) if self._state == "bound" and self.dtype in ("f32", "f16") else v[i]

    def __setitem__(self, i, x):
        self.mut()[i] = x

    def clone(self, arrays=False):
        c = Param(self.shape, self.dtype, None, self.trainable)
        if self._maps is not _NO_MAPS:
            c._maps = self._maps
        st = self._state
        if st in ("uninit", "busy"):
            c._src = self._src
        elif not arrays and st == "bound":
            c._state, c._src = "bound", self._src
        elif not arrays:  # owned: share the array copy-on-write
            if self._shared is None:
                self._shared = [1]
            self._shared[0] += 1
            c._state, c._src, c._shared, c._note = "owned", self._src, self._shared, self._note
        elif st == "bound":
            c._own(self._copy_view(self._src), "clone")
        else:
            c._own(backend.copy_array(self._src), "clone")
        return c

    def init_mapper(self, f):
        """Run f(values) -> values after init (composed after earlier init mappers); init does
        not run now. Only for an uninit param (RuntimeError otherwise: init already happened)."""
        if self._state != "uninit":
            raise RuntimeError("init_mapper on a %s param: init already happened" % self.state)
        i, l, s = self._maps
        self._maps = (i + (f,), l, s)
        return self

    def load_mapper(self, f):
        """Run f(value) -> value when a tensor is bound (load/bind). f gets the View (or the
        previous mapper's result); returning the View keeps the param bound, returning anything
        else (an array, a list) makes it owned with that value."""
        i, l, s = self._maps
        self._maps = (i, l + (f,), s)
        return self

    def save_mapper(self, f):
        """Run f(value) -> value in record() (what a save/export writes)."""
        i, l, s = self._maps
        self._maps = (i, l, s + (f,))
        return self

    def record(self):
        """The value to save: val() passed through the save mappers."""
        v = self.val()
        for f in self._maps[2]:
            v = f(v)
        return v

    def bind(self, view, checked=False):
        """Bind to a container View (init never runs). ContainerError if shape or dtype kind
        does not match (checked=True: load() has checked it); the load mappers run on the View."""
        if not checked:
            info = view.info
            problem = self.mismatch(info)
            if problem:
                raise ContainerError("tensor %r: %s: %s" % (info.name, problem[0], problem[1]), info.name,
                                     problem[0])
        v = view
        for f in self._maps[1]:
            v = f(v)
        if v is view:
            self._release()
            self._state, self._src = "bound", view  # _note describes owned arrays only
            changes[0] += 1
        else:
            self._own(backend.to_array(v, self.dtype, self.size), "load_mapper")

    def mismatch(self, info):
        """Why this param cannot bind tensor `info`: (field, reason), or None."""
        if tuple(info.shape) != self.shape:
            return "shape", "param %s, tensor %s" % (self.shape, tuple(info.shape))
        why = compatible(self.dtype, info)
        return ("dtype", why) if why else None

    def memory(self):
        """(flash, ram, pending, note): bytes read in place from the container, bytes on the
        heap, bytes init will allocate, and why."""
        st = self._state
        if st in ("uninit", "busy"):
            return 0, 0, self.size * backend.ram_itemsize(self.dtype), "not initialized"
        if st == "bound":
            v = self._src
            if not v.aligned:
                note = "unaligned: RAM copy"
            elif v.ram_bytes:
                note = "flash view + f16 decoded to RAM"
            else:
                note = "flash view"
            return (v.nbytes if v.aligned else 0), v.ram_bytes, 0, note
        note = self._note
        if self._shared is not None and self._shared[0] > 1:
            note += " (shared copy-on-write)"
        return 0, backend.array_nbytes(self._src), 0, note

    def __repr__(self):
        return "<Param %s %s%s>" % (self.state, self.dtype, self.shape)

