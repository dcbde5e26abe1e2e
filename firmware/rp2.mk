# Raspberry Pi Pico (RP2040) firmware: boards/RPI_PICO_MPY_LAZY built out of tree against
# MPY_DIR's ports/rp2, with ulab (ULAB_DIR) as a user C module. Included by firmware/firmware.mk.
#
#   make firmware BOARD=RPI_PICO_MPY_LAZY MPY_DIR=... ULAB_DIR=... PICOTOOL_DIR=... [BUILD_DIR=...]
#   make flash-RPI_PICO_MPY_LAZY [PICO_DRIVE=/media/$USER/RPI-RP2]
#   make deploy MODEL=model.mpyl [PORT=/dev/ttyACM0]       (any board with a ROMFS partition)
#   make emulate-test-rp2 [MPY_LAZY_RP2_UF2=...]           (rp2040js; needs node and npm): the runtime
#                         tests on the emulated Pico, and the real mpremote against it over a pty
#   make firmware BOARD=RPI_PICO MPY_DIR=... PICOTOOL_DIR=...  upstream's stock Pico firmware, in
#                         BUILD_DIR/rp2-stock; make emulate-test-stock-rp2 [MPY_LAZY_STOCK_RP2_UF2=...]
#                         installs the runtime on it with mpremote mip and runs KWS (tests/test_stock_rp2.py)
#
# MPY_DIR must be a MicroPython v1.28.0 checkout (not the v1.29-preview one of the qemu boards:
# its ports/rp2 wants pico-sdk 2.3.0) with lib/pico-sdk, lib/tinyusb, lib/mbedtls and
# lib/micropython-lib populated (the versions its git submodules pin). pico-sdk 2.x wants an installed picotool: build it from its
# source with -DPICOTOOL_NO_LIBUSB=1 (enough for the build) and give the directory holding
# picotoolConfig.cmake as PICOTOOL_DIR; without it the SDK would try to clone picotool.

RP2_BOARD := RPI_PICO_MPY_LAZY
RP2_TESTED := v1.28.0 (pico-sdk 2.2.0, tinyusb 0.19.0-24-gaa0fc2e08, picotool 2.2.0)
RP2_BUILD = $(BUILD_DIR)/rp2
RP2_UF2 = $(RP2_BUILD)/firmware.uf2
FIRMWARE_BOARDS += $(RP2_BOARD)
EMULATE_TESTS += emulate-test-rp2
MODEL_ROMFS := build/weights.romfs
PORT ?= auto

# Upstream's own RPI_PICO (no ulab, nothing of ours frozen, no ROMFS partition): what a stock
# Pico runs; tests/test_stock_rp2.py installs the runtime on it as the README says.
RP2_STOCK_BUILD = $(BUILD_DIR)/rp2-stock
RP2_STOCK_UF2 = $(RP2_STOCK_BUILD)/firmware.uf2
FIRMWARE_BOARDS += RPI_PICO
EMULATE_TESTS += emulate-test-stock-rp2

.PHONY: firmware-$(RP2_BOARD) firmware-RPI_PICO flash-$(RP2_BOARD) deploy emulate-test-rp2 emulate-test-stock-rp2 \
	check-rp2-deps check-rp2-sdk

check-rp2-deps: check-ulab-dir check-mpy-lib-dir check-rp2-sdk

check-rp2-sdk: check-mpy-dir
	@command -v arm-none-eabi-gcc >/dev/null || { echo "arm-none-eabi-gcc not found: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi cmake"; exit 1; }
	@for d in pico-sdk tinyusb mbedtls; do [ -n "$$(ls -A $(MPY_DIR)/lib/$$d 2>/dev/null)" ] || \
		{ echo "$(MPY_DIR)/lib/$$d is empty: populate the submodule (tested: $(RP2_TESTED))"; exit 1; }; done
	@if [ -z "$(PICOTOOL_DIR)" ] || [ ! -f "$(PICOTOOL_DIR)/picotoolConfig.cmake" ]; then \
		echo "PICOTOOL_DIR is not set or has no picotoolConfig.cmake: build picotool 2.2.0 with"; \
		echo "  cmake -S picotool -B picotool/build -DPICOTOOL_NO_LIBUSB=1 -DPICOTOOL_FLAT_INSTALL=1 -DCMAKE_INSTALL_PREFIX=/opt/picotool"; \
		echo "  (PICO_SDK_PATH=$(MPY_DIR)/lib/pico-sdk), make install, then PICOTOOL_DIR=/opt/picotool/picotool"; exit 1; fi

# mpy-cross is built first on its own: left to the port's CMake it would inherit BUILD= from
# this make's command line and build into the firmware's build directory.
# MICROPY_LIB_DIR goes through CMAKE_ARGS in the environment: the port's Makefile appends to it
# (CMAKE_ARGS on the make command line would replace the board, module and manifest options).
firmware-$(RP2_BOARD): check-rp2-deps
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	picotool_DIR=$(abspath $(PICOTOOL_DIR)) CMAKE_ARGS="-DMICROPY_LIB_DIR=$(abspath $(MPY_LIB_DIR))" \
		$(MAKE) -C $(MPY_DIR)/ports/rp2 BOARD_DIR=$(CURDIR)/boards/$(RP2_BOARD) BUILD=$(RP2_BUILD) \
		USER_C_MODULES=$(abspath $(ULAB_DIR))/code/micropython.cmake
	python3 boards/$(RP2_BOARD)/flash_layout.py $(RP2_UF2)
	@echo "built $(RP2_UF2) (+ firmware.elf): MPY_LAZY_RP2_UF2=$(RP2_UF2)"

firmware-RPI_PICO: check-rp2-sdk
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	picotool_DIR=$(abspath $(PICOTOOL_DIR)) $(MAKE) -C $(MPY_DIR)/ports/rp2 BOARD=RPI_PICO BUILD=$(RP2_STOCK_BUILD)
	@echo "built $(RP2_STOCK_UF2): MPY_LAZY_STOCK_RP2_UF2=$(RP2_STOCK_UF2)"

# Copy to the BOOTSEL drive when PICO_DRIVE is given, else picotool (needs a libusb build of it).
flash-$(RP2_BOARD):
	@[ -f "$(RP2_UF2)" ] || { echo "$(RP2_UF2) not found: make firmware BOARD=$(RP2_BOARD) first (or set BUILD_DIR)"; exit 1; }
	@if [ -n "$(PICO_DRIVE)" ]; then \
		[ -f "$(PICO_DRIVE)/INFO_UF2.TXT" ] || { echo "PICO_DRIVE=$(PICO_DRIVE) is not a mounted RPI-RP2 drive (no INFO_UF2.TXT): hold BOOTSEL while plugging in"; exit 1; }; \
		cp $(RP2_UF2) $(PICO_DRIVE)/ && sync && echo "copied to $(PICO_DRIVE)"; \
	elif command -v picotool >/dev/null; then picotool load -x $(RP2_UF2); \
	else echo "set PICO_DRIVE to the mounted RPI-RP2 drive, or put a picotool built with libusb on PATH"; exit 1; fi

# Pack MODEL (one or more containers) into an aligned ROMFS image and write it to the board's
# ROMFS partition; the board mounts it at /rom after a reset.
deploy: $(STAMP)
	@[ -n "$(MODEL)" ] || { echo "MODEL is not set: make deploy MODEL=model.mpyl [PORT=/dev/ttyACM0]"; exit 1; }
	@mkdir -p $(dir $(MODEL_ROMFS))
	$(VENV)/bin/mpy-lazy romfs $(MODEL) -o $(MODEL_ROMFS)
	$(VENV)/bin/mpremote connect $(PORT) romfs deploy $(MODEL_ROMFS)

# MPY_CROSS (default: MPY_DIR's): the runtime tests go to the board as .mpy; compiled there,
# test_kernels does not fit the Pico's heap.
emulate-test-rp2: $(STAMP)
	MPY_LAZY_REQUIRE_EMULATORS=1 MPY_LAZY_RP2_UF2=$${MPY_LAZY_RP2_UF2:-$(RP2_UF2)} \
		MPY_CROSS=$${MPY_CROSS:-$(MPY_DIR)/mpy-cross/build/mpy-cross} \
		$(PY) -m pytest -q tests/test_firmware_rp2.py tests/test_mpremote_rp2.py

emulate-test-stock-rp2: $(STAMP)
	MPY_LAZY_REQUIRE_EMULATORS=1 MPY_LAZY_STOCK_RP2_UF2=$${MPY_LAZY_STOCK_RP2_UF2:-$(RP2_STOCK_UF2)} \
		$(PY) -m pytest -q tests/test_stock_rp2.py
