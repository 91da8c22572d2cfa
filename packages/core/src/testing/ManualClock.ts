import type { Clock, TimerHandle } from '../Clock.js';
import { describeValue } from '../internal/describeValue.js';
import { InvalidArgumentError } from '../TroupeError.js';

interface Timer {
  readonly id: number;
  readonly at: number;
  readonly callback: () => void;
}

/**
 * A clock that moves only when told. Tests of time behaviour use it instead
 * of sleeping: `advance(ms)` fires every timer due by then, in time order.
 *
 * @example
 * ```ts
 * const clock = new ManualClock()
 * const fired: string[] = []
 * clock.setTimeout(() => fired.push('a'), 50)
 * clock.advance(50) // fires 'a'
 * ```
 */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  #timers: Timer[] = [];

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    // Like the global setTimeout: a negative or non-numeric delay means 0.
    const delay = Number.isFinite(ms) ? Math.max(0, ms) : 0;
    const timer = { id: this.#nextId++, at: this.#now + delay, callback };
    this.#timers.push(timer);
    return timer.id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers = this.#timers.filter((t) => t.id !== handle);
  }

  /** Timers scheduled and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /** Move time forward by `ms`, firing due timers in order (ties in scheduling order). */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) {
      // The clock is monotonic: time never goes back.
      throw new InvalidArgumentError(`ManualClock.advance: ms must be a finite number >= 0, got ${describeValue(ms)}`);
    }
    const target = this.#now + ms;
    for (;;) {
      let next: Timer | undefined;
      for (const t of this.#timers) if (t.at <= target && (next === undefined || t.at < next.at)) next = t;
      if (next === undefined) break;
      const due = next;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.callback();
    }
    this.#now = target;
  }
}
