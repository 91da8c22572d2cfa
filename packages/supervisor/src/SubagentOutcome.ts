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

/** `output` when an agent's structured output is known to be there (not `undefined`, `unknown` or `any`). */
type OutputKey<O> = unknown extends O ? never : [O] extends [undefined] ? never : 'output';

/**
 * The `output` of a `done` outcome or reply of an agent whose structured
 * output is `O`: required when the agent has an `output` schema, absent when
 * it has none (`O` is `undefined`), optional for an agent of any output.
 * A mapped type, not a conditional one, so that an outcome of a known output
 * is still an outcome of any (`SubagentOutcome<{ city: string }>` is a
 * `SubagentOutcome`).
 */
export type DoneOutput<O> = { readonly [K in OutputKey<O>]: O } & { readonly output?: O };

/**
 * How a subagent run ended: a union discriminated on `status`. Failures
 * (`failed`), defects (`crashed`) and interruptions (`cancelled`) are kept
 * apart.
 *
 * - `done` — the model answered; `result` is its last text, `output` what the
 *   agent's `output` schema made of it (typed `O`, when the agent has one),
 *   `updates` the metadata operations the run applied (merge them back
 *   through the reducer).
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
export type SubagentOutcome<O = unknown> =
  | (Accounted &
      DoneOutput<O> & { readonly status: 'done'; readonly result: string; readonly updates: readonly Operation[] })
  | (Accounted & { readonly status: 'failed'; readonly error: Error })
  | (OutcomeBase & { readonly status: 'crashed'; readonly error: WorkerCrashedError; readonly exitCode: number | null })
  | (OutcomeBase & { readonly status: 'cancelled'; readonly reason: CancelReason; readonly forced: boolean })
  | (Accounted & { readonly status: 'incomplete' })
  | (Accounted & { readonly status: 'suspended'; readonly request: Request; readonly state: LoopState });
