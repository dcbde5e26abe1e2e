// The windowed ABI's exception paths of boards/qemu/ESP32S3/startup.S, on the core in qemu,
// in assembly (needs binutils only; tests/test_xtensa_core.py): call chains deep enough to
// overflow the 64 physical registers many times (the overflow and underflow handlers of CALL4,
// CALL8 and CALL12 frames), and MOVSP whose caller's frame was spilled (the alloca exception).
// Prints "depth4 N", "depth8 N", "depth12 N" (N = 300 + 299 + ... + 1, summed back through every
// frame) and "alloca N" (0 + 1 + ... + 63, from the allocated bytes), then exits with status 0.
#define SYS_EXIT 1
#define SYS_WRITE 4

    .section .rodata
msg4:   .ascii "depth4 "
msg8:   .ascii "depth8 "
msg12:  .ascii "depth12 "
msga:   .ascii "alloca "

    .data
    .align 4
digits: .space 12

    .text
    .global xtensa_start
    .global xtensa_fatal

// a2 = n: returns n + (n-1) + ... + 1 through n frames; the partial sum's register is live
// across the call (a caller's a0..a3 survive CALL4, a0..a7 CALL8, a0..a11 CALL12)
    .align 4
sum4:
    entry   a1, 32
    beqz    a2, 1f
    mov     a3, a2
    addi    a6, a2, -1
    call4   sum4
    add     a2, a6, a3
1:  retw

    .align 4
sum8:
    entry   a1, 32
    beqz    a2, 1f
    mov     a7, a2
    addi    a10, a2, -1
    call8   sum8
    add     a2, a10, a7
1:  retw

    .align 4
sum12:
    entry   a1, 48
    beqz    a2, 1f
    mov     a11, a2
    addi    a14, a2, -1
    call12  sum12
    add     a2, a14, a11
1:  retw

// a2 = n: deep calls spill this frame's caller, then MOVSP allocates n bytes below the stack
// pointer (as GCC's alloca does); fills them with 0..n-1 and returns their sum
    .align 4
with_alloca:
    entry   a1, 32
    mov     a7, a2
    movi    a10, 40
    call8   sum8                // the caller's frame is spilled by now
    sub     a8, a1, a7
    movi    a9, -16
    and     a8, a8, a9
    movsp   a1, a8              // the caller is not in the register file: alloca exception
    mov     a9, a1
    movi    a4, 0
2:  s8i     a4, a9, 0
    addi    a9, a9, 1
    addi    a4, a4, 1
    blt     a4, a7, 2b
    mov     a9, a1
    movi    a4, 0
    movi    a2, 0
3:  l8ui    a5, a9, 0
    add     a2, a2, a5
    addi    a9, a9, 1
    addi    a4, a4, 1
    blt     a4, a7, 3b
    retw

// a2 = label, a3 = its length, a4 = value: writes "label value\n"
    .align 4
say_num:
    entry   a1, 32
    mov     a7, a4
    mov     a4, a2
    mov     a5, a3
    movi    a3, 1
    movi    a2, SYS_WRITE
    simcall
    movi    a6, digits + 11     // the digits backwards from the end, then "\n"
    movi    a8, 10
    s8i     a8, a6, 0
1:  addi    a6, a6, -1
    remu    a9, a7, a8
    addi    a9, a9, 48
    s8i     a9, a6, 0
    quou    a7, a7, a8
    bnez    a7, 1b
    movi    a5, digits + 12
    sub     a5, a5, a6
    mov     a4, a6
    movi    a3, 1
    movi    a2, SYS_WRITE
    simcall
    retw

// the results stay in a2..a5 (a caller's a0..a7 survive CALL8)
    .align 4
xtensa_start:
    entry   a1, 48
    movi    a6, 300
    call4   sum4
    mov     a2, a6
    movi    a10, 300
    call8   sum8
    mov     a3, a10
    movi    a14, 300
    call12  sum12
    mov     a4, a14
    movi    a10, 64
    call8   with_alloca
    mov     a5, a10
    movi    a10, msg4
    movi    a11, 7
    mov     a12, a2
    call8   say_num
    movi    a10, msg8
    movi    a11, 7
    mov     a12, a3
    call8   say_num
    movi    a10, msg12
    movi    a11, 8
    mov     a12, a4
    call8   say_num
    movi    a10, msga
    movi    a11, 7
    mov     a12, a5
    call8   say_num
    movi    a2, SYS_EXIT
    movi    a3, 0
    simcall
    retw

// a2 = the cause startup.S passes: exit status 100 + cause
    .align 4
xtensa_fatal:
    entry   a1, 32
    addi    a3, a2, 100
    movi    a2, SYS_EXIT
    simcall
    retw
