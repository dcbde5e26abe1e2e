"""ONNX -> graph (host_tools.ir), for both torch exporters and other ONNX producers.

What it does to the graph, so the board runs fewer, simpler ops:
- constant subgraphs (torch's TorchScript exporter computes Pad's pads with 8 ops) are
  evaluated here with onnx's reference evaluator: shape constants are never packed;
- BatchNormalization is folded into the conv/linear before it (a standalone one, and a Mul/Add
  by a per-channel constant, becomes a per-channel affine: a 1x1 depthwise conv);
- Relu and Clip(0, 6) are fused into the op before them; a zero Pad into the next conv;
- NCHW becomes NHWC: conv weights are stored OHWI ([1, kh, kw, C] for depthwise), Gemm/MatMul
  weights [out, in]; a Flatten of C, H, W keeps torch's element order (reshape order=chw);
  the input keeps its layout (layout=chw: the board takes C, H, W data as torch does).
Anything else raises PackError naming the node and its op: the board could not run it."""
import math
import os

import numpy as np

from .container import PackError
from .ir import Graph, Node
from .onnx_seq import SequenceOps

_FOLDABLE = {"Constant", "ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose", "Cast",
             "Shape", "Gather", "Unsqueeze", "Squeeze", "Range", "Mul", "Add", "Sub", "Div",
             "Identity", "Flatten", "Expand", "Equal", "Where", "ReduceProd", "Neg", "Sqrt"}
_ACT_FUSE = ("conv2d", "depthwise", "linear", "add")


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
        self.seq = {}  # ONNX value -> (ONNX shape, T axis, F axis) of a sequence (host_tools/onnx_seq.py)
        self.pending_pad = {}  # Pad output -> (input, pads) fused into the next Conv
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
        for node in g.node:
            self.node = node
            self.what = "ONNX node %r (%s)" % (node.name or node.output[0], node.op_type)
            if self._fold(node):
                continue
            fn = getattr(self, "op_" + node.op_type, None)
            if fn is None:
                raise self.err("op not supported by the graph runner")
            fn(self._attrs(node))
        for o in g.output:
            name = self.alias.get(o.name, o.name)
            if name in self.consts:
                raise PackError("ONNX graph: output %r is a constant" % o.name)
            if name in self.pending_pad:
                self._emit_pad(name)
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
        name = self.node.input[i]
        name = self.alias.get(name, name)
        if name in self.consts:
            raise self.err("input %d is a constant where an activation is expected" % i)
        if name in self.pending_pad and not (self.node.op_type == "Conv" and i == 0):
            self._emit_pad(name)
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
        """y = x * scale + shift per channel: folded into the producing conv/linear when it
        can be, else a 1x1 depthwise conv (the per-channel affine op)."""
        p = self.fusable(x, ("conv2d", "depthwise", "linear"))
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
                               % (self.ir.shapes[x], n_in))
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
        if kind == "nf" and s == [c]:
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
        if op not in ("Add", "Mul"):
            raise self.err("%s of two activations is not supported" % op)
        a, b = self.x(0), self.x(1)
        sa, sb = self.ir.shapes[a], self.ir.shapes[b]
        if sa != sb and not (len(sb) == 1 and sb[0] == sa[-1]) and not (len(sa) == 1 and sa[0] == sb[-1]):
            raise self.err("shapes %s and %s: equal, or one per channel" % (sa, sb))
        big = a if len(sa) >= len(sb) else b
        self.emit(op.lower(), [a, b], self.out(), self.ir.shapes[big], self.kind[big])

    def op_Add(self, a):
        self._binary("Add")

    def op_Mul(self, a):
        self._binary("Mul")

    def op_Sub(self, a):
        self._binary("Sub")

    def op_Div(self, a):
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
        if avg and a.get("count_include_pad", 0) and any(pads):
            raise self.err("count_include_pad=1 with padding is not supported (the board averages "
                           "over the in-bounds elements, as TFLite does)")
        oh = (h + pads[0] + pads[2] - k[0]) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - k[1]) // strides[1] + 1
        if a.get("ceil_mode", 0):
            oh2 = -(-(h + pads[0] + pads[2] - k[0]) // strides[0]) + 1
            ow2 = -(-(w + pads[1] + pads[3] - k[1]) // strides[1]) + 1
            if (oh2, ow2) != (oh, ow):
                raise self.err("ceil_mode=1 changes the output size here; it is not supported")
        self.emit(op, [x], self.out(), (oh, ow, c), self.kind[x], k=k, stride=strides,
                  pad=pads if any(pads) else None)

    def op_MaxPool(self, a):
        if len(self.node.output) > 1 and self.node.output[1]:
            raise self.err("the indices output is not supported")
        self._pool("maxpool", a, False)

    def op_AveragePool(self, a):
        self._pool("avgpool", a, True)

    def op_GlobalAveragePool(self, a):
        x = self.x()
        if self.kind[x] != "nchw":
            raise self.err("needs an (N, C, H, W) input")
        c = self.ir.shapes[x][-1]
        self.emit("mean", [x], self.out(), (1, 1, c), "nchw")

    def op_ReduceMean(self, a):
        x = self.x()
        axes = a.get("axes")
        if axes is None and len(self.node.input) > 1:
            axes = self.const(1, "axes")
        axes = sorted(int(i) % 4 for i in np.asarray(axes).reshape(-1)) if axes is not None else None
        if self.kind[x] != "nchw" or axes != [2, 3]:
            raise self.err("only the mean over H and W of an (N, C, H, W) value is supported")
        c = self.ir.shapes[x][-1]
        if a.get("keepdims", 1):
            self.emit("mean", [x], self.out(), (1, 1, c), "nchw")
        else:
            mid = self.out() + ".hw"
            self.emit("mean", [x], mid, (1, 1, c), "nchw")
            self.emit("reshape", [mid], self.out(), (c,), "nf", shape=(c,))

    def _flatten(self, x):
        shape = self.ir.shapes[x]
        n = int(np.prod(shape))
        order = None
        if self.kind[x] in ("nchw", "ncl") and shape[-1] > 1 and shape[0] * shape[1] > 1:
            order = "chw"  # torch's flatten of NCHW: the board stores H, W, C
        self.emit("reshape", [x], self.out(), (n,), "nf", shape=(n,), order=order)

    def op_Flatten(self, a):
        if a.get("axis", 1) != 1:
            raise self.err("only axis=1 is supported")
        if self.is_seq():
            return self.seq_flatten()
        self._flatten(self.x())

    def op_Reshape(self, a):
        if self.is_seq():
            return self.seq_reshape([int(v) for v in np.asarray(self.const(1, "the shape")).reshape(-1)])
        x = self.x()
        target = [int(v) for v in np.asarray(self.const(1, "the shape")).reshape(-1)]
        n = int(np.prod(self.ir.shapes[x]))
        if len(target) == 2 and target[0] in (1, -1, 0) and target[1] in (-1, n) or target in ([n], [-1]):
            return self._flatten(x)
        if self.kind[x] == "nf" and len(target) == 2 and target[1] in (-1, n):
            self.alias[self.out()] = x
            return
        raise self.err("only a reshape to (batch, features) is supported, not %s" % target)

    def op_Softmax(self, a):
        x = self.x()
        axis = a.get("axis", -1)
        kind = self.kind[x]
        if not (kind == "nf" and axis in (1, -1) or kind == "nchw" and axis == 1):
            raise self.err("softmax over axis %s of a %s value is not supported" % (axis, kind))
        self.emit("softmax", [x], self.out(), self.ir.shapes[x], kind)

    def op_Concat(self, a):
        names = [self.x(i) for i in range(len(self.node.input))]
        kinds = {self.kind[n] for n in names}
        axis = a.get("axis")
        if len(kinds) != 1 or axis not in (1, -3 if "nchw" in kinds else -1, -1 if "nf" in kinds else 1):
            raise self.err("only concatenation along the channels is supported")
        shapes = [self.ir.shapes[n] for n in names]
        total = sum(s[-1] for s in shapes)
        self.emit("concat", names, self.out(), shapes[0][:-1] + (total,), kinds.pop())
