import type { Clock } from './Clock.js';
import {
  applyContextUpdate,
  ContextUpdate,
  type Metadata,
  type Operation,
  type SessionEvent,
} from './ContextUpdate.js';
import { returnedExecution } from './executeTool.js';
import type { AgentId } from './Id.js';
import { toCallResult } from './internal/CallResult.js';
import { errorContent } from './internal/errorContent.js';
import type { LoopEventSink } from './LoopEvents.js';
import type { AssistantMessage, Message, ModelToolCall, Todo, ToolMessage } from './Model.js';
import type { Request } from './Request.js';
import { type TaskResult, taskToolResult } from './TaskTool.js';
import { asError } from './ToolResult.js';
import { CancelledError, type CancelReason } from './TroupeError.js';
import { addUsage, NO_USAGE, type Usage } from './Usage.js';

/** One call of a turn that was suspended, with its result once it has one. */
export interface PendingCall {
  readonly call: ModelToolCall;
  /** The result, once the call has one. */
  readonly result?: ToolMessage | undefined;
  /** The call's metadata operations and events, applied when the turn completes. */
  readonly operations?: readonly Operation[] | undefined;
  /** Child session-log events delivered by a `task` call. */
  readonly childEvents?: readonly SessionEvent[] | undefined;
  /** The question this call waits on. */
  readonly request?: Request | undefined;
  /** True when the question is an approval. */
  readonly approval?: boolean | undefined;
  /**
   * True for a `task` call whose child run is suspended: the question is the
   * child's, and only the supervisor resolves the call (with the child's
   * outcome, see {@link resolveDelegatedCall}); an answer never re-runs it.
   */
  readonly delegated?: boolean | undefined;
  /** The child's usage (its whole subtree), delivered with a `task` call's result. */
  readonly usage?: Usage | undefined;
}

/**
 * The state of an agent's loop: all a suspended run needs to resume on any thread.
 *
 * Plain, JSON-writable data: it is what persistence saves and a worker resumes from.
 *
 * @example
 * ```ts
 * declare const state: LoopState
 * const lastMessage = state.messages.at(-1)
 * const waiting = state.pending !== undefined
 * ```
 */
export interface LoopState {
  readonly agentId: AgentId;
  readonly messages: readonly Message[];
  readonly todos: readonly Todo[];
  readonly metadata: Metadata;
  /** Metadata operations applied during this run, in order (what a merge-back replays). */
  readonly updates: readonly Operation[];
  /** Session-log events recorded during this run. */
  readonly events: readonly SessionEvent[];
  readonly turns: number;
  /** Tokens this agent's own model calls used. */
  readonly usage: Usage;
  /** Tokens its children's subtrees used (delivered with `task` results); absent in states saved before it existed. */
  readonly childUsage?: Usage | undefined;
  /** Consecutive turns whose tool calls all failed, in the current message. */
  readonly failedTurns: number;
  /** `turns` when the current message started: `maxTurns` bounds each message, not the conversation (absent: 0). */
  readonly messageStartTurn?: number | undefined;
  /** The suspended turn, if the run is waiting on an answer. */
  readonly pending: readonly PendingCall[] | undefined;
}

/** How a loop run ended. `state` is always the state to keep. */
export type LoopOutcome =
  | {
      readonly status: 'done';
      readonly text: string;
      /** What the agent's `output` schema returned for the answer; absent for an agent without one. */
      readonly output?: unknown;
      readonly state: LoopState;
    }
  | { readonly status: 'failed'; readonly error: Error; readonly state: LoopState }
  | { readonly status: 'incomplete'; readonly state: LoopState }
  | { readonly status: 'suspended'; readonly request: Request; readonly state: LoopState }
  | { readonly status: 'cancelled'; readonly reason: CancelReason; readonly state: LoopState };

/** A fresh loop state for an agent: its instructions, empty todos, the given metadata. */
export function initialLoopState(agentId: AgentId, instructions: string, metadata: Metadata): LoopState {
  return {
    agentId,
    messages: instructions === '' ? [] : [sealMessage({ role: 'system', content: instructions })],
    todos: [],
    metadata,
    updates: [],
    events: [],
    turns: 0,
    usage: NO_USAGE,
    childUsage: NO_USAGE,
    failedTurns: 0,
    // Present from the start: a state keeps one shape through every spread (a key added later costs µs per run).
    messageStartTurn: 0,
    pending: undefined,
  };
}

/**
 * A message of primitives (a system prompt, the user's input, an answer without tool calls, a tool
 * result that is text), frozen as it enters the state (a frozen object of primitives is immutable): it can never change, so a store checks and
 * writes its JSON once for the conversation's life (PersistenceRules keeps the JSON of deep-frozen
 * messages), not on every turn's save. A message holding a tool's object or a model's arguments is
 * left as it is: those objects are the tool's and the model's, and freezing them could break code
 * that still holds them.
 */
export function sealMessage<M extends Message>(message: M): M {
  for (const key in message) {
    const v = (message as Record<string, unknown>)[key];
    if (typeof v === 'object' && v !== null) return message;
  }
  return Object.freeze(message);
}

/**
 * What a run's subtree used: its own model calls plus its children's.
 *
 * @example
 * ```ts
 * declare const state: LoopState
 * const { inputTokens, outputTokens } = totalUsage(state)
 * ```
 */
export function totalUsage(state: LoopState): Usage {
  return state.childUsage === undefined ? state.usage : addUsage(state.usage, state.childUsage);
}

/**
 * The state after the model's answer: one more turn, its usage counted, and
 * the assistant message (with its calls, when it made any) appended.
 */
export function appendAnswer(
  state: LoopState,
  content: string,
  calls: readonly ModelToolCall[],
  usage: Usage | undefined,
): LoopState {
  const assistant: AssistantMessage =
    calls.length === 0 ? { role: 'assistant', content } : { role: 'assistant', content, toolCalls: calls };
  return {
    ...state,
    turns: state.turns + 1,
    usage: addUsage(state.usage, usage),
    messages: [...state.messages, sealMessage(assistant)],
  };
}

/**
 * The calls of a suspended state that have no result yet: the run's own
 * questions, and `task` calls waiting on a suspended child.
 */
export function openCalls(state: LoopState): readonly PendingCall[] {
  return state.pending === undefined ? [] : state.pending.filter((p) => p.result === undefined);
}

/**
 * Name the questions open calls of a suspended state wait on by the requests
 * as the host knows them (the supervisor's ids), `names` by tool call id: an
 * answer then carries that id, and a saved state names the saved request.
 * One pass over the calls however many are renamed; the state itself when
 * none changes.
 */
export function renameRequests(state: LoopState, names: ReadonlyMap<string, Request>): LoopState {
  const pending = state.pending;
  if (pending === undefined || names.size === 0) return state;
  let next: PendingCall[] | undefined;
  for (let i = 0; i < pending.length; i++) {
    const p = pending[i] as PendingCall;
    if (p.result !== undefined) continue;
    const request = names.get(p.call.id);
    if (request === undefined || p.request?.id === request.id) continue;
    next ??= [...pending];
    next[i] = { ...p, request };
  }
  return next === undefined ? state : { ...state, pending: next };
}

/**
 * Give a delegated (`task`) call of a suspended state its child's outcome —
 * what the `task` tool would have returned had the child not suspended:
 * the answer (with the child's metadata operations when the parent merges
 * them), or an error result; the child's session events and usage ride along.
 * A pure function: the supervisor applies it to a suspended parent's state.
 */
export function resolveDelegatedCall(state: LoopState, toolCallId: string, result: TaskResult): LoopState {
  const pending = state.pending;
  if (pending === undefined) return state;
  const at = pending.findIndex((p) => p.call.id === toolCallId && p.result === undefined);
  const open = pending[at];
  if (open === undefined) return state;
  const next = [...pending];
  next[at] = resolvedCall(open, result);
  return { ...state, pending: next };
}

/**
 * An open delegated call with its child's outcome (see
 * {@link resolveDelegatedCall}): a result, or still open on the child's new
 * question when it suspended again.
 */
export function resolvedCall(open: PendingCall, result: TaskResult): PendingCall {
  if (result.status === 'suspended') return { ...open, request: result.request, delegated: true };
  // Read as the live call's result is: the task tool's one mapping, then a tool result's checks.
  const call = open.call;
  const r = toCallResult(call, returnedExecution(taskToolResult(result), 1, NOTHING_DROPPED));
  return {
    call,
    result: r.message,
    operations: r.operations,
    childEvents: result.events.length > 0 ? result.events : undefined,
    usage: result.usage,
  };
}

// A child's updates were checked where they were made: none is dropped here.
const NOTHING_DROPPED = (): void => {};

/**
 * Give up a suspended turn (its request was withdrawn): every call without a
 * result gets a `CancelledError` result, so no tool call is left without a
 * result in the transcript, and the turn is completed.
 */
export function abandonPendingTurn(state: LoopState, reason: CancelReason, clock: Clock): LoopState {
  if (state.pending === undefined) return state;
  const error = new CancelledError(reason, `the request was withdrawn (${reason})`);
  const calls = state.pending.map((p) =>
    p.result !== undefined
      ? p
      : {
          call: p.call,
          result: {
            role: 'tool' as const,
            toolCallId: p.call.id,
            name: p.call.name,
            content: errorContent(error),
            isError: true,
          },
        },
  );
  return completeTurn({ ...state, pending: undefined }, calls, clock, undefined);
}

/**
 * Complete a turn whose calls all have results: append the tool messages in
 * call order, then apply each call's update in call order (metadata first,
 * then its events), then the child events of `task` calls.
 */
export function completeTurn(
  state: LoopState,
  calls: readonly PendingCall[],
  clock: Clock,
  events: LoopEventSink | undefined,
): LoopState {
  const messages = [...state.messages];
  let metadata = state.metadata;
  let log: readonly SessionEvent[] = state.events;
  let updates = state.updates;
  let children = state.childUsage;
  let allFailed = true;
  const at = clock.now();
  for (const p of calls) {
    let result = p.result as ToolMessage;
    if (p.operations !== undefined && p.operations.length > 0) {
      try {
        // Operations that crossed a thread are rebuilt and checked like new ones.
        const update = ContextUpdate.from(p.operations);
        const applied = applyContextUpdate(update, { metadata, log }, { agentId: state.agentId, at });
        metadata = applied.metadata;
        log = applied.log ?? log;
        const metaOps = update.operations.filter((o) => o.op !== 'logEvent');
        if (metaOps.length > 0) updates = [...updates, ...metaOps];
        if (
          applied.dropped !== undefined &&
          events !== undefined &&
          events.listenerCount('context.events_dropped') > 0
        ) {
          events.emit('context.events_dropped', { agentId: state.agentId, dropped: applied.dropped, at });
        }
      } catch (error) {
        // An update that cannot be applied (append to a non-list, an operation
        // rebuilt from another thread that fails its checks): none of it is
        // applied, and the model sees why instead of the call's value.
        const err = asError(error);
        result = {
          role: 'tool',
          toolCallId: result.toolCallId,
          name: result.name,
          content: errorContent(err),
          isError: true,
        };
      }
    }
    messages.push(sealMessage(result));
    if (!result.isError) allFailed = false;
    if (p.childEvents !== undefined && p.childEvents.length > 0) log = [...log, ...p.childEvents];
    if (p.usage !== undefined) children = addUsage(children ?? NO_USAGE, p.usage);
  }
  return {
    ...state,
    messages,
    metadata,
    events: log,
    updates,
    childUsage: children,
    failedTurns: allFailed ? state.failedTurns + 1 : 0,
    pending: undefined,
  };
}
