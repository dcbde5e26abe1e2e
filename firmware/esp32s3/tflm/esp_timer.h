// ESP-IDF's esp_timer.h as far as esp-tflite-micro's esp-nn kernels use it (their per-op
// timing): microseconds since boot. Defined in main.cc, from CCOUNT.
#pragma once
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int64_t esp_timer_get_time(void);
#ifdef __cplusplus
}
#endif
