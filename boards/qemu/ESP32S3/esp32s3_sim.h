// Included in every file of the ESP32S3 board's build (mpconfigboard.mk: -include).
// Native code (viper, @native, .mpy native code) runs from the instruction RAM: a windowed
// RETW takes the top two bits of the return address from the PC, so code in the data RAM
// (0x3C000000, the GC heap) cannot return to code in 0x40000000 and back. As the esp32 port
// does (esp_native_code_commit), each finished function is copied there.
#ifndef __ASSEMBLER__  // (-include reaches startup.S too)
#include <stddef.h>
void *esp32s3_sim_commit_exec(void *buf, size_t len, void *reloc);
#define MP_PLAT_COMMIT_EXEC(buf, len, reloc) esp32s3_sim_commit_exec(buf, len, reloc)
#endif
