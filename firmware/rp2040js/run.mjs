// Run MicroPython scripts on the RPI_PICO_MPY_LAZY firmware inside the rp2040js emulator.
//
//   node run.mjs --uf2 firmware.uf2 --bootrom bootrom.bin [--romfs img --romfs-offset 0xB0000]
//                [--flash flash.bin] [--save-flash flash.bin] [--timeout 600] [--emulated-timeout S]
//                script1.py [script2.py ...]
//   node run.mjs --uf2 ... --bootrom ... [--romfs ...] [--flash ...] [--save-flash ...] --serial-stdio
//
// Scripts: boots the firmware once, enters the raw REPL over the emulated USB CDC serial and runs
// each script in turn (same interpreter, no reset in between). Prints one JSON line per script:
//   {"script": path, "out": stdout text, "err": traceback text ("" when it ran cleanly),
//    "marks": {value: cycles}}
// Marks: a store of a number to 0x4005800C (the watchdog's SCRATCH0, free for software) is not
// written but recorded with the cycle count at that moment: the sum of the cycles of every
// instruction executed since reset (rp2040js's executeInstruction(), its Cortex-M0+ timing; the
// store's own cycles are added after it). A script times a span with `machine.mem32[0x4005800C]
// = 3` ... `= 4`: firmware/rp2040js/tflm.mjs times TFLite Micro between the same marks.
// --serial-stdio: no scripts; the USB serial is this process's stdin/stdout, raw bytes both ways
// (firmware/rp2_run.py puts a pty on the other end, for mpremote), until stdin closes or SIGTERM.
// "rp2040js: usb connected" on stderr says the board enumerated.
//
// Flash: rp2040js's flash controller is a stub, so the bootrom's flash functions are emulated
// here (its function table entries IF EX RE RP FC CX are patched to a `bkpt` that this harness
// services): flash_range_erase sets 4 KB sectors to 0xFF, flash_range_program ANDs the data in
// (NOR flash), the others return. The firmware's littlefs and ROMFS partition are then writable
// (`mpremote romfs deploy`, `mip install`). --flash loads a 2 MB flash image saved by
// --save-flash (written on exit) before the UF2 and the ROMFS image.
//
// Exit status: 0 when every script ran (a Python exception is reported in "err", not here),
// 2 on an emulator error (unaligned 32/16-bit access, breakpoint = pico-sdk HardFault handler,
// a spin on unmodelled SIO registers: core 1 is not emulated) or a timeout, with the reason as
// the last line on stderr,
// 1 on bad arguments.
//
// --timeout is wall-clock seconds for the whole run; --emulated-timeout S stops the run after S
// seconds of the emulated Pico's own clock (125 MHz cycles): a budget that means the same on an
// idle machine and on a loaded one, where rp2040js may run 10x slower (set a generous --timeout
// with it, as a backstop). Both end the run with exit status 2.
import { readFileSync, writeFileSync } from 'node:fs';
import { Simulator, USBCDC, LogLevel } from 'rp2040js';

const FLASH_BASE = 0x10000000;
const UF2_MAGIC0 = 0x0a324655;
const UF2_MAGIC1 = 0x9e5d5157;
const CDC_FIFO_BYTES = 512; // rp2040js's host-side buffer: bytes pushed beyond it are dropped
const BATCH = 200000; // instructions between host-side I/O steps
const SERIAL_BATCH = 5000; // --serial-stdio: shorter batches, quicker replies to the host
const FLASH_BYTES = 2 * 1024 * 1024; // the Pico's flash (PICO_FLASH_SIZE_BYTES)
const SECTOR = 4096;
const HOOK_BKPT = 0xbe70; // `bkpt 0x70`: the patched entry of an emulated bootrom function
const MARK_ADDR = 0x4005800c; // watchdog SCRATCH0: stores to it are marks (see above)

function usage(msg) {
  process.stderr.write(`run.mjs: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = { scripts: [], timeout: 600, romfsOffset: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--uf2') opts.uf2 = value();
    else if (a === '--bootrom') opts.bootrom = value();
    else if (a === '--romfs') opts.romfs = value();
    else if (a === '--romfs-offset') opts.romfsOffset = Number(value());
    else if (a === '--timeout') opts.timeout = Number(value());
    else if (a === '--emulated-timeout') opts.emulatedTimeout = Number(value());
    else if (a === '--flash') opts.flash = value();
    else if (a === '--save-flash') opts.saveFlash = value();
    else if (a === '--serial-stdio') opts.serial = true;
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else opts.scripts.push(a);
  }
  opts.uf2 = opts.uf2 || process.env.MPY_LAZY_RP2_UF2;
  if (!opts.uf2) usage('no firmware: give --uf2 or set MPY_LAZY_RP2_UF2');
  if (!opts.bootrom) usage('no RP2040 bootrom: give --bootrom (16 KB raw binary)');
  if (opts.romfs && !Number.isInteger(opts.romfsOffset)) usage('--romfs needs --romfs-offset');
  if (opts.serial && opts.scripts.length) usage('--serial-stdio takes no scripts');
  return opts;
}

// Emulator trouble becomes an exception that ends the run with exit status 2.
class EmulatorError extends Error {}

let mcuForErrors = null; // the PC is what tells where a fault came from
const where = () => (mcuForErrors ? ` (pc=0x${mcuForErrors.core.PC.toString(16)})` : '');
const logger = {
  debug() {},
  info() {},
  warn() {}, // unmodelled peripherals (XIP_CTRL, ROSC, ...) are read during boot: not our concern
  error(component, message) {
    throw new EmulatorError(`[${component}] ${message}${where()}`);
  },
};

// rp2040js reports reads and writes of SIO registers it does not model with console.warn, not
// its logger. The inter-core FIFO (0x50 FIFO_ST, 0x54 FIFO_WR, 0x58 FIFO_RD) is among them: core 1
// is not emulated, so _thread and multicore code spin on it for ever, printing millions of lines
// (node ran out of memory after 15 min). A few such accesses are a probe (a test checking for
// core 1); more is that spin, and an error.
const SIO_WARN_LIMIT = 1000;
let sioWarnings = 0;
console.warn = (...args) => {
  const text = args.join(' ');
  if (/^(Read from|Write to) invalid SIO address/.test(text)) {
    if (++sioWarnings > SIO_WARN_LIMIT) {
      throw new EmulatorError(`${SIO_WARN_LIMIT} accesses to SIO registers rp2040js does not model, the last: ${text}; `
        + `0x50/0x54/0x58 are the inter-core FIFO: core 1 is not emulated (_thread, multicore)${where()}`);
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

// The bootrom's flash functions (RP2040 datasheet 2.8.3.1.3), by their function table codes.
function hookFlash(mcu) {
  const rom = new DataView(mcu.bootrom.buffer);
  const code = (s) => s.charCodeAt(0) | (s.charCodeAt(1) << 8);
  const wanted = { IF: 'connect', EX: 'exit_xip', RE: 'erase', RP: 'program', FC: 'flush', CX: 'enter_xip' };
  const hooks = new Map(); // entry address -> name
  for (let p = rom.getUint16(0x14, true); rom.getUint16(p, true); p += 4) {
    for (const [c, name] of Object.entries(wanted)) {
      if (rom.getUint16(p, true) === code(c)) hooks.set(rom.getUint16(p + 2, true) & ~1, name);
    }
  }
  if (hooks.size !== Object.keys(wanted).length) usage('bootrom: flash functions not found in its table');
  for (const addr of hooks.keys()) {
    const word = rom.getUint32(addr & ~3, true);
    const shift = (addr & 2) * 8;
    rom.setUint32(addr & ~3, ((word & ~(0xffff << shift)) | (HOOK_BKPT << shift)) >>> 0, true);
  }
  const stats = { erased: 0, programmed: 0 };
  // called for a `bkpt`: true when it was one of ours (serviced, returned to the caller)
  const service = () => {
    const core = mcu.core;
    const name = hooks.get((core.PC - 2) >>> 0);
    if (!name) return false;
    const [r0, r1, r2] = [core.registers[0] >>> 0, core.registers[1] >>> 0, core.registers[2] >>> 0];
    if (name === 'erase') { // (offset, count, block size, block command): whole sectors
      const start = Math.floor(r0 / SECTOR) * SECTOR;
      const end = Math.ceil((r0 + r1) / SECTOR) * SECTOR;
      if (end > FLASH_BYTES) throw new EmulatorError(`flash_range_erase(0x${r0.toString(16)}, ${r1}) beyond the flash`);
      mcu.flash.fill(0xff, start, end);
      stats.erased += end - start;
    } else if (name === 'program') { // (offset, data, count)
      if (r0 + r2 > FLASH_BYTES) throw new EmulatorError(`flash_range_program(0x${r0.toString(16)}, ${r2}) beyond the flash`);
      for (let i = 0; i < r2; i++) mcu.flash[r0 + i] &= mcu.readUint8(r1 + i);
      stats.programmed += r2;
    }
    core.PC = core.LR & ~1;
    return true;
  };
  return { service, stats };
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
  const flash = hookFlash(mcu);
  if (opts.flash) {
    const image = readFileSync(opts.flash);
    if (image.length !== FLASH_BYTES) usage(`${opts.flash}: expected a ${FLASH_BYTES}-byte flash image`);
    mcu.flash.set(image, 0);
  }
  const firmwareEnd = loadUF2(opts.uf2, mcu);
  if (opts.romfs) {
    if (opts.romfsOffset < firmwareEnd) usage(`ROMFS offset ${opts.romfsOffset} overlaps the firmware (ends at ${firmwareEnd})`);
    mcu.flash.set(readFileSync(opts.romfs), opts.romfsOffset);
  }
  // pico-sdk's HardFault handler is a `bkpt`; rp2040js reports every bkpt here.
  mcu.onBreak = (code) => {
    if (code === (HOOK_BKPT & 0xff) && flash.service()) return;
    throw new EmulatorError(`breakpoint ${code} at pc=0x${mcu.core.PC.toString(16)} (HardFault or panic)`);
  };

  let cycles = 0; // the sum of executed instructions' cycles since reset
  let marks = {}; // mark value -> cycles, for the script running now
  const writeUint32 = mcu.writeUint32.bind(mcu);
  mcu.writeUint32 = (address, value) => {
    if ((address >>> 0) === MARK_ADDR) {
      marks[value >>> 0] = cycles;
      return;
    }
    writeUint32(address, value);
  };

  const cdc = new USBCDC(mcu.usbCtrl);
  let connected = false;
  let rx = '';
  const pending = [];
  cdc.onDeviceConnected = () => { connected = true; };
  cdc.onSerialData = (bytes) => { rx += Buffer.from(bytes).toString('latin1'); };
  const send = (text) => { for (const ch of Buffer.from(text, 'utf8')) pending.push(ch); };
  const pump = () => {
    // Only fill what the host-side FIFO can hold; the rest waits for the firmware to read.
    while (pending.length && cdc.txFIFO.itemCount < CDC_FIFO_BYTES) cdc.sendSerialByte(pending.shift());
  };

  const cycleNanos = 1e9 / 125e6;
  // the timeout holds per script (and for the boot): wall time, which a loaded machine stretches
  let deadline = Date.now() + opts.timeout * 1000;
  // Run the emulator until `done()` is true; returns nothing, throws on error or timeout.
  const batch = (n = BATCH) => {
    for (let i = 0; i < n; i++) {
      if (mcu.core.waiting) {
        const nanos = sim.clock.nanosToNextAlarm;
        sim.clock.tick(nanos);
        i += nanos / cycleNanos;
      } else {
        const c = mcu.core.executeInstruction();
        cycles += c;
        sim.clock.tick(c * cycleNanos);
      }
    }
  };
  const runUntil = (done, what) => {
    for (;;) {
      pump();
      if (done()) return;
      if (Date.now() > deadline) throw new EmulatorError(`timeout after ${opts.timeout} s waiting for ${what}; serial so far: ${JSON.stringify(rx)}`);
      if (opts.emulatedTimeout && sim.clock.nanos > opts.emulatedTimeout * 1e9) {
        throw new EmulatorError(`emulated timeout: ${opts.emulatedTimeout} s of the Pico's clock waiting for ${what}; serial so far: ${JSON.stringify(rx.slice(-2000))}`);
      }
      batch();
    }
  };
  const saveFlash = () => {
    if (opts.saveFlash) writeFileSync(opts.saveFlash, mcu.flash.subarray(0, FLASH_BYTES));
  };
  const take = (marker, what) => {
    runUntil(() => rx.includes(marker), what);
    const i = rx.indexOf(marker);
    const head = rx.slice(0, i);
    rx = rx.slice(i + marker.length);
    return head;
  };

  mcu.core.PC = 0x10000000;
  runUntil(() => connected, 'USB enumeration');
  if (opts.serial) {
    serve(cdc, pump, batch, pending, saveFlash, flash.stats);
    return;
  }
  send('\r\x03\x03\x01');
  take('raw REPL; CTRL-B to exit\r\n>', 'the raw REPL');
  for (const script of opts.scripts) {
    marks = {};
    deadline = Date.now() + opts.timeout * 1000;
    send(readFileSync(script, 'utf8') + '\x04');
    take('OK', `${script} to be accepted`);
    const out = take('\x04', `${script} output`);
    const err = take('\x04', `${script} error output`);
    take('>', 'the raw REPL prompt');
    process.stdout.write(JSON.stringify({ script, out: out.replace(/\r\n/g, '\n'), err: err.replace(/\r\n/g, '\n'), marks }) + '\n');
  }
  process.stdout.write(JSON.stringify({ emulated_ms: Math.round(sim.clock.nanos / 1e6), flash: flash.stats }) + '\n');
  saveFlash();
}

// --serial-stdio: the emulator runs in batches between event-loop turns, so stdin data arrives
// while it runs; the firmware's serial output goes to stdout as it comes.
function serve(cdc, pump, batch, pending, saveFlash, stats) {
  cdc.onSerialData = (bytes) => { process.stdout.write(Buffer.from(bytes)); };
  let stopping = false;
  const stop = (why) => {
    if (stopping) return;
    stopping = true;
    saveFlash();
    process.stderr.write(`rp2040js: stopped (${why}); flash erased ${stats.erased} B, programmed ${stats.programmed} B\n`);
    process.exit(0);
  };
  process.stdin.on('data', (chunk) => { for (const ch of chunk) pending.push(ch); });
  process.stdin.on('end', () => stop('stdin closed'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.stderr.write('rp2040js: usb connected\n');
  const step = () => {
    if (stopping) return;
    try {
      pump();
      batch(SERIAL_BATCH);
    } catch (e) {
      if (!(e instanceof EmulatorError)) throw e;
      process.stderr.write(`emulator error: ${e.message}\n`);
      process.exit(2);
    }
    setImmediate(step);
  };
  setImmediate(step);
}

try {
  main();
} catch (e) {
  if (!(e instanceof EmulatorError)) throw e;
  process.stderr.write(`emulator error: ${e.message}\n`);
  process.exit(2);
}
