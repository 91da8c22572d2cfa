import type { OutputSpec } from './OutputSpec.js';
import type { ToolSpec } from './ToolSpec.js';
import type { Usage } from './Usage.js';

/**
 * A tool call as a model emits it. `arguments` is unchecked until the executor validates it.
 *
 * @example
 * ```ts
 * const call: ModelToolCall = { id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }
 * ```
 */
export interface ModelToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: unknown;
  /**
   * What the model adapter must send back with this call on the next turn
   * (a provider's signature of the reasoning that led to it, an item id),
   * opaque to Troupe: plain JSON, kept with the call in the transcript (saved,
   * carried across threads) when its `arguments` are an object. Leave it out
   * unless your provider needs it.
   */
  readonly providerData?: Readonly<Record<string, unknown>> | undefined;
}

/**
 * A message of an agent's transcript.
 *
 * @example
 * ```ts
 * const transcript: Message[] = [
 *   { role: 'system', content: 'You answer briefly.' },
 *   { role: 'user', content: 'Weather in Oslo?' },
 * ]
 * ```
 */
export type Message =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | AssistantMessage
  | ToolMessage;

/**
 * What a model answers with: text and/or tool calls.
 *
 * @example
 * ```ts
 * const message: AssistantMessage = {
 *   role: 'assistant',
 *   content: '',
 *   toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }],
 * }
 * ```
 */
export interface AssistantMessage {
  readonly role: 'assistant';
  readonly content: string;
  readonly toolCalls?: readonly ModelToolCall[] | undefined;
}

/**
 * The result of one tool call, as the model sees it on the next turn.
 *
 * @example
 * ```ts
 * const result: ToolMessage = { role: 'tool', toolCallId: 'call_1', name: 'get_weather', content: { tempC: 4 }, isError: false }
 * ```
 */
export interface ToolMessage {
  readonly role: 'tool';
  readonly toolCallId: string;
  readonly name: string;
  /** The tool's value, or `{ error, code }` when `isError`. */
  readonly content: unknown;
  readonly isError: boolean;
}

/**
 * One piece of a streamed answer, in the order the model produced it:
 * answer text, reasoning text, or a fragment of a tool call (`index` orders
 * the calls of one answer; `name` and `id` arrive once, `arguments` in pieces).
 *
 * @example
 * ```ts
 * const streaming: Model = {
 *   async generate({ onDelta }) {
 *     for (const text of ['Hel', 'lo']) onDelta?.({ type: 'text', text } satisfies ModelDelta)
 *     return { message: { role: 'assistant', content: 'Hello' } }
 *   },
 * }
 * ```
 */
export type ModelDelta =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'reasoning'; readonly text: string }
  | {
      readonly type: 'tool_call';
      readonly index: number;
      readonly id?: string | undefined;
      readonly name?: string | undefined;
      readonly arguments?: string | undefined;
    };

/**
 * What the agent loop passes to {@link Model.generate}.
 *
 * @example
 * ```ts
 * const request: ModelRequest = {
 *   messages: [{ role: 'user', content: 'Hi' }],
 *   tools: [],
 *   signal: AbortSignal.timeout(30_000),
 * }
 * const response = await model.generate(request)
 * ```
 */
export interface ModelRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  /** Aborts when the run is cancelled; pass it to `fetch`. */
  readonly signal: AbortSignal;
  /**
   * Set when someone listens to the run's tokens: a streaming model calls it
   * with each delta, in order, before `generate` resolves. A model that does
   * not stream ignores it. Never throws; cheap enough to call per token.
   */
  readonly onDelta?: ((delta: ModelDelta) => void) | undefined;
  /**
   * Set when the agent defines structured `output`: the final answer's text
   * should be one JSON value matching this schema. Honour it if the provider
   * can (a JSON schema response format, a final-answer tool), or ignore it:
   * the loop checks the answer either way and sends a mismatch back.
   */
  readonly output?: OutputSpec | undefined;
}

/**
 * What a model call was, for telemetry (every field optional).
 *
 * @example
 * ```ts
 * const info: ModelCallInfo = { model: 'gpt-4.1-mini-2025-04-14', attempts: 1, timeToFirstTokenMs: 180, finishReason: 'stop' }
 * ```
 */
export interface ModelCallInfo {
  /** The model the server says answered (may differ from the one asked for). */
  readonly model?: string | undefined;
  /** Attempts this call made (1 without retries). */
  readonly attempts?: number | undefined;
  /**
   * From the start of the call until its first streamed delta, in ms: a call that was retried
   * counts its failed attempts and the waits between them (what the caller waited).
   */
  readonly timeToFirstTokenMs?: number | undefined;
  /** Why the model stopped (`stop`, `tool_calls`, `length`, ...). */
  readonly finishReason?: string | undefined;
}

/**
 * What {@link Model.generate} resolves to.
 *
 * `usage` is what the run's totals add up; leave it out when the server reports none.
 *
 * @example
 * ```ts
 * const response: ModelResponse = {
 *   message: { role: 'assistant', content: 'It is 4 °C in Oslo.' },
 *   usage: { inputTokens: 120, outputTokens: 9 },
 * }
 * ```
 */
export interface ModelResponse {
  readonly message: AssistantMessage;
  readonly usage?: Usage | undefined;
  /** Reasoning text the model returned beside its answer, if any. */
  readonly reasoning?: string | undefined;
  readonly info?: ModelCallInfo | undefined;
}

/**
 * The model an agent talks to. Adapt any provider by implementing
 * `generate`; honour `signal` so a cancelled run stops its request.
 * `@troupe/core/testing` has a scripted model for tests; `@troupe/openai`
 * talks to OpenAI-compatible servers.
 *
 * Gotcha: the loop races every call against the run's cancellation, so a
 * model that ignores `signal` cannot hold a cancelled run — but its request
 * goes on in the background until it settles.
 *
 * @example
 * ```ts
 * const echo: Model = {
 *   name: 'echo',
 *   async generate({ messages, signal }) {
 *     signal.throwIfAborted()
 *     const last = messages.at(-1)
 *     return { message: { role: 'assistant', content: last?.role === 'user' ? last.content : '' } }
 *   },
 * }
 * ```
 */
export interface Model {
  /** The model's name, as telemetry reports it (`gpt-4.1-mini`, `scripted`). */
  readonly name?: string | undefined;
  /** Who serves it (`openai`, `ollama`, ...), for telemetry. */
  readonly provider?: string | undefined;
  generate(request: ModelRequest): Promise<ModelResponse>;
}

/**
 * A todo in an agent's own state; subagents start with none.
 *
 * @example
 * ```ts
 * const todo: Todo = { id: 't1', text: 'Draft the summary', status: 'in_progress' }
 * ```
 */
export interface Todo {
  readonly id: string;
  readonly text: string;
  readonly status: 'pending' | 'in_progress' | 'done';
}
