// tflm_esp32s3: runs one .tflite model with TensorFlow Lite Micro as Espressif ships it for
// ESP-IDF (esp-tflite-micro with the esp-nn kernels) on the ESP32-S3's core in
// qemu-system-xtensa's `sim` machine, bare metal on boards/qemu/ESP32S3's start-up code; the
// peer of bench/xtensa.py --peer.
//
// The model is not compiled in: it is read in place from an image that qemu's generic loader
// puts at TFLM_IMAGE_ADDR in the data RAM (where mpy-lazy's ROMFS image goes), laid out as
// firmware/tflm_pico/main.cc's flash image:
//   u32 magic 'TFLM' (0x4d4c4654), u32 model offset, u32 model bytes, u32 input offset,
//   u32 input bytes  (offsets from the image start; the model 16-byte aligned)
// followed by the .tflite flatbuffer and the input bytes (every input tensor's bytes, in order).
//
// Run: AllocateTensors, copy the input, one warm-up Invoke, copy the input again (the planner may
// have reused the input's memory), the timed Invoke; CCOUNT read around each Invoke.
// Report on the semihosting console, one line each:
//   TFLM_ESP32S3 image=0x... arena=N       at boot
//   MODEL bytes=N input=N
//   ALLOCATE status=N                      TfLiteStatus, 0 = kTfLiteOk
//   WARM status=N ccount=N / INVOKE status=N ccount=N
//   WARM_OUT<i> <hex> / OUT<i> <hex>       every output tensor's bytes after each Invoke
//   ARENA_USED N                           interpreter.arena_used_bytes()
//   ERROR <text>                           (instead of what could not be done)
//   DONE                                   always last; qemu then exits with status 0
// TFLM's own messages (MicroPrintf) go to the same console.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

extern "C" int _write(int fd, const void* buf, size_t n);

#ifndef TFLM_IMAGE_ADDR
#define TFLM_IMAGE_ADDR 0x3E000000u
#endif
#ifndef TFLM_ARENA_BYTES
#define TFLM_ARENA_BYTES (512 * 1024)
#endif

namespace {

constexpr uint32_t kMagic = 0x4d4c4654;  // "TFLM" little-endian

struct ImageHeader {
  uint32_t magic;
  uint32_t model_offset;
  uint32_t model_bytes;
  uint32_t input_offset;
  uint32_t input_bytes;
};

alignas(16) uint8_t tensor_arena[TFLM_ARENA_BYTES];
alignas(tflite::MicroInterpreter) uint8_t interpreter_storage[sizeof(tflite::MicroInterpreter)];

// Every op the benchmark's int8 models use (KWS, VWW, ResNet-8, AD); TFLM reports any other as
// "Didn't find op for builtin opcode" at AllocateTensors.
using Resolver = tflite::MicroMutableOpResolver<9>;

// the semihosting console's write (syscalls.c)
void write_out(const char* s, size_t n) {
  while (n > 0) {
    int k = _write(1, s, n);
    if (k <= 0) return;
    s += k;
    n -= k;
  }
}

// printf to the console through vsnprintf, without newlib's stdio streams (buffers, locks)
void say(const char* format, ...) {
  static char line[256];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  if (n > 0) write_out(line, n < static_cast<int>(sizeof(line)) ? n : sizeof(line) - 1);
}

inline uint32_t ccount() {
  uint32_t c;
  __asm__ volatile("rsr %0, ccount" : "=a"(c)::"memory");
  return c;
}

void print_outputs(tflite::MicroInterpreter& it, const char* label) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < it.outputs_size(); i++) {
    const TfLiteTensor* t = it.output(i);
    say("%s%u ", label, static_cast<unsigned>(i));
    char pair[2];
    for (size_t k = 0; k < t->bytes; k++) {
      pair[0] = digits[t->data.uint8[k] >> 4];
      pair[1] = digits[t->data.uint8[k] & 15];
      write_out(pair, 2);
    }
    write_out("\n", 1);
  }
}

// Copies the image's input bytes into the input tensors; false (after an ERROR line) when the
// sizes do not match.
bool load_inputs(tflite::MicroInterpreter& it, const uint8_t* input, size_t n) {
  size_t want = 0;
  for (size_t i = 0; i < it.inputs_size(); i++) want += it.input(i)->bytes;
  if (want != n) {
    say("ERROR input is %u bytes, the model's inputs take %u\n", static_cast<unsigned>(n),
        static_cast<unsigned>(want));
    return false;
  }
  size_t off = 0;
  for (size_t i = 0; i < it.inputs_size(); i++) {
    TfLiteTensor* t = it.input(i);
    memcpy(t->data.raw, input + off, t->bytes);
    off += t->bytes;
  }
  return true;
}

// One Invoke between two CCOUNT reads (CCOUNT wraps after 2^32 cycles: 17.9 s at 240 MHz, far
// more than one inference of these models).
TfLiteStatus timed_invoke(tflite::MicroInterpreter& it, uint32_t* cycles) {
  uint32_t c0 = ccount();
  TfLiteStatus s = it.Invoke();
  *cycles = ccount() - c0;
  return s;
}

void run() {
  const auto* base = reinterpret_cast<const uint8_t*>(TFLM_IMAGE_ADDR);
  const auto* h = reinterpret_cast<const ImageHeader*>(base);
  if (h->magic != kMagic) {
    say("ERROR no model image at 0x%08x (magic 0x%08x)\n", static_cast<unsigned>(TFLM_IMAGE_ADDR),
        static_cast<unsigned>(h->magic));
    return;
  }
  say("MODEL bytes=%u input=%u\n", static_cast<unsigned>(h->model_bytes),
      static_cast<unsigned>(h->input_bytes));
  const tflite::Model* model = tflite::GetModel(base + h->model_offset);
  if (model->version() != TFLITE_SCHEMA_VERSION) {
    say("ERROR model schema version %u, TFLM wants %d\n", static_cast<unsigned>(model->version()),
        TFLITE_SCHEMA_VERSION);
    return;
  }

  static Resolver resolver;
  resolver.AddAdd();
  resolver.AddAveragePool2D();
  resolver.AddConv2D();
  resolver.AddDepthwiseConv2D();
  resolver.AddFullyConnected();
  resolver.AddMaxPool2D();
  resolver.AddMean();
  resolver.AddReshape();
  resolver.AddSoftmax();

  auto* it = new (interpreter_storage)
      tflite::MicroInterpreter(model, resolver, tensor_arena, sizeof(tensor_arena));
  TfLiteStatus s = it->AllocateTensors();
  say("ALLOCATE status=%d\n", static_cast<int>(s));
  if (s != kTfLiteOk) return;

  const uint8_t* input = base + h->input_offset;
  uint32_t cycles;
  if (!load_inputs(*it, input, h->input_bytes)) return;
  s = timed_invoke(*it, &cycles);
  say("WARM status=%d ccount=%u\n", static_cast<int>(s), static_cast<unsigned>(cycles));
  if (s != kTfLiteOk) return;
  print_outputs(*it, "WARM_OUT");

  load_inputs(*it, input, h->input_bytes);
  s = timed_invoke(*it, &cycles);
  say("INVOKE status=%d ccount=%u\n", static_cast<int>(s), static_cast<unsigned>(cycles));
  if (s != kTfLiteOk) return;
  print_outputs(*it, "OUT");
  say("ARENA_USED %u\n", static_cast<unsigned>(it->arena_used_bytes()));
}

}  // namespace

// TFLM's platform hooks (in place of tensorflow/lite/micro/debug_log.cc, which prints to stderr)
extern "C" void DebugLog(const char* format, va_list args) {
  static char line[256];
  int n = vsnprintf(line, sizeof(line), format, args);
  if (n > 0) write_out(line, n < static_cast<int>(sizeof(line)) ? n : sizeof(line) - 1);
}

extern "C" int DebugVsnprintf(char* buffer, size_t buf_size, const char* format, va_list vlist) {
  return vsnprintf(buffer, buf_size, format, vlist);
}

// esp-nn's kernels in esp-tflite-micro time themselves with ESP-IDF's esp_timer (esp_timer.h
// here): microseconds since boot, from CCOUNT at the core's 240 MHz.
extern "C" int64_t esp_timer_get_time(void) {
  return ccount() / 240;
}

// boards/qemu/ESP32S3/startup.S calls this on a fatal exception (an illegal instruction too).
extern "C" void xtensa_fatal(uint32_t cause, uint32_t epc1, uint32_t excvaddr, uint32_t depc) {
  say("ERROR Xtensa exception caught: %s %u EPC1=0x%08x EXCVADDR=0x%08x DEPC=0x%08x\n",
      cause >= 0x100 ? "vector" : "EXCCAUSE", static_cast<unsigned>(cause & 0xff),
      static_cast<unsigned>(epc1), static_cast<unsigned>(excvaddr), static_cast<unsigned>(depc));
  say("DONE\n");
  exit(1);
}

extern "C" uint32_t _sbss, _ebss;

// boards/qemu/ESP32S3/startup.S's entry, on its stack with the windowed ABI set up
extern "C" void xtensa_start(void) {
  memset(&_sbss, 0, reinterpret_cast<char*>(&_ebss) - reinterpret_cast<char*>(&_sbss));
  say("TFLM_ESP32S3 image=0x%08x arena=%u\n", static_cast<unsigned>(TFLM_IMAGE_ADDR),
      static_cast<unsigned>(sizeof(tensor_arena)));
  run();
  say("DONE\n");
  exit(0);
}
