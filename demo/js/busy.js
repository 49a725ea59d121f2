'use strict';
// A small, steadily busy Node.js program for profiling tests. Its hot functions have
// stable names so that a profile of it can be checked for them:
//   hashLoop  - CPU-bound FNV-1a hashing in plain JS (the heaviest)
//   fib       - naive recursive Fibonacci (lighter; deep, repetitive JS stacks)
//   ioTick    - a tiny async file write/read round trip (mostly off-CPU)
// Each CPU function runs on a timer-driven duty cycle: every period it works for
// PCT% of the period, then yields to the event loop, so the load stays bounded
// (the default is ~80% of one core in total) however long the program runs.
//
// Environment (all optional):
//   BUSY_HASH_PCT   share of one core for hashLoop, 0-100      (default 60)
//   BUSY_FIB_PCT    share of one core for fib, 0-100           (default 20)
//   BUSY_PERIOD_MS  duty-cycle period in milliseconds          (default 100)
//   BUSY_IO_MS      interval of the async I/O loop in ms, 0=off (default 200)
//   BUSY_REPORT_S   seconds between progress lines, 0=quiet     (default 30)
//
// Run with NODE_OPTIONS=--perf-basic-prof to have V8 write /tmp/perf-<pid>.map, which
// lets perf name the JIT-compiled functions.

const fs = require('fs');
const os = require('os');
const path = require('path');

function envInt(name, dflt, min, max) {
  const v = Number.parseInt(process.env[name] ?? '', 10);
  if (Number.isNaN(v)) return dflt;
  return Math.min(max, Math.max(min, v));
}

const HASH_PCT = envInt('BUSY_HASH_PCT', 60, 0, 100);
const FIB_PCT = envInt('BUSY_FIB_PCT', 20, 0, 100);
const PERIOD_MS = envInt('BUSY_PERIOD_MS', 100, 10, 10000);
const IO_MS = envInt('BUSY_IO_MS', 200, 0, 60000);
const REPORT_S = envInt('BUSY_REPORT_S', 30, 0, 3600);

const counts = { hash: 0, fib: 0, io: 0 };
const data = new Uint8Array(4096);
for (let i = 0; i < data.length; i++) data[i] = (i * 131 + 7) & 0xff;

// Hashes `data` over and over until budgetMs has passed. The work loop is inside this
// function (not in a small helper V8 could inline) so its samples carry this name.
function hashLoop(budgetMs) {
  const end = performance.now() + budgetMs;
  let h = 0x811c9dc5;
  while (performance.now() < end) {
    for (let r = 0; r < 16; r++) {
      for (let i = 0; i < data.length; i++) {
        h ^= data[i];
        h = Math.imul(h, 0x01000193) >>> 0;
      }
    }
    counts.hash++;
  }
  return h;
}

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function fibLoop(budgetMs) {
  const end = performance.now() + budgetMs;
  let s = 0;
  while (performance.now() < end) {
    s += fib(20);
    counts.fib++;
  }
  return s;
}

// Runs work(budget) every PERIOD_MS; setTimeout (not setInterval) so that a late tick
// does not queue up a burst of catch-up work.
function dutyCycle(work, pct) {
  if (pct <= 0) return;
  const budget = (PERIOD_MS * pct) / 100;
  const tick = () => {
    const start = performance.now();
    work(budget);
    const spent = performance.now() - start;
    setTimeout(tick, Math.max(0, PERIOD_MS - spent));
  };
  setTimeout(tick, 0);
}

const ioFile = path.join(os.tmpdir(), `busy-${process.pid}.json`);

async function ioTick() {
  const body = JSON.stringify({ pid: process.pid, at: Date.now(), counts });
  await fs.promises.writeFile(ioFile, body);
  const back = JSON.parse(await fs.promises.readFile(ioFile, 'utf8'));
  counts.io += back.pid === process.pid ? 1 : 0;
}

function ioLoop() {
  if (IO_MS <= 0) return;
  const run = () => {
    ioTick().catch((e) => console.error(`io error: ${e.message}`))
      .finally(() => setTimeout(run, IO_MS));
  };
  run();
}

function shutdown(sig) {
  fs.rmSync(ioFile, { force: true });
  console.log(`busy.js: ${sig}, exiting`);
  process.exit(0);
}
// As PID 1 (no --init) Node would otherwise ignore SIGTERM and `docker stop` would wait.
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

console.log(`busy.js: pid ${process.pid}, node ${process.version}, hashLoop ${HASH_PCT}%, ` +
  `fib ${FIB_PCT}%, period ${PERIOD_MS} ms, io every ${IO_MS} ms`);
dutyCycle(hashLoop, HASH_PCT);
dutyCycle(fibLoop, FIB_PCT);
ioLoop();
if (REPORT_S > 0) {
  setInterval(() => console.log(`busy.js: hash ${counts.hash} fib ${counts.fib} io ${counts.io}`),
    REPORT_S * 1000);
}
