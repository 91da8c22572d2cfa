/**
 * An opaque handle returned by {@link Clock.setTimeout}.
 *
 * Pass it back to the same clock's `clearTimeout`, nothing else.
 *
 * @example
 * ```ts
 * declare const clock: Clock
 * const handle: TimerHandle = clock.setTimeout(() => console.log('late'), 1000)
 * clock.clearTimeout(handle)
 * ```
 */
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
 *
 * @example
 * ```ts
 * const system: Clock = {
 *   now: () => performance.timeOrigin + performance.now(),
 *   setTimeout: (callback, ms) => setTimeout(callback, ms),
 *   clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
 * }
 * ```
 */
export interface Clock {
  /** Milliseconds since the Unix epoch, monotonic within a process. */
  now(): number;
  /** Call `callback` after `ms` milliseconds. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancel a timer; a handle that already fired or was cleared is ignored. */
  clearTimeout(handle: TimerHandle): void;
}
