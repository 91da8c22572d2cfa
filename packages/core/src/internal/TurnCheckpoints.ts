import type { LoopState } from '../LoopState.js';

/** A tool call as a checkpoint records it before it runs. */
export interface CheckpointCall {
  readonly id: string;
  readonly name: string;
  readonly idempotent: boolean;
}

/**
 * Durable checkpoints of a run's turns, for a store that must survive a
 * crash. The loop awaits each: a checkpoint that fails (a full disk) fails
 * the run with its error, and nothing runs past what was saved.
 */
export interface TurnCheckpoints {
  /** The model asked for these calls: save `state` (the calls open) and mark them started — before any runs. */
  beforeCalls(state: LoopState, calls: readonly CheckpointCall[]): Promise<void>;
  /** The turn's calls have their results: save `state` and mark them committed, in one transaction. */
  afterTurn(state: LoopState, calls: readonly string[]): Promise<void>;
}
