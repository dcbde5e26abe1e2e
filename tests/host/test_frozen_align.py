"""boards/frozen_align.py, the firmware build hook that keeps frozen containers aligned in flash
(issue 12 item 1; the proof on emulated boards is tests/test_firmware_frozen.py).

mpy-tool.py writes a frozen bytes constant as a C string literal, which a compiler places at any
address; the hook rewrites the constants that are mpy-lazy containers (or safetensors files) into
arrays with their alignment. Checked here on the exact line format of upstream's mpy-tool.py,
compiled by the host C compiler: before, the data address is whatever the compiler chose; after,
a multiple of the container's alignment, with the same bytes, length and hash."""
import importlib.util
import os
import shutil
import subprocess

import struct
import sys

import pytest

from conftest import ROOT, RUNTIME_TESTS
from host_tools.freeze import module_source

sys.path.insert(0, RUNTIME_TESTS)
import test_safetensors as rt  # noqa: E402 (the runtime tests' safetensors writer)

GOLDEN = os.path.join(ROOT, "tests", "golden")
spec = importlib.util.spec_from_file_location("frozen_align", os.path.join(ROOT, "boards", "frozen_align.py"))
frozen_align = importlib.util.module_from_spec(spec)
spec.loader.exec_module(frozen_align)


def mpy_tool_line(name, data, hsh=1234):
    """A bytes constant as upstream's tools/mpy-tool.py (freeze_constant_obj) prints it."""
    return 'static const mp_obj_str_t %s = {{&mp_type_bytes}, %u, %u, (const byte*)"%s"};' % (
        name, hsh, len(data), "".join(("\\x%02x" % b) for b in data))


def _golden(name):
    with open(os.path.join(GOLDEN, name), "rb") as f:
        return f.read()


def test_rewrites_container_constants_only():
    tiny, a64 = _golden("tiny.mpyl"), _golden("align64.mpyl")
    st = b"\x10\x00\x00\x00\x00\x00\x00\x00{}              "
    text = "\n".join([
        "#include <stdint.h>",
        mpy_tool_line("const_obj_w_0", tiny),
        mpy_tool_line("const_obj_w_1", b"not a container"),
        mpy_tool_line("const_obj_w_2", a64, 99),
        mpy_tool_line("const_obj_w_3", st),
        'static const mp_obj_str_t const_obj_x = {{&mp_type_str}, 1, 4, (const byte*)"\\x4d\\x50\\x59\\x4c"};',
    ]) + "\n"
    new, done = frozen_align.rewrite(text)
    assert done == [("const_obj_w_0", len(tiny), 16), ("const_obj_w_2", len(a64), 64), ("const_obj_w_3", len(st), 16)]
    assert mpy_tool_line("const_obj_w_1", b"not a container") in new  # untouched
    assert "static const byte const_obj_w_2_data[%d] __attribute__((aligned (64)))" % (len(a64) + 1) in new
    assert "{{&mp_type_bytes}, 99, %d, const_obj_w_2_data};" % len(a64) in new
    # the safetensors file: 24 bytes, its data section at 24: 8 zero bytes first put it at 32
    assert "const_obj_w_3_data[%d] __attribute__((aligned (16))) = \"%s\\x10" % (8 + len(st) + 1, "\\x00" * 8) in new
    assert "{{&mp_type_bytes}, 1234, %d, const_obj_w_3_data + 8};" % len(st) in new
    assert frozen_align.rewrite(new) == (new, [])  # idempotent


CHECK = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef unsigned char byte;
typedef struct { int t; } mp_obj_type_t;
typedef struct { const mp_obj_type_t *type; } mp_obj_base_t;
typedef struct { mp_obj_base_t base; size_t hash; size_t len; const byte *data; } mp_obj_str_t;
const mp_obj_type_t mp_type_bytes = {0};
static const char pad[%(pad)d] = {1};
%(lines)s
int main(void) {
    const mp_obj_str_t *objs[] = {%(names)s};
    for (unsigned i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        /* where the tensors' alignment counts from: a container's first byte, a safetensors
           file's data section (8 + the little-endian header size) */
        const byte *d = objs[i]->data;
        size_t phase = 0;
        if (memcmp(d, "MPYL", 4) != 0)
            for (int k = 7; k >= 0; k--)
                phase = phase * 256 + d[k];
        if (phase) phase += 8;
        printf("%%lu %%lu %%lu %%u\n", (unsigned long)((uintptr_t)(d + phase) %% 64),
               (unsigned long)objs[i]->len, (unsigned long)objs[i]->hash, (unsigned)d[0]);
    }
    return pad[0] - 1;
}
"""


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler (cc) on this machine")
def test_compiled_constants_are_aligned(tmp_path):
    """The rewritten C compiles (-Os, -Wall -Wextra -Werror, as the ports build) and puts every
    container at a multiple of its alignment, and a safetensors file's data section at a
    multiple of 16 (its header size odd here: the file starts 3 mod 16), whatever sits before."""
    odd = rt.build(rt.ALL, pad=1, lead=1)
    assert (8 + struct.unpack_from("<Q", odd, 0)[0]) % 2 == 1
    blobs = [("c0", _golden("tiny.mpyl")), ("c1", _golden("align64.mpyl")), ("c2", _golden("int8.mpyl")),
             ("c3", odd)]
    seen_unaligned = False
    for pad in (1, 3, 7):
        lines = "\n".join(["static const char odd%d[%d] = {1};" % (k, pad + k) for k in range(3)]
                          + [mpy_tool_line(n, d, 7) for n, d in blobs])
        names = ", ".join("&" + n for n, _ in blobs)
        for rewrite in (False, True):
            text = lines
            if rewrite:
                text, done = frozen_align.rewrite(lines)
                assert len(done) == len(blobs)
            src = tmp_path / ("c%d%d.c" % (pad, rewrite))
            src.write_text(CHECK % {"pad": pad, "lines": text, "names": names})
            exe = tmp_path / ("c%d%d" % (pad, rewrite))
            subprocess.run(["cc", "-Os", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable", "-o", str(exe),
                            str(src)], check=True)
            rows = [line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                            check=True).stdout.splitlines()]
            for (name, data), (mod64, n, hsh, first) in zip(blobs, rows):
                assert int(n) == len(data) and int(hsh) == 7 and int(first) == data[0]
                align = 64 if name == "c1" else 16
                if rewrite:
                    assert int(mod64) % align == 0, (pad, name, mod64)
                elif int(mod64) % align:
                    seen_unaligned = True
    print("a string literal landed unaligned without the hook: %s" % seen_unaligned)


def test_freeze_module_says_where_its_data_sits(tmp_path):
    src = module_source(_golden("tiny.mpyl"), "tiny.mpyl")
    assert "ALIGNMENT = 16" in src and "frozen_align" in src
