# ESP32-S3 (8 MB flash) firmware: boards/ESP32_S3_MPY_LAZY built out of tree against MPY_DIR's
# ports/esp32 with ESP-IDF, ulab (ULAB_DIR) as a user C module. Included by firmware/firmware.mk;
# docs/FIRMWARE.md "ESP-IDF firmware". Untested on hardware.
#
#   make esp-idf-tree [IDF_PATH=/opt/esp-idf]   an ESP-IDF tree from git snapshots (no network)
#   make esp-idf-venv [IDF_PYTHON_ENV=...]      IDF's Python tools, from PyPI, in a venv of their own
#   make xtensa-idf-toolchain [XTENSA_IDF_PREFIX=/opt/xtensa-idf]   make xtensa-toolchain's GCC with
#                                               newlib configured as Espressif's (build_toolchain.sh)
#   make firmware BOARD=ESP32_S3_MPY_LAZY MPY_DIR=... ULAB_DIR=... IDF_PATH=... [ESP32_VARIANT=NO_RADIO]
#   make flash-ESP32_S3_MPY_LAZY PORT=/dev/ttyUSB0
#   make deploy MODEL=model.mpyl PORT=/dev/ttyUSB0         (defined in firmware/rp2.mk)

ESP32_BOARD := ESP32_S3_MPY_LAZY
# NO_RADIO: without WiFi and Bluetooth (for IDF trees without Espressif's radio libraries)
ESP32_VARIANT ?=
ESP32_BUILD = $(BUILD_DIR)/esp32s3$(if $(ESP32_VARIANT),-$(ESP32_VARIANT))
IDF_PYTHON_ENV ?= /opt/esp-idf-venv
# the toolchain ESP-IDF builds with: Espressif's, or build_toolchain.sh's (XTENSA_PREFIX's GCC
# with newlib configured for ESP-IDF)
XTENSA_IDF_PREFIX ?= /opt/xtensa-idf
ESP_IDF_TESTED := v5.3.1
ESPTOOL ?= esptool.py
FIRMWARE_BOARDS += $(ESP32_BOARD)

.PHONY: firmware-$(ESP32_BOARD) flash-$(ESP32_BOARD) esp-idf-tree esp-idf-venv xtensa-idf-toolchain

esp-idf-tree:
	@[ -n "$(IDF_PATH)" ] || { echo "IDF_PATH is not set: where the tree goes (e.g. /opt/esp-idf)"; exit 1; }
	DEST=$(IDF_PATH) IDF_REF=$(ESP_IDF_TESTED) SUBST_mbedtls=Mbed-TLS+mbedtls@v3.6.0 firmware/esp32s3/idf_tree.sh

esp-idf-venv:
	IDF_PYTHON_ENV=$(IDF_PYTHON_ENV) firmware/esp32s3/idf_venv.sh

xtensa-idf-toolchain:
	STEPS=idf_newlib OVERLAYS=$(XTENSA_OVERLAYS) PREFIX=$(XTENSA_PREFIX) IDF_PREFIX=$(XTENSA_IDF_PREFIX) \
		firmware/esp32s3/build_toolchain.sh

firmware-$(ESP32_BOARD): check-mpy-dir check-ulab-dir check-mpy-lib-dir
	@[ -n "$(IDF_PATH)" ] || { echo "IDF_PATH is not set: an ESP-IDF $(ESP_IDF_TESTED) tree (make esp-idf-tree IDF_PATH=/opt/esp-idf)"; exit 1; }
	IDF_PATH=$(abspath $(IDF_PATH)) IDF_PYTHON_ENV=$(abspath $(IDF_PYTHON_ENV)) XTENSA_PREFIX=$(abspath $(XTENSA_IDF_PREFIX)) \
		MPY_DIR=$(abspath $(MPY_DIR)) ULAB_DIR=$(abspath $(ULAB_DIR)) MPY_LIB_DIR=$(abspath $(MPY_LIB_DIR)) \
		BUILD=$(ESP32_BUILD) BOARD_VARIANT=$(ESP32_VARIANT) firmware/esp32s3/idf_build.sh
	@echo "built $(ESP32_BUILD)/firmware.bin (bootloader + partition table + app, written at 0x0)"

# firmware.bin is the port's combined image; the ROMFS partition is left untouched (make deploy).
flash-$(ESP32_BOARD):
	@[ -f "$(ESP32_BUILD)/firmware.bin" ] || { echo "$(ESP32_BUILD)/firmware.bin not found: make firmware BOARD=$(ESP32_BOARD) first (or set BUILD_DIR)"; exit 1; }
	@if [ -z "$(PORT)" ] || [ "$(PORT)" = auto ]; then echo "PORT is not set: make flash-$(ESP32_BOARD) PORT=/dev/ttyUSB0"; exit 1; fi
	@command -v $(ESPTOOL) >/dev/null || { echo "$(ESPTOOL) not found: pip install esptool (or set ESPTOOL)"; exit 1; }
	$(ESPTOOL) --chip esp32s3 --port $(PORT) --baud 460800 write_flash -z 0x0 $(ESP32_BUILD)/firmware.bin
