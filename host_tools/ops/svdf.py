"""The host's half of svdf: TFLite's SVDF (docs/OPS.md): converted from the model into the graph
description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/svdf.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"SVDF": "int8 float32"}


def op_SVDF(r):
    """TFLM's integer SVDF (int8 input and output, int16 or int8 state and time weights) and its
    float32 one (float32 throughout, the fused activation none, relu or relu6). TFLM reads the
    bias whatever the model says (its Prepare fails without one): it is required."""
    if len(r.ins) != 5 or min(r.ins) < 0:
        raise r.err("SVDF needs its five inputs (input, feature and time weights, bias, state)")
    o = r.options("SVDFOptions")
    x = r.value(r.ins[0])
    wf, wt, b = (r.data(i) for i in r.ins[1:4])
    if wf is None or wt is None or b is None:
        raise r.err("the weights and the bias must be constants")
    _, xshape, xtyp, _, _, _ = r.tensor(r.ins[0])
    if len(xshape) != 2 or xshape[0] != 1:
        raise r.err("input of shape %s: the board runs batch 1 (batch, features)" % (xshape,))
    if xtyp == "FLOAT32":
        _float_svdf(r, o, x, xshape, wf, wt, b)
        return
    st = r.sg.Tensors(r.ins[4])
    _, sshape, styp, sscales, szps, _ = r.tensor(r.ins[4])
    if not st.IsVariable() or r.data(r.ins[4]) is not None:
        raise r.err("the state tensor is not a variable")
    sdt = {"INT16": "i16", "INT8": "i8"}.get(styp)
    if xtyp != "INT8" or wf.dtype != np.int8 or sdt is None or wt.dtype != {"i16": np.int16, "i8": np.int8}[sdt] \
            or b.dtype != np.int32:
        raise r.err("an SVDF of %s input, %s/%s weights and a %s state is not supported (int8 input, int8 "
                       "feature weights, int16 or int8 time weights and state)" % (xtyp, wf.dtype, wt.dtype, styp))
    rank = o.Rank()
    filters, mem = int(wf.shape[0]), int(wt.shape[1])
    if rank < 1 or filters % rank or wt.shape[0] != filters or wf.shape[1] != xshape[1]:
        raise r.err("weights of shapes %s and %s do not fit rank %d" % (wf.shape, wt.shape, rank))
    scale = []
    for i in r.ins[1:3]:
        _, _, _, sc, zps, _ = r.tensor(i)
        if len(sc) != 1 or any(zps):
            raise r.err("per-channel or asymmetric SVDF weights are not supported")
        scale.append(float(sc[0]))
    if len(r.ins) > 3 and r.ins[3] >= 0:  # TFLM's Prepare: the bias on the state x time scale
        bsc = r.tensor(r.ins[3])[3]
        want = float(np.float32(float(np.float32(sscales[0])) * scale[1])) if len(sscales) else 0.0
        if not len(bsc) or abs(float(np.float32(bsc[0])) - want) >= 1e-5:
            raise r.err("bias scale %r: TFLM takes state scale x time weight scale (%r) within 1e-5"
                           % (float(bsc[0]) if len(bsc) else None, want))
    if list(sshape) != [1, filters * mem]:  # TFLM's Prepare: (batch, memory x filters)
        raise r.err("state of shape %s: TFLM takes (1, %d)" % (list(sshape), filters * mem))
    xq, yq = r.qof(r.ins[0]), r.qof(r.outs[0])
    sq = (float(np.float32(sscales[0])), szps[0] if szps else 0)
    n = r.emit("svdf", [x], out=filters // rank, rank=rank, memory=mem, sq="%r,%d" % sq,
                  sdtype=sdt if sdt != "i16" else None,
                  m=tflm.svdf_params(xq[0], scale[0], sq[0], scale[1], yq[0]))
    n.t["w"], n.t["t"], n.t["b"] = r.add("weight", wf), r.add("time", wt), r.add("bias", b)


def _float_svdf(r, o, x, xshape, wf, wt, b):
    """TFLM's EvalFloatSvdfReference: float32 weights, bias and state (a variable of (1, F x M))."""
    st = r.sg.Tensors(r.ins[4])
    _, sshape, styp, _, _, _ = r.tensor(r.ins[4])
    if not st.IsVariable() or r.data(r.ins[4]) is not None:
        raise r.err("the state tensor is not a variable")
    if styp != "FLOAT32" or wf.dtype != np.float32 or wt.dtype != np.float32 or b.dtype != np.float32:
        raise r.err("a float SVDF of %s/%s weights and a %s state: TFLM's float SVDF takes float32 throughout"
                    % (wf.dtype, wt.dtype, styp))
    rank = o.Rank()
    if wf.ndim != 2 or wt.ndim != 2:
        raise r.err("weights of shapes %s and %s: TFLM takes 2-D ones" % (wf.shape, wt.shape))
    filters, mem = int(wf.shape[0]), int(wt.shape[1])
    if rank < 1 or filters % rank or wt.shape[0] != filters or wf.shape[1] != xshape[1]:
        raise r.err("weights of shapes %s and %s do not fit rank %d" % (wf.shape, wt.shape, rank))
    if b.size != filters // rank:
        raise r.err("a bias of %d values for %d units" % (b.size, filters // rank))
    if list(sshape) != [1, filters * mem]:  # TFLM's Prepare: (batch, memory x filters)
        raise r.err("state of shape %s: TFLM takes (1, %d)" % (list(sshape), filters * mem))
    act = r._act(o.FusedActivationFunction())
    if act not in (None, "relu", "relu6"):
        raise r.err("fused activation %s on a float SVDF is not supported (none, relu, relu6 are)" % act.upper())
    n = r.emit("svdf", [x], out=filters // rank, rank=rank, memory=mem, act=act)
    n.t["w"], n.t["t"], n.t["b"] = r.add("weight", wf), r.add("time", wt), r.add("bias", b.reshape(-1))
