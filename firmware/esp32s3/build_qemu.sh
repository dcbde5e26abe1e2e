#!/bin/sh
# Build qemu-system-xtensa with the ESP32-S3's core ("esp32s3": Xtensa LX7, windowed ABI, FPU)
# imported from espressif/xtensa-overlays, from Debian 12's qemu source package (7.2).
# The import does what QEMU's target/xtensa/import_core.sh does with an overlay archive, from
# the overlay's files directly (it has no core-matmap.h, like QEMU's own lx106 core).
#
#   apt-get install ninja-build meson libglib2.0-dev libpixman-1-dev pkg-config
#   apt-get source --download-only qemu      # with a deb-src line for bookworm main
#   firmware/esp32s3/build_qemu.sh           # -> /opt/xtensa/bin/qemu-system-xtensa -cpu esp32s3
#
# Variables: QEMU_ORIG (the .orig.tar.xz), OVERLAYS, PREFIX (/opt/xtensa),
# WORK (/opt/src/qemu-xtensa), JOBS (2). Debian's tarball has no firmware blobs: none are installed.
set -eu

QEMU_ORIG=${QEMU_ORIG:-/opt/src/deb/qemu_7.2+dfsg.orig.tar.xz}
OVERLAYS=${OVERLAYS:-/opt/src/xtensa-overlays}
PREFIX=${PREFIX:-/opt/xtensa}
WORK=${WORK:-/opt/src/qemu-xtensa}
JOBS=${JOBS:-2}
NAME=esp32s3
CORE=$OVERLAYS/xtensa_$NAME
FREQ_KHZ=240000   # the ESP32-S3's CPU clock: CCOUNT and the timers run at it

die() { echo "build_qemu.sh: $*" >&2; exit 1; }
[ -f "$QEMU_ORIG" ] || die "no QEMU source at $QEMU_ORIG (apt-get source --download-only qemu)"
[ -d "$CORE" ] || die "no esp32s3 overlay at $CORE (set OVERLAYS)"

rm -rf "$WORK" && mkdir -p "$WORK/src"
tar -C "$WORK/src" --strip-components=1 -xJf "$QEMU_ORIG"
X="$WORK/src/target/xtensa"
T="$X/core-$NAME"
mkdir -p "$T"
cp "$CORE/newlib/newlib/libc/sys/xtensa/include/xtensa/config/core-isa.h" "$T/"
# the same edits as import_core.sh
sed -n '1,/*\//p;/XTREG/,/XTREG_END/p' "$CORE/gdb/gdb/xtensa-config.c" > "$T/gdb-config.c.inc"
sed -e 's/^\(xtensa_opcode_encode_fn.*\[\] =\)/static \1/' \
    -e '/^int num_bypass_groups()/,/}/d' \
    -e '/^int num_bypass_group_chunks()/,/}/d' \
    -e '/^uint32 \*bypass_entry(int i)/,/}/d' \
    -e '/^#include "ansidecl.h"/d' \
    -e '/^Slot_[a-zA-Z0-9_]\+_decode (const xtensa_insnbuf insn)/,/^}/s/^  return 0;$/  return XTENSA_UNDEFINED;/' \
    -e 's/#include <xtensa-isa.h>/#include "xtensa-isa.h"/' \
    -e 's/^\(xtensa_isa_internal xtensa_modules\)/static \1/' \
    "$CORE/binutils/bfd/xtensa-modules.c" > "$T/xtensa-modules.c.inc"
cat > "$X/core-$NAME.c" <<EOC
#include "qemu/osdep.h"
#include "cpu.h"
#include "exec/gdbstub.h"
#include "qemu/host-utils.h"

#include "core-$NAME/core-isa.h"
#include "overlay_tool.h"

#define xtensa_modules xtensa_modules_$NAME
#include "core-$NAME/xtensa-modules.c.inc"

static XtensaConfig $NAME __attribute__((unused)) = {
    .name = "$NAME",
    .gdb_regmap = {
        .reg = {
#include "core-$NAME/gdb-config.c.inc"
        }
    },
    .isa_internal = &xtensa_modules,
    .clock_freq_khz = $FREQ_KHZ,
    /* the core's FPU (single precision, XCHAL_HAVE_DFPU_SINGLE_ONLY), as QEMU's de233_fpu
       core lists it: import_core.sh leaves this out, and lsi & co. are then illegal */
    .opcode_translators = (const XtensaOpcodeTranslators *[]){
        &xtensa_core_opcodes,
        &xtensa_fpu_opcodes,
        NULL,
    },
    DEFAULT_SECTIONS
};

REGISTER_CORE($NAME)
EOC
grep -qx "core-$NAME.c" "$X/cores.list" || echo "core-$NAME.c" >> "$X/cores.list"

mkdir -p "$WORK/build" && cd "$WORK/build"
../src/configure --prefix="$PREFIX" --target-list=xtensa-softmmu --disable-docs \
    --disable-werror --disable-tools --disable-guest-agent --disable-sdl --disable-gtk \
    --disable-vnc --disable-opengl --disable-virglrenderer --disable-spice --disable-curl \
    --disable-libusb --disable-usb-redir --disable-slirp --disable-capstone --disable-fdt \
    --disable-xen --disable-kvm --disable-linux-aio --disable-libssh --disable-vhost-user --disable-install-blobs
make -j"$JOBS" qemu-system-xtensa   # not the test programs of "all"
cp qemu-system-xtensa "$PREFIX/bin/"
echo "== done: $PREFIX/bin/qemu-system-xtensa (cpus: $("$PREFIX/bin/qemu-system-xtensa" -cpu help | grep -c $NAME) esp32s3)"
