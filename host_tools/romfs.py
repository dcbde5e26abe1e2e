"""`mpy-lazy romfs`: a ROMFS image (as `mpremote romfs deploy` takes) in which every container's
first byte sits at a multiple of its own alignment from the image start, and every .safetensors
file's data section (the byte after its JSON header) at a multiple of 16, so the runtime reads
their tensors in place (mpy_lazy.open() takes both).

Built on mpremote's VfsRomWriter (its record layout). Two things of the ROMFS format, both
accepted everywhere by MicroPython's extmod/vfs_rom.c, make alignment possible:
- a varuint may be padded with leading 0x80 bytes: this writer emits every varuint with a fixed
  width, so each record's header size is known before its content is, and a file's absolute
  data offset can be computed while the image is still being assembled;
- padding records (kind 1) are skipped by the reader: one is inserted before a file record to
  move its data to the next aligned offset.
The whole image is assembled in RAM (ROMFS partitions are flash-sized: a few MB)."""
import json
import os
import struct

from mpremote.romfs import VfsRomWriter

from .atomic import write_bytes
from .container import MAGIC, PackError

VARUINT_WIDTH = 5  # 35 bits: images up to 32 GiB
_PREFIX = len(VfsRomWriter.ROMFS_HEADER) + VARUINT_WIDTH  # even, so finalise adds no 0x80 byte
_MIN_PADDING = 2 * VARUINT_WIDTH  # the smallest padding record: kind + length, empty payload


class AlignedRomWriter(VfsRomWriter):
    """VfsRomWriter whose `mkfile` can place the file's data at an aligned image offset."""

    def __init__(self):
        super().__init__()
        self._starts = [_PREFIX]  # image offset of each open directory's content

    def _encode_uint(self, value):
        if value >> (7 * VARUINT_WIDTH):
            raise PackError("ROMFS image too large")
        groups = [(value >> (7 * i)) & 0x7F for i in reversed(range(VARUINT_WIDTH))]
        return bytes([0x80 | g for g in groups[:-1]] + [groups[-1]])

    def _here(self):
        return self._starts[-1] + len(self._dir_stack[-1][1])

    def opendir(self, dirname):
        name = _ascii(dirname)
        # directory record: kind, length, name length, name, then the content
        self._starts.append(self._here() + 3 * VARUINT_WIDTH + len(name))
        super().opendir(dirname)

    def closedir(self):
        super().closedir()
        self._starts.pop()

    def mkfile_aligned(self, filename, data, alignment):
        """Add a file whose data starts at a multiple of `alignment` (a safetensors file: whose
        tensor data does); returns the file's offset."""
        name = _ascii(filename)
        # file record: kind, length, name length, name, then a data record: kind, length, data
        header = 5 * VARUINT_WIDTH + len(name)
        phase = safetensors_data_offset(data) if alignment > 1 and data[:4] != MAGIC else 0
        pad = -(self._here() + header + (phase or 0)) % alignment
        while 0 < pad < _MIN_PADDING:
            pad += alignment
        if pad:
            self._extend(self._pack(self.ROMFS_RECORD_KIND_PADDING, bytes(pad - _MIN_PADDING)))
        offset = self._here() + header
        self.mkfile(filename, data)
        return offset

    def finalise(self):
        if len(self._dir_stack[0][1]) % 2:  # keep the image prefix at its fixed size
            self._extend(self._pack(self.ROMFS_RECORD_KIND_PADDING, b"\x00"))
        return super().finalise()


def _ascii(name):
    try:
        return name.encode("ascii")
    except UnicodeEncodeError:
        raise PackError("%r: ROMFS names must be ASCII" % name)


SAFETENSORS_ALIGNMENT = 16  # the data section of a .safetensors file: every dtype's itemsize divides it


def safetensors_data_offset(data):
    """Offset of a safetensors file's data section (8 + its header size), or None when data is
    not one (byte 8 is not '{', or the size does not fit)."""
    if len(data) < 10 or data[8:9] != b"{":
        return None
    (n,) = struct.unpack_from("<Q", data, 0)
    return 8 + n if n <= len(data) - 8 else None


def safetensors_header(data, path):
    """The parsed JSON header of a safetensors file (PackError if it is not valid JSON)."""
    start = safetensors_data_offset(data)
    if start is None:
        raise PackError("%s: not a safetensors file (no JSON header)" % path)
    try:
        header = json.loads(bytes(data[8:start]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PackError("%s: bad safetensors header: %s" % (path, e))
    if not isinstance(header, dict):
        raise PackError("%s: bad safetensors header: not a JSON object" % path)
    return header


def container_alignment(data, path):
    """A container's alignment from its header; 16 for a safetensors file (its data section is
    placed at a multiple of it); 1 for other files (placed unaligned)."""
    if data[:4] != MAGIC:
        if path.endswith(".safetensors"):
            safetensors_header(data, path)  # a broken one fails here, not on the board
            return SAFETENSORS_ALIGNMENT
        try:  # any other name: one by content, else a plain file
            safetensors_header(data, path)
            return SAFETENSORS_ALIGNMENT
        except PackError:
            return 1
    if len(data) < 64:
        raise PackError("%s: truncated container header" % path)
    (alignment,) = struct.unpack_from("<I", data, 16)
    if alignment < 4 or alignment > 4096 or alignment & (alignment - 1):
        raise PackError("%s: bad alignment %d in the container header" % (path, alignment))
    _check_container(data, path)
    return alignment


def _check_container(data, path):
    """The runtime's reader on the container, every CRC included: a truncated or damaged one is
    refused here, not found on the board."""
    import mpy_lazy

    try:
        mpy_lazy.open(data).verify()
    except mpy_lazy.ContainerError as e:
        raise PackError("%s: %s: the file is damaged (pack it again)" % (path, e))


def build_image(files, subdir=None):
    """files: [(name, bytes)] -> (image bytes, [(path in image, offset, size, alignment)])."""
    w = AlignedRomWriter()
    parts = [p for p in (subdir or "").strip("/").split("/") if p]
    for p in parts:
        w.opendir(p)
    placed = []
    seen = set()
    for name, data in files:
        if name in seen:
            raise PackError("%s: two input files with this name" % name)
        seen.add(name)
        alignment = container_alignment(data, name)
        offset = w.mkfile_aligned(name, data, alignment)
        placed.append(("/".join(parts + [name]), offset, len(data), alignment))
    for _ in parts:
        w.closedir()
    image = w.finalise()
    for (path, offset, size, alignment), (_n, data) in zip(placed, files):
        # the layout arithmetic above must match what VfsRomWriter produced
        phase = safetensors_data_offset(data) or 0 if data[:4] != MAGIC and alignment > 1 else 0
        assert (offset + phase) % alignment == 0 and image[offset:offset + size] == data, path
    return image, placed


def build_romfs(paths, output, subdir=None):
    files = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                files.append((os.path.basename(path), f.read()))
        except OSError as e:
            raise PackError("%s: %s" % (path, e.strerror or e))
    image, placed = build_image(files, subdir)
    write_bytes(output, image)
    return placed
