"""The committed golden containers are exactly what the packer makes today, their JSON matches
the inputs they were made from, and docs/FORMAT.md's worked example is the real dump."""
import json
import os
import sys
import zlib

import numpy as np
import pytest

from host_util import GOLDEN, ROOT

sys.path.insert(0, GOLDEN)
import make_golden  # noqa: E402


def _golden_json(name):
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        return json.load(f)


def _golden_bytes(name):
    with open(os.path.join(GOLDEN, name + ".mpyl"), "rb") as f:
        return f.read()


def test_packer_output_matches_committed_golden_files(tmp_path):
    made = make_golden.build(str(tmp_path))
    assert len(made) == 2 * len(make_golden.GOLDEN)
    drifted = [f for f in made
               if (tmp_path / f).read_bytes() != open(os.path.join(GOLDEN, f), "rb").read()]
    assert not drifted, "packer output drifted from tests/golden (run make_golden.py if intended)"


@pytest.mark.parametrize("name", sorted(make_golden.GOLDEN))
def test_golden_json_matches_inputs_and_bytes(name):
    data = _golden_bytes(name)
    desc = _golden_json(name)
    h = desc["header"]
    assert h["file_size"] == len(data) and h["magic"] == "MPYL"
    assert zlib.crc32(data[64:h["data_offset"]], zlib.crc32(data[:60])) == h["header_crc"]
    assert desc["meta"]["format"] == "mpy-lazy/1.2" and desc["meta"]["tool_version"] == "golden"
    _input_name, inputs, args = make_golden.GOLDEN[name]
    tensors = {t["name"]: t for t in desc["tensors"]}
    assert {n for n, t in tensors.items() if not t["aux"]} == set(inputs)
    for t in desc["tensors"]:
        assert t["offset"] % h["alignment"] == 0
        assert zlib.crc32(data[t["offset"]:t["offset"] + t["nbytes"]]) == t["crc"]
        if t["aux"]:
            continue
        x = np.asarray(inputs[t["name"]])
        assert t["shape"] == list(x.shape)
        real = np.array(t["real"])
        expected = x.astype(np.float64).reshape(-1)
        if t["quant"] == 1:
            assert t["dtype"] == "i8" and t["scale"] > 0
            assert np.all(np.abs(real - expected) <= t["scale"] / 2 * (1 + 1e-6))
        elif t["quant"] == 2:
            scales = np.array(tensors[t["scales"]]["values"])
            assert t["dtype"] == "i8" and len(scales) == x.shape[0]
            err = np.abs(real - expected).reshape(x.shape[0], -1)
            assert np.all(err <= scales[:, None] / 2 * (1 + 1e-6))
        elif t["dtype"] == "f16":
            assert real.tolist() == x.astype(np.float16).astype(np.float64).reshape(-1).tolist()
        elif t["dtype"] == "f32":
            assert real.tolist() == x.astype(np.float32).astype(np.float64).reshape(-1).tolist()
        else:
            assert t["values"] == x.astype(np.int64).reshape(-1).tolist()


def test_golden_set_covers_the_format():
    dtypes, quants, aligns, sources = set(), set(), set(), set()
    for name in make_golden.GOLDEN:
        desc = _golden_json(name)
        aligns.add(desc["header"]["alignment"])
        for t in desc["tensors"]:
            dtypes.add(t["dtype"])
            quants.add(t["quant"])
            sources.add(t["source_dtype"])
    assert dtypes == {"f32", "f16", "i8", "u8", "i16", "u16", "i32", "u32"}
    assert quants == {0, 1, 2} and {16, 64} <= aligns and {"f64", "i64", "bool"} <= sources
    tiny = _golden_json("tiny")
    assert tiny["header"]["alignment"] == 16 and any(t["shape"] == [] for t in tiny["tensors"])


def test_format_doc_worked_example_is_the_real_dump():
    from host_tools.hexdump import dump

    with open(os.path.join(ROOT, "docs", "FORMAT.md")) as f:
        doc = f.read()
    assert dump(_golden_bytes("tiny")) in doc


def test_docs_name_the_format_version_the_code_writes():
    """README.md and docs/FORMAT.md name the version the packer writes and the runtime reads
    (issue 32: the README said v1.1, FORMAT.md 1.2)."""
    import re

    from host_tools.container import VERSION

    import mpy_lazy

    want = "%d.%d" % VERSION
    assert mpy_lazy.open(_golden_bytes("tiny")).meta["format"] == "mpy-lazy/" + want
    for doc in ("README.md", os.path.join("docs", "FORMAT.md")):
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        named = set(re.findall(r"container format,? (?:v|version )?(\d+\.\d+)", text))
        assert named == {want}, (doc, named)
