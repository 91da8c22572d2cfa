import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';

/**
 * `threads` bare `node:worker_threads` workers that run the analyst's tool
 * body: the same work as the demo's fan-out without Troupe, measured in the
 * same minute on the same machine — what its cores can give right now.
 */
export class BareThreads {
  readonly #workers: Worker[];

  private constructor(workers: Worker[]) {
    this.#workers = workers;
  }

  /** Start the workers and wait until each has loaded its module. */
  static async start(threads: number): Promise<BareThreads> {
    const url = new URL('./bareWorker.js', import.meta.url);
    const workers = Array.from({ length: threads }, () => new Worker(url));
    await Promise.all(workers.map((w) => once(w, 'message')));
    return new BareThreads(workers);
  }

  /** Count the errors of every service, each worker taking the next one when free; the wall time in ms. */
  async run(services: readonly string[]): Promise<number> {
    const queue = [...services];
    const t0 = performance.now();
    await Promise.all(
      this.#workers.map(async (w) => {
        for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
          w.postMessage(s);
          await once(w, 'message');
        }
      }),
    );
    return performance.now() - t0;
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
