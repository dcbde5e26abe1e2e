# Shared part of the mpy-lazy qemu boards. Included by boards/qemu/<BOARD>/mpconfigboard.mk,
# which the upstream qemu port includes when built with BOARD_DIR=<this repo>/boards/qemu/<BOARD>.
# Needs ULAB_DIR (a micropython-ulab checkout); firmware/firmware.mk passes it.

ifeq ($(ULAB_DIR),)
$(error ULAB_DIR is not set: point it at a micropython-ulab checkout (tested: 6.12, d161443))
endif

# ulab as a user C module (its micropython.mk lives in $(ULAB_DIR)/code).
USER_C_MODULES = $(ULAB_DIR)

# Freeze the mpy_lazy runtime (and nothing else: no unittest, no upstream test modules).
FROZEN_MANIFEST ?= $(BOARD_DIR)/../manifest.py

# Containers frozen with `mpy-lazy freeze` stay in flash, aligned, read in place: after
# makemanifest.py writes frozen_content.c, boards/frozen_align.py gives every container's bytes
# constant its alignment (the C compiler puts a string literal at any address). mkenv.mk set
# MAKE_MANIFEST before this file is read; py/manifest.mk runs it.
MAKE_MANIFEST = $(PYTHON) $(BOARD_DIR)/../../frozen_align.py --run $(TOP)/tools/makemanifest.py

# littlefs v2, as on the rp2 and esp32 ports: the tests mount a RAM disk at /tmp with it (qemu
# boards have no writable flash filesystem), for mpy_lazy.Stream and files that cannot be mapped.
MICROPY_VFS_LFS2 = 1
# littlefs stamps files with mp_hal_time_ns(), which the qemu port (no RTC) lacks: time 0.
CFLAGS += -D'mp_hal_time_ns()=(0ULL)'

# Stack for the MicroPython thread; the GC heap size is set per board.
MICROPY_STACK_SIZE ?= 10240
