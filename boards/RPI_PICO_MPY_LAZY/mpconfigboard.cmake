# mpy-lazy board for the Raspberry Pi Pico (RP2040, 2 MB flash): stock RPI_PICO plus ulab,
# a ROMFS partition for weight containers and the frozen mpy_lazy runtime.
# Build out of tree: make -C $MPY_DIR/ports/rp2 BOARD_DIR=<this dir> USER_C_MODULES=<ulab>/code/micropython.cmake
set(PICO_BOARD "pico")
set(PICO_PLATFORM "rp2040")

# Same pin names as the stock board (read from the MicroPython checkout, not copied).
set(MICROPY_BOARD_PINS ${MICROPY_PORT_DIR}/boards/RPI_PICO/pins.csv)

set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/manifest.py)
