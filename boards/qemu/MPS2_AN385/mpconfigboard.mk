# mpy-lazy on qemu mps2-an385: Cortex-M3 (ARMv7-M: unaligned LDR allowed), soft float,
# single-precision MicroPython floats, ulab, mpy_lazy frozen.
# Everything (code, data, heap) lives in the 4 MB RAM at 0; upstream's ROMFS partition is the
# 4 MB PSRAM window at 0x21000000, loaded by qemu's `-device loader`.
include $(TOP)/ports/qemu/boards/MPS2_AN385/mpconfigboard.mk

# 256 KB GC heap: in the range of an ESP32-S3 without PSRAM.
MICROPY_HEAP_SIZE ?= 262144

include $(BOARD_DIR)/../common.mk
