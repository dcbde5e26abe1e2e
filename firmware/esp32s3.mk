# The ESP32-S3's core without the chip: a toolchain and a qemu built here from reachable sources,
# and boards/qemu/ESP32S3 (upstream ports/qemu, MicroPython v1.28.0) run on qemu-system-xtensa's
# `sim` machine. Included by firmware/firmware.mk; docs/FIRMWARE.md "ESP32-S3 core in qemu".
#
#   make xtensa-toolchain                      (binutils, GCC, newlib; then qemu: ~1-2 h on 2 cores)
#   make firmware BOARD=QEMU_ESP32S3 MPY_DIR=<v1.28.0> ULAB_DIR=... [XTENSA_PREFIX=/opt/xtensa]
#   make emulate-test-xtensa                   (part of make emulate-test)
#   make tflm-esp32s3 ESP_TFLITE_MICRO_DIR=... ESP_NN_DIR=...   (TFLM + esp-nn for the core; needs g++)
#   make bench-xtensa MLPERF_TINY_DIR=...      (mpy-lazy and that TFLM on MLPerf Tiny, one table)

XTENSA_PREFIX ?= /opt/xtensa
XTENSA_OVERLAYS ?= /opt/src/xtensa-overlays
XTENSA_GCC := $(XTENSA_PREFIX)/bin/xtensa-esp32s3-elf-gcc
QEMU_SYSTEM_XTENSA ?= $(XTENSA_PREFIX)/bin/qemu-system-xtensa
MPY_ESP32S3_TESTED := v1.28.0
ESP_TFLITE_MICRO_DIR ?= /opt/src/esptflm/esp-tflite-micro
ESP_NN_DIR ?= /opt/src/esptflm/esp-nn
TFLM_ESP32S3_ELF ?= $(BUILD_DIR)/tflm-esp32s3/tflm_esp32s3.elf
FIRMWARE_BOARDS += QEMU_ESP32S3
EMULATE_TESTS += emulate-test-xtensa

.PHONY: xtensa-toolchain firmware-QEMU_ESP32S3 emulate-test-xtensa tflm-esp32s3 bench-xtensa

xtensa-toolchain:
	OVERLAYS=$(XTENSA_OVERLAYS) PREFIX=$(XTENSA_PREFIX) firmware/esp32s3/build_toolchain.sh
	OVERLAYS=$(XTENSA_OVERLAYS) PREFIX=$(XTENSA_PREFIX) firmware/esp32s3/build_qemu.sh

firmware-QEMU_ESP32S3: check-mpy-dir check-ulab-dir check-mpy-lib-dir
	@[ -x $(XTENSA_GCC) ] || { echo "$(XTENSA_GCC) not found: make xtensa-toolchain (or set XTENSA_PREFIX)"; exit 1; }
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	$(MAKE) -C $(MPY_DIR)/ports/qemu BOARD=ESP32S3 BOARD_DIR=$(CURDIR)/boards/qemu/ESP32S3 \
		BUILD=$(BUILD_DIR)/qemu-ESP32S3 CROSS_COMPILE=$(XTENSA_PREFIX)/bin/xtensa-esp32s3-elf- XTENSA_PREFIX=$(XTENSA_PREFIX) \
		ULAB_DIR=$(abspath $(ULAB_DIR)) MPY_LIB_DIR=$(abspath $(MPY_LIB_DIR))
	@echo "built $(BUILD_DIR)/qemu-ESP32S3/firmware.elf: MICROPY_QEMU_FIRMWARE=$(BUILD_DIR)/qemu-ESP32S3/firmware.elf MICROPY_QEMU_BOARD=ESP32S3"

emulate-test-xtensa: $(STAMP)
	@echo "== qemu ESP32S3 (xtensa): $(BUILD_DIR)/qemu-ESP32S3/firmware.elf"
	MPY_LAZY_REQUIRE_EMULATORS=1 MICROPY_QEMU_BOARD=ESP32S3 QEMU_SYSTEM_XTENSA=$(QEMU_SYSTEM_XTENSA) \
		MICROPY_QEMU_FIRMWARE=$(BUILD_DIR)/qemu-ESP32S3/firmware.elf MPY_LAZY_XTENSA_PREFIX=$(XTENSA_PREFIX) \
		$(PY) -m pytest -q tests/test_xtensa_core.py tests/test_firmware_qemu.py
	@if [ -f $(TFLM_ESP32S3_ELF) ]; then \
		MPY_LAZY_REQUIRE_EMULATORS=1 TFLM_ESP32S3_ELF=$(TFLM_ESP32S3_ELF) MPY_LAZY_XTENSA_PREFIX=$(XTENSA_PREFIX) \
			$(PY) -m pytest -q tests/test_tflm_esp32s3.py; \
	else echo "tests/test_tflm_esp32s3.py not run: no $(TFLM_ESP32S3_ELF) (make tflm-esp32s3)"; fi

# TFLite Micro as Espressif ships it (esp-tflite-micro + esp-nn), bare metal for the core, out of
# tree from checkouts you made (firmware/esp32s3/tflm/Makefile; docs/FIRMWARE.md)
tflm-esp32s3:
	nice $(MAKE) -C firmware/esp32s3/tflm -j2 ESP_TFLITE_MICRO_DIR=$(ESP_TFLITE_MICRO_DIR) ESP_NN_DIR=$(ESP_NN_DIR) \
		XTENSA_PREFIX=$(XTENSA_PREFIX) BUILD=$(dir $(TFLM_ESP32S3_ELF))

bench-xtensa: $(STAMP)
	MICROPY_QEMU_FIRMWARE=$${MICROPY_QEMU_FIRMWARE:-$(BUILD_DIR)/qemu-ESP32S3/firmware.elf} \
		QEMU_SYSTEM_XTENSA=$(QEMU_SYSTEM_XTENSA) $(PY) bench/xtensa.py --peer $(TFLM_ESP32S3_ELF)
