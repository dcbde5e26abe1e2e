// The system calls newlib's stdio, abort() and malloc() end in, and exit(), for bare metal on the
// semihosting console (what an OS port provides; ESP-IDF has its own). TFLM's paths reach them
// only on errors: esp-nn's softmax and assert() print through printf, abort() raises a signal.
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "semihosting.h"  // boards/qemu/ESP32S3 (the Makefile's -I)

// ends qemu with that exit status
void exit(int status) {
    simcall(SYS_EXIT, status, 0, 0);
    for (;;) {
    }
}

int _write(int fd, const void *buf, size_t n) {
    return fd == 1 || fd == 2 ? simcall(SYS_WRITE, 1, (int)buf, (int)n) : (errno = EBADF, -1);
}

int _read(int fd, void *buf, size_t n) {
    (void)fd, (void)buf, (void)n;
    errno = EBADF;
    return -1;
}

int _close(int fd) {
    (void)fd;
    return 0;
}

int _fstat(int fd, struct stat *st) {
    (void)fd;
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int fd) {
    return fd <= 2;
}

long _lseek(int fd, long off, int whence) {
    (void)fd, (void)off, (void)whence;
    errno = ESPIPE;
    return -1;
}

int _getpid(void) {
    return 1;
}

int _kill(int pid, int sig) {
    (void)pid;
    exit(128 + sig);
    return -1;
}

void _exit(int status) {
    exit(status);
}

// malloc's heap (stdio's buffers): 16 KB, nothing else allocates
static uint8_t heap[16 * 1024] __attribute__((aligned(8)));
static size_t heap_used;

void *_sbrk(ptrdiff_t incr) {
    if (incr < 0 || (size_t)incr > sizeof(heap) - heap_used) {
        errno = ENOMEM;
        return (void *)-1;
    }
    void *p = heap + heap_used;
    heap_used += incr;
    return p;
}

// newlib-esp32's stdio brackets its locks with this (ESP-IDF's pthread has it): one thread here
int pthread_setcancelstate(int state, int *old) {
    (void)state;
    if (old) {
        *old = 0;
    }
    return 0;
}
