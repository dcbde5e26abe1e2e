# mpy-lazy board for the Raspberry Pi Pico (RP2040, 2 MB flash): stock RPI_PICO plus ulab,
# a ROMFS partition for weight containers and the frozen mpy_lazy runtime.
# Build out of tree: make -C $MPY_DIR/ports/rp2 BOARD_DIR=<this dir> USER_C_MODULES=<ulab>/code/micropython.cmake
set(PICO_BOARD "pico")
set(PICO_PLATFORM "rp2040")

# Same pin names as the stock board (read from the MicroPython checkout, not copied).
set(MICROPY_BOARD_PINS ${MICROPY_PORT_DIR}/boards/RPI_PICO/pins.csv)

set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/manifest.py)

# Frozen native (viper) code must be word aligned on the Cortex-M0+. Upstream's mpy-tool.py emits
# each frozen native function as a byte array with __attribute__((aligned (2))), but the runtime
# reads its first word (the prelude index, mp_obj_fun_native_get_prelude_ptr) with an LDR: when
# the linker puts the array at 2 mod 4, the first call of a frozen viper function faults.
# Raise every alignment in the generated frozen_content.c (and only there) to at least 4, as
# boards/qemu/MICROBIT does. This file is included by ports/rp2/CMakeLists.txt, so the property
# is set in the directory that adds frozen_content.c (py/mkrules.cmake) to the firmware target.
set_source_files_properties(${CMAKE_BINARY_DIR}/frozen_content.c PROPERTIES
    COMPILE_OPTIONS "-Daligned(n)=aligned((n) < 4 ? 4 : (n))")

# Containers frozen with `mpy-lazy freeze` stay in flash, aligned, read in place: after
# makemanifest.py writes frozen_content.c, boards/frozen_align.py gives every container's bytes
# constant its alignment (the C compiler puts a string literal at any address). The target that
# runs makemanifest.py is made by py/mkrules.cmake, later in this directory: defer until then.
cmake_language(DEFER CALL mpy_lazy_align_frozen)
function(mpy_lazy_align_frozen)
    if(TARGET BUILD_FROZEN_CONTENT)
        add_custom_command(TARGET BUILD_FROZEN_CONTENT POST_BUILD
            COMMAND ${Python3_EXECUTABLE} ${MICROPY_BOARD_DIR}/../frozen_align.py ${MICROPY_FROZEN_CONTENT}
            VERBATIM)
    endif()
endfunction()
