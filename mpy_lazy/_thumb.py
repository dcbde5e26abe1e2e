# Thumb-1 kernels (@micropython.asm_thumb): the inner loops of the int8 kernels for Cortex-M0/M0+
# (RP2040) and every later Cortex-M. Imported by mpy_lazy.kernels where the inline assembler
# exists; the viper kernels call them per output pixel or row and keep the rest (gathering,
# bounds, bookkeeping). The integers are the same as _pure.py's.
#
# Why the loops cost what they cost (cycles on a Cortex-M0+; loads 2, taken branches 2 or 3):
#   dots:    LDRSB w, LDRSB x, MULS, ADDS, ADDS index = 7 per multiply-accumulate, 4 per loop
#            turn plus CMP + BLT: about 7.75 cycles per MAC. Both operands are int8 loaded with
#            sign extension (LDRSB: not in MicroPython's assembler, emitted with data()), so the
#            input zero point is not subtracted in the loop: it is folded into the bias.
#   requant: the 32 x 31-bit product of TFLM's SaturatingRoundingDoublingHighMul from four
#            16 x 16-bit MULS with ADDS/ADC carries (the M0+ has no 64-bit multiply), then the
#            rounding shift, zero point and clamp: about 75 cycles per output (rp2040js).
# Registers: r0-r7 only (Thumb-1; r8-r12 would have to be saved); loop state that does not fit lives in the parameter array,
# whose address is the one argument (MicroPython passes a buffer's address).
import array

import micropython

# the kernels' parameter arrays, shared by every model (kernels run one at a time): Q for dots
# and dw (up to 64 taps), R for requant
Q = array.array("i", bytes(4 * 70))
R = array.array("i", bytes(4 * 11))


@micropython.asm_thumb
def dots(r0):
    # q = r0 -> int32 [0 W, 1 X, 2 K, 3 N, 4 WS, 5 ACC, 6 BIAS]: for o < N:
    #   ACC[o] = BIAS[o] + sum_{j < K} w[o * WS + j] * x[j]      (w, x int8; W, X, ACC, BIAS
    # addresses; W, ACC, BIAS and N are advanced in q as outputs are done)
    label(outer)
    ldr(r1, [r0, 0])  # w
    ldr(r2, [r0, 4])  # x
    ldr(r7, [r0, 8])  # K
    ldr(r6, [r0, 24])
    ldr(r4, [r6, 0])  # sum = bias
    mov(r3, 0)  # j
    sub(r7, 3)  # 4 at a time while j + 3 < K
    b(test4)
    label(loop4)
    data(2, 0x56CD)  # ldrsb r5, [r1, r3]
    data(2, 0x56D6)  # ldrsb r6, [r2, r3]
    mul(r5, r6)
    add(r4, r4, r5)
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    add(r4, r4, r5)
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    add(r4, r4, r5)
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    add(r4, r4, r5)
    add(r3, 1)
    label(test4)
    cmp(r3, r7)
    blt(loop4)
    add(r7, 3)
    b(test1)
    label(loop1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    add(r4, r4, r5)
    add(r3, 1)
    label(test1)
    cmp(r3, r7)
    blt(loop1)
    ldr(r5, [r0, 20])  # ACC[o] = sum; advance ACC, BIAS, W; N -= 1
    str(r4, [r5, 0])
    add(r5, 4)
    str(r5, [r0, 20])
    ldr(r5, [r0, 24])
    add(r5, 4)
    str(r5, [r0, 24])
    ldr(r5, [r0, 16])
    add(r1, r1, r5)
    str(r1, [r0, 0])
    ldr(r5, [r0, 12])
    sub(r5, 1)
    str(r5, [r0, 12])
    bne(outer)
    mov(r0, 0)


@micropython.asm_thumb
def dw(r0):
    # q = r0 -> int32 [0 ACC, 1 W, 2 C, 3 NT, 4 BIAS, 5 working space, 6.. X_0 .. X_{NT-1}]:
    #   ACC[c] = BIAS[c] + sum_{t < NT} W[t * C + c] * X_t[c]   for c < C
    # (one output pixel of a depthwise convolution: X_t the address of tap t's C input channels,
    # or of C bytes of the zero point for a padded tap; w, x int8)
    ldr(r4, [r0, 0])  # ACC[c] = BIAS[c]
    ldr(r1, [r0, 16])
    ldr(r7, [r0, 8])
    label(init)
    ldr(r5, [r1, 0])
    str(r5, [r4, 0])
    add(r1, 4)
    add(r4, 4)
    sub(r7, 1)
    bne(init)
    ldr(r1, [r0, 4])  # w
    mov(r6, r0)
    add(r6, 24)
    str(r6, [r0, 20])  # the address of X_0
    ldr(r7, [r0, 8])
    label(tap)
    ldr(r6, [r0, 20])
    ldr(r2, [r6, 0])  # x = X_t
    add(r6, 4)
    str(r6, [r0, 20])
    ldr(r4, [r0, 0])  # acc
    mov(r3, 0)  # c
    sub(r7, 3)
    b(test4)
    label(loop4)
    data(2, 0x56CD)  # ldrsb r5, [r1, r3]
    data(2, 0x56D6)  # ldrsb r6, [r2, r3]
    mul(r5, r6)
    ldr(r6, [r4, 0])
    add(r6, r6, r5)
    str(r6, [r4, 0])
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    ldr(r6, [r4, 4])
    add(r6, r6, r5)
    str(r6, [r4, 4])
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    ldr(r6, [r4, 8])
    add(r6, r6, r5)
    str(r6, [r4, 8])
    add(r3, 1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    ldr(r6, [r4, 12])
    add(r6, r6, r5)
    str(r6, [r4, 12])
    add(r3, 1)
    add(r4, 16)
    label(test4)
    cmp(r3, r7)
    blt(loop4)
    add(r7, 3)
    b(test1)
    label(loop1)
    data(2, 0x56CD)
    data(2, 0x56D6)
    mul(r5, r6)
    ldr(r6, [r4, 0])
    add(r6, r6, r5)
    str(r6, [r4, 0])
    add(r4, 4)
    add(r3, 1)
    label(test1)
    cmp(r3, r7)
    blt(loop1)
    add(r1, r1, r7)  # the next tap's weights
    ldr(r6, [r0, 12])  # taps left: the X pointer against &X_NT
    lsl(r6, r6, 2)
    add(r6, 24)
    add(r6, r6, r0)
    ldr(r5, [r0, 20])
    cmp(r5, r6)
    bcc(tap)  # unsigned: addresses
    mov(r0, 0)


@micropython.asm_thumb
def requant(r0):
    # q = r0 -> int32 [0 ACC, 1 N, 2 OC, 3 MQ, 4 OUT, 5 ZY, 6 LO - ZY, 7 HI - ZY, 8 c (0 on
    # entry), 9 and 10 working space]:
    # OUT[i] = ZY + clamp(mbqm(ACC[i], MQ[c], MQ[OC + c]), LO - ZY, HI - ZY), c = i % OC (TFLM's
    # MultiplyByQuantizedMultiplier, double rounding; int8 out; ACC, OUT advanced in q)
    label(next)
    ldr(r7, [r0, 0])
    ldr(r1, [r7, 0])  # x = ACC[i]
    add(r7, 4)
    str(r7, [r0, 0])
    ldr(r7, [r0, 12])  # MQ
    ldr(r6, [r0, 32])  # c
    lsl(r6, r6, 2)
    add(r7, r7, r6)
    ldr(r2, [r7, 0])  # m = MQ[c]
    ldr(r6, [r0, 8])  # OC
    lsl(r6, r6, 2)
    add(r7, r7, r6)
    ldr(r6, [r7, 0])  # s = MQ[OC + c]
    str(r6, [r0, 36])  # s, kept for the rounding shift (r8-r12 would need saving: memory)
    cmp(r6, 0)
    ble(noleft)
    lsl(r1, r6)  # s > 0: x <<= s (wraps to 32 bits, as TFLM's C does)
    label(noleft)
    mov(r7, 0)  # r7 = negative?
    cmp(r1, 0)
    bge(pos)
    neg(r1, r1)  # |x| (-2**31 stays 0x80000000: read unsigned below)
    mov(r7, 1)
    label(pos)
    # 64-bit |x| * m in r4:r3 from 16-bit halves: a0, a1 of |x| (r3, r4), b0, b1 of m (r5, r6)
    lsl(r3, r1, 16)
    lsr(r3, r3, 16)
    lsr(r4, r1, 16)
    lsl(r5, r2, 16)
    lsr(r5, r5, 16)
    lsr(r6, r2, 16)
    mov(r1, r3)
    mul(r1, r5)  # lo = a0 * b0
    mov(r2, r4)
    mul(r2, r6)  # hi = a1 * b1
    mul(r4, r5)  # a1 * b0
    mul(r3, r6)  # a0 * b1
    lsl(r5, r4, 16)
    lsr(r4, r4, 16)
    add(r1, r1, r5)
    adc(r2, r4)
    lsl(r5, r3, 16)
    lsr(r3, r3, 16)
    add(r1, r1, r5)
    adc(r2, r3)
    mov(r5, 1)  # + nudge: 2**30, or 2**30 - 1 for a negative product
    lsl(r5, r5, 30)
    sub(r5, r5, r7)
    add(r1, r1, r5)
    mov(r5, 0)
    adc(r2, r5)
    lsl(r2, r2, 1)  # (hi:lo) >> 31
    lsr(r1, r1, 31)
    orr(r2, r1)
    cmp(r7, 0)
    beq(rounded)
    neg(r2, r2)
    label(rounded)
    ldr(r6, [r0, 36])  # s < 0: rounding divide by 2**-s, half away from zero
    neg(r6, r6)
    ble(shifted)  # -s <= 0: nothing to divide (flags from NEG)
    mov(r5, 1)
    lsl(r5, r6)
    sub(r5, 1)  # mask
    mov(r4, r2)
    and_(r4, r5)  # remainder
    asr(r5, r5, 1)  # threshold = mask >> 1, + 1 for a negative value
    cmp(r2, 0)
    bge(thr)
    add(r5, 1)
    label(thr)
    asr(r2, r6)
    cmp(r4, r5)
    ble(shifted)
    add(r2, 1)
    label(shifted)
    ldr(r5, [r0, 24])  # clamp to [LO - ZY, HI - ZY], then + ZY (no int32 wrap-around)
    cmp(r2, r5)
    bge(notlow)
    mov(r2, r5)
    label(notlow)
    ldr(r5, [r0, 28])
    cmp(r2, r5)
    ble(nothigh)
    mov(r2, r5)
    label(nothigh)
    ldr(r5, [r0, 20])
    add(r2, r2, r5)
    ldr(r7, [r0, 16])  # OUT[i] = r2; advance OUT
    strb(r2, [r7, 0])
    add(r7, 1)
    str(r7, [r0, 16])
    ldr(r6, [r0, 32])  # c = (c + 1) % OC
    add(r6, 1)
    ldr(r5, [r0, 8])
    cmp(r6, r5)
    blt(samec)
    mov(r6, 0)
    label(samec)
    str(r6, [r0, 32])
    ldr(r5, [r0, 4])  # N -= 1
    sub(r5, 1)
    str(r5, [r0, 4])
    bne(next)
    mov(r0, 0)
