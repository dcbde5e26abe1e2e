"""The host's half of softmax: TFLite's SOFTMAX (TFLM's exp table) (docs/OPS.md): converted from
the model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's
room mpy_lazy/ops/softmax.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"SOFTMAX": "int8 int16 float32"}


def op_SOFTMAX(r):
    x = r.value(r.ins[0])
    o = r.options("SoftmaxOptions")
    beta = float(o.Beta()) if o is not None else 1.0
    n = r.emit("softmax", [x])
    yq = r.qof(r.outs[0])
    if yq is None:
        n.attrs["beta"] = beta if beta != 1.0 else None
        return
    if r.dtof(r.ins[0]) == "i16":  # TFLM's SoftmaxInt16: two interpolated tables
        xq = r.qof(r.ins[0])
        if xq[1] or yq[1] or r.dtof(r.outs[0]) != "i16" or abs(yq[0] * 32768 - 1) > 1e-3:
            raise r.err("an int16 SOFTMAX takes zero point 0 and outputs int16 of scale 1/32768, zero point 0 "
                        "(TFLM's Prepare)")
        m, tables = tflm.softmax16_params(xq[0], beta)
        n.attrs["dtype"], n.attrs["m"] = "i16", m
        n.t["t"] = r.add("luts", np.array(tables, dtype=np.int16))
        return
    if r.dtof(r.ins[0]) != "i8":
        raise r.err("a SOFTMAX of %s activations is not supported (float32, int8 and int16 are)"
                       % r.tensor(r.ins[0])[2])
    if r.dtof(r.outs[0]) == "i16":  # TFLM's int8 -> int16 softmax
        if yq[1] != -32768 or abs(yq[0] * 65536 - 1) > 1e-3:
            raise r.err("an int16 softmax output must be scale 1/65536, zero point -32768")
        n.attrs["dtype"] = "i16"
    elif yq[1] != -128 or abs(yq[0] * 256 - 1) > 1e-6:
        raise r.err("int8 softmax output must be scale 1/256, zero point -128")
    s_in = r.qof(r.ins[0])[0]
    if beta * float(np.float32(s_in)) * (1 << 26) <= 1.0:  # TFLM's Prepare asserts a multiplier > 1 (it aborts)
        raise r.err("beta %r x input scale %r: TFLM's int8 softmax needs beta x scale x 2^26 > 1" % (beta, s_in))
    n.t["t"] = r.add("exp", np.array(tflm.softmax_table(s_in, beta), dtype=np.int32))
