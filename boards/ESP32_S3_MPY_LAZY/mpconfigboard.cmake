# mpy-lazy board for ESP32-S3 modules with 8 MB flash: ESP32_GENERIC_S3 plus ulab, a ROMFS
# partition for weight containers and the frozen mpy_lazy runtime. Untested on hardware.
# Build out of tree (ESP-IDF environment active):
#   make -C $MPY_DIR/ports/esp32 BOARD_DIR=<this dir> USER_C_MODULES=<ulab>/code/micropython.cmake
set(IDF_TARGET esp32s3)

# The partition table lives in this (out-of-tree) board directory, so its path is only known
# here: write it into an sdkconfig fragment that is read after the others.
file(WRITE ${CMAKE_BINARY_DIR}/sdkconfig.mpy_lazy_partitions
    "CONFIG_PARTITION_TABLE_CUSTOM=y\nCONFIG_PARTITION_TABLE_CUSTOM_FILENAME=\"${MICROPY_BOARD_DIR}/partitions-8MiB-romfs.csv\"\n")

set(SDKCONFIG_DEFAULTS
    boards/sdkconfig.base
    boards/sdkconfig.ble
    boards/sdkconfig.spiram_sx
    ${MICROPY_BOARD_DIR}/sdkconfig.board
    ${CMAKE_BINARY_DIR}/sdkconfig.mpy_lazy_partitions
)
# firmware/esp32s3/idf_build.sh's settings for its toolchain and IDF tree (no SPIRAM without
# Espressif's GCC, ...; none of them a variant's)
if(MPY_LAZY_SDKCONFIG_EXTRA)
    list(APPEND SDKCONFIG_DEFAULTS ${MPY_LAZY_SDKCONFIG_EXTRA})
endif()

set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/manifest.py)
