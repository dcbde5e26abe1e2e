"""The host's half of resize: TFLite's RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR (docs/OPS.md):
converted from the model into the graph description, with TFLite Micro's Prepare parameters, for
the runtime's room mpy_lazy/ops/resize.py. op_<BUILTIN>(r): r the reader
(host_tools.tflite_import)."""
from .. import tflm

# the tensor types mpy-lazy takes for each builtin (tests/host/test_tflite*.py, against TFLM)
TYPES = {"RESIZE_NEAREST_NEIGHBOR": "int8 int16 float32", "RESIZE_BILINEAR": "int8 float32"}


def _resize(r, bilinear, cls):
    x = r.value(r.ins[0])
    size = r.data(r.ins[1])
    if size is None or size.shape != (2,):  # (TFLM's Prepare: one dimension of 2)
        raise r.err("the size must be a constant of 2 integers, shape [2]")
    if len(r.ir.shapes[x]) != 3:
        raise r.err("the input must be 1, H, W, C")
    o = r.options(cls)
    align = bool(o.AlignCorners()) if o is not None else False
    half = bool(o.HalfPixelCenters()) if o is not None else False
    if align and half and bilinear:
        raise r.err("align_corners and half_pixel_centers together (TFLM refuses them)")
    dt = r.dtof(r.ins[0])
    if bilinear and dt not in ("i8", "f32"):
        raise r.err("a RESIZE_BILINEAR of %s activations is not supported (TFLM runs float32 and int8)"
                       % r.tensor(r.ins[0])[2])
    if r.qof(r.outs[0]) != r.qof(r.ins[0]):
        raise r.err("different input and output quantization")
    oh, ow = (int(v) for v in size.reshape(-1))
    yshape = list(r.tensor(r.outs[0])[1])
    if yshape[1:3] != [oh, ow]:  # (TFLM's output is the size's: the tensor must say so)
        raise r.err("size %d x %d for an output of shape %s" % (oh, ow, yshape))
    n = r.emit("resize", [x], size=(oh, ow), interp="bilinear" if bilinear else None)
    n.t["t"] = r.add("coords", tflm.resize_table(r.ir.shapes[x], (oh, ow), bilinear, align, half,
                                                    integer=dt != "f32"))
    n.tflite_flags = (align, half)  # (a float model made int8 gets TFLM's integer coordinates)


def op_RESIZE_NEAREST_NEIGHBOR(r):
    _resize(r, False, "ResizeNearestNeighborOptions")


def op_RESIZE_BILINEAR(r):
    _resize(r, True, "ResizeBilinearOptions")
