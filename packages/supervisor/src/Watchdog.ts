import { type CancelReason, type Clock, ClosedError, InvalidArgumentError, type TimerHandle } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';
import type { CancellationTable } from './CancellationTable.js';

/** Why the watchdog asks for a run's worker to be killed. */
export type WatchdogKillCause =
  /** The run was cancelled `graceMs` ago and is still running: it ignores its token. */
  | { readonly kind: 'cancelled'; readonly reason: CancelReason }
  /** A tool call's deadline passed `graceMs` ago and the call has not returned: it never yields. */
  | { readonly kind: 'lane-timeout'; readonly lane: number };

/** Options of {@link Watchdog}. */
export interface WatchdogOptions {
  readonly table: CancellationTable;
  /** Default: `systemClock` (unref'd timers: the watchdog never keeps a process alive). */
  readonly clock?: Clock | undefined;
  /** How long cooperative cancellation gets before `kill` (ms, ≥ 0). */
  readonly graceMs: number;
  /** How often deadlines are checked while runs are tracked (ms, > 0). Default 10. */
  readonly intervalMs?: number | undefined;
  /**
   * Hard-stop the run `key` (abort its piscina task; the worker is replaced).
   * Called once per tracked run; the run is untracked first. Must not throw:
   * an error is rethrown from the timer after the watchdog rescheduled itself.
   */
  readonly kill: (key: string, cause: WatchdogKillCause) => void;
}

interface Tracked {
  /** When the watchdog first saw the run cancelled, in clock ms. */
  cancelledAt: number | undefined;
  /** Lanes cancelled for their deadline: lane → the call and when. */
  lanes: Map<number, { readonly call: number; readonly at: number }> | undefined;
}

/**
 * Enforces cancellation against code that never yields (contract 5): while
 * runs are tracked, a timer calls `table.expireLanes(now)` every `intervalMs`
 * (a tool call's deadline becomes a cancel of its lane), and escalates what
 * cooperation did not stop:
 *
 * - a tracked run cancelled (any reason) more than `graceMs` ago and still
 *   tracked → `kill(key, { kind: 'cancelled', reason })`;
 * - a call whose lane was cancelled for its deadline more than `graceMs` ago
 *   and whose lane is still held → `kill(key, { kind: 'lane-timeout', lane })`.
 *
 * `cancelled(key)` starts a run's grace period at once (after a user, parent
 * or shutdown cancel) instead of at the next tick. No timer runs while
 * nothing is tracked (the timer lapses at its first tick with nothing tracked).
 * `close()` stops it; use after close throws.
 *
 * Gotcha: lane timeouts are learnt from the watchdog's own `expire()` calls;
 * while it runs, do not call `table.expireLanes()` elsewhere or those calls are
 * cancelled but never escalated.
 *
 * @example
 * ```ts
 * const watchdog = new Watchdog({ table, graceMs: 250, kill: (key) => pool.abort(key) })
 * watchdog.track('agent-1-sub-1')   // its task started in a worker
 * // ... task settles:
 * watchdog.untrack('agent-1-sub-1')
 * ```
 */
export class Watchdog {
  readonly #table: CancellationTable;
  readonly #clock: Clock;
  readonly #graceMs: number;
  readonly #intervalMs: number;
  readonly #kill: WatchdogOptions['kill'];
  readonly #tracked = new Map<string, Tracked>();
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(options: WatchdogOptions) {
    const { graceMs, intervalMs = 10, kill } = options;
    if (typeof graceMs !== 'number' || !Number.isFinite(graceMs) || graceMs < 0) {
      throw new InvalidArgumentError(
        `graceMs must be a finite number of milliseconds ≥ 0, got ${describeValue(graceMs)}`,
      );
    }
    if (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new InvalidArgumentError(
        `intervalMs must be a finite number of milliseconds > 0, got ${describeValue(intervalMs)}`,
      );
    }
    if (typeof kill !== 'function') throw new InvalidArgumentError('kill must be a function (key, cause) => void');
    this.#table = options.table;
    this.#clock = options.clock ?? systemClock;
    this.#graceMs = graceMs;
    this.#intervalMs = intervalMs;
    this.#kill = kill;
  }

  /** Runs being watched. */
  get size(): number {
    return this.#tracked.size;
  }

  /** Watch run `key` (registered in the table) while its task runs in a worker. Idempotent. */
  track(key: string): void {
    if (this.#closed) throw new ClosedError('the watchdog is closed: create a new one');
    if (!this.#table.has(key)) {
      throw new InvalidArgumentError(`run "${key}" is not registered in the cancellation table: register it first`, {
        code: 'ERR_UNKNOWN_AGENT',
      });
    }
    if (this.#tracked.has(key)) return;
    this.#tracked.set(key, { cancelledAt: undefined, lanes: undefined });
    this.#schedule();
  }

  /** Stop watching `key` (its task settled). Returns whether it was tracked. */
  untrack(key: string): boolean {
    // The timer is not cleared here: it stops at its next tick if nothing is
    // tracked then. Clearing and re-arming it around every run would cost a
    // setTimeout/clearTimeout pair per run (~6 µs) when runs come one by one.
    return this.#tracked.delete(key);
  }

  /** Run `key` was just cancelled: start its grace period now. A no-op for a run not tracked. */
  cancelled(key: string): void {
    const tracked = this.#tracked.get(key);
    if (tracked !== undefined && tracked.cancelledAt === undefined) tracked.cancelledAt = this.#clock.now();
  }

  /** Stop the timer and forget every run. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#tracked.clear();
    this.#unschedule();
  }

  #schedule(): void {
    if (this.#timer === undefined && !this.#closed) {
      this.#timer = this.#clock.setTimeout(this.#tick, this.#intervalMs);
    }
  }

  #unschedule(): void {
    if (this.#timer !== undefined) {
      this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (this.#closed || this.#tracked.size === 0) return;
    const now = this.#clock.now();
    const table = this.#table;
    for (const entry of table.expireLanes(now)) {
      const tracked = this.#tracked.get(entry.key);
      if (tracked === undefined) continue;
      if (tracked.lanes === undefined) tracked.lanes = new Map();
      tracked.lanes.set(entry.lane, { call: entry.call, at: now });
    }
    const kills: [string, WatchdogKillCause][] = [];
    for (const [key, tracked] of this.#tracked) {
      if (!table.has(key)) {
        // Released without untrack: the run is over.
        this.#tracked.delete(key);
        continue;
      }
      if (tracked.cancelledAt === undefined) {
        if (table.isCancelled(key)) tracked.cancelledAt = now;
      } else if (now - tracked.cancelledAt > this.#graceMs) {
        kills.push([key, { kind: 'cancelled', reason: table.reason(key) ?? 'shutdown' }]);
        continue;
      }
      if (tracked.lanes === undefined) continue;
      for (const [lane, { call, at }] of tracked.lanes) {
        if (!table.isLaneHeld(key, lane, call)) tracked.lanes.delete(lane);
        else if (now - at > this.#graceMs) {
          kills.push([key, { kind: 'lane-timeout', lane }]);
          break;
        }
      }
    }
    const errors: unknown[] = [];
    for (const [key, cause] of kills) {
      // The run dies with its worker: untrack first so it is killed once.
      this.#tracked.delete(key);
      try {
        this.#kill(key, cause);
      } catch (error) {
        errors.push(error);
      }
    }
    if (this.#tracked.size > 0) this.#schedule();
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `${errors.length} watchdog kill callbacks threw`);
  };
}
