"""The peer's numbers for legacy uint8 models: TFLite's own interpreter with its reference kernels.

    python tools/make_legacy_goldens.py [--out DIR] [MODEL.tflite ...]

Legacy uint8-quantized models (TFLite's old asymmetric quantization: uint8 activations and
weights, each with a zero point; many published image models) are refused by TFLite Micro, so
the peer here is tensorflow-cpu's tf.lite.Interpreter with
experimental_op_resolver_type=BUILTIN_REF (TFLite's reference kernels,
tensorflow/lite/kernels/internal/reference/*.h). For each model it writes
<name>.npz to --out (default tests/golden/legacy/): `x` the seeded uint8 inputs (N, H, W, C), `y`
the interpreter's outputs for them, `seed`; tests/host/test_legacy.py compares mpy-lazy's outputs
with these, element by element. TensorFlow lives in the venv tools/make_tflite_fixtures.py keeps
(.venv-tf, pinned tensorflow-cpu 2.21.0); this script re-runs itself there (--inner).

Default models: tests/golden/thirdparty/coral-legacy/mobilenet_v1_0.25_128_quant.tflite.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = [os.path.join(ROOT, "tests", "golden", "thirdparty", "coral-legacy", "mobilenet_v1_0.25_128_quant.tflite")]
SEED = 29  # (issue 29)


def inputs(shape, seed):
    """Two uint8 images: uniform noise and a smooth pattern (gradients and a ring), the peer's and
    ours from the same bytes (stored in the .npz)."""
    import numpy as np

    _, h, w, c = shape
    noise = np.random.default_rng(seed).integers(0, 256, size=(h, w, c), dtype=np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot(yy - h / 2, xx - w / 2)
    smooth = np.stack([255 * yy / (h - 1), 255 * xx / (w - 1), 127.5 + 127.5 * np.cos(r / 4)], -1)[..., :c]
    return np.stack([noise, np.round(smooth).astype(np.uint8)])


def inner(models, out):
    import numpy as np
    import tensorflow as tf

    for path in models:
        it = tf.lite.Interpreter(model_path=path,
                                 experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        (din,), (dout,) = it.get_input_details(), it.get_output_details()
        if din["dtype"] != np.uint8:
            sys.exit("%s: input is %s, not a legacy uint8 model" % (path, din["dtype"]))
        xs = inputs(din["shape"], SEED)
        ys = []
        for x in xs:
            it.set_tensor(din["index"], x[None])
            it.invoke()
            ys.append(it.get_tensor(dout["index"])[0].copy())
        name = os.path.splitext(os.path.basename(path))[0]
        dst = os.path.join(out, name + ".npz")
        tmp = dst + ".tmp.npz"
        np.savez_compressed(tmp, x=xs, y=np.stack(ys), seed=np.array(SEED))
        os.replace(tmp, dst)
        print("%s: %d inputs -> %s %s (tensorflow %s, BUILTIN_REF)" % (dst, len(xs), np.stack(ys).shape,
                                                                      ys[0].dtype, tf.__version__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "golden", "legacy"))
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    models = [os.path.abspath(m) for m in a.models or DEFAULT]
    os.makedirs(a.out, exist_ok=True)
    if a.inner:
        inner(models, a.out)
        return
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_tflite_fixtures

    py = make_tflite_fixtures.ensure_tf_venv()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    subprocess.run([py, os.path.abspath(__file__), "--inner", "--out", os.path.abspath(a.out)] + models,
                   check=True, env=env)


if __name__ == "__main__":
    main()
