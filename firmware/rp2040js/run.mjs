// Run MicroPython scripts on the RPI_PICO_MPY_LAZY firmware inside the rp2040js emulator.
//
//   node run.mjs --uf2 firmware.uf2 --bootrom bootrom.bin [--romfs img --romfs-offset 0xA0000]
//                [--timeout 600] script1.py [script2.py ...]
//
// Boots the firmware once, enters the raw REPL over the emulated USB CDC serial and runs each
// script in turn (same interpreter, no reset in between). Prints one JSON line per script:
//   {"script": path, "out": stdout text, "err": traceback text ("" when it ran cleanly)}
// Exit status: 0 when every script ran (a Python exception is reported in "err", not here),
// 2 on an emulator error (unaligned 32/16-bit access, breakpoint = pico-sdk HardFault handler)
// or a timeout, with the reason as the last line on stderr,
// 1 on bad arguments.
import { readFileSync } from 'node:fs';
import { Simulator, USBCDC, LogLevel } from 'rp2040js';

const FLASH_BASE = 0x10000000;
const UF2_MAGIC0 = 0x0a324655;
const UF2_MAGIC1 = 0x9e5d5157;
const CDC_FIFO_BYTES = 512; // rp2040js's host-side buffer: bytes pushed beyond it are dropped
const BATCH = 200000; // instructions between host-side I/O steps

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
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else opts.scripts.push(a);
  }
  opts.uf2 = opts.uf2 || process.env.MPY_LAZY_RP2_UF2;
  if (!opts.uf2) usage('no firmware: give --uf2 or set MPY_LAZY_RP2_UF2');
  if (!opts.bootrom) usage('no RP2040 bootrom: give --bootrom (16 KB raw binary)');
  if (opts.romfs && !Number.isInteger(opts.romfsOffset)) usage('--romfs needs --romfs-offset');
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
  if (opts.romfs) {
    if (opts.romfsOffset < firmwareEnd) usage(`ROMFS offset ${opts.romfsOffset} overlaps the firmware (ends at ${firmwareEnd})`);
    mcu.flash.set(readFileSync(opts.romfs), opts.romfsOffset);
  }
  // pico-sdk's HardFault handler is a `bkpt`; rp2040js reports every bkpt here.
  mcu.onBreak = (code) => {
    throw new EmulatorError(`breakpoint ${code} at pc=0x${mcu.core.PC.toString(16)} (HardFault or panic)`);
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
  const deadline = Date.now() + opts.timeout * 1000;
  // Run the emulator until `done()` is true; returns nothing, throws on error or timeout.
  const runUntil = (done, what) => {
    for (;;) {
      pump();
      if (done()) return;
      if (Date.now() > deadline) throw new EmulatorError(`timeout after ${opts.timeout} s waiting for ${what}; serial so far: ${JSON.stringify(rx)}`);
      for (let i = 0; i < BATCH; i++) {
        if (mcu.core.waiting) {
          const nanos = sim.clock.nanosToNextAlarm;
          sim.clock.tick(nanos);
          i += nanos / cycleNanos;
        } else {
          sim.clock.tick(mcu.core.executeInstruction() * cycleNanos);
        }
      }
    }
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
  send('\r\x03\x03\x01');
  take('raw REPL; CTRL-B to exit\r\n>', 'the raw REPL');
  for (const script of opts.scripts) {
    send(readFileSync(script, 'utf8') + '\x04');
    take('OK', `${script} to be accepted`);
    const out = take('\x04', `${script} output`);
    const err = take('\x04', `${script} error output`);
    take('>', 'the raw REPL prompt');
    process.stdout.write(JSON.stringify({ script, out: out.replace(/\r\n/g, '\n'), err: err.replace(/\r\n/g, '\n') }) + '\n');
  }
  process.stdout.write(JSON.stringify({ emulated_ms: Math.round(sim.clock.nanos / 1e6) }) + '\n');
}

try {
  main();
} catch (e) {
  if (!(e instanceof EmulatorError)) throw e;
  process.stderr.write(`emulator error: ${e.message}\n`);
  process.exit(2);
}
