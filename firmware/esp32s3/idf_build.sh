#!/bin/sh
# Build boards/ESP32_S3_MPY_LAZY with ESP-IDF, without network: make firmware BOARD=ESP32_S3_MPY_LAZY
# calls this (firmware/esp32.mk). docs/FIRMWARE.md "ESP-IDF firmware".
#
# IDF_PATH          the ESP-IDF tree (idf_tree.sh makes one from snapshots; a git clone with its
#                   submodules and the component manager online works too)
# IDF_PYTHON_ENV    a venv with IDF's Python requirements (idf_venv.sh)
# XTENSA_PREFIX     the toolchain (xtensa-esp32s3-elf-gcc/g++ in bin/): Espressif's, or
#                   build_toolchain.sh's IDF prefix (STEPS=idf_newlib, /opt/xtensa-idf)
# MPY_DIR ULAB_DIR MPY_LIB_DIR BUILD   as for the other boards; BOARD_VARIANT optional (NO_RADIO)
# IDF_LOCAL_COMPONENTS  directory with espressif__mdns and espressif__tinyusb (default
#                   $IDF_PATH/mpy-components, idf_tree.sh's): the component manager is then off.
set -eu
die() { echo "idf_build.sh: $*" >&2; exit 1; }
[ -n "${BUILD:-}" ] || die "BUILD is not set: the build directory"
build=$BUILD; unset BUILD   # (make would hand it on to mpy-cross's build)
[ -f "${IDF_PATH:-}/tools/idf.py" ] || die "IDF_PATH=${IDF_PATH:-} has no tools/idf.py: make one with firmware/esp32s3/idf_tree.sh"
[ -x "$IDF_PYTHON_ENV/bin/python" ] || die "IDF_PYTHON_ENV=$IDF_PYTHON_ENV has no bin/python: make it with firmware/esp32s3/idf_venv.sh"
[ -x "$XTENSA_PREFIX/bin/xtensa-esp32s3-elf-gcc" ] || die "no $XTENSA_PREFIX/bin/xtensa-esp32s3-elf-gcc: make xtensa-toolchain (or set XTENSA_PREFIX)"
[ -x "$XTENSA_PREFIX/bin/xtensa-esp32s3-elf-g++" ] || die "no $XTENSA_PREFIX/bin/xtensa-esp32s3-elf-g++: ESP-IDF compiles C++ (its cxx component): build_toolchain.sh's C++ pass"
here=$(cd "$(dirname "$0")" && pwd)
board_dir=$(cd "$here/../../boards/ESP32_S3_MPY_LAZY" && pwd)

export IDF_PATH IDF_PYTHON_ENV_PATH="$IDF_PYTHON_ENV"
export IDF_TOOLS_PATH="${IDF_TOOLS_PATH:-$IDF_PYTHON_ENV/idf-tools}"
export PATH="$IDF_PYTHON_ENV/bin:$IDF_PATH/tools:$XTENSA_PREFIX/bin:$PATH"
# IDF's constraints file comes from Espressif's server at install time; the venv's versions are
# pinned by firmware/esp32s3/idf-requirements.txt instead.
export IDF_PYTHON_CHECK_CONSTRAINTS=no

flags="${IDFPY_FLAGS:-} -D MICROPY_LIB_DIR=$MPY_LIB_DIR"
gcc="$XTENSA_PREFIX/bin/xtensa-esp32s3-elf-gcc"
# newlib as ESP-IDF needs it (build_toolchain.sh's idf_newlib step, or Espressif's toolchain)
printf '#include <newlib.h>\n#ifndef _RETARGETABLE_LOCKING\n#error\n#endif\n' |
    "$gcc" -E -x c -o /dev/null - 2>/dev/null ||
    die "$XTENSA_PREFIX's newlib is not configured for ESP-IDF (no retargetable locking): make xtensa-idf-toolchain"
# sdkconfig settings this toolchain and this IDF tree need (the board reads the file last):
mkdir -p "$build"
extra="$build/sdkconfig.idf_build"
: > "$extra"
if ! echo 'int x;' | "$gcc" -mdisable-hardware-atomics -x c -c -o /dev/null - 2>/dev/null; then
    # IDF compiles everything with this option when SPIRAM is on (the S3's S32C1I does not work
    # on PSRAM; Espressif's GCC turns atomics into calls); without it: no PSRAM.
    echo "idf_build.sh: $gcc has no -mdisable-hardware-atomics (not Espressif's GCC): building without SPIRAM"
    echo "CONFIG_SPIRAM=n" >> "$extra"
fi
if [ ! -f "$("$gcc" -print-file-name=nano.specs)" ]; then
    echo "idf_build.sh: $gcc has no nano.specs (newlib's nano build): building with CONFIG_NEWLIB_NANO_FORMAT=n"
    echo "CONFIG_NEWLIB_NANO_FORMAT=n" >> "$extra"
fi
# idf_tree.sh's settings for the components it had to substitute
[ ! -f "$IDF_PATH/sdkconfig.mpy_lazy_tree" ] || cat "$IDF_PATH/sdkconfig.mpy_lazy_tree" >> "$extra"
flags="$flags -D MPY_LAZY_SDKCONFIG_EXTRA=$extra"

user_c_modules=$ULAB_DIR/code/micropython.cmake
if [ ! -f "$MPY_DIR/lib/berkeley-db-1.xx/README" ]; then
    # The btree module needs MicroPython's lib/berkeley-db-1.xx submodule (its snapshot here
    # predates the commit v1.28.0 records); mpy-lazy does not use btree.
    echo "idf_build.sh: $MPY_DIR/lib/berkeley-db-1.xx is empty: building without the btree module"
    flags="$flags -D MICROPY_PY_BTREE=0"
fi
local_components=${IDF_LOCAL_COMPONENTS:-$IDF_PATH/mpy-components}
if [ -d "$local_components/espressif__mdns" ] && [ -d "$local_components/espressif__tinyusb" ]; then
    export IDF_COMPONENT_MANAGER=0
    # COMPONENT_DIRS: the IDF's, the packages, then MicroPython's main (discovery order is processing order:
    # main reaches into tinyusb's target, which the manager would have processed first).
    # COMPONENTS: main's requirements and the packages, nothing else (the IDF's other
    # components, unused by MicroPython, would want their submodules).
    flags="$flags -D \"COMPONENT_DIRS=$IDF_PATH/components;$local_components;$MPY_DIR/ports/esp32/main\" -D MPY_LAZY_ULAB_DIR=$ULAB_DIR"
    flags="$flags -D \"COMPONENTS=espressif__tinyusb;espressif__mdns;main\""
    user_c_modules=$here/idf_packages.cmake
fi

make -C "$MPY_DIR/mpy-cross"
# The frozen code's compiler, named, so the build does not run make in mpy-cross itself: that
# make would inherit BUILD=$build from the port's make (MAKEFLAGS) and generate mpy-cross's
# headers into the firmware's genhdr.
export MICROPY_MPYCROSS="$MPY_DIR/mpy-cross/build/mpy-cross"
# IDFPY_FLAGS from the environment: the port's Makefile appends its own (+=).
IDFPY_FLAGS="$flags" make -C "$MPY_DIR/ports/esp32" BOARD_DIR="$board_dir" BUILD="$build" \
    ${BOARD_VARIANT:+BOARD_VARIANT=$BOARD_VARIANT} USER_C_MODULES="$user_c_modules"
