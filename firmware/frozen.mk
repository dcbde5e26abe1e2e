# Frozen containers stay in flash (issue 12 item 1): firmware that freezes the models of
# firmware/frozen_models.py (packed by the CLI, then `mpy-lazy freeze`) into a board's firmware,
# built out of tree as the boards' own firmware is, and its test on the emulated Cortex-M0 (qemu
# MICROBIT) and Pico (rp2040js). Included by firmware/firmware.mk.
#
#   make firmware-frozen BOARD=QEMU_MICROBIT MPY_DIR=... ULAB_DIR=... MPY_LIB_DIR=...
#        -> $(BUILD_DIR)/frozen-MICROBIT/firmware.elf (MPY_LAZY_FROZEN_QEMU)
#   make firmware-frozen BOARD=RPI_PICO_MPY_LAZY MPY_DIR=<rp2 checkout> ULAB_DIR=... PICOTOOL_DIR=...
#        -> $(BUILD_DIR)/frozen-rp2/firmware.uf2 (MPY_LAZY_FROZEN_RP2)
#   make emulate-test-frozen          tests/test_firmware_frozen.py on both (part of emulate-test)
#
# The models and the generated manifests go to $(BUILD_DIR)/frozen-models (MPY_LAZY_FROZEN_MODELS).

FROZEN_MODELS = $(BUILD_DIR)/frozen-models
FROZEN_QEMU = $(BUILD_DIR)/frozen-MICROBIT/firmware.elf
FROZEN_RP2 = $(BUILD_DIR)/frozen-rp2/firmware.uf2
EMULATE_TESTS += emulate-test-frozen

.PHONY: frozen-models firmware-frozen firmware-frozen-QEMU_MICROBIT firmware-frozen-RPI_PICO_MPY_LAZY \
	emulate-test-frozen

frozen-models: $(STAMP)
	$(PY) firmware/frozen_models.py $(FROZEN_MODELS)

firmware-frozen:
	@case "$(BOARD)" in QEMU_MICROBIT|RPI_PICO_MPY_LAZY) ;; \
	*) echo "BOARD=$(BOARD): the frozen-model firmware is built for BOARD=QEMU_MICROBIT or BOARD=RPI_PICO_MPY_LAZY"; exit 1;; esac
	@$(MAKE) --no-print-directory firmware-frozen-$(BOARD)

firmware-frozen-QEMU_MICROBIT: check-mpy-dir check-ulab-dir check-mpy-lib-dir frozen-models
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	$(MAKE) -C $(MPY_DIR)/ports/qemu BOARD=MICROBIT BOARD_DIR=$(CURDIR)/boards/qemu/MICROBIT \
		BUILD=$(BUILD_DIR)/frozen-MICROBIT ULAB_DIR=$(abspath $(ULAB_DIR)) MPY_LIB_DIR=$(abspath $(MPY_LIB_DIR)) \
		FROZEN_MANIFEST=$(FROZEN_MODELS)/manifest-qemu.py
	@if [ $$(stat -c %s $(BUILD_DIR)/frozen-MICROBIT/firmware.bin) -gt 1048576 ]; then \
		echo "firmware.bin is larger than 1 MB: it overlaps the ROMFS partition at 0x100000"; exit 1; fi
	@echo "built $(FROZEN_QEMU): MPY_LAZY_FROZEN_QEMU=$(FROZEN_QEMU) MPY_LAZY_FROZEN_MODELS=$(FROZEN_MODELS)"

firmware-frozen-RPI_PICO_MPY_LAZY: check-rp2-deps frozen-models
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	picotool_DIR=$(abspath $(PICOTOOL_DIR)) CMAKE_ARGS="-DMICROPY_LIB_DIR=$(abspath $(MPY_LIB_DIR))" \
		$(MAKE) -C $(MPY_DIR)/ports/rp2 BOARD_DIR=$(CURDIR)/boards/RPI_PICO_MPY_LAZY BUILD=$(BUILD_DIR)/frozen-rp2 \
		USER_C_MODULES=$(abspath $(ULAB_DIR))/code/micropython.cmake FROZEN_MANIFEST=$(FROZEN_MODELS)/manifest-rp2.py
	python3 boards/RPI_PICO_MPY_LAZY/flash_layout.py $(FROZEN_RP2)
	@echo "built $(FROZEN_RP2): MPY_LAZY_FROZEN_RP2=$(FROZEN_RP2) MPY_LAZY_FROZEN_MODELS=$(FROZEN_MODELS)"

emulate-test-frozen: $(STAMP)
	MPY_LAZY_REQUIRE_EMULATORS=1 MPY_LAZY_FROZEN_QEMU=$${MPY_LAZY_FROZEN_QEMU:-$(FROZEN_QEMU)} \
		MPY_LAZY_FROZEN_RP2=$${MPY_LAZY_FROZEN_RP2:-$(FROZEN_RP2)} \
		MPY_LAZY_FROZEN_MODELS=$${MPY_LAZY_FROZEN_MODELS:-$(FROZEN_MODELS)} \
		$(PY) -m pytest -q tests/test_firmware_frozen.py
