import type { Operation, SessionEvent } from './ContextUpdate.js';
import type { LoopOutcome, LoopState } from './LoopState.js';
import type { CancelReason } from './TroupeError.js';

/**
 * How a run's loop ended, as the supervisor holds it: the part of its
 * `RunEnd` a loop reports (the rest, `crashed` and `lost`, is the
 * supervisor's own). One shape whichever thread ran the loop: the main
 * thread's loop maps its outcome here ({@link endOfLoop}); a worker's is
 * read straight into it from the wire (`decodeSubagentResult`).
 *
 * @example
 * ```ts
 * import type { LoopEnd } from '@troupe/core';
 *
 * function turnsOf(end: LoopEnd): number | undefined {
 *   return end.status === 'cancelled' ? undefined : end.turns;
 * }
 * ```
 */
export type LoopEnd =
  | {
      readonly status: 'done';
      readonly text: string;
      /** What the agent's `output` schema returned; absent for an agent without one. */
      readonly output?: unknown;
      readonly updates: readonly Operation[];
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    }
  | {
      readonly status: 'failed';
      readonly error: Error;
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    }
  | { readonly status: 'incomplete'; readonly events: readonly SessionEvent[]; readonly turns: number }
  | { readonly status: 'cancelled'; readonly reason: CancelReason; readonly forced: boolean }
  | {
      readonly status: 'suspended';
      readonly state: LoopState;
      readonly events: readonly SessionEvent[];
      readonly turns: number;
    };

/** The one mapping of a loop's outcome on the thread that holds it to a {@link LoopEnd}. */
export function endOfLoop(outcome: LoopOutcome): LoopEnd {
  const state = outcome.state;
  switch (outcome.status) {
    case 'done':
      return outcome.output === undefined
        ? { status: 'done', text: outcome.text, updates: state.updates, events: state.events, turns: state.turns }
        : {
            status: 'done',
            text: outcome.text,
            output: outcome.output,
            updates: state.updates,
            events: state.events,
            turns: state.turns,
          };
    case 'failed':
      return { status: 'failed', error: outcome.error, events: state.events, turns: state.turns };
    case 'incomplete':
      return { status: 'incomplete', events: state.events, turns: state.turns };
    case 'cancelled':
      return { status: 'cancelled', reason: outcome.reason, forced: false };
    case 'suspended':
      return { status: 'suspended', state, events: state.events, turns: state.turns };
  }
}
