"""The host's half of lstm: TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM (docs/OPS.md): converted from the
model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/lstm.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm
from ..ir import Node

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"UNIDIRECTIONAL_SEQUENCE_LSTM": "int8 int16 float32"}


_LSTM_VARIANTS = ((9, "peephole"), (10, "peephole"), (11, "peephole"), (16, "projection"),
                  (17, "projection"), (20, "layer normalization"), (21, "layer normalization"),
                  (22, "layer normalization"), (23, "layer normalization"))


def op_UNIDIRECTIONAL_SEQUENCE_LSTM(r):
    """TFLM's standard LSTM (no peephole, projection, layer norm nor CIFG), batch 1: int8
    (int16 cell state), 16x8 (int16 activations, int8 weights, int64 biases) or float. Its
    state tensors are variables: the state persists from one call to the next (state=keep),
    as in TFLM."""
    ins = list(r.ins) + [-1] * (24 - len(r.ins))
    for i, what in _LSTM_VARIANTS:
        if ins[i] >= 0:
            raise r.err("an LSTM with %s is not supported (the standard LSTM is)" % what)
    if ins[1] < 0 or ins[5] < 0 or ins[12] < 0:
        raise r.err("a coupled input-forget gate (CIFG) LSTM is not supported")
    o = r.options("UnidirectionalSequenceLSTMOptions")
    if o.FusedActivationFunction() != 4:
        raise r.err("only a tanh cell activation is supported (has %d)" % o.FusedActivationFunction())
    if o.ProjClip() > 0:
        raise r.err("a projection clip is not supported")
    x = r.value(ins[0])
    _, xshape, xtyp, _, _, _ = r.tensor(ins[0])
    if len(xshape) != 3 or (xshape[1] if o.TimeMajor() else xshape[0]) != 1:
        raise r.err("input of shape %s: the board runs batch 1 (batch, steps, features)" % (xshape,))
    steps, nin = int(xshape[0] if o.TimeMajor() else xshape[1]), int(xshape[2])
    for i in (18, 19):
        t = r.sg.Tensors(ins[i])
        if not t.IsVariable() or r.data(ins[i]) is not None:
            raise r.err("state tensor %d is not a variable" % ins[i])
    ws = [r.data(ins[i]) for i in range(1, 9)]
    bs = [r.data(ins[i]) for i in range(12, 16)]
    if any(w is None for w in ws) or any(b is None for b in bs):
        raise r.err("the weights and biases must be constants")
    hid = int(ws[0].shape[0])
    for w, n in zip(ws, (nin,) * 4 + (hid,) * 4):
        if w.shape != (hid, n):
            raise r.err("a weight of shape %s (expected %s)" % (w.shape, (hid, n)))
    for i in (18, 19):  # TFLM's Prepare: (batch, units)
        if list(r.tensor(ins[i])[1]) != [1, hid]:
            raise r.err("state tensor %d of shape %s (expected [1, %d])" % (ins[i], list(r.tensor(ins[i])[1]), hid))
    w = np.concatenate(ws[:4])  # gates i, f, c, o (TFLite's tensor order)
    rw = np.concatenate(ws[4:])
    clip = float(np.float32(o.CellClip()))
    if o.TimeMajor() and steps > 1:  # batch 1: (steps, 1, in) holds the rows of (steps, in)
        x = _reshape(r, x, (steps, nin))
    attrs = dict(out=hid, state="keep", clip=clip if clip > 0 else None)
    yq = r.qof(r.outs[0])
    if xtyp == "FLOAT32":
        if any(v.dtype != np.float32 for v in ws + bs) or r.dtof(ins[18]) != "f32" or yq is not None:
            raise r.err("a hybrid LSTM (float activations, integer weights) is not supported")
        n = _lstm_node(r, x, steps, hid, o.TimeMajor(), **attrs)
        n.t["w"], n.t["r"] = r.add("weight", w), r.add("recurrent", rw)
        n.t["b"] = r.add("bias", np.concatenate(bs).astype(np.float32))
        return
    wide = xtyp == "INT16"  # TFLM's 16x8 LSTM: int64 biases (it reads them as int64 whatever their type)
    if xtyp not in ("INT8", "INT16") or any(v.dtype != np.int8 for v in ws) or \
            any(v.dtype != (np.int64 if wide else np.int32) for v in bs):
        raise r.err("a %s LSTM with %s weights and %s biases is not supported (int8 with int8 weights and "
                    "int32 biases, int16 with int8 weights and int64 biases, and float, are)"
                    % (xtyp.lower(), ws[0].dtype, bs[0].dtype))
    xq, hq = r.qof(ins[0]), r.qof(ins[18])
    _, _, ctyp, cscales, czps, _ = r.tensor(ins[19])
    if r.dtof(ins[18]) != ("i16" if wide else "i8") or hq != yq:
        raise r.err("the hidden state must be %s with the output's quantization" % xtyp.lower())
    if wide and (xq[1] or hq[1]):
        raise r.err("a 16x8 LSTM's input and output must be symmetric (zero points %d, %d)" % (xq[1], hq[1]))
    if ctyp != "INT16" or len(cscales) != 1 or any(czps):
        raise r.err("the cell state must be int16, symmetric")
    scales = []
    for i in range(1, 9):
        _, _, _, sc, zps, _ = r.tensor(ins[i])
        if len(sc) != 1 or any(zps):
            raise r.err("per-channel or asymmetric LSTM weights are not supported")
        scales.append(float(sc[0]))
    s_cell = float(np.float32(cscales[0]))
    if wide:
        bias = np.concatenate(bs)
        if np.any(np.abs(bias) > 2 ** 31 - 1):
            raise r.err("a 16x8 LSTM bias beyond int32: not supported (the container stores int32)")
        bias = bias.astype(np.int32)
    else:
        try:
            bias = np.concatenate([tflm.fold_input_zero_point(np.concatenate(bs), w, 0, xq[1]),
                                   tflm.fold_input_zero_point(None, rw, 0, hq[1])])
        except ValueError as e:
            raise r.err(str(e))
    n = _lstm_node(r, x, steps, hid, o.TimeMajor(), cell=tflm.lstm_cell_power(s_cell), **attrs)
    n.t["w"], n.t["r"] = r.add("weight", w), r.add("recurrent", rw)
    for key, sc in (("w", scales[:4]), ("r", scales[4:])):  # each gate's scale on its rows
        r.ir.wquant[n.t[key]] = (np.repeat(np.asarray(sc, np.float32), hid), 0)
    n.t["b"] = r.add("bias", bias)
    m = tflm.lstm_params(xq[0], scales[:4], hq[0], scales[4:], s_cell, hid)
    if wide:  # the products' shifts: TFLM's int64 MultiplyByQuantizedMultiplier takes -31..7
        r._check_shifts(m[4 * hid:8 * hid] + m[12 * hid:16 * hid], 7)
    n.t["m"] = r.add("requant", np.array(m, dtype=np.int32))
    n.t["t"] = r.add("sigmoid", np.array(tflm.SIGMOID16, dtype=np.int32).astype(np.uint16).view(np.int16))


def _reshape(r, x, shape):
    y = "%s.%d" % (x, len(r.ir.nodes))
    r.ir.shapes[y] = tuple(shape)
    if x in r.ir.q:
        r.ir.q[y] = r.ir.q[x]
    r.ir.nodes.append(Node("reshape", [x], y, r.what, shape=tuple(shape)))
    return y


def _lstm_node(r, x, steps, hid, time_major, **attrs):
    y = r.define(r.outs[0])
    n = Node("lstm", [x], y, r.what, **{k: v for k, v in attrs.items() if v is not None})
    if time_major and steps > 1:
        n.y = y + ".seq"
        r.ir.shapes[n.y] = (steps, hid)
        if y in r.ir.q:
            r.ir.q[n.y] = r.ir.q[y]
        r.ir.nodes.append(n)
        r.ir.nodes.append(Node("reshape", [n.y], y, r.what, shape=r.ir.shapes[y]))
    else:
        r.ir.nodes.append(n)
    return n
