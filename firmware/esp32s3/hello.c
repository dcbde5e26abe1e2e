// Bare-metal smoke test of the ESP32-S3 core's toolchain, start-up code and qemu: built with
// boards/qemu/ESP32S3's startup.S and linker script, run on qemu-system-xtensa's `sim` machine
// with semihosting (tests/test_xtensa_core.py). Each line checks one thing the MicroPython
// build relies on: window overflow/underflow (deep recursion), MOVSP's alloca exception,
// newlib's setjmp/longjmp across spilled frames (MicroPython's NLR), the FPU (coprocessor 0),
// 64-bit division from libgcc, CCOUNT.
#include <alloca.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../boards/qemu/ESP32S3/semihosting.h"

static void say(const char *s) {
    simcall(SYS_WRITE, 1, (int)s, strlen(s));
}

// "label value\n" without newlib's stdio (which wants malloc and file syscalls)
static void say_num(const char *label, unsigned long v) {
    char digits[12];
    int n = sizeof(digits);
    digits[--n] = 0;
    digits[--n] = '\n';
    do {
        digits[--n] = '0' + v % 10;
        v /= 10;
    } while (v);
    say(label);
    say(" ");
    say(digits + n);
}

void exit(int status) {
    simcall(SYS_EXIT, status, 0, 0);
    for (;;) {
    }
}

void xtensa_fatal(uint32_t cause, uint32_t epc1, uint32_t excvaddr, uint32_t depc) {
    say_num("Xtensa exception caught: cause", cause);
    say_num("EPC1", epc1);
    exit(2);
}

// deep enough to cycle the 64 physical registers many times over
static int __attribute__((noinline)) depth(volatile int n) {
    volatile int keep[4] = {n, n + 1, n + 2, n + 3};
    return n == 0 ? 0 : keep[0] + depth(n - 1) - keep[0] + 1;
}

static int __attribute__((noinline)) with_alloca(int n) {
    volatile char *p = alloca(n);
    for (int i = 0; i < n; i++) {
        p[i] = (char)i;
    }
    return depth(20) + p[n - 1];
}

static jmp_buf env;

static void __attribute__((noinline)) jump_from(volatile int n) {
    if (n == 0) {
        longjmp(env, 42);
    }
    jump_from(n - 1);
}

extern uint32_t _sbss, _ebss;

void xtensa_start(void) {
    memset(&_sbss, 0, (char *)&_ebss - (char *)&_sbss);
    say("hello from the ESP32-S3 core\n");
    say_num("recursion", depth(200));
    say_num("alloca", with_alloca(100));
    volatile int got = setjmp(env);
    if (got == 0) {
        jump_from(50);
    }
    say_num("longjmp", got);
    volatile float a = 1.5f, b = 2.25f;
    say_num("float", (int)(a * b * 1000.0f));
    volatile uint64_t big = 1000000000000ULL;
    say_num("udiv64", (unsigned long)(big / 12345));
    uint32_t c0, c1;
    __asm__ volatile ("rsr %0, ccount" : "=a" (c0));
    depth(10);
    __asm__ volatile ("rsr %0, ccount" : "=a" (c1));
    say_num("ccount advances", c1 != c0);
    exit(0);
}
