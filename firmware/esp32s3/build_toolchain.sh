#!/bin/sh
# Build a cross toolchain for the ESP32-S3's core (Xtensa LX7, windowed ABI):
# binutils 2.40 + GCC 12.2 (C) from Debian 12's binutils-source / gcc-12-source packages and
# Espressif's newlib 4.3 (upstream newlib 3.3.0 has no Xtensa port), each with the esp32s3 core
# overlay of espressif/xtensa-overlays copied over its tree (the way Debian's gcc-xtensa-lx106
# does it for the ESP8266). Everything is built outside the repository.
#
#   apt-get install binutils-source gcc-12-source libgmp-dev libmpfr-dev libmpc-dev flex bison \
#       texinfo autoconf2.69 automake
#   git clone https://github.com/espressif/xtensa-overlays /opt/src/xtensa-overlays
#   git clone -b esp-4.3.0_20240322 https://github.com/espressif/newlib-esp32 /opt/src/newlib-esp32
#   firmware/esp32s3/build_toolchain.sh            # then: export PATH=/opt/xtensa/bin:$PATH
#
# Variables: OVERLAYS (the xtensa-overlays checkout), PREFIX (install, /opt/xtensa),
# WORK (sources and build trees, /opt/src/xtensa-build), JOBS (2), STEPS ("binutils gcc newlib gxx"),
# LANGUAGES ("c": the first GCC pass; libstdc++ needs newlib's headers, so C++ is the "gxx" pass
# after newlib), HOST_CFLAGS ("-O1 -g0": how the compiler itself is compiled; GCC's default
# -O2 -g takes about twice as long to build).
set -eu

OVERLAYS=${OVERLAYS:-/opt/src/xtensa-overlays}
PREFIX=${PREFIX:-/opt/xtensa}
WORK=${WORK:-/opt/src/xtensa-build}
JOBS=${JOBS:-2}
STEPS=${STEPS:-binutils gcc newlib gxx}
NEWLIB_DIR=${NEWLIB_DIR:-/opt/src/newlib-esp32}
LANGUAGES=${LANGUAGES:-c}
HOST_CFLAGS=${HOST_CFLAGS:--O1 -g0}
TARGET=xtensa-esp32s3-elf
here=$(cd "$(dirname "$0")" && pwd)
CORE=$OVERLAYS/xtensa_esp32s3

die() { echo "build_toolchain.sh: $*" >&2; exit 1; }
[ -d "$CORE" ] || die "no esp32s3 overlay at $CORE (set OVERLAYS to an espressif/xtensa-overlays checkout)"
for f in /usr/src/binutils/binutils-2.40.tar.xz /usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz; do
    [ -f "$f" ] || die "missing $f (apt-get install binutils-source gcc-12-source)"
done
mkdir -p "$WORK" "$PREFIX"
export PATH="$PREFIX/bin:$PATH"

# unpack TARBALL DIR OVERLAY_SUBDIR: a fresh tree with the core's files copied over it
unpack() {
    rm -rf "$WORK/$2" && mkdir "$WORK/$2"
    tar -C "$WORK/$2" --strip-components=1 -xJf "$1"   # Debian's newlib tarball unpacks to newlib-salsa/
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

# GCC's tree: Debian's tarball has no GFDL manuals, its own patch makes the build not regenerate
# tm.texi; ours adds Espressif's -mdisable-hardware-atomics (no S32C1I: atomic built-ins become
# calls to ESP-IDF's newlib/stdatomic.c, which IDF passes when SPIRAM is on, as S32C1I does not
# work on external RAM)
gcc_tree() {
    unpack /usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz gcc-12.2.0 gcc
    patch -d "$WORK/gcc-12.2.0" -p2 < /usr/src/gcc-12/debian/patches/gcc-gfdl-build.diff
    patch -d "$WORK/gcc-12.2.0" -p1 < "$here/gcc-disable-hardware-atomics.patch"
}

# GCC with libgcc, then newlib with that GCC.
build_gcc() {
    gcc_tree
    rm -rf "$WORK/b-gcc" && mkdir "$WORK/b-gcc" && cd "$WORK/b-gcc"
    # the target libraries (libgcc, libstdc++) as GCC builds them by default
    CFLAGS="$HOST_CFLAGS" CXXFLAGS="$HOST_CFLAGS" CFLAGS_FOR_TARGET="-g -O2" CXXFLAGS_FOR_TARGET="-g -O2" \
    ../gcc-12.2.0/configure --target=$TARGET --prefix="$PREFIX" --with-newlib \
        --enable-languages="$LANGUAGES" --disable-shared --disable-threads --disable-nls \
        --disable-libssp --disable-libgomp --disable-libquadmath --disable-libatomic \
        --disable-libstdcxx-pch --disable-libstdcxx-verbose --disable-multilib \
        --with-gnu-as --with-gnu-ld
    make -j"$JOBS"
    make install
}

# Upstream newlib 3.3.0 (Debian's newlib-source) has no Xtensa port ("Newlib does not support CPU
# xtensa"): newlib is Espressif's, espressif/newlib-esp32 at esp-4.3.0_20240322 (NEWLIB_DIR).
newlib_tree() {
    [ -f "$NEWLIB_DIR/newlib/configure.ac" ] || die "no newlib-esp32 checkout at $NEWLIB_DIR (set NEWLIB_DIR)"
    rm -rf "$WORK/newlib-esp32" && cp -r "$NEWLIB_DIR" "$WORK/newlib-esp32" && rm -rf "$WORK/newlib-esp32/.git"
    cp -r "$CORE/newlib/." "$WORK/newlib-esp32/"
    if [ ! -f "$WORK/newlib-esp32/newlib/Makefile.in" ]; then
        # a snapshot without this 6 MB generated file: made again from Makefile.am (newlib's
        # configure insists on autoconf 2.69; automake 1.16 then wants its own aclocal.m4)
        (cd "$WORK/newlib-esp32/newlib" && export AUTOCONF=autoconf2.69 AUTOM4TE=autom4te2.69 &&
         aclocal-1.16 -I . -I .. -I ../config && autoconf2.69 && automake-1.16 --foreign)
    fi
}

# newlib_make BUILD_DIR TRIPLE PREFIX CONFIGURE_OPTIONS...: configure, build and install newlib only
# (newlib-esp32's libgloss (libnosys) wants ESP-IDF's headers (<dirent.h>))
newlib_make() {
    b=$1 triple=$2 prefix=$3; shift 3
    rm -rf "$WORK/$b" && mkdir "$WORK/$b" && cd "$WORK/$b"
    ../newlib-esp32/configure --target=$triple --prefix="$prefix" "$@"
    m=
    if ! make -j"$JOBS" all-target-newlib; then
        # With a Makefile.in made by automake 1.16 the math objects libc.a takes from libm.a
        # are named a-*.o, where the Makefile's MATHOBJS_IN_LIBC still says libm_a-*.o.
        d="$WORK/$b/$triple/newlib"
        m=$(make -C "$d" -pn 2>/dev/null | sed -n 's/^MATHOBJS_IN_LIBC = //p' | head -1 | sed 's/libm_a-/a-/g')
        rm -f "$d/stamp-libc-math-objects"
        make -C "$d" MATHOBJS_IN_LIBC="$m" stamp-libc-math-objects libc.a
        make -j"$JOBS" -C "$d" MATHOBJS_IN_LIBC="$m"
    fi
    if [ -n "$m" ]; then
        make -C "$WORK/$b/$triple/newlib" install MATHOBJS_IN_LIBC="$m"
    else
        make -C "$WORK/$b/$triple/newlib" install
    fi
}

build_newlib() {
    newlib_tree
    newlib_make b-newlib $TARGET "$PREFIX" --enable-target-optspace \
        --enable-newlib-io-long-long --disable-newlib-supplied-syscalls --disable-nls
    # newlib-esp32's xtensa/config/core-isa.h, outside newlib's own build, #include_next's the
    # one an OS port provides (ESP-IDF's): for bare metal, the core's, here
    # (boards/qemu/ESP32S3 compiles with -idirafter this directory)
    mkdir -p "$PREFIX/$TARGET/core-include/xtensa/config"
    cp "$CORE/newlib/newlib/libc/sys/xtensa/include/xtensa/config/core-isa.h" \
        "$PREFIX/$TARGET/core-include/xtensa/config/"
}

# The toolchain for ESP-IDF, in a prefix of its own (IDF_PREFIX, /opt/xtensa-idf): PREFIX's
# binutils and GCC with newlib configured as Espressif's (crosstool-NG's xtensa-esp-elf): built
# for the target name xtensa-esp-elf, which selects newlib-esp32's ESP system directory
# (sys/lock.h with retargetable locks, sys/dirent.h, -D_NO_GLOB ...: configure.host's *-esp-*),
# reent-small (the layout the ESP32-S3 ROM's newlib functions use), nano malloc, iconv, C99,
# long long, float and positional printf formats, no wide orientation; and the "nano" build
# (nano-formatted I/O) as libc_nano.a/libg_nano.a with crosstool-NG's nano.specs, which IDF links
# with CONFIG_NEWLIB_NANO_FORMAT. PREFIX's newlib (the bare-metal boards') stays as it is.
IDF_PREFIX=${IDF_PREFIX:-/opt/xtensa-idf}
build_idf_newlib() {
    [ -x "$PREFIX/bin/$TARGET-gcc" ] || die "no $PREFIX/bin/$TARGET-gcc (run the binutils and gcc steps first)"
    newlib_tree
    # newlib's configure calls the tools by the target's name
    tools="$WORK/esp-elf-bin"
    rm -rf "$tools" && mkdir "$tools"
    for t in "$PREFIX/bin/$TARGET"-*; do
        ln -s "$t" "$tools/xtensa-esp-elf-${t##*/$TARGET-}"
    done
    stage="$WORK/idf-newlib-stage"
    rm -rf "$stage"
    common="--disable-nls --enable-target-optspace --disable-newlib-supplied-syscalls
        --enable-newlib-retargetable-locking --enable-newlib-reent-small --enable-newlib-nano-malloc"
    # shellcheck disable=SC2086
    PATH="$tools:$PATH" CFLAGS_FOR_TARGET="-g -Os -ffunction-sections -fdata-sections" \
        newlib_make b-idf-newlib xtensa-esp-elf "$stage/full" $common --enable-newlib-iconv \
        --enable-newlib-io-c99-formats --enable-newlib-io-long-long --enable-newlib-io-float \
        --enable-newlib-io-pos-args --disable-newlib-wide-orient
    # shellcheck disable=SC2086
    PATH="$tools:$PATH" CFLAGS_FOR_TARGET="-g -Os -ffunction-sections -fdata-sections" \
        newlib_make b-idf-newlib-nano xtensa-esp-elf "$stage/nano" $common \
        --disable-newlib-io-c99-formats --enable-newlib-nano-formatted-io --disable-newlib-wide-orient
    rm -rf "$IDF_PREFIX" && cp -a "$PREFIX" "$IDF_PREFIX"
    # its GCC links as Espressif's does by default, without Tensilica's simulator files (ESP-IDF
    # links its bootloader and its compiler checks without -specs=): a specs file in GCC's
    # library directory, read before the built-in specs, with esp-idf.specs's start files and libraries
    gcc_lib=$(dirname "$("$IDF_PREFIX/bin/$TARGET-gcc" -print-libgcc-file-name)")
    "$IDF_PREFIX/bin/$TARGET-gcc" -dumpspecs | awk -v f="$here/esp-idf.specs" '
        BEGIN { while ((getline l < f) > 0) if (l ~ /^\*/) k = l; else if (l != "" && l !~ /^#/) mine[k] = l }
        skip { skip = 0; next }
        $0 in mine { print; print mine[$0]; skip = 1; next }
        { print }' > "$gcc_lib/specs"
    t="$IDF_PREFIX/$TARGET"
    # PREFIX's newlib out (headers but the C++ ones, libraries but libstdc++/libsupc++), this one in
    find "$t/include" -mindepth 1 -maxdepth 1 ! -name c++ -exec rm -rf {} +
    rm -f "$t/lib/libc.a" "$t/lib/libg.a" "$t/lib/libm.a"
    cp -r "$stage/full/xtensa-esp-elf/include/." "$t/include/"
    cp "$stage/full/xtensa-esp-elf/lib/"*.a "$t/lib/"
    for l in c g m; do
        cp "$stage/nano/xtensa-esp-elf/lib/lib$l.a" "$t/lib/lib${l}_nano.a"
    done
    mkdir -p "$t/include/newlib-nano"
    cp "$stage/nano/xtensa-esp-elf/include/newlib.h" "$t/include/newlib-nano/"
    # crosstool-NG's nano.specs, but for the paths (this GCC has no sysroot: the nano newlib.h is
    # found next to the libraries, %s) and the lib spec (-lc_nano: the lib spec's -lc would come
    # first)
    cat > "$t/lib/nano.specs" <<'SPECS'
%rename link                nano_link
%rename link_gcc_c_sequence nano_link_gcc_c_sequence
%rename cpp_unique_options  nano_cpp_unique_options

*cpp_unique_options:
-isystem ../include/newlib-nano%s %(nano_cpp_unique_options)

*nano_libc:
-lc_nano

*lib:
-lc_nano

*link_gcc_c_sequence:
%(nano_link_gcc_c_sequence) --start-group %G %(nano_libc) --end-group

*link:
%(nano_link) %:replace-outfile(-lc -lc_nano) %:replace-outfile(-lg -lg_nano) %:replace-outfile(-lm -lm_nano)

SPECS
}

# C++: the same GCC configured for c,c++ against the installed newlib, with the options of
# Espressif's crosstool-NG sample for esp32s3 that shape the C++ runtime (target libraries with
# -mlongcalls, --enable-cxx-flags=-ffunction-sections, --enable-threads=posix: gthr-posix with weak
# pthread references, single-threaded when no pthread library is linked, as on bare metal;
# --disable-__cxa_atexit, --disable-libstdcxx-verbose). Not its --enable-libstdcxx-time=yes: that
# needs link tests, and this toolchain cannot link a test program (the xtensa-elf specs want
# Tensilica's simulator libraries; bare-metal programs link with -nostdlib), so libstdc++ keeps
# gettimeofday() for its clocks, where crosstool-NG's gets clock_gettime(). Built in its
# own tree and staged; only the C++ parts are installed (g++/c++, cc1plus, libstdc++/libsupc++ and
# their headers), so the C compiler, libgcc and newlib in PREFIX stay the ones built above.
gxx_configure() {
    CFLAGS="$HOST_CFLAGS" CXXFLAGS="$HOST_CFLAGS" \
    CFLAGS_FOR_TARGET="-g -O2 -mlongcalls" CXXFLAGS_FOR_TARGET="-g -O2 -mlongcalls" \
    ../gcc-12.2.0/configure --target=$TARGET --prefix="$1" --with-newlib \
        --enable-languages=c,c++ --disable-shared --enable-threads=posix --disable-nls \
        --disable-libssp --disable-libgomp --disable-libquadmath --disable-libatomic \
        --disable-libstdcxx-pch --disable-libstdcxx-verbose --disable-multilib \
        --enable-target-optspace --enable-cxx-flags=-ffunction-sections \
        --disable-__cxa_atexit --with-gnu-as --with-gnu-ld
}
build_gxx() {
    [ -f "$PREFIX/$TARGET/include/pthread.h" ] || die "no newlib in $PREFIX (run the newlib step first)"
    gcc_tree
    rm -rf "$WORK/b-gxx" "$WORK/gxx-stage" && mkdir "$WORK/b-gxx" && cd "$WORK/b-gxx"
    gxx_configure "$PREFIX"
    make -j"$JOBS" all-gcc all-target-libgcc all-target-libstdc++-v3
    make install-gcc install-target-libstdc++-v3 DESTDIR="$WORK/gxx-stage"
    s="$WORK/gxx-stage$PREFIX"
    for f in bin/$TARGET-g++ bin/$TARGET-c++ libexec/gcc/$TARGET/12.2.0/cc1plus; do
        install -D "$s/$f" "$PREFIX/$f"
    done
    rm -rf "$PREFIX/$TARGET/include/c++" && cp -r "$s/$TARGET/include/c++" "$PREFIX/$TARGET/include/"
    cp "$s/$TARGET/lib/"libstdc++* "$s/$TARGET/lib/"libsupc++* "$PREFIX/$TARGET/lib/"
}

# IDF_PREFIX's compilers (the drivers, cc1, cc1plus) made again from GCC's tree with our patches,
# for a toolchain built before a patch was added: the patches only add options, so the libraries
# (libgcc, libstdc++, newlib) stay as they are, and PREFIX is not touched.
build_idf_gcc() {
    [ -x "$IDF_PREFIX/bin/$TARGET-gcc" ] || die "no $IDF_PREFIX/bin/$TARGET-gcc (run the idf_newlib step first)"
    gcc_tree
    rm -rf "$WORK/b-idf-gcc" "$WORK/idf-gcc-stage" && mkdir "$WORK/b-idf-gcc" && cd "$WORK/b-idf-gcc"
    gxx_configure "$IDF_PREFIX"
    make -j"$JOBS" all-gcc
    make install-gcc DESTDIR="$WORK/idf-gcc-stage"
    s="$WORK/idf-gcc-stage$IDF_PREFIX"
    cp --remove-destination "$s/bin/$TARGET-"* "$IDF_PREFIX/bin/"
    cp -r --remove-destination "$s/libexec/." "$IDF_PREFIX/libexec/"
}

for step in $STEPS; do
    echo "== $step $(date -u +%H:%M:%S)"
    "build_$step"
done
echo "== done $(date -u +%H:%M:%S): $PREFIX/bin/$TARGET-gcc"
