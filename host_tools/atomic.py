"""Atomic output: write a temp file in the destination's directory, fsync, then os.replace.

On any failure the temp file is removed and an existing destination is left untouched. Only
regular files are written: an existing FIFO, device or socket at the destination is refused."""
import contextlib
import os
import stat
import tempfile

from .container import PackError


def kind(mode):
    """What a non-regular file is, in words (for one-line errors)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_output(path):
    """PackError unless `path` can become a regular file: its directory exists, and it is
    missing or a regular file (a FIFO, a device such as /dev/null or a socket would be
    replaced by the rename: the tool refuses them rather than write somewhere else)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise PackError("%s: %s is not a directory" % (path, directory))
        raise PackError("%s: output directory does not exist" % path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise PackError("%s: cannot write: %s" % (path, e.strerror or e))
    if stat.S_ISDIR(mode):
        raise PackError("%s: output is a directory" % path)
    if not stat.S_ISREG(mode):
        raise PackError("%s: output is %s, not a regular file: give a file name" % (path, kind(mode)))


@contextlib.contextmanager
def atomic_output(path):
    check_output(path)
    directory = os.path.dirname(os.path.abspath(path))
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
