"""Flash layout of RPI_PICO_MPY_LAZY, read from mpconfigboard.h (the one place it is set).

rp2_flash.c puts the filesystem at the top of flash and ROMFS right below it; the firmware image
has to end below ROMFS, which the linker does not check in MicroPython 1.28.
`python flash_layout.py firmware.uf2` checks a built image and prints the layout."""
import os
import re
import struct
import sys

FLASH_BYTES = 2 * 1024 * 1024  # Raspberry Pi Pico (pico-sdk board "pico")
XIP_BASE = 0x10000000
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpconfigboard.h")


def _define(text, name):
    m = re.search(r"#define\s+%s\s+\((\d+)\s*\*\s*1024\)" % name, text)
    if not m:
        raise ValueError("%s: no '#define %s (N * 1024)'" % (HEADER, name))
    return int(m.group(1)) * 1024


def layout(header=HEADER):
    """{'romfs_offset', 'romfs_bytes', 'fs_offset', 'fs_bytes', 'firmware_max'}, offsets in flash."""
    with open(header) as f:
        text = f.read()
    romfs = _define(text, "MICROPY_HW_ROMFS_BYTES")
    fs = _define(text, "MICROPY_HW_FLASH_STORAGE_BYTES")
    fs_offset = FLASH_BYTES - fs
    romfs_offset = fs_offset - romfs
    return {"romfs_offset": romfs_offset, "romfs_bytes": romfs, "fs_offset": fs_offset,
            "fs_bytes": fs, "firmware_max": romfs_offset}


def uf2_end(path):
    """Flash offset just past the last byte a UF2 image writes."""
    end = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(512)
            if not block:
                return end
            magic0, magic1, _flags, addr, size = struct.unpack_from("<5I", block)
            if len(block) != 512 or (magic0, magic1) != (0x0A324655, 0x9E5D5157):
                raise ValueError("%s: not a UF2 file" % path)
            end = max(end, addr - XIP_BASE + size)


def main(argv):
    lay = layout()
    if len(argv) != 1:
        sys.exit("usage: flash_layout.py firmware.uf2")
    end = uf2_end(argv[0])
    print("firmware  0x%06x..0x%06x  %7d bytes of %d (%.0f%%)"
          % (0, end, end, lay["firmware_max"], 100.0 * end / lay["firmware_max"]))
    print("ROMFS     0x%06x..0x%06x  %7d bytes  (XIP address 0x%08x)"
          % (lay["romfs_offset"], lay["fs_offset"], lay["romfs_bytes"], XIP_BASE + lay["romfs_offset"]))
    print("littlefs  0x%06x..0x%06x  %7d bytes" % (lay["fs_offset"], FLASH_BYTES, lay["fs_bytes"]))
    if end > lay["firmware_max"]:
        sys.exit("flash_layout.py: firmware ends at 0x%x, inside the ROMFS partition (0x%x)"
                 % (end, lay["romfs_offset"]))


if __name__ == "__main__":
    main(sys.argv[1:])
