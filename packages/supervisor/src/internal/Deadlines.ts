import type { Clock, TimerHandle } from '@troupe/core';
import type { RunNode } from './RunNode.js';

/**
 * The run tree's deadlines: while a run with a deadline is live, a timer
 * looks every `intervalMs` for runs whose deadline passed and hands each to
 * `expire` once (the tree cancels it, reason `deadline`, with its subtree).
 * No timer runs while no run has a deadline. The deadline itself is the
 * run's record (`node.deadline`, written by the tree); this only watches it.
 */
export class Deadlines {
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #expire: (node: RunNode) => void;
  readonly #watched = new Set<RunNode>();
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(clock: Clock, intervalMs: number, expire: (node: RunNode) => void) {
    this.#clock = clock;
    this.#intervalMs = intervalMs;
    this.#expire = expire;
  }

  /** Watch `node` (its `deadline` is set). */
  watch(node: RunNode): void {
    if (this.#closed) return;
    this.#watched.add(node);
    this.#timer ??= this.#clock.setTimeout(this.#tick, this.#intervalMs);
  }

  /** Stop watching `node` (it ended, or suspended: time waiting for a person does not count). */
  unwatch(node: RunNode): void {
    // The timer is not cleared here: it lapses at its next tick with nothing watched (a
    // setTimeout/clearTimeout pair per run would cost more than the tick).
    this.#watched.delete(node);
  }

  /** Stop the timer and forget every run. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#watched.clear();
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    if (this.#watched.size === 0) return;
    const now = this.#clock.now();
    let due: RunNode[] | undefined;
    for (const node of this.#watched) {
      if (node.deadline === undefined || node.deadline > now) continue;
      due ??= [];
      due.push(node);
    }
    if (due !== undefined) {
      for (const node of due) this.#watched.delete(node);
      // Ancestors first: a child's deadline is within its parent's, and the parent's cancel reaches it as `parent`.
      if (due.length > 1) due.sort((a, b) => depth(a) - depth(b));
      for (const node of due) this.#expire(node);
    }
    if (this.#watched.size > 0 && !this.#closed) this.#timer = this.#clock.setTimeout(this.#tick, this.#intervalMs);
  };
}

function depth(node: RunNode): number {
  let d = 0;
  for (let n = node.parent; n !== undefined; n = n.parent) d++;
  return d;
}
