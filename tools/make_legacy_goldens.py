"""The peer's numbers for legacy uint8 models: TFLite's own interpreter with its reference kernels.

    python tools/make_legacy_goldens.py [--out DIR] [MODEL.tflite ...]

Legacy uint8-quantized models (TFLite's old asymmetric quantization: uint8 activations and
weights, each with a zero point; many published image models) are refused by TFLite Micro, so
the peer here is tensorflow-cpu's tf.lite.Interpreter with
experimental_op_resolver_type=BUILTIN_REF (TFLite's reference kernels,
tensorflow/lite/kernels/internal/reference/*.h). For each model it writes
<name>.npz to --out (default tests/golden/legacy/): two runs on seeded uint8 inputs, `x0`.. the
inputs and `y0`.. the interpreter's outputs (each (2, ...), no batch dimension), `seed`; tests/host/test_legacy.py compares mpy-lazy's outputs
with these, element by element. TensorFlow lives in the venv tools/make_tflite_fixtures.py keeps
(.venv-tf, pinned tensorflow-cpu 2.21.0); this script re-runs itself there (--inner).

Default models: tests/golden/thirdparty/coral-legacy/ (mobilenet_v1_0.25_128_quant.tflite,
split_concat.tflite).

ops_u8.tflite (the default too): a small graph TF 2.21's tf.compat.v1 converter still writes in the
legacy quantization (fake-quant nodes, inference_type=tf.uint8, quantized_input_stats): CONV_2D
(stride 2, relu6), DEPTHWISE_CONV_2D (multiplier 2), MAX_POOL_2D, AVERAGE_POOL_2D,
FULLY_CONNECTED, SOFTMAX, seeded weights; written to tests/golden/legacy/ with its .npz.

Slices (--slices, the default too): one-op uint8 models cut from Coral's larger models (SLICES:
the op with its real weights and quantization, some of its output channels), written to
tests/golden/legacy/<name>.tflite, with <name>.npz (one run) holding the op's real input (the whole
model's intermediate tensor on the first seeded input, TFLite's interpreter keeping every
tensor) and TFLite's output of the slice. The larger models are read from --survey (Coral's
test_data repository: github.com/google-coral/test_data, Apache-2.0).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = [os.path.join(ROOT, "tests", "golden", "thirdparty", "coral-legacy", name)
           for name in ("mobilenet_v1_0.25_128_quant.tflite", "split_concat.tflite")]
SEED = 29  # (issue 29)
SURVEY = "/work/survey-models/google-coral+test_data"
# name -> (source model, operator index, output channels kept (None: all), as FULLY_CONNECTED)
SLICES = {
    # a pointwise conv whose TFLite multiplier differs from the double-product one (five outputs
    # land on the other side of a rounding edge: GetQuantizedConvolutionMultipler's float32 product)
    "mnv1_075_conv16": ("mobilenet_v1_0.75_192_quant.tflite", 16, (0, 1, 2, 57, 235, 272, 290, 357), False),
    # uint8 ADD of two activations (mobilenet v2's residual)
    "mnv2_add53": ("mobilenet_v2_1.0_224_quant.tflite", 53, None, False),
    # the 0.25 classifier's 1x1 conv written as the FULLY_CONNECTED it is (every 16th class)
    "mnv1_025_fc": ("mobilenet_v1_0.25_128_quant.tflite", 28, tuple(range(0, 1001, 16)), True),
}


def inputs(shape, seed):
    """Two uint8 images: uniform noise and a smooth pattern (gradients and a ring), the peer's and
    ours from the same bytes (stored in the .npz)."""
    import numpy as np

    noise = np.random.default_rng(seed).integers(0, 256, size=tuple(shape[1:]), dtype=np.uint8)
    if len(shape) != 4:  # (not an image: a ramp)
        return np.stack([noise, (np.arange(noise.size) * 7 % 256).astype(np.uint8).reshape(noise.shape)])
    _, h, w, c = shape
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot(yy - h / 2, xx - w / 2)
    planes = [255 * yy / max(h - 1, 1), 255 * xx / max(w - 1, 1), 127.5 + 127.5 * np.cos(r / 4)]
    smooth = np.stack([planes[j % 3] for j in range(c)], -1)
    return np.stack([noise, np.round(smooth).astype(np.uint8)])


def cut(src, k, channels, as_fc):
    """The one-op model of operator k of src (TFLM's schema module: tests/tflm_ref.py): its
    tensors and buffers copied, its activation inputs the model's inputs; conv output channels
    `channels` kept; as_fc: a 1x1 CONV_2D over one pixel as FULLY_CONNECTED ([1, C] -> [1, O])."""
    import copy

    import flatbuffers
    import numpy as np

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tflm_ref

    schema = tflm_ref.schema
    m = tflm_ref.read_model(src)
    sg = m.subgraphs[0]
    op = copy.deepcopy(sg.operators[k])
    code = copy.deepcopy(m.operatorCodes[op.opcodeIndex])
    new, tensors, buffers, inputs, sources = {}, [], [schema.BufferT()], [], []
    for i in [int(i) for i in op.inputs] + [int(i) for i in op.outputs]:
        if i < 0 or i in new:
            continue
        t = copy.deepcopy(sg.tensors[i])
        data = m.buffers[t.buffer].data
        b = schema.BufferT()
        if data is not None and len(data):
            b.data = np.asarray(data, np.uint8)
        elif i in op.inputs:
            inputs.append(len(tensors))
            sources.append(i)
        buffers.append(b)
        t.buffer = len(buffers) - 1
        new[i] = len(tensors)
        tensors.append(t)
    if channels is not None or as_fc:  # (a conv: input, weights, bias)
        x, w, bias, y = (tensors[new[int(i)]] for i in (op.inputs[0], op.inputs[1], op.inputs[2], op.outputs[0]))
    if channels is not None:
        keep = list(channels)
        wd = buffers[w.buffer].data.reshape([int(d) for d in w.shape])
        buffers[w.buffer].data = np.ascontiguousarray(wd[keep]).reshape(-1)
        bd = buffers[bias.buffer].data.view(np.int32)
        buffers[bias.buffer].data = np.ascontiguousarray(bd[keep]).view(np.uint8)
        w.shape = [len(keep)] + [int(d) for d in w.shape[1:]]
        bias.shape = [len(keep)]
        y.shape = [int(d) for d in y.shape[:-1]] + [len(keep)]
    if as_fc:
        x.shape = [1, int(x.shape[-1])]
        w.shape = [int(w.shape[0]), int(w.shape[-1])]
        y.shape = [1, int(y.shape[-1])]
        o = schema.FullyConnectedOptionsT()
        o.fusedActivationFunction = op.builtinOptions.fusedActivationFunction
        op.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
        op.builtinOptions = o
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.FULLY_CONNECTED
    op.opcodeIndex = 0
    op.inputs = [new.get(int(i), -1) for i in op.inputs]
    op.outputs = [new[int(i)] for i in op.outputs]
    g = schema.SubGraphT()
    g.tensors, g.operators, g.inputs, g.outputs = tensors, [op], inputs, [op.outputs[0]]
    out = schema.ModelT()
    out.version, out.operatorCodes, out.subgraphs, out.buffers = 3, [code], [g], buffers
    out.description = ("operator %d of %s (mpy-lazy tools/make_legacy_goldens.py)" % (k, os.path.basename(src))).encode()
    fb = flatbuffers.Builder(1024)
    fb.Finish(out.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output()), sources


def inner_slices(jobs, out):
    """TFLite's outputs of each slice on its op's real input (the whole model's intermediate)."""
    import numpy as np
    import tensorflow as tf

    ref = tf.lite.experimental.OpResolverType.BUILTIN_REF
    for name, src, k, path, sources in jobs:
        it = tf.lite.Interpreter(model_path=src, experimental_op_resolver_type=ref,
                                 experimental_preserve_all_tensors=True)
        it.allocate_tensors()
        din = it.get_input_details()[0]
        it.set_tensor(din["index"], inputs(din["shape"], SEED)[:1])
        it.invoke()
        one = tf.lite.Interpreter(model_path=path, experimental_op_resolver_type=ref)
        one.allocate_tensors()
        xs = []
        for d, i in zip(one.get_input_details(), sources):  # (the slice's inputs, in order)
            x = it.get_tensor(i).reshape(d["shape"])
            one.set_tensor(d["index"], x)
            xs.append(x[0])
        one.invoke()
        y = one.get_tensor(one.get_output_details()[0]["index"])[0]
        dst = os.path.join(out, name + ".npz")
        save(dst, [[x] for x in xs], [[y]])
        print("%s: operator %d of %s, %d inputs -> %s" % (dst, k, os.path.basename(src), len(xs), y.shape))


def save(dst, xs, ys):
    """<name>.npz: x0, x1.. the model's inputs and y0, y1.. its outputs, each (runs, ...) without
    the batch dimension; seed."""
    import numpy as np

    arrays = {"x%d" % j: np.stack(x) for j, x in enumerate(xs)}
    arrays.update({"y%d" % j: np.stack(y) for j, y in enumerate(ys)})
    np.savez_compressed(dst + ".tmp.npz", seed=np.array(SEED), **arrays)
    os.replace(dst + ".tmp.npz", dst)


def convert_ops(path):
    """ops_u8.tflite: the legacy uint8 graph above, from TF's own (TF1) converter."""
    import numpy as np
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    rng = np.random.default_rng(SEED)
    fq = tf1.quantization.fake_quant_with_min_max_args

    def const(*shape, scale=1.0):
        return tf.constant(rng.normal(size=shape).astype(np.float32) * scale)

    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 12, 12, 3], name="x")
        h = fq(x, min=-1.0, max=1.0)
        h = tf.nn.conv2d(h, fq(const(3, 3, 3, 8), min=-1.5, max=2.0), strides=2, padding="SAME")
        h = fq(tf.nn.relu6(tf.nn.bias_add(h, const(8, scale=0.3))), min=0.0, max=6.0)
        h = tf.nn.depthwise_conv2d(h, fq(const(3, 3, 8, 2), min=-1.0, max=1.2), strides=[1, 1, 1, 1], padding="SAME")
        h = fq(tf.nn.bias_add(h, const(16, scale=0.3)), min=-8.0, max=8.0)
        h = fq(tf.nn.max_pool2d(h, 2, 2, "VALID"), min=-8.0, max=8.0)
        h = fq(tf.nn.avg_pool2d(h, 3, 3, "VALID"), min=-8.0, max=8.0)
        h = tf.matmul(tf.reshape(h, [1, 16]), fq(const(16, 10, scale=0.15), min=-0.5, max=0.4)) + const(10, scale=0.3)
        y = fq(tf.nn.softmax(fq(h, min=-4.0, max=4.0)), min=0.0, max=255.0 / 256, name="y")  # (few saturated classes)
        with tf1.Session(graph=g) as sess:
            c = tf1.lite.TFLiteConverter.from_session(sess, [x], [y])
            c.inference_type = tf.uint8
            c.quantized_input_stats = {"x": (127.5, 127.5)}
            data = c.convert()
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    tf1.enable_eager_execution()


def inner(models, out):
    import numpy as np
    import tensorflow as tf

    for path in models:
        it = tf.lite.Interpreter(model_path=path,
                                 experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        dins, douts = it.get_input_details(), it.get_output_details()
        if any(d["dtype"] != np.uint8 for d in dins):
            sys.exit("%s: inputs of %s, not a legacy uint8 model" % (path, [d["dtype"] for d in dins]))
        xs = [inputs(d["shape"], SEED + j) for j, d in enumerate(dins)]  # (two runs of each input)
        ys = [[] for _ in douts]
        for run in range(2):
            for d, x in zip(dins, xs):
                it.set_tensor(d["index"], x[run][None])
            it.invoke()
            for y, d in zip(ys, douts):
                y.append(it.get_tensor(d["index"])[0].copy())
        dst = os.path.join(out, os.path.splitext(os.path.basename(path))[0] + ".npz")
        save(dst, xs, ys)
        print("%s: 2 runs, outputs %s (tensorflow %s, BUILTIN_REF)" % (dst, [y[0].shape for y in ys], tf.__version__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="whole models (default: tests/golden/thirdparty/coral-legacy/'s)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "golden", "legacy"))
    ap.add_argument("--survey", default=SURVEY, help="Coral's test_data files, the slices' sources")
    ap.add_argument("--slices", action="store_true", help="the slices only (default: models and slices)")
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:  # (in the TensorFlow venv)
        with open(a.inner) as f:
            job = json.load(f)
        if job["convert"]:
            convert_ops(job["convert"])
            job["models"].append(job["convert"])
        inner(job["models"], job["out"])
        inner_slices(job["slices"], job["out"])
        return
    models = [] if a.slices else [os.path.abspath(m) for m in a.models or DEFAULT]
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    slices = []
    if a.slices or not a.models:
        for name, (model, k, channels, as_fc) in SLICES.items():
            src = os.path.join(a.survey, model)
            if not os.path.exists(src):
                src = os.path.join(os.path.dirname(DEFAULT[0]), model)  # (the 0.25 one is in the repo)
            data, sources = cut(src, k, channels, as_fc)
            path = os.path.join(out, name + ".tflite")
            with open(path + ".tmp", "wb") as f:
                f.write(data)
            os.replace(path + ".tmp", path)
            slices.append((name, src, k, path, sources))
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_tflite_fixtures

    py = make_tflite_fixtures.ensure_tf_venv()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    job = os.path.join(out, ".legacy-job.json")
    with open(job, "w") as f:
        json.dump({"models": models, "out": out, "slices": slices,
                   "convert": None if a.models or a.slices else os.path.join(out, "ops_u8.tflite")}, f)
    try:
        subprocess.run([py, os.path.abspath(__file__), "--inner", job], check=True, env=env)
    finally:
        os.unlink(job)


if __name__ == "__main__":
    main()
