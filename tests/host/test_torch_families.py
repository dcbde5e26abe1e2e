"""The small PyTorch models people bring (tools/coverage.py's families) that need the importer's
newer forms: squeeze-and-excite gates, 1-D conv nets, reductions over any axes, padded and
ceil_mode pooling, concatenation along H and W, transposed convolutions. Each is exported with
both torch exporters (dynamo=False and the default dynamo one), packed f32 and int8 (calibrated
on seeded inputs), and run on CPython and on the MicroPython unix port (viper, containers in a
ROMFS image): f32 within 1e-4 of onnxruntime, int8 equal to host_tools/reference.py on the
container's own tensors, 0 bytes allocated per int8 inference on the board. Also: the graph
each becomes, and what the importer refuses names the ONNX op and node that cannot run.

Exports and packs are made once (one fixture); the board runs in the background while CPython
checks."""
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from conftest import ROOT  # noqa: E402
from host_util import Board, kernel_path  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import graph as mgraph, kernels, model as mmodel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cov = _load("coverage_families", os.path.join(ROOT, "tools", "coverage.py"))

# family: the board's ops for it (f32; reshapes left out: they move no byte but order=chw ones)
FORMS = {
    "se_block": ["conv2d", "mean", "conv2d", "conv2d", "sigmoid", "mul", "conv2d"],
    "se_linear": ["conv2d", "mean", "linear", "linear", "sigmoid", "mul"],
    "se_add_sub": ["conv2d", "mean", "conv2d", "add", "sigmoid", "sub"],
    "conv1d_net": ["depthwise", "conv2d", "maxpool", "depthwise", "conv2d", "avgpool", "conv2d", "mean", "linear"],
    "tcn": ["conv2d", "conv2d", "slice", "relu", "add", "reshape", "linear"],
    "conv1d_max": ["conv2d", "maxpool", "linear"],
    "amax_hw": ["conv2d", "maxpool", "linear"],
    "channel_mean_max": ["conv2d", "transpose", "mean", "transpose", "maxpool", "concat", "conv2d", "sigmoid",
                         "concat", "mul"],
    "avgpool_pad": ["conv2d", "pad", "avgpool"],
    "maxpool_ceil": ["conv2d", "maxpool"],
    "avgpool_ceil": ["conv2d", "avgpool"],
    "concat_hw": ["conv2d", "conv2d", "concat", "concat", "concat", "reshape", "linear"],
    "tconv": ["tconv", "tconv", "tconv"],
    "autoencoder": ["conv2d", "conv2d", "tconv", "tconv", "sigmoid"],
    "groupnorm": ["conv2d", "groupnorm"],  # Reshape, InstanceNormalization, Reshape, Mul, Add: one op
    "instancenorm": ["conv2d", "groupnorm"],
}
# the float ops an int8 model runs between a dequantize and a quantize (its floats are boxed:
# the board allocates for them)
FLOAT_ISLANDS = ("groupnorm",)
KEYS = ["%s-%s" % (n, e) for n in FORMS for e in ("ts", "dynamo")]


@pytest.fixture(scope="module")
def fams(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("families"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; the other core runs MicroPython
    board = None
    try:
        cases = {}
        for name in FORMS:
            for dynamo in (False, True):
                c = cov.Case(name, dynamo, workdir)
                cases[c.key] = c
        jobs = [j for c in cases.values() for j in c.jobs(workdir)]
        board = Board(workdir, "families", [p for c in cases.values() for p in c.packs.values()], jobs,
                      path="viper")
        yield cases, board
    finally:
        torch.set_num_threads(threads)
        if board is not None:
            board.stop()


def _text(path):
    return mpy_lazy.open(open(path, "rb").read()).meta["graph"]


def _ops(path, kv=False):
    lines = [(op, a) for _, op, a in mgraph.parse(_text(path)) if op not in ("input", "output")]
    return lines if kv else [op for op, a in lines if op != "reshape" or a.get("order") == "chw"]


@pytest.mark.parametrize("key", KEYS)
def test_family_packs_and_runs_on_cpython(fams, key):
    c = fams[0][key]
    assert sorted(c.packs) == ["f32", "int8"] and not c.status, c.status
    name = key.rsplit("-", 1)[0]
    assert _ops(c.packs["f32"]) == FORMS[name]
    int8 = [["lut"] if op in ("relu", "sigmoid") else ["dequantize", op, "quantize"] if op in FLOAT_ISLANDS
            else [op] for op in FORMS[name]]
    assert _ops(c.packs["int8"]) == sum(int8, [])
    m = mmodel.from_container(mpy_lazy.open(open(c.packs["f32"], "rb").read()))
    for path in kernels.available():
        with kernel_path(path):
            for x, want in zip(c.xs, c.ort):
                m(x.reshape(-1).tolist())
                assert cov.rel_err(m.tolist(), want) <= cov.FLOAT_RTOL, (key, path)
    c.run_cpython()  # int8 (pure kernels) == the reference and near the float model; f32 on pure
    assert not c.status, c.status
    assert c.ref()[0].tolist() != c.ref()[1].tolist()  # (not a constant output)


@pytest.mark.parametrize("key", KEYS)
def test_family_on_micropython(fams, key):
    c, board = fams[0][key], fams[1]
    f = board.get(os.path.basename(c.packs["f32"]))
    assert f["path"] == "viper" and len(f["ys"]) == len(c.xs)
    for y, want in zip(f["ys"], c.ort):
        assert cov.rel_err(y, want) <= cov.FLOAT_RTOL, key
    r = board.get(os.path.basename(c.packs["int8"]))
    assert [list(y) for y in r["ys"]] == [ref.tolist() for ref in c.ref()], key
    if not set(FLOAT_ISLANDS) & set(FORMS[key.rsplit("-", 1)[0]]):
        assert r["alloc"] == [0] * len(c.xs), r["alloc"]


def _lines(fams, name, op):
    """{exporter: [the keys of each `op` line]} of a family's f32 graph."""
    return {e: [kv for o, kv in _ops(fams[0]["%s-%s" % (name, e)].packs["f32"], True) if o == op]
            for e in ("ts", "dynamo")}


def test_forms(fams):
    for lines in _lines(fams, "avgpool_pad", "pad").values():  # count_include_pad: zeros in the divisor
        assert [kv["pad"] for kv in lines] == [(1, 1, 1, 1)]
    for lines in _lines(fams, "avgpool_pad", "avgpool").values():
        assert "pad" not in lines[0]
    for name in ("maxpool_ceil", "avgpool_ceil"):  # ceil_mode: one more window, into skipped padding
        for lines in _lines(fams, name, name[:7]).values():
            assert lines[0]["pad"] == (0, 0, 1, 1)
    for lines in _lines(fams, "concat_hw", "concat").values():
        assert [kv.get("axis") for kv in lines] == [0, 0, 1]
    for lines in _lines(fams, "channel_mean_max", "transpose").values():  # channels brought first
        assert [kv["perm"] for kv in lines] == [(2, 0, 1)] * 2
    for lines in _lines(fams, "tconv", "tconv").values():  # output_padding: a larger size
        assert [(kv["size"], kv.get("stride"), kv.get("pad")) for kv in lines] == [
            ((10, 10), (2, 2), (1, 1)), ((20, 20), (2, 2), (1, 1)), ((20, 20), None, (1, 1))]
    for lines in _lines(fams, "groupnorm", "groupnorm").values():  # GroupNorm(2, 4): its Mul, Add folded
        assert [kv.get("groups") for kv in lines] == [2]
    for lines in _lines(fams, "instancenorm", "groupnorm").values():  # a group per channel (the default)
        assert [kv.get("groups") for kv in lines] == [None]
    for e in ("ts", "dynamo"):  # squeeze-and-excite: the image times a (1, 1, C) gate
        text = _text(fams[0]["se_block-" + e].packs["f32"])
        shapes = {v.name: v.shape for v in mmodel.Model(text).values}
        mul = [kv for _, op, kv in mgraph.parse(text) if op == "mul"][0]
        assert [shapes[v] for v in mul["x"]] == [(8, 8, 8), (1, 1, 8)], e


# --------------------------------------------------------------------------- refusals

def _graph(tmp_path, nodes, inputs, outputs, inits=(), name="m"):
    from onnx import helper

    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / (name + ".onnx"))
    onnx.save(m, path)
    return path


def _refusal(path):
    from host_tools.container import PackError
    from host_tools.convert import graph_of

    with pytest.raises(PackError) as e:
        graph_of(path)
    line = str(e.value)
    assert "\n" not in line and os.path.basename(path) in line, line
    return line


def test_refusals_name_the_op_that_cannot_run(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    # an op the board lacks behind ops it runs: named, not the Transpose or Reshape in front of it
    path = _graph(tmp_path, [helper.make_node("Transpose", ["x"], ["t"], "front", perm=[0, 1, 3, 2]),
                             helper.make_node("Relu", ["t"], ["r"], "relu"),
                             helper.make_node("LpNormalization", ["r"], ["y"], "the_norm", axis=1)], [x], [y],
                  name="late_op")
    line = _refusal(path)
    assert "'the_norm' (LpNormalization): op not supported" in line, line
    # a node whose attributes the translation cannot use (no kernel_shape): its own refusal
    path = _graph(tmp_path, [helper.make_node("MaxPool", ["x"], ["y"], "pool_without_kernel")], [x], [y],
                  name="bad_attr")
    assert "'pool_without_kernel' (MaxPool): " in _refusal(path)
    # a form the graph refuses (a pad as large as the window): named by the ONNX node
    path = _graph(tmp_path, [helper.make_node("MaxPool", ["x"], ["y"], "big_pad", kernel_shape=[2, 2],
                                              pads=[2, 2, 2, 2])], [x], [y], name="big_pad")
    line = _refusal(path)
    assert "'big_pad' (MaxPool): maxpool: pad" in line and "graph line" not in line, line
    # a shape torch cannot broadcast on the board: Sub of a per-channel value minus an image
    g = numpy_helper.from_array(np.ones((1, 3, 1, 1), np.float32), "g")
    path = _graph(tmp_path, [helper.make_node("ReduceMean", ["x"], ["m"], "mean", axes=[2, 3]),
                             helper.make_node("Sub", ["m", "x"], ["y"], "gate_minus_x")], [x], [y], [g],
                  name="sub_order")
    line = _refusal(path)
    assert "'gate_minus_x' (Sub)" in line, line


def _f32_run(path, xs, tmp_path):
    """The f32 pack of an ONNX file run on CPython: (its graph's ops, [outputs]); and
    onnxruntime's outputs."""
    out = str(tmp_path / (os.path.basename(path) + ".mpyl"))
    assert cov.pack(path, out, "f32") is None
    m = mmodel.from_container(mpy_lazy.open(open(out, "rb").read()))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got, want = [], []
    for x in xs:
        m(x.reshape(-1).tolist())
        got.append(m.tolist())
        want.append(np.asarray(sess.run(None, {"x": x[None]})[0]).reshape(-1))
    return _ops(out, True), got, want


def test_onnx_norms_become_groupnorm(tmp_path):
    """Beside torch's forms (the families groupnorm and instancenorm, test_forms): ONNX's
    GroupNormalization (scale per channel, opset 21, or per group, opset 18) is a groupnorm; an
    InstanceNormalization of a value reshaped to (1, G, L) read as that (G, L) value (not
    reshaped back: not torch's GroupNorm) is the groupnorm's output reshaped; all within 1e-4
    of onnxruntime. Groups that do not divide the channels are refused naming the node."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    xs = cov.inputs("gn-onnx", (6, 4, 5), 2)
    for opset, n in ((21, 6), (18, 3)):
        inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, n).astype(np.float32), "s"),
                 numpy_helper.from_array(np.linspace(-0.3, 0.3, n).astype(np.float32), "b")]
        g = helper.make_graph([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], "gn", num_groups=3,
                                                epsilon=1e-3)], "gn", [x], [y], inits)
        path = str(tmp_path / ("gn%d.onnx" % opset))
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
        ops, got, want = _f32_run(path, xs, tmp_path)
        assert [(op, kv.get("groups")) for op, kv in ops] == [("groupnorm", 3)], ops
        for yv, w in zip(got, want):
            assert cov.rel_err(yv, w) <= cov.FLOAT_RTOL, opset
    # Reshape (1, 6, 4, 5) -> (1, 2, 60), InstanceNormalization, Relu: the (2, 60) value itself
    inits = [numpy_helper.from_array(np.array([1, 2, -1], np.int64), "shape"),
             numpy_helper.from_array(np.array([0.5, 1.5], np.float32), "s"),
             numpy_helper.from_array(np.array([0.25, -0.5], np.float32), "b")]
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["r"], "to_groups"),
                           helper.make_node("InstanceNormalization", ["r", "s", "b"], ["n"], "inorm"),
                           helper.make_node("Relu", ["n"], ["y"], "relu")], "gl", [x], [y], inits)
    path = str(tmp_path / "grouped_read.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    ops, got, want = _f32_run(path, xs, tmp_path)
    assert [op for op, _ in ops][:1] == ["groupnorm"] and "relu" in [op for op, _ in ops], ops
    for yv, w in zip(got, want):
        assert cov.rel_err(yv, w) <= cov.FLOAT_RTOL
    g = helper.make_graph([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], "bad_groups",
                                            num_groups=4)], "bad", [x], [y], inits[1:])
    path = str(tmp_path / "bad_groups.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    assert "'bad_groups' (GroupNormalization): 4 groups of 6 channels" in _refusal(path)
