# The messages of errors that are rare on a board (a missing file, an input value out of range),
# in their own module: imported only when one is raised (heap is scarce; the code that checks
# stays small).


def missing(path, err):
    """The message of a failed open(path): the path, and for a missing file what its directory
    holds (a script opening /rom/model.mpyl where the image holds another name)."""
    if err != 2:  # not ENOENT
        return "%s: cannot be opened (errno %d)" % (path, err)
    d = path.rsplit("/", 1)[0] if "/" in path else "."
    try:
        import os

        names = sorted(os.listdir(d or "/"))
    except (OSError, ImportError, AttributeError):
        return "%s: no such file" % path
    more = ", ..." if len(names) > 8 else ""
    return "%s: no such file (%s holds %s)" % (path, d or "/", ", ".join(names[:8]) + more if names else "nothing")


def out_of_range(i, j, val, hi):
    """The ValueError of an int given to an integer input of range -hi - 1..hi, 0..255 for hi
    255, 0..1 for hi 1 (a bool input) (it would wrap: 300 read as 44 by an int8 input)."""
    if hi == 1:
        return ValueError("input %d: %d (item %d) is outside bool's 0..1: give 0 or 1, True or False" % (i, val, j))
    if hi == 255:
        return ValueError("input %d: %d (item %d) is outside uint8's 0..255: give uint8 codes, or real values as "
                          "floats (quantized with the input's scale)" % (i, val, j))
    bits = {127: 8, 32767: 16}.get(hi, 32)
    return ValueError("input %d: %d (item %d) is outside int%d's %d..%d: give int%d codes, or real values as "
                      "floats (quantized with the input's scale)" % (i, val, j, bits, -hi - 1, hi, bits))
