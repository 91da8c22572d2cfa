import { performance } from 'node:perf_hooks';
import type { Clock, TimerHandle } from '@troupe/core';

/**
 * A real clock that records every timer asked of it, so a test can see the
 * delays a model chose (backoff, retry-after) and act the moment one is set.
 */
export class RecordingClock implements Clock {
  readonly delays: number[] = [];
  #waiters: { match: (ms: number) => boolean; resolve: (ms: number) => void }[] = [];

  now(): number {
    return performance.timeOrigin + performance.now();
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    this.delays.push(ms);
    for (const w of this.#waiters.filter((w) => w.match(ms))) {
      this.#waiters.splice(this.#waiters.indexOf(w), 1);
      w.resolve(ms);
    }
    return setTimeout(callback, ms);
  }

  clearTimeout(handle: TimerHandle): void {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  }

  /** Resolves when a timer whose delay matches is set (now, or already). */
  timerSet(match: (ms: number) => boolean): Promise<number> {
    const seen = this.delays.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
}
