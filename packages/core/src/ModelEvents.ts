import type { AgentId } from './Id.js';
import type { Usage } from './Usage.js';

/**
 * Fields common to every model telemetry event.
 *
 * @example
 * ```ts
 * const where = (e: ModelEventBase) => `${e.agentId} turn ${e.turn} (${e.provider}/${e.model})`
 * supervisor.on('model.start', (e) => console.log(where(e)))
 * ```
 */
export interface ModelEventBase {
  readonly agentId: AgentId;
  /** The model's name as the agent's model reports it (`Model.name`), if any. */
  readonly model: string | undefined;
  /** Who serves it (`Model.provider`), if known. */
  readonly provider: string | undefined;
  /** The turn this call belongs to (1-based over the run's transcript). */
  readonly turn: number;
  /** When it happened, in the `Clock` base of the thread that ran the model. */
  readonly at: number;
}

/**
 * `model.start`: a model call begins.
 *
 * @example
 * ```ts
 * supervisor.on('model.start', (e: ModelStartEvent) => console.log(`${e.agentId} calls ${e.model}`))
 * ```
 */
export type ModelStartEvent = ModelEventBase;

/**
 * `model.stop`: a model call answered.
 *
 * @example
 * ```ts
 * supervisor.on('model.stop', (e: ModelStopEvent) => console.log(`${e.model}: ${e.durationMs} ms, ${e.usage?.outputTokens ?? 0} tokens`))
 * ```
 */
export interface ModelStopEvent extends ModelEventBase {
  readonly durationMs: number;
  readonly usage: Usage | undefined;
  /** The model the server says answered, when it differs from the agent's. */
  readonly responseModel: string | undefined;
  /** From the start of the call (its first attempt) to its first streamed delta, when it streamed. */
  readonly timeToFirstTokenMs: number | undefined;
  readonly attempts: number | undefined;
  readonly finishReason: string | undefined;
  /** Tool calls the answer asked for. */
  readonly toolCalls: number;
}

/**
 * `model.error`: a model call failed (or was cancelled: `cancelled` is true).
 *
 * @example
 * ```ts
 * supervisor.on('model.error', (e: ModelErrorEvent) => {
 *   if (!e.cancelled) console.error(`${e.agentId} model ${e.model} failed after ${e.durationMs} ms`, e.error)
 * })
 * ```
 */
export interface ModelErrorEvent extends ModelEventBase {
  readonly durationMs: number;
  /** The error (an `ErrorShape` once it crossed a thread, rebuilt on the supervisor). */
  readonly error: unknown;
  readonly cancelled: boolean;
  readonly attempts: number | undefined;
}

/**
 * The model telemetry event map.
 *
 * The supervisor emits them for every agent at every depth.
 *
 * @example
 * ```ts
 * const log = <K extends keyof ModelEvents>(name: K) => (...[e]: ModelEvents[K]) => console.log(name, e.agentId)
 * supervisor.on('model.start', log('model.start'))
 * ```
 */
export interface ModelEvents {
  'model.start': [ModelStartEvent];
  'model.stop': [ModelStopEvent];
  'model.error': [ModelErrorEvent];
}
