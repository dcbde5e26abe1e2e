# mpy-lazy on the ESP32-S3's core (Xtensa LX7, windowed ABI, single-precision FPU) in
# qemu-system-xtensa's `sim` machine with semihosting: upstream ports/qemu (MicroPython
# v1.28.0) built for a CPU it does not know, with this directory's start-up, vectors, console
# and linker script. Toolchain and qemu: firmware/esp32s3/build_toolchain.sh, build_qemu.sh.
# Native code: viper and @native through the xtensawin emitter, the one the esp32 port uses.
QEMU_ARCH = xtensa
QEMU_MACHINE = sim
QEMU_ARGS += -cpu esp32s3

CROSS_COMPILE ?= xtensa-esp32s3-elf-

# ESP-IDF's code-generation flags for the core: calls through literals (the firmware is over
# the 512 KB reach of CALL8), literals next to their functions' text.
CFLAGS += -mlongcalls -DQEMU_SOC_ESP32S3_SIM
# the core's xtensa/config/core-isa.h, which newlib-esp32's header of that name includes
# (build_toolchain.sh installs it; firmware/esp32s3.mk passes XTENSA_PREFIX)
XTENSA_PREFIX ?= /opt/xtensa
CFLAGS += -idirafter $(XTENSA_PREFIX)/xtensa-esp32s3-elf/core-include
CFLAGS += -DMICROPY_HW_MCU_NAME='"ESP32-S3 core (Xtensa LX7)"'
# The windowed ABI: setjmp/longjmp (newlib's, which spills the register windows) for NLR, as
# the esp32 port does; py/nlrxtensa.c is for the call0 ABI (ESP8266).
CFLAGS += -DMICROPY_NLR_SETJMP=1
CFLAGS += -DMICROPY_EMIT_XTENSAWIN=1
CFLAGS += -include $(BOARD_DIR)/esp32s3_sim.h
# upstream's mphalport.c has a mp_hal_ticks_cpu() returning 0: ours reads CCOUNT
$(BUILD)/mphalport.o: CFLAGS += -Dmp_hal_ticks_cpu=qemu_port_ticks_cpu_unused
# Not SUPPORTS_HARDWARE_FP_SINGLE: to upstream that means an ARM VFP square root
# (lib/libm/thumb_vfp_sqrtf.c). GCC still uses the core's FPU for float arithmetic.

LDSCRIPT = $(BOARD_DIR)/esp32s3_sim.ld
# -nostdlib: the xtensa-elf specs would add the simulator libraries of Tensilica's tools (-lsim
# -lhandlers-sim -lhal); the start-up code is ours, the libraries are named in LIBS
LDFLAGS += -nostdlib -mlongcalls
LIBS = -lc -lgcc

vpath %.c $(BOARD_DIR)
vpath %.S $(BOARD_DIR)
SRC_C += esp32s3_sim.c
SRC_BOARD_O += startup.o

MPY_CROSS_FLAGS += -march=xtensawin

# 256 KB GC heap: an ESP32-S3 without PSRAM.
MICROPY_HEAP_SIZE ?= 262144

FROZEN_MANIFEST ?= $(BOARD_DIR)/manifest.py
include $(BOARD_DIR)/../common.mk
