import type { CancelToken } from './CancelToken.js';
import type { Metadata } from './ContextUpdate.js';
import type { AgentId, ToolCallId } from './Id.js';
import type { Message, Todo } from './Model.js';
import type { Answer } from './Request.js';
import type { Scope } from './Scope.js';

/** A read-only view of the calling agent's state. */
export interface AgentStateView {
  readonly agentId: AgentId;
  readonly messages: readonly Message[];
  readonly todos: readonly Todo[];
  /** Changed only through `ContextUpdate`s returned by tools. */
  readonly metadata: Metadata;
}

/** The keys Troupe owns in a tool's context; a `toolContext` key of the same name is overridden. */
export const RESERVED_CONTEXT_KEYS = [
  'scope',
  'state',
  'toolContext',
  'agentId',
  'parentAgentId',
  'toolCallId',
  'toolName',
  'attempt',
  'deadline',
  'timeoutMs',
  'answer',
  'signal',
  'isCancelled',
  'throwIfCancelled',
] as const;

/** What Troupe puts in every tool's context. */
export interface ReservedToolContext {
  /** Who the agent acts for: the parsed, frozen scope. */
  readonly scope: Scope;
  /** The caller's static toolContext, whole (its keys are also merged flat). */
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly state: AgentStateView;
  /** This agent's id (a subagent's is `<parentId>-sub-<n>`). */
  readonly agentId: AgentId;
  /** The parent's id, or `undefined` for a top-level agent. */
  readonly parentAgentId: AgentId | undefined;
  readonly toolCallId: ToolCallId;
  readonly toolName: string;
  /** 1 on the first attempt, 2 on the first retry, ... */
  readonly attempt: number;
  /** Absolute deadline of this call in the `Clock` base, if any. */
  readonly deadline: number | undefined;
  /** Milliseconds this call had left when it started, if it has a deadline. */
  readonly timeoutMs: number | undefined;
  /** The host's answer, only on a call resumed after `ToolResult.pending`. */
  readonly answer: Answer | undefined;
  /** Aborts (with a `CancelledError`) when the call or its run is cancelled. */
  readonly signal: AbortSignal;
  /** One atomic load: safe in a tight loop. */
  isCancelled(): boolean;
  /** Throws a `CancelledError` carrying the reason when cancelled. */
  throwIfCancelled(): void;
}

/**
 * What a tool's `execute` receives: the caller's `toolContext` keys merged
 * flat, overridden by the {@link ReservedToolContext} keys.
 */
export type ToolContext<TC extends Record<string, unknown> = Record<string, unknown>> = Omit<
  TC,
  keyof ReservedToolContext
> &
  ReservedToolContext;

/** The per-run part of a tool context: fixed for every call of a run. */
export interface RunContext {
  readonly scope: Scope;
  readonly toolContext: Readonly<Record<string, unknown>>;
  readonly agentId: AgentId;
  readonly parentAgentId: AgentId | undefined;
}

/** The per-call part of a tool context. */
export interface CallContext {
  readonly state: AgentStateView;
  readonly toolCallId: ToolCallId;
  readonly toolName: string;
  readonly attempt: number;
  readonly deadline: number | undefined;
  readonly timeoutMs: number | undefined;
  readonly answer: Answer | undefined;
  readonly token: CancelToken;
}

/**
 * Build the context a tool sees (sagents `custom_context`): `toolContext`
 * keys flat, then the reserved keys, which always win on collision.
 */
export function buildToolContext(run: RunContext, call: CallContext): ToolContext {
  const token = call.token;
  return {
    ...run.toolContext,
    scope: run.scope,
    toolContext: run.toolContext,
    state: call.state,
    agentId: run.agentId,
    parentAgentId: run.parentAgentId,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    attempt: call.attempt,
    deadline: call.deadline,
    timeoutMs: call.timeoutMs,
    answer: call.answer,
    get signal(): AbortSignal {
      return token.signal;
    },
    isCancelled: () => token.isCancelled(),
    throwIfCancelled: () => token.throwIfCancelled(),
  } as ToolContext;
}
