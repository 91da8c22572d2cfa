/// <reference lib="es2024.sharedmemory" />
// Atomics.waitAsync is in Node 20; the base tsconfig targets ES2023, so only
// the shared-memory typings are pulled in (as packages/core does).
import { performance } from 'node:perf_hooks';

/**
 * Resolve when counter `index` of a shared probe leaves 0 (a tool in a
 * worker bumped it). `Atomics.waitAsync` wakes on the tool's `Atomics.notify`:
 * no polling, no sleep; the bound only turns a hang into a failure.
 */
export async function probeReached(probe: Int32Array, index: number, timeoutMs = 5000): Promise<void> {
  const wait = Atomics.waitAsync(probe, index, 0, timeoutMs);
  const result = wait.async ? await wait.value : wait.value;
  if (result === 'timed-out') throw new Error(`probe ${index} was not reached within ${timeoutMs} ms`);
}

/**
 * Spin on counter `index` until it leaves 0 and return `performance.now()`
 * at that moment. Blocks this thread on purpose: measuring a cross-thread
 * hand-off in microseconds needs both threads awake — waking an event loop
 * alone costs more than the hand-off. Throws past `timeoutMs`.
 */
export function spinUntil(probe: Int32Array, index: number, timeoutMs = 2000): number {
  const limit = performance.now() + timeoutMs;
  for (let i = 0; ; i++) {
    if (Atomics.load(probe, index) !== 0) return performance.now();
    if ((i & 0x3ff) === 0 && performance.now() > limit) {
      throw new Error(`probe ${index} was not reached within ${timeoutMs} ms`);
    }
  }
}
