import type { Agent } from './Agent.js';
import { findUncloneable } from './assertCloneable.js';
import type { CancelToken, RunCancellation } from './CancelToken.js';
import type { Clock } from './Clock.js';
import {
  applyContextUpdate,
  ContextUpdate,
  type EventsDropped,
  type Metadata,
  type Operation,
  type SessionEvent,
} from './ContextUpdate.js';
import { type ApprovalHandler, executeTool, type ToolExecution } from './executeTool.js';
import { type AgentId, createId, type ToolCallId } from './Id.js';
import type { AssistantMessage, Message, ModelRequest, ModelToolCall, Todo, ToolMessage, Usage } from './Model.js';
import type { Answer, Request } from './Request.js';
import { createTaskTool, TASK_TOOL_NAME, type TaskSpawner } from './TaskTool.js';
import type { AnyTool, ToolSpec } from './Tool.js';
import type { AgentStateView, RunContext } from './ToolContext.js';
import type { ToolEventSink, ToolEvents } from './ToolEvents.js';
import { CancelledError, type CancelReason, isTroupeError, TroupeError } from './TroupeError.js';

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
}

/** The state of an agent's loop: all a suspended run needs to resume on any thread. */
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
  readonly usage: Usage;
  /** Consecutive turns whose tool calls all failed. */
  readonly failedTurns: number;
  /** The suspended turn, if the run is waiting on an answer. */
  readonly pending: readonly PendingCall[] | undefined;
}

/** How a loop run ended. `state` is always the state to keep. */
export type LoopOutcome =
  | { readonly status: 'done'; readonly text: string; readonly state: LoopState }
  | { readonly status: 'failed'; readonly error: Error; readonly state: LoopState }
  | { readonly status: 'incomplete'; readonly state: LoopState }
  | { readonly status: 'suspended'; readonly request: Request; readonly state: LoopState }
  | { readonly status: 'cancelled'; readonly reason: CancelReason; readonly state: LoopState };

/** Agent-level events of the loop. */
export interface LoopEvents extends ToolEvents {
  'agent.turn': [{ readonly agentId: AgentId; readonly turn: number; readonly at: number }];
  'context.events_dropped': [{ readonly agentId: AgentId; readonly dropped: EventsDropped; readonly at: number }];
}

/** The part of an eventemitter3 emitter the loop needs. */
export interface LoopEventSink extends ToolEventSink {
  emit<K extends keyof LoopEvents>(event: K, ...args: LoopEvents[K]): boolean;
  listenerCount(event: keyof LoopEvents): number;
}

/** Default: consecutive all-failed turns after which a run fails. */
export const DEFAULT_MAX_FAILED_TURNS = 3;

/** Options of {@link runAgentLoop}. */
export interface RunAgentLoopOptions {
  readonly agent: Agent;
  readonly run: RunContext;
  readonly state: LoopState;
  /** A user message to add before the first turn. */
  readonly input?: string | undefined;
  /** Resume the suspended turn in `state.pending` with this answer. */
  readonly answer?: Answer | undefined;
  /** Tool calls the supervisor itself approved (never taken from the state). */
  readonly approvedCalls?: ReadonlySet<string> | undefined;
  readonly clock: Clock;
  readonly cancellation: RunCancellation;
  readonly approval?: ApprovalHandler | undefined;
  /** Runs delegated tasks; without it an agent's subagents are not offered. */
  readonly spawner?: TaskSpawner | undefined;
  readonly events?: LoopEventSink | undefined;
  /** Consecutive turns whose tool calls all fail before the run fails. Default 3. */
  readonly maxFailedTurns?: number | undefined;
}

/** A fresh loop state for an agent: its instructions, empty todos, the given metadata. */
export function initialLoopState(agentId: AgentId, instructions: string, metadata: Metadata): LoopState {
  return {
    agentId,
    messages: instructions === '' ? [] : [{ role: 'system', content: instructions }],
    todos: [],
    metadata,
    updates: [],
    events: [],
    turns: 0,
    usage: { inputTokens: 0, outputTokens: 0 },
    failedTurns: 0,
    pending: undefined,
  };
}

interface CallResult {
  readonly message: ToolMessage;
  readonly operations: readonly Operation[] | undefined;
  readonly request: Request | undefined;
  readonly approval: boolean;
  readonly failed: boolean;
}

function errorContent(error: Error): { error: string; code?: string } {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? { error: error.message, code } : { error: error.message };
}

function toCallResult(call: ModelToolCall, execution: ToolExecution): CallResult {
  switch (execution.status) {
    case 'ok': {
      const bad = findUncloneable(execution.value, 'result');
      if (bad !== undefined) {
        const error = new TroupeError(
          `tool "${call.name}" returned a value that cannot cross a thread: ${bad.path} is ${bad.what}; return plain data`,
          { code: 'ERR_NOT_CLONEABLE' },
        );
        return {
          message: { role: 'tool', toolCallId: call.id, name: call.name, content: errorContent(error), isError: true },
          operations: undefined,
          request: undefined,
          approval: false,
          failed: true,
        };
      }
      return {
        message: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content: execution.value ?? null,
          isError: false,
        },
        operations: execution.update?.operations,
        request: undefined,
        approval: false,
        failed: false,
      };
    }
    case 'error':
      return {
        message: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content: errorContent(execution.error),
          isError: true,
        },
        operations: execution.update?.operations,
        request: undefined,
        approval: false,
        failed: true,
      };
    case 'pending':
      return {
        message: { role: 'tool', toolCallId: call.id, name: call.name, content: null, isError: false },
        operations: undefined,
        request: execution.request,
        approval: execution.approval,
        failed: false,
      };
  }
}

const NO_CALLS: { calls: ModelToolCall[]; malformed: Map<string, string> } = Object.freeze({
  calls: [],
  malformed: new Map(),
}) as never;

/** Normalise what a model returned; malformed tool calls become calls that fail with a clear error. */
function normaliseCalls(message: AssistantMessage): { calls: ModelToolCall[]; malformed: Map<string, string> } {
  const raw = (message as { toolCalls?: unknown }).toolCalls;
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return NO_CALLS;
  const calls: ModelToolCall[] = [];
  const malformed = new Map<string, string>();
  if (!Array.isArray(raw)) {
    const id = createId('call');
    calls.push({ id, name: 'invalid', arguments: null });
    malformed.set(id, 'toolCalls must be an array of { id, name, arguments }');
    return { calls, malformed };
  }
  const seen = new Set<string>();
  for (const item of raw as unknown[]) {
    const c = item as Partial<ModelToolCall> | null;
    const id = typeof c?.id === 'string' && c.id.length > 0 && !seen.has(c.id) ? c.id : (createId('call') as string);
    seen.add(id);
    if (typeof c !== 'object' || c === null || typeof c.name !== 'string' || c.name.length === 0) {
      calls.push({ id, name: typeof c?.name === 'string' && c.name !== '' ? c.name : 'invalid', arguments: null });
      malformed.set(id, 'a tool call must have a name (string), an id and arguments');
      continue;
    }
    let args: unknown = c.arguments;
    if (typeof args === 'string') {
      // Providers often send arguments as JSON text.
      try {
        args = JSON.parse(args);
      } catch {
        calls.push({ id, name: c.name, arguments: args });
        malformed.set(id, `arguments of "${c.name}" are not valid JSON`);
        continue;
      }
    }
    // A well-formed call is kept as is (no copy per call: a turn may hold a hundred).
    calls.push(
      id === c.id && args === c.arguments && args !== undefined && args !== null
        ? (c as ModelToolCall)
        : { id, name: c.name, arguments: args ?? {} },
    );
  }
  return { calls, malformed };
}

/**
 * A model request whose `signal` is created on first read (a signal over a
 * shared slot costs a waitAsync bridge). A class, not an object literal with a
 * getter: this is built on every model turn.
 */
class LazySignalRequest implements ModelRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  readonly #token: CancelToken;
  constructor(messages: readonly Message[], tools: readonly ToolSpec[], token: CancelToken) {
    this.messages = messages;
    this.tools = tools;
    this.#token = token;
  }
  get signal(): AbortSignal {
    return this.#token.signal;
  }
}

// Every call of a turn sees the same state: one view per state, not one per call.
const stateViews = new WeakMap<LoopState, AgentStateView>();

function stateView(state: LoopState): AgentStateView {
  let view = stateViews.get(state);
  if (view === undefined) {
    view = { agentId: state.agentId, messages: state.messages, todos: state.todos, metadata: state.metadata };
    stateViews.set(state, view);
  }
  return view;
}

interface ToolIndex {
  readonly byName: ReadonlyMap<string, AnyTool>;
  /** Position in `agent.tools`; the task tool is `agent.tools.length`. */
  readonly position: ReadonlyMap<string, number>;
  readonly specs: readonly ToolSpec[];
  specsWithTask(task: AnyTool): readonly ToolSpec[];
}

// An agent's tools never change: index them once per agent, not once per run.
const toolIndexes = new WeakMap<Agent, ToolIndex>();

function toolIndexOf(agent: Agent): ToolIndex {
  let index = toolIndexes.get(agent);
  if (index === undefined) {
    const byName = new Map<string, AnyTool>();
    const position = new Map<string, number>();
    agent.tools.forEach((tool, i) => {
      byName.set(tool.name, tool);
      position.set(tool.name, i);
    });
    position.set(TASK_TOOL_NAME, agent.tools.length);
    let specs: readonly ToolSpec[] | undefined;
    let withTask: readonly ToolSpec[] | undefined;
    const own = (): readonly ToolSpec[] => {
      specs ??= Object.freeze(agent.tools.map((t) => t.spec));
      return specs;
    };
    index = {
      byName,
      position,
      get specs() {
        return own();
      },
      // The task tool's spec depends only on the agent's subagents: the same for every run.
      specsWithTask(task) {
        withTask ??= Object.freeze([...own(), task.spec]);
        return withTask;
      },
    };
    toolIndexes.set(agent, index);
  }
  return index;
}

function addUsage(a: Usage, b: Usage | undefined): Usage {
  if (b === undefined) return a;
  return {
    inputTokens: a.inputTokens + (Number.isFinite(b.inputTokens) ? b.inputTokens : 0),
    outputTokens: a.outputTokens + (Number.isFinite(b.outputTokens) ? b.outputTokens : 0),
  };
}

/**
 * Run an agent's loop: model turn → tool calls (through the executor, in
 * parallel, results kept in call order) → results appended → next turn,
 * until the model answers without tool calls (`done`), the turn limit is hit
 * (`incomplete`), a tool asks a person (`suspended`, with the state to resume
 * from), the run is cancelled, or the model fails.
 *
 * The same function runs a parent agent on the supervisor thread and a
 * subagent in a worker; only the cancellation, approval and spawner differ.
 * Never rejects.
 */
export async function runAgentLoop(options: RunAgentLoopOptions): Promise<LoopOutcome> {
  const { agent, run, clock, cancellation, events } = options;
  const token = cancellation.token;
  let state = options.state;
  const maxFailedTurns = options.maxFailedTurns ?? DEFAULT_MAX_FAILED_TURNS;

  // Child events delivered by `task` calls, by call id, until the turn completes.
  const childEvents = new Map<string, readonly SessionEvent[]>();
  const index = toolIndexOf(agent);
  // The task tool closes over this run's spawner; everything else is shared per agent.
  const task =
    agent.subagents.length > 0 && options.spawner !== undefined
      ? createTaskTool(agent.subagents, options.spawner, (id, evs) => {
          if (evs.length > 0) childEvents.set(id, evs);
        })
      : undefined;
  const toolNamed = (name: string): AnyTool | undefined =>
    task !== undefined && name === task.name ? task : index.byName.get(name);
  const specs = task === undefined ? index.specs : index.specsWithTask(task);

  const execute = async (
    call: ModelToolCall,
    malformed: string | undefined,
    answer?: Answer,
    approvalAnswer = false,
  ): Promise<CallResult> => {
    const tool = toolNamed(call.name);
    let execution: ToolExecution;
    if (malformed !== undefined) {
      execution = {
        status: 'error',
        error: new TroupeError(`malformed tool call: ${malformed}`, { code: 'ERR_TOOL_VALIDATION' }),
        kind: 'validation',
        update: undefined,
        attempts: 0,
      };
    } else if (tool === undefined) {
      execution = {
        status: 'error',
        error: new TroupeError(
          `unknown tool "${call.name}"; available: ${specs.map((t) => t.name).join(', ') || 'none'}`,
          {
            code: 'ERR_TOOL_UNKNOWN',
          },
        ),
        kind: 'unknown_tool',
        update: undefined,
        attempts: 0,
      };
    } else {
      execution = await executeTool(
        tool,
        { id: call.id as ToolCallId, arguments: call.arguments },
        {
          clock,
          run,
          state: stateView(state),
          cancellation,
          approval: options.approval,
          preApproved: approvalAnswer && options.approvedCalls?.has(call.id) === true,
          answer: approvalAnswer ? undefined : answer,
          events,
          toolIndex: index.position.get(call.name),
        },
      );
    }
    return toCallResult(call, execution);
  };

  const end = <O extends LoopOutcome>(outcome: O): O => outcome;

  if (options.input !== undefined) {
    state = { ...state, messages: [...state.messages, { role: 'user', content: options.input }] };
  }

  // Resume a suspended turn: answer the first open question, then ask the next, or complete the turn.
  if (state.pending !== undefined) {
    const answer = options.answer;
    const pending = [...state.pending];
    const index = pending.findIndex((p) => p.request !== undefined);
    const open = pending[index];
    if (answer === undefined || open === undefined || open.request?.id !== answer.id) {
      return end({
        status: 'failed',
        error: new TroupeError(
          `this run waits on request ${open?.request?.id ?? '(none)'} but was resumed with ${answer === undefined ? 'no answer' : `an answer to ${answer.id}`}`,
          { code: 'ERR_UNKNOWN_REQUEST' },
        ),
        state,
      });
    }
    const request = open.request as Request;
    let result: CallResult;
    const expired = request.expiresAt !== undefined && clock.now() > request.expiresAt;
    if (expired || !answer.ok) {
      const error = expired
        ? new TroupeError(`request ${request.id} expired before it was answered`, { code: 'ERR_REQUEST_EXPIRED' })
        : new TroupeError(
            `${open.approval === true ? 'approval was declined' : 'the request was declined'}${answer.reason ? `: ${answer.reason}` : ''}`,
            { code: open.approval === true ? 'ERR_APPROVAL_DENIED' : 'ERR_REQUEST_DECLINED' },
          );
      result = {
        message: {
          role: 'tool',
          toolCallId: open.call.id,
          name: open.call.name,
          content: errorContent(error),
          isError: true,
        },
        operations: undefined,
        request: undefined,
        approval: false,
        failed: true,
      };
    } else {
      // Re-run the pending tool exactly once. An approval answer is not the tool's own answer:
      // the call runs pre-approved (if the supervisor says so) as if first called.
      result = await execute(open.call, undefined, answer, open.approval === true);
    }
    pending[index] = {
      call: open.call,
      result: result.request === undefined ? result.message : undefined,
      operations: result.operations,
      childEvents: childEvents.get(open.call.id),
      request: result.request,
      approval: result.approval,
    };
    const next = pending.find((p) => p.request !== undefined);
    if (next !== undefined) {
      return end({ status: 'suspended', request: next.request as Request, state: { ...state, pending } });
    }
    state = completeTurn({ ...state, pending: undefined }, pending, clock, events);
  }

  for (;;) {
    if (token.isCancelled()) return end({ status: 'cancelled', reason: token.reason ?? 'user', state });
    if (state.failedTurns >= maxFailedTurns) {
      return end({
        status: 'failed',
        error: new TroupeError(
          `the model could not recover: the tool calls of ${state.failedTurns} turns in a row all failed (last: ${lastToolError(state)})`,
          { code: 'ERR_TOOL_FAILED' },
        ),
        state,
      });
    }
    if (state.turns >= agent.maxTurns) return end({ status: 'incomplete', state });

    if (events !== undefined && events.listenerCount('agent.turn') > 0) {
      events.emit('agent.turn', { agentId: state.agentId, turn: state.turns + 1, at: clock.now() });
    }
    let message: AssistantMessage;
    let usage: Usage | undefined;
    try {
      const response = await agent.model.generate(new LazySignalRequest(state.messages, specs, token));
      message = response?.message;
      usage = response?.usage;
      if (
        typeof message !== 'object' ||
        message === null ||
        typeof (message as { content?: unknown }).content !== 'string'
      ) {
        throw new TroupeError(
          'the model returned no assistant message (expected { message: { role, content, toolCalls? } })',
          {
            code: 'ERR_MODEL',
          },
        );
      }
    } catch (error) {
      if (token.isCancelled()) return end({ status: 'cancelled', reason: token.reason ?? 'user', state });
      const err =
        error instanceof Error
          ? isTroupeError(error)
            ? error
            : new TroupeError(`the model failed: ${error.message}`, { code: 'ERR_MODEL', cause: error })
          : new TroupeError(`the model failed: ${String(error)}`, { code: 'ERR_MODEL' });
      return end({ status: 'failed', error: err, state });
    }

    const { calls, malformed } = normaliseCalls(message);
    const assistant: AssistantMessage =
      calls.length === 0
        ? { role: 'assistant', content: message.content }
        : { role: 'assistant', content: message.content, toolCalls: calls };
    state = {
      ...state,
      turns: state.turns + 1,
      usage: addUsage(state.usage, usage),
      messages: [...state.messages, assistant],
    };
    if (calls.length === 0) return end({ status: 'done', text: message.content, state });

    const results =
      calls.length === 1
        ? [await execute(calls[0] as ModelToolCall, malformed.get((calls[0] as ModelToolCall).id))]
        : await Promise.all(calls.map((c) => execute(c, malformed.get(c.id))));
    const pending: PendingCall[] = results.map((r, i) => ({
      call: calls[i] as ModelToolCall,
      result: r.request === undefined ? r.message : undefined,
      operations: r.operations,
      childEvents: childEvents.get((calls[i] as ModelToolCall).id),
      request: r.request,
      approval: r.approval,
    }));
    childEvents.clear();
    const first = pending.find((p) => p.request !== undefined);
    if (first !== undefined) {
      return end({ status: 'suspended', request: first.request as Request, state: { ...state, pending } });
    }
    state = completeTurn(state, pending, clock, events);
    if (token.isCancelled()) return end({ status: 'cancelled', reason: token.reason ?? 'user', state });
  }
}

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

function lastToolError(state: LoopState): string {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const m = state.messages[i];
    if (m?.role === 'tool' && m.isError) {
      const c = m.content as { error?: unknown } | null;
      return typeof c?.error === 'string' ? c.error : 'unknown';
    }
  }
  return 'unknown';
}

/**
 * Complete a turn whose calls all have results: append the tool messages in
 * call order, then apply each call's update in call order (metadata first,
 * then its events), then the child events of `task` calls.
 */
function completeTurn(
  state: LoopState,
  calls: readonly PendingCall[],
  clock: Clock,
  events: LoopEventSink | undefined,
): LoopState {
  const messages = [...state.messages];
  let metadata = state.metadata;
  let log: readonly SessionEvent[] = state.events;
  let updates = state.updates;
  let allFailed = true;
  const at = clock.now();
  for (const p of calls) {
    const result = p.result as ToolMessage;
    messages.push(result);
    if (!result.isError) allFailed = false;
    if (p.operations !== undefined && p.operations.length > 0) {
      // Operations that crossed a thread are rebuilt and checked like new ones.
      const update = ContextUpdate.from(p.operations);
      const applied = applyContextUpdate(update, { metadata, log }, { agentId: state.agentId, at });
      metadata = applied.metadata;
      log = applied.log ?? log;
      const metaOps = update.operations.filter((o) => o.op !== 'logEvent');
      if (metaOps.length > 0) updates = [...updates, ...metaOps];
      if (applied.dropped !== undefined && events !== undefined && events.listenerCount('context.events_dropped') > 0) {
        events.emit('context.events_dropped', { agentId: state.agentId, dropped: applied.dropped, at });
      }
    }
    if (p.childEvents !== undefined && p.childEvents.length > 0) log = [...log, ...p.childEvents];
  }
  return {
    ...state,
    messages,
    metadata,
    events: log,
    updates,
    failedTurns: allFailed ? state.failedTurns + 1 : 0,
    pending: undefined,
  };
}
