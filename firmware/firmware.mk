# Firmware targets, included by the root Makefile. Upstream code is never fetched here: point
# MPY_DIR / ULAB_DIR / MPY_LIB_DIR at checkouts you made (see docs/FIRMWARE.md).
#
#   make firmware-help
#   make firmware BOARD=QEMU_MICROBIT MPY_DIR=... ULAB_DIR=...   -> $(BUILD_DIR)/qemu-MICROBIT/
#   make unix-ulab MPY_DIR=... ULAB_DIR=...                      -> $(BUILD_DIR)/unix-ulab/micropython
#   make emulate-test                                            (fails if an emulator is missing)
#
# Shared with firmware/rp2.mk and firmware/esp32.mk: MPY_DIR, ULAB_DIR, MPY_LIB_DIR, BUILD_DIR.
# They add their boards to FIRMWARE_BOARDS, define firmware-<BOARD>, and may add targets to
# EMULATE_TESTS (run by `make emulate-test`).

MPY_TESTED := v1.29.0-preview-731-g1c3c201149
ULAB_TESTED := 6.12 (d161443)
MPY_LIB_TESTED := v1.28.0-74-gee4bb8ff
TFLM_PICO_TESTED := raspberrypi/pico-tflmicro dfea53b9
MLPERF_TINY_TESTED := 1afd2c982

BUILD_DIR ?= $(CURDIR)/build
MPY_LIB_DIR ?= $(MPY_DIR)/lib/micropython-lib
QEMU_BOARDS := MPS2_AN385 MICROBIT
FIRMWARE_BOARDS := $(addprefix QEMU_,$(QEMU_BOARDS))
EMULATE_TESTS :=

-include firmware/rp2.mk
-include firmware/esp32.mk
-include firmware/esp32s3.mk
-include firmware/frozen.mk

.PHONY: firmware-help firmware flash unix-ulab emulate-test emulate-test-qemu emulate-demo bench-emulated tflm-pico \
	check-mpy-dir check-ulab-dir check-mpy-lib-dir $(addprefix firmware-,$(FIRMWARE_BOARDS))

firmware-help:
	@echo "make firmware BOARD=<board>  build a firmware; boards: $(FIRMWARE_BOARDS)"
	@echo "make flash BOARD=<board>     write it to a board: RPI_PICO_MPY_LAZY ESP32_S3_MPY_LAZY"
	@echo "make deploy MODEL=m.mpyl     mpy-lazy romfs + mpremote romfs deploy [PORT=/dev/ttyACM0]"
	@echo "make unix-ulab               MicroPython unix port with ulab (-> MICROPYTHON_ULAB)"
	@echo "make emulate-test            run the firmware tests in emulators; a missing one fails"
	@echo "make emulate-demo            digits + MLPerf Tiny int8 models on the emulated boards [EMULATE_DEMO_ARGS=--full]"
	@echo "make bench-emulated          mpy-lazy against TFLite Micro (C++) on the emulated Pico, then cycles per MAC"
	@echo "                             of each kernel path and model (TFLM_PICO_UF2: the TFLM firmware, default"
	@echo "                             BUILD_DIR/tflm-pico/tflm_pico.uf2; MLPERF_TINY_DIR: mlcommons/tiny checkout"
	@echo "                             [$(MLPERF_TINY_TESTED)]; PICO_TFLMICRO_DIR: person_detect's source)"
	@echo "make tflm-pico               TFLite Micro for the emulated Pico (firmware/tflm_pico) -> BUILD_DIR/tflm-pico/"
	@echo "                             tflm_pico.uf2; needs PICO_TFLMICRO_DIR [$(TFLM_PICO_TESTED)], PICO_SDK_PATH"
	@echo "                             [pico-sdk 2.2.0], PICOTOOL_DIR"
	@echo "build variables (none is fetched; tested versions in brackets):"
	@echo "  MPY_DIR       MicroPython checkout: qemu boards and unix-ulab [$(MPY_TESTED)];"
	@echo "                RPI_PICO_MPY_LAZY needs its own checkout [$(RP2_TESTED)]"
	@echo "                with lib/pico-sdk lib/tinyusb lib/mbedtls lib/micropython-lib populated"
	@echo "  ULAB_DIR      micropython-ulab checkout [$(ULAB_TESTED)]"
	@echo "  MPY_LIB_DIR   micropython-lib checkout, default MPY_DIR/lib/micropython-lib [$(MPY_LIB_TESTED)]"
	@echo "  PICOTOOL_DIR  RPI_PICO_MPY_LAZY: the directory holding picotoolConfig.cmake of an installed"
	@echo "                picotool 2.2.0 (built with -DPICOTOOL_NO_LIBUSB=1; docs/FIRMWARE.md)"
	@echo "  BUILD_DIR     build output, default $(CURDIR)/build (now: $(BUILD_DIR))"
	@echo "emulator variables (make emulate-test / emulate-demo and tests/test_firmware_*.py; default: BUILD_DIR's builds):"
	@echo "  MPY_LAZY_RP2_UF2       the Pico firmware for rp2040js (BUILD_DIR/rp2/firmware.uf2); needs node + npm"
	@echo "  MPY_LAZY_STOCK_RP2_UF2 upstream's stock RPI_PICO firmware (BUILD_DIR/rp2-stock/firmware.uf2): tests/test_stock_rp2.py"
	@echo "  MICROPY_QEMU_FIRMWARE  a qemu board's firmware.elf (BUILD_DIR/qemu-<BOARD>/firmware.elf),"
	@echo "  MICROPY_QEMU_BOARD     with its board: MPS2_AN385 (default) or MICROBIT; needs qemu-system-arm"
	@echo "  MPY_LAZY_REQUIRE_EMULATORS=1  a missing firmware or emulator fails the tests (emulate-test sets it)"
	@echo "  MPY_CROSS              mpy-cross of the firmware's checkout (default MPY_DIR's): the runtime tests go to the"
	@echo "                         board precompiled (the M0 and Pico run out of heap compiling test_kernels)"
	@echo "ESP32-S3 core in qemu (firmware/esp32s3.mk; docs/FIRMWARE.md):"
	@echo "  make xtensa-toolchain  binutils + GCC + newlib and qemu-system-xtensa for the core -> XTENSA_PREFIX"
	@echo "                         [$(XTENSA_PREFIX)], from Debian's source packages and XTENSA_OVERLAYS"
	@echo "                         (espressif/xtensa-overlays, [$(XTENSA_OVERLAYS)])"
	@echo "  QEMU_ESP32S3           make firmware BOARD=QEMU_ESP32S3 MPY_DIR=<MicroPython $(MPY_ESP32S3_TESTED)> ULAB_DIR=..."
	@echo "  QEMU_SYSTEM_XTENSA     that qemu (default XTENSA_PREFIX/bin/qemu-system-xtensa); MICROPY_QEMU_BOARD=ESP32S3"
	@echo "  MPY_LAZY_XTENSA_PREFIX the toolchain for tests/test_xtensa_core.py (make emulate-test-xtensa sets it)"
	@echo "  make tflm-esp32s3      TFLite Micro + esp-nn for the core (firmware/esp32s3/tflm) -> TFLM_ESP32S3_ELF"
	@echo "                         [BUILD_DIR/tflm-esp32s3/tflm_esp32s3.elf]; ESP_TFLITE_MICRO_DIR, ESP_NN_DIR: checkouts"
	@echo "  make bench-xtensa      MLPerf Tiny on the core: mpy-lazy against that TFLM, instructions per inference"
	@echo "ESP32_S3_MPY_LAZY with ESP-IDF (firmware/esp32.mk; docs/FIRMWARE.md \"ESP-IDF firmware\"):"
	@echo "  make xtensa-idf-toolchain  XTENSA_PREFIX's GCC with newlib for ESP-IDF -> XTENSA_IDF_PREFIX [$(XTENSA_IDF_PREFIX)]"
	@echo "  MPY_LAZY_XTENSA_IDF_PREFIX that toolchain for tests/test_xtensa_idf_toolchain.py"
	@echo "  make esp-idf-tree      ESP-IDF $(ESP_IDF_TESTED) + submodules from git snapshots -> IDF_PATH (no network)"
	@echo "  make esp-idf-venv      IDF's Python tools from PyPI -> IDF_PYTHON_ENV [$(IDF_PYTHON_ENV)]"
	@echo "  IDF_PATH, ESP32_VARIANT make firmware BOARD=ESP32_S3_MPY_LAZY IDF_PATH=... [ESP32_VARIANT=NO_RADIO]"
	@echo "  MPY_LAZY_ESP32_BUILD   that build (BUILD_DIR/esp32s3[-VARIANT]) for tests/test_esp32_firmware.py"

firmware:
	@if [ -z "$(BOARD)" ]; then echo "BOARD is not set: one of $(FIRMWARE_BOARDS)"; exit 1; fi
	@case " $(FIRMWARE_BOARDS) " in *" $(BOARD) "*) ;; \
	*) echo "BOARD=$(BOARD) is unknown: one of $(FIRMWARE_BOARDS)"; exit 1;; esac
	@$(MAKE) --no-print-directory firmware-$(BOARD)

# rp2.mk / esp32.mk define flash-<BOARD> for the boards that have real hardware.
flash:
	@if [ -z "$(BOARD)" ]; then echo "BOARD is not set: one of RPI_PICO_MPY_LAZY ESP32_S3_MPY_LAZY"; exit 1; fi
	@case "$(BOARD)" in RPI_PICO_MPY_LAZY|ESP32_S3_MPY_LAZY) ;; \
	*) echo "BOARD=$(BOARD) cannot be flashed: one of RPI_PICO_MPY_LAZY ESP32_S3_MPY_LAZY (qemu boards run in the emulator)"; exit 1;; esac
	@$(MAKE) --no-print-directory flash-$(BOARD)

check-mpy-dir:
	@if [ -z "$(MPY_DIR)" ]; then echo "MPY_DIR is not set: point it at a MicroPython checkout (tested: $(MPY_TESTED))"; exit 1; fi
	@if [ ! -f "$(MPY_DIR)/py/mpconfig.h" ]; then echo "MPY_DIR=$(MPY_DIR) is not a MicroPython checkout (no py/mpconfig.h)"; exit 1; fi

check-ulab-dir:
	@if [ -z "$(ULAB_DIR)" ]; then echo "ULAB_DIR is not set: point it at a micropython-ulab checkout (tested: $(ULAB_TESTED))"; exit 1; fi
	@if [ ! -f "$(ULAB_DIR)/code/micropython.mk" ]; then echo "ULAB_DIR=$(ULAB_DIR) is not a micropython-ulab checkout (no code/micropython.mk)"; exit 1; fi

# The port's frozen-manifest step insists on a micropython-lib checkout, even though the
# mpy-lazy manifests use nothing from it.
check-mpy-lib-dir: check-mpy-dir
	@if [ ! -f "$(MPY_LIB_DIR)/README.md" ]; then echo "MPY_LIB_DIR=$(MPY_LIB_DIR) is not a micropython-lib checkout: run 'git submodule update --init lib/micropython-lib' in MPY_DIR or set MPY_LIB_DIR (tested: $(MPY_LIB_TESTED))"; exit 1; fi

# qemu boards: upstream ports/qemu built out of tree with our board dirs (boards/qemu/<BOARD>).
# MICROBIT: the firmware image must end below the ROMFS partition at 0x100000.
$(addprefix firmware-QEMU_,$(QEMU_BOARDS)): firmware-QEMU_%: check-mpy-dir check-ulab-dir check-mpy-lib-dir
	@command -v arm-none-eabi-gcc >/dev/null || { echo "arm-none-eabi-gcc not found: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi"; exit 1; }
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	$(MAKE) -C $(MPY_DIR)/ports/qemu BOARD=$* BOARD_DIR=$(CURDIR)/boards/qemu/$* \
		BUILD=$(BUILD_DIR)/qemu-$* ULAB_DIR=$(abspath $(ULAB_DIR)) MPY_LIB_DIR=$(abspath $(MPY_LIB_DIR))
	@# qemu boots MICROBIT from the raw image (firmware/qemu_run.py); MicroPython 1.28's qemu port
	@# does not write one (the 1.29 preview's does): made here from the ELF either way.
	@if [ "$*" = MICROBIT ]; then \
		arm-none-eabi-objcopy -O binary $(BUILD_DIR)/qemu-$*/firmware.elf $(BUILD_DIR)/qemu-$*/firmware.bin || exit 1; \
		if [ $$(stat -c %s $(BUILD_DIR)/qemu-$*/firmware.bin) -gt 1048576 ]; then \
		echo "firmware.bin is larger than 1 MB: it overlaps the ROMFS partition at 0x100000"; exit 1; fi; fi
	@echo "built $(BUILD_DIR)/qemu-$*/firmware.elf: MICROPY_QEMU_FIRMWARE=$(BUILD_DIR)/qemu-$*/firmware.elf MICROPY_QEMU_BOARD=$*"

# The unix port with ulab (double-precision floats). Features needing git submodules are off.
unix-ulab: check-mpy-dir check-ulab-dir
	$(MAKE) -C $(MPY_DIR)/mpy-cross
	$(MAKE) -C $(MPY_DIR)/ports/unix BUILD=$(BUILD_DIR)/unix-ulab USER_C_MODULES=$(abspath $(ULAB_DIR)) \
		FROZEN_MANIFEST= MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 MICROPY_SSL_AXTLS=0 \
		MICROPY_SSL_MBEDTLS=0 MICROPY_PY_FFI=0 STRIP=:
	@echo "built: export MICROPYTHON_ULAB=$(BUILD_DIR)/unix-ulab/micropython"

# Each qemu board's tests in its own pytest run: the board is chosen by the environment.
emulate-test-qemu: $(STAMP)
	@status=0; for b in $(QEMU_BOARDS); do \
		echo "== qemu $$b: $(BUILD_DIR)/qemu-$$b/firmware.elf"; \
		MPY_LAZY_REQUIRE_EMULATORS=1 MICROPY_QEMU_BOARD=$$b \
		MICROPY_QEMU_FIRMWARE=$(BUILD_DIR)/qemu-$$b/firmware.elf \
		$(PY) -m pytest -q tests/test_firmware_qemu.py || status=1; \
	done; exit $$status

emulate-test: emulate-test-qemu $(EMULATE_TESTS)

# The digits demo's models on every emulated board whose firmware is in BUILD_DIR (others are
# skipped with a reason; EMULATE_DEMO_ARGS=--require-all makes that an error, --full runs all
# test images on rp2040js too).
# The scripts skip a board they cannot run; when none can, this fails first (their own
# "no emulated board to run" path exits 0).
emulate-demo: $(STAMP)
	@$(PY) -c "import sys; sys.path.insert(0, '.'); from firmware.emulate_digits import boards, missing; \
	sys.exit(0 if [b for b in boards('$(BUILD_DIR)') if not missing(b[1], b[2])] else \
	'make emulate-demo: no emulated board can run (no firmware in BUILD_DIR=$(BUILD_DIR), or no emulator): see make firmware-help')"
	$(PY) firmware/emulate_digits.py --build-dir $(BUILD_DIR) $(EMULATE_DEMO_ARGS)
	$(PY) firmware/emulate_models.py --build-dir $(BUILD_DIR)

# mpy-lazy against TFLite Micro's C++ on the same .tflite files (TFLM_PICO_UF2, PICO_TFLMICRO_DIR or
# PERSON_DETECT_TFLITE from the environment), then cycles per multiply-accumulate of every int8
# kernel path on the emulated Pico (deterministic).
bench-emulated: $(STAMP)
	MPY_LAZY_RP2_UF2=$${MPY_LAZY_RP2_UF2:-$(BUILD_DIR)/rp2/firmware.uf2} \
		TFLM_PICO_UF2=$${TFLM_PICO_UF2:-$(BUILD_DIR)/tflm-pico/tflm_pico.uf2} $(PY) bench/emulated.py

# TFLite Micro for the emulated Pico, the peer of bench-emulated (firmware/tflm_pico/NOTES.md): built
# out of tree by bench/tflm_pico_build.py from checkouts you made (PICO_TFLMICRO_DIR, PICO_SDK_PATH,
# PICOTOOL_DIR; docs/FIRMWARE.md). TFLM_PICO_DUAL_CORE=1: the shipped dual-core matmul (a real Pico).
tflm-pico: $(STAMP)
	PICO_TFLMICRO_DIR=$(PICO_TFLMICRO_DIR) PICO_SDK_PATH=$(PICO_SDK_PATH) PICOTOOL_DIR=$(PICOTOOL_DIR) \
		$(PY) bench/tflm_pico_build.py --build-dir $(BUILD_DIR)/tflm-pico$(if $(TFLM_PICO_DUAL_CORE),-dual --dual-core)
