"""Atomic output: write a temp file in the destination's directory, fsync, then os.replace.

On any failure the temp file is removed and an existing destination is left untouched."""
import contextlib
import os
import tempfile

from .container import PackError


@contextlib.contextmanager
def atomic_output(path):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise PackError("%s: %s is not a directory" % (path, directory))
        raise PackError("%s: output directory does not exist" % path)
    if os.path.isdir(path):
        raise PackError("%s: output is a directory" % path)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise PackError("%s: cannot write: %s" % (path, e.strerror or e))
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, "w+b") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp):  # writing it: disk full, EFBIG
            raise PackError("%s: cannot write: %s" % (path, e.strerror or e)) from e
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path, data):
    with atomic_output(path) as f:
        f.write(data)
