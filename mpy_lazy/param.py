"""Param: a model parameter that allocates nothing until it is used.

States (`p.state`) and what the param holds:

    'uninit'  an init function, shape, dtype, trainable flag. shape, dtype, size and nbytes
              are known; no array exists.
    'busy'    its init function is running (transient: uninit before, owned after, uninit
              again if init raises).
    'bound'   a read-only View into a container: the bytes stay where the container is
              (flash, on a board); no RAM copy. Its shape is the View's (read from the
              container's table: one tuple less per tensor).
    'owned'   a flat RAM array (backend ndarray, else array.array; f16 is held as f32),
              possibly shared copy-on-write with clones.

Transitions:

    uninit --val() / mut() / p[i] / p[i]=x--> busy --> owned   init runs once, then the init
                                                               mappers
    uninit --bind() / load()---------------> bound    init never runs (and is dropped)
    bound  --mut() / p[i]=x----------------> owned    copy-on-write: one RAM copy (float params
                                                      get real values: f16 decoded, int8 scaled)
    owned  --bind() / load()---------------> bound    the RAM array is released
    bound|owned --bind() with load mappers giving a new array--> owned
                                                      (a mapper result that is the View's own
                                                      memory, e.g. view.array(), stays bound)

    clone()            same state: uninit shares the init function (nothing allocated, each
                       clone inits on its own, so two clones of a random init differ); bound
                       shares the View; owned shares the array copy-on-write (the first write
                       on either side copies).
    clone(arrays=True) bound/owned: an owned independent RAM copy; uninit: stays uninit (there
                       is nothing to copy; it already inits independently).

Invariants:
  - init runs at most once per Param object. val() called again while the init function runs
    from the same thread (re-entrantly, from its own code) raises RuntimeError instead of
    recursing; from another thread (where _thread exists) it waits for that init to finish
    and returns its result. If init raises, the param goes back to uninit and the next val()
    tries again.
  - while busy: bind() from the init's own thread and init_mapper() raise RuntimeError; bind()
    from another thread waits for the init, then binds.
  - the container's bytes are never written: only owned arrays are writable, and mut() /
    p[i] = x go through copy-on-write first; what val() returns for a bound param is the View
    (or its RealView), whose public methods hand out read-only or copied data only.
  - a float param's values are real values, whatever the container stores: val()[i] == p[i]
    (f16 decoded; int8 codes scaled: val() of a float param bound to a quantized tensor is a
    RealView over the codes, in place); an int param's are its stored ints (an i8 param's
    int8 codes). p.view is the View (the stored codes) either way.
  - shape and dtype never change; bind() refuses a tensor of another shape or kind.
  - setting `trainable` (a plain attribute) never runs init.
  - mappers are per param: init_mapper/load_mapper/save_mapper on a clone never affect the
    original (mapper lists are immutable tuples, replaced, never appended to in place).

Threads: init (val() racing with val()/bind()) is thread-safe where _thread exists; the rest
(bind/mut/clone of one param from several threads at once) is not: the MicroPython unix port's
threads have no GIL.
"""
import array

from . import backend
from .backend import ITEMSIZE
from .container import ContainerError

try:
    import _thread

    _lock = _thread.allocate_lock()
except ImportError:  # a port without threads: busy can only mean re-entrancy
    _lock = None

_NO_MAPS = ((), (), ())  # init, load, save mappers
# An owned param's _state says how its array came to be (report()'s note); these are the others.
_NOT_OWNED = ("uninit", "busy", "bound")
# id(param) -> ident of the thread running its init, while the param is busy
_busy = {}
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
    dtype = "f32"
    trainable = True

    def __init__(self, shape, dtype="f32", init=None, trainable=True):
        """init(shape, dtype) returns the values (ndarray, array.array, list, any iterable of
        size elements, flat or not); the param takes ownership of what it returns. None: zeros."""
        if dtype not in ITEMSIZE:
            raise ValueError("unknown dtype %r" % dtype)
        self._shape = tuple(shape)  # None while bound: the View's (one tuple less per tensor)
        if dtype != "f32":
            self.dtype = dtype
        if not trainable:
            self.trainable = False
        # 'uninit', 'busy', 'bound', or (owned) how the array came to be: 'init',
        # 'copy-on-write', 'clone', 'load_mapper'. One attribute for both: heap is scarce.
        self._state = "uninit"
        self._src = init or _zeros  # init fn / View / array, by state

    @property
    def shape(self):
        s = self._shape
        return s if s is not None else self._src.shape

    @property
    def state(self):
        s = self._state
        return s if s in _NOT_OWNED else "owned"

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
        """The value, indexed as p[i] is: bound -> the View (read-only; a float param bound to
        quantized int8 codes: a RealView of their real values, in place; p.view is the codes);
        owned -> the RAM array; uninit -> runs init (once) and returns the new RAM array. Do
        not write into what val() returns; use mut() or p[i] = x."""
        st = self._state
        if st == "uninit" or st == "busy":
            if self._wait("Param.val()", True):
                self._initialize()
        v = self._src
        if self._state == "bound" and v.dtype not in ("f32", "f16") and self.dtype in ("f32", "f16"):
            if v._real is None:  # a float param over int8 codes: their real values, made once per View
                from ._real import RealView  # imported on first use: heap is scarce

                v._real = RealView(v)
            return v._real
        return v

    def _wait(self, what, claim):
        """Until this param is not busy in another thread (init is racing); RuntimeError if it
        is busy in this one (`what` is then called from the param's own init). claim: an uninit
        param becomes busy, owned by this thread, and True is returned (run init now)."""
        me = _thread.get_ident() if _lock else 0
        while True:
            if _lock:
                _lock.acquire()
            st = self._state
            owner = _busy.get(id(self))
            if claim and st == "uninit":
                self._state = "busy"
                _busy[id(self)] = me
            if _lock:
                _lock.release()
            if st != "busy":
                return claim and st == "uninit"
            if owner == me:
                raise RuntimeError("%s called from the param's own init function" % what)
            import time

            time.sleep(0.001)  # another thread runs the init: its result is ours

    def _initialize(self):
        init = self._src
        try:
            a = init(self.shape, self.dtype)
            for f in self._maps[0]:
                a = f(a)
            a = backend.to_array(a, self.dtype, self.size)
        except BaseException:
            a = None
            raise
        finally:  # the new state, set under the lock (waiting threads read it there)
            if _lock:
                _lock.acquire()
            if a is None:
                self._state = "uninit"
            else:
                self._src = a  # before _state: a thread seeing the new state reads the new value
                self._state = "init"
                changes[0] += 1
            _busy.pop(id(self), None)
            if _lock:
                _lock.release()

    def _own(self, a, note):
        if self._shape is None:  # leaving bound: the shape was the View's
            self._shape = self._src.shape
        self._release()
        self._src = a
        self._state = note
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
            return backend.copy_array(view._array())
        return array.array(backend.TYPECODE[self.dtype], bytes(view.mv))  # little-endian targets

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        """Flat element i, val()[i]: a real value for a float param (a bound int8 tensor
        dequantized), the stored value for an int param (an i8 param's int8 codes)."""
        return self.val()[i]

    def __setitem__(self, i, x):
        self.mut()[i] = x

    def clone(self, arrays=False):
        c = Param(self.shape, self.dtype, None, self.trainable)
        if self._maps is not _NO_MAPS:
            c._maps = self._maps
        st = self._state
        if st == "uninit" or st == "busy":  # (busy: _src is still the init function)
            c._src = self._src
        elif not arrays and st == "bound":
            c._state, c._src, c._shape = "bound", self._src, None
        elif not arrays:  # owned: share the array copy-on-write
            if self._shared is None:
                self._shared = [1]
            self._shared[0] += 1
            c._src, c._shared, c._state = self._src, self._shared, st
        elif st == "bound":
            c._own(self._copy_view(self._src), "clone")
        else:
            c._own(backend.copy_array(self._src), "clone")
        return c

    def init_mapper(self, f):
        """Run f(values) -> values after init (composed after earlier init mappers); init does
        not run now. Only for an uninit param (RuntimeError otherwise: init already happened,
        or is running)."""
        st = self._state
        if st == "busy":
            raise RuntimeError("init_mapper on a busy param: its init function is running")
        if st != "uninit":
            raise RuntimeError("init_mapper on a %s param: init already happened" % self.state)
        i, l, s = self._maps
        self._maps = (i + (f,), l, s)
        return self

    def load_mapper(self, f):
        """Run f(value) -> value when a tensor is bound (load/bind). f gets the View (or the
        previous mapper's result); returning the View (or view.array(): the View's own memory)
        keeps the param bound, returning anything else (an array, a list) makes it owned with
        that value."""
        i, l, s = self._maps
        self._maps = (i, l + (f,), s)
        return self

    def save_mapper(self, f):
        """Run f(value) -> value in record() (what a save/export writes)."""
        i, l, s = self._maps
        self._maps = (i, l, s + (f,))
        return self

    def record(self):
        """The value to save, passed through the save mappers: val(), but the View itself for
        a bound param (a quantized tensor's codes and scales, as stored)."""
        self.val()
        v = self._src
        for f in self._maps[2]:
            v = f(v)
        return v

    def bind(self, view, checked=False):
        """Bind to a container View (init never runs). ContainerError if shape or dtype kind
        does not match (checked=True: load() has checked it); the load mappers run on the View.
        Nothing changes if a mapper raises."""
        if not checked:
            info = view.info
            problem = self.mismatch(info)
            if problem:
                raise ContainerError("tensor %r: %s: %s" % (info.name, problem[0], problem[1]), info.name,
                                     problem[0])
        self._wait("bind()", False)
        self._commit(self._mapped(view))

    def _mapped(self, view):
        """What binding `view` gives, nothing changed yet: ('bound', view) or (note, array)."""
        v = view
        for f in self._maps[1]:
            v = f(v)
        if v is view or _alias(v, view) == 1:
            return "bound", view
        a = backend.to_array(v, self.dtype, self.size)
        if _alias(a, view):  # e.g. a reshaped or sliced view.array(): read-only memory, copy
            a = backend.copy_array(a)
        return "load_mapper", a

    def _commit(self, result):
        st, src = result
        if st == "bound":
            self._release()
            self._src = src
            self._state = "bound"
            self._shape = None  # the View has it (bind checked they are equal)
            changes[0] += 1
        else:
            self._own(src, st)

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
        if st == "uninit" or st == "busy":
            return 0, 0, self.size * backend.ram_itemsize(self.dtype), (
                "not initialized" if st == "uninit" else "init running")
        if st == "bound":
            v = self._src
            if not v.aligned:
                note = "unaligned: RAM copy"
            elif v.ram_bytes:
                note = "flash view + f16 decoded to RAM"
            else:
                note = "flash view"
            return (v.nbytes if v.aligned else 0), v.ram_bytes, 0, note
        note = st
        if self._shared is not None and self._shared[0] > 1:
            note += " (shared copy-on-write)"
        return 0, backend.array_nbytes(self._src), 0, note

    def __repr__(self):
        return "<Param %s %s%s>" % (self.state, self.dtype, self.shape)


def _alias(v, view):
    """How a load mapper's result v relates to the View's memory: 1 when it is the View's own
    data as stored (its read-only array(), an array over exactly its bytes: binding keeps it in
    place), 2 when it lies elsewhere in it (numpy: copy it), 0 when it does not (MicroPython:
    to_array copies what is not its own array)."""
    if type(v).__name__ == "ReadOnlyArray":  # View.array() on MicroPython
        return 1 if v._view is view else 0
    try:  # (uctypes objects raise TypeError for attributes they lack)
        ai = v.__array_interface__
    except (AttributeError, TypeError):
        return 0
    mv = view.mv
    if not len(mv):
        return 0
    np = backend.np
    own = np.frombuffer(mv, "<f2" if view.dtype == "f16" else backend._NUMPY[view.dtype])
    if ai["data"][0] == own.__array_interface__["data"][0] and v.size == own.size and \
            v.dtype == own.dtype and v.flags.c_contiguous:
        return 1
    return 2 if np.may_share_memory(v, own) else 0
