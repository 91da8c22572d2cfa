import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { nowNs } from '../stats.js';

const echoUrl = new URL('../workers/echoWorker.js', import.meta.url);
const piscinaTaskUrl = new URL('../workers/piscinaTask.js', import.meta.url);

/** Sync samples: batches sized so one batch lasts ~`batchUs`, samples for ~`budgetMs`; µs per call. */
function sampleSync(fn: () => unknown, budgetMs: number, batchUs = 50): number[] {
  let perBatch = 1;
  for (;;) {
    const start = nowNs();
    for (let i = 0; i < perBatch; i++) fn();
    const us = (nowNs() - start) / 1000;
    if (us >= batchUs || perBatch >= 1 << 20) break;
    perBatch *= 2;
  }
  const samples: number[] = [];
  const until = nowNs() + budgetMs * 1e6;
  while (samples.length < 3 || (nowNs() < until && samples.length < 10_000)) {
    const start = nowNs();
    for (let i = 0; i < perBatch; i++) fn();
    samples.push((nowNs() - start) / 1000 / perBatch);
  }
  return samples;
}

/** Async samples, one call at a time, for ~`budgetMs` (at least `min`); µs per call. */
async function sampleAsync(fn: () => Promise<unknown>, budgetMs: number, min = 3): Promise<number[]> {
  for (let i = 0; i < 2; i++) await fn();
  const samples: number[] = [];
  const until = nowNs() + budgetMs * 1e6;
  while (samples.length < min || (nowNs() < until && samples.length < 10_000)) {
    const start = nowNs();
    await fn();
    samples.push((nowNs() - start) / 1000);
  }
  return samples;
}

/**
 * The same-run baselines of a scope hop: `structuredClone` of the scope,
 * `Buffer.copy` of as many bytes (the physical limit), a raw `postMessage`
 * round trip with a worker (the scope one way, a one-byte ack back) and a raw
 * piscina round trip carrying `{ scope }` (what the subagent pool sits on).
 */
export class CopyBaselines {
  readonly #echo: Worker;
  readonly #piscina: Piscina;
  #acked: (() => void) | undefined;

  private constructor(echo: Worker, piscina: Piscina) {
    this.#echo = echo;
    this.#piscina = piscina;
    // One listener for every round trip: a listener per call would add its own cost to the baseline.
    echo.on('message', () => {
      const acked = this.#acked;
      this.#acked = undefined;
      acked?.();
    });
  }

  /**
   * Start the echo worker and a piscina pool of `threads` threads (piscina's
   * defaults otherwise, as the subagent pool). Give it the thread count of the
   * pool the hops are measured on: piscina's own cost per task grows with its
   * pool (it lists every ready worker per task), so a one-thread baseline under
   * an eight-thread pool would charge piscina's cost to the orchestrator.
   */
  static async start(threads = 1): Promise<CopyBaselines> {
    const echo = new Worker(echoUrl);
    await once(echo, 'online');
    const piscina = new Piscina({
      filename: fileURLToPath(piscinaTaskUrl),
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Number.POSITIVE_INFINITY,
    });
    await Promise.all(Array.from({ length: threads }, () => piscina.run({ scope: null })));
    return new CopyBaselines(echo, piscina);
  }

  /** Threads of the baseline piscina pool. */
  get piscinaThreads(): number {
    return this.#piscina.threads.length;
  }

  cloneUs(scope: unknown, budgetMs: number): number[] {
    return sampleSync(() => structuredClone(scope), budgetMs);
  }

  memcpyUs(bytes: number, budgetMs: number): number[] {
    const from = Buffer.allocUnsafeSlow(bytes).fill(7);
    const to = Buffer.allocUnsafeSlow(bytes);
    return sampleSync(() => from.copy(to), budgetMs);
  }

  postMessageRttUs(scope: unknown, budgetMs: number): Promise<number[]> {
    const message = { scope };
    return sampleAsync(
      () =>
        new Promise<void>((resolve) => {
          this.#acked = resolve;
          this.#echo.postMessage(message);
        }),
      budgetMs,
    );
  }

  piscinaRttUs(scope: unknown, budgetMs: number): Promise<number[]> {
    const task = { scope };
    return sampleAsync(() => this.#piscina.run(task), budgetMs);
  }

  async close(): Promise<void> {
    await Promise.all([this.#echo.terminate(), this.#piscina.close()]);
  }
}
