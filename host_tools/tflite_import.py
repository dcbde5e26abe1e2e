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
the op. Each operator's conversion is in the module of host_tools/ops named after its op
(ROOMS); this module walks the model and holds what the ops share."""
import importlib

import numpy as np

from . import tflite_check, tflm
from .container import PackError
from .ir import Graph, Node
from .ops import HYBRID, INT

# every supported builtin -> the module of host_tools/ops converting it (op_<BUILTIN>), as the
# runtime's rooms are named (mpy_lazy/ops/<room>.py)
ROOMS = {
    "CONV_2D": "conv", "DEPTHWISE_CONV_2D": "conv", "FULLY_CONNECTED": "linear", "ADD": "binary", "SUB": "binary",
    "MUL": "binary", "AVERAGE_POOL_2D": "pool", "MAX_POOL_2D": "pool", "MEAN": "mean", "PAD": "pad",
    "RESHAPE": "reshape", "SOFTMAX": "softmax", "CONCATENATION": "concat", "LOGISTIC": "act", "TANH": "act",
    "QUANTIZE": "quant", "DEQUANTIZE": "quant", "RELU": "act", "RELU6": "act", "LEAKY_RELU": "act",
    "STRIDED_SLICE": "slice", "TRANSPOSE": "slice", "TRANSPOSE_CONV": "tconv", "HARD_SWISH": "act",
    "MINIMUM": "elementwise", "MAXIMUM": "elementwise", "CAST": "cast", "DIV": "elementwise",
    "RESIZE_NEAREST_NEIGHBOR": "resize", "RESIZE_BILINEAR": "resize", "PRELU": "elementwise",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "lstm", "SVDF": "svdf",
    "SQUEEZE": "reshape", "EXPAND_DIMS": "reshape", "SLICE": "slice", "SPLIT": "slice", "SPLIT_V": "slice",
    "UNPACK": "slice", "PACK": "concat", "PADV2": "pad", "MIRROR_PAD": "pad",
    "DEPTH_TO_SPACE": "slice", "SPACE_TO_DEPTH": "slice", "SHAPE": "reshape",
}
ROOMS.update({"CUSTOM " + name: "signal" for name in (  # TFLM's signal library (custom ops)
    "SignalWindow", "SignalFftAutoScale", "SignalRfft", "SignalEnergy", "SignalFilterBank",
    "SignalFilterBankSquareRoot", "SignalFilterBankSpectralSubtraction", "SignalPCAN", "SignalFilterBankLog",
    "SignalDelay")})
SUPPORTED = tuple(ROOMS)
# computed at pack time when every input is a constant (SHAPE: always, from the static shape): the
# shape arithmetic of a Keras Flatten on a dynamic batch, SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE;
# with an input computed on the board, STRIDED_SLICE, PACK and CONCATENATION run there
FOLDABLE = ("SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION")
_ACTS = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}


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
        if typ == "UINT64":  # (SignalFilterBank's: lo, hi uint32 words)
            shape = list(shape[:-1]) + [2 * shape[-1]] if shape else [2]
        self.ir.shapes[name] = _hwc(shape, self)
        if typ in ("UINT32", "UINT64") and not scales:  # the signal ops': int32 values of the same bits
            self.ir.q[name] = (1.0, 0)
            self.ir.dtypes[name] = "i32"
        elif typ in INT and not scales:  # not quantized (CAST's integers): value = code
            self.ir.q[name] = (1.0, 0)
            if INT[typ] != "i8":
                self.ir.dtypes[name] = INT[typ]
        elif typ in INT:
            dt = INT[typ]
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
        if typ in INT and not scales:
            return (1.0, 0)
        return (float(np.float32(scales[0])), zps[0] if zps else 0) if typ in INT else None

    def dtof(self, i):
        """The graph dtype of tensor i: f32, i8, i16 or i32 (uint32: its bits)."""
        typ = self.tensor(i)[2]
        return "i32" if typ == "UINT32" else INT.get(typ, "f32")

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
            self.opname = name.lower().replace("custom ", "")
            self.opidx = self.count.get(name, 0)
            self.count[name] = self.opidx + 1
            self.op = op
            self.ins = [op.Inputs(j) for j in range(op.InputsLength())]
            self.outs = [op.Outputs(j) for j in range(op.OutputsLength())]
            try:
                if name in FOLDABLE and self._fold(name):
                    continue
                with np.errstate(all="ignore"):  # (a ratio of hostile scales overflows float32 to inf:
                    converter(name)(self)  # refused below in one line, without numpy's warning)
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
        static shapes). False: the op runs on the board (host_tools/ops), or its op_ refuses it."""
        _, yshape, ytyp, yscales, _, _ = self.tensor(self.outs[0])
        if ytyp not in ("INT32", "INT64") or yscales:
            if name == "SHAPE":
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


def converter(name):
    """op_<name>(reader): the conversion of TFLite builtin `name` (host_tools/ops/<room>.py)."""
    return getattr(importlib.import_module(".ops." + ROOMS[name], __package__), "op_" + name.replace("CUSTOM ", ""))


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
