import { performance } from 'node:perf_hooks';
import type { Clock, TimerHandle } from '@troupe/core';

// Every thread computes the same epoch-based time: a worker's performance.now()
// has its own origin, so add timeOrigin to share one base across threads.
const origin = performance.timeOrigin;

/**
 * The real clock: epoch milliseconds with sub-millisecond resolution, and
 * unref'd timers (a pending timer never keeps a daemon alive on its own).
 *
 * The default clock of a supervisor; pass a `ManualClock` instead in tests.
 *
 * @example
 * ```ts
 * const startedAt = systemClock.now()
 * const timer = systemClock.setTimeout(() => console.log(`${systemClock.now() - startedAt} ms later`), 100)
 * systemClock.clearTimeout(timer)
 * ```
 */
export const systemClock: Clock = Object.freeze({
  now: () => origin + performance.now(),
  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return timer;
  },
  clearTimeout(handle: TimerHandle): void {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
});
