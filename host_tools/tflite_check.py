"""Checks of a whole .tflite model before anything is converted (host_tools.tflite_import): what
TFLite's verifier and TFLite Micro's Prepare steps check, so a malformed field is a refusal,
never a different answer. One line per refusal, naming the operator index, the op, the tensor
and the field.

Checked: tensor indices; every used tensor's shape (dimensions >= 1), type (known, and as each
op uses it), flags (is_variable only for an op's state input, never a model input or output; no
sparsity) and buffer (a constant holds exactly its shape's bytes, in the file; a tensor that is
no model input and no op's output is a constant; every tensor's buffer index, used or not, in
range); quantization arrays (one scale or one per channel of the quantized
dimension, as many zero points, scales finite and > 0, zero points in the type's range); each
op's options table (the op's own type, present where the op needs it) and its values (padding,
strides, dilations, fused activation, depth multiplier against the weights); the inputs an op
needs as constants (weights, bias, paddings, axes, permutations), their types and shapes, and
the rank of image tensors (batch included)."""
import numpy as np

from .container import PackError

ITEMSIZE = {"RESOURCE": 0, "FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8, "BOOL": 1, "INT16": 2,
            "INT8": 1, "FLOAT64": 8, "UINT32": 4, "UINT16": 2, "UINT64": 8}
RANGE = {"INT8": (-128, 127), "INT16": (-32768, 32767), "INT32": (-2 ** 31, 2 ** 31 - 1),
         "UINT8": (0, 255), "INT64": (-2 ** 63, 2 ** 63 - 1)}
ACTIVATIONS = ("FLOAT32", "INT8", "INT16", "INT32", "BOOL")
# the ops that take or make bool activations (one byte each, 0 or 1), and those of several inputs
# broadcast as numpy broadcasts (the board's repeat, or a copy at the output's shape)
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")
BOOL_OPS = COMPARISONS + ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT_V2")
BROADCASTING = BOOL_OPS + ("SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD")
# the ops that take int64 activations (8 bytes each: moved as two words, compared hi then lo)
INT64_OPS = COMPARISONS + ("CONCATENATION", "PACK", "REVERSE_V2", "ZEROS_LIKE", "MAXIMUM", "MINIMUM")
BOOL_IN = BOOL_OPS + ("REDUCE_ALL",  # (REDUCE_ALL: bool in, bool out)
                      "CAST", "CONCATENATION", "SLICE", "STRIDED_SLICE", "REVERSE_V2")  # (from bool; moves)

# op -> its options table (None: it has none), and whether the op needs it present
OPTIONS = {
    "CONV_2D": ("Conv2DOptions", True), "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", True),
    "FULLY_CONNECTED": ("FullyConnectedOptions", False), "TRANSPOSE_CONV": ("TransposeConvOptions", True),
    "ADD": ("AddOptions", False), "SUB": ("SubOptions", False), "MUL": ("MulOptions", False),
    "DIV": ("DivOptions", False), "AVERAGE_POOL_2D": ("Pool2DOptions", True),
    "MAX_POOL_2D": ("Pool2DOptions", True), "MEAN": ("ReducerOptions", False), "PAD": ("PadOptions", False),
    "RESHAPE": ("ReshapeOptions", False), "SOFTMAX": ("SoftmaxOptions", True),
    "CONCATENATION": ("ConcatenationOptions", True), "LOGISTIC": (None, False), "TANH": (None, False),
    "RELU": (None, False), "RELU6": (None, False), "QUANTIZE": ("QuantizeOptions", False),
    "DEQUANTIZE": ("DequantizeOptions", False), "LEAKY_RELU": ("LeakyReluOptions", True),
    "STRIDED_SLICE": ("StridedSliceOptions", False), "TRANSPOSE": ("TransposeOptions", False),
    "HARD_SWISH": ("HardSwishOptions", False), "MINIMUM": ("MaximumMinimumOptions", False),
    "MAXIMUM": ("MaximumMinimumOptions", False), "CAST": ("CastOptions", False),
    "RESIZE_BILINEAR": ("ResizeBilinearOptions", False),
    "RESIZE_NEAREST_NEIGHBOR": ("ResizeNearestNeighborOptions", False),
    "SVDF": ("SVDFOptions", True), "UNIDIRECTIONAL_SEQUENCE_LSTM": ("UnidirectionalSequenceLSTMOptions", True),
    "GELU": ("GeluOptions", False), "PRELU": (None, False), "SHAPE": ("ShapeOptions", False),
    "SQUEEZE": ("SqueezeOptions", False), "EXPAND_DIMS": ("ExpandDimsOptions", False),
    "SLICE": ("SliceOptions", False), "SPLIT": ("SplitOptions", True), "SPLIT_V": ("SplitVOptions", False),
    "UNPACK": ("UnpackOptions", True), "PACK": ("PackOptions", True), "PADV2": ("PadV2Options", False),
    "MIRROR_PAD": ("MirrorPadOptions", False), "DEPTH_TO_SPACE": ("DepthToSpaceOptions", True),
    "SPACE_TO_DEPTH": ("SpaceToDepthOptions", True),
    "ABS": (None, False),
    "GATHER": ("GatherOptions", False),
    "REVERSE_V2": ("ReverseV2Options", False),
    "BROADCAST_TO": ("BroadcastToOptions", False),
    "BROADCAST_ARGS": (None, False),
    "SPACE_TO_BATCH_ND": ("SpaceToBatchNDOptions", False),
    "BATCH_TO_SPACE_ND": ("BatchToSpaceNDOptions", False),
    "GATHER_ND": ("GatherNdOptions", False), "EMBEDDING_LOOKUP": (None, False),
    "DYNAMIC_UPDATE_SLICE": ("DynamicUpdateSliceOptions", False),
    "VAR_HANDLE": ("VarHandleOptions", True), "READ_VARIABLE": ("ReadVariableOptions", False),
    "ASSIGN_VARIABLE": ("AssignVariableOptions", False), "CALL_ONCE": ("CallOnceOptions", True),
    "SUM": ("ReducerOptions", False), "REDUCE_MAX": ("ReducerOptions", False),
    "REDUCE_MIN": ("ReducerOptions", False), "ARG_MAX": ("ArgMaxOptions", False),
    "ARG_MIN": ("ArgMinOptions", False),
    "REDUCE_ALL": ("ReducerOptions", False),
    "CUMSUM": ("CumsumOptions", False), "BATCH_MATMUL": ("BatchMatMulOptions", False),
    "LOG_SOFTMAX": ("LogSoftmaxOptions", False), "L2_NORMALIZATION": ("L2NormOptions", False),
    "L2_POOL_2D": ("Pool2DOptions", True),
    "NEG": ("NegOptions", False), "SQRT": (None, False), "RSQRT": (None, False), "SQUARE": ("SquareOptions", False),
    "EXP": ("ExpOptions", False), "LOG": (None, False), "SIN": (None, False), "COS": ("CosOptions", False),
    "FLOOR": (None, False), "CEIL": (None, False), "ROUND": (None, False), "ELU": (None, False),
    "EQUAL": ("EqualOptions", False), "NOT_EQUAL": ("NotEqualOptions", False), "LESS": ("LessOptions", False),
    "LESS_EQUAL": ("LessEqualOptions", False), "GREATER": ("GreaterOptions", False),
    "GREATER_EQUAL": ("GreaterEqualOptions", False), "LOGICAL_AND": ("LogicalAndOptions", False),
    "LOGICAL_OR": ("LogicalOrOptions", False), "LOGICAL_NOT": ("LogicalNotOptions", False),
    "SELECT_V2": ("SelectV2Options", False), "ZEROS_LIKE": ("ZerosLikeOptions", False),
    "FILL": ("FillOptions", False),
    "SQUARED_DIFFERENCE": ("SquaredDifferenceOptions", False), "FLOOR_DIV": ("FloorDivOptions", False),
    "FLOOR_MOD": ("FloorModOptions", False), "ADD_N": ("AddNOptions", False),
}
# op -> how many inputs TFLM's Prepare takes (least, most); every op here has one output
ARITY = {"CONV_2D": (2, 3), "DEPTHWISE_CONV_2D": (2, 3), "FULLY_CONNECTED": (2, 3), "TRANSPOSE_CONV": (3, 4),
         "ADD": (2, 2), "SUB": (2, 2), "MUL": (2, 2), "DIV": (2, 2), "MINIMUM": (2, 2), "MAXIMUM": (2, 2),
         "AVERAGE_POOL_2D": (1, 1), "MAX_POOL_2D": (1, 1), "MEAN": (2, 2), "PAD": (2, 2), "RESHAPE": (1, 2),
         "SOFTMAX": (1, 1), "CONCATENATION": (1, 10000), "LOGISTIC": (1, 1), "TANH": (1, 1), "RELU": (1, 1),
         "RELU6": (1, 1), "LEAKY_RELU": (1, 1), "QUANTIZE": (1, 1), "DEQUANTIZE": (1, 1), "HARD_SWISH": (1, 1),
         "STRIDED_SLICE": (4, 4), "TRANSPOSE": (2, 2), "CAST": (1, 1), "RESIZE_BILINEAR": (2, 2),
         "RESIZE_NEAREST_NEIGHBOR": (2, 2), "PRELU": (2, 2), "SVDF": (5, 5), "UNIDIRECTIONAL_SEQUENCE_LSTM": (24, 24),
         "SQUEEZE": (1, 1), "EXPAND_DIMS": (2, 2), "SLICE": (3, 3), "SPLIT": (2, 2), "SPLIT_V": (3, 3),
         "UNPACK": (1, 1), "PACK": (1, 10000), "PADV2": (3, 3), "MIRROR_PAD": (2, 2),
         "DEPTH_TO_SPACE": (1, 1), "SPACE_TO_DEPTH": (1, 1), "SHAPE": (1, 1),
         "ABS": (1, 1), "GATHER": (2, 2),
         "REVERSE_V2": (2, 2),
         "BROADCAST_TO": (2, 2), "BROADCAST_ARGS": (2, 2),
         "SPACE_TO_BATCH_ND": (3, 3), "BATCH_TO_SPACE_ND": (3, 3),
         "GATHER_ND": (2, 2), "EMBEDDING_LOOKUP": (2, 2), "DYNAMIC_UPDATE_SLICE": (3, 3),
         "VAR_HANDLE": (0, 0), "READ_VARIABLE": (1, 1), "ASSIGN_VARIABLE": (2, 2), "CALL_ONCE": (0, 0),
         "SUM": (2, 2), "REDUCE_MAX": (2, 2), "REDUCE_MIN": (2, 2), "ARG_MAX": (2, 2), "ARG_MIN": (2, 2),
         "CUMSUM": (2, 2), "BATCH_MATMUL": (2, 2), "LOG_SOFTMAX": (1, 1), "L2_NORMALIZATION": (1, 1),
         "L2_POOL_2D": (1, 1),
         "NEG": (1, 1), "SQRT": (1, 1), "RSQRT": (1, 1), "SQUARE": (1, 1), "EXP": (1, 1), "LOG": (1, 1),
         "SIN": (1, 1), "COS": (1, 1), "FLOOR": (1, 1), "CEIL": (1, 1), "ROUND": (1, 1), "ELU": (1, 1),
         "EQUAL": (2, 2), "NOT_EQUAL": (2, 2), "LESS": (2, 2), "LESS_EQUAL": (2, 2), "GREATER": (2, 2),
         "GREATER_EQUAL": (2, 2), "LOGICAL_AND": (2, 2), "LOGICAL_OR": (2, 2), "LOGICAL_NOT": (1, 1),
         "SELECT_V2": (3, 3), "ZEROS_LIKE": (1, 1), "FILL": (2, 2),
         "SQUARED_DIFFERENCE": (2, 2), "FLOOR_DIV": (2, 2), "FLOOR_MOD": (2, 2), "ADD_N": (2, 10000),
         "REDUCE_ALL": (2, 2)}
# ops with no output (TFLM's ASSIGN_VARIABLE and CALL_ONCE), and the resource variables' ops, whose
# tensors host_tools/ops/variable.py checks (a RESOURCE handle, values of the variable's type)
NO_OUTPUT = ("ASSIGN_VARIABLE", "CALL_ONCE")
CONTROL = ("IF", "WHILE")
RESOURCE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
# the ops of several outputs (each of the data input's type), and their data input
SEVERAL_OUT = {"SPLIT": 1, "SPLIT_V": 0, "UNPACK": 0}
# the inputs an op cannot do without, where they are not the first `lo` (TFLM's optional ones: an
# LSTM's input gate (CIFG), peepholes, projection and layer norms; an SVDF's bias)
REQUIRED = {"UNIDIRECTIONAL_SEQUENCE_LSTM": (0, 2, 3, 4, 6, 7, 8, 13, 14, 15, 18, 19), "SVDF": (0, 1, 2, 4)}
# op -> (activation input, filter, bias): the weighted ops
WEIGHTED = {"CONV_2D": (0, 1, 2), "DEPTHWISE_CONV_2D": (0, 1, 2), "FULLY_CONNECTED": (0, 1, 2),
            "TRANSPOSE_CONV": (2, 1, 3)}
# op -> inputs that must be constants, and their integer types
CONSTANT = {"PAD": ((1,), ("INT32", "INT64")), "MEAN": ((1,), ("INT32",)),
            "STRIDED_SLICE": ((1, 2, 3), ("INT32",)), "TRANSPOSE": ((1,), ("INT32", "INT64")),
            "EXPAND_DIMS": ((1,), ("INT32", "INT64")), "SLICE": ((1, 2), ("INT32", "INT64")),
            "SPLIT": ((0,), ("INT32",)), "SPLIT_V": ((1, 2), ("INT32", "INT64")),
            "PADV2": ((1,), ("INT32", "INT64")), "MIRROR_PAD": ((1,), ("INT32", "INT64")),
            "GATHER": ((1,), ("INT32",)),
            "REVERSE_V2": ((1,), ("INT32",)),
            "BROADCAST_TO": ((1,), ("INT32", "INT64")),
            "SPACE_TO_BATCH_ND": ((1, 2), ("INT32",)), "BATCH_TO_SPACE_ND": ((1, 2), ("INT32",)),
            "SUM": ((1,), ("INT32",)), "REDUCE_MAX": ((1,), ("INT32",)), "REDUCE_MIN": ((1,), ("INT32",)),
            "ARG_MAX": ((1,), ("INT32",)), "ARG_MIN": ((1,), ("INT32",)),
            "CUMSUM": ((1,), ("INT32",)),
            "FILL": ((0,), ("INT32", "INT64")),
            "REDUCE_ALL": ((1,), ("INT32",))}
# op -> the inputs that may be state (is_variable) tensors
STATE = {"UNIDIRECTIONAL_SEQUENCE_LSTM": (18, 19), "SVDF": (4,)}
# ops whose input 0 and output 0 are N, H, W, C images
IMAGE = ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "TRANSPOSE_CONV", "L2_POOL_2D")
# the reductions: their output shape follows from their constant axes (and keep_dims)
REDUCERS = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN",
            "REDUCE_ALL")
# ops whose output may have another rank than their input
RANK_CHANGING = ("RESHAPE", "MEAN", "FULLY_CONNECTED", "SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM",
                 "TRANSPOSE_CONV", "STRIDED_SLICE", "SQUEEZE", "EXPAND_DIMS", "UNPACK", "PACK", "SPLIT",
                 "SHAPE", "GATHER", "BROADCAST_TO", "GATHER_ND", "EMBEDDING_LOOKUP", "SUM", "REDUCE_MAX",
                 "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "BATCH_MATMUL", "FILL",
                 "REDUCE_ALL")
# elementwise ops with two inputs (numpy broadcasting in TFLM)
BINARY = ("ADD", "SUB", "MUL", "DIV", "MINIMUM", "MAXIMUM")
# the type pairs TFLM's QUANTIZE evaluates (quantize_common.cc), and DEQUANTIZE's inputs
QUANTIZE_PAIRS = {"FLOAT32": ("INT8", "INT16"), "INT32": ("INT8", "INT16"), "INT16": ("INT8", "INT16", "INT32"),
                  "INT8": ("INT8", "INT16", "INT32", "UINT8"), "UINT8": ("INT8",)}
# uint8 activations: TFLM's QUANTIZE turns them into int8 and back (quantize_common.cc: a model's
# uint8 input or output, TFLite's inference_input_type / inference_output_type=tf.uint8); the
# board runs no other op on them
UINT8 = ("mpy-lazy runs uint8 activations through QUANTIZE only (to or from int8: a model's uint8 input or output), "
         "and unquantized ones through REVERSE_V2")
# ops whose output type may differ from their input's
CROSSING = ("QUANTIZE", "DEQUANTIZE", "CAST", "SHAPE", "EMBEDDING_LOOKUP", "ARG_MAX", "ARG_MIN") + COMPARISONS
MAX_ELEMENTS = 1 << 24  # elements of one value or tensor (mpy_lazy/check.py)
TYPE_CHANGING = (("SOFTMAX", "INT8", "INT16"),)  # (TFLM's int8 -> int16 softmax: keyword models)
# ops mpy-lazy runs on float32 and int8 activations only, not int16 (TFLM has 16x8 kernels for
# all but HARD_SWISH); refused here, naming the op, before the board's graph check would refuse
# its translation (mpy-lazy's 16x8 ops: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
# TRANSPOSE_CONV, ADD, SUB, MUL, LEAKY_RELU, MINIMUM, MAXIMUM, RESIZE_NEAREST_NEIGHBOR,
# AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM, LOGISTIC, TANH, RELU, RELU6, the moves and the crossings)
NO_INT16 = ("HARD_SWISH", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "CUMSUM")
# ops whose activation inputs all have the output's type
SAME_TYPE = ("ADD", "SUB", "MUL", "DIV", "CONCATENATION", "MINIMUM", "MAXIMUM", "PACK", "BATCH_MATMUL",
             "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD", "ADD_N")


def check(r, ops):
    """Refuse (PackError) anything malformed in the model r (a tflite_import._Reader) whose ops
    are ops: [(index, name, operator)], all supported."""
    tfl, sg, model = r.tfl, r.sg, r.model
    nt = sg.TensorsLength()
    names = {v: k for k, v in vars(tfl.BuiltinOptions).items() if isinstance(v, int)}

    def fail(where, msg):
        raise PackError("%s: %s: %s" % (r.path, where, msg))

    def index(i, where):
        if not 0 <= i < nt:
            fail(where, "tensor index %d outside 0..%d" % (i, nt - 1))
        return i

    def not_state(i, where):  # (TFLM lets the caller set or read an op's state there; the board keeps it apart)
        if sg.Tensors(i).IsVariable():
            fail(where, "tensor %d is an op's state (is_variable)" % i)

    produced, inputs = set(), set()
    for k in range(sg.InputsLength()):
        i = index(sg.Inputs(k), "model input %d" % k)
        if r.data(i) is not None or i in inputs:
            fail("model input %d" % k, "tensor %d is %s" % (i, "a constant (it has data)" if i not in inputs
                                                            else "given twice"))
        not_state(i, "model input %d" % k)
        inputs.add(i)
    for k in range(sg.OutputsLength()):
        not_state(index(sg.Outputs(k), "model output %d" % k), "model output %d" % k)
    for k, name, op in ops:
        for j in range(op.OutputsLength()):
            i = index(op.Outputs(j), "operator %d (%s): output %d" % (k, name, j))
            if i in inputs or i in produced:  # (TFLM would overwrite the value it was given)
                fail("operator %d (%s): output %d" % (k, name, j), "tensor %d is also %s"
                     % (i, "a model input" if i in inputs else "an earlier operator's output"))
            b = r.sg.Tensors(i).Buffer()
            if 0 <= b < r.model.BuffersLength() and r.model.Buffers(b).DataLength():  # (TFLM: a constant)
                fail("operator %d (%s): output %d" % (k, name, j), "tensor %d has data (buffer %d): an op's "
                     "output is not a constant" % (i, b))
            produced.add(i)
    checked = set()
    for k, name, op in ops:
        where = "operator %d (%s)" % (k, name)
        ins = [op.Inputs(j) for j in range(op.InputsLength())]
        outs = [op.Outputs(j) for j in range(op.OutputsLength())]
        if not outs and name not in NO_OUTPUT:
            fail(where, "no output")
        if name in ARITY:
            lo, hi = ARITY[name]
            if not lo <= len(ins) <= hi or (len(outs) != (0 if name in NO_OUTPUT else 1) and name not in SEVERAL_OUT):
                fail(where, "%d inputs and %d outputs (TFLM's %s takes %s input%s and %s)"
                     % (len(ins), len(outs), name, lo if lo == hi else "%d to %d" % (lo, hi), "" if hi == 1 else "s",
                        "its outputs" if name in SEVERAL_OUT else "1 output"))
            for j in REQUIRED.get(name, range(lo)):
                if ins[j] == -1:
                    fail(where, "input %d is absent (-1): the op needs it" % j)
        for j, i in enumerate(ins):
            if i == -1:
                continue  # an optional input left out
            index(i, "%s: input %d" % (where, j))
            if i not in checked:
                _tensor(r, i, "%s: input %d (tensor %d)" % (where, j, i), fail,
                        state=j in STATE.get(name, ()), const=i not in produced and i not in inputs)
                checked.add(i)
        for j, i in enumerate(outs):
            if i not in checked:
                _tensor(r, i, "%s: output %d (tensor %d)" % (where, j, i), fail, False, False)
                checked.add(i)
        for j in range(op.IntermediatesLength()):  # (TFLM allocates none: an LSTM's are scales only)
            i = index(op.Intermediates(j), "%s: intermediate %d" % (where, j))
            b = r.sg.Tensors(i).Buffer()
            if not 0 <= b < r.model.BuffersLength() or r.model.Buffers(b).DataLength():
                fail(where, "intermediate %d (tensor %d): buffer %d is not an empty one" % (j, i, b))
            if int(np.prod(r.tensor(i)[1], dtype=np.int64)) != 0:
                fail(where, "intermediate %d (tensor %d) of shape %s: TFLM takes empty ones only"
                     % (j, i, list(r.tensor(i)[1])))
        _options(r, op, name, where, names, fail)
        if name in RESOURCE_OPS:
            _resource(r, name, ins, outs, where, fail)
            continue
        if name in CONTROL:  # (host_tools/ops/control.py checks them: subgraphs, pack-time bools)
            continue
        _uses(r, name, op, ins, outs, where, fail)
    for i in range(nt):  # the tensors no op uses too: TFLM's allocator reads every buffer (it crashed)
        b = sg.Tensors(i).Buffer()
        if not 0 <= b < model.BuffersLength():
            fail("tensor %d" % i, "buffer index %d outside 0..%d" % (b, model.BuffersLength() - 1))


def _resource(r, name, ins, outs, where, fail):
    """A variable's handle is a RESOURCE tensor (VAR_HANDLE's output, READ_VARIABLE's and
    ASSIGN_VARIABLE's input 0); no other tensor of these ops is one."""
    for j, i in enumerate(ins + outs):
        handle = j == 0  # (VAR_HANDLE has no input: j 0 is its output)
        if (r.tensor(i)[2] == "RESOURCE") != handle:
            fail(where, "%s %d (tensor %d) is %s" % ("input" if j < len(ins) else "output", j if j < len(ins)
                 else j - len(ins), i, "not the variable's handle (RESOURCE)" if handle else "a RESOURCE"))


def _tensor(r, i, where, fail, state, const):
    t, shape, typ, scales, zps, qdim = r.tensor(i)
    if typ not in ITEMSIZE:
        fail(where, "type %s is not supported" % typ)
    for d in shape:
        if d < 1:
            fail(where, "shape %s: every dimension must be at least 1" % (shape,))
    if int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
        fail(where, "shape %s: more than 2^24 elements (the board's limit for one value)" % (shape,))
    if t.Sparsity() is not None:
        fail(where, "sparse tensors are not supported")
    if t.IsVariable() and not state:
        fail(where, "is_variable is set on a tensor the op does not keep as its state")
    b = t.Buffer()
    if not 0 <= b < r.model.BuffersLength():
        fail(where, "buffer index %d outside 0..%d" % (b, r.model.BuffersLength() - 1))
    buf = r.model.Buffers(b)
    if buf.Offset() > 1 or buf.Size() > 0:
        fail(where, "data outside the flatbuffer (a buffer offset) is not supported")
    n = buf.DataLength()
    want = int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[typ]
    if n and n != want:
        fail(where, "%d bytes of data for shape %s of %s (%d expected)" % (n, shape, typ, want))
    if const and not n and not t.IsVariable():
        fail(where, "a constant with no data (no model input, no op's output, an empty buffer)")
    if scales or zps:
        if typ == "FLOAT32":
            return  # a float tensor's quantization is not read
        if len(zps) != len(scales):
            fail(where, "%d scales and %d zero points" % (len(scales), len(zps)))
        d = qdim if 0 <= qdim < len(shape) else (0 if len(shape) == 1 else None)  # (converters leave
        if len(scales) > 1 and (d is None or shape[d] != len(scales)):  # a filter's dim on 1-D biases)
            fail(where, "%d scales for quantized dimension %d of shape %s" % (len(scales), qdim, shape))
        for s in scales:
            if not (np.isfinite(s) and s > 0):
                fail(where, "scale %r is not finite and > 0" % float(s))
        if len(scales) > 1 and not const:  # (an op's output, a model input, an op's state)
            fail(where, "%d scales (per-channel quantization along dimension %d): an activation has "
                 "one scale, only constant weights are quantized per channel" % (len(scales), qdim))
        lo, hi = RANGE.get(typ, (0, 0))
        for z in zps:
            if not lo <= z <= hi:
                fail(where, "zero point %d outside %s's %d..%d" % (z, typ, lo, hi))


def _options(r, op, name, where, names, fail):
    table, needed = OPTIONS.get(name, (False, False))
    if table is False:
        return  # an op this module does not know: its importer checks it
    got = names.get(op.BuiltinOptionsType(), str(op.BuiltinOptionsType()))
    if got != "NONE" and got != table:
        fail(where, "builtin_options_type is %s, the op's is %s" % (got, table or "NONE"))
    if got == "NONE" or table is None:
        if needed:
            fail(where, "no %s table" % table)
        return
    o = getattr(r.tfl, table)()
    t = op.BuiltinOptions()
    o.Init(t.Bytes, t.Pos)
    if hasattr(o, "Padding") and o.Padding() not in (0, 1):
        fail(where, "padding %d (SAME 0 or VALID 1)" % o.Padding())
    for f in ("StrideH", "StrideW", "DilationHFactor", "DilationWFactor", "FilterHeight", "FilterWidth"):
        if hasattr(o, f) and getattr(o, f)() < 1:
            fail(where, "%s %d (at least 1)" % (f, getattr(o, f)()))
    # (an LSTM's is its cell activation: the importer takes tanh, 4)
    if hasattr(o, "FusedActivationFunction") and o.FusedActivationFunction() not in (0, 1, 2, 3) and \
            not (name == "UNIDIRECTIONAL_SEQUENCE_LSTM" and o.FusedActivationFunction() == 4):
        fail(where, "fused activation %d is not supported (none, relu, relu_n1_to_1, relu6)"
             % o.FusedActivationFunction())
    for f in ("Beta", "Alpha"):
        if hasattr(o, f) and not np.isfinite(getattr(o, f)()):
            fail(where, "%s is not finite" % f.lower())


def _uses(r, name, op, ins, outs, where, fail):
    def typ(i):
        return r.tensor(i)[2]

    def shape(i):
        return r.tensor(i)[1]

    y = outs[0]
    if name.startswith("CUSTOM "):
        return  # (the signal library's ops: host_tools/ops/signal.py checks their tensors)
    wide = [i for i in ins + outs if i >= 0 and typ(i) in ("UINT32", "UINT64")]
    if wide and (name not in ("CAST", "RESHAPE") or typ(wide[0]) == "UINT64"):
        fail(where, "tensor %d is %s: mpy-lazy runs uint32 through the signal ops, CAST and RESHAPE only, "
             "uint64 from SignalFilterBank to SignalFilterBankSquareRoot" % (wide[0], typ(wide[0])))
    if name in SEVERAL_OUT:  # every output has the data input's type
        x = ins[SEVERAL_OUT[name]]
        for j, i in enumerate(outs):
            if typ(i) != typ(x):
                fail(where, "output %d is %s, the input %s" % (j, typ(i), typ(x)))
    if name not in ("QUANTIZE", "REVERSE_V2") and any(i >= 0 and typ(i) == "UINT8" and r.data(i) is None
                                                      for i in ins + outs):
        j = [i for i in ins + outs if i >= 0 and typ(i) == "UINT8" and r.data(i) is None][0]
        fail(where, "tensor %d is uint8: %s" % (j, UINT8))
    raw = ("CAST", "RESHAPE")  # (they move integers, reading no scale)
    for j, i in enumerate(ins + outs):  # TFLM's kernels read an integer activation's or weight's
        if i >= 0 and not len(r.tensor(i)[3]) and (typ(i) in ("INT8", "INT16", "UINT8") and name not in raw and
                                                   (name, typ(i)) != ("REVERSE_V2", "UINT8") or  # scale
                                                   (name, j) in (("QUANTIZE", 1), ("DEQUANTIZE", 0)) or
                                                   (name, j, typ(i)) == ("QUANTIZE", 0, "INT32")):
            fail(where, "%s %d (tensor %d) is %s without quantization parameters"
                 % ("input" if j < len(ins) else "output", j if j < len(ins) else j - len(ins), i, typ(i)))
    if any(i >= 0 and typ(i) == "INT64" and r.data(i) is None for i in ins + outs) and name not in INT64_OPS:
        fail(where, "INT64 tensors: mpy-lazy runs them through %s only" % ", ".join(INT64_OPS))
    if any(i >= 0 and typ(i) == "BOOL" and r.data(i) is None for i in ins + outs) and name not in BOOL_IN:
        fail(where, "bool tensors: mpy-lazy runs them through %s only" % ", ".join(BOOL_IN))
    if name in BROADCASTING:  # numpy's broadcasting, to the output's shape
        try:
            full = list(np.broadcast_shapes(*[tuple(shape(i)) for i in ins]))
        except ValueError:
            full = None
        if full != list(shape(y)):
            fail(where, "input shapes %s, output %s: they do not broadcast to it"
                 % (", ".join(str(list(shape(i))) for i in ins), list(shape(y))))
        if name in BOOL_OPS and typ(y) != ("BOOL" if name != "SELECT_V2" else typ(ins[1])):
            fail(where, "output of type %s (%s)" % (typ(y), "bool" if name != "SELECT_V2" else "the inputs' type"))
    if name not in CROSSING and ins and ins[0] >= 0 and name not in WEIGHTED:
        for j in ((range(len(ins)) if name in SAME_TYPE else ((1, 2) if name == "SELECT_V2" else (0,)))):
            if ins[j] >= 0 and typ(ins[j]) != typ(y) and r.data(ins[j]) is None and \
                    (name, typ(ins[j]), typ(y)) not in TYPE_CHANGING:
                fail(where, "input %d is %s, the output %s" % (j, typ(ins[j]), typ(y)))
    if typ(y) not in ACTIVATIONS and name not in ("CAST", "BROADCAST_ARGS", "RESHAPE") and \
            (name, typ(y)) not in (("QUANTIZE", "UINT8"), ("REVERSE_V2", "UINT8")) and \
            not (typ(y) == "INT64" and name in INT64_OPS):
        fail(where, "output of type %s (float32, int8, int16 or int32 activations)" % typ(y))
    if name in NO_INT16 and "INT16" in (typ(y), typ(ins[0]) if ins and ins[0] >= 0 else None):
        fail(where, "int16 activations (16x8) are not supported for %s (float32 and int8 are)" % name)
    if name in ("ADD", "SUB", "MUL") and len(ins) == 2:  # numpy's broadcasting (the board's: up to H, W, C
        a, b2, ys = shape(ins[0]), shape(ins[1]), shape(y)  # after the batch); a constant over the activation
        try:
            full = list(np.broadcast_shapes(tuple(a), tuple(b2)))
        except ValueError:
            full = None
        consts = [r.data(i) is not None for i in ins[:2]]
        if full != list(ys):
            fail(where, "input shapes %s and %s, output %s: they do not broadcast to it" % (a, b2, ys))
        if all(consts):
            fail(where, "both inputs are constants")
        if any(consts):
            act = a if consts[1] else b2
            if list(act) != list(ys):
                fail(where, "input shapes %s and %s, output %s: the constant is larger than the activation "
                     "(it may broadcast over the activation only)" % (a, b2, ys))
        if name == "MUL" and typ(y) == "INT16":  # (TFLM's Prepare)
            for j, i in enumerate(ins[:2] + [y]):
                if any(r.tensor(i)[4]):
                    fail(where, "%s (tensor %d) zero point %d: TFLM's int16 MUL takes zero points 0"
                         % ("output" if j == 2 else "input %d" % j, i, r.tensor(i)[4][0]))
    elif name in BINARY + ("PRELU",) and len(ins) == 2:  # shapes TFLM broadcasts as the board does: equal, or
        a, b2, ys = shape(ins[0]), shape(ins[1]), shape(y)  # one of them per channel
        try:
            full = list(np.broadcast_shapes(tuple(a), tuple(b2)))
        except ValueError:
            full = None
        small = b2 if int(np.prod(b2)) <= int(np.prod(a)) else a
        per_channel = len(small) >= 1 and all(d == 1 for d in small[:-1]) and small[-1] == ys[-1]
        if name in ("MINIMUM", "MAXIMUM", "DIV") and int(np.prod(small)) == 1:
            per_channel = True  # (these kernels repeat a one-element operand too)
        if name == "PRELU":  # (alpha broadcasts as numpy does, on the board too)
            per_channel = True
        if full != list(ys) or (list(a) != list(b2) and not per_channel):
            fail(where, "input shapes %s and %s, output %s: %s" % (a, b2, ys, "alpha must broadcast to the input"
                 if name == "PRELU" else "equal shapes, or one per channel (1, ..., C)"))
    if name in ("LOGISTIC", "TANH") and typ(y) == "INT8":  # (TFLM's Prepare, and its kernels' fixed output)
        want = (1.0 / 256, -128) if name == "LOGISTIC" else (1.0 / 128, 0)
        q = r.tensor(y)
        if len(q[3]) != 1 or abs(q[3][0] - want[0]) > 1e-6 * want[0] or q[4][:1] != [want[1]]:
            fail(where, "output q=%s,%s: TFLM's int8 %s writes q=1/%d,%d" % (
                q[3][0] if q[3] else None, q[4][0] if q[4] else None, name, round(1 / want[0]), want[1]))
    if name == "QUANTIZE" and typ(y) not in QUANTIZE_PAIRS.get(typ(ins[0]), ()):
        fail(where, "%s to %s: TFLM quantizes %s" % (typ(ins[0]), typ(y), "; ".join(
            "%s to %s" % (k, "/".join(v)) for k, v in QUANTIZE_PAIRS.items())))
    if name == "DEQUANTIZE" and (typ(ins[0]) not in ("INT8", "INT16") or typ(y) != "FLOAT32"):
        fail(where, "%s to %s: TFLM dequantizes INT8 or INT16 to FLOAT32" % (typ(ins[0]), typ(y)))
    if name not in RANK_CHANGING + BROADCASTING and ins and ins[0] >= 0:
        x0 = max((ins[j] for j in range(min(len(ins), 2 if name in BINARY else 1)) if ins[j] >= 0),
                 key=lambda i: len(shape(i)))
        if len(shape(x0)) != len(shape(y)):
            fail(where, "input shape %s, output %s: the op keeps the rank" % (shape(x0), shape(y)))
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM" and ins[4] >= 0:  # (TFLM's Prepare: batch, time, units)
        xs, w = list(shape(ins[0])), list(shape(ins[4]))
        if len(xs) == 3 and len(w) == 2 and list(shape(y)) != xs[:2] + [w[0]]:
            fail(where, "output shape %s: the op computes %s from its inputs" % (list(shape(y)), xs[:2] + [w[0]]))
    if name in REDUCERS + ("CONCATENATION", "SVDF"):
        want = _out_shape(r, name, op, ins, shape, where, fail)
        if want is not None and list(shape(y)) != want:
            fail(where, "output shape %s: the op computes %s from its inputs" % (list(shape(y)), want))
    if name in IMAGE:
        x = ins[WEIGHTED[name][0]] if name in WEIGHTED else ins[0]
        for i, what in ((x, "input"), (y, "output")):
            s = shape(i)
            if len(s) != 4 or s[0] != 1:
                fail(where, "%s shape %s: the op takes 1, H, W, C" % (what, s))
    if name in CONSTANT:
        idx, types = CONSTANT[name]
        for j in idx:
            if j >= len(ins) or ins[j] < 0 or r.data(ins[j]) is None:
                fail(where, "input %d must be a constant" % j)
            if typ(ins[j]) not in types:
                fail(where, "input %d is %s (%s expected)" % (j, typ(ins[j]), " or ".join(types)))
    if name in WEIGHTED:
        _weighted(r, name, op, ins, y, where, fail, typ, shape)


def _out_shape(r, name, op, ins, shape, where, fail):
    """The output shape TFLM's kernel computes with (it trusts the declared one and reads past
    or misses elements when they differ): MEAN from its axes and keep_dims, CONCATENATION
    from inputs of one rank equal but along the axis, SVDF (batch, units)."""
    t = op.BuiltinOptions()
    o = getattr(r.tfl, OPTIONS[name][0])()
    if t is not None:
        o.Init(t.Bytes, t.Pos)
    xs = list(shape(ins[0]))
    if name in REDUCERS:
        axes = r.data(ins[1])
        if axes is None:
            return None  # (refused as a non-constant axis)
        axes = {int(a) + len(xs) if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)}
        if any(not 0 <= a < len(xs) for a in axes):
            fail(where, "axis outside the input's %d dimensions" % len(xs))
        if name in ("ARG_MAX", "ARG_MIN"):  # (one axis, dropped)
            if len(np.asarray(r.data(ins[1])).reshape(-1)) != 1:
                fail(where, "the axis input holds %d values (one expected)" % np.asarray(r.data(ins[1])).size)
            return [n for d, n in enumerate(xs) if d not in axes]
        keep = t is not None and o.KeepDims()
        return [1 if d in axes else n for d, n in enumerate(xs) if keep or d not in axes]
    if name == "SVDF":
        w = list(shape(ins[1]))
        rank = o.Rank() if t is not None else 0
        if len(w) != 2 or rank < 1 or w[0] % rank:
            fail(where, "feature weights of shape %s for rank %d: (units x rank, input size)" % (w, rank))
        return [xs[0] if xs else 0, w[0] // rank]
    ys = None
    axis = o.Axis() if t is not None else 0
    for j, i in enumerate(ins):
        s = list(shape(i))
        ax = axis + len(s) if axis < 0 else axis
        if not 0 <= ax < len(s):
            fail(where, "axis %d outside input %d's %d dimensions" % (axis, j, len(s)))
        if ys is None:
            ys = s
        elif len(s) != len(ys) or any(s[d] != ys[d] for d in range(len(s)) if d != ax):
            fail(where, "input %d of shape %s, input 0 %s: one rank, the same sizes but along axis %d"
                 % (j, s, list(shape(ins[0])), axis))
        else:
            ys[ax] += s[ax]
    return ys


def _weighted(r, name, op, ins, y, where, fail, typ, shape):
    xi, wi, bi = WEIGHTED[name]
    if len(ins) <= wi or ins[wi] < 0 or r.data(ins[wi]) is None:
        fail(where, "the filter (input %d) must be a constant" % wi)
    x, w = ins[xi], ins[wi]
    xt, wt, yt = typ(x), typ(w), typ(y)
    if xt != yt:
        fail(where, "input is %s, output %s" % (xt, yt))
    if wt not in ("FLOAT32", "INT8"):
        fail(where, "filter of type %s (float32 or int8)" % wt)
    if xt == "INT16":  # (TFLite's 16x8 is symmetric: TFLM's kernels leave the zero points out)
        for i, what in ((x, "input"), (y, "output")):
            zps = r.tensor(i)[4]
            if any(zps):
                fail(where, "%s (tensor %d) zero point %d: int16 values of a 16x8 op have zero point 0"
                     % (what, i, zps[0]))
    ws = shape(w)
    rank = 2 if name == "FULLY_CONNECTED" else 4
    if len(ws) != rank:
        fail(where, "filter shape %s: %d dimensions expected" % (ws, rank))
    oc = ws[3] if name == "DEPTHWISE_CONV_2D" else ws[0]
    if name == "DEPTHWISE_CONV_2D":
        if ws[0] != 1:
            fail(where, "depthwise filter shape %s: 1, KH, KW, C x multiplier expected" % (ws,))
        c = shape(x)[-1]
        t = op.BuiltinOptions()
        o = r.tfl.DepthwiseConv2DOptions()
        o.Init(t.Bytes, t.Pos)
        if o.DepthMultiplier() * c != oc:  # TFLM's kernels loop over depth_multiplier, not the filter
            fail(where, "depth_multiplier %d x %d input channels != %d filter channels" % (o.DepthMultiplier(), c, oc))
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D") and op.BuiltinOptions() is not None:
        t = op.BuiltinOptions()
        o = getattr(r.tfl, OPTIONS[name][0])()
        o.Init(t.Bytes, t.Pos)
        # TFLM's ConvParams hold strides, dilations and paddings as int16: beyond, it computes
        # with wrapped values (a dilation of 65535 ran as -1)
        for k, d, st, what in ((ws[1], o.DilationHFactor(), o.StrideH(), "height"),
                               (ws[2], o.DilationWFactor(), o.StrideW(), "width")):
            if d > 32767 or st > 32767 or (k - 1) * d + 1 > 32767:
                fail(where, "%s: stride %d, dilation %d of a %d-tap filter: TFLM holds these (and the "
                     "padding) as int16, 32767 at most" % (what, st, d, k))
    t = op.BuiltinOptions()
    if t is not None and name != "DEPTHWISE_CONV_2D":
        o = getattr(r.tfl, OPTIONS[name][0])()
        o.Init(t.Bytes, t.Pos)
        qbt = o.QuantizedBiasType() if hasattr(o, "QuantizedBiasType") else 0
        bias_type = r.tensor(ins[bi])[0].Type() if len(ins) > bi and ins[bi] >= 0 else None
        if qbt and qbt != bias_type:
            fail(where, "quantized_bias_type %d: not the bias tensor's type" % qbt)
    if name == "DEPTHWISE_CONV_2D" and (len(ins) <= bi or ins[bi] < 0):
        fail(where, "no bias: TFLM's DEPTHWISE_CONV_2D reads one unconditionally (it crashed without)")
    if len(ins) > bi and ins[bi] >= 0:
        b = ins[bi]
        if r.data(b) is None:
            fail(where, "the bias (input %d) must be a constant" % bi)
        bt = typ(b)
        want = {"FLOAT32": ("FLOAT32",), "INT8": ("INT32",), "INT16": ("INT64", "INT32")}.get(xt, ())
        if xt == "INT16" and name in ("DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"):
            # (TFLM's 16x8 kernels of these read the bias as int64 whatever its type; TRANSPOSE_CONV
            # widens an int16 one first)
            want = ("INT64", "INT16") if name == "TRANSPOSE_CONV" else ("INT64",)
        if bt not in want:
            fail(where, "bias of type %s for %s activations (%s expected)%s" % (
                bt, xt, " or ".join(want) or "none", "; TFLM reads its bytes as int64 (channel c from int32 words "
                "2c and 2c + 1, past half the channels the bytes after it in the file): no answer would be "
                "the model's" if (xt, bt) == ("INT16", "INT32") else ""))
        if int(np.prod(shape(b), dtype=np.int64)) != oc:
            fail(where, "bias shape %s for %d output channels" % (shape(b), oc))

