"""Which small PyTorch models mpy-lazy runs: each family exported with both torch exporters
(TorchScript, dynamo=False, and the default dynamo exporter), packed f32 and int8 (calibrated
on seeded inputs), run by the runtime on CPython and compared with the peers: f32 within 1e-4
(relative to the largest output) of onnxruntime, int8 equal to host_tools/reference.py on the
container's own tensors (the pure kernels). With --micropython the same containers also run on
the MicroPython unix port (viper).

    .venv/bin/python tools/coverage.py [--micropython] [--only NAME,...] [-v]

Prints one line per family and exporter: `ok`, or the first line of why it is refused or
wrong; then the count. tests/host/test_torch_families.py runs the families this list marks as
expected to run (RUNS) on the unix port; tests/host/test_crnn.py the recurrent ones (TASKS),
against torch."""
import argparse
import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

nn = torch.nn
FLOAT_RTOL = 1e-4
INT8_RTOL = 0.25  # int8 vs float (relative to the largest output): a sanity bound


# --------------------------------------------------------------------------- the families

class SE(nn.Module):
    """Squeeze-and-excite (MobileNetV3, EfficientNet): a per-channel gate from the mean."""

    def __init__(self, c, r=4, gate=nn.Sigmoid):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)
        self.gate = gate()

    def forward(self, x):
        return x * self.gate(self.fc2(torch.relu(self.fc1(self.pool(x)))))


class SELinear(nn.Module):
    """Squeeze-and-excite with Linear layers and a view back to (N, C, 1, 1)."""

    def __init__(self, c, r=4):
        super().__init__()
        self.fc1 = nn.Linear(c, c // r)
        self.fc2 = nn.Linear(c // r, c)

    def forward(self, x):
        s = x.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s.view(1, -1, 1, 1)


class SEBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.se = SE(8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.head(self.se(torch.relu(self.conv(x))))


class SEAdd(nn.Module):
    """A per-channel bias from a global branch: Add of an (N, C, 1, 1) activation."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Conv2d(6, 6, 1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        g = self.fc(y.mean(dim=(2, 3), keepdim=True))
        return (y + g) - torch.sigmoid(g)


class MBV3Block(nn.Module):
    """MobileNetV3-small's bneck with squeeze-and-excite: expand, depthwise, SE, project."""

    def __init__(self, act=nn.Hardswish, gate=nn.Hardsigmoid):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), act())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.se = SE(8, 4, gate)
        self.pw = nn.Sequential(nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x):
        return self.head(self.pw(self.se(self.dw(self.stem(x)))))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: expand 1x1, depthwise 3x3, project 1x1, residual add."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), nn.ReLU6(),
                                   nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU6(),
                                   nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8))

    def forward(self, x):
        x = self.stem(x)
        return x + self.block(x)


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(6, 6, 3, padding=1), nn.BatchNorm2d(6))
        self.short = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        return torch.relu(self.b(self.a(x)) + self.short(x))


class Conv1dNet(nn.Module):
    """A 1-D conv net (keyword spotting / sensor signals): batchnorms (one on the input, one
    after a conv), convs (a depthwise one), pools, classifier."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.BatchNorm1d(3), nn.Conv1d(3, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(),
                               nn.MaxPool1d(2), nn.Conv1d(8, 8, 3, padding=1, groups=8), nn.Conv1d(8, 12, 1), nn.ReLU(),
                               nn.AvgPool1d(2), nn.Conv1d(12, 12, 3, stride=2), nn.ReLU(),
                               nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(12, 4))

    def forward(self, x):
        return self.f(x)


class TCN(nn.Module):
    """A temporal conv block: dilated causal Conv1d (left pad, then chomp), residual."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Conv1d(2, 6, 1)
        self.conv = nn.Conv1d(6, 6, 3, dilation=2, padding=4)
        self.head = nn.Linear(6 * 16, 3)

    def forward(self, x):
        x = self.inp(x)
        y = torch.relu(self.conv(x)[:, :, :-4])
        return self.head((x + y).flatten(1))


class Conv1dMax(nn.Module):
    """Conv1d then a global max over time (text / signal classifiers): ReduceMax or amax."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).amax(dim=2))


class GlobalMax(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))


class AmaxHW(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).amax(dim=(2, 3)))


class ChannelStats(nn.Module):
    """Spatial attention (CBAM): mean and max over the channels, concatenated, a conv, a gate."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.att = nn.Conv2d(2, 1, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        s = torch.cat([y.mean(dim=1, keepdim=True), y.amax(dim=1, keepdim=True)], dim=1)
        return y * torch.sigmoid(self.att(s))


class ConcatHW(nn.Module):
    """Concatenation along H and W (torch's dim 2 and 3 of C, H, W data), then flattened."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 1)
        self.fc = nn.Linear(4 * 12 * 12, 5)

    def forward(self, x):
        a, b = torch.relu(self.a(x)), self.b(x)
        y = torch.cat([torch.cat([a, b], dim=2), torch.cat([b, a], dim=2)], dim=3)
        return self.fc(y.reshape(1, -1))


class TConv(nn.Module):
    """A decoder: transposed convs upsampling (stride 2, padding, output_padding)."""

    def __init__(self):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1)
        self.up3 = nn.ConvTranspose2d(3, 2, 3, stride=1, padding=1, bias=False)

    def forward(self, x):
        return self.up3(torch.relu(self.up2(torch.relu(self.up1(x)))))


class UNetTiny(nn.Module):
    """A tiny U-Net: conv down, transposed conv up, skip concatenated along the channels."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e = self.enc(x)
        return self.out(torch.cat([e, self.up(self.down(e))], dim=1))


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                 nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1),
                                 nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


class Upsample(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode=mode)

    def forward(self, x):
        return self.up(torch.relu(self.conv(x)))


class RNN(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(6, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class CRNN(nn.Module):
    """The keyword-spotting CRNN: a Conv1d front end over the feature frames (N, F, T), then a
    GRU or LSTM over its output frames, the last step into a classifier. `to_rnn` is how the
    model hands the conv's (N, C, T) to the RNN: batch first (transpose), time major (permute,
    or squeeze / t / unsqueeze, or a reshape), all forms the issue tried."""

    def __init__(self, cell, to_rnn="transpose", hn=False):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(8, 12, 3, padding=1), nn.BatchNorm1d(12), nn.ReLU())
        self.rnn = cell(12, 16, batch_first=to_rnn == "transpose")
        self.fc = nn.Linear(16, 5)
        self.to_rnn, self.hn = to_rnn, hn

    def forward(self, x):
        y = self.conv(x)  # (1, C, T)
        if self.to_rnn == "transpose":
            y = y.transpose(1, 2)  # (1, T, C)
        elif self.to_rnn == "permute":
            y = y.permute(2, 0, 1)  # (T, 1, C)
        elif self.to_rnn == "squeeze":
            y = y.squeeze(0).t().unsqueeze(1)
        else:  # reshape
            y = y.transpose(1, 2).reshape(y.shape[2], 1, y.shape[1])
        o, state = self.rnn(y)
        if self.hn:
            return self.fc((state[0] if isinstance(state, tuple) else state)[-1])
        return self.fc(o[:, -1] if self.to_rnn == "transpose" else o[-1])


class CRNN2d(nn.Module):
    """A Conv2d front end over a spectrogram (N, 1, F, T), its (C, F) of each frame flattened for
    the RNN: batch first (N, T, C x F), or time major (T, N, C x F)."""

    def __init__(self, cell, time_major=False):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d((2, 1)))
        self.rnn = cell(4 * 4, 12, batch_first=not time_major)
        self.fc = nn.Linear(12, 5)
        self.time_major = time_major

    def forward(self, x):
        y = self.conv(x)  # (1, C, F, T)
        n, c, f, t = y.shape
        if self.time_major:
            o, _ = self.rnn(y.permute(3, 0, 1, 2).reshape(t, n, c * f))
            return self.fc(o[-1])
        o, _ = self.rnn(y.permute(0, 3, 1, 2).reshape(n, t, c * f))
        return self.fc(o[:, -1])


class RNNConv(nn.Module):
    """An RNN's output frames (N, T, H) into a Conv1d (N, H, T), a mean over time, a classifier."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(8, 12, batch_first=True)
        self.conv = nn.Conv1d(12, 8, 3)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        o, _ = self.rnn(x)
        return self.fc(torch.relu(self.conv(o.transpose(1, 2))).mean(dim=2))


class FrameRNN(nn.Module):
    """A Linear on every frame (N, T, F) before the RNN; out: the last step's classes, or
    (frames) a Linear on every step's output (N, T, K)."""

    def __init__(self, cell, frames=False):
        super().__init__()
        self.inp = nn.Linear(8, 12)
        self.rnn = cell(12, 16, batch_first=True)
        self.fc = nn.Linear(16, 5)
        self.frames = frames

    def forward(self, x):
        o, _ = self.rnn(torch.relu(self.inp(x)))
        return self.fc(o) if self.frames else self.fc(o[:, -1])


class Norm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = norm

    def forward(self, x):
        return self.norm(self.conv(x))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10), nn.Softmax(dim=1))


def _dscnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 12, 1), nn.BatchNorm2d(12), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 4))


# name: (builder, input shape without the batch); the ones other work covers are marked in NOTES
FAMILIES = {
    "mlp": (lambda: nn.Sequential(nn.Linear(16, 12), nn.ReLU(), nn.Dropout(0.1), nn.Linear(12, 4)), (16,)),
    "cnn": (_cnn, (1, 16, 16)),
    "ds_cnn": (_dscnn, (1, 10, 8)),
    "inverted_residual": (InvertedResidual, (3, 8, 8)),
    "resnet_block": (ResBlock, (3, 8, 8)),
    "se_block": (SEBlock, (3, 8, 8)),
    "se_linear": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), SELinear(8)), (3, 8, 8)),
    "se_add_sub": (SEAdd, (3, 6, 6)),
    "mbv3_block_relu": (lambda: MBV3Block(nn.ReLU, nn.Sigmoid), (3, 16, 16)),
    "mbv3_block": (MBV3Block, (3, 16, 16)),
    "conv1d_net": (Conv1dNet, (3, 32)),
    "tcn": (TCN, (2, 16)),
    "conv1d_max": (Conv1dMax, (4, 12)),
    "global_maxpool": (GlobalMax, (3, 8, 8)),
    "amax_hw": (AmaxHW, (3, 8, 8)),
    "channel_mean_max": (ChannelStats, (3, 6, 6)),
    "avgpool_pad": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(3, 2, padding=1)), (3, 9, 9)),
    "maxpool_ceil": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2, ceil_mode=True)), (3, 9, 9)),
    "avgpool_ceil": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(3, 2, ceil_mode=True)), (3, 10, 10)),
    "concat_hw": (ConcatHW, (3, 6, 6)),
    "tconv": (TConv, (4, 5, 5)),
    "unet_tiny": (UNetTiny, (1, 8, 8)),
    "autoencoder": (Autoencoder, (1, 12, 12)),
    "silu": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.SiLU()), (3, 6, 6)),
    "upsample_nearest": (lambda: Upsample("nearest"), (3, 5, 5)),
    "upsample_bilinear": (lambda: Upsample("bilinear"), (3, 5, 5)),
    "lstm": (lambda: RNN(nn.LSTM), (7, 6)),
    "gru": (lambda: RNN(nn.GRU), (7, 6)),
    "crnn_gru": (lambda: CRNN(nn.GRU), (8, 12)),
    "crnn_lstm": (lambda: CRNN(nn.LSTM), (8, 12)),
    "crnn_gru_permute": (lambda: CRNN(nn.GRU, "permute"), (8, 12)),
    "crnn_lstm_squeeze": (lambda: CRNN(nn.LSTM, "squeeze", hn=True), (8, 12)),
    "crnn_lstm_reshape": (lambda: CRNN(nn.LSTM, "reshape"), (8, 12)),
    "crnn_conv2d_gru": (lambda: CRNN2d(nn.GRU), (1, 8, 12)),
    "crnn_conv2d_lstm_tm": (lambda: CRNN2d(nn.LSTM, time_major=True), (1, 8, 12)),
    "gru_conv1d": (lambda: RNNConv(nn.GRU), (12, 8)),
    "lstm_conv1d": (lambda: RNNConv(nn.LSTM), (12, 8)),
    "linear_gru": (lambda: FrameRNN(nn.GRU), (12, 8)),
    "lstm_frames": (lambda: FrameRNN(nn.LSTM, frames=True), (12, 8)),
    "layernorm": (lambda: nn.Sequential(nn.Linear(10, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3)), (10,)),
    "groupnorm": (lambda: Norm(nn.GroupNorm(2, 4)), (3, 6, 6)),
    "instancenorm": (lambda: Norm(nn.InstanceNorm2d(4, affine=True)), (3, 6, 6)),
    "prelu": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.PReLU(4)), (3, 6, 6)),
}


# --------------------------------------------------------------------------- export, pack, run

def seeded(module, seed):
    """Fixed random weights and BatchNorm statistics (so folding them is tested); eval mode."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.3)
    return module.eval()


# the classifiers whose head is fitted to a toy task (fit_head): their class depends on the input
TASKS = ("crnn_gru", "crnn_lstm", "crnn_gru_permute", "crnn_lstm_squeeze", "crnn_lstm_reshape", "crnn_conv2d_gru",
         "crnn_conv2d_lstm_tm", "gru_conv1d", "lstm_conv1d", "linear_gru", "lstm_frames")
CLASSES = 5


def build(name):
    builder, shape = FAMILIES[name]
    torch.manual_seed(zlib.crc32(name.encode()))
    module = seeded(builder(), zlib.crc32(name.encode()) & 0xFFFF)
    if name in TASKS:
        fit_head(module, name, shape)
    return module, shape


def task(name, shape, n, stream):
    """n inputs of a family's toy task and their classes: class k is a fixed random pattern k
    (the family's own) plus as much noise."""
    patterns = np.random.default_rng(zlib.crc32(name.encode())).standard_normal((CLASSES,) + tuple(shape))
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1000 + stream)
    labels = rng.integers(0, CLASSES, n)
    return (patterns[labels] + rng.standard_normal((n,) + tuple(shape))).astype(np.float32), labels


def fit_head(module, name, shape, n=200):
    """The classifier `module.fc` fitted (ridge regression on one-hot classes) to what the rest of
    the model makes of the task's inputs, every frame of an every-step output: a random model
    gives nearly one class for every input, a trained one does not (its int8 argmax is a test)."""
    xs, labels = task(name, shape, n, stream=-1)
    feats = []
    hook = module.fc.register_forward_hook(lambda m, inp, out: feats.append(inp[0].detach().numpy()))
    with torch.no_grad():
        for x in xs:
            module(torch.from_numpy(x[None]))
    hook.remove()
    per = feats[0].reshape(-1, feats[0].shape[-1]).shape[0]  # frames per input
    f = np.concatenate([v.reshape(-1, v.shape[-1]) for v in feats]).astype(np.float64)
    f = np.hstack([f, np.ones((len(f), 1))])
    y = np.eye(CLASSES)[np.repeat(labels, per)] * 2 - 1
    w = np.linalg.solve(f.T @ f + 0.1 * np.eye(f.shape[1]), f.T @ y)
    with torch.no_grad():
        module.fc.weight.copy_(torch.from_numpy(w[:-1].T.copy()))
        module.fc.bias.copy_(torch.from_numpy(w[-1].copy()))


def export(module, shape, path, dynamo):
    """torch.onnx.export of a batch-1 model, input "x", output "y"; the exporters' chatter dropped."""
    kw = {"external_data": False} if dynamo else {}
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.zeros((1,) + tuple(shape)),), str(path), input_names=["x"],
                              output_names=["y"], dynamo=dynamo, **kw)
    finally:
        log.setLevel(level)
    return str(path)


def inputs(name, shape, n, stream=0):
    if name in TASKS:
        return task(name, shape, n, stream)[0]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + stream)
    return rng.standard_normal((n,) + tuple(shape)).astype(np.float32)


def pack(onnx_path, out, kind, calib=None):
    """`mpy-lazy pack` in-process; None or the one-line refusal."""
    from host_tools.cli import main

    args = ["pack", onnx_path, "-o", out, "-q"]
    if kind == "int8":
        args += ["--quantize", "int8", "--calibrate", calib]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(args)
    return None if rc == 0 else (err.getvalue().strip().splitlines() or ["exit %d" % rc])[-1]


def quantize_input(x, q):
    """Host quantization of a float input: round half away from zero, saturate (TFLite's)."""
    r = np.asarray(x, np.float64).reshape(-1) / q[0]
    r = np.where(r >= 0, np.floor(r + 0.5), -np.floor(-r + 0.5)) + q[1]
    return np.clip(r, -128, 127).astype(np.int64)


def rel_err(y, want):
    want = np.asarray(want, np.float64).reshape(-1)
    return float(np.max(np.abs(np.asarray(y, np.float64).reshape(-1) - want)) / max(np.max(np.abs(want)), 1e-30))


class Case:
    """One family from one exporter: the ONNX file, seeded inputs, onnxruntime's outputs, the packs."""

    def __init__(self, name, dynamo, workdir, n_inputs=2):
        import onnxruntime as ort

        self.name, self.dynamo = name, dynamo
        self.key = "%s-%s" % (name, "dynamo" if dynamo else "ts")
        module, self.shape = build(name)
        self.onnx = os.path.join(workdir, self.key + ".onnx")
        self.status = {}
        self.packs = {}
        try:
            export(module, self.shape, self.onnx, dynamo)
        except Exception as e:
            self.status["export"] = "export failed: %s" % (str(e).strip().splitlines() or [type(e).__name__])[0]
            return
        self.xs = inputs(name, self.shape, n_inputs)
        sess = ort.InferenceSession(self.onnx, providers=["CPUExecutionProvider"])
        self.ort = [np.asarray(sess.run(None, {"x": x[None]})[0]).reshape(-1).astype(np.float64) for x in self.xs]
        calib = os.path.join(workdir, self.key + "-calib.npy")
        np.save(calib, inputs(name, self.shape, 16, stream=1))
        for kind in ("f32", "int8"):
            out = os.path.join(workdir, "%s-%s.mpyl" % (self.key, kind))
            err = pack(self.onnx, out, kind, calib)
            if err:
                self.status[kind] = err.replace("mpy-lazy: error: ", "").replace(self.onnx + ": ", "")
            else:
                self.packs[kind] = out
        self._ref = None

    def xi(self):
        from mpy_lazy import graph as mgraph, open as mopen

        c = mopen(open(self.packs["int8"], "rb").read())
        q = [kv.get("q") for _, op, kv in mgraph.parse(c.meta["graph"]) if op == "input"][0]
        return [quantize_input(x, q) for x in self.xs]

    def ref(self):
        """host_tools.reference on the int8 container's own tensors, per input."""
        if self._ref is None:
            from host_tools import reference
            import mpy_lazy

            c = mpy_lazy.open(open(self.packs["int8"], "rb").read())
            tensors = {}
            for n in c.names():
                v = c.view(n)
                tensors[n] = np.array(v.array()).reshape(v.shape)
            self._ref = [reference.run(c.meta["graph"], tensors, xi)[0].reshape(-1) for xi in self.xi()]
        return self._ref

    def int8_output(self, codes):
        """The int8 container's output codes as reals (its output's q)."""
        from mpy_lazy import graph as mgraph, open as mopen

        text = mopen(open(self.packs["int8"], "rb").read()).meta["graph"]
        lines = list(mgraph.parse(text))
        out = [kv["x"] for _, op, kv in lines if op == "output"][0]
        s, z = [kv for _, op, kv in lines if kv.get("y") == out][0]["q"]
        return s * (np.asarray(codes, np.float64) - z)

    def run_cpython(self):
        """f32 vs onnxruntime and int8 vs the reference, on CPython's pure kernels."""
        import mpy_lazy
        from mpy_lazy import kernels, model

        prev = kernels.path()
        kernels.use("pure")
        try:
            if "f32" in self.packs:
                m = model.from_container(mpy_lazy.open(open(self.packs["f32"], "rb").read()))
                errs = []
                for x, want in zip(self.xs, self.ort):
                    m(x.reshape(-1).tolist())
                    errs.append(rel_err(m.tolist(), want))
                if max(errs) > FLOAT_RTOL:
                    self.status["f32"] = "wrong: relative error %.2g (> %g)" % (max(errs), FLOAT_RTOL)
            if "int8" in self.packs:
                m = model.from_container(mpy_lazy.open(open(self.packs["int8"], "rb").read()))
                for xi, ref in zip(self.xi(), self.ref()):
                    m(xi.tolist())
                    if m.tolist() != ref.tolist():
                        self.status["int8"] = "wrong: differs from host_tools/reference.py"
                        break
                err = max(rel_err(self.int8_output(r), want) for r, want in zip(self.ref(), self.ort))
                if err >= INT8_RTOL:  # 8-bit activations all through: near the float model, not equal
                    self.status.setdefault("int8", "far from the float model: relative error %.2g" % err)
        except Exception as e:
            for kind in self.packs:
                self.status.setdefault(kind, "runtime: %s" % (str(e).strip().splitlines() or [repr(e)])[0])
        finally:
            kernels.use(prev)

    def jobs(self, workdir):
        """Board jobs (tests/host/host_util.py BOARD) for its containers."""
        out = []
        for kind, path in self.packs.items():
            xs = [xi.tolist() for xi in self.xi()] if kind == "int8" else \
                [x.reshape(-1).astype(np.float64).tolist() for x in self.xs]
            jpath = os.path.join(workdir, os.path.basename(path) + ".json")
            with open(jpath, "w") as f:
                json.dump(xs, f)
            out.append({"name": os.path.basename(path), "alloc": kind == "int8", "xs": jpath})
        return out

    def check_board(self, results):
        """Compare a board run's results ({container name: result}) with the peers."""
        for kind, path in self.packs.items():
            r = results.get(os.path.basename(path))
            if r is None:
                self.status.setdefault(kind, "did not run on the unix port")
            elif kind == "f32":
                err = max(rel_err(y, want) for y, want in zip(r["ys"], self.ort))
                if err > FLOAT_RTOL:
                    self.status.setdefault(kind, "unix port: relative error %.2g" % err)
            elif [list(y) for y in r["ys"]] != [ref.tolist() for ref in self.ref()]:
                self.status.setdefault(kind, "unix port: differs from host_tools/reference.py")

    def line(self):
        parts = []
        for kind in ("f32", "int8"):
            parts.append("%s %s" % (kind, "ok" if kind not in self.status and kind in self.packs
                                    else self.status.get(kind) or self.status.get("export")))
        return "%-20s %-7s %s" % (self.name, "dynamo" if self.dynamo else "ts", " | ".join(parts))

    def ok(self, kind):
        return kind in self.packs and kind not in self.status


def board_run(workdir, cases, micropython):
    """Run every container of the cases on the unix port in one process (tests/host/host_util.py
    BOARD, viper path); {container name: result}."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from host_util import BOARD
    from host_tools.cli import main

    paths = [p for c in cases for p in c.packs.values()]
    if not paths:
        return {}
    image = os.path.join(workdir, "coverage.romfs")
    with contextlib.redirect_stdout(io.StringIO()):
        main(["romfs"] + paths + ["-o", image, "-q"])
    jobs = os.path.join(workdir, "coverage-jobs.json")
    with open(jobs, "w") as f:
        json.dump([j for c in cases for j in c.jobs(workdir)], f)
    code = "import sys\nsys.path[:0] = [%r]\n" % ROOT + BOARD % {"path": "viper", "image": image, "jobs": jobs}
    r = subprocess.run([micropython, "-X", "heapsize=64M", "-c", code], capture_output=True, text=True,
                       cwd=workdir, timeout=1200)
    res = {}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            d = json.loads(line[7:])
            res[d["name"]] = d
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micropython", action="store_true", help="also run every container on the unix port")
    ap.add_argument("--only", help="comma-separated family names")
    ap.add_argument("--keep", help="directory to keep the ONNX files and containers in")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(FAMILIES)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        cases = []
        for name in names:
            for dynamo in (False, True):
                c = Case(name, dynamo, workdir)
                c.run_cpython()
                cases.append(c)
                print(c.line(), flush=True)
        if args.micropython:
            mp = os.path.join(os.path.dirname(sys.executable), "micropython")
            res = board_run(workdir, cases, mp)
            print("\nunix port (viper):")
            for c in cases:
                c.check_board(res)
                print(c.line())
    both = [c for c in cases if c.ok("f32") and c.ok("int8")]
    f32 = [c for c in cases if c.ok("f32")]
    fams = {c.name for c in cases}
    full = {n for n in fams if all(c.ok("f32") and c.ok("int8") for c in cases if c.name == n)}
    print("\n%d of %d exports run f32, %d of %d f32 and int8; families running from both exporters, f32 and "
          "int8: %d of %d" % (len(f32), len(cases), len(both), len(cases), len(full), len(fams)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
