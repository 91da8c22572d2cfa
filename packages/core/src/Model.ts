import type { ToolSpec } from './Tool.js';

/** A tool call as a model emits it. `arguments` is unchecked until the executor validates it. */
export interface ModelToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: unknown;
}

/** A message of an agent's transcript. */
export type Message =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | AssistantMessage
  | ToolMessage;

/** What a model answers with: text and/or tool calls. */
export interface AssistantMessage {
  readonly role: 'assistant';
  readonly content: string;
  readonly toolCalls?: readonly ModelToolCall[] | undefined;
}

/** The result of one tool call, as the model sees it on the next turn. */
export interface ToolMessage {
  readonly role: 'tool';
  readonly toolCallId: string;
  readonly name: string;
  /** The tool's value, or `{ error, code }` when `isError`. */
  readonly content: unknown;
  readonly isError: boolean;
}

/**
 * Token usage, summed over a model call, a run or a subtree of runs.
 * `cachedInputTokens` (part of `inputTokens` served from a prompt cache) and
 * `reasoningTokens` (part of `outputTokens` spent reasoning) are present when
 * the provider reports them.
 */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedInputTokens?: number | undefined;
  readonly reasoningTokens?: number | undefined;
}

/**
 * One piece of a streamed answer, in the order the model produced it:
 * answer text, reasoning text, or a fragment of a tool call (`index` orders
 * the calls of one answer; `name` and `id` arrive once, `arguments` in pieces).
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

/** What the agent loop passes to {@link Model.generate}. */
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
}

/** What a model call was, for telemetry (every field optional). */
export interface ModelCallInfo {
  /** The model the server says answered (may differ from the one asked for). */
  readonly model?: string | undefined;
  /** Attempts this call made (1 without retries). */
  readonly attempts?: number | undefined;
  /** From the request until the first streamed delta, in ms. */
  readonly timeToFirstTokenMs?: number | undefined;
  /** Why the model stopped (`stop`, `tool_calls`, `length`, ...). */
  readonly finishReason?: string | undefined;
}

/** What {@link Model.generate} resolves to. */
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
 */
export interface Model {
  /** The model's name, as telemetry reports it (`gpt-4.1-mini`, `scripted`). */
  readonly name?: string;
  /** Who serves it (`openai`, `ollama`, ...), for telemetry. */
  readonly provider?: string;
  generate(request: ModelRequest): Promise<ModelResponse>;
}

/** A todo in an agent's own state; subagents start with none. */
export interface Todo {
  readonly id: string;
  readonly text: string;
  readonly status: 'pending' | 'in_progress' | 'done';
}
