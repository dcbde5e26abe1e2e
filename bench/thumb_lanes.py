"""Two int8 products per MULS on the Cortex-M0+: the MAC loop of issue 31's proposal, measured.

A prototype Thumb-1 loop (not a kernel of the runtime: docs/KERNELS.md "Two products per MULS"):
6 output channels per input byte, the weights of outputs 2j and 2j + 1 in one int32 word
(w1 * 65536 + w0), so one MULS by the input gives both products in 16-bit lanes. |w x| <= 127 *
128 < 2**14, so a lane holds two products exactly: the lanes are emptied every 2 input bytes into
6 int32 accumulators (SXTH, ADD, SUBS, ASRS, ADD per packed register). Runs on the emulated Pico
(rp2040js: deterministic cycles), checks its sums against plain Python (inputs and weights at
the extremes included) and prints the loop's cycles per MAC (two lengths, the difference: the
call and set-up cancel).

    .venv/bin/python bench/thumb_lanes.py --uf2 $MPY_LAZY_RP2_UF2
"""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BOARD = """import array, time, micropython, gc

@micropython.asm_thumb
def lanes6(r0):
    # q = r0: [0 X end, 1 -K, 2 W, 3 OUT (6 int32)]
    mov(r1, r8)
    mov(r2, r9)
    mov(r3, r10)
    mov(r4, r11)
    push({r0, r1, r2, r3, r4})
    mov(r1, 0)
    mov(r8, r1)
    mov(r9, r1)
    mov(r10, r1)
    mov(r11, r1)
    mov(r12, r1)
    mov(lr, r1)
    ldr(r6, [r0, 0])
    ldr(r7, [r0, 4])
    ldr(r5, [r0, 8])
    label(loop)
    data(2, 0x57F0)  # ldrsb r0, [r6, r7]
    data(2, 0xCD0E)  # ldm r5!, {r1, r2, r3}
    mul(r1, r0)
    mul(r2, r0)
    mul(r3, r0)
    add(r7, 1)
    data(2, 0x57F0)  # ldrsb r0, [r6, r7]
    ldr(r4, [r5, 0])
    mul(r4, r0)
    add(r1, r1, r4)
    ldr(r4, [r5, 4])
    mul(r4, r0)
    add(r2, r2, r4)
    ldr(r4, [r5, 8])
    mul(r4, r0)
    add(r3, r3, r4)
    add(r5, 12)
    data(2, 0xB20C)  # sxth r4, r1
    data(2, 0x44A0)  # add r8, r4
    sub(r1, r1, r4)
    asr(r1, r1, 16)
    data(2, 0x4489)  # add r9, r1
    data(2, 0xB214)  # sxth r4, r2
    data(2, 0x44A2)  # add r10, r4
    sub(r2, r2, r4)
    asr(r2, r2, 16)
    data(2, 0x4493)  # add r11, r2
    data(2, 0xB21C)  # sxth r4, r3
    data(2, 0x44A4)  # add r12, r4
    sub(r3, r3, r4)
    asr(r3, r3, 16)
    data(2, 0x449E)  # add lr, r3
    add(r7, 1)
    bne(loop)
    pop({r0})
    ldr(r0, [r0, 12])
    mov(r1, r8)
    str(r1, [r0, 0])
    mov(r1, r9)
    str(r1, [r0, 4])
    mov(r1, r10)
    str(r1, [r0, 8])
    mov(r1, r11)
    str(r1, [r0, 12])
    mov(r1, r12)
    str(r1, [r0, 16])
    mov(r1, lr)
    str(r1, [r0, 20])
    pop({r1, r2, r3, r4})
    mov(r8, r1)
    mov(r9, r2)
    mov(r10, r3)
    mov(r11, r4)

import uctypes
def check(K, reps):
    seed = 12345
    def rnd():
        nonlocal seed
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        return seed >> 8
    x = bytearray(K)
    w = [[0] * 6 for _ in range(K)]
    for k in range(K):
        x[k] = rnd() & 255
        for j in range(6):
            w[k][j] = (rnd() % 255) - 127
    x[0] = 128  # -128
    for j in range(6):
        w[0][j] = -127 if j & 1 else 127
        w[1][j] = -127 if j & 1 else 127
    x[1] = 128
    words = array.array("i", [0] * (3 * K))
    for k in range(K):
        for j in range(3):
            words[3 * k + j] = w[k][2 * j + 1] * 65536 + w[k][2 * j]
    out = array.array("i", [0] * 6)
    q = array.array("i", [uctypes.addressof(x) + K, -K, uctypes.addressof(words), uctypes.addressof(out)])
    lanes6(q)
    ref = [sum(((x[k] ^ 128) - 128) * w[k][j] for k in range(K)) for j in range(6)]
    assert list(out) == ref, (list(out), ref)
    gc.collect()
    t0 = time.ticks_us()
    for _ in range(reps):
        lanes6(q)
    t1 = time.ticks_us()
    return time.ticks_diff(t1, t0) * 125 / reps

a = check(64, 200)
b = check(576, 200)
print("LANES6 K=64 %d cycles/call, K=576 %d, loop %.3f cycles/MAC" % (a, b, (b - a) / (512 * 6)))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/thumb_lanes.py", description=__doc__.split("\n")[0])
    ap.add_argument("--uf2", default=os.environ.get("MPY_LAZY_RP2_UF2"))
    a = ap.parse_args(argv)
    from firmware import rp2_run
    from firmware.qemu_run import romfs_image
    why = rp2_run.uf2_missing(a.uf2)
    if why:
        raise SystemExit("bench/thumb_lanes.py: " + why)
    with tempfile.TemporaryDirectory() as tmp:
        img, script = os.path.join(tmp, "e.romfs"), os.path.join(tmp, "lanes.py")
        with open(img, "wb") as f:
            f.write(romfs_image([("empty", b"")]))
        with open(script, "w") as f:
            f.write(BOARD)
        rc, results, err = rp2_run.Pico(a.uf2, tmp).run([script], img, timeout=900)
    out = "".join(r.get("out", "") + r.get("err", "") for r in results if "script" in r)
    if rc or "LANES6" not in out:
        raise SystemExit("bench/thumb_lanes.py: the board failed: %s %s" % (out[-600:], err[-600:]))
    print(out.strip())


if __name__ == "__main__":
    main()
