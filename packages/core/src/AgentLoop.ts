import type { Agent } from './Agent.js';
import { findUncloneable } from './assertCloneable.js';
import { type CancelCell, type CancelToken, onCancelled, type RunCancellation } from './CancelToken.js';
import type { Clock } from './Clock.js';
import {
  applyContextUpdate,
  ContextUpdate,
  type EventsDropped,
  findNotJson,
  type Metadata,
  type Operation,
  type SessionEvent,
} from './ContextUpdate.js';
import { type ApprovalHandler, executeTool, type ToolExecution } from './executeTool.js';
import { type AgentId, createId, type ToolCallId } from './Id.js';
import type {
  AssistantMessage,
  Message,
  ModelDelta,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  Todo,
  ToolMessage,
} from './Model.js';
import type { ModelEvents } from './ModelEvents.js';
import type { Answer, Request } from './Request.js';
import { createTaskTool, TASK_TOOL_NAME, type TaskResult, type TaskSpawner } from './TaskTool.js';
import type { AnyTool, ToolSpec } from './Tool.js';
import type { AgentStateView, RunContext } from './ToolContext.js';
import type { ToolEventSink, ToolEvents } from './ToolEvents.js';
import { asError } from './ToolResult.js';
import { CancelledError, type CancelReason, isTroupeError, TroupeError } from './TroupeError.js';
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
  | { readonly status: 'done'; readonly text: string; readonly state: LoopState }
  | { readonly status: 'failed'; readonly error: Error; readonly state: LoopState }
  | { readonly status: 'incomplete'; readonly state: LoopState }
  | { readonly status: 'suspended'; readonly request: Request; readonly state: LoopState }
  | { readonly status: 'cancelled'; readonly reason: CancelReason; readonly state: LoopState };

/**
 * Agent-level events of the loop.
 *
 * The supervisor re-emits them (with where they came from); listen there, not on the loop.
 *
 * @example
 * ```ts
 * const onTurn = (...[event]: LoopEvents['agent.turn']) => console.log(`${event.agentId} turn ${event.turn}`)
 * ```
 */
export interface LoopEvents extends ToolEvents, ModelEvents {
  'agent.turn': [{ readonly agentId: AgentId; readonly turn: number; readonly at: number }];
  'context.events_dropped': [{ readonly agentId: AgentId; readonly dropped: EventsDropped; readonly at: number }];
}

/** The part of an eventemitter3 emitter the loop needs. */
export interface LoopEventSink extends ToolEventSink {
  emit<K extends keyof LoopEvents>(event: K, ...args: LoopEvents[K]): boolean;
  listenerCount(event: keyof LoopEvents): number;
}

/** A tool call as a checkpoint records it before it runs. */
export interface CheckpointCall {
  readonly id: string;
  readonly name: string;
  readonly idempotent: boolean;
}

/**
 * Durable checkpoints of a run's turns, for a store that must survive a
 * crash. The loop awaits each: a checkpoint that fails (a full disk) fails
 * the run with its error, and nothing runs past what was saved.
 */
export interface TurnCheckpoints {
  /** The model asked for these calls: save `state` (the calls open) and mark them started — before any runs. */
  beforeCalls(state: LoopState, calls: readonly CheckpointCall[]): Promise<void>;
  /** The turn's calls have their results: save `state` and mark them committed, in one transaction. */
  afterTurn(state: LoopState, calls: readonly string[]): Promise<void>;
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
  /** The supervisor found the answer's question expired when it was answered: the tool gets an error result. */
  readonly expired?: boolean | undefined;
  /**
   * Called as soon as one of the run's own tools asks a person (returns
   * `pending`, or its approval handler asks), while the turn's other calls
   * go on: the host can see the question before the run suspends.
   */
  readonly onQuestion?: ((toolCallId: string, request: Request) => void) | undefined;
  /** Receives the model's streamed deltas, in order (given to the model as `onDelta`). */
  readonly onDelta?: ((delta: ModelDelta) => void) | undefined;
  /** Told about a tool or model promise the loop stopped waiting for while it ran on (see `executeTool`). */
  readonly abandoned?: ((work: PromiseLike<unknown>) => void) | undefined;
  /**
   * Race each model call against the run's cancellation (default true). Off
   * where something else bounds a model that ignores its signal — a worker,
   * whose watchdog kills it after the grace period — so that a run does not
   * pay a cancellation bridge per model call for nothing: the outcome is
   * still `cancelled` once the call returns.
   */
  readonly raceModel?: boolean | undefined;
  /** Save each turn durably (see {@link TurnCheckpoints}); none: nothing is saved mid-run. */
  readonly checkpoints?: TurnCheckpoints | undefined;
  /**
   * Resume a run a crash interrupted, from a state saved by `beforeCalls`:
   * each open call in `started` gets an `ERR_INTERRUPTED` error result
   * (its side effect may have happened) unless its tool is `idempotent`;
   * the others run now. `lost`: what the subagent of a started call had
   * spent when the crash cut it off, kept on that call's result.
   */
  readonly interrupted?:
    | { readonly started: ReadonlySet<string>; readonly lost?: ReadonlyMap<string, Usage> | undefined }
    | undefined;
}

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

interface CallResult {
  readonly message: ToolMessage;
  readonly operations: readonly Operation[] | undefined;
  readonly request: Request | undefined;
  readonly approval: boolean;
  readonly failed: boolean;
  readonly delegated?: boolean | undefined;
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
      let content = execution.value ?? null;
      if (findNotJson(content, 'result', { undefinedPropertiesAreAbsent: true }) !== undefined) {
        // The transcript is saved, and read by models, as JSON: what the model would be shown of a
        // Date (its ISO string), an undefined in a list (null) is what the transcript keeps.
        try {
          content = JSON.parse(JSON.stringify(content)) ?? null;
        } catch (error) {
          const refused = new TroupeError(
            `tool "${call.name}" returned a value JSON cannot write (${(error as Error)?.message ?? String(error)}): return plain data`,
            { code: 'ERR_NOT_JSON' },
          );
          return {
            message: {
              role: 'tool',
              toolCallId: call.id,
              name: call.name,
              content: errorContent(refused),
              isError: true,
            },
            operations: undefined,
            request: undefined,
            approval: false,
            failed: true,
          };
        }
      }
      return {
        message: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content,
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

/**
 * Normalise what a model returned; malformed tool calls become calls that fail
 * with a clear error (`ERR_TOOL_VALIDATION`, in the transcript and the
 * outcome, never run).
 *
 * A call without an id, or with an id an earlier call of the same answer has,
 * is one of them. Its id is the identity the call is recorded under (the
 * result it is paired with, tool events, persisted tool-call records), so
 * Troupe does not invent one and run the call under it: a Model must give
 * every call a unique id (model adapters for servers that send none, such as
 * `@troupe/openai`, make them). The id minted here only pairs the error
 * result with its entry in the transcript.
 */
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
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as Partial<ModelToolCall> | null;
    const given: unknown = typeof c === 'object' && c !== null ? c.id : undefined;
    const unique = typeof given === 'string' && given.length > 0 && !seen.has(given);
    const id = unique ? given : (createId('call') as string);
    seen.add(id);
    if (!unique && typeof c === 'object' && c !== null && typeof c.name === 'string' && c.name.length > 0) {
      calls.push({ id, name: c.name, arguments: c.arguments ?? null });
      malformed.set(
        id,
        typeof given === 'string' && given.length > 0
          ? `call ${i + 1} ("${c.name}") of the answer has the id "${given}" of an earlier call of the same answer, so it was not run: a Model must give every tool call of an answer its own id`
          : `call ${i + 1} ("${c.name}") of the answer has no id, so it was not run: a Model must give every tool call an id (its result is paired with the call by it)`,
      );
      continue;
    }
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
  readonly onDelta: ((delta: ModelDelta) => void) | undefined;
  readonly #token: CancelToken;
  constructor(
    messages: readonly Message[],
    tools: readonly ToolSpec[],
    token: CancelToken,
    onDelta: ((delta: ModelDelta) => void) | undefined,
  ) {
    this.messages = messages;
    this.tools = tools;
    this.#token = token;
    this.onDelta = onDelta;
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

type ModelCall =
  | { readonly kind: 'answered'; readonly response: ModelResponse | undefined }
  | { readonly kind: 'threw'; readonly error: unknown }
  | { readonly kind: 'cancelled'; readonly reason: CancelReason };

/**
 * Call the model, raced against the run's cancellation: a model that ignores
 * its signal cannot hold a cancelled run (its promise is reported as
 * abandoned and left to settle on its own).
 */
function callModel(
  generate: () => Promise<ModelResponse>,
  token: CancelToken,
  abandoned: ((work: PromiseLike<unknown>) => void) | undefined,
  race: boolean,
): Promise<ModelCall> {
  let promise: Promise<ModelResponse>;
  try {
    promise = generate();
  } catch (error) {
    return Promise.resolve({ kind: 'threw', error });
  }
  if (typeof (promise as { then?: unknown } | null)?.then !== 'function') {
    return Promise.resolve({ kind: 'answered', response: promise as unknown as ModelResponse });
  }
  if (!race) {
    return Promise.resolve(promise).then(
      (response): ModelCall => ({ kind: 'answered', response }),
      (error: unknown): ModelCall => ({ kind: 'threw', error }),
    );
  }
  return new Promise<ModelCall>((resolve) => {
    let done = false;
    const cell: CancelCell = { fn: undefined };
    cell.fn = (reason) => {
      if (done) return;
      done = true;
      abandoned?.(promise);
      resolve({ kind: 'cancelled', reason });
    };
    promise.then(
      (response) => {
        cell.fn = undefined;
        if (done) return;
        done = true;
        resolve({ kind: 'answered', response });
      },
      (error: unknown) => {
        cell.fn = undefined;
        if (done) return;
        done = true;
        resolve({ kind: 'threw', error });
      },
    );
    if (!done) onCancelled(token, cell);
  });
}

/**
 * Run an agent's loop: model turn → tool calls (through the executor, in
 * parallel, results kept in call order) → results appended → next turn,
 * until the model answers without tool calls (`done`), the turn limit is hit
 * (`incomplete`), a tool asks a person (`suspended`, with the state to resume
 * from), the run is cancelled, or the model fails.
 *
 * Resuming (a state with `pending` calls): an `answer` re-runs the one call
 * that asked it, exactly once (a declined or expired answer gives that call
 * an error result instead); with every call resolved the turn completes and
 * the loop goes on, otherwise the run suspends again on the next open call.
 * A `task` call whose child suspended is open until the supervisor resolves
 * it ({@link resolveDelegatedCall}); an answer never re-runs it.
 *
 * The same function runs a parent agent on the supervisor thread and a
 * subagent in a worker; only the cancellation, approval and spawner differ.
 * Model calls and tool calls are raced against the run's cancellation, so a
 * cancelled run ends `cancelled`, never `done`. Never rejects.
 */
export async function runAgentLoop(options: RunAgentLoopOptions): Promise<LoopOutcome> {
  try {
    return await loop(options);
  } catch (error) {
    // A defect of the loop or of a callback it trusted (a spawner, a sink):
    // the run fails with it, the caller is never left with a rejection.
    return {
      status: 'failed',
      error: new TroupeError(`the agent loop failed: ${asError(error).message}`, {
        code: 'ERR_INTERNAL',
        cause: error,
      }),
      state: options.state,
    };
  }
}

// The child maps of a run that cannot delegate: never written (see loop).
const NO_CHILD_EVENTS = new Map<string, readonly SessionEvent[]>();
const NO_CHILD_USAGE = new Map<string, Usage>();

async function loop(options: RunAgentLoopOptions): Promise<LoopOutcome> {
  const { agent, run, clock, cancellation, events } = options;
  const token = cancellation.token;
  let state = options.state;
  const maxFailedTurns = options.maxFailedTurns ?? DEFAULT_MAX_FAILED_TURNS;

  // Child events and usage delivered by `task` calls, by call id, until the turn completes.
  // Made only for a run that can delegate (only its task tool writes them; clearing an empty one is a no-op).
  const spawner = agent.subagents.length > 0 ? options.spawner : undefined;
  const delegates = spawner !== undefined;
  const childEvents = delegates ? new Map<string, readonly SessionEvent[]>() : NO_CHILD_EVENTS;
  const childUsage = delegates ? new Map<string, Usage>() : NO_CHILD_USAGE;
  const index = toolIndexOf(agent);
  // The task tool closes over this run's spawner; everything else is shared per agent.
  const task =
    spawner !== undefined
      ? createTaskTool(agent.subagents, spawner, (id, evs, usage) => {
          if (evs.length > 0) childEvents.set(id, evs);
          if (usage !== undefined) childUsage.set(id, usage);
        })
      : undefined;
  const toolNamed = (name: string): AnyTool | undefined =>
    task !== undefined && name === task.name ? task : index.byName.get(name);
  const specs = task === undefined ? index.specs : index.specsWithTask(task);
  const onQuestion = options.onQuestion;

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
          abandoned: options.abandoned,
        },
      );
    }
    const result = toCallResult(call, execution);
    if (result.request === undefined) return result;
    // A `task` call's question is its child's (already asked); the run's own tools ask now.
    if (tool === task) return { ...result, delegated: true };
    onQuestion?.(call.id, result.request);
    return result;
  };

  const end = <O extends LoopOutcome>(outcome: O): O => outcome;

  if (options.input !== undefined) {
    // A new message: the failed-turn count is per message.
    state = {
      ...state,
      failedTurns: 0,
      messageStartTurn: state.turns,
      messages: [...state.messages, sealMessage({ role: 'user', content: options.input })],
    };
  }

  const checkpoints = options.checkpoints;
  const callsOf = (calls: readonly ModelToolCall[]): CheckpointCall[] =>
    calls.map((c) => ({ id: c.id, name: c.name, idempotent: toolNamed(c.name)?.idempotent === true }));

  // Resume a suspended turn: answer the call that asked, then suspend on the next open call or complete the turn.
  if (state.pending !== undefined) {
    const pending = [...state.pending];
    const answer = options.answer;
    if (options.interrupted !== undefined) {
      const started = options.interrupted.started;
      const rerun: number[] = [];
      for (let i = 0; i < pending.length; i++) {
        const p = pending[i] as PendingCall;
        if (p.result !== undefined) continue;
        if (started.has(p.call.id) && toolNamed(p.call.name)?.idempotent !== true) {
          const error = new TroupeError(
            `tool "${p.call.name}" was interrupted by a restart after it started; it is not re-run (its side effect may have happened): check, then call it again if needed`,
            { code: 'ERR_INTERRUPTED' },
          );
          pending[i] = {
            call: p.call,
            result: {
              role: 'tool',
              toolCallId: p.call.id,
              name: p.call.name,
              content: errorContent(error),
              isError: true,
            },
            usage: options.interrupted.lost?.get(p.call.id),
          };
        } else rerun.push(i);
      }
      if (rerun.length > 0) {
        const calls = rerun.map((i) => (pending[i] as PendingCall).call);
        if (checkpoints !== undefined) {
          try {
            await checkpoints.beforeCalls({ ...state, pending }, callsOf(calls));
          } catch (error) {
            return end({ status: 'failed', error: asError(error), state });
          }
        }
        const results = await Promise.all(calls.map((c) => execute(c, undefined)));
        rerun.forEach((at, k) => {
          pending[at] = pendingOf(calls[k] as ModelToolCall, results[k] as CallResult, childEvents, childUsage);
        });
      }
    } else if (answer !== undefined) {
      const at = pending.findIndex(
        (p) => p.result === undefined && p.delegated !== true && p.request?.id === answer.id,
      );
      const open = pending[at];
      if (open === undefined) {
        return end({
          status: 'failed',
          error: new TroupeError(
            `this run waits on ${describeOpen(pending)} but was resumed with an answer to ${answer.id}`,
            { code: 'ERR_UNKNOWN_REQUEST' },
          ),
          state,
        });
      }
      let result: CallResult;
      if (options.expired === true || !answer.ok) {
        const request = open.request as Request;
        const error = options.expired
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
        if (checkpoints !== undefined) {
          // Marked started again: a crash during this re-run must not repeat it.
          try {
            await checkpoints.beforeCalls({ ...state, pending }, callsOf([open.call]));
          } catch (error) {
            return end({ status: 'failed', error: asError(error), state });
          }
        }
        result = await execute(open.call, undefined, answer, open.approval === true);
      }
      pending[at] = pendingOf(open.call, result, childEvents, childUsage);
    }
    const next = pending.find((p) => p.result === undefined);
    if (next !== undefined) {
      return end({ status: 'suspended', request: next.request as Request, state: { ...state, pending } });
    }
    state = completeTurn({ ...state, pending: undefined }, pending, clock, events);
    // A cancelled turn is not committed: its calls stay started (a shutdown's read as interrupted).
    if (checkpoints !== undefined && !token.isCancelled()) {
      try {
        await checkpoints.afterTurn(
          state,
          pending.map((p) => p.call.id),
        );
      } catch (error) {
        return end({ status: 'failed', error: asError(error), state });
      }
    }
  } else if (options.answer !== undefined) {
    return end({
      status: 'failed',
      error: new TroupeError(`this run waits on no request but was resumed with an answer to ${options.answer.id}`, {
        code: 'ERR_UNKNOWN_REQUEST',
      }),
      state,
    });
  }

  const model = agent.model;
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
    if (state.turns - (state.messageStartTurn ?? 0) >= agent.maxTurns) return end({ status: 'incomplete', state });

    const turn = state.turns + 1;
    if (events !== undefined && events.listenerCount('agent.turn') > 0) {
      events.emit('agent.turn', { agentId: state.agentId, turn, at: clock.now() });
    }
    const observed =
      events !== undefined && (events.listenerCount('model.stop') > 0 || events.listenerCount('model.error') > 0);
    const started = observed || (events !== undefined && events.listenerCount('model.start') > 0) ? clock.now() : 0;
    if (events !== undefined && events.listenerCount('model.start') > 0) {
      events.emit('model.start', {
        agentId: state.agentId,
        model: model.name,
        provider: model.provider,
        turn,
        at: started,
      });
    }
    let firstDelta: number | undefined;
    const onDelta = options.onDelta;
    const deltas =
      onDelta === undefined
        ? undefined
        : observed
          ? (delta: ModelDelta) => {
              firstDelta ??= clock.now();
              onDelta(delta);
            }
          : onDelta;
    const messages = state.messages;
    const call = await callModel(
      () => model.generate(new LazySignalRequest(messages, specs, token, deltas)),
      token,
      options.abandoned,
      options.raceModel !== false,
    );
    if (call.kind === 'cancelled' || token.isCancelled()) {
      if (observed)
        modelError(
          events,
          state.agentId,
          model,
          turn,
          started,
          clock,
          new CancelledError(token.reason ?? 'user'),
          true,
          undefined,
        );
      return end({
        status: 'cancelled',
        reason: token.reason ?? (call.kind === 'cancelled' ? call.reason : 'user'),
        state,
      });
    }
    let message: AssistantMessage;
    let usage: Usage | undefined;
    try {
      if (call.kind === 'threw') throw call.error;
      const response = call.response;
      message = response?.message as AssistantMessage;
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
      if (observed && events.listenerCount('model.stop') > 0) {
        const info = response?.info;
        events.emit('model.stop', {
          agentId: state.agentId,
          model: model.name,
          provider: model.provider,
          turn,
          at: clock.now(),
          durationMs: clock.now() - started,
          usage,
          responseModel: info?.model,
          timeToFirstTokenMs: info?.timeToFirstTokenMs ?? (firstDelta === undefined ? undefined : firstDelta - started),
          attempts: info?.attempts,
          finishReason: info?.finishReason,
          toolCalls: Array.isArray(message.toolCalls) ? message.toolCalls.length : 0,
        });
      }
    } catch (error) {
      const err =
        error instanceof Error
          ? isTroupeError(error)
            ? error
            : new TroupeError(`the model failed: ${error.message}`, { code: 'ERR_MODEL', cause: error })
          : new TroupeError(`the model failed: ${asError(error).message}`, { code: 'ERR_MODEL', cause: error });
      if (observed) {
        const attempts = (error as { attempts?: unknown } | null)?.attempts;
        modelError(
          events,
          state.agentId,
          model,
          turn,
          started,
          clock,
          err,
          false,
          typeof attempts === 'number' ? attempts : undefined,
        );
      }
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
      messages: [...state.messages, sealMessage(assistant)],
    };
    // Kept where the supervisor can count it should this thread die before the run reports.
    cancellation.noteUsage?.(state.usage);
    if (calls.length === 0) return end({ status: 'done', text: message.content, state });

    if (checkpoints !== undefined) {
      try {
        await checkpoints.beforeCalls({ ...state, pending: calls.map((call) => ({ call })) }, callsOf(calls));
      } catch (error) {
        return end({ status: 'failed', error: asError(error), state });
      }
    }
    const results =
      calls.length === 1
        ? [await execute(calls[0] as ModelToolCall, malformed.get((calls[0] as ModelToolCall).id))]
        : await Promise.all(calls.map((c) => execute(c, malformed.get(c.id))));
    const pending: PendingCall[] = results.map((r, i) =>
      pendingOf(calls[i] as ModelToolCall, r, childEvents, childUsage),
    );
    childEvents.clear();
    childUsage.clear();
    const first = pending.find((p) => p.result === undefined);
    if (first !== undefined) {
      return end({ status: 'suspended', request: first.request as Request, state: { ...state, pending } });
    }
    state = completeTurn(state, pending, clock, events);
    if (checkpoints !== undefined && !token.isCancelled()) {
      try {
        await checkpoints.afterTurn(
          state,
          calls.map((c) => c.id),
        );
      } catch (error) {
        return end({ status: 'failed', error: asError(error), state });
      }
    }
    if (token.isCancelled()) return end({ status: 'cancelled', reason: token.reason ?? 'user', state });
  }
}

function modelError(
  events: LoopEventSink | undefined,
  agentId: AgentId,
  model: { readonly name?: string | undefined; readonly provider?: string | undefined },
  turn: number,
  started: number,
  clock: Clock,
  error: Error,
  cancelled: boolean,
  attempts: number | undefined,
): void {
  if (events === undefined || events.listenerCount('model.error') === 0) return;
  const at = clock.now();
  events.emit('model.error', {
    agentId,
    model: model.name,
    provider: model.provider,
    turn,
    at,
    durationMs: at - started,
    error,
    cancelled,
    attempts,
  });
}

function pendingOf(
  call: ModelToolCall,
  r: CallResult,
  childEvents: ReadonlyMap<string, readonly SessionEvent[]>,
  childUsage: ReadonlyMap<string, Usage>,
): PendingCall {
  return {
    call,
    result: r.request === undefined ? r.message : undefined,
    operations: r.operations,
    childEvents: childEvents.get(call.id),
    usage: childUsage.get(call.id),
    request: r.request,
    approval: r.approval,
    delegated: r.delegated,
  };
}

function describeOpen(pending: readonly PendingCall[]): string {
  const open = pending.filter((p) => p.result === undefined && p.delegated !== true).map((p) => p.request?.id);
  return open.length === 0 ? 'no request of its own' : `request ${open.join(', ')}`;
}

/**
 * The calls of a suspended state that have no result yet: the run's own
 * questions, and `task` calls waiting on a suspended child.
 */
export function openCalls(state: LoopState): readonly PendingCall[] {
  return state.pending === undefined ? [] : state.pending.filter((p) => p.result === undefined);
}

/**
 * Name the question an open call of a suspended state waits on by the
 * request as the host knows it (the supervisor's id): the answer then
 * carries that id, and a saved state names the saved request.
 */
export function renameRequest(state: LoopState, toolCallId: string, request: Request): LoopState {
  const pending = state.pending;
  if (pending === undefined) return state;
  const at = pending.findIndex((p) => p.call.id === toolCallId && p.result === undefined);
  const open = pending[at];
  if (open === undefined || open.request?.id === request.id) return state;
  const next = [...pending];
  next[at] = { ...open, request };
  return { ...state, pending: next };
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
  const call = open.call;
  let resolved: PendingCall;
  switch (result.status) {
    case 'done':
      resolved = {
        call,
        result: { role: 'tool', toolCallId: call.id, name: call.name, content: result.result, isError: false },
        operations: result.updates,
        childEvents: result.events.length > 0 ? result.events : undefined,
        usage: result.usage,
      };
      break;
    case 'error':
      resolved = {
        call,
        result: {
          role: 'tool',
          toolCallId: call.id,
          name: call.name,
          content: errorContent(result.error),
          isError: true,
        },
        childEvents: result.events.length > 0 ? result.events : undefined,
        usage: result.usage,
      };
      break;
    case 'suspended':
      resolved = { ...open, request: result.request, delegated: true };
      break;
  }
  const next = [...pending];
  next[at] = resolved;
  return { ...state, pending: next };
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
