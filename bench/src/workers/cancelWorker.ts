// Worker side of the `cancel` suite. Trials are driven through a control
// SharedArrayBuffer (no postMessage on the measured path); the worker writes
// the moment it observed a cancel in the shared clock base
// (performance.timeOrigin + performance.now(), the same in every thread).
import { parentPort, workerData } from 'node:worker_threads';
import { CancelSlots, slotRunCancellation } from '@troupe/core/internal';
import { type CancelWorkerData, CTL } from './cancelControl.js';

const data = workerData as CancelWorkerData;
const ctl = new Int32Array(data.control, 0, 8);
const times = new Float64Array(data.control, 32, 1);
const origin = performance.timeOrigin;
const now = (): number => origin + performance.now();

function nextTrial(last: number): number {
  Atomics.wait(ctl, CTL.SEQ, last);
  return Atomics.load(ctl, CTL.SEQ);
}

function ready(seq: number): void {
  Atomics.store(ctl, CTL.READY, seq);
  Atomics.notify(ctl, CTL.READY);
}

function observed(seq: number, at: number): void {
  times[0] = at;
  Atomics.store(ctl, CTL.DONE, seq);
  Atomics.notify(ctl, CTL.DONE);
}

if (data.mode === 'poll') {
  // A tool in a tight loop: one isCancelled() per iteration.
  const slots = CancelSlots.attach(data.buffer);
  let seq = 0;
  for (;;) {
    seq = nextTrial(seq);
    if (Atomics.load(ctl, CTL.STOP) === 1) break;
    const run = slotRunCancellation(slots, {
      index: Atomics.load(ctl, CTL.INDEX),
      generation: Atomics.load(ctl, CTL.GENERATION),
    });
    const token = run.token;
    ready(seq);
    while (!token.isCancelled()) {}
    observed(seq, now());
    run.close();
  }
} else if (data.mode === 'signal') {
  // A tool awaiting I/O: the event loop is idle, the signal is bridged by waitAsync.
  const slots = CancelSlots.attach(data.buffer);
  const trial = (last: number): void => {
    const seq = nextTrial(last);
    if (Atomics.load(ctl, CTL.STOP) === 1) {
      process.exit(0);
    }
    const run = slotRunCancellation(slots, {
      index: Atomics.load(ctl, CTL.INDEX),
      generation: Atomics.load(ctl, CTL.GENERATION),
    });
    run.token.signal.addEventListener(
      'abort',
      () => {
        observed(seq, now());
        run.close();
        setImmediate(trial, seq);
      },
      { once: true },
    );
    ready(seq);
  };
  // Keep the loop alive between trials (a pending waitAsync does not).
  setInterval(() => {}, 1 << 30);
  trial(0);
} else {
  // The baseline: a worker busy for `ms` receives a 'cancel' message only when it yields.
  const port = parentPort;
  if (port === null) throw new Error('cancelWorker runs in a worker thread');
  port.on('message', (message: { type: 'busy'; ms: number } | { type: 'cancel' }) => {
    if (message.type === 'cancel') {
      port.postMessage({ type: 'cancel-received', at: now() });
      return;
    }
    const until = now() + message.ms;
    port.postMessage({ type: 'busy' });
    while (now() < until) {}
  });
}
