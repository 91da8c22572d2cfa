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

/** Token usage, summed over a run. */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** What the agent loop passes to {@link Model.generate}. */
export interface ModelRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  /** Aborts when the run is cancelled; pass it to `fetch`. */
  readonly signal: AbortSignal;
}

/** What {@link Model.generate} resolves to. */
export interface ModelResponse {
  readonly message: AssistantMessage;
  readonly usage?: Usage | undefined;
}

/**
 * The model an agent talks to. Adapt any provider by implementing
 * `generate`; honour `signal` so a cancelled run stops its request.
 * `@troupe/core/testing` has a scripted model for tests.
 */
export interface Model {
  readonly name?: string;
  generate(request: ModelRequest): Promise<ModelResponse>;
}

/** A todo in an agent's own state; subagents start with none. */
export interface Todo {
  readonly id: string;
  readonly text: string;
  readonly status: 'pending' | 'in_progress' | 'done';
}
