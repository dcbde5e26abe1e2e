"""The models frozen into the firmware of the frozen-container proof (issue 12 item 1):
`make firmware-frozen BOARD=...` runs this, then builds a firmware whose manifest freezes them,
and tests/test_firmware_frozen.py runs them on the emulated M0 (qemu MICROBIT) and Pico.

    python firmware/frozen_models.py OUTDIR

writes into OUTDIR:
  models/mlp.onnx, calib.npy, weights.npz   a 2-layer MLP (64 -> 32 -> 10, relu), random weights
                                            (fixed seed), its calibration inputs and weights
  models/<name>.mpyl                        packed with the mpy-lazy CLI:
      graph_f32, graph_f16                  `pack mlp.onnx [--quantize f16]`: graph models
      graph_i8                              `pack mlp.onnx --quantize int8 --calibrate calib.npy`
      weights_f32, weights_f16, weights_i8  `pack weights.npz --quantize none|f16|int8`: weights
                                            only, for a Module declared in code
  models/weights_st.safetensors             the same weights as a plain safetensors file (item 2):
                                            written by the safetensors library, then its header
                                            re-spaced to an odd length (the library reads it the
                                            same), so its data section starts at an odd offset and
                                            only the board hook's leading padding puts its f32
                                            tensors in place
  frozen/frozen_<name>.py                   `mpy-lazy freeze` of each of them
  manifest-qemu.py, manifest-rp2.py         the board's own manifest (the runtime) + those modules
Deterministic: the same files on every run (tests/test_firmware_frozen.py compares the frozen
bytes with these by CRC)."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

N_IN, N_HID, N_OUT = 64, 32, 10
GRAPHS = ("graph_f32", "graph_f16", "graph_i8")
WEIGHTS = ("weights_f32", "weights_f16", "weights_i8", "weights_st")
NAMES = GRAPHS + WEIGHTS
SAFETENSORS = ("weights_st",)
BOARD_MANIFEST = {"qemu": "$(BOARD_DIR)/../manifest.py", "rp2": "$(BOARD_DIR)/manifest.py"}


def weights():
    rng = np.random.default_rng(2024)
    return {"fc1.weight": (rng.standard_normal((N_HID, N_IN)) * 0.2).astype(np.float32),
            "fc1.bias": (rng.standard_normal(N_HID) * 0.1).astype(np.float32),
            "fc2.weight": (rng.standard_normal((N_OUT, N_HID)) * 0.2).astype(np.float32),
            "fc2.bias": (rng.standard_normal(N_OUT) * 0.1).astype(np.float32)}


def file_name(name):
    return name + (".safetensors" if name in SAFETENSORS else ".mpyl")


def odd_safetensors(w, path):
    """The safetensors library's file of `w`, its JSON header re-spaced to an odd length."""
    import struct

    from safetensors import deserialize
    from safetensors.numpy import save

    data = save(w)
    (n,) = struct.unpack_from("<Q", data, 0)
    header = data[8:8 + n].rstrip(b" ")
    header += b" " * (1 - len(header) % 2)  # odd: the data section starts at an odd offset
    out = struct.pack("<Q", len(header)) + header + data[8 + n:]
    assert (8 + len(header)) % 2 == 1 and dict(deserialize(out)) == dict(deserialize(data))
    with open(path, "wb") as f:
        f.write(out)


def inputs(n, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (n, N_IN)).astype(np.float32)


def onnx_model(w, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(a, name) for name, a in w.items()]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("Gemm", ["hr", "fc2.weight", "fc2.bias"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N_IN])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N_OUT])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="mpy-lazy")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def build(out):
    from host_tools.cli import main as cli

    models = os.path.join(out, "models")
    frozen = os.path.join(out, "frozen")
    os.makedirs(models, exist_ok=True)
    os.makedirs(frozen, exist_ok=True)
    w = weights()
    onnx_path = os.path.join(models, "mlp.onnx")
    onnx_model(w, onnx_path)
    calib = os.path.join(models, "calib.npy")
    np.save(calib, inputs(64, 1).reshape(64, N_IN))  # (N, features): what the model takes
    npz = os.path.join(models, "weights.npz")
    np.savez(npz, **w)
    runs = {"graph_f32": [onnx_path], "graph_f16": [onnx_path, "--quantize", "f16"],
            "graph_i8": [onnx_path, "--quantize", "int8", "--calibrate", calib],
            "weights_f32": [npz], "weights_f16": [npz, "--quantize", "f16"],
            "weights_i8": [npz, "--quantize", "int8"]}
    lines = []
    for name in NAMES:
        path = os.path.join(models, file_name(name))
        if name in SAFETENSORS:
            odd_safetensors(w, path)
        elif cli(["pack"] + runs[name] + ["-o", path, "-q"]):
            raise SystemExit("pack %s failed" % name)
        if cli(["freeze", path, "-o", os.path.join(frozen, "frozen_%s.py" % name), "-q"]):
            raise SystemExit("freeze %s failed" % name)
        lines.append('module("frozen_%s.py", base_path="%s")' % (name, frozen))
    for board, include in BOARD_MANIFEST.items():
        with open(os.path.join(out, "manifest-%s.py" % board), "w") as f:
            f.write("# Generated by firmware/frozen_models.py: the board's runtime + the frozen models.\n")
            f.write('include("%s")\n' % include)
            f.write("\n".join(lines) + "\n")
    return [os.path.join(models, file_name(n)) for n in NAMES]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: frozen_models.py OUTDIR")
    for p in build(os.path.abspath(sys.argv[1])):
        print("%-60s %6d bytes" % (p, os.path.getsize(p)))
