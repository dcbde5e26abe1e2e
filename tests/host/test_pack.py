"""Packing real files written by their own libraries, read back through the runtime reader."""
import numpy as np
import pytest

from host_util import cli, torch_mod, assert_aligned, by_name, save_safetensors, values  # noqa: F401 (fixtures)


def _check_same(cli, path, tensors, alignment=16):
    """inspect --json shows the same names, shapes and (f32-exact) values as `tensors`."""
    report = cli.inspect(path, values=list(tensors))
    assert_aligned(report, alignment)
    rows = by_name(report)
    assert set(rows) == set(tensors)
    for name, x in tensors.items():
        x = np.asarray(x)
        assert rows[name]["shape"] == list(x.shape), name
        got = values(report, name)["real"]
        assert got == x.astype(np.float32).astype(np.float64).reshape(-1).tolist(), name
    return report


def _tensors(rng):
    return {"fc1.weight": rng.standard_normal((8, 5)).astype(np.float32),
            "fc1.bias": rng.standard_normal(8).astype(np.float32),
            "conv.weight": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
            "gain": np.array(0.75, dtype=np.float32)}


def test_safetensors(cli, tmp_path):
    tensors = _tensors(np.random.default_rng(1))
    src = save_safetensors(tmp_path / "m.safetensors", tensors)
    out = tmp_path / "m.mpyl"
    cli.ok("pack", src, "-o", out, "-q")
    report = _check_same(cli, out, tensors)
    assert report["meta"]["source"] == "m.safetensors" and report["meta"]["quantize"] == "none"
    assert cli.ok("verify", out).endswith("OK (structure and 4 tensor CRCs)\n")


def test_npz_and_npy(cli, tmp_path):
    tensors = _tensors(np.random.default_rng(2))
    np.savez(tmp_path / "m.npz", **tensors)
    cli.ok("pack", tmp_path / "m.npz", "-o", tmp_path / "a.mpyl", "-q")
    _check_same(cli, tmp_path / "a.mpyl", tensors)
    np.savez_compressed(tmp_path / "c.npz", **tensors)
    cli.ok("pack", tmp_path / "c.npz", "-o", tmp_path / "c.mpyl", "-q")
    _check_same(cli, tmp_path / "c.mpyl", tensors)
    np.save(tmp_path / "emb.npy", tensors["fc1.weight"])
    cli.ok("pack", tmp_path / "emb.npy", "-o", tmp_path / "e.mpyl", "-q")
    _check_same(cli, tmp_path / "e.mpyl", {"emb": tensors["fc1.weight"]})


def test_torch_state_dict(cli, tmp_path, torch_mod):
    torch = torch_mod
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten(),
                                torch.nn.Linear(12, 2))
    sd = model.state_dict()
    torch.save(sd, tmp_path / "m.pt")
    cli.ok("pack", tmp_path / "m.pt", "-o", tmp_path / "m.mpyl", "-q")
    report = cli.inspect(tmp_path / "m.mpyl", values=list(sd))
    rows = by_name(report)
    assert set(rows) == set(sd)
    for name, t in sd.items():
        assert rows[name]["shape"] == list(t.shape)
        assert values(report, name)["real"] == t.double().reshape(-1).tolist(), name
    # BatchNorm's num_batches_tracked is int64: stored as i32
    assert rows["1.num_batches_tracked"]["dtype"] == "i32"
    assert rows["1.num_batches_tracked"]["source_dtype"] == "i64"


def test_torch_checkpoint_bf16_f64_and_legacy_format(cli, tmp_path, torch_mod):
    # a checkpoint {'epoch', 'model': state_dict}: the model's weights, named as its state_dict
    # names them (what mpy_lazy.load binds), and one line saying what was left out
    torch = torch_mod
    w = torch.randn(3, 4)
    ckpt = {"epoch": 7, "model": {"w16": w.to(torch.bfloat16), "w64": w.double(),
                                  "mask": torch.tensor([True, False])}}
    torch.save(ckpt, tmp_path / "ckpt.pth", _use_new_zipfile_serialization=False)
    out = cli.ok("pack", tmp_path / "ckpt.pth", "-o", tmp_path / "m.mpyl")
    assert "ckpt.pth: a training checkpoint: packed its 'model' entry (3 tensors), left out 'epoch'\n" in out
    report = cli.inspect(tmp_path / "m.mpyl", values=["w16", "w64", "mask"])
    rows = by_name(report)
    assert set(rows) == {"w16", "w64", "mask"}
    assert rows["w16"]["dtype"] == "f32" and rows["w16"]["source_dtype"] == "bf16"
    assert values(report, "w16")["real"] == w.to(torch.bfloat16).double().reshape(-1).tolist()
    assert rows["w64"]["source_dtype"] == "f64"
    assert values(report, "w64")["real"] == w.double().reshape(-1).tolist()
    assert rows["mask"]["dtype"] == "u8" and values(report, "mask")["values"] == [1, 0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_onnx_exported_by_torch(cli, tmp_path, torch_mod):
    torch = torch_mod
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(model, (torch.zeros(1, 3),), path, dynamo=False)
    expected = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    assert len(expected) == 4
    cli.ok("pack", path, "-o", tmp_path / "m.mpyl", "-q")
    _check_same(cli, tmp_path / "m.mpyl", expected)


def test_onnx_with_external_data(cli, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = str(tmp_path / "ext.onnx")
    onnx.save(helper.make_model(graph), path, save_as_external_data=True,
              all_tensors_to_one_file=True, location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").exists()
    cli.ok("pack", path, "-o", tmp_path / "m.mpyl", "-q")
    _check_same(cli, tmp_path / "m.mpyl", {"w": w, "b": b})


def test_format_detected_by_content_not_extension(cli, tmp_path):
    tensors = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    src = save_safetensors(tmp_path / "weights.bin", tensors)
    cli.ok("pack", src, "-o", tmp_path / "a.mpyl", "-q")
    _check_same(cli, tmp_path / "a.mpyl", tensors)
    np.savez(tmp_path / "arrays.npz", **tensors)
    (tmp_path / "arrays.npz").rename(tmp_path / "model.onnx")
    cli.ok("pack", tmp_path / "model.onnx", "-o", tmp_path / "b.mpyl", "-q")
    _check_same(cli, tmp_path / "b.mpyl", tensors)


def test_several_inputs_merge_and_duplicates_error(cli, tmp_path):
    a = save_safetensors(tmp_path / "a.safetensors", {"enc.w": np.ones((2, 2), np.float32)})
    np.savez(tmp_path / "b.npz", **{"dec.w": np.zeros((3,), np.float32)})
    out = tmp_path / "m.mpyl"
    cli.ok("pack", a, tmp_path / "b.npz", "-o", out, "-q")
    report = cli.inspect(out)
    assert set(by_name(report)) == {"enc.w", "dec.w"}
    assert report["meta"]["source"] == "a.safetensors,b.npz"
    np.savez(tmp_path / "c.npz", **{"enc.w": np.zeros((3,), np.float32)})
    line = cli.fails("pack", a, tmp_path / "c.npz", "-o", tmp_path / "dup.mpyl")
    assert "duplicate tensor name 'enc.w'" in line and "a.safetensors" in line and "c.npz" in line
    assert not (tmp_path / "dup.mpyl").exists()


def test_include_exclude_rename_meta(cli, tmp_path):
    src = save_safetensors(tmp_path / "m.safetensors", {
        "model.enc.weight": np.ones((2, 2), np.float32), "model.enc.bias": np.ones(2, np.float32),
        "model.dec.weight": np.ones((2, 2), np.float32), "optim.step": np.ones(1, np.float32)})
    out = tmp_path / "m.mpyl"
    cli.ok("pack", src, "-o", out, "-q", "--include", r"^model\.", "--exclude", r"\.bias$",
           "--rename", "model.=", "--rename", "dec.=decoder.", "--meta", "model=tiny-net",
           "--meta", "tool_version=test")
    report = cli.inspect(out)
    assert set(by_name(report)) == {"enc.weight", "decoder.weight"}
    assert report["meta"] == {"format": "mpy-lazy/1.2", "tool_version": "test",
                              "source": "m.safetensors", "quantize": "none", "model": "tiny-net"}
    assert "no tensors selected" in cli.fails("pack", src, "-o", out, "--include", "nothing")
    assert "reserved" in cli.fails("pack", src, "-o", out, "--meta", "format=x")
    assert "KEY=VALUE" in cli.fails("pack", src, "-o", out, "--meta", "novalue")
    assert "bad regular expression" in cli.fails("pack", src, "-o", out, "--include", "(")


def test_integer_conversions(cli, tmp_path):
    np.savez(tmp_path / "i.npz", small=np.array([-5, 2**31 - 1], np.int64),
             big=np.array([2**31], np.int64))
    line = cli.fails("pack", tmp_path / "i.npz", "-o", tmp_path / "i.mpyl")
    assert "'big'" in line and "int32" in line
    assert not (tmp_path / "i.mpyl").exists()
    cli.ok("pack", tmp_path / "i.npz", "-o", tmp_path / "i.mpyl", "-q", "--exclude", "big")
    report = cli.inspect(tmp_path / "i.mpyl", values=["small"])
    assert values(report, "small")["values"] == [-5, 2**31 - 1]


@pytest.mark.parametrize("alignment", [4, 16, 64, 4096])
def test_every_offset_is_aligned(cli, tmp_path, alignment):
    rng = np.random.default_rng(alignment)
    tensors = {"t%d" % i: rng.standard_normal((i + 1, 3)).astype(np.float32) for i in range(5)}
    tensors["u8"] = np.arange(7, dtype=np.uint8)
    src = save_safetensors(tmp_path / "m.safetensors", tensors)
    for mode in ("none", "f16", "int8", "int8-channel"):
        out = tmp_path / ("m-%s.mpyl" % mode)
        cli.ok("pack", src, "-o", out, "-q", "--align", alignment, "--quantize", mode)
        report = cli.inspect(out)
        assert report["alignment"] == alignment
        assert_aligned(report, alignment)
        cli.ok("verify", out)


def test_quantization_accuracy(cli, tmp_path):
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((6, 10)) * np.array([0.01, 0.1, 1, 10, 100, 0])[:, None]).astype(np.float32)
    conv = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    src = save_safetensors(tmp_path / "m.safetensors", {"w": w, "conv": conv, "bias": bias})
    names = ["w", "conv", "bias"]

    cli.ok("pack", src, "-o", tmp_path / "f16.mpyl", "-q", "--quantize", "f16")
    report = cli.inspect(tmp_path / "f16.mpyl", values=names)
    for name, x in (("w", w), ("conv", conv), ("bias", bias)):
        assert by_name(report)[name]["dtype"] == "f16"
        assert values(report, name)["real"] == x.astype(np.float16).astype(np.float64).reshape(-1).tolist()

    cli.ok("pack", src, "-o", tmp_path / "t.mpyl", "-q", "--quantize", "int8")
    report = cli.inspect(tmp_path / "t.mpyl", values=names)
    rows = by_name(report)
    assert rows["bias"]["dtype"] == "f32" and rows["bias"]["quant"] == 0
    for name, x in (("w", w), ("conv", conv)):
        row = rows[name]
        assert row["dtype"] == "i8" and row["quant"] == 1 and row["zero_point"] == 0
        assert row["scale"] == pytest.approx(np.abs(x).max() / 127, rel=1e-6)
        err = np.abs(np.array(values(report, name)["real"]) - x.reshape(-1))
        assert err.max() <= row["scale"] / 2 * (1 + 1e-5)

    out = cli.ok("pack", src, "-o", tmp_path / "c.mpyl", "--quantize", "int8-channel")
    assert "max abs error" in out and "conv" in out
    report = cli.inspect(tmp_path / "c.mpyl", values=names + ["w#scales"])
    rows = by_name(report)
    assert rows["w"]["quant"] == 2 and rows["w"]["axis"] == 0 and rows["w"]["scales"] == "w#scales"
    assert rows["w#scales"]["aux"] and rows["w#scales"]["shape"] == [6]
    assert rows["bias"]["dtype"] == "f32"
    scales = np.array(values(report, "w#scales")["values"])
    assert scales[5] == 1.0  # an all-zero channel gets scale 1 (any positive scale is exact)
    assert scales[:5] == pytest.approx(np.abs(w[:5]).max(axis=1) / 127, rel=1e-6)
    err = np.abs(np.array(values(report, "w")["real"]) - w.reshape(-1)).reshape(6, 10)
    assert np.all(err <= scales[:, None] / 2 * (1 + 1e-5))
    assert values(report, "bias")["real"] == bias.astype(np.float64).tolist()


def test_nan_cannot_be_quantized(cli, tmp_path):
    src = save_safetensors(tmp_path / "m.safetensors", {"bad.w": np.array([[1, np.nan]], np.float32)})
    line = cli.fails("pack", src, "-o", tmp_path / "ok.mpyl")  # refused unless asked
    assert "'bad.w'" in line and "1 NaN" in line and "--allow-nonfinite" in line, line
    cli.ok("pack", src, "-o", tmp_path / "ok.mpyl", "-q", "--allow-nonfinite")  # stored as f32
    for mode in ("int8", "int8-channel"):  # int8 cannot hold a NaN, asked or not
        for extra in ((), ("--allow-nonfinite",)):
            line = cli.fails("pack", src, "-o", tmp_path / "q.mpyl", "--quantize", mode, *extra)
            assert "'bad.w'" in line and "NaN" in line
    src = save_safetensors(tmp_path / "i.safetensors", {"big": np.array([[1e5, 1]], np.float32)})
    line = cli.fails("pack", src, "-o", tmp_path / "q.mpyl", "--quantize", "f16")
    assert "'big'" in line and "f16 range" in line
    assert not (tmp_path / "q.mpyl").exists()
