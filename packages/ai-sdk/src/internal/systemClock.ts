import { performance } from 'node:perf_hooks';
import type { Clock, TimerHandle } from '@troupe/core';

const origin = performance.timeOrigin;

/**
 * The real clock: epoch ms with sub-millisecond resolution. Its timers keep
 * the process alive (unlike the worker runtime's clock): a backoff sleep is
 * the only thing pending while a call waits to retry, and a script awaiting
 * the call must not exit under it.
 */
export const systemClock: Clock = Object.freeze({
  now: () => origin + performance.now(),
  setTimeout: (callback: () => void, ms: number): TimerHandle => setTimeout(callback, ms),
  clearTimeout: (handle: TimerHandle): void => clearTimeout(handle as ReturnType<typeof setTimeout>),
});
