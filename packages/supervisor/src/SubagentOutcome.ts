import type {
  AgentId,
  CancelReason,
  LoopState,
  Operation,
  Request,
  RunId,
  SessionEvent,
  Usage,
  WorkerCrashedError,
} from '@troupe/core';

interface OutcomeBase {
  readonly agentId: AgentId;
  readonly runId: RunId;
  /** Tokens of the run's own model calls. */
  readonly usage: Usage;
  /** Tokens of its whole subtree: itself and every subagent under it. */
  readonly totalUsage: Usage;
}

interface Accounted extends OutcomeBase {
  /** Session-log events of the run, each with the id of the agent that recorded it. */
  readonly events: readonly SessionEvent[];
  readonly turns: number;
}

/**
 * How a subagent run ended: a union discriminated on `status`. Failures
 * (`failed`), defects (`crashed`) and interruptions (`cancelled`) are kept
 * apart.
 *
 * - `done` — the model answered; `result` is its last text, `updates` the
 *   metadata operations the run applied (merge them back through the reducer).
 * - `failed` — a tool failure the model could not recover from, a model
 *   error, or a tool that overran its timeout without yielding (a forced
 *   `ToolTimeoutError`).
 * - `crashed` — a defect: the worker died (threw at top level, `process.exit`,
 *   out of memory under `resourceLimits`), or broke the protocol and was
 *   recycled; carries the exit code when there is one.
 * - `cancelled` — with its reason; `forced` when the worker had to be killed.
 * - `incomplete` — the turn limit was reached.
 * - `suspended` — a tool asked a person; answer with `supervisor.answer`.
 *
 * @example
 * ```ts
 * const outcome: SubagentOutcome = await supervisor.spawn(agent, { input: 'Summarise the incident', scope: {} })
 * switch (outcome.status) {
 *   case 'done':
 *     console.log(outcome.result)
 *     break
 *   case 'suspended':
 *     console.log('asks:', outcome.request.prompt)
 *     break
 *   default:
 *     console.warn(outcome.status)
 * }
 * ```
 */
export type SubagentOutcome =
  | (Accounted & { readonly status: 'done'; readonly result: string; readonly updates: readonly Operation[] })
  | (Accounted & { readonly status: 'failed'; readonly error: Error })
  | (OutcomeBase & { readonly status: 'crashed'; readonly error: WorkerCrashedError; readonly exitCode: number | null })
  | (OutcomeBase & { readonly status: 'cancelled'; readonly reason: CancelReason; readonly forced: boolean })
  | (Accounted & { readonly status: 'incomplete' })
  | (Accounted & { readonly status: 'suspended'; readonly request: Request; readonly state: LoopState });
