# The data-moving records (kinds move and fill): no op of the description of its own; reshape,
# concat, slice, transpose and pad compile into them (ops/reshape.py, concat.py, slice.py,
# pad.py), and a program copies its inputs in with put().
from .._arith import rec
from ..kinds import FILL, MOVE


# --- records: layout, load-time check, reference kernels (docs/OPS.md) -------------------------

# the kernel of each kind, by name: here, and in the fast path (FAST on the viper paths for the
# integer kinds, _nd on the ulab path for the float ones: kernels.kernel)
KERNELS = {MOVE: 'move', FILL: 'fill'}


def _check_move(r, E):
    es = r[10]
    if es not in (1, 2, 4):
        r.fail("size", "%d bytes per element (1, 2 or 4)" % es)
    planes, rows, cols = (r.range(i, "shape", 0, 1 << 24) for i in (11, 4, 5))
    if planes * rows * cols > r.arena // es:  # (zero strides would make it loop on one element)
        r.fail("shape", "%d x %d x %d elements: more than the arena holds" % (planes, rows, cols))
    if planes and rows and cols:
        for o, s_plane, s_row, s_col, field in ((2, 12, 6, 7, "x"), (3, 13, 8, 9, "y")):
            reach = [(n - 1) * r.range(i, field, -(1 << 24), 1 << 24)
                     for n, i in ((planes, s_plane), (rows, s_row), (cols, s_col))]
            first = sum(d for d in reach if d < 0)  # (negative strides: reversed axes)
            last = sum(d for d in reach if d > 0) + 1
            r.region(o, field, (last - first) * es, es, first * es)


def _check_fill(r, E):
    es = r[5]
    if es not in (1, 2, 4):
        r.fail("size", "%d bytes per element (1, 2 or 4)" % es)
    n = r.range(3, "shape", 0, 1 << 24)
    r.region(2, "y", n * es, es)
    if es < 4:
        r.range(4, "zero_point", -(1 << (8 * es - 1)), (1 << (8 * es - 1)) - 1)


def check(r, E):
    (_check_fill if r.kind == FILL else _check_move)(r, E)


# move record: 2 SO 3 DO (bytes) 4 ROWS 5 COLS 6 SS 7 SJ 8 DS 9 DJ (element strides) 10 ES
# (bytes per element: 1, 2 or 4) 11 PLANES 12 PSS 13 PDS (plane strides). fill record: 2 DO 3 N
# 4 V (an int8 or int16 code, or 32 bits) 5 ES. A stride may be negative (an axis read or written
# backwards: REVERSE_V2, slices of negative stride).

def move(E, P, k):
    """dst[DO + p * PDS + i * DS + j * DJ] = src[SO + p * PSS + i * SS + j * SJ] for p < PLANES,
    i < ROWS, j < COLS, element by element (ES bytes each): copies, concatenation, padding,
    slices and transposes."""
    p = rec(P, k)
    a = E.view(1)
    so, do, rows, cols, ss, sj, ds, dj, es, planes, pss, pds = p[2:14]
    for q in range(planes):
        for i in range(rows):
            si = so + es * (q * pss + i * ss)
            di = do + es * (q * pds + i * ds)
            for _ in range(cols):
                for b in range(es):
                    a[di + b] = a[si + b]
                si += es * sj
                di += es * dj


def put(s, d, p):
    """dst[DO + i * DS + j * DJ] = src[SO + i * SS + j * SJ]; p = [SO, DO, ROWS, COLS, SS, SJ,
    DS, DJ] (elements): a move between two buffers (an input copied in per call)."""
    so, do, rows, cols, ss, sj, ds, dj = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    for i in range(rows):
        si = so + i * ss
        di = do + i * ds
        for _ in range(cols):
            d[di] = s[si]
            si += sj
            di += dj


def fill(E, P, k):
    """dst[DO + i] = V for i < N, ES bytes each (little-endian): padding."""
    p = rec(P, k)
    a = E.view(1)
    do, n, v, es = p[2], p[3], p[4], p[5]
    for b in range(es):
        c = (v >> (8 * b)) & 255
        if c > 127:
            c -= 256
        for i in range(do + b, do + es * n, es):
            a[i] = c
