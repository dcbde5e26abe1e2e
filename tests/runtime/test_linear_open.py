# Issue 13, item 1: the reader's work is linear in the file size, however many names and
# metadata entries point at the same bytes of the string table (it is validated once), and
# whatever the order of the tensors' data. The work is counted on CPython (sys.settrace lines of
# mpy_lazy code, bounded by 300 + 8 x the file size, docs/RELIABILITY.md): a count, not a clock,
# so a busy machine cannot fail it. MicroPython runs the same code (and the same checks of the
# outcome here); it has no settrace, so its timing over sizes growing 16-fold is a row of
# `make bench` (bench/linear.py), not a test.
import sys

import mpy_lazy
from mpy_lazy import ContainerError

import rt_hostile as A
from rt_util import IS_MICROPYTHON, Lcg, raises, small_board, traced_lines

SIZES = (50, 200, 800)
SHRINK = 4 if small_board() else 1
TMP = "/tmp/mpy_lazy_linear_test.mpyl"


def assert_linear(build, use, ns=SIZES, per_byte=8):
    """use(buf) on build(n) for each n of `ns` does work linear in len(buf): on CPython at
    most 300 + per_byte x len(buf) traced lines of mpy_lazy code (a quadratic reader fails
    fast, stopped at the bound). On MicroPython use() runs on the smallest and the largest
    size (a quarter of them on a board): the same code, without a count.
    Returns the sizes and the lines (None on MicroPython)."""
    if not IS_MICROPYTHON:
        bufs = [build(n) for n in ns]
        sizes = [len(b) for b in bufs]
        work = [traced_lines(lambda: use(b), 300 + per_byte * len(b), (ContainerError,)) for b in bufs]
        return sizes, work
    sizes = []
    for n in (ns[0] // SHRINK, ns[-1] // SHRINK):
        buf = build(n)
        sizes.append(len(buf))
        try:
            use(buf)
        except ContainerError:
            pass
        buf = None
    return sizes, None


def test_metadata_sharing_one_value_is_refused_in_linear_work():
    # n distinct keys, every value the same 16 x n bytes of two-byte characters: the reader
    # used to validate that value once per entry (a 31 KB file took 3-4 s on both
    # interpreters). The keys and values add up to more than the string table (rule 7): refused.
    for bad in (False, True):
        assert_linear(lambda n: A.shared_value(n, bad), mpy_lazy.open)
        e = raises(ContainerError, mpy_lazy.open, A.shared_value(40, bad))
        assert e.field == "strings_size" and "share" in str(e), str(e)


def test_names_sharing_a_run_of_characters_open_in_linear_work():
    # n tensors named by overlapping 254-byte windows of one run of two-byte characters, the
    # string table valid UTF-8 or not (a stray invalid byte no name points at), the tensors'
    # data in table order or reversed (no quadratic sort of the data offsets either)
    for bad in (False, True):
        for reverse in (False, True):
            buf = A.shared_names(40, bad, reverse)
            c = mpy_lazy.open(buf)
            assert len(c.names()) == len(c) and c.verify() == len(c)
            assert_linear(lambda n: A.shared_names(n, bad, reverse), mpy_lazy.open)


def test_many_tensors_in_any_data_order_open_in_linear_work():
    # the no-two-tensors-overlap check used to sort the data offsets: MicroPython's quicksort
    # (pivot: the last element) is quadratic on sorted input, 1,600 tensors took 0.3 s
    for reverse in (False, True):
        c = mpy_lazy.open(A.many_tensors(30, reverse))
        assert c.verify() == 30
        assert_linear(lambda n: A.many_tensors(n, reverse), mpy_lazy.open, (100, 400, 1600))


def test_metadata_and_meta_dict_in_linear_work():
    def use(buf):
        c = mpy_lazy.open(buf)
        assert len(c.meta) == c._mcount
        assert c._meta_get("k000003" + "\u00c3") is not None

    assert_linear(A.distinct_meta, use)


def test_stream_in_linear_work():
    import os

    def use(buf):
        try:
            os.remove(TMP)  # a board's /tmp is a 16 KB RAM disk: no room for two copies
        except OSError:
            pass
        with open(TMP, "wb") as f:
            f.write(buf)
        with mpy_lazy.Stream(TMP) as s:
            s.meta
            s.names()

    ns = (25, 100, 400) if small_board() else SIZES  # the files fit that RAM disk
    assert_linear(A.distinct_meta, use, ns)
    assert_linear(lambda n: A.shared_names(n, True, True), use, ns)
    assert_linear(A.shared_value, use, ns)


def test_graph_metadata_read_in_linear_work():
    # model.declare() reads one metadata value ('graph'), not the others
    def use(buf):
        c = mpy_lazy.open(buf)
        assert c._meta_get("graph").startswith("input")
        assert c._meta_get("grap") is None

    assert_linear(A.long_graph, use)


def test_string_table_marks_agree_with_utf8_on_every_span():
    # the one-pass validation (_scan, then _span_ok per span) gives utf8()'s verdict on every
    # span of random tables mixing ASCII, valid multi-byte characters and every bad sequence
    from mpy_lazy.container import _scan, _span_ok, utf8

    pieces = [b"a", b"Z", b"\xc3\xa9", b"\xe4\xb8\xad", b"\xf0\x9f\x99\x82", b"\xc0\xae", b"\xed\xa0\x80",
              b"\xf4\x90\x80\x80", b"\xc3", b"\x80", b"\xff", b"\xe2\x82", b"\xe0\x80\xaf", b"\xbf\xbf"]
    rng = Lcg(13)
    for trial in range(60 if IS_MICROPYTHON else 200):
        table = bytearray()
        for _ in range(rng.int(0, 12)):
            table += rng.pick(pieces if rng.chance(3) else pieces[:5])
        pad = b"xy"  # the table at an offset inside a larger buffer
        buf = memoryview(bytes(pad + table + pad))
        n = len(table)
        marks = _scan(buf, 2, n)
        assert (marks is None) == (utf8(bytes(table)) is not None), table
        for a in range(n + 1):
            for b in range(a, n + 1):
                want = utf8(bytes(table[a:b])) is not None
                assert _span_ok(buf, 2, n, marks, a, b) == want, (bytes(table), a, b, want)


def test_declare_in_linear_work():
    # model.declare() on a chain of n in-place relu ops: parsing is linear, and so must be the
    # liveness pass (it re-walked every alias chain once per in-place op: cubic, a 15 KB graph
    # of 800 ops took 1.3 s on CPython and 4.3 s on MicroPython, 4,096 ops several minutes)
    from mpy_lazy import model

    def use(buf):
        m = model.declare(mpy_lazy.open(buf))
        assert len(m.ops) > 1

    assert_linear(A.long_graph, use, (25, 100, 400), per_byte=60)
