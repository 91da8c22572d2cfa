/// <reference lib="es2024.sharedmemory" />
// Atomics.waitAsync is in Node 20; the base tsconfig targets ES2023, so only
// the shared-memory typings are pulled in (as packages/core does).

import { DemoFailure } from './Narrator.js';
import { waitFor } from './waits.js';

/**
 * Resolve when counter `index` of a shared probe leaves 0 (a tool in a
 * worker bumped it; `what` names that while it is awaited).
 * `Atomics.waitAsync` wakes on the tool's `Atomics.notify`: no polling, no
 * sleep; the bound only turns a hang into a failure (a pending
 * `Atomics.waitAsync` does not keep the process alive: a stall is caught by
 * the demo's StallGuard before it).
 */
export async function probeReached(probe: Int32Array, index: number, what: string, timeoutMs = 5000): Promise<void> {
  const wait = Atomics.waitAsync(probe, index, 0, timeoutMs);
  const result = wait.async ? await waitFor(what, wait.value) : wait.value;
  if (result === 'timed-out') throw new DemoFailure(`${what}: it did not happen within ${timeoutMs} ms`);
}
