"""Frozen mpy-lazy containers aligned in flash: the firmware build hook of the boards/ here.

`mpy-lazy freeze` writes a module holding a container as a bytes constant. Frozen, upstream's
tools/mpy-tool.py emits that constant into frozen_content.c as

    static const mp_obj_str_t const_obj_M_0 = {{&mp_type_bytes}, HASH, LEN, (const byte*)"\\x4d...";

a string literal, which the C compiler places at any address (alignment 1 at -Os: issue 12
measured 3 mod 16), so the runtime had to copy every tensor to RAM. This rewrites every such
constant whose bytes are an mpy-lazy container (magic MPYL) or a safetensors file into

    static const byte const_obj_M_0_data[LEN + 1] __attribute__((aligned (A))) = "\\x4d...";
    static const mp_obj_str_t const_obj_M_0 = {{&mp_type_bytes}, HASH, LEN, const_obj_M_0_data};

with A the container's own alignment (its header field): the same bytes, same object, now at a
multiple of A in flash, so every tensor is read in place. A safetensors file's tensors are
aligned relative to its data section (the byte after its JSON header, which a writer other than
the safetensors library may leave at any offset), so there the array starts with P zero bytes
and the object points past them: `const_obj_M_0_data + P`, P chosen to put the data section at
a multiple of 16, as `mpy-lazy romfs` places it. Other constants are left alone; running it
twice changes nothing.

    python frozen_align.py frozen_content.c              rewrite the file in place
    python frozen_align.py --run makemanifest.py ARGS    run makemanifest.py, then rewrite its
                                                         -o output (the make ports' hook:
                                                         MAKE_MANIFEST, boards/qemu/common.mk)

The CMake ports (rp2) run the first form after makemanifest.py (mpconfigboard.cmake). Needs
nothing but Python 3; prints one line per constant it aligned."""
import os
import re
import struct
import subprocess
import sys

LINE = re.compile(r'^static const mp_obj_str_t (\w+) = \{\{&mp_type_bytes\}, (\d+), (\d+), '
                  r'\(const byte\*\)"((?:\\x[0-9a-f]{2})*)"\};$')


def _head(escaped, n):
    """The first n bytes of a C literal of \\xNN escapes."""
    return bytes(int(escaped[4 * i + 2: 4 * i + 4], 16) for i in range(min(n, len(escaped) // 4)))


SAFETENSORS_ALIGNMENT = 16  # of a safetensors file's data section (host_tools/romfs.py's too)


def placement(head, n):
    """(alignment, phase) for a frozen blob of n bytes starting with bytes `head` (64 or more):
    the blob's byte `phase` must sit at a multiple of `alignment`. None when it is neither an
    mpy-lazy container (phase 0) nor a safetensors file (phase: its data section)."""
    if head[:4] == b"MPYL" and len(head) >= 20:
        (a,) = struct.unpack_from("<I", head, 16)
        return (a, 0) if 4 <= a <= 4096 and not a & (a - 1) else None
    if len(head) >= 9 and head[8:9] == b"{":
        (size,) = struct.unpack_from("<Q", head, 0)
        # a header size past the end: a broken file, which the runtime refuses; align its start
        return SAFETENSORS_ALIGNMENT, (8 + size if size <= n - 8 else 0)
    return None


def rewrite(text):
    """(new text, [(name, length, alignment)]) with every container constant aligned."""
    out, done = [], []
    for line in text.splitlines(True):
        m = LINE.match(line.rstrip("\n"))
        where = placement(_head(m.group(4), 64), int(m.group(3))) if m else None
        if where is None:
            out.append(line)
            continue
        name, hsh, n, lit = m.groups()
        a, phase = where
        pad = -phase % a  # zero bytes before the blob: its byte `phase` lands on a multiple of a
        out.append('static const byte %s_data[%d] __attribute__((aligned (%d))) = "%s%s";\n'
                   % (name, pad + int(n) + 1, a, "\\x00" * pad, lit))
        out.append("static const mp_obj_str_t %s = {{&mp_type_bytes}, %s, %s, %s_data%s};\n"
                   % (name, hsh, n, name, " + %d" % pad if pad else ""))
        done.append((name, int(n), a))
    return "".join(out), done


def rewrite_file(path):
    with open(path) as f:
        text = f.read()
    new, done = rewrite(text)
    if done:
        tmp = path + ".align"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, path)
    for name, n, a in done:
        print("frozen_align: %s (%d bytes) aligned to %d" % (name, n, a))
    return done


def main(argv):
    if len(argv) >= 2 and argv[0] == "--run":
        r = subprocess.run([sys.executable] + argv[1:])
        if r.returncode:
            return r.returncode
        if "-o" in argv:
            rewrite_file(argv[argv.index("-o") + 1])
        return 0
    if len(argv) != 1:
        print("usage: frozen_align.py FROZEN_CONTENT.c | --run makemanifest.py ARGS...", file=sys.stderr)
        return 2
    rewrite_file(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
