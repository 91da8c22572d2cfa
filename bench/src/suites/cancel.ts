import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { CancelSource, type CancelToken } from '@troupe/core';
import { slotRunCancellation } from '@troupe/core/internal';
import { CancellationTable } from '@troupe/supervisor/internal';
import type { Figure, SuiteBody } from '../Suite.js';
import { median, nowNs, quantile, round } from '../stats.js';
import { type CancelWorkerData, CTL } from '../workers/cancelControl.js';

const workerUrl = new URL('../workers/cancelWorker.js', import.meta.url);
const origin = performance.timeOrigin;
/** The shared clock base: epoch ms, the same in every thread of the process. */
const now = (): number => origin + performance.now();

/** Busy-wait `us` microseconds (lets the worker settle into its loop or its idle poll). */
function settle(us: number): void {
  const until = now() + us / 1000;
  while (now() < until) {}
}

function summary(samples: readonly number[]): Record<string, number> {
  return {
    p5: round(quantile(samples, 0.05)),
    p95: round(quantile(samples, 0.95)),
    samples: samples.length,
  };
}

/**
 * Cancel → notice latency across threads, in the shared clock base: the main
 * thread cancels through the table, the worker stamps when it saw it. Trials
 * are started through Atomics, so no postMessage sits on the measured path.
 */
async function noticeLatency(
  mode: 'poll' | 'signal',
  trials: number,
  progress: (message: string) => void,
): Promise<number[]> {
  const table = new CancellationTable({ capacity: 16 });
  const control = new SharedArrayBuffer(64);
  const ctl = new Int32Array(control, 0, 8);
  const times = new Float64Array(control, 32, 1);
  const data: CancelWorkerData = { mode, buffer: table.buffer, control };
  const worker = new Worker(workerUrl, { workerData: data });
  worker.on('error', (error) => {
    throw error;
  });
  await once(worker, 'online');
  const warmup = Math.min(100, Math.ceil(trials / 5));
  const samples: number[] = [];
  try {
    for (let seq = 1; seq <= warmup + trials; seq++) {
      if (seq % 200 === 0) progress(`cancel: ${mode} notice, trial ${seq}/${warmup + trials}`);
      const key = `run-${seq}`;
      const slot = table.register(key);
      Atomics.store(ctl, CTL.INDEX, slot.index);
      Atomics.store(ctl, CTL.GENERATION, slot.generation);
      Atomics.store(ctl, CTL.SEQ, seq);
      Atomics.notify(ctl, CTL.SEQ);
      while (Atomics.load(ctl, CTL.READY) !== seq) Atomics.wait(ctl, CTL.READY, seq - 1, 1_000);
      // Let the worker's READY notify finish and the worker reach its loop
      // (spinning) or its idle event loop (signal) before cancelling.
      settle(mode === 'poll' ? 100 : 300);
      const t0 = now();
      table.cancel(key, 'user');
      // Block (do not spin): pinned to one CPU, the worker runs only while we sleep.
      while (Atomics.load(ctl, CTL.DONE) !== seq) Atomics.wait(ctl, CTL.DONE, seq - 1, 1_000);
      const observed = times[0] as number;
      if (seq > warmup) samples.push((observed - t0) * 1000);
      table.release(key);
    }
  } finally {
    Atomics.store(ctl, CTL.STOP, 1);
    Atomics.store(ctl, CTL.SEQ, warmup + trials + 1);
    Atomics.notify(ctl, CTL.SEQ);
    await worker.terminate();
  }
  return samples;
}

/** postMessage('cancel') to a worker busy for `busyMs`: when does it arrive? */
async function postMessageLatency(trials: number, busyMs: number): Promise<number[]> {
  const data: CancelWorkerData = {
    mode: 'busy',
    buffer: new SharedArrayBuffer(64),
    control: new SharedArrayBuffer(64),
  };
  const worker = new Worker(workerUrl, { workerData: data });
  await once(worker, 'online');
  const samples: number[] = [];
  try {
    for (let i = 0; i < trials; i++) {
      const busy = once(worker, 'message');
      worker.postMessage({ type: 'busy', ms: busyMs });
      await busy;
      const t0 = now();
      const received = once(worker, 'message');
      worker.postMessage({ type: 'cancel' });
      const [reply] = (await received) as [{ at: number }];
      samples.push((reply.at - t0) * 1000);
    }
  } finally {
    await worker.terminate();
  }
  return samples;
}

/** Register 1,000 runs (a subtree of fan-out 10, as the run tree holds it: the table holds slots only). */
function buildTree(table: CancellationTable, size: number): string[] {
  const keys = ['root'];
  table.register('root');
  for (let i = 1; i < size; i++) {
    const key = `n${i}`;
    table.register(key);
    keys.push(key);
  }
  return keys;
}

/**
 * A subtree's cancel as the run tree makes it: its walk writes each run's slot (the root's with
 * the reason, the rest with `parent`), the doorbell held until the walk ends.
 */
function pushdown(trials: number, withWaiters: boolean): number[] {
  const table = new CancellationTable({ capacity: 1024 });
  const samples: number[] = [];
  for (let t = 0; t < trials + 10; t++) {
    const keys = buildTree(table, 1000);
    if (withWaiters) {
      // As if every run had a bridged signal: each cancel must also notify.
      for (const key of keys) table.slots.markWaiting((table.handle(key) as { index: number }).index);
    }
    const start = nowNs();
    table.slots.beginBatch();
    table.cancel('root', 'user');
    for (let i = 1; i < keys.length; i++) table.cancel(keys[i] as string, 'parent');
    table.slots.endBatch();
    const elapsed = (nowNs() - start) / 1000;
    if (t >= 10) samples.push(elapsed);
    if (!table.isCancelled('n999')) throw new Error('push-down missed a leaf');
    for (let i = keys.length - 1; i >= 0; i--) table.release(keys[i] as string);
  }
  return samples;
}

function localPushdown(trials: number): number[] {
  const samples: number[] = [];
  for (let t = 0; t < trials + 10; t++) {
    const sources = [new CancelSource()];
    for (let i = 1; i < 1000; i++) sources.push((sources[Math.floor((i - 1) / 10)] as CancelSource).child());
    const start = nowNs();
    (sources[0] as CancelSource).cancel('user');
    const elapsed = (nowNs() - start) / 1000;
    if (t >= 10) samples.push(elapsed);
  }
  return samples;
}

/** `token.isCancelled()` `n` times; returns the elapsed ns. */
function tokenLoop(token: CancelToken, n: number): number {
  let hits = 0;
  const start = nowNs();
  for (let i = 0; i < n; i++) if (token.isCancelled()) hits++;
  const elapsed = nowNs() - start;
  if (hits !== 0) throw new Error('the token was cancelled during the check benchmark');
  return elapsed;
}

/** The floor: one `Atomics.load` of a plain shared Int32Array and a compare, `n` times. */
function atomicsLoop(view: Int32Array, n: number): number {
  let hits = 0;
  const start = nowNs();
  for (let i = 0; i < n; i++) if (Atomics.load(view, 3) !== 0) hits++;
  const elapsed = nowNs() - start;
  if (hits !== 0) throw new Error('unexpected store');
  return elapsed;
}

/** An in-process `CancelSource` check (a field read), `n` times. */
function sourceLoop(source: CancelSource, n: number): number {
  let hits = 0;
  const start = nowNs();
  for (let i = 0; i < n; i++) if (source.isCancelled()) hits++;
  const elapsed = nowNs() - start;
  if (hits !== 0) throw new Error('the source was cancelled during the check benchmark');
  return elapsed;
}

/**
 * Cancellation across threads (issue 3): the cost of a check, how fast a
 * cancel reaches a worker that polls or awaits, the push-down over a
 * 1,000-run subtree, against a postMessage to a busy worker.
 */
export const cancelSuite: SuiteBody = {
  async run({ quick, progress }) {
    const figures: Figure[] = [];
    const suite = 'cancel';

    progress('cancel: isCancelled() cost');
    const table = new CancellationTable({ capacity: 4 });
    const run = slotRunCancellation(table.buffer, table.register('check'));
    const call = run.openCall(undefined);
    const raw = new Int32Array(new SharedArrayBuffer(64));
    const local = new CancelSource();
    const batches = quick ? 30 : 200;
    const perBatch = quick ? 200_000 : 1_000_000;
    // One loop per kind of check (a shared timing loop would call through a
    // megamorphic site and charge the later measurements for it), interleaved
    // batch by batch so that all four see the same machine noise.
    const check: number[] = [];
    const callCheck: number[] = [];
    const rawLoad: number[] = [];
    const localCheck: number[] = [];
    for (let b = -2; b < batches; b++) {
      const samples = [
        tokenLoop(run.token, perBatch),
        tokenLoop(call.token, perBatch),
        atomicsLoop(raw, perBatch),
        sourceLoop(local, perBatch),
      ];
      if (b < 0) continue; // warm-up
      check.push((samples[0] as number) / perBatch);
      callCheck.push((samples[1] as number) / perBatch);
      rawLoad.push((samples[2] as number) / perBatch);
      localCheck.push((samples[3] as number) / perBatch);
    }
    call.close();
    run.close();
    figures.push({
      suite,
      name: 'cancel.check_ns',
      value: round(median(check)),
      unit: 'ns',
      baseline: { name: 'Atomics.load + compare', value: round(median(rawLoad)) },
      ratio: round(median(check) / median(rawLoad)),
      detail: {
        p95: round(quantile(check, 0.95)),
        call_token_ns: round(median(callCheck)),
        local_source_ns: round(median(localCheck)),
        batches,
      },
    });

    const trials = quick ? 200 : 2_000;
    progress('cancel: poll notice');
    const poll = await noticeLatency('poll', trials, progress);
    const pollMedian = median(poll);
    figures.push({ suite, name: 'cancel.poll_notice_us', value: round(pollMedian), unit: 'µs', detail: summary(poll) });

    progress('cancel: signal notice');
    const signal = await noticeLatency('signal', trials, progress);
    figures.push({
      suite,
      name: 'cancel.signal_notice_us',
      value: round(median(signal)),
      unit: 'µs',
      detail: summary(signal),
    });

    progress('cancel: push-down over 1,000 runs');
    const pushTrials = quick ? 50 : 300;
    const push = pushdown(pushTrials, false);
    const pushWaiters = pushdown(pushTrials, true);
    const pushLocal = localPushdown(pushTrials);
    figures.push({
      suite,
      name: 'cancel.pushdown_1000_us',
      value: round(median(push)),
      unit: 'µs',
      baseline: { name: 'in-process CancelSource tree', value: round(median(pushLocal)) },
      ratio: round(median(push) / median(pushLocal)),
      detail: {
        ...summary(push),
        per_run_ns: round((median(push) * 1000) / 1000),
        with_bridges_us: round(median(pushWaiters)),
      },
    });

    progress('cancel: postMessage to a busy worker');
    const busy = await postMessageLatency(quick ? 3 : 20, 50);
    figures.push({
      suite,
      name: 'cancel.postmessage_busy_us',
      value: round(median(busy)),
      unit: 'µs',
      baseline: { name: 'cancel.poll_notice_us', value: round(pollMedian) },
      ratio: round(median(busy) / pollMedian),
      detail: { busy_ms: 50, ...summary(busy) },
    });
    return figures;
  },
};
