"""ONNX -> graph (host_tools.ir), for both torch exporters and other ONNX producers.

What it does to the graph, so the board runs fewer, simpler ops:
- constant subgraphs (torch's TorchScript exporter computes Pad's pads with 8 ops) are
  evaluated here with onnx's reference evaluator: shape constants are never packed;
- BatchNormalization is folded into the conv/linear before it (a standalone one, and a Mul/Add
  by a per-channel constant, becomes a per-channel affine: a 1x1 depthwise conv);
- Relu and Clip(0, 6) are fused into the op before them; a zero Pad into the next conv;
- NCHW becomes NHWC: conv weights are stored OHWI ([1, kh, kw, C] for depthwise), Gemm/MatMul
  weights [out, in]; a Flatten of C, H, W keeps torch's element order (reshape order=chw);
  the input keeps its layout (layout=chw: the board takes C, H, W data as torch does);
  1-D (N, C, L) values are H=1 images (1, L, C); Reshape, Squeeze, Unsqueeze, Transpose, Slice
  and Concat map torch's axes to the stored ones (a copy only where the element order changes);
- reductions over any axes become mean / maxpool (after a transpose when the reduced axes are
  not the leading ones); AveragePool with count_include_pad=1 a zero pad then the pooling;
- HardSwish, HardSigmoid, Gelu, PRelu, Min, Max, Div of two activations, Resize (nearest and
  linear: ONNX's coordinate modes computed into the op's table) and LayerNormalization become
  the graph's ops of those names; InstanceNormalization, GroupNormalization and torch's
  GroupNorm (Reshape, InstanceNormalization, Reshape, then its Mul and Add folded in) a groupnorm.
Every node's op is checked before any is translated; anything the board cannot run raises
PackError naming the node and its op."""
import math
import os

import numpy as np

from .container import PackError
from .ir import Graph, Node
from .onnx_seq import _BINARY, _UNARY, SequenceOps

_FOLDABLE = {"Constant", "ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose", "Cast",
             "Shape", "Gather", "Unsqueeze", "Squeeze", "Range", "Mul", "Add", "Sub", "Div",
             "Identity", "Flatten", "Expand", "Equal", "Where", "ReduceProd", "Neg", "Sqrt"}
_ACT_FUSE = ("conv2d", "depthwise", "linear", "add", "sub", "tconv")


def _first_line(e):
    return (str(e).strip() or type(e).__name__).splitlines()[0]


def load(path):
    """The ModelProto with its initializers' data; external data is read only up to each
    tensor's declared size (a missing or wrong `length` is refused, never read blindly)."""
    import onnx
    from onnx import numpy_helper

    try:
        m = onnx.load(str(path), load_external_data=False)
    except Exception as e:
        raise PackError("%s: not a valid ONNX model: %s" % (path, _first_line(e)))
    base = os.path.dirname(os.path.abspath(str(path)))
    for t in m.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        try:
            want = int(np.prod(t.dims, dtype=np.int64)) * np.dtype(
                onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
            if "length" not in info or int(info["length"]) != want:
                raise ValueError("external data of %d bytes needs length=%d" % (want, want))
            arr = numpy_helper.to_array(t, base_dir=base)
        except Exception as e:
            raise PackError("%s: tensor %r: %s" % (path, t.name, _first_line(e)))
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return m


def from_onnx(model):
    """ir.Graph (float32) of an ONNX model (a path or a ModelProto)."""
    import onnx

    where = model if isinstance(model, (str, os.PathLike)) else "ONNX model"
    if isinstance(model, (str, os.PathLike)):
        model = load(model)
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:
        pass  # shapes of inputs and initializers are enough
    try:
        return _Importer(model).run()
    except PackError:
        raise
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # a damaged graph: protobuf and numpy errors
        raise PackError("%s: cannot read the graph: %s" % (where, _first_line(e)))


class _Importer(SequenceOps):
    def __init__(self, model):
        from onnx import numpy_helper

        self.model = model
        g = model.graph
        self.consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.dims = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                self.dims[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        self.ir = Graph()
        self.alias = {}  # ONNX value -> the value that holds it (Identity, Dropout)
        self.kind = {}  # value -> 'nchw' (4-D), 'ncl' (3-D), 'nf' (2-D), 'seq' (an LSTM's, GRU's)
        self.seq = {}  # ONNX value -> (ONNX shape, rows axis, columns axis) of a sequence (host_tools/onnx_seq.py)
        self.kinded = {}  # (sequence value, view) -> the value seen as an image or vector (_as_kind)
        self.frames = {}  # ONNX value -> its ONNX shape: an image in that order, its batch moved (image_frames)
        self.native = True  # False: the node translating reads its sequence inputs as images or vectors
        self.pending_pad = {}  # Pad output -> (input, pads) fused into the next Conv
        self.grouped = {}  # a GroupNorm's Reshape output -> (its input, G): read by InstanceNormalization
        self.regroup = {}  # that InstanceNormalization's output -> (the groupnorm's output, (G, L))
        self.uses = {}
        for n in g.node:
            for i in n.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in g.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1

    def run(self):
        g = self.model.graph
        seqs = self.seq_inputs()
        for inp in g.input:
            if inp.name in self.consts:
                continue
            if inp.name in seqs:
                self.seq_input(inp, self.dims.get(inp.name) or [], seqs[inp.name])
                continue
            self._input(inp)
        if not self.ir.inputs:
            raise PackError("ONNX graph: no input (every graph input is an initializer)")
        self._check_ops()
        for node in g.node:
            self._at(node)
            if self._fold(node):
                continue
            try:
                # an op on a sequence (host_tools/onnx_seq.py) or the op's translation (its
                # sequence inputs, if any, seen as images or vectors: x())
                seq_in = any(self.is_seq(i) for i in range(len(node.input)))
                f = None
                if seq_in:
                    f = self.seq_unary if node.op_type in _UNARY else self.seq_binary if node.op_type in _BINARY \
                        else getattr(self, "seq_" + node.op_type, None)
                self.native = f is not None or node.op_type in ("LSTM", "GRU", "Shape")
                (f or getattr(self, "op_" + node.op_type))(self._attrs(node))
            except (PackError, MemoryError, KeyboardInterrupt):
                raise
            except Exception as e:  # a form the translation did not foresee: still this node's refusal
                raise self.err("cannot translate it: %s" % _first_line(e))
        for o in g.output:
            name = self.alias.get(o.name, o.name)
            if name in self.consts:
                raise PackError("ONNX graph: output %r is a constant" % o.name)
            info = self.seq.get(o.name) or self.seq.get(name)
            if info is not None and not self._ordered(info):  # in the ONNX order, as torch's caller reads it
                name = self._seq_output(name, info, o.name)
            if name in self.pending_pad:
                self._emit_pad(name)
            if name in self.regroup:
                self._emit_regroup(name)
                name = self.alias.get(name, name)
            self.ir.outputs.append(name)
            if self.kind.get(name) in ("nchw", "ncl") and len(self.ir.shapes[name]) == 3:
                self.ir.out_layouts[name] = "chw"  # H,W,C here; torch's caller reads C,H,W (C,L)
        return self.ir

    def err(self, msg):
        return PackError("%s: %s" % (self.what, msg))

    # --- helpers ------------------------------------------------------------------------

    def _attrs(self, node):
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def _fold(self, node):
        """Evaluate a node whose inputs are all constants (or the Shape of a value whose shape
        is static); True if it was."""
        if node.op_type == "Shape" and node.input[0] not in self.consts:
            dims = self.dims.get(self.alias.get(node.input[0], node.input[0])) or self.dims.get(node.input[0])
            info = self.seq.get(node.input[0])
            if info is not None:
                dims = list(info[0])
            if not dims or any(d is None or d <= 0 for d in dims):
                return False
            a = self._attrs(node)
            self.consts[node.output[0]] = np.array(dims[a.get("start", 0): a.get("end", len(dims))], np.int64)
            return True
        if node.op_type not in _FOLDABLE or not all(i == "" or i in self.consts for i in node.input):
            return False
        if node.op_type in ("Mul", "Add", "Sub", "Div") and not node.input:
            return False
        from onnx.reference import ReferenceEvaluator

        try:
            feeds = {i: self.consts[i] for i in node.input if i}
            outs = ReferenceEvaluator(node).run(None, feeds)
        except Exception as e:
            raise self.err("cannot evaluate this constant expression: %s" % str(e).splitlines()[0])
        for name, val in zip(node.output, outs):
            self.consts[name] = np.asarray(val)
        return True

    def _input(self, inp):
        dims = self.dims.get(inp.name)
        if not dims or any(d is None or d <= 0 for d in dims[1:]):
            raise PackError("ONNX graph: input %r needs a static shape after the batch dimension (got %s)"
                            % (inp.name, dims))
        if dims[0] not in (None, 0, 1):
            raise PackError("ONNX graph: input %r has batch %d; the board runs batch 1" % (inp.name, dims[0]))
        d = dims[1:]
        if len(d) == 3:
            shape, layout, kind = (d[1], d[2], d[0]), "chw", "nchw"
        elif len(d) == 2:
            shape, layout, kind = (1, d[1], d[0]), "chw", "ncl"
        elif len(d) == 1:
            shape, layout, kind = (d[0],), "hwc", "nf"
        else:
            raise PackError("ONNX graph: input %r of rank %d: 2, 3 or 4 dimensions are supported"
                            % (inp.name, len(dims)))
        self.ir.inputs.append((inp.name, shape, layout))
        self.ir.shapes[inp.name] = shape
        self.kind[inp.name] = kind

    def x(self, i=0):
        """Input i of the current node as a graph value name (never a constant)."""
        onnx_name = name = self.node.input[i]
        name = self.alias.get(name, name)
        if name in self.consts:
            raise self.err("input %r is a constant where an activation is expected" % name)
        info = self.seq.get(onnx_name) or self.seq.get(name)
        if info is not None and not self.native:
            return self._as_kind(name, info)
        if onnx_name in self.frames:
            raise self.err("an image whose batch dimension a Transpose moved (to %s) read by %s: only a Reshape "
                           "of it to a sequence (T, 1, F) or (1, T, F) is supported"
                           % (list(self.frames[onnx_name]), self.node.op_type))
        if name in self.pending_pad and not (self.node.op_type == "Conv" and i == 0):
            self._emit_pad(name)
        if name in self.regroup:
            self._emit_regroup(name)
            name = self.alias.get(name, name)
        if name not in self.ir.shapes:
            raise self.err("input %r comes from an op that was not translated" % name)
        return name

    def const(self, i, what):
        if i >= len(self.node.input) or not self.node.input[i]:
            return None
        name = self.node.input[i]
        if name not in self.consts:
            raise self.err("%s must be a constant (an initializer)" % what)
        return self.consts[name]

    def out(self):
        return self.node.output[0]

    def emit(self, op, x, y, vshape, kind, tensors=None, **attrs):
        n = Node(op, x, y, self.what, **attrs)
        for key, (name, arr) in (tensors or {}).items():
            n.t[key] = self.ir.add_tensor(name, np.ascontiguousarray(arr))
        self.ir.nodes.append(n)
        self.ir.shapes[y] = tuple(vshape)
        self.kind[y] = kind
        return n

    def fusable(self, value, ops=_ACT_FUSE):
        """The node producing `value` when the current node may be folded into it: it is one
        of `ops`, has no activation yet, and the current node is its only reader."""
        p = self.ir.producer(value)
        if p is None or p.op not in ops or p.attrs.get("act") or self.uses.get(value, 0) != 1:
            return None
        if value in self.ir.outputs or value in [i[0] for i in self.ir.inputs]:
            return None
        return p

    def _pads(self, a, shape_hw, kernel, strides, dil):
        pads = list(a.get("pads", [0] * (2 * len(kernel))))
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = [0] * (2 * len(kernel))
            for i, (n, k, s, d) in enumerate(zip(shape_hw, kernel, strides, dil)):
                out = -(-n // s)
                total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
                small, big = total // 2, total - total // 2
                pads[i], pads[i + len(kernel)] = (small, big) if auto == "SAME_UPPER" else (big, small)
        elif auto == "VALID":
            pads = [0] * (2 * len(kernel))
        elif auto != "NOTSET":
            raise self.err("auto_pad %s not supported" % auto)
        return pads

    # --- ops ------------------------------------------------------------------------------

    def op_Identity(self, a):
        self.alias[self.out()] = self.x()

    op_Dropout = op_Identity

    def op_Conv(self, a):
        name = self.x()
        pads_in = (0, 0, 0, 0)
        if name in self.pending_pad:  # a zero Pad fused into this conv
            name, pads_in = self.pending_pad.pop(name)
        w = self.const(1, "the weight")
        b = self.const(2, "the bias")
        if w is None or w.ndim not in (3, 4):
            raise self.err("needs a 3-D or 4-D weight initializer")
        kind = self.kind[name]
        h, wd, c = self.ir.shapes[name]
        one_d = w.ndim == 3
        if one_d:
            w = w[:, :, None, :]
        o, cpg, kh, kw = w.shape
        g = a.get("group", 1)
        strides = list(a.get("strides", [1] * (1 if one_d else 2)))
        dil = list(a.get("dilations", [1] * (1 if one_d else 2)))
        kern = [kw] if one_d else [kh, kw]
        pads = self._pads(a, [wd] if one_d else [h, wd], kern, strides, dil)
        if one_d:
            strides, dil = [1] + strides, [1] + dil
            pads = [0, pads[0], 0, pads[1]]
        pads = [pads[0] + pads_in[0], pads[1] + pads_in[1], pads[2] + pads_in[2], pads[3] + pads_in[3]]
        if cpg * g != c:
            raise self.err("weight has %d input channels per group x %d groups, the input %d" % (cpg, g, c))
        oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
        ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
        bias = b.astype(np.float32) if b is not None else None
        if g == c and g > 1 and cpg == 1 and o % c == 0:
            wt = w.reshape(o, kh, kw).transpose(1, 2, 0)[None]  # -> [1, kh, kw, out]
            tensors = {"w": (self.node.input[1], wt.astype(np.float32))}
            if bias is not None:
                tensors["b"] = (self.node.input[2], bias)
            self.emit("depthwise", [name], self.out(), (oh, ow, o), kind, tensors, k=(kh, kw),
                      mult=o // c if o != c else None, stride=strides, pad=pads, dil=dil if dil != [1, 1] else None)
        else:
            wt = w.transpose(0, 2, 3, 1)  # -> OHWI
            tensors = {"w": (self.node.input[1], wt.astype(np.float32))}
            if bias is not None:
                tensors["b"] = (self.node.input[2], bias)
            self.emit("conv2d", [name], self.out(), (oh, ow, o), kind, tensors, out=o, k=(kh, kw),
                      groups=g if g != 1 else None, stride=strides, pad=pads, dil=dil if dil != [1, 1] else None)

    def op_Pad(self, a):
        name = self.x()
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        pads = a.get("pads")
        if pads is None:
            pads = self.const(1, "pads")
        value = self.const(2, "the constant value")
        if mode != "constant" or (value is not None and float(np.asarray(value).reshape(-1)[0]) != 0.0):
            raise self.err("only zero (constant) padding is supported")
        pads = [int(p) for p in np.asarray(pads).reshape(-1)]
        if len(self.node.input) > 3 and self.node.input[3]:
            raise self.err("padding selected axes (axes input) is not supported")
        kind = self.kind[name]
        rank = len(pads) // 2
        begin, end = pads[:rank], pads[rank:]
        if kind == "nchw" and rank == 4 and begin[:2] == [0, 0] and end[:2] == [0, 0]:
            hw = (begin[2], begin[3], end[2], end[3])
        elif kind == "ncl" and rank == 3 and begin[:2] == [0, 0] and end[:2] == [0, 0]:
            hw = (0, begin[2], 0, end[2])
        else:
            raise self.err("only padding of the spatial dimensions is supported")
        if min(hw) < 0:
            raise self.err("negative pads (cropping) are not supported")
        readers = [n for n in self.model.graph.node if self.out() in n.input]
        h, w, c = self.ir.shapes[name]
        self.ir.shapes[self.out()] = (h + hw[0] + hw[2], w + hw[1] + hw[3], c)
        self.kind[self.out()] = kind
        self.pending_pad[self.out()] = (name, hw)
        if not (len(readers) == 1 and readers[0].op_type == "Conv" and self.uses.get(self.out()) == 1):
            self._emit_pad(self.out())

    def _emit_pad(self, out):
        name, hw = self.pending_pad.pop(out)
        shape = self.ir.shapes.pop(out)
        self.emit("pad", [name], out, shape, self.kind[name], pad=hw)

    def _affine(self, x, scale, shift, y):
        """y = x * scale + shift per channel: folded into the producing conv/linear/groupnorm
        when it can be, else a 1x1 depthwise conv (the per-channel affine op)."""
        p = self.fusable(x, ("conv2d", "depthwise", "linear", "tconv", "groupnorm"))
        c = self.ir.shapes[x][-1]
        scale = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (c,))
        shift = np.broadcast_to(np.asarray(shift, np.float64).reshape(-1), (c,))
        if p is not None:
            wname = p.t["w"]
            w = self.ir.tensors[wname].astype(np.float64)
            axis = 3 if p.op == "depthwise" else 0
            shp = [1] * w.ndim
            shp[axis] = c
            self.ir.tensors[wname] = (w * scale.reshape(shp)).astype(np.float32)
            if "b" in p.t:
                b = self.ir.tensors[p.t["b"]].astype(np.float64)
            else:
                b = np.zeros(c)
                p.t["b"] = self.ir.add_tensor(y + ".bias", b)
            self.ir.tensors[p.t["b"]] = (b * scale + shift).astype(np.float32)
            self.ir.rename_value(x, y)
            self.kind[y] = self.kind.pop(x)
            return
        tensors = {"w": (y + ".scale", scale.astype(np.float32).reshape(1, 1, 1, c)),
                   "b": (y + ".shift", shift.astype(np.float32))}
        self.emit("depthwise", [x], y, self.ir.shapes[x], self.kind[x], tensors, k=(1, 1))

    def op_BatchNormalization(self, a):
        x = self.x()
        gamma, beta, mean, var = (self.const(i, "BatchNormalization parameters") for i in (1, 2, 3, 4))
        if a.get("training_mode", 0):
            raise self.err("training-mode BatchNormalization (export the model in eval mode)")
        eps = a.get("epsilon", 1e-5)
        scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
        self._affine(x, scale, beta.astype(np.float64) - mean.astype(np.float64) * scale, self.out())

    def _activation(self, act, op=None, **attrs):
        x = self.x()
        p = self.fusable(x) if act else None
        if p is not None:
            p.attrs["act"] = act
            self.ir.rename_value(x, self.out())
            self.kind[self.out()] = self.kind.pop(x)
            return
        self.emit(op or act, [x], self.out(), self.ir.shapes[x], self.kind[x], **attrs)

    def op_Relu(self, a):
        self._activation("relu")

    def op_Clip(self, a):
        lo = a.get("min")
        hi = a.get("max")
        if len(self.node.input) > 1 and self.node.input[1]:
            lo = float(np.asarray(self.const(1, "min")).reshape(-1)[0])
        if len(self.node.input) > 2 and self.node.input[2]:
            hi = float(np.asarray(self.const(2, "max")).reshape(-1)[0])
        if lo == 0.0 and hi == 6.0:
            return self._activation("relu6")
        if lo == 0.0 and (hi is None or math.isinf(hi)):
            return self._activation("relu")
        lo = -3.4e38 if lo is None else lo
        hi = 3.4e38 if hi is None else hi
        self._activation(None, "clip", lo=float(lo), hi=float(hi))

    def op_LeakyRelu(self, a):
        self._activation(None, "leakyrelu", alpha=float(a.get("alpha", 0.01)))

    def op_Sigmoid(self, a):
        self._activation(None, "sigmoid")

    def op_Tanh(self, a):
        self._activation(None, "tanh")

    def op_Gemm(self, a):
        x = self.x()
        if a.get("transA", 0):
            raise self.err("transA=1 is not supported")
        w = self.const(1, "B (the weight)")
        c = self.const(2, "C (the bias)")
        if w is None or w.ndim != 2:
            raise self.err("needs a 2-D weight initializer")
        w = w.astype(np.float64) * a.get("alpha", 1.0)
        if not a.get("transB", 0):
            w = w.T
        self._linear(x, w, None if c is None else c.astype(np.float64) * a.get("beta", 1.0), self.node.input[1])

    def op_MatMul(self, a):
        x = self.x()
        if self.kind[x] == "ncl":  # torch's Linear on a 3-D value: on each row (host_tools/onnx_seq.py)
            self.native = True
            return self.seq_MatMul(a)
        w = self.const(1, "the second input (the weight)")
        if w is None or w.ndim != 2:
            raise self.err("needs a 2-D weight initializer")
        self._linear(x, w.astype(np.float64).T, None, self.node.input[1])

    def _linear(self, x, w, bias, wname):
        n_out, n_in = w.shape
        if self.ir.shapes[x] != (n_in,):
            if int(np.prod(self.ir.shapes[x])) == n_in and self.kind[x] in ("nf",):
                pass
            else:
                raise self.err("input of shape %s, the weight takes %d features (flatten first)"
                               % ((1,) + self._torch_shape(x), n_in))
        tensors = {"w": (wname, w.astype(np.float32))}
        if bias is not None:
            bias = np.broadcast_to(bias.reshape(-1), (n_out,))
            tensors["b"] = (self.node.input[2], bias.astype(np.float32))
        self.emit("linear", [x], self.out(), (n_out,), "nf", tensors, out=n_out)

    def _per_channel(self, arr, x):
        """A constant operand as one value per channel of x (None if it is not one)."""
        arr = np.asarray(arr, np.float64)
        c = self.ir.shapes[x][-1]
        kind = self.kind[x]
        if arr.size == 1:
            return np.full(c, float(arr.reshape(-1)[0]))
        s = [d for d in arr.shape]
        while s and s[0] == 1 and len(s) > 1:
            s = s[1:]
        if kind == "nchw" and len(s) == 3 and s[0] == c and s[1] == s[2] == 1:
            return arr.reshape(-1)
        if kind == "nf" and s == [c] or kind == "ncl" and s == [c, 1]:
            return arr.reshape(-1)
        return None

    def _binary(self, op):
        node = self.node
        names = [self.alias.get(i, i) for i in node.input]
        consts = [n in self.consts for n in names]
        if consts[0] and consts[1]:
            raise self.err("constant expression not folded")
        if consts[0] or consts[1]:
            xi = 1 if consts[0] else 0
            x = self.x(xi)
            c = self._per_channel(self.consts[names[1 - xi]], x)
            if c is None:
                raise self.err("a constant operand must be a scalar or one value per channel")
            if op == "Sub":
                c = -c if xi == 0 else c  # x - c, or c - x = (-1) x + c
                if xi == 1:
                    return self._affine(x, -np.ones_like(c), c, self.out())
                op = "Add"
            if op == "Div":
                if xi == 1:
                    raise self.err("dividing by an activation is not supported")
                c, op = 1.0 / c, "Mul"
            if op == "Add":
                return self._affine(x, np.ones_like(c), c, self.out())
            return self._affine(x, c, np.zeros_like(c), self.out())
        if op not in ("Add", "Mul", "Sub"):
            raise self.err("%s of two activations is not supported" % op)
        a, b = self.x(0), self.x(1)
        if self._torch_shape(a) != self._torch_shape(b):
            a, b = self._broadcast(op, a, b)
        big = a if _size(self.ir.shapes[a]) >= _size(self.ir.shapes[b]) else b
        self.emit(op.lower(), [a, b], self.out(), self.ir.shapes[big], self.kind[big])

    def op_Add(self, a):
        self._binary("Add")

    def op_Mul(self, a):
        self._binary("Mul")

    def op_Sub(self, a):
        self._binary("Sub")

    def op_Div(self, a):
        if not any(self.alias.get(i, i) in self.consts for i in self.node.input):
            return self._divide()  # two activations: TFLite's DIV
        self._binary("Div")

    def _pool(self, op, a, avg):
        x = self.x()
        if self.kind[x] not in ("nchw", "ncl"):
            raise self.err("needs an image (N, C, H, W) input")
        k = list(a["kernel_shape"])
        one_d = self.kind[x] == "ncl"
        h, w, c = self.ir.shapes[x]
        strides = list(a.get("strides", k))
        dil = list(a.get("dilations", [1] * len(k)))
        if any(d != 1 for d in dil):
            raise self.err("dilated pooling is not supported")
        pads = self._pads(a, [w] if one_d else [h, w], k, strides, dil)
        if one_d:
            k, strides, pads = [1] + k, [1] + strides, [0, pads[0], 0, pads[1]]
        # ceil_mode: the windows that start inside the input or its padding (torch's and ONNX's
        # rule) get the last rows/columns; they reach into extra padding, which pooling skips
        extra = [0, 0]
        if a.get("ceil_mode", 0):
            for i, n in enumerate((h, w)):
                span = n + pads[i] + pads[i + 2] - k[i]
                out = -(-span // strides[i]) + 1
                if (out - 1) * strides[i] >= n + pads[i]:
                    out -= 1
                extra[i] = max(0, (out - 1) * strides[i] + k[i] - (n + pads[i] + pads[i + 2]))
        if avg and a.get("count_include_pad", 0) and any(pads):
            # the padded zeros count in the divisor: an explicit zero pad, then pooling over it
            # (TFLite's form: PAD then AVERAGE_POOL_2D; int8 pads with the zero point)
            padded = self.out() + ".pad"
            self.emit("pad", [x], padded, (h + pads[0] + pads[2], w + pads[1] + pads[3], c), self.kind[x],
                      pad=tuple(pads))
            x, h, w, pads = padded, h + pads[0] + pads[2], w + pads[1] + pads[3], [0, 0, 0, 0]
        pads = [pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]]
        oh = (h + pads[0] + pads[2] - k[0]) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - k[1]) // strides[1] + 1
        self.emit(op, [x], self.out(), (oh, ow, c), self.kind[x], k=k, stride=strides,
                  pad=pads if any(pads) else None)

    def op_MaxPool(self, a):
        if len(self.node.output) > 1 and self.node.output[1]:
            raise self.err("the indices output is not supported")
        self._pool("maxpool", a, False)

    def op_AveragePool(self, a):
        self._pool("avgpool", a, True)

    def op_GlobalAveragePool(self, a):
        self._reduce("mean", "spatial", 1)

    def op_GlobalMaxPool(self, a):
        self._reduce("max", "spatial", 1)

    def op_ReduceMean(self, a):
        self._reduce("mean", self._axes(a), a.get("keepdims", 1))

    def op_ReduceMax(self, a):
        self._reduce("max", self._axes(a), a.get("keepdims", 1))

    def _flatten(self, x):
        self._to_shape(x, (int(np.prod(self.ir.shapes[x])),), self.out())

    def op_Flatten(self, a):
        x = self.x()
        dims = (1,) + self._torch_shape(x)
        axis = a.get("axis", 1) % len(dims)
        if int(np.prod(dims[:axis])) != 1:
            raise self.err("flattening into %d rows: only a flatten after the batch dimension is supported"
                           % int(np.prod(dims[:axis])))
        self._flatten(x)

    def op_Reshape(self, a):
        spec = [int(v) for v in np.asarray(self.const(1, "the shape")).reshape(-1)]
        if self.node.input[0] in self.frames:
            return self.frames_reshape(spec)
        name = self.alias.get(self.node.input[0], self.node.input[0])
        if name in self.regroup:  # a GroupNorm's (G, L) value back to the groupnorm's own shape
            gn, dims = self.regroup[name]
            back = self._reshape_target(spec, (1,) + dims, a)[1:] == list(self._torch_shape(gn))
            if back and self.uses.get(name) == 1:
                del self.regroup[name]
                self.alias[self.out()] = gn
                self.uses[gn] = self.uses.get(self.out(), 0)
                return
        x = self.x()
        dims = (1,) + self._torch_shape(x)
        target = self._reshape_target(spec, dims, a)
        if self._group_of(x, target):
            return
        if len(target) == 1:  # the batch folded in: one row of every element
            return self._flatten(x)
        if target[0] != 1:  # (T, ...): the value seen as a sequence (host_tools/onnx_seq.py)
            self.native = True
            return self.seq_reshape(spec)
        self._to_shape(x, tuple(target[1:]), self.out())

    def _reshape_target(self, spec, dims, a):
        """Reshape's shape input `spec` resolved against the input's dims (batch included):
        0 copies the input's dimension (unless allowzero), -1 takes the rest."""
        n = int(np.prod(dims))
        target = list(spec)
        if not a.get("allowzero", 0):
            target = [dims[i] if v == 0 and i < len(dims) else v for i, v in enumerate(target)]
        if target.count(-1) == 1:
            rest = int(np.prod([v for v in target if v != -1]))
            target[target.index(-1)] = n // rest if rest and n % rest == 0 else 0
        if int(np.prod(target)) != n or min(target) < 1:
            raise self.err("cannot reshape %s to %s" % (list(dims), target))
        return target

    def _group_of(self, x, target):
        """torch's GroupNorm(G) as both exporters write it: Reshape (1, C, ...) -> (1, G, L),
        InstanceNormalization, Reshape back (then a per-channel Mul and Add). At this first
        Reshape, read only by an InstanceNormalization: nothing is emitted; the
        InstanceNormalization becomes a groupnorm of x (True)."""
        if self.kind[x] not in ("nchw", "ncl") or len(target) != 3:
            return False
        c, g = self.ir.shapes[x][-1], target[1]
        readers = [n for n in self.model.graph.node if self.out() in n.input]
        if c % g or len(readers) != 1 or readers[0].op_type != "InstanceNormalization" or \
                readers[0].input[0] != self.out() or self.uses.get(self.out()) != 1:
            return False
        self.grouped[self.out()] = (x, g)
        return True

    def op_Softmax(self, a):
        x = self.x()
        rank = len(self._torch_shape(x)) + 1
        axis = a.get("axis", -1) % rank
        kind = self.kind[x]
        if axis != 1:  # the channels (stored last), or a vector's elements
            raise self.err("softmax over axis %d of a %s value (only over axis 1, the channels)"
                           % (axis, (1,) + self._torch_shape(x)))
        self.emit("softmax", [x], self.out(), self.ir.shapes[x], kind)

    def op_Concat(self, a):
        names = [self.x(i) for i in range(len(self.node.input))]
        kinds = {self.kind[n] for n in names}
        shapes = [self.ir.shapes[n] for n in names]
        if len(kinds) != 1 or len({len(s) for s in shapes}) != 1:
            raise self.err("inputs of different ranks %s" % [self._torch_shape(n) for n in names])
        kind = kinds.pop()
        rank = len(self._torch_shape(names[0])) + 1
        axis = a.get("axis", 1) % rank
        if axis == 0:
            raise self.err("concatenation along the batch dimension (the board runs batch 1)")
        at = _STORAGE_AXIS[rank][axis]  # the axis of the stored (H, W, C) value
        for s in shapes:
            if [d for i, d in enumerate(s) if i != at] != [d for i, d in enumerate(shapes[0]) if i != at]:
                raise self.err("inputs %s differ outside the axis" % [self._torch_shape(n) for n in names])
        out = list(shapes[0])
        out[at] = sum(s[at] for s in shapes)
        self.emit("concat", names, self.out(), tuple(out), kind, axis=at if at != len(out) - 1 else None)

    # --- whole-graph checks, layouts, reductions -------------------------------------------

    def _at(self, node):
        self.node = node
        self.what = "ONNX node %r (%s)" % (node.name or node.output[0], node.op_type)

    def _check_ops(self):
        """Every node an op the importer translates (or a constant expression it evaluates),
        before any is translated: a refusal names the op that cannot run, not one in front of
        it whose output it would have read."""
        known = set(self.consts)
        for node in self.model.graph.node:
            ins = [i for i in node.input if i]
            if node.op_type == "Constant" or node.op_type == "Shape" or (
                    node.op_type in _FOLDABLE and ins and all(i in known for i in ins)):
                known.update(node.output)  # (a Shape of an activation: its static shape)
            elif not hasattr(self, "op_" + node.op_type):
                self._at(node)
                raise self.err("op not supported by the graph runner")

    def _torch_shape(self, x):
        """Value x's shape as torch sees it, without the batch: (C, H, W), (C, L) or (N,)."""
        s = self.ir.shapes[x]
        kind = self.kind[x]
        if kind == "nchw":
            return (s[2], s[0], s[1])
        if kind == "ncl":
            return (s[2], s[1])
        return tuple(s)

    def op_Shape(self, a):
        dims = np.array((1,) + self._torch_shape(self.x()), np.int64)
        start, end = a.get("start", 0), a.get("end")
        self.consts[self.out()] = dims[start:end]

    def _axes(self, a):
        """The axes of a reduction (attribute, or constant input 1: opset 18); None for all."""
        axes = a.get("axes")
        if axes is None and len(self.node.input) > 1 and self.node.input[1]:
            axes = self.const(1, "axes")
        if axes is not None and np.asarray(axes).size == 0:
            axes = None
        if axes is None and a.get("noop_with_empty_axes", 0):
            raise self.err("a reduction over no axes (noop_with_empty_axes) is not supported")
        return axes

    def _to_shape(self, x, target, y):
        """Make value y: x with torch shape `target` (without the batch), torch's element
        order kept. Values are stored channels last, so a reshape moves no byte when both
        shapes put the channels alike (same C, or a value with one channel or one pixel);
        otherwise the elements are read out in torch's order (reshape order=chw), and put
        back channels last with a transpose."""
        src = self._torch_shape(x)
        if int(np.prod(src)) != int(np.prod(target)):
            raise self.err("cannot reshape %s to %s" % (list(src), list(target)))
        if not 1 <= len(target) <= 3:
            raise self.err("a value of %d dimensions after the batch (the board runs at most 3)" % len(target))
        kind = _KIND[len(target)]
        store = _stored(target)

        def plain(t):  # torch's flat order is the stored order
            return len(t) == 1 or t[0] == 1 or int(np.prod(t[1:])) == 1

        if not (plain(src) and plain(target) or len(src) > 1 and len(target) > 1 and src[0] == target[0]):
            n = int(np.prod(src))
            if not plain(src):
                self.emit("reshape", [x], y + ".flat", (n,), "nf", shape=(n,), order="chw")
                x = y + ".flat"
            if not plain(target):  # C, S in torch's order -> S, C
                c, hw = target[0], n // target[0]
                self.emit("reshape", [x], y + ".cs", (1, c, hw), "ncl", shape=(1, c, hw))
                self.emit("transpose", [y + ".cs"], y + ".sc", (1, hw, c), "ncl", perm=(0, 2, 1))
                x = y + ".sc"
        if tuple(self.ir.shapes[x]) == store and self.kind[x] == kind and x not in [i[0] for i in self.ir.inputs]:
            self.alias[y] = x
            return
        self.emit("reshape", [x], y, store, kind, shape=store)

    def op_Squeeze(self, a):
        x = self.x()
        dims = (1,) + self._torch_shape(x)
        axes = a.get("axes")
        if axes is None and len(self.node.input) > 1 and self.node.input[1]:
            axes = self.const(1, "axes")
        if axes is None:
            axes = [i for i in range(1, len(dims)) if dims[i] == 1]
        axes = {int(i) % len(dims) for i in np.asarray(axes).reshape(-1)}
        if 0 in axes:  # the value seen as a sequence (host_tools/onnx_seq.py)
            self.native = True
            return self.seq_Squeeze(a)
        if any(dims[i] != 1 for i in axes):
            raise self.err("squeezing an axis of size > 1")
        self._to_shape(x, tuple(d for i, d in enumerate(dims) if i not in axes and i), self.out())

    def op_Unsqueeze(self, a):
        x = self.x()
        dims = list((1,) + self._torch_shape(x))
        axes = a.get("axes")
        if axes is None:
            axes = self.const(1, "axes")
        axes = [int(i) for i in np.asarray(axes).reshape(-1)]
        rank = len(dims) + len(axes)
        for i in sorted(v % rank for v in axes):
            dims.insert(i, 1)
        if 0 in [v % rank for v in axes]:  # the value seen as a sequence (host_tools/onnx_seq.py)
            self.native = True
            return self.seq_Unsqueeze(a)
        self._to_shape(x, tuple(dims[1:]), self.out())

    def op_Transpose(self, a):
        x = self.x()
        src = self._torch_shape(x)
        rank = len(src) + 1
        perm = [int(v) for v in a.get("perm", list(range(rank))[::-1])]
        if sorted(perm) != list(range(rank)):
            raise self.err("perm %s is not a permutation of %d axes" % (perm, rank))
        if perm[0] != 0 and self.kind[x] == "nchw" and min(self.ir.shapes[x][:2]) > 1:
            return self.image_frames(x, perm)  # (host_tools/onnx_seq.py)
        if perm[0] != 0 or self.kind[x] == "ncl":  # steps and features: a sequence (host_tools/onnx_seq.py)
            self.native = True
            return self.seq_Transpose(a)
        target = tuple(src[p - 1] for p in perm[1:])
        axis = _STORAGE_AXIS[rank]
        store = _stored(target)
        # stored axis j of the output holds torch axis t of the output: input torch axis perm[t]
        out_axes = {v: k for k, v in _STORAGE_AXIS[rank].items()}
        sperm = tuple(axis[perm[out_axes[j]]] if j in out_axes else j for j in range(len(store)))
        if sperm == tuple(range(len(store))):
            self.alias[self.out()] = x
            return
        self.emit("transpose", [x], self.out(), store, _KIND[len(target)], perm=sperm)

    def op_Slice(self, a):
        x = self.x()
        src = self._torch_shape(x)
        rank = len(src) + 1
        dims = (1,) + src
        starts, ends = a.get("starts"), a.get("ends")
        axes, steps = a.get("axes"), None
        if starts is None:
            starts, ends = self.const(1, "starts"), self.const(2, "ends")
            axes, steps = self.const(3, "axes"), self.const(4, "steps")
        starts = [int(v) for v in np.asarray(starts).reshape(-1)]
        ends = [int(v) for v in np.asarray(ends).reshape(-1)]
        axes = list(range(len(starts))) if axes is None else [int(v) % rank for v in np.asarray(axes).reshape(-1)]
        steps = [1] * len(starts) if steps is None else [int(v) for v in np.asarray(steps).reshape(-1)]
        store = list(self.ir.shapes[x])
        begin, end, stride = [0] * len(store), list(store), [1] * len(store)
        for ax, b, e, st in zip(axes, starts, ends, steps):
            n = dims[ax]
            if st < 1:
                raise self.err("a slice with step %d (only positive steps are supported)" % st)
            b = min(max(b + n if b < 0 else b, 0), n)
            e = min(max(e + n if e < 0 else e, 0), n)
            if e <= b:
                raise self.err("an empty slice of axis %d" % ax)
            if ax == 0:
                continue  # the batch of one: [0:1]
            j = _STORAGE_AXIS[rank][ax]
            begin[j], end[j], stride[j] = b, e, st
        shape = tuple((e - b + st - 1) // st for b, e, st in zip(begin, end, stride))
        if shape == tuple(store):
            self.alias[self.out()] = x
            return
        self.emit("slice", [x], self.out(), shape, self.kind[x], begin=tuple(begin), end=tuple(end),
                  stride=tuple(stride) if any(v != 1 for v in stride) else None)

    def _reduce(self, op, axes, keep):
        """Mean or max over torch axes of a value (None: every axis after the batch;
        "spatial": those after the channels). Over H and W of an image: `mean`, or `maxpool`
        over the whole image. Over other axes: the reduced axes brought first (a transpose
        when they are not), the value seen as (R, 1, K) (a reshape: no copy), then the same
        over its R rows: TFLM's MEAN arithmetic (which depends on the count only); a max keeps
        its input's quantization, as TFLite's REDUCE_MAX does."""
        x = self.x()
        src = self._torch_shape(x)
        rank = len(src) + 1
        if axes is None or isinstance(axes, str):
            axes = list(range(1 if axes is None else 2, rank))
        axes = sorted({int(i) % rank for i in np.asarray(axes).reshape(-1)} - {0})
        y = self.out()
        vector = len(self.ir.shapes[x]) == 1
        store = (self.ir.shapes[x][0], 1, 1) if vector else self.ir.shapes[x]
        red = {0} if vector else {_STORAGE_AXIS[rank][ax] for ax in axes}
        red |= {j for j in range(3) if store[j] == 1}  # (an axis of one element is its own reduction)
        kept = [j for j in range(3) if j not in red]
        r = int(np.prod([store[j] for j in red]))
        keep_store = (1,) if vector else tuple(1 if j in red else store[j] for j in range(3))
        mid = y if keep else y + ".keep"  # the result with the reduced axes kept (size 1)
        if r == 1:
            mid = x
        elif red == {0, 1} and not vector:
            self._reduce_op(op, x, mid, store)
        else:
            v = x
            order = sorted(red) + kept
            if vector:
                self.emit("reshape", [v], y + ".rk", store, self.kind[x], shape=store)
                v = y + ".rk"
            elif order != [0, 1, 2]:
                self.emit("transpose", [v], y + ".t", tuple(store[j] for j in order), self.kind[x],
                          perm=tuple(order))
                v = y + ".t"
            k = int(np.prod([store[j] for j in kept]))
            if self.ir.shapes[v] != (r, 1, k):
                self.emit("reshape", [v], y + ".rk", (r, 1, k), self.kind[x], shape=(r, 1, k))
                v = y + ".rk"
            self._reduce_op(op, v, y + ".r", (r, 1, k))
            self.emit("reshape", [y + ".r"], mid, keep_store, self.kind[x], shape=keep_store)
        if not keep:
            self._to_shape(mid, tuple(d for i, d in enumerate(src) if i + 1 not in axes) or (1,), y)
        elif mid != y:
            self.alias[y] = mid

    def _reduce_op(self, op, x, y, store):
        """mean / max over the first two axes of an (H, W, C) value: (1, 1, C)."""
        if op == "mean":
            self.emit("mean", [x], y, (1, 1, store[2]), self.kind[x])
        else:
            self.emit("maxpool", [x], y, (1, 1, store[2]), self.kind[x], k=(store[0], store[1]))

    def _broadcast(self, op, a, b):
        """Two activations of different shapes (ONNX's broadcasting: shapes aligned from the
        right) as the board's binary ops take them: one of shape (1, C, 1, 1) or (1, C, 1)
        over the channels of the other (the kernels repeat it every C elements); one of shape
        (1, 1, H, W) (a spatial gate) over the channels of an image: made C channels first (a
        concat of C copies)."""
        for big, small in ((a, b), (b, a)):
            full, part = (1,) + self._torch_shape(big), (1,) + self._torch_shape(small)
            if len(part) > len(full) or len(full) < 3:
                continue
            part = (1,) * (len(full) - len(part)) + part
            if part[1] == full[1] and _size(part) == full[1]:  # one value per channel
                if op == "Sub" and small == a:
                    raise self.err("%s minus %s: the board subtracts a per-channel second input only"
                                   % (self._torch_shape(a), self._torch_shape(b)))
                return a, b
            if len(full) == 4 and self.kind[small] == "nchw" and part[1] == 1 and part[2:] == full[2:]:
                tiled = small + ".x%d" % full[1]
                if tiled not in self.ir.shapes:
                    self.emit("concat", [small] * full[1], tiled, self.ir.shapes[big], "nchw")
                return (big, tiled) if big == a else (tiled, big)
        raise self.err("shapes %s and %s: equal, or one per channel or per pixel of the other"
                       % ((1,) + self._torch_shape(a), (1,) + self._torch_shape(b)))

    def op_ConvTranspose(self, a):
        """ConvTranspose (torch's ConvTranspose1d/2d, groups 1, no dilation) as tconv: input
        pixel (iy, ix) adds into output pixel (iy s + ky - pad_top, ...); the end pads and
        output_padding only set the output size."""
        x = self.x()
        w = self.const(1, "the weight")
        b = self.const(2, "the bias")
        if w is None or w.ndim not in (3, 4):
            raise self.err("needs a 3-D or 4-D weight initializer")
        one_d = w.ndim == 3
        if one_d:
            w = w[:, :, None, :]
        cin, o, kh, kw = w.shape
        h, wd, c = self.ir.shapes[x]
        if a.get("group", 1) != 1:
            raise self.err("grouped transposed convolution (group=%d) is not supported" % a.get("group"))
        if cin != c:
            raise self.err("weight for %d input channels, the input has %d" % (cin, c))
        n = 1 if one_d else 2
        if any(d != 1 for d in a.get("dilations", [1] * n)):
            raise self.err("dilated transposed convolution is not supported")
        auto = a.get("auto_pad", b"NOTSET")
        if (auto.decode() if isinstance(auto, bytes) else auto) != "NOTSET" or "output_shape" in a:
            raise self.err("auto_pad and output_shape are not supported (pads and output_padding are)")
        strides = list(a.get("strides", [1] * n))
        pads = list(a.get("pads", [0] * (2 * n)))
        opad = list(a.get("output_padding", [0] * n))
        if one_d:
            strides, pads, opad = [1] + strides, [0, pads[0], 0, pads[1]], [0] + opad
        if pads[0] >= kh or pads[1] >= kw:
            raise self.err("padding %s as large as the kernel %dx%d is not supported" % (pads, kh, kw))
        oh = (h - 1) * strides[0] - pads[0] - pads[2] + kh + opad[0]
        ow = (wd - 1) * strides[1] - pads[1] - pads[3] + kw + opad[1]
        if oh < 1 or ow < 1:
            raise self.err("an empty output (%d x %d)" % (oh, ow))
        tensors = {"w": (self.node.input[1], w.transpose(1, 2, 3, 0).astype(np.float32))}  # -> OHWI
        if b is not None:
            tensors["b"] = (self.node.input[2], b.astype(np.float32))
        self.emit("tconv", [x], self.out(), (oh, ow, o), self.kind[x], tensors, out=o, k=(kh, kw),
                  size=(oh, ow), stride=strides if strides != [1, 1] else None,
                  pad=(pads[0], pads[1]) if pads[0] or pads[1] else None)

    # --- elementwise ops, resize, layernorm -------------------------------------------------

    def op_HardSwish(self, a):
        self._activation(None, "hardswish")

    def op_HardSigmoid(self, a):
        self._activation(None, "hardsigmoid", alpha=float(a.get("alpha", 0.2)), beta=float(a.get("beta", 0.5)))

    def op_Gelu(self, a):
        approx = a.get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx not in ("none", "tanh"):
            raise self.err("approximate=%s is not supported" % approx)
        self._activation(None, "gelu", approx="tanh" if approx == "tanh" else None)

    def op_PRelu(self, a):
        x = self.x(0)
        slope = self._per_channel(self.const(1, "the slope"), x)
        if slope is None:
            raise self.err("the slope must be one value or one per channel")
        self.emit("prelu", [x], self.out(), self.ir.shapes[x], self.kind[x],
                  {"w": (self.node.input[1], slope.astype(np.float32))})

    def _minmax(self, op):
        names = [self.alias.get(i, i) for i in self.node.input]
        if len(names) != 2:
            raise self.err("takes two inputs")
        if all(n in self.consts for n in names):
            raise self.err("constant expression not folded")
        xi = 1 if names[0] in self.consts else 0
        x = self.x(xi)
        if names[1 - xi] in self.consts:
            c = np.asarray(self.consts[names[1 - xi]], np.float64)
            per = np.full(1, float(c.reshape(-1)[0])) if c.size == 1 else self._per_channel(c, x)
            if per is None:
                raise self.err("a constant operand must be a scalar or one value per channel")
            self.emit(op, [x], self.out(), self.ir.shapes[x], self.kind[x],
                      {"t": (names[1 - xi], per.astype(np.float32))}, shape=(1,) if per.size == 1 else None)
            return
        b = self.x(1 - xi)
        if int(np.prod(self.ir.shapes[x])) < int(np.prod(self.ir.shapes[b])):
            x, b = b, x
        self._repeats(x, b)
        self.emit(op, [x, b], self.out(), self.ir.shapes[x], self.kind[x])

    def _repeats(self, x, b):
        """Value b has x's shape, one element, or one per channel of x in torch's broadcasting
        ((1, C, 1, 1) over (1, C, H, W), (1, C, 1) over (1, C, L)): what the op repeats."""
        sx, sb = self.ir.shapes[x], self.ir.shapes[b]
        if sx == sb or int(np.prod(sb)) == 1 or (
                self.kind[x] == self.kind[b] and self.kind[x] in ("nchw", "ncl") and sb == (1, 1, sx[-1])):
            return
        raise self.err("shapes %s and %s: equal, one element, or one per channel"
                       % (self._torch_shape(x), self._torch_shape(b)))

    def op_Min(self, a):
        self._minmax("minimum")

    def op_Max(self, a):
        self._minmax("maximum")

    def _divide(self):
        x, b = self.x(0), self.x(1)
        self._repeats(x, b)  # (the divisor only)
        self.emit("div", [x, b], self.out(), self.ir.shapes[x], self.kind[x])

    def op_Resize(self, a):
        x = self.x(0)
        if self.kind[x] != "nchw":
            raise self.err("needs an (N, C, H, W) input")
        h, w, c = self.ir.shapes[x]
        s = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in a.items()}
        mode, coord = s.get("mode", "nearest"), s.get("coordinate_transformation_mode", "half_pixel")
        if mode not in ("nearest", "linear") or s.get("antialias", 0) or s.get("keep_aspect_ratio_policy",
                                                                                 "stretch") != "stretch":
            raise self.err("mode %s%s is not supported (nearest and linear are)"
                           % (mode, " with antialias" if s.get("antialias", 0) else ""))
        scales, sizes = self.const(2, "scales"), self.const(3, "sizes")
        if sizes is not None and np.asarray(sizes).size:
            oh, ow = (int(v) for v in np.asarray(sizes).reshape(-1)[-2:])
            fy, fx = oh / h, ow / w
        elif scales is not None and np.asarray(scales).size == 4:
            sc = np.asarray(scales, np.float64).reshape(-1)
            if sc[0] != 1 or sc[1] != 1:
                raise self.err("only H and W are resized")
            fy, fx = float(sc[2]), float(sc[3])
            oh, ow = int(math.floor(h * fy)), int(math.floor(w * fx))
        else:
            raise self.err("needs constant scales or sizes")
        rows = _onnx_coords(oh, h, fy, coord, mode, s.get("nearest_mode", "round_prefer_floor"))
        cols = _onnx_coords(ow, w, fx, coord, mode, s.get("nearest_mode", "round_prefer_floor"))
        if rows is None or cols is None:
            raise self.err("coordinate_transformation_mode %s is not supported" % coord)
        if mode == "nearest":
            table = np.array(rows + cols, np.int32)
        else:
            from .tflm import table_words

            table = table_words(rows + cols, integer=False)
        n = self.emit("resize", [x], self.out(), (oh, ow, c), "nchw", {"t": (self.out() + ".coords", table)},
                      size=(oh, ow), interp="bilinear" if mode == "linear" else None)
        # the int8 graph takes TFLM's integer coordinates (host_tools/int8.py): TFLite's flags
        n.tflite_flags = {"align_corners": (True, False), "asymmetric": (False, False), "half_pixel": (False, True),
                          "pytorch_half_pixel": (False, True)}.get(coord)

    def op_LayerNormalization(self, a):
        x = self.x(0)
        gamma = self.const(1, "the scale")
        beta = self.const(2, "the bias")
        kind, shape = self.kind[x], self.ir.shapes[x]
        rank = {"nf": 2, "ncl": 3, "nchw": 4}[kind]
        axis = a.get("axis", -1) % rank
        if kind == "nf" and axis == 1:
            over = "c"
        elif kind == "ncl" and axis == 2:
            over = "w"
        elif kind in ("ncl", "nchw") and axis == 1:
            over = "all"
        else:
            raise self.err("a normalization over axis %d of a %s value is not supported" % (axis, kind))
        n = int(np.prod(shape)) if over == "all" else (shape[1] if over == "w" else shape[-1])

        def stored(t):  # torch's order (C, L) or (C, H, W) -> the stored order, channels last
            t = np.asarray(t, np.float32)
            if over == "all":
                t = np.broadcast_to(t, self._torch_shape(x))
                t = t.T if kind == "ncl" else t.transpose(1, 2, 0)
            return np.ascontiguousarray(np.broadcast_to(t.reshape(-1), (n,)))

        tensors = {"w": (self.node.input[1], stored(gamma))}
        if beta is not None:
            tensors["b"] = (self.node.input[2], stored(beta))
        self.emit("layernorm", [x], self.out(), shape, kind, tensors, eps=float(a.get("epsilon", 1e-5)),
                  over=over if over != "c" else None)

    def op_InstanceNormalization(self, a):
        """torch's InstanceNorm1d/2d: a groupnorm with a group per channel; torch's GroupNorm
        (a Reshape to (1, G, L) in front, _group_of): a groupnorm of G groups, InstanceNorm's
        scale and bias (one per group) repeated over each group's channels."""
        name = self.alias.get(self.node.input[0], self.node.input[0])
        scale = np.asarray(self.const(1, "the scale"), np.float32).reshape(-1)
        bias = np.asarray(self.const(2, "the bias"), np.float32).reshape(-1)
        x, g = self.grouped.pop(name) if name in self.grouped else (self.x(0), None)
        if self.kind[x] not in ("nchw", "ncl"):
            raise self.err("needs an (N, C, H, W) or (N, C, L) input")
        c = self.ir.shapes[x][-1]
        groups = c if g is None else g
        if scale.size != groups or bias.size != groups:
            raise self.err("scale and bias of %d and %d values for %d channels" % (scale.size, bias.size, groups))
        y = self.out() if g is None else self.out() + ".g"
        names = self.node.input[1:3] if g is None else (self.out() + ".scale", self.out() + ".bias")
        tensors = {"w": (names[0], np.repeat(scale, c // groups)), "b": (names[1], np.repeat(bias, c // groups))}
        self.emit("groupnorm", [x], y, self.ir.shapes[x], self.kind[x], tensors,
                  groups=g if g is not None and g != c else None, eps=float(a.get("epsilon", 1e-5)))
        if g is not None:  # torch's view of it: (G, L), until a Reshape takes it back (op_Reshape)
            src = self._torch_shape(x)
            self.regroup[self.out()] = (y, (g, int(np.prod(src)) // g))

    def op_GroupNormalization(self, a):
        """ONNX's GroupNormalization: num_groups groups of consecutive channels; scale and bias
        one per channel (opset 21) or one per group (opset 18)."""
        x = self.x(0)
        if self.kind[x] not in ("nchw", "ncl"):
            raise self.err("needs an (N, C, H, W) or (N, C, L) input")
        c, g = self.ir.shapes[x][-1], int(a["num_groups"])
        if g < 1 or c % g:
            raise self.err("%d groups of %d channels" % (g, c))
        t = {}
        for i, key in ((1, "w"), (2, "b")):
            v = np.asarray(self.const(i, "the scale and bias"), np.float32).reshape(-1)
            if v.size not in (c, g):
                raise self.err("%d scale or bias values for %d channels in %d groups" % (v.size, c, g))
            t[key] = (self.out() + (".scale", ".bias")[i - 1], np.repeat(v, c // v.size))
        self.emit("groupnorm", [x], self.out(), self.ir.shapes[x], self.kind[x], t,
                  groups=g if g != c else None, eps=float(a.get("epsilon", 1e-5)))

    def _emit_regroup(self, name):
        """A GroupNorm's InstanceNormalization output read as what it is in torch, (G, L):
        the groupnorm's output reshaped."""
        gn, dims = self.regroup.pop(name)
        self._to_shape(gn, dims, name)



_KIND = {1: "nf", 2: "ncl", 3: "nchw"}
# torch axis (of a value of this rank, the batch included) -> axis of its stored value
_STORAGE_AXIS = {2: {1: 0}, 3: {1: 2, 2: 1}, 4: {1: 2, 2: 0, 3: 1}}


def _stored(torch_shape):
    """The stored shape of a value of this torch shape (without the batch)."""
    t = tuple(int(d) for d in torch_shape)
    if len(t) == 3:
        return (t[1], t[2], t[0])
    if len(t) == 2:
        return (1, t[1], t[0])
    return t


def _size(shape):
    return int(np.prod(shape))


def _onnx_coords(out, size, scale, coord, mode, nearest_mode):
    """ONNX Resize's source coordinate of each output index along one axis: an index (nearest,
    rounded by nearest_mode) or (i0, i1, d) (linear, the coordinate clamped to [0, size - 1]
    as onnxruntime does); None for a coordinate mode without a formula here."""
    out_list = []
    for i in range(out):
        if coord == "half_pixel":
            v = (i + 0.5) / scale - 0.5
        elif coord == "pytorch_half_pixel":
            v = (i + 0.5) / scale - 0.5 if out > 1 else 0.0
        elif coord == "align_corners":
            v = i * (size - 1) / (out - 1) if out > 1 else 0.0
        elif coord == "asymmetric":
            v = i / scale
        elif coord == "tf_half_pixel_for_nn" and mode == "nearest":
            v = (i + 0.5) / scale
        else:
            return None
        if mode == "nearest":
            if nearest_mode == "floor":
                j = math.floor(v)
            elif nearest_mode == "ceil":
                j = math.ceil(v)
            elif nearest_mode == "round_prefer_ceil":
                j = math.floor(v + 0.5)
            else:  # round_prefer_floor
                j = math.ceil(v - 0.5)
            out_list.append(min(max(int(j), 0), size - 1))
        else:
            v = min(max(v, 0.0), size - 1.0)
            i0 = int(math.floor(v))
            out_list.append((i0, min(i0 + 1, size - 1), v - i0))
    return out_list
