// Run the TFLite Micro peer (firmware/tflm_pico) on one .tflite model inside rp2040js and count
// the cycles of its inference.
//
//   node tflm.mjs --uf2 tflm_pico.uf2 --bootrom bootrom.bin --model m.tflite --input x.bin
//                 [--offset 0x100000] [--mark-addr 0x4005800c] [--timeout 600]
//
// The model image (header, the .tflite 16-byte aligned, the input bytes; see main.cc) is written
// into the emulated flash at --offset, the UF2 is loaded, and the core runs from the start of
// flash until the firmware prints DONE on UART0.
//
// Marks: the firmware stores a mark number (1 warm-up start, 2 warm-up end, 3 start, 4 end) to
// --mark-addr (the watchdog's SCRATCH0). This harness replaces the RP2040's writeUint32 with one
// that intercepts that address (every other address is written through), and records the cycle
// count at each mark. Cycles: the sum of what rp2040js's core.executeInstruction() returns for
// each instruction (its Cortex-M0+ timing model; deterministic, the same count every run): what
// the emulated clock, hence the RP2040's timer and MicroPython's time.ticks_us(), advances by.
// A store's cycles are added after it executes, so cycles(3 -> 4) covers the store of mark 3 and
// the Invoke() call, and nothing else. rp2040js's own counter core.cycles is also recorded
// ("core_cycles"): it adds 8 cycles per hardware-divider operation on top (sio.js), which the
// pico-sdk's divider code already waits for with its own instructions, so it counts them twice.
// Time spent waiting for an interrupt (WFI/WFE) is counted apart and reported (it must be 0
// inside the marks).
//
// Prints one JSON line on stdout:
//   {"cycles": 3->4, "warm_cycles": 1->2, "marks": {"1": c, ...}, "core_cycles": {...},
//    "wait_cycles": {...},
//    "arena_used": n, "output": [hex per output], "warm_output": [...], "status": {...},
//    "uart": full UART text, "emulated_ms": ...}
// Exit status: 0 when the firmware reported DONE (check "status" and "error" in the JSON),
// 2 on an emulator error (fault, unmodelled access, timeout) with the reason as the last line on
// stderr, 1 on bad arguments.
import { readFileSync } from 'node:fs';
import { Simulator } from 'rp2040js';

const FLASH_BASE = 0x10000000;
const FLASH_BYTES = 2 * 1024 * 1024;
const UF2_MAGIC0 = 0x0a324655;
const UF2_MAGIC1 = 0x9e5d5157;
const IMAGE_MAGIC = 0x4d4c4654; // "TFLM"
const HEADER_BYTES = 32;
const BATCH = 200000;

function usage(msg) {
  process.stderr.write(`tflm.mjs: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = { offset: 0x100000, markAddr: 0x4005800c, timeout: 600 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--uf2') opts.uf2 = value();
    else if (a === '--bootrom') opts.bootrom = value();
    else if (a === '--model') opts.model = value();
    else if (a === '--input') opts.input = value();
    else if (a === '--offset') opts.offset = Number(value());
    else if (a === '--mark-addr') opts.markAddr = Number(value()) >>> 0;
    else if (a === '--timeout') opts.timeout = Number(value());
    else usage(`unknown argument ${a}`);
  }
  for (const k of ['uf2', 'bootrom', 'model', 'input']) if (!opts[k]) usage(`--${k} is required`);
  if (!Number.isInteger(opts.offset) || opts.offset % 4096) usage('--offset must be a multiple of 4096');
  return opts;
}

class EmulatorError extends Error {}

let mcuForErrors = null;
const where = () => (mcuForErrors ? ` (pc=0x${mcuForErrors.core.PC.toString(16)})` : '');
const logger = {
  debug() {},
  info() {},
  warn() {},
  error(component, message) {
    throw new EmulatorError(`[${component}] ${message}${where()}`);
  },
};
// rp2040js reports SIO registers it does not model (the inter-core FIFO among them) with
// console.warn: core 1 is not emulated, so a firmware that waits on it spins for ever.
const SIO_WARN_LIMIT = 1000;
let sioWarnings = 0;
console.warn = (...args) => {
  const text = args.join(' ');
  if (/^(Read from|Write to) invalid SIO address/.test(text)) {
    if (++sioWarnings > SIO_WARN_LIMIT) {
      throw new EmulatorError(`${SIO_WARN_LIMIT} accesses to SIO registers rp2040js does not model, the last: ${text}; `
        + `core 1 is not emulated: was the firmware built single core?${where()}`);
    }
    return;
  }
  process.stderr.write(text + '\n');
};

function loadUF2(path, mcu) {
  const data = readFileSync(path);
  if (data.length === 0 || data.length % 512) usage(`${path}: not a UF2 file`);
  const view = new DataView(data.buffer, data.byteOffset, data.length);
  let end = 0;
  for (let off = 0; off < data.length; off += 512) {
    if (view.getUint32(off, true) !== UF2_MAGIC0 || view.getUint32(off + 4, true) !== UF2_MAGIC1) {
      usage(`${path}: bad UF2 block at ${off}`);
    }
    const addr = view.getUint32(off + 12, true) - FLASH_BASE;
    const size = view.getUint32(off + 16, true);
    mcu.flash.set(data.subarray(off + 32, off + 32 + size), addr);
    end = Math.max(end, addr + size);
  }
  return end;
}

// header (5 x u32: magic, model offset, model bytes, input offset, input bytes), model, input
function modelImage(model, input) {
  const align = (n, a) => Math.ceil(n / a) * a;
  const modelOff = HEADER_BYTES;
  const inputOff = align(modelOff + model.length, 16);
  const image = Buffer.alloc(inputOff + input.length);
  [IMAGE_MAGIC, modelOff, model.length, inputOff, input.length].forEach((v, i) => image.writeUInt32LE(v, 4 * i));
  model.copy(image, modelOff);
  input.copy(image, inputOff);
  return image;
}

function parseReport(uart) {
  const r = { output: [], warm_output: [], status: {}, arena_used: null, error: null };
  for (const line of uart.split(/\r?\n/)) {
    let m;
    if ((m = /^(OUT|WARM_OUT)(\d+) ([0-9a-f]*)$/.exec(line))) {
      (m[1] === 'OUT' ? r.output : r.warm_output)[Number(m[2])] = m[3];
    } else if ((m = /^(ALLOCATE|WARM|INVOKE) status=(-?\d+)$/.exec(line))) {
      r.status[m[1].toLowerCase()] = Number(m[2]);
    } else if ((m = /^ARENA_USED (\d+)$/.exec(line))) {
      r.arena_used = Number(m[1]);
    } else if ((m = /^ERROR (.*)$/.exec(line))) {
      r.error = m[1];
    }
  }
  return r;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const sim = new Simulator();
  const mcu = sim.rp2040;
  mcu.logger = logger;
  mcuForErrors = mcu;
  const bootrom = readFileSync(opts.bootrom);
  if (bootrom.length !== 16384) usage(`${opts.bootrom}: expected 16384 bytes, got ${bootrom.length}`);
  mcu.loadBootrom(new Uint32Array(bootrom.buffer, bootrom.byteOffset, 4096));
  const firmwareEnd = loadUF2(opts.uf2, mcu);
  if (firmwareEnd > opts.offset) usage(`the firmware ends at 0x${firmwareEnd.toString(16)}, past the model image offset 0x${opts.offset.toString(16)}`);
  const image = modelImage(readFileSync(opts.model), readFileSync(opts.input));
  if (opts.offset + image.length > FLASH_BYTES) usage(`model + input (${image.length} B) do not fit in flash from 0x${opts.offset.toString(16)}`);
  mcu.flash.set(image, opts.offset);

  let cycles = 0; // the sum of executed instructions' cycles since reset
  let waitCycles = 0; // cycles spent waiting for an interrupt (WFI/WFE)
  const marks = {};
  const coreMarks = {};
  const waits = {};
  const writeUint32 = mcu.writeUint32.bind(mcu);
  mcu.writeUint32 = (address, value) => {
    if ((address >>> 0) === opts.markAddr) {
      marks[value >>> 0] = cycles;
      coreMarks[value >>> 0] = mcu.core.cycles;
      waits[value >>> 0] = waitCycles;
      return;
    }
    writeUint32(address, value);
  };
  mcu.onBreak = (code) => {
    throw new EmulatorError(`breakpoint ${code} at pc=0x${mcu.core.PC.toString(16)} (HardFault or panic)`);
  };
  let uart = '';
  mcu.uart[0].onByte = (b) => { uart += String.fromCharCode(b); };

  const cycleNanos = 1e9 / 125e6;
  const deadline = Date.now() + opts.timeout * 1000;
  mcu.core.PC = FLASH_BASE;
  while (!/(^|\n)DONE\r?\n/.test(uart)) {
    if (Date.now() > deadline) throw new EmulatorError(`timeout after ${opts.timeout} s; UART so far: ${JSON.stringify(uart.slice(-2000))}`);
    for (let i = 0; i < BATCH; i++) {
      if (mcu.core.waiting) {
        const nanos = sim.clock.nanosToNextAlarm;
        if (!(nanos > 0 && Number.isFinite(nanos))) throw new EmulatorError(`the core waits with no timer alarm pending; UART so far: ${JSON.stringify(uart.slice(-2000))}`);
        sim.clock.tick(nanos);
        waitCycles += nanos / cycleNanos;
        i += nanos / cycleNanos;
      } else {
        const c = mcu.core.executeInstruction();
        cycles += c;
        sim.clock.tick(c * cycleNanos);
      }
    }
  }
  const report = parseReport(uart);
  const span = (a, b) => (a in marks && b in marks ? marks[b] - marks[a] : null);
  const coreSpan = (a, b) => (a in coreMarks && b in coreMarks ? coreMarks[b] - coreMarks[a] : null);
  const waited = (a, b) => (a in waits && b in waits ? waits[b] - waits[a] : null);
  process.stdout.write(JSON.stringify({
    cycles: span(3, 4),
    warm_cycles: span(1, 2),
    marks,
    core_cycles: { warm: coreSpan(1, 2), timed: coreSpan(3, 4) },
    wait_cycles: { warm: waited(1, 2), timed: waited(3, 4) },
    ...report,
    firmware_bytes: firmwareEnd,
    image_bytes: image.length,
    emulated_ms: Math.round(sim.clock.nanos / 1e6),
    uart,
  }) + '\n');
}

try {
  main();
} catch (e) {
  if (!(e instanceof EmulatorError)) throw e;
  process.stderr.write(`emulator error: ${e.message}\n`);
  process.exit(2);
}
