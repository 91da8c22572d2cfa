import { NO_USAGE } from '@troupe/core';
import { decodeError, type SubagentResult } from '@troupe/core/internal';
import type { AttemptEnd } from '../RunTransport.js';

const NO_EVENTS: readonly never[] = Object.freeze([]);
const NO_UPDATES: readonly never[] = Object.freeze([]);

/** A worker's result as the supervisor's one shape: how its attempt ended, and what it spent. */
export interface WorkerEnd extends AttemptEnd {
  /** Event batches the worker says it posted for the run (its end waits for them). */
  readonly sent: number;
  /** The run's last events, carried by its result (delivered after the posted batches). */
  readonly tail?: readonly unknown[] | undefined;
}

/**
 * The one mapping of a worker's (decoded) result to a {@link WorkerEnd}: for the result
 * a task returns, and for the one a run hands over while it still holds work (`held`:
 * its thread is then recycled, so a cancel it reports was forced).
 */
export function workerEnd(r: SubagentResult, held = false): WorkerEnd {
  const events = r.events ?? NO_EVENTS;
  const usage = r.usage ?? NO_USAGE;
  const turns = r.turns;
  const sent = r.sent ?? 0;
  const tail = held ? undefined : r.tail;
  switch (r.status) {
    case 'done':
      return {
        usage,
        sent,
        tail,
        end:
          r.output === undefined
            ? { status: 'done', text: r.text, updates: r.updates ?? NO_UPDATES, events, turns }
            : { status: 'done', text: r.text, output: r.output, updates: r.updates ?? NO_UPDATES, events, turns },
      };
    case 'failed':
      return { usage, sent, tail, end: { status: 'failed', error: decodeError(r.error), events, turns } };
    case 'incomplete':
      return { usage, sent, tail, end: { status: 'incomplete', events, turns } };
    case 'cancelled':
      return { usage, sent, tail, end: { status: 'cancelled', reason: r.reason, forced: held } };
    case 'suspended':
      return { usage, sent, tail, end: { status: 'suspended', state: r.state, events, turns } };
  }
}
