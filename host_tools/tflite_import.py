""".tflite -> graph (host_tools.ir), read with the `tflite` package (the TFLite flatbuffer schema
on the flatbuffers runtime; no hand-written parsing).

TFLite graphs are NHWC already, as the board runs them: weights keep their layout (conv OHWI,
depthwise [1, kh, kw, C], fully connected [out, in]) and their int8 codes. Each op's integer
parameters are computed as TensorFlow Lite Micro's Prepare computes them (host_tools.tflm), so
the board reproduces TFLM's outputs bit for bit. Elementwise int8 ops (LOGISTIC, TANH, RELU,
RELU6, LEAKY_RELU, HARD_SWISH, int8 QUANTIZE) become 256-entry tables of TFLM's own integer
results. Hybrid models (the converter's dynamic-range mode: float activations, int8 weights)
are refused, as TFLM refuses them.
Legacy uint8 models (TFLite's old asymmetric quantization: uint8 activations and weights, each
with a zero point; TFLM refuses them) are read as int8 ones: every uint8 code u as the int8 code
u - 128 with its zero point - 128, which leaves each kernel's integers as TFLite's uint8 kernels
compute them, the weights' zero point kept as `wz=` (conv2d, depthwise; FULLY_CONNECTED as a 1x1
conv2d) and avgpool's halves rounded up (`round=up`). The model's uint8 inputs and outputs stay
uint8 (a table each way).
A model with any other op, or a form of an op the board cannot run, raises PackError naming
the op. Each operator's conversion is in the module of host_tools/ops named after its op
(ROOMS); this module walks the model and holds what the ops share."""
import importlib

import numpy as np

from . import tflite_check, tflm
from .container import PackError
from .ir import Graph, Node
from .ops import HYBRID, INT, variable

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
    "ABS": "act",
    "GATHER": "slice",
    "REVERSE_V2": "slice",
    "BROADCAST_TO": "slice",
    "BROADCAST_ARGS": "slice",
    "SPACE_TO_BATCH_ND": "slice",
    "BATCH_TO_SPACE_ND": "slice",
    "GATHER_ND": "index",
    "EMBEDDING_LOOKUP": "index",
    "DYNAMIC_UPDATE_SLICE": "index",
    "VAR_HANDLE": "variable", "READ_VARIABLE": "variable", "ASSIGN_VARIABLE": "variable", "CALL_ONCE": "variable",
    "SUM": "reduce", "REDUCE_MAX": "reduce", "REDUCE_MIN": "reduce", "ARG_MAX": "reduce", "ARG_MIN": "reduce",
    "CUMSUM": "cumsum", "BATCH_MATMUL": "matmul",
    "LOG_SOFTMAX": "normalize", "L2_NORMALIZATION": "normalize", "L2_POOL_2D": "normalize",
    "NEG": "unary", "SQRT": "unary", "RSQRT": "unary", "SQUARE": "unary", "EXP": "unary", "LOG": "unary",
    "SIN": "unary", "COS": "unary", "FLOOR": "unary", "CEIL": "unary", "ROUND": "unary", "ELU": "unary",
    "EQUAL": "compare", "NOT_EQUAL": "compare", "LESS": "compare", "LESS_EQUAL": "compare", "GREATER": "compare",
    "GREATER_EQUAL": "compare", "LOGICAL_AND": "compare", "LOGICAL_OR": "compare", "LOGICAL_NOT": "compare",
    "SELECT_V2": "compare", "ZEROS_LIKE": "const", "FILL": "const",
    "SQUARED_DIFFERENCE": "arith", "FLOOR_DIV": "arith", "FLOOR_MOD": "arith", "ADD_N": "arith",
    "IF": "control", "WHILE": "control",
    "REDUCE_ALL": "reduce",
}
ROOMS.update({"CUSTOM " + name: "signal" for name in (  # TFLM's signal library (custom ops)
    "SignalWindow", "SignalFftAutoScale", "SignalRfft", "SignalEnergy", "SignalFilterBank",
    "SignalFilterBankSquareRoot", "SignalFilterBankSpectralSubtraction", "SignalPCAN", "SignalFilterBankLog",
    "SignalDelay",
    "SignalStacker",
    "SignalFramer",
    "SignalOverlapAdd",
    "SignalIrfft")})
SUPPORTED = tuple(ROOMS)
# a legacy uint8 model's ops: those whose TFLite uint8 kernels the tests prove bit for bit
# (tests/host/test_legacy.py, against TFLite's own interpreter; TFLM runs no uint8 model)
LEGACY = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE",
          "SOFTMAX", "ADD", "CONCATENATION", "SPLIT",
          "DEQUANTIZE")  # (DEQUANTIZE: TFLM takes uint8 too: tests/host/test_tflite_types.py)
# computed at pack time when every input is a constant (SHAPE: always, from the static shape): the
# shape arithmetic of a Keras Flatten on a dynamic batch, SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE;
# with an input computed on the board, STRIDED_SLICE, PACK and CONCATENATION run there
FOLDABLE = ("SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION", "BROADCAST_ARGS", "BROADCAST_TO", "ADD", "SUB", "MUL", "LESS", "LESS_EQUAL",
            "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")
# int32 arithmetic of constants (a WHILE loop's counter), and comparisons and logic giving a bool:
# computed at pack time when their inputs are constants (else they run on the board: ops/compare.py)
ARITHMETIC = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}
COMPARISONS = {"LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
               "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "LOGICAL_AND": np.logical_and,
               "LOGICAL_OR": np.logical_or, "LOGICAL_NOT": np.logical_not}
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
        self.folded = {}  # (prefix, tensor) -> its value, computed at pack time (FOLDABLE)
        self.prefix = ""  # of the value names of the subgraph being converted (an inlined IF / WHILE's)
        self.alias = {}  # value name -> the value it is (an inlined subgraph's inputs and its caller's outputs)
        self.views = {}  # value name -> its TFLite shape, of more dimensions than the board's values (_hwc)
        self.opname = ""
        try:
            self.legacy = self._legacy()
        except Exception:  # damage the checks then name (in the operator it is in)
            self.legacy = False

    def err(self, msg):
        return PackError("%s: %s" % (self.what, msg))

    # --- tensors --------------------------------------------------------------------------

    def tensor(self, i, raw=False):
        """(tensor, shape, type, scales, zero points, quantized dimension); a legacy model's
        uint8 tensors as int8 ones (zero points - 128) unless `raw`."""
        t = self.sg.Tensors(i)
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        q = t.Quantization()
        scales = list(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else []
        zps = [int(z) for z in q.ZeroPointAsNumpy()] if q is not None and q.ZeroPointLength() else []
        qdim = q.QuantizedDimension() if q is not None else 0
        typ = self.types.get(t.Type(), str(t.Type()))
        if self.legacy and typ == "UINT8" and scales and not raw:  # (unquantized uint8, CAST's: as it is)
            typ, zps = "INT8", [z - 128 for z in (zps or [0] * len(scales))]
        return t, shape, typ, scales, zps, qdim

    def _legacy(self):
        """Whether this is a legacy uint8 model: an op other than QUANTIZE takes or gives a quantized
        uint8 activation (uint8 weights alone are not one: the checks refuse those)."""
        sg = self.sg
        for k in range(sg.OperatorsLength()):
            op = sg.Operators(k)
            code = self.model.OperatorCodes(op.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == self.tfl.BuiltinOperator.QUANTIZE:
                continue
            for i in list(op.InputsAsNumpy()) + list(op.OutputsAsNumpy()) if op.InputsLength() else []:
                t = sg.Tensors(int(i)) if 0 <= i < sg.TensorsLength() else None  # (a bad index: the checks name it)
                q = t.Quantization() if t is not None else None
                if t is not None and t.Type() == self.tfl.TensorType.UINT8 and q is not None and q.ScaleLength():
                    b = self.model.Buffers(t.Buffer()) if 0 <= t.Buffer() < self.model.BuffersLength() else None
                    if b is None or b.DataLength() == 0:
                        return True
        return False

    def data(self, i):
        """A constant tensor's values (None for an activation); a folded op's output too."""
        if (self.prefix, i) in self.folded:
            return self.folded[(self.prefix, i)]
        t, shape, typ, scales, _, _ = self.tensor(i, raw=True)
        b = self.model.Buffers(t.Buffer())
        if b is None or b.DataLength() == 0:
            return None
        if self.legacy and typ == "UINT8" and scales:  # (its codes u as int8 u - 128: the byte u ^ 128)
            return (np.frombuffer(b.DataAsNumpy().tobytes(), dtype=np.uint8) ^ 128).view(np.int8).reshape(shape)
        dt = {"INT8": np.int8, "INT32": np.int32, "FLOAT32": np.float32, "INT64": np.int64,
              "UINT8": np.uint8, "INT16": np.int16, "FLOAT16": np.float16, "BOOL": np.bool_}.get(typ)
        if dt is None:
            raise self.err("constant tensor of type %s is not supported" % typ)
        return np.frombuffer(b.DataAsNumpy().tobytes(), dtype=dt).reshape(shape)

    def value(self, i):
        """The graph value of tensor i (an activation), registering its quantization."""
        name = self.prefix + "t%d" % i
        name = self.alias.get(name, name)
        if name not in self.ir.shapes:
            raise self.err("tensor %d is neither a model input nor an op output" % i)
        if name in self.views and self.opname not in MOVERS:
            raise self.err("tensor shape %s is not supported (more dimensions than 3 and a batch of 1: "
                           "only %s take it)" % (self.views[name], ", ".join(sorted(MOVERS)).upper()))
        return name

    def define(self, i):
        """Register tensor i as the output value of the current op: its name, shape, q."""
        _, shape, typ, scales, zps, _ = self.tensor(i)
        name = self.prefix + "t%d" % i
        if typ == "UINT64":  # (SignalFilterBank's: lo, hi uint32 words)
            shape = list(shape[:-1]) + [2 * shape[-1]] if shape else [2]
        self.ir.shapes[name] = _hwc(shape, self)
        if self.ir.shapes[name] is None:  # (5-D and 6-D: the channel shuffle's (2, 1, C, H, W))
            self.ir.shapes[name] = _view(shape, self)
            self.views[name] = list(shape)
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
        elif typ == "BOOL":  # (bytes 0 or 1: comparisons, logical ops, select)
            self.ir.dtypes[name] = "bool"
        elif typ == "INT64" and not scales:  # (8 bytes each: the moves, comparisons, minimum, maximum)
            self.ir.q[name] = (1.0, 0)
            self.ir.dtypes[name] = "i64"
        elif typ != "FLOAT32":
            raise self.err("activations of type %s are not supported (float32, int8, int16 and int32 are, "
                           "bool, and uint8 into or out of QUANTIZE)" % typ)
        return name

    def qof(self, i):
        _, _, typ, scales, zps, _ = self.tensor(i)
        if typ in INT and not scales:
            return (1.0, 0)
        return (float(np.float32(scales[0])), zps[0] if zps else 0) if typ in INT else None

    def dtof(self, i):
        """The graph dtype of tensor i: f32, i8, i16 or i32 (uint32: its bits)."""
        typ = self.tensor(i)[2]
        return "i32" if typ == "UINT32" else ("i64" if typ == "INT64" else INT.get(typ, "f32"))
        """The graph dtype of tensor i: f32, i8, i16, i32 or bool."""
        typ = self.tensor(i)[2]
        return "bool" if typ == "BOOL" else INT.get(typ, "f32")

    def add(self, key, arr):
        return self.ir.add_tensor("%s_%d.%s" % (self.opname, self.opidx, key), np.ascontiguousarray(arr))

    # --- graph ----------------------------------------------------------------------------

    def operators(self, where=""):
        """[(index, builtin name, operator)] of the current subgraph, each op supported (a refusal
        names the op, not one of its tensors), the subgraph then checked whole (tflite_check)."""
        sg = self.sg
        ops = []
        for k in range(sg.OperatorsLength()):
            op = sg.Operators(k)
            code = self.model.OperatorCodes(op.OpcodeIndex())
            name = self.names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "CUSTOM")
            if code.BuiltinCode() == self.tfl.BuiltinOperator.CUSTOM:
                name = "CUSTOM %s" % (code.CustomCode() or b"").decode("utf-8", "replace")
            ops.append((k, name, op))
        for k, name, op in ops:
            if name not in SUPPORTED:
                raise PackError("%s: %soperator %d (%s): op %s is not supported (mpy-lazy runs %s)"
                                % (self.path, where, k, name, name, ", ".join(SUPPORTED)))
            if self.legacy and name not in LEGACY:
                raise PackError("%s: %soperator %d (%s): a legacy uint8 model's %s is not supported (mpy-lazy "
                                "runs %s on uint8, as TFLite's uint8 kernels)" % (self.path, where, k, name, name,
                                                                               ", ".join(LEGACY)))
            if not name.startswith("CUSTOM") and not op.CustomOptionsIsNone():
                raise PackError("%s: %soperator %d (%s): a builtin operator with custom options (TFLM refuses "
                                "the model)" % (self.path, where, k, name))
        tflite_check.check(self, ops)
        return ops

    def convert(self, ops, where=""):
        """Each operator of the current subgraph into the graph (or folded, or nothing)."""
        for k, name, op in ops:
            self.what = "%s: %soperator %d (%s)" % (self.path, where, k, name)
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

    def run(self):
        sg = self.sg
        ops = self.operators()
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
            if self.legacy and self.tensor(i, raw=True)[2] == "UINT8":
                name = self._u8(name, True)
            self.ir.inputs.append((name, self.ir.shapes[name], "hwc"))
        if any(name in variable.OPS for _, name, _ in ops):  # state: its `var` lines come first
            variable.declare(self, ops)
        self.convert(ops)
        self.opname = ""  # (an output of more than 3 dimensions: refused by value())
        for k in range(sg.OutputsLength()):
            self.what = "%s: model output %d" % (self.path, k)
            name = self.value(sg.Outputs(k))
            if self.legacy and self.tensor(sg.Outputs(k), raw=True)[2] == "UINT8":
                name = self._u8(name, False)
            self.ir.outputs.append(name)
        return self.ir

    def _u8(self, v, into):
        """A legacy model's uint8 input (into) or output: value v's uint8 twin and the table
        between them (uint8 code u <-> int8 code u - 128: the lut's index is the input byte as
        int8 + 128, so each way the table is the bytes 0..255)."""
        u = v + ".u8"
        self.ir.shapes[u] = self.ir.shapes[v]
        scale, zp = self.ir.q[v]
        self.ir.q[u] = (scale, zp + 128)
        self.ir.dtypes[u] = "u8"
        self.opname, self.opidx = "u8", len(self.ir.nodes)
        n = Node("lut", [u] if into else [v], v if into else u, self.what, **({} if into else {"dtype": "u8"}))
        n.t["t"] = self.add("lut", np.arange(256).astype(np.uint8).view(np.int8))
        if into:
            self.ir.nodes.insert(0, n)
        else:
            self.ir.nodes.append(n)
        return u

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
        if ytyp not in ("INT32", "INT64", "BOOL") or yscales:
            if name == "SHAPE":
                raise self.err("an output of type %s: only int32/int64 shapes are computed (at pack time)" % ytyp)
            return False
        if name == "SHAPE":
            v = np.array(self.tensor(self.ins[0])[1], np.int64)
        else:
            xs = [self.data(i) for i in self.ins]
            if any(x is None for x in xs) or any(x.dtype.kind not in "iub" for x in xs):
                return False
            if name in ARITHMETIC:  # (a loop's counter, the converter's int32 shape arithmetic)
                o = self.options(name.capitalize() + "Options")
                if o is not None and self._act(o.FusedActivationFunction()) is not None:
                    return False
                v = ARITHMETIC[name](xs[0].astype(np.int64), xs[1].astype(np.int64))
                if ytyp == "INT32" and (v.min(initial=0) < -2 ** 31 or v.max(initial=0) >= 2 ** 31):
                    raise self.err("computes %s, outside int32" % v.tolist())
            elif name in COMPARISONS:
                v = COMPARISONS[name](*xs)
            elif name == "PACK":
                o = self.options("PackOptions")
                if o.ValuesCount() != len(xs):
                    raise self.err("values_count %d for %d inputs" % (o.ValuesCount(), len(xs)))
                axis = o.Axis() + len(xs[0].shape) + 1 if o.Axis() < 0 else o.Axis()
                if not 0 <= axis <= len(xs[0].shape) or any(x.shape != xs[0].shape for x in xs):
                    raise self.err("inputs of shapes %s packed along axis %d" % ([list(x.shape) for x in xs], o.Axis()))
                v = np.stack(xs, axis=axis)
            elif name == "BROADCAST_ARGS":
                v = self._fold_broadcast_args(*xs)
            elif name == "BROADCAST_TO":
                v = np.broadcast_to(xs[0], self._broadcast_shape(xs[0].shape))
            elif name == "CONCATENATION":
                o = self.options("ConcatenationOptions")
                if self._act(o.FusedActivationFunction()) is not None:
                    return False
                v = np.concatenate(xs, axis=o.Axis())
            else:
                v = self._fold_slice(*xs)
        if list(v.shape) != list(yshape):
            raise self.err("computes a value of shape %s, its output tensor is %s" % (list(v.shape), list(yshape)))
        self.folded[(self.prefix, self.outs[0])] = v.astype({"INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}[ytyp])
        return True

    def _fold_broadcast_args(self, a, b):
        """TFLite's BROADCAST_ARGS: the shape two shapes broadcast to (TFLM's reference kernel)."""
        if a.ndim != 1 or b.ndim != 1 or a.dtype != b.dtype:
            raise self.err("shapes of types %s, %s and dimensions %d, %d: two 1-D shapes of one type"
                           % (a.dtype, b.dtype, a.ndim, b.ndim))
        n = max(len(a), len(b))
        a, b = [1] * (n - len(a)) + [int(v) for v in a], [1] * (n - len(b)) + [int(v) for v in b]
        if any(p != q and 1 not in (p, q) for p, q in zip(a, b)):
            raise self.err("shapes %s and %s do not broadcast" % (a, b))
        return np.array([q if p == 1 else p for p, q in zip(a, b)], np.int64)

    def _broadcast_shape(self, xshape):
        """BROADCAST_TO's shape (input 1: a constant or folded 1-D int32/int64), checked as TFLM's
        Prepare checks it: the output tensor's, and one the input broadcasts to."""
        shape = self.data(self.ins[1])
        yshape = self.tensor(self.outs[0])[1]
        if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
            raise self.err("the shape must be a constant 1-D int32 or int64")
        shape = [int(v) for v in shape]
        lead = len(shape) - len(xshape)
        if not len(xshape) <= len(shape) <= 5 or any(d not in (1, shape[lead + k]) for k, d in enumerate(xshape)):
            raise self.err("shape %s: the input's %s does not broadcast to it (up to 5 dimensions)"
                           % (shape, list(xshape)))
        if list(yshape) != shape:  # (TFLM's Prepare compares them)
            raise self.err("output of shape %s for shape %s" % (list(yshape), shape))
        return shape

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
                wz = extra.get("wz") or 0  # (a legacy uint8 model's weight zero point: the kernels take w - wz)
                n.t["b"] = self.add("bias", tflm.fold_input_zero_point(bias_i, wdata.astype(np.int16) - wz, axis, xq[1]))
            except ValueError as e:
                raise self.err(str(e))
        mult, shift = tflm.conv_multipliers(xq[0], scales, yq[0], self.legacy)
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


# the ops that only move bytes in row-major order, whatever the shape: they take a value of more
# dimensions than the board's 3 (its shape a view, _view) and define one
MOVERS = {"reshape", "squeeze", "expand_dims", "transpose", "gather"}


def _hwc(shape, r):
    """A TFLite activation shape as the board's: [1, H, W, C] -> (H, W, C), [1, N] -> (N,);
    5-D and 6-D ones of leading 1s too: [1, 1, H, W, C] -> (H, W, C). None: more dimensions
    than 3 left, which only MOVERS take (_view)."""
    s = list(shape) or [1]  # (a scalar: one element, a WHILE's counter)
    if s and s[0] == 1 and len(s) > 1:
        s = s[1:]
    elif len(s) == 4 and s[0] != 1 and r.opname not in MOVERS:
        raise r.err("batch %d: the board runs batch 1" % s[0])
    while len(s) > 3 and s[0] == 1:
        s = s[1:]
    if any(d < 1 for d in s) or not s or len(s) > 6:
        raise r.err("tensor shape %s is not supported" % (shape,))
    return tuple(s) if len(s) <= 3 else None


def _view(shape, r):
    """The board's value of a TFLite tensor of 4 to 6 dimensions (not a batch of 1): its first
    two, the rest as one, (A, B, C x D ...): a mover reads and writes it as row-major bytes,
    the TFLite shape its own. Only a mover defines it (another op's output refused here)."""
    if r.opname not in MOVERS:
        raise r.err("tensor shape %s is not supported (more dimensions than 3 and a batch of 1: only %s "
                    "make it)" % (list(shape), ", ".join(sorted(MOVERS)).upper()))
    s = [d for d in shape if d != 1]
    return (s[0], s[1], int(np.prod(s[2:])))
