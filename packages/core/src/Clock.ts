/** An opaque handle returned by {@link Clock.setTimeout}. */
export type TimerHandle = unknown;

/**
 * Where time comes from. Injected wherever time is used, so tests drive time
 * with a controllable clock (`ManualClock` from `@troupe/core/testing`) and
 * never sleep.
 *
 * `now()` is in milliseconds since the Unix epoch with sub-millisecond
 * resolution, the one time base shared by every thread (a worker's
 * `performance.now()` has a different origin, so it cannot be used across
 * threads). Deadlines in the cancellation table use this base.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch, monotonic within a process. */
  now(): number;
  /** Call `callback` after `ms` milliseconds. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancel a timer; a handle that already fired or was cleared is ignored. */
  clearTimeout(handle: TimerHandle): void;
}
