// mpy-lazy's bare-metal board for the ESP32-S3's core on qemu-system-xtensa's `sim` machine:
// what upstream ports/qemu leaves to each CPU: start-up, the console (the "UART" of
// ports/qemu/uart.c is the simulator's semihosting console, SIMCALL), ticks from CCOUNT, exit,
// and the GC's register scan of the windowed ABI.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "py/mpconfig.h"
#include "py/mpprint.h"
#include "py/gc.h"
#include "py/mpstate.h"
#include "py/persistentcode.h"
#include "py/runtime.h"
#include "shared/runtime/gchelper.h"
#include "uart.h"

// the core's clock as imported into qemu (firmware/esp32s3/build_qemu.sh)
#define CPU_FREQ_MHZ (240)

#include "semihosting.h"  // simcall(), SYS_EXIT, SYS_WRITE

// qemu target/xtensa/xtensa-semi.c: the calls the console needs besides those
#define SYS_READ (3)
#define SYS_SELECT_ONE (29)
#define SELECT_ONE_READ (1)

void uart_init(void) {
}

int uart_rx_any(void) {
    static const int32_t no_wait[2] = {0, 0};
    return simcall(SYS_SELECT_ONE, 0, SELECT_ONE_READ, (int)no_wait) > 0;
}

// qemu runs without a chardev console (-serial none): fd 0 is its own stdin, a blocking read.
int uart_rx_chr(void) {
    uint8_t c;
    return simcall(SYS_READ, 0, (int)&c, 1) == 1 ? c : UART_RX_NO_CHAR;
}

void uart_tx_strn(const char *buf, size_t len) {
    while (len > 0) {
        int n = simcall(SYS_WRITE, 1, (int)buf, len);
        if (n <= 0) {
            return;
        }
        buf += n;
        len -= n;
    }
}

static inline uint32_t ccount(void) {
    uint32_t c;
    __asm__ volatile ("rsr %0, ccount" : "=a" (c));
    return c;
}

// CCOUNT wraps every 17.9 s at 240 MHz: extend it to 64 bits on each read.
static uint64_t cycles(void) {
    static uint32_t last;
    static uint64_t high;
    uint32_t now = ccount();
    if (now < last) {
        high += 1ULL << 32;
    }
    last = now;
    return high | now;
}

uintptr_t ticks_us(void) {
    return cycles() / CPU_FREQ_MHZ;
}

uintptr_t ticks_ms(void) {
    return cycles() / (CPU_FREQ_MHZ * 1000);
}

// time.ticks_cpu(): CCOUNT (ports/qemu's own returns 0; mpconfigboard.mk renames it)
mp_uint_t mp_hal_ticks_cpu(void) {
    return ccount();
}

void exit(int status) {
    simcall(SYS_EXIT, status, 0, 0);
    for (;;) {
    }
}

#ifndef NDEBUG
void __assert_func(const char *file, int line, const char *func, const char *expr) {
    (void)func;
    mp_printf(&mp_plat_print, "Assertion '%s' failed, at file %s:%d\n", expr, file, line);
    exit(1);
}
#endif

// Called from startup.S on a fatal exception. The "exception caught:" line is what
// firmware/qemu_run.py looks for (as upstream's ARM error handler prints).
void xtensa_fatal(uint32_t cause, uint32_t epc1, uint32_t excvaddr, uint32_t depc) {
    mp_printf(&mp_plat_print, "Xtensa exception caught: %s %u EPC1=0x%08x EXCVADDR=0x%08x DEPC=0x%08x\n",
        cause >= 0x100 ? "vector" : "EXCCAUSE", (unsigned)(cause & 0xff),
        (unsigned)epc1, (unsigned)excvaddr, (unsigned)depc);
    exit(1);
}

// The registers of the windowed ABI live in 64 physical ones; a chain of calls 8 registers
// deep each (call8) makes the overflow handlers spill all the caller frames to the stack, where
// the scan finds their pointers (as MicroPython's esp32 port does).
static void __attribute__((noinline)) collect_spilled(volatile unsigned int level) {
    if (level < 64 / 8) {
        collect_spilled(level + 1);
    } else {
        void *sp;
        __asm__ volatile ("mov %0, a1" : "=a" (sp));
        gc_collect_root((void **)sp, ((uintptr_t)MP_STATE_THREAD(stack_top) - (uintptr_t)sp) / sizeof(void *));
    }
}

void gc_helper_collect_regs_and_stack(void) {
    collect_spilled(0);
}

// Native code's home in the instruction RAM (esp32s3_sim.h): a bump allocator over the linker
// script's .exec area; nothing is freed (about 8 KB per test module on the runtime suite).
extern uint8_t _exec_start[], _exec_end[];
static uint8_t *exec_next = _exec_start;

void *esp32s3_sim_commit_exec(void *buf, size_t len, void *reloc) {
    len = (len + 3) & ~3;
    if (len > (size_t)(_exec_end - exec_next)) {
        m_malloc_fail(len);
    }
    void *p = exec_next;
    exec_next += len;
    if (reloc) {
        mp_native_relocate(reloc, buf, (uintptr_t)p);
    }
    memcpy(p, buf, len);
    return p;
}

extern uint32_t _sbss, _ebss;

void xtensa_start(void) {
    memset(&_sbss, 0, (char *)&_ebss - (char *)&_sbss);
    extern int main(int argc, char **argv);
    main(0, NULL);
    exit(0);
}
