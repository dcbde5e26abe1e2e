# ESP32-S3 (8 MB flash) firmware: boards/ESP32_S3_MPY_LAZY built out of tree against MPY_DIR's
# ports/esp32, with ulab (ULAB_DIR) as a user C module. Included by firmware/firmware.mk.
# Written to upstream's conventions but NOT built or run here (no xtensa toolchain): untested.
#
#   . $IDF_PATH/export.sh        (ESP-IDF v5.5.1, as MicroPython recommends)
#   make firmware BOARD=ESP32_S3_MPY_LAZY MPY_DIR=... ULAB_DIR=... [BUILD_DIR=...]
#   make flash-ESP32_S3_MPY_LAZY PORT=/dev/ttyUSB0
#   make deploy MODEL=model.mpyl PORT=/dev/ttyUSB0         (defined in firmware/rp2.mk)

ESP32_BOARD := ESP32_S3_MPY_LAZY
ESP32_BUILD = $(BUILD_DIR)/esp32s3
ESPTOOL ?= esptool.py
FIRMWARE_BOARDS += $(ESP32_BOARD)

.PHONY: firmware-$(ESP32_BOARD) flash-$(ESP32_BOARD)

firmware-$(ESP32_BOARD): check-mpy-dir check-ulab-dir check-mpy-lib-dir
	@command -v idf.py >/dev/null || { echo "idf.py not found: install ESP-IDF v5.5.1 and run '. \$$IDF_PATH/export.sh' first"; exit 1; }
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	CMAKE_ARGS="-DMICROPY_LIB_DIR=$(abspath $(MPY_LIB_DIR))" \
		$(MAKE) -C $(MPY_DIR)/ports/esp32 BOARD_DIR=$(CURDIR)/boards/$(ESP32_BOARD) BUILD=$(ESP32_BUILD) \
		USER_C_MODULES=$(abspath $(ULAB_DIR))/code/micropython.cmake
	@echo "built $(ESP32_BUILD)/firmware.bin (bootloader + partition table + app, written at 0x0)"

# firmware.bin is the port's combined image; the ROMFS partition is left untouched (make deploy).
flash-$(ESP32_BOARD):
	@[ -f "$(ESP32_BUILD)/firmware.bin" ] || { echo "$(ESP32_BUILD)/firmware.bin not found: make firmware BOARD=$(ESP32_BOARD) first (or set BUILD_DIR)"; exit 1; }
	@if [ -z "$(PORT)" ] || [ "$(PORT)" = auto ]; then echo "PORT is not set: make flash-$(ESP32_BOARD) PORT=/dev/ttyUSB0"; exit 1; fi
	@command -v $(ESPTOOL) >/dev/null || { echo "$(ESPTOOL) not found: pip install esptool (or set ESPTOOL)"; exit 1; }
	$(ESPTOOL) --chip esp32s3 --port $(PORT) --baud 460800 write_flash -z 0x0 $(ESP32_BUILD)/firmware.bin
