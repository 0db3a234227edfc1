// A self-checking Node.js workload for the preload test: worker threads
// (each an isolate whose buffers V8's background threads free, so most of
// its frees cross threads), zlib, crypto, Map churn and JSON. Prints
// checksums that must be the same with and without brisk.
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
const zlib = require('zlib');

function round(seed, rounds) {
  const hash = crypto.createHash('sha256');
  const table = new Map();
  for (let r = 0; r < rounds; r++) {
    const bufs = [];
    for (let i = 0; i < 300; i++) {
      const n = 16 + ((i * 7919 + r * 104729 + seed) % 40000);
      const b = Buffer.allocUnsafe(n).fill((i + r + seed) & 255);
      bufs.push(b);
      table.set('k' + ((i * 31 + r) % 2000), { i, r, s: 'x'.repeat(i % 200), b: b.subarray(0, 64) });
    }
    for (const b of bufs) hash.update(b.subarray(b.length - 8));
    const text = JSON.stringify([...table.entries()].slice(0, 200));
    const packed = zlib.gzipSync(text);
    if (zlib.gunzipSync(packed).toString() !== text) throw new Error('gzip round trip changed the data');
    hash.update(packed);
    const big = new ArrayBuffer(1 << 20);
    new Uint8Array(big)[(r * 4099) % (1 << 20)] = r & 255;
    hash.update(Buffer.from(big, (r * 4099) % (1 << 20), 1));
    for (const k of [...table.keys()].slice(0, 150)) table.delete(k);
  }
  return hash.digest('hex').slice(0, 16) + ':' + table.size;
}

if (isMainThread) {
  const threads = 4;
  const results = new Array(threads);
  let done = 0;
  for (let t = 0; t < threads; t++) {
    const w = new Worker(__filename, { workerData: t });
    w.on('message', (v) => {
      results[t] = v;
      if (++done === threads) console.log(round(99, 20) + ' ' + results.join(' '));
    });
    w.on('error', (e) => { console.error(e); process.exit(1); });
  }
} else {
  parentPort.postMessage(round(workerData, 40));
}
