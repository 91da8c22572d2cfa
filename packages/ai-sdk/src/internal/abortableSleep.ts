import type { Clock } from '@troupe/core';

/** What {@link abortableSleep} rejects with when the signal aborts. */
export const SLEEP_ABORTED: unique symbol = Symbol('sleep aborted');

/**
 * Wait `ms` on `clock`, or reject with {@link SLEEP_ABORTED} as soon as
 * `signal` aborts (at once if it already has). The timer and the listener are
 * removed either way.
 */
export function abortableSleep(ms: number, signal: AbortSignal, clock: Clock): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(SLEEP_ABORTED);
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      reject(SLEEP_ABORTED);
    };
    const timer = clock.setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
