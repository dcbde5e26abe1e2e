"""The toolchain ESP-IDF builds ESP32_S3_MPY_LAZY with (make xtensa-idf-toolchain: build_toolchain.sh's
idf_newlib step; docs/FIRMWARE.md "ESP-IDF firmware"): our GCC with newlib configured as Espressif's,
checked the way IDF uses it: its sys/lock.h and dirent.h, the ROM's reent-small layout, nano.specs,
and a link without Tensilica's simulator files.

Needs MPY_LAZY_XTENSA_IDF_PREFIX (e.g. /opt/xtensa-idf); skipped without it, except under
MPY_LAZY_REQUIRE_EMULATORS=1. The bare-metal toolchain (/opt/xtensa) fails these tests: its newlib
is generic."""
import os
import re
import subprocess

import pytest

from conftest import emulator_unavailable

GCC = "xtensa-esp32s3-elf-gcc"


@pytest.fixture(scope="module")
def gcc():
    prefix = os.environ.get("MPY_LAZY_XTENSA_IDF_PREFIX")
    if not prefix:
        emulator_unavailable("MPY_LAZY_XTENSA_IDF_PREFIX is not set (make xtensa-idf-toolchain builds /opt/xtensa-idf)")
    path = os.path.join(prefix, "bin", GCC)
    if not os.access(path, os.X_OK):
        emulator_unavailable("MPY_LAZY_XTENSA_IDF_PREFIX=%s has no bin/%s" % (prefix, GCC))
    return path


def compile_c(gcc, tmp_path, source, *flags):
    src = tmp_path / "t.c"
    src.write_text(source)
    return subprocess.run([gcc, "-mlongcalls", "-c", str(src), "-o", str(tmp_path / "t.o")] + list(flags),
                          capture_output=True, text=True, timeout=120)


def test_newlib_has_idfs_system_headers(gcc, tmp_path):
    """IDF's sys/lock.h wants retargetable locks; its sys/dirent.h #include_next's newlib's ESP one
    (the generic one is an #error)."""
    r = compile_c(gcc, tmp_path, """
#include <newlib.h>
#include <sys/lock.h>
#include <dirent.h>
#include <sys/reent.h>
#ifndef _RETARGETABLE_LOCKING
#error "no retargetable locking"
#endif
#ifndef _WANT_REENT_SMALL
#error "not reent-small (the ESP32-S3 ROM's newlib layout)"
#endif
_LOCK_T lock;  /* IDF's sys/lock.h builds its _lock_t on newlib's retargetable lock */
DIR *dir;
void f(void) { __retarget_lock_acquire(lock); __retarget_lock_release(lock); }
""")
    assert r.returncode == 0, r.stderr


def link_map(gcc, tmp_path, *flags):
    """Link a printf program (IDF's system calls left unresolved) and return the link map."""
    src = tmp_path / "p.c"
    src.write_text('#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n')
    out = tmp_path / "p.map"
    r = subprocess.run([gcc, "-mlongcalls", str(src), "-o", str(tmp_path / "p.elf"), "-Wl,-Map=%s" % out,
                        "-Wl,--unresolved-symbols=ignore-all"] + list(flags), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def test_links_without_simulator_files(gcc, tmp_path):
    """GCC's xtensa-elf defaults name crt1-sim.o and -lsim -lhandlers-sim -lhal; this GCC's specs do not."""
    text = link_map(gcc, tmp_path)
    assert re.search(r"libc\.a\(\S*printf", text), "printf not from newlib's libc.a"
    for name in ("crt1-sim", "libsim", "libhandlers-sim", "libhal", "libc_nano"):
        assert name not in text, name


def test_nano_specs(gcc, tmp_path):
    """-specs=nano.specs (IDF's CONFIG_NEWLIB_NANO_FORMAT): the nano newlib.h and libc_nano.a only."""
    r = compile_c(gcc, tmp_path, "#include <newlib.h>\n#ifndef _NANO_FORMATTED_IO\n#error\n#endif\n",
                  "-specs=nano.specs")
    assert r.returncode == 0, r.stderr
    text = link_map(gcc, tmp_path, "-specs=nano.specs")
    assert re.search(r"libc_nano\.a\(\S*printf", text), "printf not from libc_nano.a"
    assert not re.search(r"/libc\.a\(", text), "the full libc.a linked too"


ATOMICS = """
#include <stdatomic.h>
atomic_int counter;
_Atomic short half;
_Atomic unsigned char flag;
int word;
int add(void) { return atomic_fetch_add(&counter, 1); }
_Bool cas_half(short expected) { return atomic_compare_exchange_strong(&half, &expected, 3); }
unsigned char swap_flag(void) { return atomic_exchange(&flag, 1); }
int sync_cas(void) { return __sync_val_compare_and_swap(&word, 0, 1); }
"""
LIBCALLS = {"__atomic_fetch_add_4", "__atomic_compare_exchange_2", "__atomic_exchange_1",
            "__sync_val_compare_and_swap_4"}


def atomics_object(gcc, tmp_path, *flags):
    """(undefined symbols, disassembly) of ATOMICS compiled with flags."""
    r = compile_c(gcc, tmp_path, ATOMICS, "-O2", *flags)
    assert r.returncode == 0, r.stderr
    tools = os.path.dirname(gcc)
    obj = str(tmp_path / "t.o")
    nm = subprocess.run([os.path.join(tools, "xtensa-esp32s3-elf-nm"), "-u", obj], capture_output=True,
                        text=True, timeout=60, check=True).stdout
    dis = subprocess.run([os.path.join(tools, "xtensa-esp32s3-elf-objdump"), "-d", obj], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return {line.split()[-1] for line in nm.splitlines() if line.strip()}, dis


def test_disable_hardware_atomics(gcc, tmp_path):
    """-mdisable-hardware-atomics (IDF with SPIRAM: CONFIG_STDATOMIC_S32C1I_SPIRAM_WORKAROUND) makes the
    atomic and __sync built-ins calls to IDF's newlib/stdatomic.c, with no S32C1I (it does not work on
    PSRAM); without it, or with -mno-disable-hardware-atomics (IDF's stdatomic_s32c1i.c), they are
    inline S32C1I loops."""
    undefined, dis = atomics_object(gcc, tmp_path, "-mdisable-hardware-atomics")
    assert LIBCALLS <= undefined, sorted(undefined)
    assert "s32c1i" not in dis
    for flags in ((), ("-mdisable-hardware-atomics", "-mno-disable-hardware-atomics")):
        undefined, dis = atomics_object(gcc, tmp_path, *flags)
        assert not LIBCALLS & undefined, (flags, sorted(undefined))
        assert dis.count("s32c1i") >= len(LIBCALLS), flags
