// mpy-lazy board for the Raspberry Pi Pico. The 2 MB flash is split as (docs/FIRMWARE.md):
//   0x10000000  firmware    896 KB  (stock RPI_PICO: 640 KB); the linker does not enforce it,
//                                   tests/test_boards.py and `make firmware` check the size
//   0x100E0000  ROMFS       544 KB  weight containers, read in place through XIP (the largest
//                                   MLPerf Tiny container, AD's, is 290 KB)
//   0x10168000  filesystem  608 KB  littlefs, mounted at / (the runtime's source, installed
//                                   by `mpremote mip install`, takes 548 KB of it)
// rp2_flash.c places ROMFS directly below the filesystem.
#define MICROPY_HW_BOARD_NAME                   "Raspberry Pi Pico (mpy-lazy)"
#define MICROPY_HW_ROMFS_BYTES                  (544 * 1024)
#define MICROPY_HW_FLASH_STORAGE_BYTES          (608 * 1024)
