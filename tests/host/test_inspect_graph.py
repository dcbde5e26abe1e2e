"""`mpy-lazy inspect` on a container with a graph: the op table, the arena, the heap.

Checked against peers, not against inspect's own numbers:
- ops, their inputs and outputs: the description's lines, split here;
- each op's output shape: the independent numpy interpreter (host_tools.reference) run on the
  description with every value made an output;
- for .tflite models: every op's output shape and quantization is one of the TFLite model's own
  op outputs (read with TFLite Micro's schema), the graph output is TFLite's output, and the
  MACs add up to what TFLite's conv / depthwise / fully-connected ops compute;
- MACs of a weighted op: output positions x weight elements, from the container's tensors;
- arena and scratch: the bytes the runtime really allocates when it loads the model;
- the text output carries the same figures as --json.
The heap estimate is checked on the emulated Pico (tests/test_firmware_rp2.py)."""
import json
import os

import numpy as np
import pytest

from host_util import GOLDEN, cli  # noqa: F401 (fixture)

import mpy_lazy
from host_tools import reference
from mpy_lazy import model as mmodel

GRAPHS = ["graph_f32.mpyl", "graph_int8.mpyl", "graph_f16.mpyl"]


def _tensors(path):
    c = mpy_lazy.open(open(path, "rb").read())
    return c, {n: np.array(c.view(n).array()).reshape(c.view(n).shape) for n in c.names()}


def _fmt(n):
    return "{:,}".format(n)


def _check_text_matches_json(cli, path, g):
    out = cli.ok("inspect", path)
    for o in g["ops"]:
        row = "%d  %s" % (o["index"], o["op"])
        line = [ln for ln in out.splitlines() if ln.strip().startswith(row)]
        assert len(line) == 1, (row, out)
        assert "%s -> %s" % (",".join(o["inputs"]), o["output"]) in line[0]
        assert "x".join(map(str, o["shape"])) in line[0]
        if o["macs"]:
            assert line[0].rstrip().endswith(_fmt(o["macs"]))
    h = g["heap"]
    assert "arena %s bytes" % _fmt(h["arena"]) in out and "float scratch %s bytes" % _fmt(h["scratch"]) in out
    assert "keeps ~%s bytes" % _fmt(h["kept"]) in out and "have ~%s bytes free" % _fmt(h["free"]) in out
    assert "%s MACs per inference" % _fmt(g["macs"]) in out


def _runtime_buffers(path):
    """Bytes the runtime allocates for the model's arena (activations and scratch: one
    buffer) when it loads it, and 0 (no other scratch)."""
    m = mmodel.from_container(mpy_lazy.open(open(path, "rb").read()))
    prog = m if isinstance(m, mmodel.Program) else m.prog
    return len(prog.A), 0


def _macs(op, out_shape, c):
    w = c.info(op["weights"][0])
    size = int(np.prod(w.shape))
    positions = int(np.prod(out_shape[:-1])) if op["op"] in ("conv2d", "depthwise") else 1
    return positions * size


@pytest.mark.parametrize("name", GRAPHS)
def test_op_table_against_the_description_and_the_reference(cli, name):
    path = os.path.join(GOLDEN, name)
    g = cli.inspect(path)["graph"]
    c, tensors = _tensors(path)
    text = dict(c.meta)["graph"]
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("#")]
    op_lines = [ln for ln in lines if ln[0] not in ("input", "output")]
    assert [o["op"] for o in g["ops"]] == [ln[0] for ln in op_lines]
    for o, ln in zip(g["ops"], op_lines):
        kv = dict(tok.split("=", 1) for tok in ln[1:])
        assert o["inputs"] == kv["x"].split(",") and o["output"] == kv["y"]
    # every value's shape from the reference interpreter (each value made an output)
    inputs = [ln for ln in lines if ln[0] == "input"]
    xs = []
    for ln in inputs:
        kv = dict(tok.split("=", 1) for tok in ln[1:])
        n = int(np.prod([int(d) for d in kv["shape"].split(",")]))
        xs.append(np.zeros(n, np.int64 if kv.get("dtype") == "i8" else np.float64))
    every = text.strip() + "\n" + "\n".join("output x=%s" % o["output"] for o in g["ops"])
    outs = reference.run(every, tensors, *xs)[-len(g["ops"]):]
    for o, y in zip(g["ops"], outs):
        assert tuple(o["shape"]) == y.shape, (o, y.shape)
        if o["weights"] and o["op"] in ("conv2d", "depthwise", "linear"):
            assert o["macs"] == _macs(o, y.shape, c), o
        else:
            assert o["macs"] == 0
    assert g["macs"] == sum(o["macs"] for o in g["ops"])
    assert (g["arena"], g["scratch"]) == _runtime_buffers(path)
    h = g["heap"]
    assert h["kept"] == h["arena"] + h["scratch"] + h["objects"] + h["f16_decoded"] and h["free"] > h["kept"]
    _check_text_matches_json(cli, path, g)


def test_tflite_model_against_tflite(cli, tmp_path):
    tflm_ref = pytest.importorskip("tflm_ref")
    pytest.importorskip("tflite")
    src = os.path.join(GOLDEN, "tflite", "kws_int8.tflite")
    out = tmp_path / "kws.mpyl"
    cli.ok("pack", src, "-o", out)
    g = cli.inspect(out)["graph"]
    tensors = tflm_ref.tensors(src)
    ops = tflm_ref.ops(src)

    def key(t):  # shape without the batch dimension, quantization
        return (tuple(int(d) for d in t.shape[1:]), round(float(t.scales[0]), 6), int(t.zero_points[0]))

    produced = {key(tensors[o.outputs[0]]) for o in ops}
    for o in g["ops"]:
        assert (tuple(o["shape"]), round(o["q"][0], 6), o["q"][1]) in produced, (o, produced)
    out_t = tensors[tflm_ref.read_model(src).subgraphs[0].outputs[0]]
    y = g["outputs"][0]
    assert (y["q"][0], y["q"][1]) == pytest.approx((float(out_t.scales[0]), int(out_t.zero_points[0])), rel=1e-6)
    assert int(np.prod(y["shape"])) == int(np.prod(out_t.shape))
    macs = 0
    for o in ops:
        w = tensors[o.inputs[1]].shape if len(o.inputs) > 1 else None
        y_shape = tensors[o.outputs[0]].shape
        if o.name == "CONV_2D":  # out positions x (out channels x kh x kw x in channels)
            macs += int(np.prod(y_shape[1:3])) * int(np.prod(w))
        elif o.name == "DEPTHWISE_CONV_2D":  # out positions x (kh x kw x channels)
            macs += int(np.prod(y_shape[1:3])) * int(np.prod(w))
        elif o.name == "FULLY_CONNECTED":
            macs += int(np.prod(w))
    assert g["macs"] == macs
    assert (g["arena"], g["scratch"]) == _runtime_buffers(str(out))
    _check_text_matches_json(cli, str(out), g)


def test_weights_only_and_refused_graphs(cli, tmp_path):
    path = os.path.join(GOLDEN, "tiny.mpyl")
    assert cli.inspect(path)["graph"] is None
    assert "no graph: weights only" in cli.ok("inspect", path)
    from host_tools.pack import pack
    from host_util import save_safetensors

    src = save_safetensors(tmp_path / "w.safetensors", {"w": np.ones((3, 4), np.float32)})
    bad = tmp_path / "bad.mpyl"
    pack([src], str(bad), meta=[("graph", "input y=x shape=4\nlinear x=x y=o w=w out=5\noutput x=o")], quiet=True)
    g = cli.inspect(bad)["graph"]
    assert "shape param (5, 4), tensor (3, 4)" in g["error"]
    assert "the runtime refuses it: " + g["error"] in cli.ok("inspect", bad)


def test_json_is_the_whole_report(cli):
    """--json carries the graph section in full (the heap figures named)."""
    out = json.loads(cli.ok("inspect", "--json", os.path.join(GOLDEN, "graph_int8.mpyl")))
    assert set(out["graph"]["heap"]) == {"arena", "scratch", "objects", "f16_decoded", "kept", "free", "program", "estimate"}
    assert out["graph"]["inputs"][0]["dtype"] == "i8" and out["graph"]["inputs"][0]["q"]
