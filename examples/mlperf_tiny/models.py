"""The four MLPerf Tiny reference models in PyTorch, at their published shapes, with seeded weights.

Reference: MLPerf Tiny (https://github.com/mlcommons/tiny), the Keras models of benchmark/training/:

  kws      keyword_spotting/keras_model.py (model 'ds_cnn'): DS-CNN over 49x10 MFCC frames, 12 classes.
           Conv 10x4/2 + 4 depthwise-separable blocks of 64 channels, average pool, dense, softmax.
  vww      visual_wake_words/vww_model.py: MobileNetV1 alpha 0.25 on a 96x96 RGB image, person or not.
           Conv 3x3/2 to 8 channels, 13 depthwise-separable blocks up to 256, average pool, dense.
  resnet8  image_classification/keras_model.py (resnet_v1_eembc, 16 first-stage filters as in the
           published v1 model): ResNet-8 for 32x32 CIFAR-10. Three residual stacks (16, 32, 64);
           the strided stacks' shortcut is a strided 1x1 conv without BatchNorm, as in the reference.
  ad       anomaly_detection/keras_model.py: dense autoencoder 640-128x4-8-128x4-640 for ToyCar
           log-mel frames; the output is the reconstruction (no final activation).

Batch 1, NCHW. The reference uses TF padding='same'; a strided 'same' conv pads asymmetrically (the
odd pixel goes bottom/right), which torch's Conv2d cannot express, so it becomes nn.ZeroPad2d +
an unpadded conv. Symmetric 'same' padding stays in the conv. (torch 2.13's dynamo exporter folds
the pad into the Conv's pads, e.g. [4, 1, 5, 1]; the TorchScript one emits a Pad node whose pads
are computed by a small subgraph.)
Dropout (identity at inference) is left out. Departures from the reference: vww uses ReLU6 (the
reference uses plain ReLU) so the exported graphs exercise Clip.

Weights are random, not trained: He-normal conv/linear weights (the vww and resnet8 references'
initializer; it keeps activations well scaled through the depth) and random but fixed BatchNorm
statistics, so that folding BatchNorm into the previous layer is really tested. `python models.py`
prints, for each model, parameters, MACs, and torch vs onnxruntime for both ONNX exporters."""
import contextlib
import io
import logging
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn

NAMES = ("kws", "vww", "resnet8", "ad")
INPUT_SHAPES = {"kws": (1, 49, 10), "vww": (3, 96, 96), "resnet8": (3, 32, 32), "ad": (640,)}


def _same(size, k, s):
    """TF 'same' padding of one dimension: (before, after); TF puts the odd pixel after."""
    total = max((-(-size // s) - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def same_conv(cin, cout, k, stride, size, groups=1):
    """Conv2d with TF 'same' padding for an input of spatial size `size` (h, w); a list of modules."""
    kh, kw = (k, k) if isinstance(k, int) else k
    (t, b), (l, r) = _same(size[0], kh, stride), _same(size[1], kw, stride)
    if t == b and l == r:
        return [nn.Conv2d(cin, cout, (kh, kw), stride, (t, l), groups=groups)]
    return [nn.ZeroPad2d((l, r, t, b)), nn.Conv2d(cin, cout, (kh, kw), stride, 0, groups=groups)]


def _kws():
    # 49x10 -> 25x5: pads 4/5 rows and 1/1 columns
    layers = same_conv(1, 64, (10, 4), 2, (49, 10)) + [nn.BatchNorm2d(64), nn.ReLU()]
    for _ in range(4):
        layers += [nn.Conv2d(64, 64, 3, 1, 1, groups=64), nn.BatchNorm2d(64), nn.ReLU(),
                   nn.Conv2d(64, 64, 1), nn.BatchNorm2d(64), nn.ReLU()]
    # the published kws_ref_model.tflite pools the whole 25x5 map
    return nn.Sequential(*layers, nn.AvgPool2d((25, 5)), nn.Flatten(), nn.Linear(64, 12), nn.Softmax(dim=1))


VWW_CHANNELS = (16, 32, 32, 64, 64, 128, 128, 128, 128, 128, 128, 256, 256)
VWW_STRIDES = (1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1)


def _vww():
    layers = same_conv(3, 8, 3, 2, (96, 96)) + [nn.BatchNorm2d(8), nn.ReLU6()]
    c, size = 8, 48
    for cout, s in zip(VWW_CHANNELS, VWW_STRIDES):
        layers += same_conv(c, c, 3, s, (size, size), groups=c) + [nn.BatchNorm2d(c), nn.ReLU6()]
        layers += [nn.Conv2d(c, cout, 1), nn.BatchNorm2d(cout), nn.ReLU6()]
        c, size = cout, -(-size // s)
    # 3x3 left: a plain AvgPool2d, as the reference's AveragePooling2D(pool_size=x.shape[1:3])
    return nn.Sequential(*layers, nn.AvgPool2d(size), nn.Flatten(), nn.Linear(c, 2), nn.Softmax(dim=1))


class Stack(nn.Module):
    """One ResNet-8 stack: relu(shortcut(x) + bn(conv(relu(bn(conv(x))))))."""

    def __init__(self, cin, cout, stride, size):
        super().__init__()
        self.conv1 = nn.Sequential(*same_conv(cin, cout, 3, stride, size), nn.BatchNorm2d(cout), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1), nn.BatchNorm2d(cout))
        # 'same' padding of a 1x1 stride-2 conv on an even size is 0; no BatchNorm, as in the reference
        self.shortcut = nn.Identity() if stride == 1 else nn.Conv2d(cin, cout, 1, stride)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.shortcut(x) + self.conv2(self.conv1(x)))


class ResNet8(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.stack1 = Stack(16, 16, 1, (32, 32))
        self.stack2 = Stack(16, 32, 2, (32, 32))
        self.stack3 = Stack(32, 64, 2, (16, 16))
        self.head = nn.Sequential(nn.AvgPool2d(8), nn.Flatten(), nn.Linear(64, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.stack3(self.stack2(self.stack1(self.stem(x)))))


def _ad():
    widths = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(128, 640))


_BUILDERS = {"kws": _kws, "vww": _vww, "resnet8": ResNet8, "ad": _ad}
# vww: larger BatchNorm gains so that up to 10 % of the activations reach 6 and ReLU6's upper bound
# matters (with gains around 1 none do); the clip keeps the scale bounded through the depth
_GAMMA = {"vww": 1.5}


def build(name, seed=0):
    """The model `name` in eval() mode with deterministic weights; `model.input_shape` is its input
    without the batch dimension."""
    torch.manual_seed(seed)
    model = _BUILDERS[name]()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                # He normal; biases keep torch's small uniform init (non-zero, so folding moves them)
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu", generator=g)
            elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                m.weight.copy_((torch.rand(n, generator=g) + 0.5) * _GAMMA.get(name, 1.0))
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    model.input_shape = INPUT_SHAPES[name]
    return model.eval()


def example_input(name, seed=0):
    """A N(0, 1) float32 input of batch 1, as a numpy array."""
    return np.random.default_rng(seed).standard_normal((1,) + INPUT_SHAPES[name]).astype(np.float32)


def _count_macs(model, x):
    total = []

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            total.append(out.numel() * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1])
        else:
            total.append(m.in_features * m.out_features)

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return sum(total)


def macs(name):
    """Multiply-accumulates of one inference, counting conv and linear layers only."""
    return _count_macs(build(name), torch.from_numpy(example_input(name)))


def params(name):
    """Trainable parameters (BatchNorm gamma/beta included, running statistics not)."""
    return sum(p.numel() for p in build(name).parameters())


def export_onnx(model_or_name, path, dynamo=True):
    """Export to one self-contained .onnx file (weights inside), input "x", output "y"; quiet."""
    model = build(model_or_name) if isinstance(model_or_name, str) else model_or_name
    x = torch.zeros((1,) + tuple(model.input_shape))
    kw = {"external_data": False} if dynamo else {}
    # the exporters print progress, log (e.g. "torchvision is not installed") and warn (deprecation,
    # tracer); none of it is about the model
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamo=dynamo, **kw)
    finally:
        log.setLevel(level)
    return path


def _logits_std(model, x):
    """Std of the last Linear's output (the pre-softmax logits)."""
    last = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    seen = []
    h = last.register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.no_grad():
        model(x)
    h.remove()
    return float(seen[0].std())


def main(out_dir="/tmp/mlperf_tiny"):
    import onnxruntime as ort

    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    print("%-8s %8s %10s %8s  %-7s %3s %7s %9s %9s %9s" % (
        "model", "params", "MACs", "out std", "export", "ok", "s", "bytes", "max abs", "max rel"))
    bad = 0
    for name in NAMES:
        model = build(name)
        xn = example_input(name)
        x = torch.from_numpy(xn)
        with torch.no_grad():
            ref = model(x).numpy()
        head = "%-8s %8d %10d %8.3f" % (name, sum(p.numel() for p in model.parameters()),
                                        _count_macs(model, x), _logits_std(model, x))
        for dynamo in (True, False):
            path = os.path.join(out_dir, "%s_%s.onnx" % (name, "dynamo" if dynamo else "ts"))
            t = time.perf_counter()
            try:
                export_onnx(model, path, dynamo)
                dt = time.perf_counter() - t
                y = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": xn})[0]
                err = np.abs(y - ref)
                res = "%3s %7.2f %9d %9.2e %9.2e" % ("yes", dt, os.path.getsize(path), err.max(),
                                                    (err / np.maximum(np.abs(ref), 1e-30)).max())
                bad += not err.max() < 1e-4
            except Exception as e:  # report and go on with the other exports
                res = "no  %s: %s" % (type(e).__name__, str(e).splitlines()[0][:60])
                bad += 1
            print("%s  %-7s %s" % (head, "dynamo" if dynamo else "ts", res))
            head = " " * len(head)
    print("out std: std of the last Linear's output for the N(0, 1) example input (the pre-softmax logits;\n"
          "ad: the reconstruction). dynamo / ts: torch.onnx.export(dynamo=True / False), s its wall time;\n"
          "max abs / max rel: onnxruntime vs torch on example_input; files in %s" % out_dir)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
