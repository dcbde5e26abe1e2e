// qemu's Xtensa semihosting (target/xtensa/xtensa-semi.c): SIMCALL with the call number in a2,
// arguments in a3..a5, the result in a2. For the bare-metal programs on this board's start-up
// code (firmware/esp32s3/hello.c, firmware/esp32s3/tflm) and the MicroPython board (esp32s3_sim.c).
#ifndef ESP32S3_SEMIHOSTING_H
#define ESP32S3_SEMIHOSTING_H

#define SYS_EXIT (1)
#define SYS_WRITE (4)

static inline int simcall(int nr, int a, int b, int c) {
    register int a2 __asm__ ("a2") = nr;
    register int a3 __asm__ ("a3") = a;
    register int a4 __asm__ ("a4") = b;
    register int a5 __asm__ ("a5") = c;
    __asm__ volatile ("simcall" : "+r" (a2), "+r" (a3) : "r" (a4), "r" (a5) : "memory");
    return a2;
}

#endif
