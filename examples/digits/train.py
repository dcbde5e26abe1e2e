"""Train the two demo models (an MLP and a small CNN) on scikit-learn's bundled 8x8 digits.

CPython + PyTorch. Fixed seeds, held-out test split. Writes, into examples/digits/out/:
  <model>.safetensors   the trained weights (tools/make_tflite_fixtures.py reads them too)
  <model>.onnx          torch.onnx.export's default (dynamo) exporter, input "x" (1, 1, 8, 8)
  calib.npy             representative inputs for `mpy-lazy pack --quantize int8 --calibrate`:
                        CALIB_N training images (never test images), float32 (N, 1, 8, 8), scaled
                        as the models see them (pixel / 16)
  test.npz              held-out test images as uint8 0..16 (N, 8, 8) + labels
  results.json          the recipe, PyTorch's test accuracy, onnxruntime vs torch check
Training is skipped when the weights exist and the recipe (RECIPE) is unchanged; the exports are
redone when EXPORT changed or a file is missing (no retraining)."""
import contextlib
import io
import json
import logging
import os
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")

SEED = 0
EPOCHS = 60
RECIPE = {"seed": SEED, "epochs": EPOCHS, "batch": 64, "lr": 3e-3, "test_size": 0.2, "version": 1}
CALIB_N = 200
EXPORT = {"onnx": "dynamo", "calib": CALIB_N, "version": 2}
INPUT_SCALE = 1.0 / 16  # digits pixels are 0..16; the models see pixel / 16


def build(name):
    import torch.nn as nn

    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                             nn.Linear(64, 10))
    if name == "cnn":  # small enough for an RP2040: 1.9 K parameters, 24 K MACs per image
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64, 10))
    raise ValueError(name)


INPUT_SHAPE = {"mlp": (1, 8, 8), "cnn": (1, 8, 8)}
MODELS = ("mlp", "cnn")


def split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = d.images.astype(np.uint8)  # 0..16
    return train_test_split(x, d.target.astype(np.int64), test_size=RECIPE["test_size"],
                            random_state=SEED, stratify=d.target)


def to_float(x):
    """uint8 pixels (N, 8, 8) -> the models' input (N, 1, 8, 8) float32."""
    return (x.astype(np.float32) * INPUT_SCALE)[:, None, :, :]


def accuracy(model, x, y):
    import torch

    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    return float((pred == y).mean())


def train_one(name, x_train, y_train, x_test, y_test, progress=None):
    import torch

    # One thread: these models are tiny, and torch's worker threads only fight each other (and
    # anything else running) on a small machine: 7x slower with 2 threads on a busy 2-core box.
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = build(name)
    opt = torch.optim.Adam(model.parameters(), lr=RECIPE["lr"])
    xt = torch.from_numpy(x_train)
    yt = torch.from_numpy(y_train)
    g = torch.Generator().manual_seed(SEED)
    for _epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(xt), generator=g)
        for i in range(0, len(xt), RECIPE["batch"]):
            idx = perm[i:i + RECIPE["batch"]]
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if progress:
            progress.update(1)
    model.eval()
    return model, accuracy(model, x_test, y_test)


def load(name):
    """The trained model from out/<name>.safetensors, in eval mode."""
    from safetensors.torch import load_file

    model = build(name)
    model.load_state_dict(load_file(os.path.join(OUT, name + ".safetensors")))
    return model.eval()


def export_onnx(model, path):
    """torch.onnx.export with its default exporter (dynamo=True), one self-contained file, input
    "x" (1, 1, 8, 8), output "logits"; the exporter's progress lines and warnings are dropped."""
    import torch

    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    tmp = path + ".tmp.onnx"
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.zeros((1,) + INPUT_SHAPE["mlp"]),), tmp, input_names=["x"],
                              output_names=["logits"], dynamo=True, external_data=False)
    finally:
        log.setLevel(level)
    os.replace(tmp, path)


def onnx_check(model, path, x):
    """Max |onnxruntime - torch| over the images x (N, 1, 8, 8), one at a time (batch 1)."""
    import onnxruntime as ort
    import torch

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    got = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])
    return float(np.abs(got - ref).max())


def calibration_set(x_train):
    """CALIB_N training images, a seeded random choice, in the models' input layout and scale."""
    idx = np.random.default_rng(SEED).choice(len(x_train), CALIB_N, replace=False)
    return to_float(x_train[np.sort(idx)])


def _have(*names):
    return all(os.path.exists(os.path.join(OUT, n)) for n in names)


def _save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main(progress_factory=None):
    """Train (or reuse the cached weights), export (or reuse the exports); return results:
    {"recipe", "export", "n_train", "n_test", "torch_acc": {name: fraction}, "onnx_max_abs":
    {name: float}, "trained": bool (this call trained)}."""
    os.makedirs(OUT, exist_ok=True)
    results_path = os.path.join(OUT, "results.json")
    cached = None
    if os.path.exists(results_path):
        with open(results_path) as f:
            cached = json.load(f)
    weights = ["%s.safetensors" % n for n in MODELS]
    exports = ["%s.onnx" % n for n in MODELS] + ["calib.npy", "test.npz"]
    if cached and cached.get("recipe") == RECIPE and _have(*weights):
        if cached.get("export") == EXPORT and _have(*exports):
            cached["trained"] = False
            return cached
        results = cached  # weights current, exports not: export again, no training
        trained = False
    else:
        results = {"recipe": RECIPE, "torch_acc": {}}
        trained = True
    x_train, x_test, y_train, y_test = split()
    if trained:
        from safetensors.torch import save_file

        for name in MODELS:
            progress = progress_factory(EPOCHS, "train %s" % name) if progress_factory else None
            model, acc = train_one(name, to_float(x_train), y_train, to_float(x_test), y_test, progress)
            if progress:
                progress.close()
            save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                      os.path.join(OUT, name + ".safetensors"))
            results["torch_acc"][name] = acc
    results.update({"n_train": len(y_train), "n_test": len(y_test), "onnx_max_abs": {}})
    np.savez(os.path.join(OUT, "test.npz"), x=x_test, y=y_test.astype(np.uint8))
    np.save(os.path.join(OUT, "calib.npy"), calibration_set(x_train))
    for name in MODELS:
        model = load(name)
        path = os.path.join(OUT, name + ".onnx")
        export_onnx(model, path)
        results["onnx_max_abs"][name] = onnx_check(model, path, to_float(x_test))
    results["export"] = EXPORT
    results.pop("trained", None)
    _save_json(results_path, results)
    results["trained"] = trained
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
