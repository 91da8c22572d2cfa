import { Worker } from 'node:worker_threads';
import type { CancelWorkerCommand } from '../fixtures/cancelWorker.js';

/** A message from the cancellation test worker. */
export interface CancelWorkerMessage {
  readonly type: string;
  readonly [field: string]: unknown;
}

/** A running cancellation test worker; `terminate()` it in `after`/`t.after`. */
export interface CancelWorker {
  send(command: CancelWorkerCommand): void;
  /** The next message of `type` (messages are queued, so none is missed). Rejects if the worker errs or exits. */
  next(type: string): Promise<CancelWorkerMessage>;
  terminate(): Promise<void>;
}

/**
 * Start `fixtures/cancelWorker.js` attached to `buffer` (passed in
 * workerData, as the subagent pool does). Messages wait in a queue until a
 * test asks for them, so a test synchronises on events, never on sleeps.
 */
export function startCancelWorker(buffer: SharedArrayBuffer): CancelWorker {
  const worker = new Worker(new URL('../fixtures/cancelWorker.js', import.meta.url), { workerData: { buffer } });
  const queue: CancelWorkerMessage[] = [];
  const waiting: { type: string; resolve: (m: CancelWorkerMessage) => void; reject: (e: Error) => void }[] = [];
  let failure: Error | undefined;
  const fail = (error: Error): void => {
    failure ??= error;
    for (const w of waiting.splice(0)) w.reject(error);
  };
  worker.on('message', (message: CancelWorkerMessage) => {
    if (message.type === 'error') {
      fail(new Error(`cancel worker failed: ${String(message.message)}`));
      return;
    }
    const i = waiting.findIndex((w) => w.type === message.type);
    if (i >= 0) waiting.splice(i, 1)[0]?.resolve(message);
    else queue.push(message);
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`cancel worker exited with code ${code}`)));
  return {
    send: (command) => worker.postMessage(command),
    next(type) {
      const i = queue.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(queue.splice(i, 1)[0] as CancelWorkerMessage);
      if (failure !== undefined) return Promise.reject(failure);
      return new Promise((resolve, reject) => waiting.push({ type, resolve, reject }));
    },
    async terminate() {
      await worker.terminate();
    },
  };
}
