import type { Model } from './Model.js';

/**
 * A function that makes an agent's model, given to `defineAgent({ model })`
 * instead of a model: Troupe calls it on the thread that runs the agent, at
 * the agent's first model call there, so it reads that thread's environment
 * as it is then — a port or a key known only after start-up reaches it.
 *
 * - **Once per thread:** the model it returns is kept for every later run of
 *   the agent on that thread (the supervisor thread for a parent agent, each
 *   worker for a subagent); concurrent first calls share one call.
 * - **Async allowed:** it may return a promise (a key from a secret store, a
 *   provider package imported on first use).
 * - **Errors:** a factory that throws (or rejects, or returns something that
 *   is not a model) fails that run with `ERR_MODEL_FACTORY`, naming the agent
 *   and the factory; nothing is kept, so the next run calls it again.
 * - **Telemetry:** a model's `name` and `provider` are known once it is made:
 *   the supervisor thread's events about a subagent made elsewhere carry none.
 *
 * @example
 * ```ts
 * import { openaiModel } from '@troupe/openai'
 *
 * const fromEnvironment: ModelFactory = () =>
 *   openaiModel({ baseURL: process.env.MODEL_BASE_URL ?? 'https://api.openai.com/v1', model: 'gpt-4.1-mini' })
 * export const helper = defineAgent({ name: 'helper', module: import.meta.url, instructions: 'Help.', model: fromEnvironment })
 * ```
 */
export type ModelFactory<M extends Model = Model> = () => M | PromiseLike<M>;
