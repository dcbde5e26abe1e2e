"""Train the two demo models (an MLP and a small CNN) on scikit-learn's bundled 8x8 digits.

CPython + PyTorch. Fixed seeds, held-out test split. Writes, into examples/digits/out/:
  <model>.safetensors, <model>.onnx, <model>.layers (layer description, docs/FORMAT.md),
  test.npz (held-out test images as uint8 0..16 + labels), results.json (PyTorch accuracy).
Training is skipped when the outputs exist and the recipe (RECIPE) is unchanged."""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from host_tools import layers  # noqa: E402

SEED = 0
EPOCHS = 60
RECIPE = {"seed": SEED, "epochs": EPOCHS, "batch": 64, "lr": 3e-3, "test_size": 0.2, "version": 1}
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


def export(name, model):
    import torch
    from safetensors.torch import save_file

    base = os.path.join(OUT, name)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, base + ".safetensors")
    dummy = torch.zeros((1,) + INPUT_SHAPE[name])
    torch.onnx.export(model, (dummy,), base + ".onnx", input_names=["x"], output_names=["logits"],
                      dynamo=False)
    with open(base + ".layers", "w") as f:
        f.write(layers.from_torch(model, INPUT_SHAPE[name]))


def main(progress_factory=None):
    """Train (or reuse cached) models; return results dict."""
    os.makedirs(OUT, exist_ok=True)
    results_path = os.path.join(OUT, "results.json")
    if os.path.exists(results_path):
        with open(results_path) as f:
            cached = json.load(f)
        if cached.get("recipe") == RECIPE and all(
                os.path.exists(os.path.join(OUT, n + ext)) for n in MODELS
                for ext in (".safetensors", ".onnx", ".layers")):
            return cached
    x_train, x_test, y_train, y_test = split()
    to_float = lambda x: (x.astype(np.float32) * INPUT_SCALE)[:, None, :, :]
    np.savez(os.path.join(OUT, "test.npz"), x=x_test, y=y_test.astype(np.uint8))
    results = {"recipe": RECIPE, "n_train": len(y_train), "n_test": len(y_test), "torch_acc": {}}
    for name in MODELS:
        progress = progress_factory(EPOCHS, "train %s" % name) if progress_factory else None
        model, acc = train_one(name, to_float(x_train), y_train, to_float(x_test), y_test, progress)
        if progress:
            progress.close()
        export(name, model)
        results["torch_acc"][name] = acc
    tmp = results_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, results_path)
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
