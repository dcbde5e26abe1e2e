"""ONNX sequences and recurrent layers (LSTM, GRU), for host_tools/onnx_import.py, batch 1.

A sequence is a graph value of shape (T, F): T rows (time steps) of F features, in the order
torch gives them. ONNX sees it with extra axes of size 1 (batch, direction): (1, T, F) batch
first, (T, 1, F) time major, (T, 1, 1, F) an LSTM's Y; the importer keeps that ONNX shape and
where its T and F axes are (`seq`), so Transpose, Squeeze, Unsqueeze and Reshape that keep the
element order cost nothing (the same value), Gather and Slice along T become a slice of rows,
and a flatten gives the (T x F,) vector.

- LSTM becomes the `lstm` op (one layer, forward, gates reordered from ONNX's i, o, f, c to
  i, f, c, o; the two biases added), its state zero at every call (ONNX has no state across
  runs); torch's stacked layers are LSTM nodes one after the other. Y_h is Y's last row.
- GRU has no TFLite builtin (no int8 kernel to match): it is unrolled over its T steps into
  graph ops (slice, linear, add, sub, mul, sigmoid, tanh, concat), which the int8 pipeline
  quantizes like any other ops (their activations calibrated, sigmoid and tanh tables).
Anything else (bidirectional or reverse, peepholes, an initial state that is not zero, other
activations, clip, Y_c read) raises PackError naming the node."""
import numpy as np

from .container import PackError


class SequenceOps:
    """Mixed into onnx_import._Importer: self.seq maps a sequence value to (ONNX shape, T axis,
    F axis)."""

    # --- inputs ---------------------------------------------------------------------------

    def seq_inputs(self):
        """{graph input: T axis in its ONNX shape} for the inputs an LSTM or GRU reads as X,
        directly (time major: (T, 1, F), or layout=1: (1, T, F)) or through a Transpose
        (perm 1, 0, 2: a batch-first (1, T, F))."""
        producer = {o: n for n in self.model.graph.node for o in n.output}
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
        return out

    def seq_input(self, inp, dims, taxis):
        if len(dims) != 3 or any(d is None or d <= 0 for i, d in enumerate(dims) if i != 1 - taxis) or \
                dims[1 - taxis] not in (None, 0, 1):
            raise PackError("ONNX graph: input %r of shape %s read by an LSTM/GRU: the board runs batch 1 "
                            "with static steps and features" % (inp.name, dims))
        shape = [d if i != 1 - taxis else 1 for i, d in enumerate(dims)]
        self.ir.inputs.append((inp.name, (shape[taxis], shape[2]), "hwc"))
        self._seq(inp.name, (shape[taxis], shape[2]), shape, taxis, 2)

    # --- bookkeeping ------------------------------------------------------------------------

    def _seq(self, name, vshape, onnx_shape, taxis, faxis):
        self.ir.shapes[name] = tuple(vshape)
        self.kind[name] = "seq"
        self.seq[name] = (tuple(int(d) for d in onnx_shape), taxis, faxis)

    def _seq_of(self, i=0):
        """(graph value, its sequence info) of input i: the info of the ONNX name (a
        Transpose or Squeeze gives the same value another ONNX shape), else of the value."""
        name = self.node.input[i]
        x = self.x(i)
        info = self.seq.get(name) or self.seq.get(x)
        if info is None:
            raise self.err("%s of a value that is not a sequence (an LSTM's or GRU's) is not supported"
                           % self.node.op_type)
        return x, info

    def _as_features(self, x, y):
        """y: x (a (1, F) or (F,) ONNX value whose rows are one) as a feature vector (F,)."""
        n = int(np.prod(self.ir.shapes[x]))
        if self.ir.shapes[x] == (n,):
            self.alias[y] = x
            return
        self.emit("reshape", [x], y, (n,), "nf", shape=(n,))

    def _reshaped(self, x, info, y, target):
        """y: the sequence x (ONNX view `info`) seen with ONNX shape `target`: the same value if
        its time and feature axes keep their order (the other axes being 1), the (T x F,) vector
        for a flatten to (1, T x F) or (T x F,)."""
        shape, taxis, faxis = info
        t, f = shape[taxis], shape[faxis]
        target = [int(d) for d in target]
        if t == 1 and all(d == 1 for i, d in enumerate(target) if i != len(target) - 1) and target[-1] == f:
            return self._as_features(x, y)  # one step: (1, F) features
        if [d for d in target if d != 1] == [t * f]:  # a flatten
            n = t * f
            return self.emit("reshape", [x], y, (n,), "nf", shape=(n,))
        for ta in range(len(target)):
            for fa in range(ta + 1, len(target)):
                if target[ta] == t and target[fa] == f and \
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

    def seq_Transpose(self, a):
        x, (shape, taxis, faxis) = self._seq_of()
        perm = list(a.get("perm", range(len(shape) - 1, -1, -1)))
        ta, fa = perm.index(taxis), perm.index(faxis)
        if ta > fa and shape[taxis] > 1 and shape[faxis] > 1:
            raise self.err("a transpose of a sequence's steps and features is not supported")
        if ta > fa:
            ta, fa = fa, ta
        self.alias[self.out()] = x
        self.seq[self.out()] = (tuple(shape[p] for p in perm), ta, fa)

    def seq_Squeeze(self, a):
        x, info = self._seq_of()
        shape = info[0]
        axes = self._const_ints(1, "axes", "axes")
        axes = sorted(i % len(shape) for i in axes) if axes is not None else [i for i, d in enumerate(shape) if d == 1]
        self._reshaped(x, info, self.out(), [d for i, d in enumerate(shape) if i not in axes])

    def seq_Unsqueeze(self, a):
        x, info = self._seq_of()
        shape = list(info[0])
        axes = self._const_ints(1, "axes", "axes")
        n = len(shape) + len(axes)
        for i in sorted(v % n for v in axes):
            shape.insert(i, 1)
        self._reshaped(x, info, self.out(), shape)

    def is_seq(self, i=0):
        name = self.node.input[i]
        return name in self.seq or self.alias.get(name, name) in self.seq

    def seq_reshape(self, target):
        x, info = self._seq_of()
        shape = info[0]
        n = int(np.prod(shape))
        target = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target)]
        if -1 in target:
            rest = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = n // rest if rest else 0
        self._reshaped(x, info, self.out(), target)

    def seq_flatten(self):
        x, (shape, taxis, faxis) = self._seq_of()
        n = int(np.prod(shape))
        self._reshaped(x, (shape, taxis, faxis), self.out(), [1, n])

    def op_Gather(self, a):  # (not a sequence: seq_Gather takes those)
        raise self.err("only a Gather of one step of a sequence (an LSTM's or GRU's) is supported")

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
        self.emit("slice", [x], row, (1, f), "seq", begin=(k, 0), end=(k + 1, f))
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
        self.emit("slice", [x], self.out(), vshape, "seq", begin=tuple(b), end=tuple(e))
        self.seq[self.out()] = (tuple(vshape[0] if i == taxis else (vshape[1] if i == faxis else d)
                                      for i, d in enumerate(shape)), taxis, faxis)

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
        if not self.is_seq(0):
            raise self.err("input X is not a sequence the importer knows (a model input, or an LSTM's output)")
        x, (shape, taxis, faxis) = self._seq_of(0)
        want = 1 if a.get("layout", 0) else 0
        if taxis != want or len(shape) != 3:
            raise self.err("X seen as %s with its steps on axis %d: expected axis %d" % (shape, taxis, want))
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
        """Unrolled: per step z = sigmoid(Wz x + Rz h + bz), r = sigmoid(Wr x + Rr h + br),
        n = tanh(Wn x + Wbn + r (Rn h + Rbn)) (linear_before_reset=1; 0: Rn (r h) + Rbn),
        h = n + z (h - n); the first step has h = 0."""
        x, w, r, wb, rb, hid = self._rnn_common(a, 3, "GRU")
        lbr = a.get("linear_before_reset", 0)
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
            if h is None and not lbr:  # h = 0: n's recurrent term is Rbn alone
                bx = bias_x + np.concatenate([np.zeros(h2), rb[h2:]])
            else:
                bx = bias_x
            gx = op("linear", [xt], (3 * hid,), {"w": (v("w"), w.astype(np.float32)),
                                                  "b": (v("b"), bx.astype(np.float32))}, out=3 * hid)
            if h is None:
                zr = op("sigmoid", [part(gx, 0, h2)], (h2,))
                z, rg = part(zr, 0, hid), part(zr, hid, h2)
                if lbr:  # r x Rbn: a per-feature scale
                    rn = op("depthwise", [rg], (hid,), {"w": (v("w"), rb[h2:].astype(np.float32).reshape(1, 1, 1, hid))},
                            k=(1, 1))
                    n = op("tanh", [op("add", [part(gx, h2, 3 * hid), rn], (hid,))], (hid,))
                else:
                    n = op("tanh", [part(gx, h2, 3 * hid)], (hid,))
                h = op("sub", [n, op("mul", [z, n], (hid,))], (hid,))  # (1 - z) n
            else:
                if lbr:
                    gh = op("linear", [h], (3 * hid,), {"w": (v("w"), r.astype(np.float32)),
                                                         "b": (v("b"), np.concatenate([np.zeros(h2), rb[h2:]])
                                                               .astype(np.float32))}, out=3 * hid)
                    zr = op("sigmoid", [op("add", [part(gx, 0, h2), part(gh, 0, h2)], (h2,))], (h2,))
                    z, rg = part(zr, 0, hid), part(zr, hid, h2)
                    n = op("tanh", [op("add", [part(gx, h2, 3 * hid), op("mul", [rg, part(gh, h2, 3 * hid)], (hid,))],
                                       (hid,))], (hid,))
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
