import { performance } from 'node:perf_hooks';
import type { Clock, TimerHandle } from '../Clock.js';

const origin = performance.timeOrigin;

/**
 * The real clock (epoch ms, sub-millisecond resolution, the same base on every
 * thread) whose timers keep the process alive: the model adapters' clock. A
 * backoff sleep may be the only thing pending while a call waits to retry, and
 * a script awaiting that call must not exit under it. The runtime's own
 * `systemClock` (`@troupe/subagent`) is the same clock with unref'd timers: a
 * pending deadline never keeps a daemon alive on its own.
 */
export const keepAliveClock: Clock = Object.freeze({
  now: () => origin + performance.now(),
  setTimeout: (callback: () => void, ms: number): TimerHandle => setTimeout(callback, ms),
  clearTimeout: (handle: TimerHandle): void => clearTimeout(handle as ReturnType<typeof setTimeout>),
});
