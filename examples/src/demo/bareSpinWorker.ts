// A bare worker thread (no Troupe) that spins on a word of shared memory until
// the host sets it, then stamps when it saw it: the demo's yardstick for how
// soon a busy thread on this machine sees a store from another, right now.
import { parentPort } from 'node:worker_threads';
import { sharedNow } from '../agents/probe.js';

// [0] go (host → worker), [1] spinning (worker → host); then the stamp, a Float64 at byte 8.
parentPort?.on('message', (buffer: SharedArrayBuffer) => {
  const words = new Int32Array(buffer, 0, 2);
  const stamp = new Float64Array(buffer, 8, 1);
  Atomics.store(words, 1, 1);
  Atomics.notify(words, 1);
  while (Atomics.load(words, 0) === 0);
  stamp[0] = sharedNow();
  parentPort?.postMessage('seen');
});
parentPort?.postMessage('ready');
