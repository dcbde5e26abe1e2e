# Issue 13, item 1: the reader's work is linear in the file size, however many names and
# metadata entries point at the same bytes of the string table (it is validated once), and
# whatever the order of the tensors' data. On CPython the work is counted (sys.settrace lines
# of mpy_lazy code, bounded by 300 + 8 x the file size, docs/RELIABILITY.md); MicroPython has
# no settrace, so there it is timed over sizes growing 16-fold (quadratic work would grow
# 256-fold; the test allows 4 x linear).
import gc
import sys

import mpy_lazy
from mpy_lazy import ContainerError

import rt_hostile as A
from rt_util import IS_MICROPYTHON, Lcg, raises, small_board

SIZES = (50, 200, 800)
SHRINK = 4 if small_board() else 1
TMP = "/tmp/mpy_lazy_linear_test.mpyl"


class _TooMuch(Exception):
    pass


def _lines(fn, limit):
    """Lines of mpy_lazy code fn() runs (CPython), stopping (AssertionError) past `limit`: a
    quadratic reader fails fast instead of running for minutes under the tracer."""
    n = [0]

    def tracer(frame, event, arg):
        if event == "call":
            return tracer if "mpy_lazy" in frame.f_code.co_filename else None
        if event == "line":
            n[0] += 1
            if n[0] > limit:
                raise _TooMuch()
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    except ContainerError:
        pass
    except _TooMuch:
        raise AssertionError("more than %d lines" % limit)
    finally:
        sys.settrace(None)
    return n[0]


def _micros(fn, reps):
    import time

    gc.collect()
    t0 = time.ticks_us()
    for _ in range(reps):
        try:
            fn()
        except ContainerError:
            pass
    return time.ticks_diff(time.ticks_us(), t0)


def assert_linear(build, use, ns=SIZES, per_byte=8):
    """use(buf) on build(n) for each n of `ns` does work linear in len(buf): on CPython at
    most 300 + per_byte x len(buf) lines. On MicroPython, timed: each size is run as many times
    as it takes to go through about as many bytes as the largest size once, so linear work
    takes the same time at every size and a machine busy with other work slows them alike; the
    largest may take at most 4 x the smallest (plus 30 ms). Quadratic work would take 16 x
    (the sizes span 16 x); the old reader and runner took 6 to 50 x. Best of 3 interleaved
    rounds.
    Returns the sizes and the work (lines, or microseconds per byte x 1000)."""
    if not IS_MICROPYTHON:
        bufs = [build(n) for n in ns]
        sizes = [len(b) for b in bufs]
        work = [_lines(lambda: use(b), 300 + per_byte * len(b)) for b in bufs]
        return sizes, work
    # the two ends are enough here; on a board (a 192 KB heap) a quarter of the sizes, the same
    # 16-fold range
    ns = [n // SHRINK for n in (ns[0], ns[-1])]
    bufs = []
    for n in ns:
        gc.collect()
        bufs.append(build(n))
    sizes = [len(b) for b in bufs]
    reps = [max(1, sizes[-1] // n) for n in sizes]
    work = [None] * len(bufs)
    for _ in range(3):
        for i in range(len(bufs)):
            t = _micros(lambda: use(bufs[i]), reps[i])
            work[i] = t if work[i] is None or t < work[i] else work[i]
    assert work[-1] <= 4 * work[0] + 30000, (sizes, reps, work)
    return sizes, [1000 * work[i] // (reps[i] * sizes[i]) for i in range(len(work))]


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
