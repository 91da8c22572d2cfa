/// <reference lib="es2024.sharedmemory" />
// Atomics.waitAsync is in Node 20; the base tsconfig targets ES2023, so only
// the shared-memory typings are pulled in (as packages/core does).

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
