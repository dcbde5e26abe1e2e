"""The host's half of pad: TFLite's PAD, PADV2 and MIRROR_PAD (docs/OPS.md): converted from the
model into the graph description, with TFLite Micro's Prepare parameters, for the runtime's room
mpy_lazy/ops/pad.py. op_<BUILTIN>(r): r the reader (host_tools.tflite_import)."""
import numpy as np

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"PAD": "int8 int16 int32 float32", "PADV2": "int8 int16 int32 float32", "MIRROR_PAD": "int8 float32"}


def op_PAD(r):
    _pad(r)


def op_PADV2(r):
    c = r.data(r.ins[2])
    if c is None or c.size != 1:
        raise r.err("the padding value must be a constant of one element")
    yq = r.qof(r.outs[0])
    if r.tensor(r.ins[2])[2] != r.tensor(r.outs[0])[2]:
        raise r.err("padding value of type %s for a %s output" % (r.tensor(r.ins[2])[2], r.tensor(r.outs[0])[2]))
    if r.dtof(r.outs[0]) in ("i8", "i16") and r.qof(r.ins[2]) != yq:  # (TFLM's Prepare)
        raise r.err("padding value quantized %s, the output %s" % (r.qof(r.ins[2]), yq))
    v = c.reshape(-1)[0]
    _pad(r, value=float(np.float32(v)) if yq is None else None, code=int(v) if yq is not None else None)


def op_MIRROR_PAD(r):
    o = r.options("MirrorPadOptions")
    _pad(r, mode="symmetric" if o is not None and o.Mode() == 1 else "reflect")


def _pad(r, **attrs):
    """pad= a begin and an end per axis of the board's value (a batch 1 left out: never padded)."""
    x = r.value(r.ins[0])
    p = r.data(r.ins[1])
    shape = r.tensor(r.ins[0])[1]
    if p is None or p.shape != (len(shape), 2) or (p < 0).any():
        raise r.err("paddings must be a constant (%d, 2) of sizes >= 0" % len(shape))
    p = [[int(a), int(b)] for a, b in p]
    lead = len(shape) - len(r.ir.shapes[x])  # (a batch of 1, and 5-D's leading 1s: the board's values have none)
    if any(v != [0, 0] for v in p[:lead]):
        raise r.err("padding of the batch dimension")
    p = p[lead:]
    want = [n + a + b for n, (a, b) in zip(r.tensor(r.ins[0])[1], [[0, 0]] * (len(shape) - len(p)) + p)]
    if list(r.tensor(r.outs[0])[1]) != want:  # (TFLM's kernels trust it)
        raise r.err("output of shape %s, the op computes %s" % (list(r.tensor(r.outs[0])[1]), want))
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("output quantized %s, the input %s: the op moves codes, both need one"
                    % (r.qof(r.outs[0]), r.qof(r.ins[0])))
    if len(p) == 3 and p[2] == [0, 0] and not attrs:  # (the H, W form)
        r.emit("pad", [x], pad=(p[0][0], p[1][0], p[0][1], p[1][1]))
        return
    r.emit("pad", [x], pad=tuple([a for a, _ in p] + [b for _, b in p]), **attrs)
