# The numbers of a program (docs/FORMAT.md, "Program"): its header, and the record kinds with
# their names, lengths and the op module that owns each (its "room": the record's layout, its
# load-time check and its reference kernel, mpy_lazy/ops/<room>.py; docs/OPS.md). Imports
# nothing: every runtime module may read it.
#
# Kind numbers and record lengths never change (stored programs keep loading): a new op gets
# new kinds (up to KINDS - 1) and VERSION stays.

MAGIC = 0x4D504C50  # "PLPM": a program
VERSION = 3  # 2: int16 values, sub, slice, transpose, tconv (3-level moves, 8-word quantize);
#             3: conv/depthwise/dense weights in output-channel blocks (field WB)
# header words
H_MAGIC, H_VERSION, H_RECORDS, H_ARENA, H_INPUTS, H_OUTPUTS, H_FIRST = 0, 1, 2, 3, 4, 5, 6
HEADER = 7
# an input/output entry: dtype (FORMAT.md code: 1 f32, 3 i8), arena byte offset, elements,
# zero point, scale (f32 bits), layout (0 hwc, 1 chw), ndim, dims (3 words)
IO_DTYPE, IO_OFF, IO_SIZE, IO_ZP, IO_SCALE, IO_LAYOUT, IO_NDIM, IO_DIMS = 0, 1, 2, 3, 4, 5, 6, 7
IO = 10
MAX_ARENA = 1 << 26  # bytes; anything larger is a broken file, not a model for a board
MAX_RECORDS = 1 << 14
INT32_MAX = 2147483647
MAX_DIM = 65535

CONV, DEPTHWISE, DENSE, ADD, MUL, MAXPOOL, AVGPOOL, MEAN, LUT, SOFTMAX = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
MOVE, FILL, QUANTIZE, DEQUANTIZE = 11, 12, 13, 14
FCONV, FDEPTHWISE, FDENSE, FADD, FMUL, FMAXPOOL, FAVGPOOL, FMEAN, FACT, FSOFTMAX = range(16, 26)
RESCALE, ADD16, SUB, SUB16, CONV16, DW16, DENSE16, TCONV, TCONV16, FSUB = range(26, 36)
# recurrent ops (kinds 36..41), int16 pools (42, 43), elementwise ops, cast, resize, norms (44..53)
LSTM, FLSTM, SVDF, SOFTMAX16 = range(36, 40)
GRU, FGRU = 40, 41
MAXPOOL16, AVGPOOL16 = 42, 43  # (TFLM's int16 pooling)
MINMAX, FBINARY, CAST, FCAST, DIV, RESIZE, FRESIZE, PRELU, FLAYERNORM, FGROUPNORM = range(44, 54)
FTCONV = 54
MUL16 = 58  # int16 mul (TFLM's 16-bit MUL, zero points 0)
LOAD = 59  # a constant tensor's bytes into the arena (add, sub, mul with a constant operand)
SOFTMAX_I16 = 55  # int16 softmax (TFLM's SoftmaxInt16: interpolated tables)
GATHERND, UPDATE = 80, 81  # index ops: GATHER_ND / EMBEDDING_LOOKUP, DYNAMIC_UPDATE_SLICE
VAR = 84  # a resource variable's state (its initial bytes; reads and assigns are moves)
REDUCE, FREDUCE = 72, 73  # sum, mean, max, min, argmax, argmin over any axes (72..79: reduce's)
CUMSUM, FCUMSUM = 74, 75
BMM, FBMM = 76, 77  # batch matmul
# the signal library (micro_speech's audio front end: ops/signal.py), kinds 88..97
SWINDOW, SFFTBITS, SFFTSCALE, SRFFT, SENERGY, SFBANK, SFBSQRT, SSPECSUB, SPCAN, SFBLOG = range(88, 98)
IARITH = 98  # int32 add, sub, mul, div (TFLM's unquantized int32 ADD, MUL, DIV: micro_speech's front end)
FUNARY = 64  # f32 elementwise functions of one operand (ops/unary.py: neg, sqrt, exp, floor, elu, ...)
COMPARE, FCOMPARE, LOGICAL, SELECT = 65, 66, 67, 68  # bool values (ops/compare.py)
FARITH, SQDIFF, ADDN = 69, 70, 71  # squared difference, floor division and modulo, int8 add_n (ops/arith.py)
ACT16 = 56  # int16 sigmoid and tanh (TFLM's LOGISTIC and TANH on int16)
NORM, FNORM = 78, 79  # int8 logsoftmax, l2norm; float logsoftmax, l2norm, l2pool
SDELAY = 99  # the signal library's delay (ops/signal.py)
SSTACKER = 100  # the signal library's stacker (ops/signal.py)
SFRAMER = 101  # the signal library's framer (ops/signal.py)
SOVERLAP, FOVERLAP = 102, 103  # the signal library's overlap-add, int16 and float32 (ops/signal.py)
SIRFFT = 104  # the signal library's inverse real FFT, int16 (ops/signal.py)
CONV_U8, DW_U8 = 105, 106  # legacy uint8 models' conv2d / depthwise: int8 record + WZ, the weights' zero point
AVGPOOL_U8 = 107  # legacy uint8 models' avgpool: TFLite's uint8 rounding (half up)
BRANCH, JUMP, LOOP, NEXT = 110, 111, 112, 113  # control flow: IF and WHILE on the board (ops/control.py)
SFFT = 114  # the signal library's rfft and irfft of int32 and float32 values (ops/signal.py)
PRELU16 = 120  # int16 prelu, int8 alpha: TFLM's two multipliers per element (ops/elementwise.py)
FSVDF = 121  # float32 svdf (ops/svdf.py)
LSTM16 = 125  # 16x8 lstm: int16 x, h, y, int8 weights, int64 accumulators (ops/lstm.py)
KINDS = 126  # kinds are 1..KINDS-1
DENSE_COL = 256  # int8 dense: the viper kernel converts the input to int32 this many at a time

# by kind (index = kind): the op's name in messages, the record's length in words, and the
# room (module of mpy_lazy/ops) holding its check and reference kernel (the room's KERNELS
# names the kernel of each of its kinds, there and in the fast paths). Each table is one literal
# (frozen into a firmware it stays in flash; built at import it would be heap), the names one
# string of words each (word() reads them: a tuple of strings loaded from a .mpy is one heap
# object per string): a new kind appends its entry at the end of each ("-": none).
NAMES = (
    "- conv2d depthwise linear add mul maxpool avgpool "  # 0..
    "mean lut softmax move fill quantize dequantize - "  # 8..
    "conv2d depthwise linear add mul maxpool avgpool mean "  # 16..
    "act softmax rescale add sub sub conv2d depthwise "  # 24..
    "linear tconv tconv sub lstm lstm svdf softmax "  # 32..
    "gru gru maxpool avgpool minmax binary cast cast "  # 40..
    "div resize resize prelu layernorm groupnorm tconv softmax "  # 48..
    "act - mul load - - - - "  # 56..
    "unary compare compare logical select arith sqdiff addn "  # 64..
    "reduce reduce cumsum cumsum batchmatmul batchmatmul normalize normalize "  # 72..
    "gathernd update - - var - - - "  # 80..
    "window fftbits fftscale rfft energy filterbank fbsqrt specsub "  # 88..
    "pcan fblog iarith delay stacker framer overlap overlap "  # 96..
    "irfft conv2d depthwise avgpool - - branch jump "  # 104..
    "loop next fft - - - - - "  # 112..
    "prelu svdf - - - lstm "  # 120..
)
LENGTH = (
    0, 39, 39, 21, 22, 17, 21, 21, 14, 11, 12, 14, 6, 8, 8, 0,  # 0..
    38, 38, 20, 11, 11, 21, 21, 14, 8, 7, 18, 22, 22, 22, 38, 38,  # 16..
    21, 28, 28, 11, 25, 21, 24, 12, 21, 17, 21, 21, 12, 12, 7, 7,  # 32..
    17, 13, 13, 20, 14, 12, 26, 16, 10, 0, 17, 6, 0, 0, 0, 0,  # 48..
    6, 13, 9, 9, 11, 9, 21, 19, 18, 9, 16, 8, 22, 14, 18, 18,  # 64..
    18, 15, 0, 0, 8, 0, 0, 0, 9, 5, 6, 10, 7, 9, 6, 14,  # 80..
    10, 7, 13, 8, 9, 10, 9, 9, 9, 40, 40, 21, 0, 0, 4, 3,  # 96..
    3, 5, 12, 0, 0, 0, 0, 0, 18, 16, 0, 0, 0, 25,  # 112..
)
ROOM = (
    "- conv conv linear binary binary pool pool "  # 0..
    "mean act softmax move move quant quant - "  # 8..
    "conv conv linear binary binary pool pool mean "  # 16..
    "act softmax quant binary binary binary conv conv "  # 24..
    "linear tconv tconv binary lstm lstm svdf softmax "  # 32..
    "gru gru pool pool elementwise elementwise cast cast "  # 40..
    "elementwise resize resize elementwise layernorm groupnorm tconv softmax "  # 48..
    "act - binary binary - - - - "  # 56..
    "unary compare compare compare compare arith arith arith "  # 64..
    "reduce reduce cumsum cumsum matmul matmul normalize normalize "  # 72..
    "index index - - variable - - - "  # 80..
    "signal signal signal signal signal signal signal signal "  # 88..
    "signal signal elementwise signal signal signal signal signal "  # 96..
    "signal conv conv pool - - control control "  # 104..
    "control control signal - - - - - "  # 112..
    "elementwise svdf - - - lstm "  # 120..
)
# the kinds that compute on or move f32 values (a program with one gets the float views):
# QUANTIZE DEQUANTIZE FCONV FDEPTHWISE FDENSE FADD FMUL FMAXPOOL FAVGPOOL FMEAN FACT FSOFTMAX FSUB
# FLSTM FGRU FBINARY FCAST FRESIZE FLAYERNORM FGROUPNORM FTCONV FREDUCE FCUMSUM FBMM FNORM FUNARY
# FCOMPARE FARITH FOVERLAP SFFT (its int32 form too: one kind) FSVDF
FLOATS = (13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 35, 37, 41, 45, 47, 50, 52, 53, 54, 73, 75, 77, 79, 64, 66, 69, 103, 114,
          121)


def word(table, kind):
    """Entry `kind` of a table of words (NAMES, ROOM): "" for a kind without one."""
    i = 0
    for _ in range(kind):
        i = table.find(" ", i) + 1
    w = table[i:table.find(" ", i)]
    return "" if w == "-" else w
