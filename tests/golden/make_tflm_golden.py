"""Regenerate tests/golden/tflm_<name>.mpyl and tflm_<name>.json: third-party .tflite models
(tests/golden/thirdparty/tflite-micro) packed as they are, with seeded inputs and TFLite Micro's
outputs for them, so the runtime tests can check the recurrent and 16x8 kernels against TFLM on
every kernel path where no TFLM runs: the unix port and the emulated boards
(tests/runtime/test_tflm_models.py). One container and one JSON per model, small ones only (a
board loads one at a time).

    python tests/golden/make_tflm_golden.py          # rewrite the files
    python tests/golden/make_tflm_golden.py --check  # exit 1 if the packer's or TFLM's output drifted

Each JSON: "source" (the fixture), "kinds" (what it exercises), "macs", "inputs" (one flat list of
values per input of the packed model, in the .tflite's NHWC order), "outputs" (TFLM's output after a first and a
second invoke on one interpreter with the same input, where an LSTM's or SVDF's state carries
over; the second only when it differs from the first)."""
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(HERE))
THIRDPARTY = os.path.join(HERE, "thirdparty", "tflite-micro")

# name -> what the model exercises (the program's record kinds)
MODELS = {
    "seanet_conv15": "16x8 conv2d (conv16)",
    "seanet_transpose_conv0": "16x8 transpose conv (tconv16)",
    "seanet_add0": "int16 add of two inputs (add16)",
    "seanet_sub1": "int16 sub with a broadcast input (sub16)",
    "seanet_leaky_relu18": "int16 leaky relu (rescale)",
    "seanet_quantize0": "int32 -> int16 quantize (rescale)",
    "mnist_lstm_int8": "int8 LSTM with int16 cell state (lstm), state across calls",
    "mnist_lstm_float": "float LSTM (flstm), state across calls",
    "keyword_scrambled": "SVDF with int16 state (svdf), int8 -> int16 softmax (softmax16)",
    "keyword_scrambled_8bit": "SVDF with int8 state (svdf)",
}
SEED = 20


def inputs_for(path, seed):
    """(samples, fed): one seeded sample per model input, of the input's dtype and shape (batch
    1), and for each whether the packed model takes it (a TRANSPOSE_CONV's output shape given as
    an input gets the shape itself, and the packer makes it a constant)."""
    import tflm_ref

    m = tflm_ref.read_model(path)
    ts = tflm_ref.tensors(m)
    rng = np.random.default_rng(seed)
    # a TRANSPOSE_CONV's output shape given as a model input: the shape itself
    shapes = {int(op.inputs[0]): ts[int(op.outputs[0])].shape
              for op, name in zip(m.subgraphs[0].operators, tflm_ref.op_names(m)) if name == "TRANSPOSE_CONV"}
    out = []
    fed = [int(i) not in shapes for i in m.subgraphs[0].inputs]
    for i in m.subgraphs[0].inputs:
        t = ts[int(i)]
        shape = tuple(t.shape)
        if int(i) in shapes:
            out.append(np.array(shapes[int(i)], t.dtype))
        elif t.dtype == np.float32:
            out.append(rng.standard_normal(shape).astype(np.float32))
        else:
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64).astype(t.dtype))
    return out, fed


def _flat(a):
    a = np.asarray(a).ravel()
    return [float(v) for v in a] if a.dtype.kind == "f" else [int(v) for v in a]


def build(out_dir):
    """Pack every model into out_dir with its JSON; returns the file names."""
    import tflm_ref
    from host_tools.cli import main

    made = []
    for name, kinds in MODELS.items():
        src = os.path.join(THIRDPARTY, name + ".tflite")
        out = os.path.join(out_dir, "tflm_%s.mpyl" % name)
        if main(["pack", src, "-o", out, "-q", "--meta", "tool_version=golden", "--meta", "source=" + name + ".tflite"]):
            raise SystemExit("packing %s failed" % name)
        xs, fed = inputs_for(src, SEED)
        sample = tuple(xs) if len(xs) > 1 else xs[0]
        ys = tflm_ref.run(src, [sample, sample])  # one interpreter: the second invoke sees the state
        from mpy_lazy import model
        import mpy_lazy

        with open(out, "rb") as f:
            macs = model.from_container(mpy_lazy.open(f.read())).macs()
        desc = {"source": "tests/golden/thirdparty/tflite-micro/%s.tflite" % name, "kinds": kinds, "macs": macs,
                "inputs": [_flat(x) for x, f in zip(xs, fed) if f], "outputs": [_flat(y) for y in ys]}
        if desc["outputs"][1] == desc["outputs"][0]:
            del desc["outputs"][1]  # (the same again: the runtime test checks the second call against the last)
        with open(os.path.join(out_dir, "tflm_%s.json" % name), "w") as f:
            json.dump(desc, f, separators=(",", ":"))
            f.write("\n")
        made += ["tflm_%s.mpyl" % name, "tflm_%s.json" % name]
    return made


def main(argv):
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            drifted = [f for f in build(tmp)
                       if open(os.path.join(tmp, f), "rb").read() != open(os.path.join(HERE, f), "rb").read()]
        if drifted:
            print("drifted: " + ", ".join(drifted))
            return 1
        print("tflm golden files up to date")
        return 0
    for f in build(HERE):
        print("wrote tests/golden/" + f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
