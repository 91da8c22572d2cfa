import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { sharedNow } from '../agents/probe.js';
import { probeReached } from './watchProbe.js';

/**
 * A bare `node:worker_threads` worker that spins on shared memory: how long a
 * store on this thread takes to be seen by a busy thread, measured the way
 * the demo measures a cancel (the worker stamps the time), without Troupe.
 */
export class BareSpinner {
  readonly #worker: Worker;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  static async start(): Promise<BareSpinner> {
    const worker = new Worker(new URL('./bareSpinWorker.js', import.meta.url));
    await once(worker, 'message');
    return new BareSpinner(worker);
  }

  /** Once the worker spins, set the word; ms from the store to the worker seeing it. */
  async storeSeenAfter(): Promise<number> {
    const buffer = new SharedArrayBuffer(16);
    const words = new Int32Array(buffer, 0, 2);
    const seen = once(this.#worker, 'message');
    this.#worker.postMessage(buffer);
    await probeReached(words, 1, 'the bare spinning thread to start');
    const t0 = sharedNow();
    Atomics.store(words, 0, 1);
    await seen;
    return (new Float64Array(buffer, 8, 1)[0] ?? 0) - t0;
  }

  async close(): Promise<void> {
    await this.#worker.terminate();
  }
}
