#!/bin/sh
# Build a cross toolchain for the ESP32-S3's core (Xtensa LX7, windowed ABI):
# binutils 2.40 + GCC 12.2 (C, C++ with libstdc++) + newlib 3.3.0, from Debian 12's
# binutils-source / gcc-12-source / newlib-source packages, with the esp32s3 core overlay of
# espressif/xtensa-overlays copied over each tree (the way Debian's gcc-xtensa-lx106 does it for
# the ESP8266). Everything is built outside the repository.
#
#   apt-get install binutils-source gcc-12-source newlib-source libgmp-dev libmpfr-dev \
#       libmpc-dev flex bison texinfo
#   git clone https://github.com/espressif/xtensa-overlays /opt/src/xtensa-overlays
#   firmware/esp32s3/build_toolchain.sh            # then: export PATH=/opt/xtensa/bin:$PATH
#
# Variables: OVERLAYS (the xtensa-overlays checkout), PREFIX (install, /opt/xtensa),
# WORK (sources and build trees, /opt/src/xtensa-build), JOBS (2), STEPS ("binutils gcc"),
# LANGUAGES ("c,c++": C++ and libstdc++ for ESP-IDF's cxx component; "c" builds in about half
# the time and is all the bare-metal MicroPython build needs), HOST_CFLAGS ("-O1 -g0": how the
# compiler itself is compiled; GCC's default -O2 -g takes about twice as long to build).
set -eu

OVERLAYS=${OVERLAYS:-/opt/src/xtensa-overlays}
PREFIX=${PREFIX:-/opt/xtensa}
WORK=${WORK:-/opt/src/xtensa-build}
JOBS=${JOBS:-2}
STEPS=${STEPS:-binutils gcc}
LANGUAGES=${LANGUAGES:-c,c++}
HOST_CFLAGS=${HOST_CFLAGS:--O1 -g0}
TARGET=xtensa-esp32s3-elf
CORE=$OVERLAYS/xtensa_esp32s3

die() { echo "build_toolchain.sh: $*" >&2; exit 1; }
[ -d "$CORE" ] || die "no esp32s3 overlay at $CORE (set OVERLAYS to an espressif/xtensa-overlays checkout)"
for f in /usr/src/binutils/binutils-2.40.tar.xz /usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz \
         /usr/src/newlib/newlib-3.3.0.tar.xz; do
    [ -f "$f" ] || die "missing $f (apt-get install binutils-source gcc-12-source newlib-source)"
done
mkdir -p "$WORK" "$PREFIX"
export PATH="$PREFIX/bin:$PATH"

# unpack TARBALL DIR OVERLAY_SUBDIR: a fresh tree with the core's files copied over it
unpack() {
    rm -rf "$WORK/$2"
    tar -C "$WORK" -xJf "$1"
    cp -r "$CORE/$3/." "$WORK/$2/"
}

build_binutils() {
    unpack /usr/src/binutils/binutils-2.40.tar.xz binutils-2.40 binutils
    rm -rf "$WORK/b-binutils" && mkdir "$WORK/b-binutils" && cd "$WORK/b-binutils"
    CFLAGS="$HOST_CFLAGS" CXXFLAGS="$HOST_CFLAGS" ../binutils-2.40/configure --target=$TARGET --prefix="$PREFIX" --disable-nls \
        --disable-werror --disable-gdb --disable-gdbserver --disable-sim --disable-gprofng \
        --disable-libdecnumber --disable-readline
    make -j"$JOBS"
    make install
}

# GCC and newlib in one tree (newlib/ and libgloss/ linked into GCC's source): one configure
# builds the compiler, libgcc, newlib and libstdc++ in order.
build_gcc() {
    unpack /usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz gcc-12.2.0 gcc
    # Debian's tarball has no GFDL manuals: its own patch makes the build not regenerate tm.texi
    patch -d "$WORK/gcc-12.2.0" -p2 < /usr/src/gcc-12/debian/patches/gcc-gfdl-build.diff
    unpack /usr/src/newlib/newlib-3.3.0.tar.xz newlib-3.3.0 newlib
    ln -s ../newlib-3.3.0/newlib "$WORK/gcc-12.2.0/newlib"
    ln -s ../newlib-3.3.0/libgloss "$WORK/gcc-12.2.0/libgloss"
    rm -rf "$WORK/b-gcc" && mkdir "$WORK/b-gcc" && cd "$WORK/b-gcc"
    # the target libraries (libgcc, newlib, libstdc++) as GCC builds them by default
    CFLAGS="$HOST_CFLAGS" CXXFLAGS="$HOST_CFLAGS" CFLAGS_FOR_TARGET="-g -O2" CXXFLAGS_FOR_TARGET="-g -O2" \
    ../gcc-12.2.0/configure --target=$TARGET --prefix="$PREFIX" --with-newlib \
        --enable-languages="$LANGUAGES" --disable-shared --disable-threads --disable-nls \
        --disable-libssp --disable-libgomp --disable-libquadmath --disable-libatomic \
        --disable-libstdcxx-pch --disable-libstdcxx-verbose --disable-multilib \
        --enable-target-optspace --enable-newlib-io-long-long \
        --with-gnu-as --with-gnu-ld
    make -j"$JOBS"
    make install
}

for step in $STEPS; do
    echo "== $step $(date -u +%H:%M:%S)"
    "build_$step"
done
echo "== done $(date -u +%H:%M:%S): $PREFIX/bin/$TARGET-gcc"
