"""ONNX sequences and recurrent layers (LSTM, GRU), for host_tools/onnx_import.py, batch 1.

A sequence is a graph value stored as R rows of C columns (T time steps of F features, or the
other way round), seen with an ONNX shape whose other axes are 1: (1, T, F) batch first,
(T, 1, F) time major, (T, 1, 1, F) an LSTM's Y, (1, C, L) a Conv1d's output (stored L rows of
C channels: the board is channels last). The importer keeps that ONNX shape and which of its
axes the rows and the columns are (`seq`), so a Transpose, Squeeze, Unsqueeze or Reshape that
only moves axes of size 1 (the batch of one included) costs nothing (the same value); a
transpose of the rows and columns is free too until an op needs the other order (then one
transpose on the board); Gather and Slice along T become a slice of rows, a flatten gives the
(T x F,) vector. A Conv1d's output (or an image with one row or one column) becomes a sequence
where an op moves its batch dimension; a sequence read by an op of images or vectors (a Conv1d
after an RNN) is seen again as one, channels last. On a sequence, MatMul (torch's Linear on
(N, T, F)) and Gemm are a linear layer per time step (a 1x1 convolution over the rows), their
bias and the other per-feature constants folded in; activations keep the sequence; a mean or
max over time is one pooling op.

- LSTM becomes the `lstm` op (one layer, forward, gates reordered from ONNX's i, o, f, c to
  i, f, c, o; the two biases added), its state zero at every call (ONNX has no state across
  runs); torch's stacked layers are LSTM nodes one after the other. Y_h is Y's last row.
- GRU (torch's, linear_before_reset=1) becomes the `gru` op (one layer, forward, gates z, r, n
  as ONNX's, its weights stored once), its state zero at every call; TFLite has no GRU builtin:
  its int8 version is built as TFLM's integer LSTM (host_tools/int8.py, mpy_lazy/ops/gru.py).
  linear_before_reset=0 (ONNX's default, which torch never exports) is unrolled over its T steps
  into graph ops (slice, linear, add, sub, mul, sigmoid, tanh, concat).
Anything else (bidirectional or reverse, peepholes, an initial state that is not zero, other
activations, clip, Y_c read) raises PackError naming the node."""
import numpy as np

from .container import PackError

# ops that keep a sequence as it is (elementwise on its stored value)
_UNARY = ("Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSwish", "HardSigmoid", "Gelu")
_BINARY = ("Add", "Sub", "Mul", "Div")  # with a constant per feature, or of two sequences alike


class SequenceOps:
    """Mixed into onnx_import._Importer: self.seq maps a sequence value to (ONNX shape, rows
    axis, columns axis); the stored value holds the rows one after the other, whatever its
    shape ((R, C) or (1, R, C))."""

    # --- inputs ---------------------------------------------------------------------------

    def seq_inputs(self):
        """{graph input: T axis in its ONNX shape} for the inputs an LSTM or GRU reads as X,
        directly (time major: (T, 1, F), or layout=1: (1, T, F)) or through a Transpose
        (perm 1, 0, 2: a batch-first (1, T, F)), and the (1, T, F) inputs read only by
        MatMul (torch's Linear on every time step)."""
        producer = {o: n for n in self.model.graph.node for o in n.output}
        readers = {}
        for n in self.model.graph.node:
            for i in n.input:
                readers.setdefault(i, []).append(n)
        out = {}
        for n in self.model.graph.node:
            if n.op_type not in ("LSTM", "GRU") or not n.input:
                continue
            layout = self._attrs(n).get("layout", 0)
            x, taxis = n.input[0], 1 if layout else 0
            p = producer.get(x)
            while p is not None and p.op_type == "Identity":
                x = p.input[0]
                p = producer.get(x)
            if p is not None and p.op_type == "Transpose" and list(self._attrs(p).get("perm", [])) == [1, 0, 2]:
                x, taxis = p.input[0], 1 - taxis
            out[x] = taxis
        for inp in self.model.graph.input:
            rs = readers.get(inp.name)
            if inp.name in out or not rs or len(self.dims.get(inp.name) or []) != 3:
                continue
            if all(n.op_type == "MatMul" and n.input[0] == inp.name and n.input[1] in self.consts
                   and self.consts[n.input[1]].ndim == 2 for n in rs):
                out[inp.name] = 1
        return out

    def seq_input(self, inp, dims, taxis):
        if len(dims) != 3 or any(d is None or d <= 0 for i, d in enumerate(dims) if i != 1 - taxis) or \
                dims[1 - taxis] not in (None, 0, 1):
            raise PackError("ONNX graph: input %r of shape %s read as a sequence: the board runs batch 1 "
                            "with static steps and features" % (inp.name, dims))
        shape = [d if i != 1 - taxis else 1 for i, d in enumerate(dims)]
        self.ir.inputs.append((inp.name, (shape[taxis], shape[2]), "hwc"))
        self._seq(inp.name, (shape[taxis], shape[2]), shape, taxis, 2)

    # --- bookkeeping ------------------------------------------------------------------------

    def _seq(self, name, vshape, onnx_shape, taxis, faxis):
        self.ir.shapes[name] = tuple(vshape)
        self.kind[name] = "seq"
        self.seq[name] = (tuple(int(d) for d in onnx_shape), taxis, faxis)

    def is_seq(self, i=0):
        name = self.node.input[i]
        return bool(name) and (name in self.seq or self.alias.get(name, name) in self.seq)

    def _seq_of(self, i=0):
        """(graph value, its sequence view) of input i: the view of the ONNX name (a
        Transpose or Squeeze gives the same value another ONNX shape), else of the value,
        else the value (a Conv1d's output, ...) seen as a sequence (_kind_view)."""
        name = self.node.input[i]
        x = self.x(i)
        info = self.seq.get(name) or self.seq.get(x)
        return x, info if info is not None else self._kind_view(x)

    def _kind_view(self, x):
        """A value of the image world as a sequence: (N,) is one row; (N, C, L) stored (L, C)
        is L rows of C; an image of one row or one column the same. An image of more rows
        and columns is not a sequence: refused."""
        s, kind = self.ir.shapes[x], self.kind.get(x)
        if kind == "nf" and len(s) == 1:
            return (1, s[0]), 0, 1
        if kind == "ncl":
            return (1, s[2], s[1]), 2, 1
        if kind == "nchw" and (s[0] == 1 or s[1] == 1):
            return (1, s[2], s[0], s[1]), 3 if s[0] == 1 else 2, 1
        raise self.err("a value of shape %s seen as a sequence (its batch dimension moved, or one step "
                       "taken): only a vector, an (N, C, L) value or an image of one row or column can be"
                       % ((1,) + self._torch_shape(x),))

    @staticmethod
    def _ordered(info):
        """True if the ONNX element order of the view is the stored one (rows first)."""
        shape, ra, ca = info
        return ra < ca or shape[ra] == 1 or shape[ca] == 1

    def _value(self, x, shape):
        """The stored value x with shape `shape` (a reshape: no byte moves), made once."""
        shape = tuple(int(d) for d in shape)
        if tuple(self.ir.shapes[x]) == shape:
            return x
        y = "%s:%s" % (x, "x".join(map(str, shape)))
        if y not in self.ir.shapes:
            self.emit("reshape", [x], y, shape, "seq", shape=shape)
        return y

    def _rows(self, x, info, lead=False):
        """x as (R, C) ((1, R, C) with lead: an image of one row, for the conv and pooling ops)."""
        shape, ra, ca = info
        return self._value(x, ((1,) if lead else ()) + (shape[ra], shape[ca]))

    def _transposed(self, x, info):
        """The sequence with rows and columns swapped on the board (one transpose): the same
        ONNX view, its rows now what were the columns."""
        shape, ra, ca = info
        x2 = self._rows(x, info)
        y = x2 + ".T"
        if y not in self.ir.shapes:
            self.emit("transpose", [x2], y, (shape[ca], shape[ra]), "seq", perm=(1, 0))
        return y, (shape, ca, ra)

    def _seq_output(self, x, info, name):
        """A graph output whose stored rows are its ONNX view's columns: transposed into the
        value `name` (the ONNX output's), in the order torch's caller reads."""
        shape, ra, ca = info
        if x == name:
            self.ir.rename_value(x, x + ".rows")
            self.kind[x + ".rows"] = self.kind[x]
            x = x + ".rows"
        self.emit("transpose", [self._rows(x, info)], name, (shape[ca], shape[ra]), "seq", perm=(1, 0))
        return name

    def _as_kind(self, x, info):
        """A sequence read by an op of the image world: the value of torch's shape (the ONNX
        view without its batch axis, which must be 1), stored channels last: a reshape, and a
        transpose first when the stored rows are the channels."""
        from .onnx_import import _KIND, _stored

        shape, ra, ca = info
        key = (x, info)
        if key in self.kinded:
            return self.kinded[key]
        if not 2 <= len(shape) <= 4 or shape[0] != 1:
            raise self.err("a sequence seen as %s read by %s: the board runs batch 1 (one leading axis of 1, "
                           "then at most 3)" % (list(shape), self.node.op_type))
        stored = [a for a in list(range(2, len(shape))) + [1] if shape[a] > 1]  # channels last
        if stored != [a for a in (ra, ca) if shape[a] > 1]:
            x, info = self._transposed(x, info)
        torch_shape = shape[1:]
        target, kind = _stored(torch_shape), _KIND[len(torch_shape)]
        y = x
        if tuple(self.ir.shapes[x]) != target or self.kind.get(x) != kind:
            y = "%s:%s" % (x, kind)
            if y not in self.ir.shapes:
                self.emit("reshape", [x], y, target, kind, shape=target)
        self.kinded[key] = y
        return y

    def _as_features(self, x, y):
        """y: x (a (1, F) or (F,) ONNX value whose rows are one) as a feature vector (F,)."""
        n = int(np.prod(self.ir.shapes[x]))
        if self.ir.shapes[x] == (n,):
            self.alias[y] = x
            return
        self.emit("reshape", [x], y, (n,), "nf", shape=(n,))

    def _reshaped(self, x, info, y, target):
        """y: the sequence x (ONNX view `info`) seen with ONNX shape `target`: the same value if
        its rows and columns axes keep their order (the other axes being 1), the (T x F,)
        vector for a flatten to (1, T x F) or (T x F,)."""
        shape, ra, ca = info
        t, f = shape[ra], shape[ca]
        target = [int(d) for d in target]
        if t == 1 and all(d == 1 for i, d in enumerate(target) if i != len(target) - 1) and target[-1] == f:
            return self._as_features(x, y)  # one step: (1, F) features
        if [d for d in target if d != 1] == [t * f] and t > 1 and f > 1:  # a flatten, in ONNX order
            if not self._ordered(info):
                x, info = self._transposed(x, info)
            n = t * f
            return self.emit("reshape", [x], y, (n,), "nf", shape=(n,))
        for ta in range(len(target)):
            for fa in range(len(target)):
                if ta != fa and target[ta] == t and target[fa] == f and (
                        (ta < fa) == (ra < ca) or t == 1 or f == 1) and \
                        all(d == 1 for i, d in enumerate(target) if i not in (ta, fa)):
                    self.alias[y] = x
                    self.seq[y] = (tuple(target), ta, fa)
                    return
        raise self.err("a sequence of %d steps x %d features seen as %s: only reshapes that keep the steps "
                       "in order are supported" % (t, f, target))

    def _const_ints(self, i, attr, what):
        a = self._attrs(self.node)
        v = a.get(attr)
        if v is None and len(self.node.input) > i and self.node.input[i]:
            v = self.const(i, what)
        return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]

    # --- shape ops on sequences ----------------------------------------------------------------

    def seq_Identity(self, a):
        x, info = self._seq_of()
        self.alias[self.out()] = x
        self.seq[self.out()] = info

    seq_Dropout = seq_Identity

    def seq_Transpose(self, a):
        x, (shape, ra, ca) = self._seq_of()
        perm = [int(p) for p in a.get("perm", range(len(shape) - 1, -1, -1))]
        if sorted(perm) != list(range(len(shape))):
            raise self.err("perm %s is not a permutation of %d axes" % (perm, len(shape)))
        self.alias[self.out()] = x
        self.seq[self.out()] = (tuple(shape[p] for p in perm), perm.index(ra), perm.index(ca))

    def seq_Squeeze(self, a):
        x, info = self._seq_of()
        shape = info[0]
        axes = self._const_ints(1, "axes", "axes")
        axes = sorted(i % len(shape) for i in axes) if axes is not None else [i for i, d in enumerate(shape) if d == 1]
        if any(shape[i] != 1 for i in axes):
            raise self.err("squeezing an axis of size > 1")
        self._reshaped(x, info, self.out(), [d for i, d in enumerate(shape) if i not in axes])

    def seq_Unsqueeze(self, a):
        x, info = self._seq_of()
        shape = list(info[0])
        axes = self._const_ints(1, "axes", "axes")
        n = len(shape) + len(axes)
        for i in sorted(v % n for v in axes):
            shape.insert(i, 1)
        self._reshaped(x, info, self.out(), shape)

    def seq_reshape(self, target):
        x, info = self._seq_of()
        shape = info[0]
        n = int(np.prod(shape))
        target = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target)]
        if -1 in target:
            rest = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = n // rest if rest else 0
        self._reshaped(x, info, self.out(), target)

    def seq_Reshape(self, a):
        self.seq_reshape([int(v) for v in np.asarray(self.const(1, "the shape")).reshape(-1)])

    def seq_Flatten(self, a):
        x, info = self._seq_of()
        shape = info[0]
        axis = a.get("axis", 1) % len(shape)
        if int(np.prod(shape[:axis])) != 1:
            raise self.err("flattening a sequence into %d rows: only a flatten after the batch dimension is "
                           "supported" % int(np.prod(shape[:axis])))
        self._reshaped(x, info, self.out(), [1, int(np.prod(shape))])

    def op_Gather(self, a):  # a value of the image world: one of its steps, as a sequence's
        self.native = True
        self.seq_Gather(a)

    def seq_Gather(self, a):
        x, (shape, taxis, faxis) = self._seq_of()
        idx = self.const(1, "the indices")
        axis = a.get("axis", 0) % len(shape)
        if idx is None or np.asarray(idx).size != 1:
            raise self.err("only one constant index is supported")
        k = int(np.asarray(idx).reshape(-1)[0])
        keep = np.asarray(idx).ndim > 0
        if not -shape[axis] <= k < shape[axis]:
            raise self.err("index %d outside an axis of %d" % (k, shape[axis]))
        k %= shape[axis]
        rest = [d for i, d in enumerate(shape) if i != axis or keep]
        if axis == faxis:
            raise self.err("a gather of a sequence's features is not supported")
        if axis != taxis:  # an axis of 1 (batch, direction): the same value
            return self._reshaped(x, (shape, taxis, faxis), self.out(), rest)
        t, f = shape[taxis], shape[faxis]
        row = self.out() + ".row"
        self.emit("slice", [self._rows(x, (shape, taxis, faxis))], row, (1, f), "seq", begin=(k, 0), end=(k + 1, f))
        if keep:  # the T axis kept: a sequence of one step
            self.alias[self.out()] = row
            self.seq[self.out()] = (tuple(1 if i == taxis else d for i, d in enumerate(shape)), taxis, faxis)
        else:
            self._as_features(row, self.out())

    def seq_Slice(self, a):
        x, (shape, taxis, faxis) = self._seq_of()
        starts, ends = self._const_ints(1, "starts", "starts"), self._const_ints(2, "ends", "ends")
        axes = self._const_ints(3, "axes", "axes") or list(range(len(starts)))
        steps = self._const_ints(4, "steps", "steps") or [1] * len(starts)
        t, f = shape[taxis], shape[faxis]
        b, e = [0, 0], [t, f]
        for s, en, ax, st in zip(starts, ends, axes, steps):
            ax %= len(shape)
            size = shape[ax]
            lo = max(0, min(size, s + size if s < 0 else s))
            hi = max(0, min(size, en + size if en < 0 else en))
            if st != 1:
                raise self.err("slice steps other than 1 are not supported")
            if ax in (taxis, faxis):
                k = 0 if ax == taxis else 1
                b[k], e[k] = lo, hi
            elif (lo, hi) != (0, 1):
                raise self.err("a slice of an axis of 1 that empties it")
        if b[0] >= e[0] or b[1] >= e[1]:
            raise self.err("an empty slice")
        vshape = (e[0] - b[0], e[1] - b[1])
        if vshape == (t, f):
            self.alias[self.out()] = x
        else:
            self.emit("slice", [self._rows(x, (shape, taxis, faxis))], self.out(), vshape, "seq",
                      begin=tuple(b), end=tuple(e))
        self.seq[self.out()] = (tuple(vshape[0] if i == taxis else (vshape[1] if i == faxis else d)
                                      for i, d in enumerate(shape)), taxis, faxis)

    def image_frames(self, x, perm):
        """A Transpose moving the batch dimension of an image ((1, C, F, T) -> (T, 1, C, F): a Conv2d
        front end's frames for a time-major RNN): its elements put in the output's ONNX order
        (a transpose on the board), a value only a Reshape to a sequence reads (frames_reshape)."""
        from .onnx_import import _STORAGE_AXIS

        src = (1,) + self._torch_shape(x)
        sperm = tuple(_STORAGE_AXIS[4][t] for t in perm if t != 0)  # stored axes in the output's order
        y = self.out()
        if sperm == (0, 1, 2):
            self.alias[y] = x
        else:
            self.emit("transpose", [x], y, tuple(self.ir.shapes[x][j] for j in sperm), "frames", perm=sperm)
        self.frames[y] = tuple(src[p] for p in perm)

    def frames_reshape(self, spec):
        """A Reshape of image_frames' value: a sequence if it leaves two axes other than 1 (the
        rows and columns, in the stored order)."""
        shape = self.frames[self.node.input[0]]
        x = self.alias.get(self.node.input[0], self.node.input[0])
        target = self._reshape_target(spec, shape, self._attrs(self.node))
        axes = [i for i, d in enumerate(target) if d != 1]
        if len(axes) != 2:
            raise self.err("an image whose batch dimension a Transpose moved (to %s) reshaped to %s: only a "
                           "sequence (two axes other than 1) is supported" % (list(shape), target))
        self.seq[self.out()] = (tuple(target), axes[0], axes[1])
        self.alias[self.out()] = self._value(x, [target[a] for a in axes])

    # --- per-step ops: linear layers, constants, activations, pooling over time ------------------

    def _features_last(self, x, info):
        """The view with its columns on the last ONNX axis (a transpose when the rows are)."""
        shape, ra, ca = info
        last = len(shape) - 1
        if ca == last:
            return x, info
        if ra == last and shape[ra] > 1:
            return self._transposed(x, info)
        if shape[last] == 1 and shape[ca] == 1:
            return x, (shape, ra, last)
        if shape[last] == 1 and shape[ra] == 1:  # one row: its columns are the vector
            return x, (shape, ca, last)
        raise self.err("a sequence seen as %s: its last axis is neither its steps nor its features" % (list(shape),))

    def _per_step(self, x, info, w, b, wname, bname):
        """torch's Linear on every time step (w [out, in]): a 1x1 convolution over the rows."""
        x, info = self._features_last(x, info)
        shape, ra, ca = info
        n_out, n_in = w.shape
        if shape[ca] != n_in:
            raise self.err("a sequence of %d features, the weight takes %d" % (shape[ca], n_in))
        tensors = {"w": (wname, w.reshape(n_out, 1, 1, n_in).astype(np.float32))}
        if b is not None:
            tensors["b"] = (bname, np.broadcast_to(np.asarray(b, np.float64).reshape(-1), (n_out,)).astype(np.float32))
        y = self.out()
        self.emit("conv2d", [self._rows(x, info, lead=True)], y, (1, shape[ra], n_out), "seq", tensors,
                  out=n_out, k=(1, 1))
        self.seq[y] = (shape[:-1] + (n_out,), ra, len(shape) - 1)

    def seq_MatMul(self, a):
        x, info = self._seq_of()
        w = self.const(1, "the second input (the weight)")
        if w is None or w.ndim != 2:
            raise self.err("needs a 2-D weight initializer")
        self._per_step(x, info, w.astype(np.float64).T, None, self.node.input[1], None)

    def seq_Gemm(self, a):
        x, info = self._seq_of()
        if a.get("transA", 0):
            raise self.err("transA=1 is not supported")
        w, c = self.const(1, "B (the weight)"), self.const(2, "C (the bias)")
        if w is None or w.ndim != 2:
            raise self.err("needs a 2-D weight initializer")
        w = w.astype(np.float64) * a.get("alpha", 1.0)
        if not a.get("transB", 0):
            w = w.T
        if c is not None and np.asarray(c).size not in (1, w.shape[0]):
            raise self.err("a bias of %d values for %d outputs" % (np.asarray(c).size, w.shape[0]))
        b = None if c is None else np.asarray(c, np.float64) * a.get("beta", 1.0)
        self._per_step(x, info, w, b, self.node.input[1], self.node.input[2] if c is not None else None)

    def seq_binary(self, a):
        """A sequence and a constant of one value or one per feature (torch's Linear's bias,
        a scale): a per-feature affine (folded into the linear before it); two sequences of one
        view: the op on their stored values. Anything else: seen as images or vectors."""
        op = self.node.op_type
        names = [self.alias.get(i, i) for i in self.node.input]
        consts = [n in self.consts for n in names]
        if consts[0] != consts[1]:
            xi = consts.index(False)
            x, info = self._seq_of(xi)
            x, info = self._features_last(x, info)
            shape, ra, ca = info
            c = np.asarray(self.consts[names[1 - xi]], np.float64)
            if c.ndim <= len(shape) and all(d == 1 for d in c.shape[:-1]) and c.shape[-1:] in ((), (1,), (shape[ca],)):
                c = np.broadcast_to(c.reshape(-1), (shape[ca],))
                one, zero = np.ones(shape[ca]), np.zeros(shape[ca])
                if op == "Div" and xi == 1:
                    raise self.err("dividing by an activation is not supported")
                scale, shift = {"Add": (one, c), "Sub": (one, -c) if xi == 0 else (-one, c), "Mul": (c, zero),
                                "Div": (1.0 / c, zero)}[op]
                self._affine(self._rows(x, info, lead=True), scale, shift, self.out())
                self.seq[self.out()] = info
                return
        elif not any(consts) and op != "Div" and all(self.is_seq(i) for i in (0, 1)):
            (x0, i0), (x1, i1) = self._seq_of(0), self._seq_of(1)
            if i0 == i1:
                shape = self.ir.shapes[x0]
                self.emit(op.lower(), [x0, self._value(x1, shape)], self.out(), shape, "seq")
                self.seq[self.out()] = i0
                return
        self.native = False
        getattr(self, "op_" + op)(a)

    def seq_unary(self, a):
        """An activation: the same sequence view (fused into the op before it where it can be)."""
        name = self.node.input[0]
        info = self.seq.get(name) or self.seq.get(self.alias.get(name, name))
        getattr(self, "op_" + self.node.op_type)(a)
        self.seq[self.out()] = info

    def seq_Softmax(self, a):
        x, info = self._seq_of()
        shape, ra, ca = info
        if a.get("axis", -1) % len(shape) != ca:
            self.native = False
            return self.op_Softmax(a)
        self.emit("softmax", [x], self.out(), self.ir.shapes[x], "seq")
        self.seq[self.out()] = info

    def _seq_reduce(self, op, a):
        """A mean or max over the time steps (the rows): one pooling op over them."""
        x, info = self._seq_of()
        shape, ra, ca = info
        axes = self._axes(a)
        axes = set(range(len(shape))) if axes is None else {int(i) % len(shape) for i in np.asarray(axes).reshape(-1)}
        if ra not in axes or ca in axes and shape[ca] > 1 or shape[ra] == 1:
            self.native = False
            return getattr(self, "op_Reduce" + op.capitalize())(a)
        r, c = shape[ra], shape[ca]
        y = self.out() + ".pool" if not a.get("keepdims", 1) else self.out()
        self._reduce_op(op, self._rows(x, info, lead=True), y, (1, r, c))
        if a.get("keepdims", 1):
            self.seq[y] = (tuple(1 if i in axes else d for i, d in enumerate(shape)), ra, ca)
        else:
            self._as_features(y, self.out())

    def seq_ReduceMean(self, a):
        self._seq_reduce("mean", a)

    def seq_ReduceMax(self, a):
        self._seq_reduce("max", a)

    # --- recurrent layers -----------------------------------------------------------------------

    def _rnn_common(self, a, gates, kind):
        """(X, W, R, Wb, Rb, H) of an LSTM or GRU node, every unsupported variant refused."""
        n = self.node
        direction = a.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction != "forward":
            raise self.err("a %s %s is not supported (one forward layer is)" % (direction, kind))
        if a.get("clip") is not None:
            raise self.err("clip is not supported")
        acts = [v.decode() if isinstance(v, bytes) else v for v in a.get("activations", [])]
        if acts and acts != ["Sigmoid", "Tanh", "Tanh"][:len(acts)]:
            raise self.err("activations %s are not supported (Sigmoid, Tanh, Tanh are)" % acts)
        x, info = self._seq_of(0)
        shape, ra, ca = info
        want = 1 if a.get("layout", 0) else 0
        if len(shape) == 3 and shape[ra] == 1 and shape[want] == 1 and ca == 2:
            info = shape, want, ca  # one step
        elif len(shape) == 3 and (ca, ra) == (want, 2):  # the rows are the features: transposed
            x, info = self._transposed(x, info)
        if len(shape) != 3 or info[1:] != (want, 2):
            raise self.err("X seen as %s with its steps on axis %d: expected axis %d (and features on axis 2)"
                           % (list(shape), info[1], want))
        x = self._rows(x, info)
        w, r = self.const(1, "W"), self.const(2, "R")
        hid = a.get("hidden_size") or (w.shape[1] // gates if w is not None else 0)
        nin = self.ir.shapes[x][1]
        if w is None or r is None or w.shape != (1, gates * hid, nin) or r.shape != (1, gates * hid, hid):
            raise self.err("W and R must be constants of shapes (1, %d, %d) and (1, %d, %d)"
                           % (gates * hid, nin, gates * hid, hid))
        b = self.const(3, "B")
        b = np.zeros(2 * gates * hid) if b is None else np.asarray(b, np.float64).reshape(-1)
        if len(n.input) > 4 and n.input[4]:
            lens = self.const(4, "sequence_lens")
            if np.any(np.asarray(lens).reshape(-1) != self.ir.shapes[x][0]):
                raise self.err("sequence_lens must be the sequence's length")
        for i, what in ((5, "initial_h"), (6, "initial_c")):
            if len(n.input) > i and n.input[i]:
                v = self.const(i, what)
                if np.any(np.asarray(v) != 0):
                    raise self.err("a non-zero %s is not supported (the state starts from zero)" % what)
        if len(n.input) > 7 and n.input[7]:
            raise self.err("peepholes (input P) are not supported")
        return (x, w[0].astype(np.float64), r[0].astype(np.float64), b[:gates * hid], b[gates * hid:], hid)

    def _rnn_outputs(self, y, t, hid, last):
        """Y (T, 1, 1, H) is the sequence y; Y_h (1, 1, H) its last row `last` (made on
        demand); Y_c is refused."""
        outs = list(self.node.output) + ["", "", ""]
        self._seq(y, (t, hid), (t, 1, 1, hid), 0, 3)
        if outs[1] and self.uses.get(outs[1]):
            src = last()
            self.alias[outs[1]] = src
            self.seq[outs[1]] = ((1, 1, hid), 0, 2)
        if len(self.node.output) > 2 and outs[2] and self.uses.get(outs[2]):
            raise self.err("the final cell state Y_c is read: not supported (Y and Y_h are)")

    def op_LSTM(self, a):
        if a.get("input_forget", 0):
            raise self.err("coupled input and forget gates (input_forget=1) are not supported")
        x, w, r, wb, rb, hid = self._rnn_common(a, 4, "LSTM")
        t = self.ir.shapes[x][0]
        order = [0, 2, 3, 1]  # ONNX's gates i, o, f, c -> i, f, c, o

        def gates(m):
            return np.concatenate([m[k * hid:(k + 1) * hid] for k in order])

        y = self.node.output[0] or "lstm%d" % len(self.ir.nodes)
        self.emit("lstm", [x], y, (t, hid), "seq",
                  {"w": (self.node.input[1], gates(w).astype(np.float32)),
                   "r": (self.node.input[2], gates(r).astype(np.float32)),
                   "b": (y + ".bias", gates(wb + rb).astype(np.float32))}, out=hid)

        def last():
            row = y + ".last"
            if row not in self.ir.shapes:
                self.emit("slice", [y], row, (1, hid), "seq", begin=(t - 1, 0), end=(t, hid))
            return row

        self._rnn_outputs(y, t, hid, last)

    def op_GRU(self, a):
        """torch's GRU (linear_before_reset=1) becomes the `gru` op (gates z, r, n as ONNX's;
        b the input's biases then the hidden state's); linear_before_reset=0 is unrolled."""
        x, w, r, wb, rb, hid = self._rnn_common(a, 3, "GRU")
        if not a.get("linear_before_reset", 0):
            return self._gru_unrolled(x, w, r, wb, rb, hid)
        t = self.ir.shapes[x][0]
        y = self.node.output[0] or "gru%d" % len(self.ir.nodes)
        self.emit("gru", [x], y, (t, hid), "seq",
                  {"w": (self.node.input[1], w.astype(np.float32)),
                   "r": (self.node.input[2], r.astype(np.float32)),
                   "b": (y + ".bias", np.concatenate([wb, rb]).astype(np.float32))}, out=hid)

        def last():
            row = y + ".last"
            if row not in self.ir.shapes:
                self.emit("slice", [y], row, (1, hid), "seq", begin=(t - 1, 0), end=(t, hid))
            return row

        self._rnn_outputs(y, t, hid, last)

    def _gru_unrolled(self, x, w, r, wb, rb, hid):
        """linear_before_reset=0 (ONNX's default; torch never exports it), unrolled: per step
        z = sigmoid(Wz x + Rz h + bz), r = sigmoid(Wr x + Rr h + br), n = tanh(Wn x + Wbn +
        Rn (r h) + Rbn), h = n + z (h - n); the first step has h = 0."""
        t = self.ir.shapes[x][0]
        name = self.node.output[0] or "gru%d" % len(self.ir.nodes)
        nin = self.ir.shapes[x][1]
        h2 = 2 * hid
        k = [0]

        def v(tag):
            k[0] += 1
            return "%s.%s%d" % (name, tag, k[0])

        def op(kind, xs, shape, tensors=None, **attrs):
            y = v(kind)
            self.emit(kind, xs, y, shape, "nf", tensors, **attrs)
            return y

        def part(src, lo, hi):
            return op("slice", [src], (hi - lo,), begin=(lo,), end=(hi,))

        # the input's products of every step at once would need a (T, 3H) matmul: one linear per step
        bias_x = wb + np.concatenate([rb[:h2], np.zeros(hid)])  # z and r take both biases
        hs = []
        h = None
        for step in range(t):
            xt = op("slice", [x], (1, nin), begin=(step, 0), end=(step + 1, nin))
            bx = bias_x + np.concatenate([np.zeros(h2), rb[h2:]]) if h is None else bias_x  # h = 0: Rbn alone
            gx = op("linear", [xt], (3 * hid,), {"w": (v("w"), w.astype(np.float32)),
                                                  "b": (v("b"), bx.astype(np.float32))}, out=3 * hid)
            if h is None:
                zr = op("sigmoid", [part(gx, 0, h2)], (h2,))
                z = part(zr, 0, hid)
                n = op("tanh", [part(gx, h2, 3 * hid)], (hid,))
                h = op("sub", [n, op("mul", [z, n], (hid,))], (hid,))  # (1 - z) n
            else:
                gh = op("linear", [h], (h2,), {"w": (v("w"), r[:h2].astype(np.float32))}, out=h2)
                zr = op("sigmoid", [op("add", [part(gx, 0, h2), gh], (h2,))], (h2,))
                z, rg = part(zr, 0, hid), part(zr, hid, h2)
                rh = op("linear", [op("mul", [rg, h], (hid,))], (hid,),
                        {"w": (v("w"), r[h2:].astype(np.float32)), "b": (v("b"), rb[h2:].astype(np.float32))},
                        out=hid)
                n = op("tanh", [op("add", [part(gx, h2, 3 * hid), rh], (hid,))], (hid,))
                h = op("add", [n, op("mul", [z, op("sub", [h, n], (hid,))], (hid,))], (hid,))
            hs.append(h)
        flat = hs[0] if t == 1 else op("concat", hs, (t * hid,))
        self.emit("reshape", [flat], name, (t, hid), "seq", shape=(t, hid))
        last = hs[-1]

        def last_row():
            row = name + ".last"
            if row not in self.ir.shapes:
                self.emit("reshape", [last], row, (1, hid), "seq", shape=(1, hid))
            return row

        self._rnn_outputs(name, t, hid, last_row)
