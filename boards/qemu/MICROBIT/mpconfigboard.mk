# mpy-lazy on qemu microbit (nRF51): Cortex-M0 (ARMv6-M: unaligned LDR/LDRH fault, like the
# RP2040's Cortex-M0+), soft float, single-precision MicroPython floats, ulab, mpy_lazy frozen.
# The emulated SoC is given RP2040-like memory: 2 MB flash (the Pico's) and 256 KB SRAM. Upstream's
# nrf51.ld hard-codes 1 MB of flash for the firmware (its ROM region) and the 256 KB of SRAM;
# the ROMFS partition is the second megabyte, outside the linker's view. qemu must be started with
#   -global nrf51-soc.flash-size=2097152 -global nrf51-soc.sram-size=262144
include $(TOP)/ports/qemu/boards/MICROBIT/mpconfigboard.mk

# 192 KB GC heap out of 256 KB SRAM (a stock RP2040 build has ~230 KB).
MICROPY_HEAP_SIZE ?= 196608

# ROMFS partition: the upper 1 MB of the 2 MB flash; the firmware (at most 1 MB: the linker's ROM
# region) ends below it (firmware/firmware.mk checks too). qemu writes the image there with
#   -device loader,file=romfs.img,addr=0x100000,force-raw=on
# (It was the upper 512 KB of a 1 MB flash until the runtime's frozen bytecode outgrew 512 KB.)
MICROPY_HW_ROMFS_PART0_START = 0x00100000
MICROPY_HW_ROMFS_PART0_SIZE = 0x00100000
# for upstream's `make run` / `make test` (a later -global wins over upstream's 1 MB)
QEMU_ARGS += -global nrf51-soc.flash-size=2097152

# Drop the ARM unwind tables upstream's nrf51.ld has no place for (see exidx.ld).
LDFLAGS += -T $(BOARD_DIR)/exidx.ld

# Viper/native code for ARMv6-M, as the rp2 port does on the RP2040 (upstream's qemu microbit
# board leaves the native emitter off and cross-compiles frozen code for armv7m).
CFLAGS += -DMICROPY_EMIT_THUMB=1 -DMICROPY_EMIT_INLINE_THUMB=1
MPY_CROSS_FLAGS := -march=armv6m

# Frozen native (viper) code must be word aligned on ARMv6-M. Upstream's mpy-tool.py emits each
# frozen native function as a byte array with __attribute__((aligned (2))), but the runtime reads
# its first word (the prelude index, mp_obj_fun_native_get_prelude_ptr) with an LDR: when the
# linker puts the array at 2 mod 4, calling any frozen viper function HardFaults on a Cortex-M0
# (Cortex-M3 loads unaligned words in hardware; a .mpy loaded at run time sits in aligned heap).
# Raise every alignment in the generated file to at least 4. docs/FIRMWARE.md, "Known problems".
$(BUILD)/frozen_content.o: CFLAGS += -D'aligned(n)=aligned((n) < 4 ? 4 : (n))'

include $(BOARD_DIR)/../common.mk
