# Thumb-1 kernels (@micropython.asm_thumb): the inner loops of the int8 kernels for Cortex-M0/M0+
# (RP2040) and every later Cortex-M. Imported by mpy_lazy.kernels where the inline assembler
# exists; the viper kernels call them per output pixel or row and keep the rest (gathering,
# bounds, bookkeeping). The integers are the same as the rooms' reference kernels'
# (mpy_lazy/ops/<op>.py). Imports nothing.
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

# the kernels' parameter arrays, shared by every model (kernels run one at a time): Q for dots,
# dw (up to 64 taps) and conv8 (up to QSEG segments), R for requant
QSEG = 49
Q = array.array("i", bytes(4 * (13 + 3 * QSEG)))
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
def conv8(r0):
    # Output channels 8 at a time, each input byte loaded once for 8 multiply-accumulates, then
    # requantized here. q = r0 -> int32 [0 NSEG, 1 NPIX, 2 -, 3 Y, 4 YSTEP, 5 NB, 6 W, 7 BIAS,
    # 8 MQ, 9 4 OC, 10 ZY, 11 LO - ZY, 12 HI - ZY, 13.. NSEG segments (PTR, LEN, STEP)]: for pixel
    # p < NPIX, block b < NB, j < 8, o = 8 b + j:
    #   acc = BIAS[o] + sum over the segments' bytes x (in order) of w * x, the segment's bytes
    #         at PTR + p * STEP .. + LEN, w the next int8 of block b's weights W[b * 8 K:] laid
    #         out [K][8] (K = the segments' total length; int8, word-aligned)
    #   Y[p * YSTEP + o] = ZY + clamp(mbqm(acc, MQ[o], MQ[OC + o]), LO - ZY, HI - ZY)
    # Registers in the MAC loop: r0 x, r1 four weights, r2 one of them, r3 the segment's end,
    # r4 the index from -LEN up to 0, r5 the weights, accumulators r8-r12, lr, r6, r7 (r8-r11
    # saved here). The rest lives in a frame on the stack (word offsets below).
    mov(r1, r8)
    mov(r2, r9)
    mov(r3, r10)
    mov(r4, r11)
    push({r1, r2, r3, r4})
    data(2, 0xB093)  # sub sp, #76: [0] q, [1] pixels left, [2] p, [3] Y of p, [4] blocks left,
    #                  [5] W of the block, [6] BIAS of the block, [7] MQ of the block, [8] next
    #                  segment, [9] end of the segments, [10] Y of the block, [11..18] acc
    data(2, 0x9000)  # str r0, [sp, #0]
    ldr(r1, [r0, 4])
    data(2, 0x9101)  # str r1, [sp, #4]
    mov(r1, 0)
    data(2, 0x9102)  # str r1, [sp, #8]
    ldr(r1, [r0, 12])
    data(2, 0x9103)  # str r1, [sp, #12]
    ldr(r1, [r0, 0])
    mov(r2, 12)
    mul(r1, r2)
    add(r1, r1, r0)
    add(r1, 52)
    data(2, 0x9109)  # str r1, [sp, #36]
    label(pixel)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    ldr(r1, [r0, 20])
    data(2, 0x9104)  # str r1, [sp, #16]
    ldr(r1, [r0, 24])
    data(2, 0x9105)  # str r1, [sp, #20]
    ldr(r1, [r0, 28])
    data(2, 0x9106)  # str r1, [sp, #24]
    ldr(r1, [r0, 32])
    data(2, 0x9107)  # str r1, [sp, #28]
    data(2, 0x9903)  # ldr r1, [sp, #12]
    data(2, 0x910A)  # str r1, [sp, #40]
    label(block)
    data(2, 0x9806)  # ldr r0, [sp, #24]
    data(2, 0xC81E)  # ldm r0!, {r1, r2, r3, r4}: the block's biases
    mov(r8, r1)
    mov(r9, r2)
    mov(r10, r3)
    mov(r11, r4)
    data(2, 0xC8C6)  # ldm r0!, {r1, r2, r6, r7}
    mov(r12, r1)
    mov(lr, r2)
    data(2, 0x9006)  # str r0, [sp, #24]
    data(2, 0x9D05)  # ldr r5, [sp, #20]
    data(2, 0x9800)  # ldr r0, [sp, #0]
    add(r0, 52)
    data(2, 0x9008)  # str r0, [sp, #32]
    label(seg)
    data(2, 0x9808)  # ldr r0, [sp, #32]
    data(2, 0xC80E)  # ldm r0!, {r1, r2, r3}: PTR, LEN, STEP
    data(2, 0x9008)  # str r0, [sp, #32]
    data(2, 0x9802)  # ldr r0, [sp, #8]
    mul(r3, r0)
    add(r1, r1, r3)
    add(r3, r1, r2)  # the segment's end for this pixel
    neg(r4, r2)
    beq(segnext)
    lsr(r0, r2, 1)  # an odd length: one product first
    bcc(pairs)
    data(2, 0x5718)  # ldrsb r0, [r3, r4]: x
    ldr(r1, [r5, 0])  # weights of outputs 0..3
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4490)  # add r8, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4491)  # add r9, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4492)  # add r10, r2
    asr(r1, r1, 24)
    mul(r1, r0)
    data(2, 0x448B)  # add r11, r1
    ldr(r1, [r5, 4])  # weights of outputs 4..7
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4494)  # add r12, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4496)  # add lr, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    add(r6, r6, r2)
    asr(r1, r1, 24)
    mul(r1, r0)
    add(r7, r7, r1)
    add(r5, 8)
    add(r4, 1)
    beq(segnext)
    label(pairs)
    data(2, 0x5718)  # ldrsb r0, [r3, r4]: x
    ldr(r1, [r5, 0])  # weights of outputs 0..3
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4490)  # add r8, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4491)  # add r9, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4492)  # add r10, r2
    asr(r1, r1, 24)
    mul(r1, r0)
    data(2, 0x448B)  # add r11, r1
    ldr(r1, [r5, 4])  # weights of outputs 4..7
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4494)  # add r12, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4496)  # add lr, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    add(r6, r6, r2)
    asr(r1, r1, 24)
    mul(r1, r0)
    add(r7, r7, r1)
    add(r4, 1)
    data(2, 0x5718)  # ldrsb r0, [r3, r4]: x
    ldr(r1, [r5, 8])  # weights of outputs 0..3
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4490)  # add r8, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4491)  # add r9, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4492)  # add r10, r2
    asr(r1, r1, 24)
    mul(r1, r0)
    data(2, 0x448B)  # add r11, r1
    ldr(r1, [r5, 12])  # weights of outputs 4..7
    data(2, 0xB24A)  # sxtb r2, r1
    mul(r2, r0)
    data(2, 0x4494)  # add r12, r2
    lsl(r2, r1, 16)
    asr(r2, r2, 24)
    mul(r2, r0)
    data(2, 0x4496)  # add lr, r2
    lsl(r2, r1, 8)
    asr(r2, r2, 24)
    mul(r2, r0)
    add(r6, r6, r2)
    asr(r1, r1, 24)
    mul(r1, r0)
    add(r7, r7, r1)
    add(r5, 16)
    add(r4, 1)
    bne(pairs)
    label(segnext)
    data(2, 0x9808)  # ldr r0, [sp, #32]
    data(2, 0x9909)  # ldr r1, [sp, #36]
    cmp(r0, r1)
    bne(seg)
    data(2, 0x9505)  # str r5, [sp, #20]
    mov(r0, r8)  # the accumulators into the frame, in output order
    data(2, 0x900B)  # str r0, [sp, #44]
    mov(r0, r9)
    data(2, 0x900C)  # str r0, [sp, #48]
    mov(r0, r10)
    data(2, 0x900D)  # str r0, [sp, #52]
    mov(r0, r11)
    data(2, 0x900E)  # str r0, [sp, #56]
    mov(r0, r12)
    data(2, 0x900F)  # str r0, [sp, #60]
    mov(r0, lr)
    data(2, 0x9010)  # str r0, [sp, #64]
    data(2, 0x9611)  # str r6, [sp, #68]
    data(2, 0x9712)  # str r7, [sp, #72]
    # requantization: r6 the accumulators, r7 the multipliers, r5 the output; r8 ZY, r9 LO - ZY,
    # r10 HI - ZY, r12 4 OC - 4 (multiplier to shift), lr the accumulators' end, r11 2**14
    data(2, 0x9800)  # ldr r0, [sp, #0]
    mov(r1, 1)
    lsl(r1, r1, 14)
    mov(r11, r1)
    ldr(r1, [r0, 40])
    mov(r8, r1)
    ldr(r1, [r0, 44])
    mov(r9, r1)
    ldr(r1, [r0, 48])
    mov(r10, r1)
    ldr(r1, [r0, 36])
    sub(r1, 4)
    mov(r12, r1)
    data(2, 0x9D0A)  # ldr r5, [sp, #40]: the output
    data(2, 0xAE0B)  # add r6, sp, #44
    mov(r1, r6)
    add(r1, 32)
    mov(lr, r1)
    data(2, 0x9F07)  # ldr r7, [sp, #28]
    label(rq)
    data(2, 0xCE01)  # ldm r6!, {r0}: acc
    data(2, 0xCF02)  # ldm r7!, {r1}: m
    mov(r2, r12)
    data(2, 0x58BA)  # ldr r2, [r7, r2]: s
    cmp(r2, 0)
    bgt(left)
    label(product)
    # floor((acc m + 2**30) / 2**31) (TFLM's SaturatingRoundingDoublingHighMul for m >= 0), m =
    # mh 2**16 + ml: for -2**15 <= acc < 2**15 (most outputs) from two products,
    # (acc mh + 2**14 + (acc ml >> 16)) >> 15 (acc ml fits int32), else from four (wide)
    data(2, 0xB203)  # sxth r3, r0: acc fits int16?
    cmp(r3, r0)
    bne(wide)
    lsr(r3, r1, 16)  # mh
    data(2, 0xB28C)  # uxth r4, r1: ml
    mul(r3, r0)
    mul(r0, r4)
    asr(r0, r0, 16)
    add(r0, r0, r3)
    data(2, 0x4458)  # add r0, r11: + 2**14
    asr(r0, r0, 15)
    label(produced)
    neg(r2, r2)  # e = -s: TFLM's RoundingDivideByPOT by 2**e, half away from zero
    beq(rounded)
    sub(r3, r2, 1)
    mov(r4, 1)
    lsl(r4, r3)
    asr(r3, r0, 31)
    add(r0, r0, r4)
    bvs(ovf)
    add(r0, r0, r3)
    asr(r0, r2)
    label(rounded)
    data(2, 0x4548)  # cmp r0, r9: the clamp's branches taken only when it clamps
    blt(low)
    data(2, 0x4550)  # cmp r0, r10
    bgt(high)
    label(clamped)
    data(2, 0x4440)  # add r0, r8
    strb(r0, [r5, 0])
    add(r5, 1)
    data(2, 0x4576)  # cmp r6, lr
    bne(rq)
    data(2, 0x9707)  # str r7, [sp, #28]
    data(2, 0x950A)  # str r5, [sp, #40]
    data(2, 0x9804)  # ldr r0, [sp, #16]
    sub(r0, 1)
    data(2, 0x9004)  # str r0, [sp, #16]
    beq(blocks)
    b(block)
    label(low)
    mov(r0, r9)
    b(clamped)
    label(high)
    mov(r0, r10)
    b(clamped)
    label(wide)  # acc = xh 2**16 + xl (xh signed): the four 16 x 16-bit products (r5 saved)
    push({r5})
    data(2, 0xB283)  # uxth r3, r0: xl
    asr(r0, r0, 16)  # xh
    data(2, 0xB28C)  # uxth r4, r1: ml
    lsr(r1, r1, 16)  # mh
    mov(r5, r3)
    mul(r5, r4)  # xl ml: the low word
    mul(r4, r0)  # xh ml
    mul(r3, r1)  # xl mh
    mul(r0, r1)  # xh mh: the high word
    data(2, 0x445B)  # add r3, r11: + 2**30, as 2**14 in xl mh (< 2**31 - 2**16: no carry)
    lsl(r1, r4, 16)
    asr(r4, r4, 16)
    add(r5, r5, r1)
    adc(r0, r4)
    lsl(r1, r3, 16)
    lsr(r3, r3, 16)
    add(r5, r5, r1)
    adc(r0, r3)
    lsl(r0, r0, 1)
    lsr(r5, r5, 31)
    orr(r0, r5)
    pop({r5})
    b(produced)
    label(left)  # s > 0: acc << s (wraps as TFLM's int32 product does), no rounding shift
    lsl(r0, r2)
    mov(r2, 0)
    b(product)
    label(ovf)  # acc + half passed 2**31 - 1: the sum is exact read unsigned
    lsr(r0, r2)
    b(rounded)
    label(blocks)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    data(2, 0x9903)  # ldr r1, [sp, #12]
    ldr(r2, [r0, 16])
    add(r1, r1, r2)
    data(2, 0x9103)  # str r1, [sp, #12]
    data(2, 0x9902)  # ldr r1, [sp, #8]
    add(r1, 1)
    data(2, 0x9102)  # str r1, [sp, #8]
    data(2, 0x9901)  # ldr r1, [sp, #4]
    sub(r1, 1)
    data(2, 0x9101)  # str r1, [sp, #4]
    beq(done)
    b(pixel)
    label(done)
    data(2, 0xB013)  # add sp, #76
    pop({r1, r2, r3, r4})
    mov(r8, r1)
    mov(r9, r2)
    mov(r10, r3)
    mov(r11, r4)
    mov(r0, 0)


@micropython.asm_thumb
def dw4(r0):
    # Depthwise convolution (one output channel per input channel), 4 channels per pass, each
    # tap's 4 inputs and 4 weights read as one word, requantized here. q = r0 -> int32 [0 NT,
    # 1 NPIX, 2 ZROW, 3 Y, 4 C, 5 C / 4, 6 W, 7 BIAS, 8 MQ, 9 4 C, 10 ZY, 11 LO - ZY,
    # 12 HI - ZY, 13.. NT taps (PTR, STEP, PLO, PHI)]: for pixel p < NPIX, channel c < C:
    #   acc = BIAS[c] + sum over taps t of W[t * C + c] * X_t[c], X_t = PTR_t + p * STEP_t
    #         where PLO_t <= p < PHI_t (the tap inside the input), else ZROW (C zero points)
    #   Y[p * C + c] = ZY + clamp(mbqm(acc, MQ[c], MQ[C + c]), LO - ZY, HI - ZY)
    # so one call covers a whole output row, its border pixels included (C a multiple of 4;
    # X_t, ZROW, W, BIAS word-aligned; NT <= 25; int8 x and w)
    mov(r1, r8)
    mov(r2, r9)
    mov(r3, r10)
    mov(r4, r11)
    push({r1, r2, r3, r4})
    data(2, 0xB0A3)  # sub sp, #140: [0] q, [1] pixels left, [2] p, [3] Y of p, [4] 4 x the
    #                  group, [5] -, [6..9] acc, [10..34] this pixel's tap addresses
    data(2, 0x9000)  # str r0, [sp, #0]
    ldr(r1, [r0, 4])
    data(2, 0x9101)  # str r1, [sp, #4]
    mov(r1, 0)
    data(2, 0x9102)  # str r1, [sp, #8]
    ldr(r1, [r0, 12])
    data(2, 0x9103)  # str r1, [sp, #12]
    label(pixel)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    ldr(r2, [r0, 0])  # NT
    mov(r1, r0)
    add(r1, 52)
    data(2, 0x9B02)  # ldr r3, [sp, #8]
    data(2, 0xAF0A)  # add r7, sp, #40
    label(taps)
    data(2, 0xC971)  # ldm r1!, {r0, r4, r5, r6}: PTR, STEP, PLO, PHI
    cmp(r3, r5)
    blt(zero)
    cmp(r3, r6)
    bge(zero)
    mul(r4, r3)
    add(r0, r0, r4)
    label(tapped)
    data(2, 0xC701)  # stm r7!, {r0}
    sub(r2, 1)
    bne(taps)
    b(tapsdone)
    label(zero)  # a tap in the padding: the zero points
    data(2, 0x9800)  # ldr r0, [sp, #0]
    ldr(r0, [r0, 8])
    b(tapped)
    label(tapsdone)
    mov(r1, 0)
    data(2, 0x9104)  # str r1, [sp, #16]
    label(group)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    data(2, 0x9E04)  # ldr r6, [sp, #16]  # the group's byte offset: r6 through the tap loop
    ldr(r1, [r0, 28])
    lsl(r2, r6, 2)
    add(r1, r1, r2)
    data(2, 0xC93C)  # ldm r1!, {r2, r3, r4, r5}: the biases
    mov(r8, r2)
    mov(r9, r3)
    mov(r10, r4)
    mov(r11, r5)
    ldr(r5, [r0, 24])  # W
    ldr(r1, [r0, 16])  # C: from one tap's weights to the next's
    mov(r12, r1)
    ldr(r1, [r0, 0])
    lsl(r1, r1, 2)
    data(2, 0xAF0A)  # add r7, sp, #40
    add(r1, r1, r7)
    mov(lr, r1)  # the tap addresses' end
    label(tap)
    data(2, 0xCF01)  # ldm r7!, {r0}: the tap's address
    data(2, 0x5981)  # ldr r1, [r0, r6]: 4 inputs
    data(2, 0x59AA)  # ldr r2, [r5, r6]: 4 weights
    data(2, 0x4465)  # add r5, r12
    data(2, 0xB24B)  # sxtb r3, r1
    data(2, 0xB254)  # sxtb r4, r2
    mul(r3, r4)
    data(2, 0x4498)  # add r8, r3
    lsl(r3, r1, 16)
    asr(r3, r3, 24)
    lsl(r4, r2, 16)
    asr(r4, r4, 24)
    mul(r3, r4)
    data(2, 0x4499)  # add r9, r3
    lsl(r3, r1, 8)
    asr(r3, r3, 24)
    lsl(r4, r2, 8)
    asr(r4, r4, 24)
    mul(r3, r4)
    data(2, 0x449A)  # add r10, r3
    asr(r1, r1, 24)
    asr(r2, r2, 24)
    mul(r1, r2)
    data(2, 0x448B)  # add r11, r1
    data(2, 0x4577)  # cmp r7, lr
    bne(tap)
    mov(r0, r8)  # the accumulators into the frame
    data(2, 0x9006)  # str r0, [sp, #24]
    mov(r0, r9)
    data(2, 0x9007)  # str r0, [sp, #28]
    mov(r0, r10)
    data(2, 0x9008)  # str r0, [sp, #32]
    mov(r0, r11)
    data(2, 0x9009)  # str r0, [sp, #36]
    # requantization as conv8's: r6 the accumulators, r7 the multipliers, r5 the output, r8 ZY,
    # r9 LO - ZY, r10 HI - ZY, r12 4 C - 4, lr the accumulators' end, r11 2**14
    data(2, 0x9800)  # ldr r0, [sp, #0]
    mov(r1, 1)
    lsl(r1, r1, 14)
    mov(r11, r1)
    ldr(r1, [r0, 40])
    mov(r8, r1)
    ldr(r1, [r0, 44])
    mov(r9, r1)
    ldr(r1, [r0, 48])
    mov(r10, r1)
    ldr(r1, [r0, 36])
    sub(r1, 4)
    mov(r12, r1)
    data(2, 0x9A04)  # ldr r2, [sp, #16]
    data(2, 0x9903)  # ldr r1, [sp, #12]
    add(r5, r1, r2)  # the output
    ldr(r7, [r0, 32])
    lsl(r2, r2, 2)
    add(r7, r7, r2)
    data(2, 0xAE06)  # add r6, sp, #24
    mov(r1, r6)
    add(r1, 16)
    mov(lr, r1)
    label(rq)
    data(2, 0xCE01)  # ldm r6!, {r0}: acc
    data(2, 0xCF02)  # ldm r7!, {r1}: m
    mov(r2, r12)
    data(2, 0x58BA)  # ldr r2, [r7, r2]: s
    cmp(r2, 0)
    bgt(left)
    label(product)
    # floor((acc m + 2**30) / 2**31) (TFLM's SaturatingRoundingDoublingHighMul for m >= 0), m =
    # mh 2**16 + ml: for -2**15 <= acc < 2**15 (most outputs) from two products,
    # (acc mh + 2**14 + (acc ml >> 16)) >> 15 (acc ml fits int32), else from four (wide)
    data(2, 0xB203)  # sxth r3, r0: acc fits int16?
    cmp(r3, r0)
    bne(wide)
    lsr(r3, r1, 16)  # mh
    data(2, 0xB28C)  # uxth r4, r1: ml
    mul(r3, r0)
    mul(r0, r4)
    asr(r0, r0, 16)
    add(r0, r0, r3)
    data(2, 0x4458)  # add r0, r11: + 2**14
    asr(r0, r0, 15)
    label(produced)
    neg(r2, r2)  # e = -s: TFLM's RoundingDivideByPOT by 2**e, half away from zero
    beq(rounded)
    sub(r3, r2, 1)
    mov(r4, 1)
    lsl(r4, r3)
    asr(r3, r0, 31)
    add(r0, r0, r4)
    bvs(ovf)
    add(r0, r0, r3)
    asr(r0, r2)
    label(rounded)
    data(2, 0x4548)  # cmp r0, r9: the clamp's branches taken only when it clamps
    blt(low)
    data(2, 0x4550)  # cmp r0, r10
    bgt(high)
    label(clamped)
    data(2, 0x4440)  # add r0, r8
    strb(r0, [r5, 0])
    add(r5, 1)
    data(2, 0x4576)  # cmp r6, lr
    bne(rq)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    data(2, 0x9904)  # ldr r1, [sp, #16]
    add(r1, 4)
    data(2, 0x9104)  # str r1, [sp, #16]
    ldr(r2, [r0, 16])
    cmp(r1, r2)
    bge(groups)
    b(group)
    label(low)
    mov(r0, r9)
    b(clamped)
    label(high)
    mov(r0, r10)
    b(clamped)
    label(wide)  # acc = xh 2**16 + xl (xh signed): the four 16 x 16-bit products (r5 saved)
    push({r5})
    data(2, 0xB283)  # uxth r3, r0: xl
    asr(r0, r0, 16)  # xh
    data(2, 0xB28C)  # uxth r4, r1: ml
    lsr(r1, r1, 16)  # mh
    mov(r5, r3)
    mul(r5, r4)  # xl ml: the low word
    mul(r4, r0)  # xh ml
    mul(r3, r1)  # xl mh
    mul(r0, r1)  # xh mh: the high word
    data(2, 0x445B)  # add r3, r11: + 2**30, as 2**14 in xl mh (< 2**31 - 2**16: no carry)
    lsl(r1, r4, 16)
    asr(r4, r4, 16)
    add(r5, r5, r1)
    adc(r0, r4)
    lsl(r1, r3, 16)
    lsr(r3, r3, 16)
    add(r5, r5, r1)
    adc(r0, r3)
    lsl(r0, r0, 1)
    lsr(r5, r5, 31)
    orr(r0, r5)
    pop({r5})
    b(produced)
    label(left)  # s > 0: acc << s (wraps as TFLM's int32 product does), no rounding shift
    lsl(r0, r2)
    mov(r2, 0)
    b(product)
    label(ovf)  # acc + half passed 2**31 - 1: the sum is exact read unsigned
    lsr(r0, r2)
    b(rounded)
    label(groups)
    data(2, 0x9903)  # ldr r1, [sp, #12]
    ldr(r2, [r0, 16])
    add(r1, r1, r2)
    data(2, 0x9103)  # str r1, [sp, #12]
    data(2, 0x9902)  # ldr r1, [sp, #8]
    add(r1, 1)
    data(2, 0x9102)  # str r1, [sp, #8]
    data(2, 0x9901)  # ldr r1, [sp, #4]
    sub(r1, 1)
    data(2, 0x9101)  # str r1, [sp, #4]
    beq(done)
    b(pixel)
    label(done)
    data(2, 0xB023)  # add sp, #140
    pop({r1, r2, r3, r4})
    mov(r8, r1)
    mov(r9, r2)
    mov(r10, r3)
    mov(r11, r4)
    mov(r0, 0)


@micropython.asm_thumb
def copy(r0, r1, r2):
    # r2 bytes from address r1 to address r0 (an int8 input into the arena): 4 per turn, 21
    # cycles, then one at a time (viper's byte loop: about 90 cycles per byte on the M0+)
    sub(r2, 4)
    blt(tail)
    label(four)
    ldrb(r3, [r1, 0])
    strb(r3, [r0, 0])
    ldrb(r3, [r1, 1])
    strb(r3, [r0, 1])
    ldrb(r3, [r1, 2])
    strb(r3, [r0, 2])
    ldrb(r3, [r1, 3])
    strb(r3, [r0, 3])
    add(r0, 4)
    add(r1, 4)
    sub(r2, 4)
    bge(four)
    label(tail)
    add(r2, 4)
    beq(done)
    label(one)
    ldrb(r3, [r1, 0])
    strb(r3, [r0, 0])
    add(r0, 1)
    add(r1, 1)
    sub(r2, 1)
    bne(one)
    label(done)
    mov(r0, 0)


@micropython.asm_thumb
def add8(r0):
    # TFLM's int8 add (and sub) from per-input tables: q = r0 -> int32 [0 N, 1 X1, 2 X2,
    # 3 X2 start, 4 X2 end, 5 Y, 6 T, 7 ACC, 8 BLOCK, 9 M, 10 E (-shift, >= 1), 11 ZY, 12 LO,
    # 13 HI]: for i < N, X2 read cyclically (X2 start .. end):
    #   Y[i] = clamp(ZY + rdbpot(srdhm(T[X1[i] & 255] + T[256 + (X2[j] & 255)], M), E), LO, HI)
    # (T: each input's rescaled value by its byte read unsigned; the sums are < 2**29, so
    # nothing below wraps). BLOCK sums into ACC, then their requantization with M's halves in
    # registers. N, X1, X2, Y advance in q.
    mov(r1, r8)
    mov(r2, r9)
    mov(r3, r10)
    mov(r4, r11)
    push({r0, r1, r2, r3, r4})  # [sp] q, then r8-r11
    label(block)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    ldr(r1, [r0, 0])  # N: elements left
    ldr(r2, [r0, 32])  # BLOCK
    cmp(r1, r2)
    bge(full)
    mov(r2, r1)
    label(full)
    sub(r1, r1, r2)
    str(r1, [r0, 0])
    lsl(r2, r2, 2)
    ldr(r5, [r0, 28])  # ACC
    add(r2, r2, r5)
    mov(r8, r2)  # the block's end in ACC
    ldr(r1, [r0, 12])
    mov(r9, r1)  # X2 start
    ldr(r2, [r0, 4])  # X1
    ldr(r3, [r0, 8])  # X2
    ldr(r4, [r0, 16])  # X2 end
    ldr(r6, [r0, 24])  # T: X1's table, X2's 1 KB on
    mov(r7, 128)
    lsl(r7, r7, 3)
    add(r7, r7, r6)
    label(sum)
    ldrb(r0, [r2, 0])
    add(r2, 1)
    lsl(r0, r0, 2)
    data(2, 0x5830)  # ldr r0, [r6, r0]
    ldrb(r1, [r3, 0])
    add(r3, 1)
    lsl(r1, r1, 2)
    data(2, 0x5879)  # ldr r1, [r7, r1]
    add(r0, r0, r1)
    data(2, 0xC501)  # stm r5!, {r0}
    cmp(r3, r4)
    beq(wrap)
    label(wrapped)
    data(2, 0x4545)  # cmp r5, r8
    bne(sum)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    str(r2, [r0, 4])
    str(r3, [r0, 8])
    # requantization: r5 the sums, r6 the output, r7 M's low 16 bits; r8 the sums' end, r9 M's
    # high bits, r10 E - 1, r11 ZY, r12 LO, lr HI
    ldr(r5, [r0, 28])
    ldr(r6, [r0, 20])
    ldr(r1, [r0, 36])
    data(2, 0xB28F)  # uxth r7, r1
    lsr(r1, r1, 16)
    mov(r9, r1)
    ldr(r1, [r0, 40])
    sub(r1, 1)
    mov(r10, r1)
    ldr(r1, [r0, 44])
    mov(r11, r1)
    ldr(r1, [r0, 48])
    mov(r12, r1)
    ldr(r1, [r0, 52])
    mov(lr, r1)
    label(rq)
    data(2, 0xCD01)  # ldm r5!, {r0}
    data(2, 0xB281)  # uxth r1, r0: xl
    asr(r0, r0, 16)  # xh
    mov(r2, r7)
    mul(r2, r1)  # xl ml: the low word
    mov(r3, r7)
    mul(r3, r0)  # xh ml
    mov(r4, r9)
    mul(r1, r4)  # xl mh
    mul(r0, r4)  # xh mh: the high word
    mov(r4, 1)
    lsl(r4, r4, 14)
    add(r1, r1, r4)  # + 2**30
    lsl(r4, r3, 16)
    asr(r3, r3, 16)
    add(r2, r2, r4)
    adc(r0, r3)
    lsl(r4, r1, 16)
    lsr(r1, r1, 16)
    add(r2, r2, r4)
    adc(r0, r1)
    lsl(r0, r0, 1)
    lsr(r2, r2, 31)
    orr(r0, r2)  # srdhm
    asr(r1, r0, 31)  # rdbpot: ((v - (v < 0)) >> (E - 1) + 1) >> 1
    add(r0, r0, r1)
    mov(r1, r10)
    asr(r0, r1)
    add(r0, 1)
    asr(r0, r0, 1)
    data(2, 0x4458)  # add r0, r11
    data(2, 0x4560)  # cmp r0, r12
    blt(low)
    data(2, 0x4570)  # cmp r0, lr
    bgt(high)
    label(store)
    strb(r0, [r6, 0])
    add(r6, 1)
    data(2, 0x4545)  # cmp r5, r8
    bne(rq)
    data(2, 0x9800)  # ldr r0, [sp, #0]
    str(r6, [r0, 20])
    ldr(r1, [r0, 0])
    cmp(r1, 0)
    beq(done)
    b(block)
    label(wrap)
    mov(r3, r9)
    b(wrapped)
    label(low)
    mov(r0, r12)
    b(store)
    label(high)
    mov(r0, lr)
    b(store)
    label(done)
    pop({r0, r1, r2, r3, r4})
    mov(r8, r1)
    mov(r9, r2)
    mov(r10, r3)
    mov(r11, r4)
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
