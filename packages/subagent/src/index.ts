/**
 * @troupe/subagent — the worker side of Troupe: the piscina task entry
 * (`@troupe/subagent/worker`) that loads an agent module, rebuilds its
 * context, bridges its cancellation slot and runs its loop.
 */
export { loadAgent, loadedAgent } from './loadAgent.js';
export { runSubagentTask } from './runSubagentTask.js';
export { systemClock } from './systemClock.js';

/**
 * The file URL of the worker entry, for a piscina pool's `filename` (a CommonJS shim over `worker.js`).
 *
 * Only a host that runs its own pool needs it; the supervisor uses it itself.
 *
 * @example
 * ```ts
 * import { Piscina } from 'piscina'
 *
 * const pool = new Piscina({ filename: WORKER_URL, maxThreads: 2 })
 * ```
 */
export const WORKER_URL: string = new URL('./workerEntry.cjs', import.meta.url).href;
