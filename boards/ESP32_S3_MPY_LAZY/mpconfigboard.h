// mpy-lazy board for ESP32-S3 modules with 8 MB flash (untested on hardware).
#define MICROPY_HW_BOARD_NAME               "ESP32-S3 (mpy-lazy)"
#define MICROPY_HW_MCU_NAME                 "ESP32S3"

// As ESP32_GENERIC_S3: UART REPL for modules with a USB-UART bridge, default I2C pins.
#define MICROPY_HW_ENABLE_UART_REPL         (1)
#define MICROPY_HW_I2C0_SCL                 (9)
#define MICROPY_HW_I2C0_SDA                 (8)

// ROMFS: vfs.rom_ioctl maps the partition labelled "romfs" (partitions-8MiB-romfs.csv) and
// MicroPython mounts it at /rom at boot.
#define MICROPY_VFS_ROM                     (1)
