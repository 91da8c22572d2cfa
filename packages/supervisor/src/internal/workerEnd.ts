import type { AttemptEnd } from '../RunTransport.js';

/**
 * A worker's result as the supervisor's one shape: how its attempt ended, and what it spent.
 * Read straight off the wire into it (`decodeSubagentResult`'s `SubagentEnd`, whose loop end
 * is a {@link RunEnd}): no second mapping.
 */
export interface WorkerEnd extends AttemptEnd {
  /** Event batches the worker says it posted for the run (its end waits for them). */
  readonly sent: number;
  /** The run's last events, carried by its result (delivered after the posted batches). */
  readonly tail?: readonly unknown[] | undefined;
}
