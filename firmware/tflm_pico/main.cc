// tflm_pico: runs one .tflite model with TensorFlow Lite Micro (pico-tflmicro, CMSIS-NN kernels,
// core 0 only) and reports what it computed, for mpy-lazy's emulated benchmark
// (firmware/rp2040js/tflm.mjs writes the model into flash and reads the report).
//
// The model is not compiled in: it is read in place from flash, from an image at flash offset
// TFLM_PICO_MODEL_OFFSET (XIP address 0x10000000 + offset):
//   u32 magic 'TFLM' (0x4d4c4654), u32 model offset, u32 model bytes, u32 input offset,
//   u32 input bytes  (offsets from the image start; the model 16-byte aligned)
// followed by the .tflite flatbuffer and the input bytes (every input tensor's bytes, in order).
//
// Run: AllocateTensors, copy the input, one warm-up Invoke, copy the input again (the planner may
// have reused the input's memory), the timed Invoke. Each Invoke sits between two marks: a 32-bit
// store of the mark number to TFLM_PICO_MARK_ADDR (the watchdog's SCRATCH0 register, harmless on
// a real board), which the emulator harness intercepts to record the cycle count:
//   1 warm-up start, 2 warm-up end, 3 start, 4 end.
// Report, on UART0 (stdio, 115200 8N1), one line each:
//   TFLM_PICO offset=0x... arena=N         at boot
//   MODEL bytes=N input=N
//   ALLOCATE status=N                      TfLiteStatus, 0 = kTfLiteOk
//   WARM status=N / INVOKE status=N
//   WARM_OUT<i> <hex> / OUT<i> <hex>       every output tensor's bytes after each Invoke
//   ARENA_USED N                           interpreter.arena_used_bytes()
//   ERROR <text>                           (instead of what could not be done)
//   DONE                                   always last
// TFLM's own messages (MicroPrintf) go to the same UART.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "pico/stdlib.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

#ifndef TFLM_PICO_MODEL_OFFSET
#define TFLM_PICO_MODEL_OFFSET 0x100000
#endif
#ifndef TFLM_PICO_ARENA_BYTES
#define TFLM_PICO_ARENA_BYTES (200 * 1024)
#endif
#ifndef TFLM_PICO_MARK_ADDR
#define TFLM_PICO_MARK_ADDR 0x4005800cu  // WATCHDOG_BASE + SCRATCH0
#endif

extern "C" char __flash_binary_end;  // pico-sdk linker script: the end of the firmware in flash

namespace {

constexpr uint32_t kMagic = 0x4d4c4654;  // "TFLM" little-endian

struct ImageHeader {
  uint32_t magic;
  uint32_t model_offset;
  uint32_t model_bytes;
  uint32_t input_offset;
  uint32_t input_bytes;
};

alignas(16) uint8_t tensor_arena[TFLM_PICO_ARENA_BYTES];
alignas(tflite::MicroInterpreter) uint8_t interpreter_storage[sizeof(tflite::MicroInterpreter)];

// Every op the benchmark's int8 models use (KWS, VWW, ResNet-8, person_detect, the digits MLP
// and CNN); TFLM reports any other as "Didn't find op for builtin opcode" at AllocateTensors.
using Resolver = tflite::MicroMutableOpResolver<9>;

inline void mark(uint32_t id) {
  asm volatile("" ::: "memory");
  *reinterpret_cast<volatile uint32_t*>(TFLM_PICO_MARK_ADDR) = id;
  asm volatile("" ::: "memory");
}

void print_hex(const char* label, size_t i, const uint8_t* p, size_t n) {
  printf("%s%u ", label, static_cast<unsigned>(i));
  for (size_t k = 0; k < n; k++) printf("%02x", p[k]);
  printf("\n");
}

void print_outputs(tflite::MicroInterpreter& it, const char* label) {
  for (size_t i = 0; i < it.outputs_size(); i++) {
    const TfLiteTensor* t = it.output(i);
    print_hex(label, i, t->data.uint8, t->bytes);
  }
}

// Copies the image's input bytes into the input tensors; false (after an ERROR line) when the
// sizes do not match.
bool load_inputs(tflite::MicroInterpreter& it, const uint8_t* input, size_t n) {
  size_t off = 0;
  for (size_t i = 0; i < it.inputs_size(); i++) {
    TfLiteTensor* t = it.input(i);
    if (off + t->bytes > n) break;
    memcpy(t->data.raw, input + off, t->bytes);
    off += t->bytes;
  }
  size_t want = 0;
  for (size_t i = 0; i < it.inputs_size(); i++) want += it.input(i)->bytes;
  if (off != n || want != n) {
    printf("ERROR input is %u bytes, the model's inputs take %u\n", static_cast<unsigned>(n),
           static_cast<unsigned>(want));
    return false;
  }
  return true;
}

void run() {
  const uintptr_t image_addr = XIP_BASE + TFLM_PICO_MODEL_OFFSET;
  if (reinterpret_cast<uintptr_t>(&__flash_binary_end) > image_addr) {
    printf("ERROR the firmware ends at %p, past the model image at 0x%08x\n", &__flash_binary_end,
           static_cast<unsigned>(image_addr));
    return;
  }
  const auto* h = reinterpret_cast<const ImageHeader*>(image_addr);
  const auto* base = reinterpret_cast<const uint8_t*>(image_addr);
  if (h->magic != kMagic) {
    printf("ERROR no model image at flash offset 0x%x (magic 0x%08x)\n", TFLM_PICO_MODEL_OFFSET,
           static_cast<unsigned>(h->magic));
    return;
  }
  printf("MODEL bytes=%u input=%u\n", static_cast<unsigned>(h->model_bytes),
         static_cast<unsigned>(h->input_bytes));
  const tflite::Model* model = tflite::GetModel(base + h->model_offset);
  if (model->version() != TFLITE_SCHEMA_VERSION) {
    printf("ERROR model schema version %u, TFLM wants %d\n",
           static_cast<unsigned>(model->version()), TFLITE_SCHEMA_VERSION);
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
  printf("ALLOCATE status=%d\n", static_cast<int>(s));
  if (s != kTfLiteOk) return;

  const uint8_t* input = base + h->input_offset;
  if (!load_inputs(*it, input, h->input_bytes)) return;
  mark(1);
  s = it->Invoke();
  mark(2);
  printf("WARM status=%d\n", static_cast<int>(s));
  if (s != kTfLiteOk) return;
  print_outputs(*it, "WARM_OUT");

  load_inputs(*it, input, h->input_bytes);
  mark(3);
  s = it->Invoke();
  mark(4);
  printf("INVOKE status=%d\n", static_cast<int>(s));
  if (s != kTfLiteOk) return;
  print_outputs(*it, "OUT");
  printf("ARENA_USED %u\n", static_cast<unsigned>(it->arena_used_bytes()));
}

}  // namespace

int main() {
  stdio_init_all();
  printf("TFLM_PICO offset=0x%x arena=%u\n", TFLM_PICO_MODEL_OFFSET,
         static_cast<unsigned>(sizeof(tensor_arena)));
  run();
  printf("DONE\n");
  stdio_flush();
  for (;;) tight_loop_contents();
}
