// mpy-lazy's bare-metal board for the ESP32-S3's core on qemu-system-xtensa's `sim` machine:
// the exception vectors (VECBASE 0x40000000, offsets of the core's core-isa.h) and the reset
// entry. Windowed ABI: the window overflow/underflow handlers spill and reload register frames
// to the stack, and the user exception vector serves MOVSP's alloca exception (alloca() in C);
// any other exception ends in xtensa_fatal (esp32s3_sim.c), which prints the registers.

#define PS_WOE      0x40000     // window overflow exceptions enabled
#define PS_UM       0x20        // user vector mode
#define PS_OWB_SHIFT 8
#define PS_OWB_BITS 4
#define EXCCAUSE_SYSCALL 1
#define EXCCAUSE_ALLOCA 5

    .section .vectors, "ax"
    .global _vector_table
_vector_table:

    .org 0x000
_WindowOverflow4:
    s32e    a0, a5, -16
    s32e    a1, a5, -12
    s32e    a2, a5, -8
    s32e    a3, a5, -4
    rfwo

    .org 0x040
_WindowUnderflow4:
    l32e    a0, a5, -16
    l32e    a1, a5, -12
    l32e    a2, a5, -8
    l32e    a3, a5, -4
    rfwu

    .org 0x080
_WindowOverflow8:
    s32e    a0, a9, -16
    l32e    a0, a1, -12         // the caller's stack pointer: its extra save area
    s32e    a1, a9, -12
    s32e    a2, a9, -8
    s32e    a3, a9, -4
    s32e    a4, a0, -32
    s32e    a5, a0, -28
    s32e    a6, a0, -24
    s32e    a7, a0, -20
    rfwo

    .org 0x0c0
_WindowUnderflow8:
    l32e    a1, a9, -12
    l32e    a0, a9, -16
    l32e    a7, a1, -12
    l32e    a2, a9, -8
    l32e    a4, a7, -32
    l32e    a3, a9, -4
    l32e    a5, a7, -28
    l32e    a6, a7, -24
    l32e    a7, a7, -20
    rfwu

    .org 0x100
_WindowOverflow12:
    s32e    a0, a13, -16
    l32e    a0, a1, -12
    s32e    a1, a13, -12
    s32e    a2, a13, -8
    s32e    a3, a13, -4
    s32e    a4, a0, -48
    s32e    a5, a0, -44
    s32e    a6, a0, -40
    s32e    a7, a0, -36
    s32e    a8, a0, -32
    s32e    a9, a0, -28
    s32e    a10, a0, -24
    s32e    a11, a0, -20
    rfwo

    .org 0x140
_WindowUnderflow12:
    l32e    a1, a13, -12
    l32e    a0, a13, -16
    l32e    a11, a1, -12
    l32e    a2, a13, -8
    l32e    a4, a11, -48
    l32e    a8, a11, -32
    l32e    a3, a13, -4
    l32e    a5, a11, -44
    l32e    a6, a11, -40
    l32e    a7, a11, -36
    l32e    a9, a11, -28
    l32e    a10, a11, -24
    l32e    a11, a11, -20
    rfwu

    // high-priority interrupts, debug, NMI: none is enabled; if one comes, it is fatal
    .org 0x180
    movi    a0, 0x102
    j       _fatal
    .org 0x1c0
    movi    a0, 0x103
    j       _fatal
    .org 0x200
    movi    a0, 0x104
    j       _fatal
    .org 0x240
    movi    a0, 0x105
    j       _fatal
    .org 0x280
    movi    a0, 0x106
    j       _fatal
    .org 0x2c0
    movi    a0, 0x107
    j       _fatal

    .org 0x300                  // kernel exception vector (PS.UM = 0): fatal
    movi    a0, 0x100
    j       _fatal

    .org 0x340                  // user exception vector
    wsr     a0, excsave1
    rsr     a0, exccause
    bnei    a0, EXCCAUSE_ALLOCA, 1f
    j       _alloca_exception
1:  bnei    a0, EXCCAUSE_SYSCALL, 2f
    j       _syscall_exception
2:  j       _fatal

    .org 0x3c0                  // double exception vector: fatal
    movi    a0, 0x101
    j       _fatal

    .org 0x400
    // the handlers: first in .text (esp32s3_sim.ld), within J's reach of the vectors
    .section .text.vectors_handlers, "ax"
    .align  4

// MOVSP found the caller's frame spilled: move its base save area under the new stack pointer
// by reloading it (underflow handler of the caller's call size) and retry the MOVSP.
_alloca_exception:
    rsr     a0, windowbase      // WINDOWBASE before the rotation
    rotw    -1                  // old a0..a3 now a4..a7; a0..a3 are the spilled frame's: free
    rsr     a2, ps
    extui   a3, a2, PS_OWB_SHIFT, PS_OWB_BITS
    xor     a3, a3, a4          // bits that differ between PS.OWB and the rotated base
    rsr     a4, excsave1        // the original a0 (in a4 after the rotation)
    slli    a3, a3, PS_OWB_SHIFT
    xor     a2, a2, a3
    wsr     a2, ps              // PS.OWB = current window base, for RFWU
    rsync
    bbsi.l  a4, 31, 1f          // the caller's call size is in its return address' top bits
    j       _WindowUnderflow4   // (a jump: the vectors are in another section, out of reach)
1:  rotw    -1
    bbsi.l  a8, 30, 2f
    j       _WindowUnderflow8
2:  rotw    -1
    j       _WindowUnderflow12

// SYSCALL with a2 = 0 (SYS_nop): "spill the register windows", which newlib's setjmp asks for
// before it copies its caller's save areas (MicroPython's NLR is setjmp/longjmp). Done in user
// mode: RFE to _spill_windows, which makes a chain of CALL4s 64 registers deep (the overflow
// handlers spill every older frame) and jumps back after the SYSCALL. It runs in the caller's
// window: its a2..a3 (the syscall's number and result) and a4..a7 (CALL4's) are not kept but
// a4, which it saves: what newlib's setjmp keeps across the SYSCALL.
_syscall_exception:
    bnez    a2, _fatal              // only SYS_nop
    movi    a2, _spill_state
    rsr     a0, epc1
    addi    a0, a0, 3               // past the SYSCALL
    s32i    a0, a2, 4
    movi    a0, _spill_windows
    wsr     a0, epc1
    rsr     a0, excsave1
    rfe

_spill_windows:
    movi    a2, _spill_state
    s32i    a4, a2, 0
    movi    a6, 20                  // 20 CALL4 frames: over the 64 physical registers
    call4   _spill_chain
    movi    a2, _spill_state
    l32i    a4, a2, 0
    l32i    a3, a2, 4
    movi    a2, 0                   // the syscall's result
    jx      a3

    .align  4
_spill_chain:
    entry   a1, 16
    beqz    a2, 1f
    addi    a6, a2, -1
    call4   _spill_chain
1:  retw

// a0: 0x100 + vector for interrupts/kernel/double exceptions, the EXCCAUSE for user ones.
// Drop the live frames (the stack may be what broke), switch to the fatal stack, call C.
_fatal:
    mov     a6, a0
    rsr     a7, epc1
    rsr     a8, excvaddr
    rsr     a9, depc
    rsr     a2, windowbase
    movi    a3, 1
    ssl     a2
    sll     a3, a3
    wsr     a3, windowstart
    rsync
    movi    a1, _fatal_stack_top
    movi    a0, 0
    movi    a2, PS_WOE | PS_UM | 15  // all interrupts masked
    wsr     a2, ps
    rsync
    call4   xtensa_fatal
1:  j       1b

    .global _start
_start:
    movi    a2, _vector_table
    wsr     a2, vecbase
    movi    a2, 0
    wsr     a2, intenable
    wsr     a2, windowbase
    rsync
    movi    a2, 1
    wsr     a2, windowstart
    rsync
    movi    a0, 0
    movi    a1, _stack_top
    movi    a2, PS_WOE | PS_UM  // interrupt level 0, EXCM clear
    wsr     a2, ps
    rsync
    movi    a2, 1               // coprocessor 0: the FPU
    wsr     a2, cpenable
    rsync
    call4   xtensa_start
1:  j       1b

    .section .bss
    .align  4
_spill_state:                       // a4 of the frame that made the SYSCALL, its return address
    .space  8
