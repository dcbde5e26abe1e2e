"""Fuzzing the runtime reader and graph runner (docs/RELIABILITY.md). Every input either opens,
with every view exactly its bytes of the buffer and readable end to end, or raises
ContainerError; never another exception, a crash or a hang, and the reader's work is bounded by
the buffer size. A container with a model (a `graph` description, or an old `layers` chain) is
then declared, loaded and run: refused with ContainerError or run, with the same int8 outputs on
every kernel path. The verdict function is tools/fuzz.py's, run in-process here (hypothesis) and
on both interpreters over seeded corpora (tools/fuzz_corpus.py: containers, and containers with
a model whose description is mutated). Long runs: `python tools/fuzz.py --count N [--graphs]`."""
import os
import struct
import subprocess
import sys
import tempfile

from hypothesis import given, settings, strategies as st

from host_util import GOLDEN, ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import fuzz  # noqa: E402
import fuzz_corpus  # noqa: E402
from fuzz_corpus import ENTRY, HEADER, META, fix_crc, get, put  # noqa: E402

import mpy_lazy  # noqa: E402
from mpy_lazy import ContainerError  # noqa: E402

GOLDENS = sorted(n for n in os.listdir(GOLDEN) if n.endswith(".mpyl"))
# the exhaustive sweep (every field at every boundary, every truncation): the weight-only
# goldens and one with a model (the others, and the third-party models of test_tflm_models,
# add minutes, not coverage)
SWEPT = [n for n in GOLDENS if not n.startswith(("graph_", "layers", "tflm_"))] + ["graph_int8.mpyl"]
BOUNDARY = (0, 1, 3, 15, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


def golden(name):
    with open(os.path.join(GOLDEN, name), "rb") as f:
        return f.read()


def stream_verdict(buf):
    """The verdict of mpy_lazy.Stream (the file fallback) on the same bytes, in the same terms."""
    fd, path = tempfile.mkstemp(suffix=".mpyl")
    try:
        os.write(fd, buf)
        os.close(fd)
        try:
            s = mpy_lazy.Stream(path)
        except ContainerError as e:
            return "ContainerError %s" % e.field
        with s:
            for name in s.names(aux=True):
                info = s.info(name)
                out = bytearray(info.nbytes)
                assert s.readinto(name, out) == info.nbytes
                assert out == buf[info.offset : info.offset + info.nbytes], name
            try:
                s.verify()
            except ContainerError as e:
                return "ok %d %s" % (len(s), e.field)
            return "ok %d" % len(s)
    finally:
        os.unlink(path)


def clean(v):
    """A verdict with nothing but clean outcomes: opened or refused, and a model (if any)
    refused, run, or too large to run here."""
    head, _, model = v.partition(" | ")
    if not (head.startswith("ok") or head.startswith("ContainerError")):
        return False
    return not model or model.split(" ")[0] in ("ran", "refused", "big", "heavy")


def check(buf):
    """The properties every input must have; returns the verdict."""
    v = fuzz.result(buf)
    assert clean(v), v
    # the same bytes at an odd address (every wider dtype then served from an aligned RAM
    # copy: a model runs on those) and read through the file fallback give the same verdict;
    # where the container holds a stored program, the odd copy runs the description instead
    # (the program's kernels read words in place), which refuses what the program never reads
    # (tensor names, flags): the same verdict on the container, a clean one on the model
    odd = fuzz.result(memoryview(b"\0" + buf)[1:])
    if b"graph.program" in buf:
        assert clean(odd) and odd.partition(" | ")[0] == v.partition(" | ")[0], (odd, v)
    else:
        assert odd == v
    assert stream_verdict(buf) == v.partition(" | ")[0]
    return v


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False))
def test_valid_containers_from_the_writer_open_and_verify(rnd):
    data = fuzz_corpus.random_container(rnd)
    c = mpy_lazy.open(data)
    assert check(data) == "ok %d" % get(data, HEADER, "tensor_count")
    assert c.verify() == len(c)


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False))
def test_mutated_containers(rnd):
    check(fuzz_corpus.mutate(rnd, fuzz_corpus.random_container(rnd)))


@st.composite
def field_mutation(draw):
    """A golden container with one field of the header, a table entry or a metadata entry
    set to a boundary value (or any value); header CRC recomputed or not."""
    buf = bytearray(golden(draw(st.sampled_from(GOLDENS))))
    size, align, doff = len(buf), get(buf, HEADER, "alignment"), get(buf, HEADER, "data_offset")
    where = draw(st.sampled_from(("header", "entry", "meta")))
    if where == "header":
        table, base = HEADER, 0
    elif where == "entry":
        i = draw(st.integers(0, get(buf, HEADER, "tensor_count") - 1))
        table, base = ENTRY, get(buf, HEADER, "table_offset") + 64 * i
    else:
        k = draw(st.integers(0, get(buf, HEADER, "meta_count") - 1))
        table, base = META, get(buf, HEADER, "meta_offset") + 16 * k
    field = draw(st.sampled_from(sorted(table)))
    code = table[field][1]
    if code == "f":
        value = draw(st.floats(width=32) | st.sampled_from(fuzz_corpus._FLOATS))
    elif code == "4s":
        value = draw(st.binary(min_size=4, max_size=4))
    else:
        value = draw(st.sampled_from(BOUNDARY + (align - 1, size, size + 1, doff, doff + align))
                     | st.integers(0, 0xFFFFFFFF))
    put(buf, table, field, value, base)
    if field != "header_crc" and draw(st.booleans()):
        fix_crc(buf)
    return bytes(buf)


@settings(max_examples=600, deadline=None)
@given(field_mutation())
def test_fields_at_boundary_values(buf):
    check(buf)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(GOLDENS), st.lists(st.integers(0, 8 * 1024 - 1), min_size=1, max_size=8),
       st.booleans())
def test_bit_flips(name, bits, crc):
    buf = bytearray(golden(name))
    for b in bits:
        buf[(b // 8) % len(buf)] ^= 1 << (b % 8)
    if crc:
        fix_crc(buf)
    check(bytes(buf))


def _traced_lines(fn, *args):
    """Lines of mpy_lazy code fn(*args) executes (sys.settrace): work, counted, not timed."""
    n = [0]

    def tracer(frame, event, arg):
        if event == "call":
            return tracer if "mpy_lazy" in frame.f_code.co_filename else None
        if event == "line":
            n[0] += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn(*args)
    except ContainerError:
        pass
    finally:
        sys.settrace(None)
    return n[0]


def _claiming(count, size=128, **fields):
    """A 64-byte header claiming `count` tensors, consistent otherwise, CRC right."""
    buf = bytearray(size)
    struct.pack_into("<4sBBHII", buf, 0, b"MPYL", 1, 0, 64, 0, size)
    for field, value in dict(dict(alignment=16, tensor_count=count, table_offset=64, meta_offset=size,
                                  strings_offset=size, data_offset=size), **fields).items():
        put(buf, HEADER, field, value)
    return bytes(fix_crc(buf))


def test_huge_tensor_count_is_refused_immediately():
    # 2**32-1 tensors in a 128-byte buffer: refused from the header alone. A reader that
    # trusted the count would run 4 billion iterations (or allocate 256 GiB of table).
    for count in (0xFFFFFFFF, 0x7FFFFFFF, 2):
        buf = _claiming(count)
        e = fuzz.result(buf)
        assert e == "ContainerError tensor_count", e
        assert _traced_lines(mpy_lazy.open, buf) < 100
    buf = _claiming(0xFFFFFFFF, meta_count=0xFFFFFFFF, strings_size=0xFFFFFFFF, tensor_count=0)
    assert fuzz.result(buf) == "ContainerError meta_count"
    assert _traced_lines(mpy_lazy.open, buf) < 100
    # the same on MicroPython, with a heap far too small for any count-sized allocation
    from conftest import run_micropython

    code = "import mpy_lazy\nfor b in %r:\n    try:\n        mpy_lazy.open(b)\n    except mpy_lazy.ContainerError as e:\n        print(e.field)\n" % (
        [_claiming(0xFFFFFFFF), _claiming(0, meta_count=0xFFFFFFFF)],)
    r = run_micropython(code, heapsize="160K")
    assert r.returncode == 0 and r.stdout.split() == ["tensor_count", "meta_count"], r.stdout + r.stderr


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_reader_work_is_bounded_by_buffer_size(rnd):
    buf = fuzz_corpus.mutate(rnd, fuzz_corpus.random_container(rnd))
    # about 3 lines a byte on the fuzz corpus: name validation and per-entry checks
    assert _traced_lines(mpy_lazy.open, buf) <= 300 + 8 * len(buf)


def test_sharing_mutations_keep_the_reader_linear():
    # m_meta_share / m_name_share (issue 13): many metadata entries or names pointing at the
    # same bytes of the string table. The reader that validated a shared value once per entry
    # ran past the bound on these (quadratic); each mutated input must open or be refused
    # within 300 + 8 x its size traced lines, and some must open (names) or reach the metadata
    # checks (the mutations keep the container otherwise valid).
    import random

    rng = random.Random(13)
    tried = reached = 0
    while tried < 80:
        base = fuzz_corpus.random_container(rng)
        if get(base, HEADER, "meta_count") < 24 and tried % 2 == 0:
            continue  # half of them with many metadata entries
        mutation = fuzz_corpus.m_meta_share if tried % 2 == 0 else fuzz_corpus.m_name_share
        buf = bytes(fix_crc(mutation(rng, bytearray(base))))
        tried += 1
        lines = _traced_lines(mpy_lazy.open, buf)
        assert lines <= 300 + 8 * len(buf), (mutation.__name__, len(buf), lines)
        v = fuzz.result(buf)
        assert clean(v), v
        reached += v.startswith("ok") or v.split(" ")[1] in ("key", "value", "strings_size", "name")
    assert reached > 40, reached


def _assert_clean(f, refused=True):
    assert not fuzz.failed(f), fuzz.report(f, log=print) or f
    assert f["cpython"]["inputs"] == f["micropython"]["inputs"] == f["count"]
    assert f["cpython"]["ok"] > 0 and (f["cpython"]["refused"] > 0 or not refused)  # both ends reached


def test_corpus_on_cpython_and_micropython():
    """20,000 seeded inputs on both interpreters: same verdict for each (about 10 s)."""
    _assert_clean(fuzz.run(20000, seed=1, log=None))


def test_boundary_sweep_on_cpython_and_micropython():
    """Every field of every golden container at each boundary value, every truncation."""
    inputs = [b for name in SWEPT for b in fuzz_corpus.sweep(golden(name))]
    f = fuzz.run_inputs(inputs, len(inputs), log=None)
    _assert_clean(f)
    assert f["cpython"]["refused"] > 0.8 * len(inputs)


def _assert_graphs_clean(f, ran=0.2):
    _assert_clean(f, refused=False)  # valid containers: the models are what is mutated
    g = f["cpython"]
    assert g["graphs"] == f["count"]
    assert g["graph_ran"] > ran * f["count"] and g["graph_refused"] > 0.2 * f["count"], g


@settings(max_examples=120, deadline=None, derandomize=True)
@given(st.randoms(use_true_random=False))
def test_mutated_graph_descriptions(rnd):
    """A base model (every op, float and int8) with its description mutated: ops, keys, names,
    numbers at their limits, lines; now and then its tensors. Refused or run, never more."""
    base = rnd.choice(fuzz_corpus.BASE_GRAPHS)
    text = base
    for _ in range(rnd.choice((1, 1, 2, 3))):
        text = rnd.choice(fuzz_corpus.GRAPH_MUTATIONS)(rnd, text)
    tensors = _base_tensors(base)
    if rnd.random() < 0.125:
        tensors = fuzz_corpus.mutate_tensors(rnd, tensors)
    try:
        buf = fuzz_corpus.graph_container(tensors, [("graph", text)])
    except UnicodeEncodeError:
        return
    v = check(buf)
    assert " | " in v


_TENSORS = {}


def _base_tensors(text):
    if text not in _TENSORS:
        import random

        _TENSORS[text] = fuzz_corpus.graph_tensors(random.Random(0), text)
    return _TENSORS[text]


def test_base_graphs_run():
    """The unmutated bases run (so mutations start from models that work)."""
    import random

    for text in fuzz_corpus.BASE_GRAPHS:
        v = fuzz.result(fuzz_corpus.graph_container(_base_tensors(text), [("graph", text)]))
        assert v.startswith("ok") and v.partition(" | ")[2].startswith("ran"), v
    layers = fuzz_corpus.graph_tensors(random.Random(0), fuzz_corpus.BASE_LAYERS, layers=True)
    v = fuzz.result(fuzz_corpus.graph_container(layers, [("layers", fuzz_corpus.BASE_LAYERS)]))
    assert v.partition(" | ")[2].startswith("ran"), v


def test_graph_corpus_on_cpython_and_micropython():
    """500 seeded containers with a mutated model on both interpreters: same verdict for each,
    int8 outputs equal across kernel paths and (all-int8 graphs) across interpreters."""
    _assert_graphs_clean(fuzz.run(500, seed=1, log=None, graphs=True))


def test_graph_sweep_on_cpython_and_micropython():
    """Every number of every line of an int8 base graph at each limit, every op replaced by
    every op, every line deleted; on both interpreters."""
    inputs = list(fuzz_corpus.graph_sweep(fuzz_corpus.BASE_GRAPHS[1]))
    _assert_graphs_clean(fuzz.run_inputs(inputs, len(inputs), log=None), ran=0.02)


def test_atheris_coverage_guided():
    """A short atheris (libFuzzer) run over the reader, seeded with the golden files."""
    import pytest

    pytest.importorskip("atheris")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--atheris",
                        "-runs=20000", "-seed=1", "-timeout=120"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "Done 20000 runs" in r.stderr, r.stderr[-3000:]


def test_program_bases_run_and_their_mutants_are_clean_on_cpython_and_micropython():
    """The program fuzzer's bases (tools/fuzz_corpus.py PROGRAM_SOURCES: every record kind, the
    one-op models of tests/golden/fuzz/bases among them) each run as packed, on the best kernel
    path and on 'pure', on both interpreters; then one mutated round of each is clean."""
    import itertools

    n = len(fuzz_corpus.PROGRAM_SOURCES)
    inputs = list(itertools.islice(fuzz_corpus.program_corpus(2 * n, seed=5), 2 * n))
    f = fuzz.run_inputs(inputs[:n], n, log=None)
    _assert_clean(f, refused=False)
    for interp in ("cpython", "micropython"):
        assert f[interp]["graph_ran"] == n, (interp, f[interp])
    f = fuzz.run_inputs(inputs[n:], n, log=None)
    _assert_clean(f, refused=False)
    assert f["cpython"]["graph_refused"] > 0.3 * n, f["cpython"]
