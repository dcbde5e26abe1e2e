"""The ESP32-S3 core's toolchain and emulator, built here (firmware/esp32s3/build_toolchain.sh,
build_qemu.sh; docs/FIRMWARE.md "ESP32-S3 core in qemu"), and boards/qemu/ESP32S3's start-up code
on qemu-system-xtensa's `sim` machine:
- with binutils: the window overflow/underflow handlers (CALL4/8/12 chains 300 deep) and MOVSP's
  alloca exception, in assembly (firmware/esp32s3/windows.S);
- with GCC: its target macros (windowed ABI, the core's FPU), C++ against libstdc++, and a C
  program (firmware/esp32s3/hello.c): recursion, alloca(), newlib's setjmp/longjmp across
  spilled frames (MicroPython's NLR), the FPU, 64-bit division from libgcc, CCOUNT.

Needs MPY_LAZY_XTENSA_PREFIX (the toolchain's prefix, e.g. /opt/xtensa, with bin/qemu-system-xtensa);
skipped without it or a tool, except under MPY_LAZY_REQUIRE_EMULATORS=1."""
import os
import subprocess

import pytest

from conftest import ROOT, emulator_unavailable

BOARD = os.path.join(ROOT, "boards", "qemu", "ESP32S3")
TARGET = "xtensa-esp32s3-elf-"


@pytest.fixture(scope="module")
def prefix():
    path = os.environ.get("MPY_LAZY_XTENSA_PREFIX")
    if not path:
        emulator_unavailable("MPY_LAZY_XTENSA_PREFIX is not set (make xtensa-toolchain builds /opt/xtensa)")
    for name in (TARGET + "as", TARGET + "ld", "qemu-system-xtensa"):
        tool(path, name)
    return path


def tool(prefix, name):
    """The path of bin/name under prefix; skips (or fails) when it is not there."""
    path = os.path.join(prefix, "bin", name)
    if not os.access(path, os.X_OK):
        emulator_unavailable("MPY_LAZY_XTENSA_PREFIX=%s has no bin/%s (make xtensa-toolchain)" % (prefix, name))
    return path


def run_on_core(prefix, elf):
    return subprocess.run([tool(prefix, "qemu-system-xtensa"), "-machine", "sim", "-cpu", "esp32s3",
                           "-semihosting", "-display", "none", "-monitor", "none", "-serial", "none",
                           "-device", "loader,file=%s,cpu-num=0" % elf], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_window_exceptions_on_the_core(prefix, tmp_path):
    """startup.S's handlers, assembled without GCC (the host's C preprocessor for the #defines)."""
    objs = []
    for src in (os.path.join(BOARD, "startup.S"), os.path.join(ROOT, "firmware", "esp32s3", "windows.S")):
        pre = tmp_path / (os.path.basename(src) + ".s")
        pre.write_text(subprocess.run(["cpp", "-P", src], capture_output=True, text=True, check=True).stdout)
        objs.append(str(pre) + ".o")
        subprocess.run([tool(prefix, TARGET + "as"), str(pre), "-o", objs[-1]], check=True)
    elf = str(tmp_path / "windows.elf")
    subprocess.run([tool(prefix, TARGET + "ld"), "-T", os.path.join(BOARD, "esp32s3_sim.ld"), "-o", elf] + objs,
                   check=True)
    run = run_on_core(prefix, elf)
    assert run.returncode == 0, run.stdout + run.stderr  # 100 + EXCCAUSE: an unhandled exception
    total = sum(range(301))
    assert run.stdout.splitlines() == ["depth4 %d" % total, "depth8 %d" % total, "depth12 %d" % total,
                                       "alloca %d" % sum(range(64))], run.stdout + run.stderr


def test_gcc_targets_the_esp32s3_core(prefix):
    macros = subprocess.run([tool(prefix, TARGET + "gcc"), "-dM", "-E", "-x", "c", "/dev/null"],
                            capture_output=True, text=True, check=True).stdout
    defined = dict(line.split(" ", 2)[1:] for line in macros.splitlines() if line.count(" ") >= 2)
    assert "__XTENSA_WINDOWED_ABI__" in defined, macros
    assert "__XTENSA_EL__" in defined  # little-endian
    assert "__XTENSA_SOFT_FLOAT__" not in defined  # the core's FPU, from the overlay
    assert "__XTENSA_CALL0_ABI__" not in defined


def test_cxx_with_libstdcxx(prefix, tmp_path):
    if not os.access(os.path.join(prefix, "bin", TARGET + "g++"), os.X_OK):
        emulator_unavailable("MPY_LAZY_XTENSA_PREFIX=%s has no bin/%sg++: build_toolchain.sh's gxx step"
                             % (prefix, TARGET))
    src = tmp_path / "v.cpp"
    src.write_text("#include <algorithm>\n#include <numeric>\n#include <vector>\n"
                   "int f(int n) { std::vector<int> v(n); std::iota(v.begin(), v.end(), 0);\n"
                   "  return *std::max_element(v.begin(), v.end()); }\n")
    obj = tmp_path / "v.o"
    subprocess.run([tool(prefix, TARGET + "g++"), "-Os", "-mlongcalls", "-c", str(src), "-o", str(obj)],
                   check=True)
    lib = subprocess.run([tool(prefix, TARGET + "g++"), "-print-file-name=libstdc++.a"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.isabs(lib) and os.path.exists(lib), lib


def test_bare_metal_program_on_the_core(prefix, tmp_path):
    gcc = tool(prefix, TARGET + "gcc")
    libc = subprocess.run([gcc, "-print-file-name=libc.a"], capture_output=True, text=True, check=True).stdout.strip()
    if not os.path.isabs(libc):
        emulator_unavailable("MPY_LAZY_XTENSA_PREFIX=%s has no newlib (libc.a): build_toolchain.sh's newlib step" % prefix)
    elf = str(tmp_path / "hello.elf")
    subprocess.run([gcc, "-Os", "-mlongcalls", "-nostdlib",
                    "-T", os.path.join(BOARD, "esp32s3_sim.ld"), "-o", elf,
                    os.path.join(BOARD, "startup.S"), os.path.join(ROOT, "firmware", "esp32s3", "hello.c"),
                    "-lc", "-lgcc"], check=True)
    run = run_on_core(prefix, elf)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "hello from the ESP32-S3 core",
        "recursion 200",
        "alloca %d" % (20 + 99),
        "longjmp 42",
        "float %d" % int(1.5 * 2.25 * 1000),
        "udiv64 %d" % (10 ** 12 // 12345),
        "ccount advances 1",
    ], run.stdout + run.stderr
