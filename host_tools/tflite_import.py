""".tflite -> graph (host_tools.ir), read with the `tflite` package (the TFLite flatbuffer schema
on the flatbuffers runtime; no hand-written parsing).

TFLite graphs are NHWC already, as the board runs them: weights keep their layout (conv OHWI,
depthwise [1, kh, kw, C], fully connected [out, in]) and their int8 codes. Each op's integer
parameters are computed as TensorFlow Lite Micro's Prepare computes them (host_tools.tflm), so
the board reproduces TFLM's outputs bit for bit. Elementwise int8 ops (LOGISTIC, TANH, RELU,
RELU6, LEAKY_RELU, HARD_SWISH, int8 QUANTIZE) become 256-entry tables of TFLM's own integer
results. Hybrid models (the converter's dynamic-range mode: float activations, int8 weights)
are refused, as TFLM refuses them.
A model with any other op, or a form of an op the board cannot run, raises PackError naming
the op."""
import numpy as np

from . import tflite_check, tflm
from .container import PackError
from .ir import Graph, Node

SUPPORTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "AVERAGE_POOL_2D",
             "MAX_POOL_2D", "MEAN", "PAD", "RESHAPE", "SOFTMAX", "CONCATENATION", "LOGISTIC",
             "TANH", "QUANTIZE", "DEQUANTIZE", "RELU", "RELU6", "LEAKY_RELU", "STRIDED_SLICE",
             "TRANSPOSE", "TRANSPOSE_CONV", "HARD_SWISH", "MINIMUM", "MAXIMUM", "CAST", "DIV",
             "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "PRELU", "UNIDIRECTIONAL_SEQUENCE_LSTM", "SVDF",
             "SHAPE", "PACK")
# computed at pack time when every input is a constant (SHAPE: always, from the static shape): the
# shape arithmetic of a Keras Flatten on a dynamic batch, SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE
FOLDABLE = ("SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION")
_INT = {"INT8": "i8", "INT16": "i16", "INT32": "i32", "UINT8": "u8"}  # quantized activation types
# (uint8: a model input or output QUANTIZE turns into int8 and back, tflite_check.UINT8)
_ACTS = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}
HYBRID = ("hybrid model (float activations with int8 weights): TFLite Micro does not run these either; "
          "convert with full-integer quantization or float weights")


def _schema():
    try:
        import tflite
    except ImportError:
        raise PackError("reading .tflite needs the 'tflite' package: pip install 'mpy-lazy[tflite]'")
    return tflite


def from_tflite(path):
    with open(path, "rb") as f:
        buf = f.read()
    try:
        return _Reader(buf, path).run()
    except PackError:
        raise
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # a damaged flatbuffer: offsets outside the file and the like
        raise PackError("%s: not a valid .tflite model: %s" % (path, (str(e).strip() or type(e).__name__).splitlines()[0]))


class _Reader:
    def __init__(self, buf, path):
        tfl = _schema()
        self.tfl = tfl
        self.path = path
        try:
            self.model = tfl.Model.GetRootAsModel(buf, 0)
            if self.model.SubgraphsLength() < 1:
                raise ValueError("no subgraph")
            self.sg = self.model.Subgraphs(0)
        except Exception as e:
            raise PackError("%s: not a valid .tflite model: %s" % (path, e))
        self.names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if isinstance(v, int)}
        self.types = {v: k for k, v in vars(tfl.TensorType).items() if isinstance(v, int)}
        self.ir = Graph()
        self.count = {}
        self.folded = {}  # tensor -> its value, computed at pack time (FOLDABLE)

    def err(self, msg):
        return PackError("%s: %s" % (self.what, msg))

    # --- tensors --------------------------------------------------------------------------

    def tensor(self, i):
        t = self.sg.Tensors(i)
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        q = t.Quantization()
        scales = list(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else []
        zps = [int(z) for z in q.ZeroPointAsNumpy()] if q is not None and q.ZeroPointLength() else []
        qdim = q.QuantizedDimension() if q is not None else 0
        return t, shape, self.types.get(t.Type(), str(t.Type())), scales, zps, qdim

    def data(self, i):
        """A constant tensor's values (None for an activation); a folded op's output too."""
        if i in self.folded:
            return self.folded[i]
        t, shape, typ, _, _, _ = self.tensor(i)
        b = self.model.Buffers(t.Buffer())
        if b is None or b.DataLength() == 0:
            return None
        dt = {"INT8": np.int8, "INT32": np.int32, "FLOAT32": np.float32, "INT64": np.int64,
              "UINT8": np.uint8, "INT16": np.int16, "FLOAT16": np.float16}.get(typ)
        if dt is None:
            raise self.err("constant tensor of type %s is not supported" % typ)
        return np.frombuffer(b.DataAsNumpy().tobytes(), dtype=dt).reshape(shape)

    def value(self, i):
        """The graph value of tensor i (an activation), registering its quantization."""
        name = "t%d" % i
        if name not in self.ir.shapes:
            raise self.err("tensor %d is neither a model input nor an op output" % i)
        return name

    def define(self, i):
        """Register tensor i as the output value of the current op: its name, shape, q."""
        _, shape, typ, scales, zps, _ = self.tensor(i)
        name = "t%d" % i
        self.ir.shapes[name] = _hwc(shape, self)
        if typ in _INT and not scales:  # not quantized (CAST's integers): value = code
            self.ir.q[name] = (1.0, 0)
            if _INT[typ] != "i8":
                self.ir.dtypes[name] = _INT[typ]
        elif typ in _INT:
            dt = _INT[typ]
            if len(scales) != 1 or not scales[0] > 0 or not np.isfinite(scales[0]):
                raise self.err("%s tensor %d needs one finite scale > 0 (has %s)"
                               % (typ.lower(), i, [float(s) for s in scales]))
            zp = zps[0] if zps else 0
            lo, hi = tflm.RANGE[dt]
            if not lo <= zp <= hi:
                raise self.err("%s tensor %d: zero point %d outside %d..%d" % (typ.lower(), i, zp, lo, hi))
            self.ir.q[name] = (float(np.float32(scales[0])), zp)
            if dt != "i8":
                self.ir.dtypes[name] = dt
        elif typ != "FLOAT32":
            raise self.err("activations of type %s are not supported (float32, int8, int16 and int32 are, "
                           "and uint8 into or out of QUANTIZE)" % typ)
        return name

    def qof(self, i):
        _, _, typ, scales, zps, _ = self.tensor(i)
        if typ in _INT and not scales:
            return (1.0, 0)
        return (float(np.float32(scales[0])), zps[0] if zps else 0) if typ in _INT else None

    def dtof(self, i):
        """The graph dtype of tensor i: f32, i8, i16 or i32."""
        return _INT.get(self.tensor(i)[2], "f32")

    def add(self, key, arr):
        return self.ir.add_tensor("%s_%d.%s" % (self.opname, self.opidx, key), np.ascontiguousarray(arr))

    # --- graph ----------------------------------------------------------------------------

    def run(self):
        sg = self.sg
        ops = []
        for k in range(sg.OperatorsLength()):
            op = sg.Operators(k)
            code = self.model.OperatorCodes(op.OpcodeIndex())
            name = self.names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "CUSTOM")
            if code.BuiltinCode() == self.tfl.BuiltinOperator.CUSTOM:
                name = "CUSTOM %s" % (code.CustomCode() or b"").decode("utf-8", "replace")
            ops.append((k, name, op))
        for k, name, op in ops:  # ops first: a refusal names the op, not one of its tensors
            if name not in SUPPORTED:
                raise PackError("%s: operator %d (%s): op %s is not supported (mpy-lazy runs %s)"
                                % (self.path, k, name, name, ", ".join(SUPPORTED)))
        tflite_check.check(self, ops)  # then the whole model, before anything is converted
        # an output_shape given to TRANSPOSE_CONV as a model input is static (the output
        # tensor's shape): that input is dropped (the caller passes the others)
        shapes_only = {op.Inputs(0) for _, name, op in ops if name == "TRANSPOSE_CONV"}
        for j in range(sg.OperatorsLength()):
            op = sg.Operators(j)
            for i in range(1, op.InputsLength()):
                shapes_only.discard(op.Inputs(i))
        for k in range(sg.InputsLength()):
            i = sg.Inputs(k)
            if i in shapes_only:
                self.ir.dropped.append(k)
                continue
            self.what = "%s: model input %d (tensor %d)" % (self.path, k, i)
            name = self.define(i)
            self.ir.inputs.append((name, self.ir.shapes[name], "hwc"))
        for k, name, op in ops:
            self.what = "%s: operator %d (%s)" % (self.path, k, name)
            self.opname = name.lower()
            self.opidx = self.count.get(name, 0)
            self.count[name] = self.opidx + 1
            self.op = op
            self.ins = [op.Inputs(j) for j in range(op.InputsLength())]
            self.outs = [op.Outputs(j) for j in range(op.OutputsLength())]
            try:
                if name in FOLDABLE and self._fold(name):
                    continue
                with np.errstate(all="ignore"):  # (a ratio of hostile scales overflows float32 to inf:
                    getattr(self, "op_" + name)()  # refused below in one line, without numpy's warning)
            except (PackError, MemoryError, KeyboardInterrupt):
                raise
            except Exception as e:  # damage inside the op's tensors (a short buffer...): still its refusal
                raise self.err("cannot read it: %s" % (str(e).strip() or type(e).__name__).splitlines()[0])
        for k in range(sg.OutputsLength()):
            self.what = "%s: model output %d" % (self.path, k)
            self.ir.outputs.append(self.value(sg.Outputs(k)))
        return self.ir

    def options(self, cls):
        o = getattr(self.tfl, cls)()
        t = self.op.BuiltinOptions()
        if t is None:
            return None
        o.Init(t.Bytes, t.Pos)
        return o

    def emit(self, op, xs, **attrs):
        y = self.define(self.outs[0])
        n = Node(op, xs, y, self.what, **{k: v for k, v in attrs.items() if v is not None})
        self.ir.nodes.append(n)
        return n

    def _fold(self, name):
        """Compute a FOLDABLE op here when it can be (SHAPE always; the others when every input is
        a constant or folded, and the output an int32/int64 without quantization): its output is
        then a constant for the ops after it (TFLM computes it at every invoke, from the same
        static shapes). False: the op runs on the board, or its op_ method refuses it."""
        _, yshape, ytyp, yscales, _, _ = self.tensor(self.outs[0])
        if ytyp not in ("INT32", "INT64") or yscales:
            if name in ("SHAPE", "PACK"):
                raise self.err("an output of type %s: only int32/int64 shapes are computed (at pack time)" % ytyp)
            return False
        if name == "SHAPE":
            v = np.array(self.tensor(self.ins[0])[1], np.int64)
        else:
            xs = [self.data(i) for i in self.ins]
            if any(x is None for x in xs) or any(x.dtype.kind not in "iu" for x in xs):
                return False
            if name == "PACK":
                o = self.options("PackOptions")
                if o.ValuesCount() != len(xs):
                    raise self.err("values_count %d for %d inputs" % (o.ValuesCount(), len(xs)))
                axis = o.Axis() + len(xs[0].shape) + 1 if o.Axis() < 0 else o.Axis()
                if not 0 <= axis <= len(xs[0].shape) or any(x.shape != xs[0].shape for x in xs):
                    raise self.err("inputs of shapes %s packed along axis %d" % ([list(x.shape) for x in xs], o.Axis()))
                v = np.stack(xs, axis=axis)
            elif name == "CONCATENATION":
                o = self.options("ConcatenationOptions")
                if self._act(o.FusedActivationFunction()) is not None:
                    return False
                v = np.concatenate(xs, axis=o.Axis())
            else:
                v = self._fold_slice(*xs)
        if list(v.shape) != list(yshape):
            raise self.err("computes a value of shape %s, its output tensor is %s" % (list(v.shape), list(yshape)))
        self.folded[self.outs[0]] = v.astype(np.int32 if ytyp == "INT32" else np.int64)
        return True

    def _fold_slice(self, x, begin, end, strides):
        """TFLite's STRIDED_SLICE of a constant (positive strides; begin, end and shrink-axis
        masks; TFLM's StartForAxis / StopForAxis clamping)."""
        o = self.options("StridedSliceOptions")
        bm, em, sm = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) if o is not None else (0, 0, 0)
        if o is not None and (o.EllipsisMask() or o.NewAxisMask() or (o.Offset() if hasattr(o, "Offset") else 0)):
            raise self.err("ellipsis and new-axis masks and offset are not supported")
        if not len(begin) == len(end) == len(strides) == x.ndim:
            raise self.err("begin, end and strides of %d, %d, %d values for %d dimensions"
                           % (len(begin), len(end), len(strides), x.ndim))
        index = []
        for d in range(x.ndim):
            size, s_ = x.shape[d], int(strides[d])
            if s_ < 1:
                raise self.err("negative or zero strides are not supported")
            lo = 0 if bm & (1 << d) else int(begin[d])
            lo = max(0, min(size, lo + size if lo < 0 else lo))
            if sm & (1 << d):
                index.append(lo)
                continue
            hi = size if em & (1 << d) else int(end[d])
            index.append(slice(lo, max(0, min(size, hi + size if hi < 0 else hi)), s_))
        return np.asarray(x[tuple(index)])

    def op_SHAPE(self):  # (always folded)
        raise self.err("not computed")

    def op_PACK(self):
        raise self.err("PACK of values computed on the board: only shapes computed at pack time are supported "
                       "(a Keras Flatten's)")

    def _padding(self, padding, h, w, kh, kw, sh, sw, dh, dw):
        """TFLM's ComputePaddingHeightWidth: (top, left, bottom, right), output (oh, ow)."""
        def one(size, k, s, d):
            eff = (k - 1) * d + 1
            out = (size + s - 1) // s if padding == 0 else (size - eff + s) // s
            total = max((out - 1) * s + eff - size, 0)
            return total // 2, total - total // 2, out
        t, b, oh = one(h, kh, sh, dh)
        l, r, ow = one(w, kw, sw, dw)
        return (t, l, b, r), oh, ow

    def _act(self, code):
        act = _ACTS.get(code, "?")
        if act == "?":
            raise self.err("fused activation %d is not supported" % code)
        return act

    def _weighted(self, op, xq, wdata, wscales, bias_i, yq, act, extra):
        """int8 conv/depthwise/fully connected: weights as stored, int32 bias, per-channel
        multipliers; float: weights, bias and a fused activation."""
        n = self.emit(op, [self.x0], **extra)
        oc = extra.get("out") or wdata.shape[3]
        if yq is None:  # float
            if wdata.dtype == np.int8:
                raise self.err(HYBRID)
            if wdata.dtype != np.float32:
                raise self.err("float model with %s weights" % wdata.dtype)
            n.t["w"] = self.add("weight", wdata)
            if bias_i is not None:
                n.t["b"] = self.add("bias", bias_i.astype(np.float32))
            n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
            return n
        if wdata.dtype != np.int8:
            raise self.err("quantized model with %s weights (only int8 weights are supported)" % wdata.dtype)
        scales = list(wscales) if len(wscales) > 1 else list(wscales) * oc
        n.t["w"] = self.add("weight", wdata)
        axis = 3 if op == "depthwise" else 0
        self.ir.wquant[n.t["w"]] = (np.asarray(scales, np.float32), axis)
        dt = self.dtof(self.outs[0])
        if dt == "i16":  # 16x8: TFLM's int64 accumulators for an int64 bias (or none), else int32
            if bias_i is not None and bias_i.dtype not in (np.int64, np.int32):
                raise self.err("16x8 model with a %s bias (int64 or int32 expected)" % bias_i.dtype)
            n.attrs["acc"] = "32" if bias_i is not None and bias_i.dtype == np.int32 else None
            if bias_i is not None:
                if np.any(np.abs(bias_i.astype(np.int64)) > 2 ** 31 - 1):
                    raise self.err("a 16x8 bias beyond int32: not supported (the container stores int32)")
                n.t["b"] = self.add("bias", bias_i.astype(np.int32))
        else:
            if bias_i is not None and bias_i.dtype != np.int32:
                raise self.err("int8 model with a %s bias (int32 expected)" % bias_i.dtype)
            try:  # always a bias: it carries the input zero point (docs/FORMAT.md)
                n.t["b"] = self.add("bias", tflm.fold_input_zero_point(bias_i, wdata, axis, xq[1]))
            except ValueError as e:
                raise self.err(str(e))
        mult, shift = tflm.conv_multipliers(xq[0], scales, yq[0])
        self._check_shifts(shift, 7 if dt == "i16" and n.attrs.get("acc") != "32" else 30)
        n.t["m"] = self.add("requant", np.array([mult, shift], dtype=np.int32))
        n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)
        return n

    def _check_shifts(self, shift, top):
        """Refuse requantization shifts outside TFLM's range (-31..30; 7 for int64
        accumulators): what the board's load check refuses, named here by the operator."""
        for c, s in enumerate(shift):
            if not -31 <= s <= top:
                raise self.err("channel %d: requantization multiplier (input scale x weight scale / output "
                               "scale) has shift %d, outside TFLM's -31..%d: the scales are out of range" % (c, s, top))

    def _conv_common(self, depthwise):
        x = self.value(self.ins[0])
        self.x0 = x
        w = self.data(self.ins[1])
        if w is None:
            raise self.err("the filter must be a constant")
        _, _, _, wscales, wzps, qdim = self.tensor(self.ins[1])
        if any(wzps):
            raise self.err("weights with a non-zero zero point")
        _check_scales(self, wscales, w)
        bias = self.data(self.ins[2]) if len(self.ins) > 2 and self.ins[2] >= 0 else None
        h, wd, c = self.ir.shapes[x]
        o = self.options("DepthwiseConv2DOptions" if depthwise else "Conv2DOptions")
        kh, kw = w.shape[1], w.shape[2]
        sh, sw = o.StrideH(), o.StrideW()
        dh, dw = o.DilationHFactor(), o.DilationWFactor()
        pads, oh, ow = self._padding(o.Padding(), h, wd, kh, kw, sh, sw, dh, dw)
        extra = dict(k=(kh, kw), stride=(sh, sw), pad=pads if any(pads) else None,
                     dil=(dh, dw) if (dh, dw) != (1, 1) else None)
        if depthwise:
            mult = w.shape[3] // c
            extra["mult"] = mult if mult != 1 else None
        else:
            g = c // w.shape[3]
            extra["out"] = w.shape[0]
            extra["groups"] = g if g != 1 else None
        self._weighted("depthwise" if depthwise else "conv2d", self.qof(self.ins[0]), w, wscales, bias,
                       self.qof(self.outs[0]), self._act(o.FusedActivationFunction()), extra)

    def op_CONV_2D(self):
        self._conv_common(False)

    def op_DEPTHWISE_CONV_2D(self):
        self._conv_common(True)

    def op_FULLY_CONNECTED(self):
        x = self.value(self.ins[0])
        self.x0 = x
        w = self.data(self.ins[1])
        if w is None or w.ndim != 2:
            raise self.err("the weights must be a constant 2-D tensor")
        o = self.options("FullyConnectedOptions")
        if o is not None and o.WeightsFormat() != 0:
            raise self.err("shuffled weights are not supported")
        _, oshape, _, _, _, _ = self.tensor(self.outs[0])
        if o is not None and o.KeepNumDims() and int(np.prod(oshape[:-1])) != 1:
            raise self.err("keep_num_dims over several rows is not supported")
        _, _, _, wscales, wzps, _ = self.tensor(self.ins[1])
        if any(wzps):
            raise self.err("weights with a non-zero zero point")
        _check_scales(self, wscales, w)
        bias = self.data(self.ins[2]) if len(self.ins) > 2 and self.ins[2] >= 0 else None
        if oshape[-1] != w.shape[0]:  # TFLM takes the output's last dimension as the output depth
            raise self.err("output of shape %s for %d units" % (list(oshape), w.shape[0]))
        xq, yq = self.qof(self.ins[0]), self.qof(self.outs[0])
        if xq is not None and len(wscales) == 1 and bias is not None:  # TFLM's GetQuantizedConvolutionMultipler
            bscales = self.tensor(self.ins[2])[3]
            diff = abs(float(np.float32(xq[0])) * float(np.float32(wscales[0])) -
                       (float(np.float32(bscales[0])) if len(bscales) else 0.0))
            if diff / float(np.float32(yq[0])) > 0.02:
                raise self.err("bias scale differs from input x weight scale by %.3g output steps (TFLM takes "
                               "<= 0.02)" % (diff / float(np.float32(yq[0]))))
        act = self._act(o.FusedActivationFunction() if o is not None else 0)
        n = self._weighted("linear", self.qof(self.ins[0]), w, wscales, bias, self.qof(self.outs[0]), act,
                           dict(out=w.shape[0]))
        if self.ir.shapes[n.y] != (w.shape[0],):  # keep_num_dims: (1, out) and the like, one row
            y = n.y
            n.y = y + ".flat"
            self.ir.shapes[n.y] = (int(w.shape[0]),)
            if y in self.ir.q:
                self.ir.q[n.y] = self.ir.q[y]
            if y in self.ir.dtypes:
                self.ir.dtypes[n.y] = self.ir.dtypes[y]
            self.ir.nodes.append(Node("reshape", [n.y], y, self.what, shape=self.ir.shapes[y]))

    def _binary(self, op, cls):
        a, b = self.ins[:2]
        if self.data(a) is not None and self.data(b) is not None:
            raise self.err("both operands are constants")
        if self.data(a) is not None:
            if op == "sub":
                raise self.err("a constant first operand of SUB is not supported")
            a, b = b, a  # (add and mul commute, in TFLM's integers too)
        const = self.data(b)
        o = self.options(cls)
        act = self._act(o.FusedActivationFunction() if o is not None else 0)
        yq = self.qof(self.outs[0])
        if const is None:
            n = self.emit(op, [self.value(a), self.value(b)])
        else:
            attrs = self._constant(b, const)
            t = attrs.pop("t")
            n = self.emit(op, [self.value(a)], **attrs)
            n.t["t"] = self.add("const", t)
        if yq is None:
            n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
            return
        dt = self.dtof(self.outs[0])
        q1, q2 = self.qof(a), self.qof(b)
        if op == "mul":
            n.attrs["m"] = tflm.mul_params(q1[0], q2[0], yq[0])
        else:
            shift = 15 if dt == "i16" else 20
            params = tflm.add_params if op == "add" else tflm.sub_params
            n.attrs["m"] = params(q1[0], q2[0], yq[0], shift)
        n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)

    def _constant(self, i, c):
        """The attributes of a constant second operand (tensor i, values c) of add, sub or mul:
        t (the values broadcast over the output's shape as far as they vary: the output's
        trailing dimensions from the first one along which they vary), shape, tq. The kernel
        repeats them over the rest."""
        _, cshape, typ, scales, _, _ = self.tensor(i)
        xtyp = self.tensor(self.outs[0])[2]
        if typ != xtyp:
            raise self.err("a %s constant with %s activations" % (typ, xtyp))
        if len(scales) > 1:
            raise self.err("a constant operand with %d scales (one per channel): one scale expected" % len(scales))
        yfull = list(self.tensor(self.outs[0])[1])
        ys = _hwc(yfull, self)
        lead = len(yfull) - len(ys)  # (the batch dimension the board's values drop)
        full = np.broadcast_to(c.reshape([1] * (len(yfull) - c.ndim) + list(c.shape)), yfull).reshape(ys)
        aligned = [1] * (len(yfull) - len(cshape)) + list(cshape)
        varies = [d - lead for d in range(len(yfull)) if aligned[d] != 1 and d >= lead]
        k = varies[0] if varies else len(ys)
        vals = full[(0,) * k] if k else full
        attrs = {"shape": tuple(ys[k:]) or (1,)}
        attrs["tq"] = "%r,%d" % self.qof(i) if typ != "FLOAT32" else None
        return dict(attrs, t=np.ascontiguousarray(vals).reshape(attrs["shape"]))

    def op_ADD(self):
        self._binary("add", "AddOptions")

    def op_SUB(self):
        self._binary("sub", "SubOptions")

    def op_MUL(self):
        self._binary("mul", "MulOptions")

    def _pool(self, op):
        x = self.value(self.ins[0])
        h, w, c = self.ir.shapes[x]
        o = self.options("Pool2DOptions")
        kh, kw, sh, sw = o.FilterHeight(), o.FilterWidth(), o.StrideH(), o.StrideW()
        pads, oh, ow = self._padding(o.Padding(), h, w, kh, kw, sh, sw, 1, 1)
        act = self._act(o.FusedActivationFunction())
        n = self.emit(op, [x], k=(kh, kw), stride=(sh, sw), pad=pads if any(pads) else None)
        yq = self.qof(self.outs[0])
        if yq is None:
            n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
        else:
            if yq != self.qof(self.ins[0]):
                raise self.err("int8 pooling with different input and output quantization")
            n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1])

    def op_AVERAGE_POOL_2D(self):
        self._pool("avgpool")

    def op_MAX_POOL_2D(self):
        self._pool("maxpool")

    def op_MEAN(self):
        x = self.value(self.ins[0])
        axes = self.data(self.ins[1])
        _, shape, _, _, _, _ = self.tensor(self.ins[0])
        if axes is None or len(shape) != 4 or any(not -4 <= int(a) < 4 for a in axes.reshape(-1)) or \
                sorted(int(a) % 4 for a in axes.reshape(-1)) != [1, 2]:
            raise self.err("only the mean over height and width of an NHWC tensor is supported")
        o = self.options("ReducerOptions")
        keep = o.KeepDims() if o is not None else False
        h, w, c = self.ir.shapes[x]
        yq = self.qof(self.outs[0])
        n = Node("mean", [x], None, self.what)
        if yq is not None:
            n.attrs["m"] = tflm.mean_params(self.qof(self.ins[0])[0], yq[0], h * w)
        y = self.define(self.outs[0])
        if keep:
            n.y = y
            self.ir.nodes.append(n)
            return
        n.y = y + ".mean"
        self.ir.shapes[n.y] = (1, 1, c)
        if yq is not None:
            self.ir.q[n.y] = yq
        self.ir.nodes.append(n)
        self.ir.nodes.append(Node("reshape", [n.y], y, self.what, shape=self.ir.shapes[y]))

    def op_PAD(self):
        x = self.value(self.ins[0])
        p = self.data(self.ins[1])
        if p is None or p.shape != (4, 2) or p[0].any() or p[3].any():
            raise self.err("only constant padding of height and width of an NHWC tensor is supported")
        yq, xq = self.qof(self.outs[0]), self.qof(self.ins[0])
        if yq != xq:
            raise self.err("int8 PAD with different input and output quantization")
        self.emit("pad", [x], pad=(int(p[1, 0]), int(p[2, 0]), int(p[1, 1]), int(p[2, 1])))

    def op_RESHAPE(self):
        x = self.value(self.ins[0])
        n = self.emit("reshape", [x])
        n.attrs["shape"] = self.ir.shapes[n.y]
        if self.qof(self.outs[0]) != self.qof(self.ins[0]):
            raise self.err("int8 RESHAPE with different input and output quantization")

    def op_SOFTMAX(self):
        x = self.value(self.ins[0])
        o = self.options("SoftmaxOptions")
        beta = float(o.Beta()) if o is not None else 1.0
        n = self.emit("softmax", [x])
        yq = self.qof(self.outs[0])
        if yq is None:
            n.attrs["beta"] = beta if beta != 1.0 else None
            return
        if self.dtof(self.ins[0]) != "i8":
            raise self.err("a SOFTMAX of %s activations is not supported (float32 and int8 are, to int8 or int16)"
                           % self.tensor(self.ins[0])[2])
        if self.dtof(self.outs[0]) == "i16":  # TFLM's int8 -> int16 softmax
            if yq[1] != -32768 or abs(yq[0] * 65536 - 1) > 1e-3:
                raise self.err("an int16 softmax output must be scale 1/65536, zero point -32768")
            n.attrs["dtype"] = "i16"
        elif yq[1] != -128 or abs(yq[0] * 256 - 1) > 1e-6:
            raise self.err("int8 softmax output must be scale 1/256, zero point -128")
        s_in = self.qof(self.ins[0])[0]
        if beta * float(np.float32(s_in)) * (1 << 26) <= 1.0:  # TFLM's Prepare asserts a multiplier > 1 (it aborts)
            raise self.err("beta %r x input scale %r: TFLM's int8 softmax needs beta x scale x 2^26 > 1" % (beta, s_in))
        n.t["t"] = self.add("exp", np.array(tflm.softmax_table(s_in, beta), dtype=np.int32))

    def op_CONCATENATION(self):
        xs = [self.value(i) for i in self.ins]
        o = self.options("ConcatenationOptions")
        _, shape, _, _, _, _ = self.tensor(self.ins[0])
        if not -len(shape) <= o.Axis() < len(shape) or o.Axis() % len(shape) != len(shape) - 1:
            raise self.err("only concatenation along the last (channel) axis is supported")
        if self._act(o.FusedActivationFunction()) is not None:
            raise self.err("a fused activation on CONCATENATION is not supported")
        yq = self.qof(self.outs[0])
        for i in self.ins:
            if self.qof(i) != yq:
                raise self.err("int8 inputs with another quantization than the output")
        self.emit("concat", xs)

    def _lut(self, table, float_op, **attrs):
        x = self.value(self.ins[0])
        if self.qof(self.ins[0]) is None:
            self.emit(float_op, [x], **attrs)
            return
        n = self.emit("lut", [x])
        n.t["t"] = self.add("lut", np.array(table(), dtype=np.int8))

    def op_LOGISTIC(self):
        self._lut(lambda: tflm.logistic_table(*self.qof(self.ins[0])), "sigmoid")

    def op_TANH(self):
        self._lut(lambda: tflm.tanh_table(*self.qof(self.ins[0])), "tanh")

    def op_RELU(self):
        def table():
            (si, zi), (so, zo) = self.qof(self.ins[0]), self.qof(self.outs[0])
            m, s = tflm.quantize_multiplier(float(np.float32(si) / np.float32(so)))
            return [max(zo, min(127, zo + tflm.mbqm(q - zi, m, s))) for q in range(-128, 128)]
        self._lut(table, "relu")

    def op_RELU6(self):
        def table():
            si, zi = self.qof(self.ins[0])
            six = max(-128, min(127, tflm.tf_round(float(np.float32(6.0) / np.float32(si))) + zi))
            return [min(max(q, zi), six) for q in range(-128, 128)]
        self._lut(table, "relu6")

    def op_LEAKY_RELU(self):
        o = self.options("LeakyReluOptions")
        alpha = float(o.Alpha())
        if self.dtof(self.ins[0]) == "i16":
            x = self.value(self.ins[0])
            (si, _), (so, _) = self.qof(self.ins[0]), self.qof(self.outs[0])
            self.emit("leakyrelu", [x], alpha=alpha, m=tflm.leaky_relu_params(si, so, alpha))
            return

        def table():
            (si, zi), (so, zo) = self.qof(self.ins[0]), self.qof(self.outs[0])
            mi, s_i, ma, sa = tflm.leaky_relu_params(si, so, alpha)
            out = []
            for q in range(-128, 128):
                v = q - zi
                v = tflm.mbqm(v, mi, s_i) if v >= 0 else (tflm.mbqm(v, abs(ma), sa) * (-1 if ma < 0 else 1))
                out.append(max(-128, min(127, zo + v)))
            return out
        self._lut(table, "leakyrelu", alpha=alpha)

    def op_QUANTIZE(self):
        x = self.value(self.ins[0])
        xq, yq = self.qof(self.ins[0]), self.qof(self.outs[0])
        xd, yd = self.dtof(self.ins[0]), self.dtof(self.outs[0])
        if yq is None:
            raise self.err("QUANTIZE to %s is not supported (int8, int16 and int32 are)" % self.tensor(self.outs[0])[2])
        if xq is None:
            self.emit("quantize", [x], dtype=yd if yd != "i8" else None)
            return
        m, s = tflm.requantize_params(xq[0], yq[0])
        if xd in ("i8", "u8") and yd in ("i8", "u8"):  # int8 -> int8, uint8 <-> int8: a table of the output's
            lo, hi = tflm.RANGE[yd]  # bytes, indexed by the input's byte as int8 + 128 (a uint8 code b at b ^ 128)
            codes = [i ^ 128 if xd == "u8" else i - 128 for i in range(256)]
            ys = [max(lo, min(hi, yq[1] + tflm.mbqm(q - xq[1], m, s))) for q in codes]
            n = self.emit("lut", [x], dtype="u8" if yd == "u8" else None)
            n.t["t"] = self.add("lut", np.array(ys, dtype=np.int64).astype(np.uint8).view(np.int8))
            return
        self.emit("quantize", [x], dtype=yd if yd != "i8" else None, m=(m, s))

    def op_DEQUANTIZE(self):
        x = self.value(self.ins[0])
        if self.qof(self.ins[0]) is None:
            raise self.err("DEQUANTIZE of a %s tensor is not supported (of an integer one)" % self.tensor(self.ins[0])[2])
        self.emit("dequantize", [x])

    def op_STRIDED_SLICE(self):
        x = self.value(self.ins[0])
        begin, end, strides = (self.data(i) for i in self.ins[1:4])
        if begin is None or end is None or strides is None:
            raise self.err("begin, end and strides must be constants")
        o = self.options("StridedSliceOptions")
        _, shape, _, _, _, _ = self.tensor(self.ins[0])
        nd = len(shape)
        if o is not None and (o.EllipsisMask() or o.NewAxisMask() or o.ShrinkAxisMask()
                              or (o.Offset() if hasattr(o, "Offset") else 0)):
            raise self.err("ellipsis, new-axis, shrink-axis masks and offset are not supported")
        bm, em = (o.BeginMask(), o.EndMask()) if o is not None else (0, 0)
        b, e, st = [], [], []
        for d in range(nd):
            size, s_ = int(shape[d]), int(strides[d])
            if s_ < 1:
                raise self.err("negative or zero strides are not supported")
            lo = 0 if bm & (1 << d) else int(begin[d])
            hi = size if em & (1 << d) else int(end[d])
            lo = max(0, min(size, lo + size if lo < 0 else lo))  # TFLM's StartForAxis / StopForAxis
            hi = max(0, min(size, hi + size if hi < 0 else hi))
            b.append(lo)
            e.append(hi)
            st.append(s_)
        b0, e0, st0 = list(b), list(e), list(st)
        if nd > 1 and int(shape[0]) == 1:  # the batch: the board's values have none
            if (b[0], e[0]) != (0, 1):
                raise self.err("a slice of the batch dimension")
            b, e, st = b[1:], e[1:], st[1:]
        if any(hi <= lo for lo, hi in zip(b, e)):
            raise self.err("an empty slice")
        want = [(hi - lo + s_ - 1) // s_ for lo, hi, s_ in zip(b0, e0, st0)]
        if list(self.tensor(self.outs[0])[1]) != want:  # (TFLM's Prepare compares them)
            raise self.err("output of shape %s for a slice of shape %s" % (list(self.tensor(self.outs[0])[1]), want))
        self.emit("slice", [x], begin=tuple(b), end=tuple(e), stride=tuple(st) if any(v != 1 for v in st) else None)

    def op_TRANSPOSE(self):
        x = self.value(self.ins[0])
        perm = self.data(self.ins[1])
        if perm is None:
            raise self.err("the permutation must be a constant")
        perm = [int(v) for v in perm.reshape(-1)]
        _, shape, _, _, _, _ = self.tensor(self.ins[0])
        if len(perm) == 4 and int(shape[0]) == 1 and perm[0] == 0:  # the batch stays first
            perm = [v - 1 for v in perm[1:]]
        elif len(perm) == 4:
            raise self.err("a transpose that moves the batch dimension")
        self.emit("transpose", [x], perm=tuple(perm))

    def op_TRANSPOSE_CONV(self):
        # inputs: output_shape (int32 [4]: a constant, or a model input: the output tensor's
        # shape is static, so it is read from there), weights OHWI, input, bias (optional)
        shape_t, w_t, x_t = self.ins[0], self.ins[1], self.ins[2]
        x = self.value(x_t)
        w = self.data(w_t)
        if w is None:
            raise self.err("the filter must be a constant")
        _, _, _, wscales, wzps, _ = self.tensor(w_t)
        if any(wzps):
            raise self.err("weights with a non-zero zero point")
        _check_scales(self, wscales, w)
        bias = self.data(self.ins[3]) if len(self.ins) > 3 and self.ins[3] >= 0 else None
        o = self.options("TransposeConvOptions")
        _, oshape, _, _, _, _ = self.tensor(self.outs[0])
        if len(oshape) != 4 or oshape[0] != 1:
            raise self.err("the output must be 1, H, W, C")
        oh, ow, oc = int(oshape[1]), int(oshape[2]), int(oshape[3])
        kh, kw = int(w.shape[1]), int(w.shape[2])
        sh, sw = o.StrideH(), o.StrideW()
        pads, _, _ = self._padding(o.Padding(), oh, ow, kh, kw, sh, sw, 1, 1)  # TFLM: from the output's size
        act = self._act(o.FusedActivationFunction() if hasattr(o, "FusedActivationFunction") else 0)
        xq, yq = self.qof(x_t), self.qof(self.outs[0])
        if yq is None and w.dtype == np.int8:
            raise self.err(HYBRID)
        if yq is None:
            raise self.err("a float TRANSPOSE_CONV is not supported (int8 and 16x8 are)")
        if w.dtype != np.int8:
            raise self.err("quantized model with %s weights (only int8 weights are supported)" % w.dtype)
        dt = self.dtof(self.outs[0])
        n = self.emit("tconv", [x], out=oc, k=(kh, kw), stride=(sh, sw) if (sh, sw) != (1, 1) else None,
                      pad=(pads[0], pads[1]) if any(pads[:2]) else None, size=(oh, ow))
        scales = list(wscales) if len(wscales) > 1 else list(wscales) * oc
        n.t["w"] = self.add("weight", w)
        self.ir.wquant[n.t["w"]] = (np.asarray(scales, np.float32), 0)
        if bias is not None:
            if dt == "i8" and bias.dtype != np.int32 or dt == "i16" and bias.dtype not in (np.int64, np.int32):
                raise self.err("a %s bias (int32 for int8, int64 for 16x8 expected)" % bias.dtype)
            if np.any(np.abs(bias.astype(np.int64)) > 2 ** 31 - 1):
                raise self.err("a bias beyond int32: not supported (the container stores int32)")
            n.t["b"] = self.add("bias", bias.astype(np.int32))
        mult, shift = tflm.conv_multipliers(xq[0], scales, yq[0])
        self._check_shifts(shift, 7 if dt == "i16" else 30)
        n.t["m"] = self.add("requant", np.array([mult, shift], dtype=np.int32))
        n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1], dt)


    # --- elementwise ops, cast, resize ------------------------------------------------------

    def op_HARD_SWISH(self):
        def table():
            try:
                return tflm.hard_swish_table(*(self.qof(self.ins[0]) + self.qof(self.outs[0])))
            except ValueError as e:
                raise self.err(str(e))
        self._lut(table, "hardswish")

    def _operands(self, commutes):
        """(activation, other): other a value name, or (constant codes, their shape attr)."""
        a, b = self.ins[:2]
        if self.data(a) is not None and commutes:
            a, b = b, a
        if self.data(a) is not None:
            raise self.err("the first operand must be an activation")
        x = self.value(a)
        c = self.data(b)
        if c is None:
            y = self.value(b)
            sx, sy = self.ir.shapes[x], self.ir.shapes[y]
            if int(np.prod(sx)) < int(np.prod(sy)):
                if not commutes:
                    raise self.err("only the second operand may be broadcast")
                x, y, sx, sy = y, x, sy, sx
            if sy != sx and int(np.prod(sy)) not in (1, sx[-1]):
                raise self.err("shapes %s and %s: equal, one per channel or one value" % (sx, sy))
            return x, y
        if self.dtof(b) != self.dtof(a):
            raise self.err("a %s constant with a %s activation" % (self.tensor(b)[2], self.tensor(a)[2]))
        shape = self.ir.shapes[x]
        if c.size == 1:
            return x, (c.reshape(1), (1,))
        if c.size == shape[-1] and c.shape[-1] == c.size:
            return x, (c.reshape(-1), None)
        if c.size == int(np.prod(shape)):
            return x, (c.reshape(shape), shape)
        raise self.err("a constant of shape %s over %s: one value, one per channel or the same shape"
                       % (list(c.shape), list(shape)))

    def _minmax(self, op):
        x, other = self._operands(True)
        if isinstance(other, str):
            self.emit(op, [x, other])
            return
        n = self.emit(op, [x], shape=other[1])
        n.t["t"] = self.add("const", other[0])

    def op_MINIMUM(self):
        self._minmax("minimum")

    def op_MAXIMUM(self):
        self._minmax("maximum")

    def op_CAST(self):
        x = self.value(self.ins[0])
        for t in (self.ins[0], self.outs[0]):
            if self.tensor(t)[2] not in ("FLOAT32",) + tuple(_INT):
                raise self.err("CAST of %s is not supported (float32, int8, int16, int32)" % self.tensor(t)[2])
        self.emit("cast", [x], dtype=self.dtof(self.outs[0]))

    def op_DIV(self):
        x, y = self._operands(False)
        if not isinstance(y, str):
            raise self.err("a constant divisor is not supported (the converter makes it a MUL)")
        o = self.options("DivOptions")
        act = self._act(o.FusedActivationFunction() if o is not None else 0)
        n = self.emit("div", [x, y])
        yq = self.qof(self.outs[0])
        if yq is None:
            n.attrs["act"] = act or "finite"  # (TFLite clamps to float32's range)
            return
        if self.dtof(self.outs[0]) != "i8":
            raise self.err("%s DIV is not supported (float32 and int8 are)" % self.tensor(self.outs[0])[2])
        (s1, _), (s2, _) = self.qof(self.ins[0]), self.qof(self.ins[1])
        n.attrs["m"] = tflm.div_params(s1, s2, yq[0])
        if n.attrs["m"][1] > 22:
            raise self.err("a DIV multiplier above 2**22 is not supported")
        n.t["t"] = self.add("recip", np.array(tflm.reciprocal_table(), np.int32))
        n.attrs["clamp"] = tflm.activation_range(act, yq[0], yq[1])

    def _resize(self, bilinear, cls):
        x = self.value(self.ins[0])
        size = self.data(self.ins[1])
        if size is None or size.shape != (2,):  # (TFLM's Prepare: one dimension of 2)
            raise self.err("the size must be a constant of 2 integers, shape [2]")
        if len(self.ir.shapes[x]) != 3:
            raise self.err("the input must be 1, H, W, C")
        o = self.options(cls)
        align = bool(o.AlignCorners()) if o is not None else False
        half = bool(o.HalfPixelCenters()) if o is not None else False
        if align and half and bilinear:
            raise self.err("align_corners and half_pixel_centers together (TFLM refuses them)")
        dt = self.dtof(self.ins[0])
        if bilinear and dt not in ("i8", "f32"):
            raise self.err("a RESIZE_BILINEAR of %s activations is not supported (TFLM runs float32 and int8)"
                           % self.tensor(self.ins[0])[2])
        if self.qof(self.outs[0]) != self.qof(self.ins[0]):
            raise self.err("different input and output quantization")
        oh, ow = (int(v) for v in size.reshape(-1))
        yshape = list(self.tensor(self.outs[0])[1])
        if yshape[1:3] != [oh, ow]:  # (TFLM's output is the size's: the tensor must say so)
            raise self.err("size %d x %d for an output of shape %s" % (oh, ow, yshape))
        n = self.emit("resize", [x], size=(oh, ow), interp="bilinear" if bilinear else None)
        n.t["t"] = self.add("coords", tflm.resize_table(self.ir.shapes[x], (oh, ow), bilinear, align, half,
                                                        integer=dt != "f32"))
        n.tflite_flags = (align, half)  # (a float model made int8 gets TFLM's integer coordinates)

    def op_RESIZE_NEAREST_NEIGHBOR(self):
        self._resize(False, "ResizeNearestNeighborOptions")

    def op_RESIZE_BILINEAR(self):
        self._resize(True, "ResizeBilinearOptions")

    def op_PRELU(self):
        x, alpha = self._operands(False)
        if isinstance(alpha, str):
            raise self.err("alpha must be a constant")
        codes, shape = alpha
        yq = self.qof(self.outs[0])
        n = self.emit("prelu", [x], shape=shape)
        n.t["w"] = self.add("alpha", codes)
        if yq is None:
            return
        if self.dtof(self.outs[0]) != "i8":
            raise self.err("%s PRELU is not supported (float32 and int8 are)" % self.tensor(self.outs[0])[2])
        xq, aq = self.qof(self.ins[0]), self.qof(self.ins[1])
        m1, s1, m2, s2 = tflm.prelu_params(xq[0], aq[0], yq[0])
        n.attrs["m"] = (m2, s2, aq[1])
        n.t["t"] = self.add("lut", np.array(tflm.prelu_table(xq[1], yq[1], m1, s1), np.int8))
    # --- recurrent ops --------------------------------------------------------------------

    _LSTM_VARIANTS = ((9, "peephole"), (10, "peephole"), (11, "peephole"), (16, "projection"),
                      (17, "projection"), (20, "layer normalization"), (21, "layer normalization"),
                      (22, "layer normalization"), (23, "layer normalization"))

    def op_UNIDIRECTIONAL_SEQUENCE_LSTM(self):
        """TFLM's standard LSTM (no peephole, projection, layer norm nor CIFG), batch 1: int8
        (int16 cell state) or float. Its state tensors are variables: the state persists from
        one call to the next (state=keep), as in TFLM."""
        ins = list(self.ins) + [-1] * (24 - len(self.ins))
        for i, what in self._LSTM_VARIANTS:
            if ins[i] >= 0:
                raise self.err("an LSTM with %s is not supported (the standard LSTM is)" % what)
        if ins[1] < 0 or ins[5] < 0 or ins[12] < 0:
            raise self.err("a coupled input-forget gate (CIFG) LSTM is not supported")
        o = self.options("UnidirectionalSequenceLSTMOptions")
        if o.FusedActivationFunction() != 4:
            raise self.err("only a tanh cell activation is supported (has %d)" % o.FusedActivationFunction())
        if o.ProjClip() > 0:
            raise self.err("a projection clip is not supported")
        x = self.value(ins[0])
        _, xshape, xtyp, _, _, _ = self.tensor(ins[0])
        if len(xshape) != 3 or (xshape[1] if o.TimeMajor() else xshape[0]) != 1:
            raise self.err("input of shape %s: the board runs batch 1 (batch, steps, features)" % (xshape,))
        steps, nin = int(xshape[0] if o.TimeMajor() else xshape[1]), int(xshape[2])
        for i in (18, 19):
            t = self.sg.Tensors(ins[i])
            if not t.IsVariable() or self.data(ins[i]) is not None:
                raise self.err("state tensor %d is not a variable" % ins[i])
        ws = [self.data(ins[i]) for i in range(1, 9)]
        bs = [self.data(ins[i]) for i in range(12, 16)]
        if any(w is None for w in ws) or any(b is None for b in bs):
            raise self.err("the weights and biases must be constants")
        hid = int(ws[0].shape[0])
        for w, n in zip(ws, (nin,) * 4 + (hid,) * 4):
            if w.shape != (hid, n):
                raise self.err("a weight of shape %s (expected %s)" % (w.shape, (hid, n)))
        for i in (18, 19):  # TFLM's Prepare: (batch, units)
            if list(self.tensor(ins[i])[1]) != [1, hid]:
                raise self.err("state tensor %d of shape %s (expected [1, %d])" % (ins[i], list(self.tensor(ins[i])[1]), hid))
        w = np.concatenate(ws[:4])  # gates i, f, c, o (TFLite's tensor order)
        r = np.concatenate(ws[4:])
        clip = float(np.float32(o.CellClip()))
        if o.TimeMajor() and steps > 1:  # batch 1: (steps, 1, in) holds the rows of (steps, in)
            x = self._reshape(x, (steps, nin))
        attrs = dict(out=hid, state="keep", clip=clip if clip > 0 else None)
        yq = self.qof(self.outs[0])
        if xtyp == "FLOAT32":
            if any(v.dtype != np.float32 for v in ws + bs) or self.dtof(ins[18]) != "f32" or yq is not None:
                raise self.err("a hybrid LSTM (float activations, integer weights) is not supported")
            n = self._lstm_node(x, steps, hid, o.TimeMajor(), **attrs)
            n.t["w"], n.t["r"] = self.add("weight", w), self.add("recurrent", r)
            n.t["b"] = self.add("bias", np.concatenate(bs).astype(np.float32))
            return
        if xtyp != "INT8" or any(v.dtype != np.int8 for v in ws) or any(v.dtype != np.int32 for v in bs):
            raise self.err("a %s LSTM is not supported (int8 with int8 weights and int32 biases, and "
                           "float, are)" % xtyp.lower())
        xq, hq = self.qof(ins[0]), self.qof(ins[18])
        _, _, ctyp, cscales, czps, _ = self.tensor(ins[19])
        if self.dtof(ins[18]) != "i8" or hq != yq:
            raise self.err("the hidden state must be int8 with the output's quantization")
        if ctyp != "INT16" or len(cscales) != 1 or any(czps):
            raise self.err("the cell state must be int16, symmetric")
        scales = []
        for i in range(1, 9):
            _, _, _, sc, zps, _ = self.tensor(ins[i])
            if len(sc) != 1 or any(zps):
                raise self.err("per-channel or asymmetric LSTM weights are not supported")
            scales.append(float(sc[0]))
        s_cell = float(np.float32(cscales[0]))
        try:
            bx = tflm.fold_input_zero_point(np.concatenate(bs), w, 0, xq[1])
            bh = tflm.fold_input_zero_point(None, r, 0, hq[1])
        except ValueError as e:
            raise self.err(str(e))
        n = self._lstm_node(x, steps, hid, o.TimeMajor(), cell=tflm.lstm_cell_power(s_cell), **attrs)
        n.t["w"], n.t["r"] = self.add("weight", w), self.add("recurrent", r)
        for key, sc in (("w", scales[:4]), ("r", scales[4:])):  # each gate's scale on its rows
            self.ir.wquant[n.t[key]] = (np.repeat(np.asarray(sc, np.float32), hid), 0)
        n.t["b"] = self.add("bias", np.concatenate([bx, bh]))
        n.t["m"] = self.add("requant", np.array(tflm.lstm_params(xq[0], scales[:4], hq[0], scales[4:], s_cell, hid),
                                                dtype=np.int32))
        n.t["t"] = self.add("sigmoid", np.array(tflm.SIGMOID16, dtype=np.int32).astype(np.uint16).view(np.int16))

    def _reshape(self, x, shape):
        y = "%s.%d" % (x, len(self.ir.nodes))
        self.ir.shapes[y] = tuple(shape)
        if x in self.ir.q:
            self.ir.q[y] = self.ir.q[x]
        self.ir.nodes.append(Node("reshape", [x], y, self.what, shape=tuple(shape)))
        return y

    def _lstm_node(self, x, steps, hid, time_major, **attrs):
        y = self.define(self.outs[0])
        n = Node("lstm", [x], y, self.what, **{k: v for k, v in attrs.items() if v is not None})
        if time_major and steps > 1:
            n.y = y + ".seq"
            self.ir.shapes[n.y] = (steps, hid)
            if y in self.ir.q:
                self.ir.q[n.y] = self.ir.q[y]
            self.ir.nodes.append(n)
            self.ir.nodes.append(Node("reshape", [n.y], y, self.what, shape=self.ir.shapes[y]))
        else:
            self.ir.nodes.append(n)
        return n

    def op_SVDF(self):
        """TFLM's integer SVDF (int8 input and output, int16 or int8 state and time weights)."""
        if len(self.ins) != 5 or min(self.ins) < 0:
            raise self.err("SVDF needs its five inputs (input, feature and time weights, bias, state)")
        o = self.options("SVDFOptions")
        x = self.value(self.ins[0])
        wf, wt, b = (self.data(i) for i in self.ins[1:4])
        if wf is None or wt is None or b is None:
            raise self.err("the weights and the bias must be constants")
        _, xshape, xtyp, _, _, _ = self.tensor(self.ins[0])
        if len(xshape) != 2 or xshape[0] != 1:
            raise self.err("input of shape %s: the board runs batch 1 (batch, features)" % (xshape,))
        if xtyp == "FLOAT32":
            raise self.err("a float SVDF is not supported (TFLM's integer SVDF is)")
        st = self.sg.Tensors(self.ins[4])
        _, sshape, styp, sscales, szps, _ = self.tensor(self.ins[4])
        if not st.IsVariable() or self.data(self.ins[4]) is not None:
            raise self.err("the state tensor is not a variable")
        sdt = {"INT16": "i16", "INT8": "i8"}.get(styp)
        if xtyp != "INT8" or wf.dtype != np.int8 or sdt is None or wt.dtype != {"i16": np.int16, "i8": np.int8}[sdt] \
                or b.dtype != np.int32:
            raise self.err("an SVDF of %s input, %s/%s weights and a %s state is not supported (int8 input, int8 "
                           "feature weights, int16 or int8 time weights and state)" % (xtyp, wf.dtype, wt.dtype, styp))
        rank = o.Rank()
        filters, mem = int(wf.shape[0]), int(wt.shape[1])
        if rank < 1 or filters % rank or wt.shape[0] != filters or wf.shape[1] != xshape[1]:
            raise self.err("weights of shapes %s and %s do not fit rank %d" % (wf.shape, wt.shape, rank))
        scale = []
        for i in self.ins[1:3]:
            _, _, _, sc, zps, _ = self.tensor(i)
            if len(sc) != 1 or any(zps):
                raise self.err("per-channel or asymmetric SVDF weights are not supported")
            scale.append(float(sc[0]))
        if len(self.ins) > 3 and self.ins[3] >= 0:  # TFLM's Prepare: the bias on the state x time scale
            bsc = self.tensor(self.ins[3])[3]
            want = float(np.float32(float(np.float32(sscales[0])) * scale[1])) if len(sscales) else 0.0
            if not len(bsc) or abs(float(np.float32(bsc[0])) - want) >= 1e-5:
                raise self.err("bias scale %r: TFLM takes state scale x time weight scale (%r) within 1e-5"
                               % (float(bsc[0]) if len(bsc) else None, want))
        if list(sshape) != [1, filters * mem]:  # TFLM's Prepare: (batch, memory x filters)
            raise self.err("state of shape %s: TFLM takes (1, %d)" % (list(sshape), filters * mem))
        xq, yq = self.qof(self.ins[0]), self.qof(self.outs[0])
        sq = (float(np.float32(sscales[0])), szps[0] if szps else 0)
        n = self.emit("svdf", [x], out=filters // rank, rank=rank, memory=mem, sq="%r,%d" % sq,
                      sdtype=sdt if sdt != "i16" else None,
                      m=tflm.svdf_params(xq[0], scale[0], sq[0], scale[1], yq[0]))
        n.t["w"], n.t["t"], n.t["b"] = self.add("weight", wf), self.add("time", wt), self.add("bias", b)


def _check_scales(r, scales, w):
    if w.dtype == np.int8 and (not len(scales) or not all(np.isfinite(s) and s > 0 for s in scales)):
        raise r.err("int8 weights need finite scales > 0")


def _hwc(shape, r):
    """A TFLite activation shape as the board's: [1, H, W, C] -> (H, W, C), [1, N] -> (N,)."""
    s = list(shape)
    if s and s[0] == 1 and len(s) > 1:
        s = s[1:]
    elif len(s) == 4 and s[0] != 1:
        raise r.err("batch %d: the board runs batch 1" % s[0])
    if not 1 <= len(s) <= 3 or any(d < 1 for d in s):
        raise r.err("tensor shape %s is not supported" % (shape,))
    return tuple(s)
