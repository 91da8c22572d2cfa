import { z } from 'zod';
import { findNotJson, type Operation, type SessionEvent } from './ContextUpdate.js';
import { decodeError, ErrorShape, encodeError } from './ErrorShape.js';
import type { LoopEnd } from './LoopEnd.js';
import type { LoopOutcome, LoopState } from './LoopState.js';
import { Answer, Request } from './Request.js';
import type { CancelReason } from './TroupeError.js';
import { isUsage, NO_USAGE, type Usage } from './Usage.js';

/**
 * The one closed, versioned protocol between the supervisor and a worker.
 * Schema and type share a name; each side parses what arrives at its port
 * and dispatches with an exhaustive switch.
 */
export const PROTOCOL_VERSION = 4;

/** Names an agent across threads: the module that exports it, and its name. */
export const AgentRef = z.object({ module: z.string().min(1), name: z.string().min(1) });
/** See the {@link AgentRef} schema. */
export type AgentRef = z.infer<typeof AgentRef>;

/**
 * The most questions a run's state may hold open when a worker hands it back
 * (see `MAX_QUESTIONS_PER_DISPATCH` of the host channel, which has the same
 * bound for the questions a dispatch asks as it runs).
 */
export const MAX_PENDING_QUESTIONS = 1024;

/** The most calls a state's `pending` may list (a turn's tool calls). */
const MAX_PENDING_CALLS = 4096;

/** Elements any one array in a message from a worker may hold (a state's messages, a run's events). */
export const MAX_WIRE_ARRAY = 1 << 20;

/**
 * What makes a message from a worker unsafe to walk, or undefined: an array
 * longer than {@link MAX_WIRE_ARRAY}, or one with a hole. Structured clone
 * carries a sparse array's length for nothing — `[]` with `length = 2 ** 32 - 1`
 * crosses a thread in a few bytes — and a schema or an `every` that walks it
 * holds this thread for a minute or runs it out of memory. Every message a
 * worker sends is checked with this before anything else reads it. Walks what
 * is there once, iteratively (no depth limit, no recursion to overflow);
 * typed arrays and buffers are skipped (their length is their bytes).
 */
export function findUnwalkable(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const stack: object[] = [value];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const v = stack.pop() as object;
    if (seen.has(v)) continue;
    seen.add(v);
    if (Array.isArray(v)) {
      if (v.length > MAX_WIRE_ARRAY) return `an array of ${v.length} elements (at most ${MAX_WIRE_ARRAY})`;
      for (let i = 0; i < v.length; i++) {
        if (!(i in v)) return `an array with a hole at ${i} (length ${v.length})`;
        const e: unknown = v[i];
        if (typeof e === 'object' && e !== null) stack.push(e);
      }
      continue;
    }
    if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) continue;
    if (v instanceof Map) {
      for (const [k, e] of v) {
        if (typeof k === 'object' && k !== null) stack.push(k);
        if (typeof e === 'object' && e !== null) stack.push(e);
      }
      continue;
    }
    if (v instanceof Set) {
      for (const e of v) if (typeof e === 'object' && e !== null) stack.push(e);
      continue;
    }
    for (const k in v) {
      const e: unknown = (v as Record<string, unknown>)[k];
      if (typeof e === 'object' && e !== null) stack.push(e);
    }
  }
  return undefined;
}

/**
 * What is wrong with a state's `pending` as a worker handed it back, or
 * undefined: the supervisor walks these calls (opens their questions,
 * resolves delegated ones, resumes with an answer), so each is checked here,
 * at the port — a list of `{ call: { id, name }, result?, request?, approval?,
 * delegated?, usage?, operations?, childEvents? }`, its questions valid
 * requests, at most {@link MAX_PENDING_QUESTIONS} of them open.
 */
export function findBadPending(pending: unknown): string | undefined {
  if (pending === undefined) return undefined;
  if (!Array.isArray(pending)) return 'state.pending must be a list of calls';
  if (pending.length > MAX_PENDING_CALLS) return `state.pending lists over ${MAX_PENDING_CALLS} calls`;
  let open = 0;
  const ids = new Set<string>();
  for (const p of pending as unknown[]) {
    if (typeof p !== 'object' || p === null) return 'state.pending holds a call that is not an object';
    const entry = p as Record<string, unknown>;
    const call = entry.call as Record<string, unknown> | null | undefined;
    if (typeof call !== 'object' || call === null || typeof call.id !== 'string' || call.id.length === 0)
      return 'state.pending holds a call without an id';
    if (typeof call.name !== 'string') return `state.pending call ${call.id} has no tool name`;
    if (ids.has(call.id)) return `state.pending lists call ${call.id} twice`;
    ids.add(call.id);
    const result = entry.result as Record<string, unknown> | null | undefined;
    if (result !== undefined && (typeof result !== 'object' || result === null || result.role !== 'tool'))
      return `state.pending call ${call.id} has a result that is not a tool message`;
    if (entry.request !== undefined) {
      if (!Request.safeParse(entry.request).success) return `state.pending call ${call.id} holds a malformed request`;
      if (result === undefined && entry.delegated !== true && ++open > MAX_PENDING_QUESTIONS)
        return `state.pending holds over ${MAX_PENDING_QUESTIONS} open questions`;
    }
    for (const flag of ['approval', 'delegated'] as const) {
      if (entry[flag] !== undefined && typeof entry[flag] !== 'boolean')
        return `state.pending call ${call.id}: ${flag} must be a boolean`;
    }
    if (entry.usage !== undefined && !isUsage(entry.usage))
      return `state.pending call ${call.id}: usage must be non-negative token counts`;
    for (const list of ['operations', 'childEvents'] as const) {
      if (entry[list] !== undefined && !Array.isArray(entry[list]))
        return `state.pending call ${call.id}: ${list} must be a list`;
    }
  }
  return undefined;
}

// The loop state is produced by this library on the other side and its
// parts are re-checked where they are used (operations by the reducer,
// answers against the pending request); here its outer shape is checked,
// and what the supervisor walks of it (`pending`, see findBadPending).
const LoopStateSchema = z.custom<LoopState>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as LoopState).agentId === 'string' &&
    Array.isArray((v as LoopState).messages) &&
    typeof (v as LoopState).metadata === 'object',
  { message: 'not a loop state' },
);

/**
 * Bits of {@link SubagentTask.host}: what the host channel offers a run
 * (`stream`: someone listens to the run's model deltas; `durable`: the
 * store survives a crash, so the run checkpoints its turns).
 */
export const HostFeature = Object.freeze({ approval: 1, spawn: 2, telemetry: 4, stream: 16, durable: 32 });

/**
 * Bits of {@link SubagentTask.host} that describe the task itself.
 * `serializedScope`: the scope travels as its v8-serialized bytes in a
 * SharedArrayBuffer (`scope` is a Uint8Array over it): the supervisor
 * serializes a heavy scope once, not on every hop, and a worker decodes each
 * version (see {@link SubagentTask.scopeVersion}) once.
 */
export const TaskFlag = Object.freeze({ serializedScope: 8 });

/**
 * Where a task's {@link SubagentTask.host} says which telemetry events
 * somebody listens to: bit `TELEMETRY_SHIFT + i` for the `i`th of the host
 * protocol's `TELEMETRY_EVENTS` (see `telemetryBit`). A worker forwards
 * those and no others: an event nobody listens to is neither built, encoded
 * nor posted.
 */
export const TELEMETRY_SHIFT = 6;
/** How many telemetry events a task's `host` has a bit for. */
export const TELEMETRY_EVENT_COUNT = 11;
/** The largest `host` a task may carry: feature, flag and telemetry bits. */
export const MAX_HOST_BITS = 2 ** (TELEMETRY_SHIFT + TELEMETRY_EVENT_COUNT) - 1;

/**
 * Resume a suspended run: its state; the answers to its own questions that
 * arrived while it was suspended or resuming, each with whether the
 * supervisor found its question expired when it was answered (none when the
 * supervisor resolved every open call of the state itself, e.g. a child's
 * result); and the calls the supervisor approved. Every answered call
 * re-runs once, all in this one resume.
 */
const ResumeSchema = z.object({
  state: LoopStateSchema,
  answers: z
    .array(z.object({ answer: Answer, expired: z.boolean() }))
    .max(MAX_PENDING_QUESTIONS)
    .optional(),
  approvedCalls: z.array(z.string()),
  /** Resuming after a crash: the open calls that had started (see the loop's `interrupted`). */
  started: z.array(z.string()).optional(),
});

/**
 * The rarely used parts of a task, sent only when one of them is set. The
 * type of the wire; checked by hand at the port (see `parseExtras`), the
 * resume state with zod.
 */
const TaskExtras = z.object({
  parentAgentId: z.string().min(1).optional(),
  toolContext: z.record(z.string(), z.unknown()).optional(),
  /** The metadata snapshot. */
  metadata: z.record(z.string(), z.unknown()).optional(),
  /**
   * Milliseconds the run had left when it was dispatched. Relative, because
   * the supervisor's clock may be injected (a test clock) while a worker runs
   * on the system clock: the worker turns it into its own absolute deadline.
   */
  timeoutMs: z.number().finite().nonnegative().optional(),
  /** Resume a suspended run. */
  resume: ResumeSchema.optional(),
});

/**
 * Supervisor → worker, on the wire: run (or resume) one subagent, as
 * `[v, module, agent, agentId, slot, generation, host, scope, scopeVersion, input | null, extras | null, capability, buffer | null]`.
 *
 * `slot` and `generation` name the run's slot in the cancellation buffer of
 * the thread the task is dispatched to; they are filled in at dispatch, and
 * `buffer` carries that thread's buffer with the first task it receives (a
 * thread keeps it). `capability` is the run's unguessable key: every call the
 * run makes on its host channel presents it.
 *
 * A tuple, because structured clone pays per object property on both
 * threads and this message crosses on every spawn: as a tuple it costs about
 * half of the same fields as an object. Parsed by hand at the port
 * ({@link decodeSubagentTask}) for the same reason — a zod tuple parse costs
 * microseconds per message; the rare `extras` are parsed with zod.
 */
export type SubagentTaskWire = [
  version: typeof PROTOCOL_VERSION,
  module: string,
  agent: string,
  agentId: string,
  slot: number,
  generation: number,
  host: number,
  /**
   * `null` with a positive `scopeVersion` (a lean scope, not `serializedScope`): the thread holds
   * that version already, from an earlier task of its own (see {@link KeptScopes}).
   */
  scope: unknown,
  /** 0 when the scope is not versioned. */
  scopeVersion: number,
  input: string | null,
  extras: z.infer<typeof TaskExtras> | null,
  capability: string,
  buffer: SharedArrayBuffer | null,
];

/** Where the dispatch fills in a task tuple (see {@link SubagentTaskWire}). */
export const TaskSlot = Object.freeze({ slot: 4, generation: 5, scope: 7, extras: 10, buffer: 12 });

/** One subagent run, as both threads handle it; crosses as a {@link SubagentTaskWire}. */
export interface SubagentTask {
  readonly module: string;
  readonly agent: string;
  readonly agentId: string;
  readonly slot: number;
  readonly generation: number;
  readonly host: number;
  /** `null` with a positive lean `scopeVersion`: the version this thread keeps (see {@link KeptScopes}). */
  readonly scope: unknown;
  readonly input?: string | undefined;
  readonly parentAgentId?: string | undefined;
  readonly toolContext?: Readonly<Record<string, unknown>> | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
  /** Milliseconds left when the task was dispatched (see the wire's `extras.timeoutMs`). */
  readonly timeoutMs?: number | undefined;
  readonly resume?: z.infer<typeof ResumeSchema> | undefined;
  readonly capability: string;
  /** The dispatch thread's cancellation buffer, on the first task it receives. */
  readonly buffer?: SharedArrayBuffer | undefined;
  /**
   * Names the scope's content: a positive version always carries the same
   * scope, which cannot change (see `isDeepFrozen`), so a worker may keep
   * what it made of it — the decoded bytes, the frozen copy — and reuse it
   * for every later task of that version. Absent (0 on the wire): nothing
   * may be kept (a scope holding a Map can still change).
   */
  readonly scopeVersion?: number | undefined;
}

/**
 * How many lean scope versions a worker keeps (past it, the one it received first is dropped);
 * a supervisor mirrors each thread's, and a task of a version its thread holds sends the scope as
 * `null`. Both sides follow {@link KeptScopes}, so the mirror is the worker's cache.
 */
export const KEPT_SCOPES = 16;

/**
 * The lean scope versions one thread holds, in the order it first received them: a worker's
 * cache of frozen scopes and a supervisor's mirror of it apply the same rule (a use does not
 * move a version; past {@link KEPT_SCOPES} the first received is dropped).
 *
 * @example
 * ```ts
 * const kept = new KeptScopes<object>()
 * kept.add(7, Object.freeze({ userId: 'u_1' }))
 * kept.get(7) // the frozen scope; kept.get(8): undefined
 * ```
 */
export class KeptScopes<T> {
  readonly #map = new Map<number, T>();
  get(version: number): T | undefined {
    return this.#map.get(version);
  }
  has(version: number): boolean {
    return this.#map.has(version);
  }
  add(version: number, value: T): void {
    if (this.#map.has(version)) return;
    this.#map.set(version, value);
    if (this.#map.size > KEPT_SCOPES) this.#map.delete(this.#map.keys().next().value as number);
  }
}

/** Encode a task for the wire; the rarely used fields travel only when set. */
export function encodeSubagentTask(task: SubagentTask): SubagentTaskWire {
  let extras: z.infer<typeof TaskExtras> | null = null;
  if (
    task.parentAgentId !== undefined ||
    task.toolContext !== undefined ||
    task.metadata !== undefined ||
    task.timeoutMs !== undefined ||
    task.resume !== undefined
  ) {
    const e: {
      parentAgentId?: string;
      toolContext?: Record<string, unknown>;
      metadata?: Record<string, unknown>;
      timeoutMs?: number;
      resume?: z.infer<typeof ResumeSchema>;
    } = {};
    if (task.parentAgentId !== undefined) e.parentAgentId = task.parentAgentId;
    if (task.toolContext !== undefined) e.toolContext = task.toolContext as Record<string, unknown>;
    if (task.metadata !== undefined) e.metadata = task.metadata as Record<string, unknown>;
    if (task.timeoutMs !== undefined) e.timeoutMs = task.timeoutMs;
    if (task.resume !== undefined) e.resume = task.resume;
    extras = e;
  }
  return [
    PROTOCOL_VERSION,
    task.module,
    task.agent,
    task.agentId,
    task.slot,
    task.generation,
    task.host,
    task.scope,
    task.scopeVersion ?? 0,
    task.input ?? null,
    extras,
    task.capability,
    task.buffer ?? null,
  ];
}

/** A capability: ≥ 128 random bits, as the supervisor mints them (24 nanoid characters, 144 bits). */
export const CAPABILITY_LENGTH = 24;

/**
 * True for a string shaped like a capability. Only its length is checked:
 * its authority is the supervisor's lookup, and this runs on every message.
 */
export function isCapability(v: unknown): v is string {
  return typeof v === 'string' && v.length === CAPABILITY_LENGTH;
}

const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isIndex = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
// A plain object, as zod's record accepts (not an array, Map, Date or typed array).
const isRecord = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

type Extras = z.infer<typeof TaskExtras>;

/**
 * The extras of a task, checked by hand as {@link TaskExtras} would (every
 * nested spawn carries some: its parent and metadata; a zod object
 * parse of them cost ~1 µs a task warm, more in a worker just woken); a
 * resumed run's state is checked with zod. Returns what is wrong as a string.
 */
function parseExtras(raw: unknown): Extras | string {
  if (!isRecord(raw)) return 'extras must be an object or null';
  const { parentAgentId, toolContext, metadata, timeoutMs, resume } = raw;
  if (parentAgentId !== undefined && !isNonEmptyString(parentAgentId)) {
    return 'extras.parentAgentId must be a non-empty string';
  }
  if (toolContext !== undefined && !isRecord(toolContext)) return 'extras.toolContext must be an object';
  if (metadata !== undefined && !isRecord(metadata)) return 'extras.metadata must be an object';
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && Number.isFinite(timeoutMs) && timeoutMs >= 0)) {
    return 'extras.timeoutMs must be a finite number of ms ≥ 0';
  }
  let parsedResume: Extras['resume'];
  if (resume !== undefined) {
    const r = ResumeSchema.safeParse(resume);
    if (!r.success) {
      const issue = r.error.issues[0];
      return `extras.resume.${issue?.path.join('.') ?? ''} ${issue?.message ?? 'invalid'}`;
    }
    parsedResume = r.data;
  }
  return {
    parentAgentId: parentAgentId as string | undefined,
    toolContext: toolContext as Record<string, unknown> | undefined,
    metadata: metadata as Record<string, unknown> | undefined,
    timeoutMs: timeoutMs as number | undefined,
    resume: parsedResume,
  };
}

/** Parse a task at the worker's port; `error` says what was wrong. */
export function decodeSubagentTask(
  raw: unknown,
): { task: SubagentTask; error?: never } | { task?: never; error: string } {
  if (!Array.isArray(raw) || raw.length !== 13) return { error: 'a task is a 13-element array' };
  const v: unknown = raw[0];
  const module: unknown = raw[1];
  const agent: unknown = raw[2];
  const agentId: unknown = raw[3];
  const slot: unknown = raw[4];
  const generation: unknown = raw[5];
  const host: unknown = raw[6];
  const scope: unknown = raw[7];
  const scopeVersion: unknown = raw[8];
  const input: unknown = raw[9];
  const extras: unknown = raw[10];
  const capability: unknown = raw[11];
  const buffer: unknown = raw[12];
  if (v !== PROTOCOL_VERSION) return { error: `protocol version ${String(v)}, this worker speaks ${PROTOCOL_VERSION}` };
  if (!isNonEmptyString(module)) return { error: 'module must be a URL' };
  if (!isNonEmptyString(agent)) return { error: 'agent must be a name' };
  if (!isNonEmptyString(agentId)) return { error: 'agentId must be a string' };
  if (!isIndex(slot)) return { error: 'slot must be a non-negative integer' };
  if (!isIndex(generation) || generation === 0) return { error: 'generation must be a positive integer' };
  if (!isIndex(host) || host > MAX_HOST_BITS) {
    return { error: 'host must be HostFeature, TaskFlag and telemetry bits' };
  }
  if ((host & TaskFlag.serializedScope) !== 0 && !(scope instanceof Uint8Array)) {
    return { error: 'a serialized scope must be a Uint8Array' };
  }
  if (!isIndex(scopeVersion)) return { error: 'scopeVersion must be a non-negative integer' };
  const version = scopeVersion === 0 ? undefined : scopeVersion;
  if (input !== null && typeof input !== 'string') return { error: 'input must be a string or null' };
  if (!isCapability(capability)) return { error: 'capability must be a capability string' };
  if (buffer !== null && !(buffer instanceof SharedArrayBuffer))
    return { error: 'buffer must be a SharedArrayBuffer or null' };
  const buf = buffer ?? undefined;
  if (extras === null) {
    return {
      task: {
        module,
        agent,
        agentId,
        slot,
        generation,
        host,
        scope,
        scopeVersion: version,
        input: input ?? undefined,
        capability,
        buffer: buf,
      },
    };
  }
  const parsed = parseExtras(extras);
  if (typeof parsed === 'string') return { error: parsed };
  const e = parsed;
  return {
    task: {
      module,
      agent,
      agentId,
      slot,
      generation,
      host,
      scope,
      scopeVersion: version,
      input: input ?? undefined,
      parentAgentId: e.parentAgentId,
      toolContext: e.toolContext,
      metadata: e.metadata,
      timeoutMs: e.timeoutMs,
      resume: e.resume,
      capability,
      buffer: buf,
    },
  };
}

// Metadata is JSON (an honest worker's ContextUpdate refuses anything else): an operation holding
// more — a view over shared memory its worker could go on writing — is not one.
const OperationSchema = z.custom<Operation>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { op?: unknown }).op === 'string' &&
    findNotJson(v) === undefined,
  { message: 'not an operation (plain JSON)' },
);
const SessionEventSchema = z.custom<SessionEvent>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as SessionEvent).type === 'string' &&
    typeof (v as SessionEvent).agentId === 'string',
  { message: 'not a session event' },
);

/**
 * Worker → supervisor: how a run ended (a crash is detected by the supervisor,
 * never sent), as the supervisor reads it off the wire: its loop's end in the
 * supervisor's one shape, and what the run spent.
 */
export interface SubagentEnd {
  readonly end: LoopEnd;
  /** Tokens the run's own model calls spent. */
  readonly usage: Usage;
  /**
   * How many event batches the run posted on its host channel. The result
   * travels on another port, so the supervisor holds it until it has read
   * that many: every event of a run is delivered before its outcome.
   */
  readonly sent: number;
  /**
   * The run's last events, not posted on the host channel: they travel with
   * the result (one message less per run) and are delivered after the
   * batches it posted, before its outcome. Checked by the supervisor like
   * any batch (`parseHostEvents`).
   */
  readonly tail?: readonly unknown[] | undefined;
}

// On the wire a result is a tuple too: [status, v, turns, usage | null, events | null, sent, ...by status],
// then the run's tail of events (see SubagentEnd.tail) as its last element when it has one.
// A done result of an agent with structured output carries it after its updates as { output }: an
// object, never the tail's array, so a result without it keeps its old shape.
// Defaults are left out (no usage, no events, no updates: null): every element costs on both threads.

/**
 * Encode how a worker's loop ended for the wire (see {@link SubagentTaskWire}
 * for why a tuple): the worker's one mapping of its outcome, read back by
 * {@link decodeSubagentResult}. `sent` is what its host channel posted.
 */
export function encodeSubagentResult(outcome: LoopOutcome, sent: number): unknown[] {
  const state = outcome.state;
  const turns = state.turns;
  const usage = state.usage.inputTokens !== 0 || state.usage.outputTokens !== 0 ? state.usage : null;
  const events = state.events.length > 0 ? state.events : null;
  switch (outcome.status) {
    case 'done': {
      const updates = state.updates.length === 0 ? null : state.updates;
      return outcome.output === undefined
        ? ['done', PROTOCOL_VERSION, turns, usage, events, sent, outcome.text, updates]
        : ['done', PROTOCOL_VERSION, turns, usage, events, sent, outcome.text, updates, { output: outcome.output }];
    }
    case 'failed':
      return ['failed', PROTOCOL_VERSION, turns, usage, events, sent, encodeError(outcome.error)];
    case 'incomplete':
      return ['incomplete', PROTOCOL_VERSION, turns, usage, events, sent];
    case 'cancelled':
      return ['cancelled', PROTOCOL_VERSION, turns, usage, events, sent, outcome.reason];
    case 'suspended':
      return ['suspended', PROTOCOL_VERSION, turns, usage, events, sent, outcome.request, state];
  }
}

/** Where a result tuple holds what a worker may fill in after encoding it: the batches it posted by then. */
export const ResultSlot = Object.freeze({ sent: 5 });

/** Encode a run that failed with no loop to report (a malformed task, an agent that would not load). */
export function encodeSubagentFailure(error: unknown, sent: number): unknown[] {
  return ['failed', PROTOCOL_VERSION, 0, null, null, sent, encodeError(error)];
}

/** Elements of a result tuple before its tail, by status. */
const RESULT_LENGTH: Readonly<Record<string, number>> = {
  done: 8,
  failed: 7,
  incomplete: 6,
  cancelled: 7,
  suspended: 8,
};

const REASONS: ReadonlySet<unknown> = new Set(['user', 'parent', 'deadline', 'shutdown']);
const NO_EVENTS: readonly never[] = Object.freeze([]);
const NO_UPDATES: readonly never[] = Object.freeze([]);

function checkEvents(v: unknown): v is SessionEvent[] | null {
  if (v === null) return true;
  if (!Array.isArray(v)) return false;
  for (const e of v) if (!SessionEventSchema.safeParse(e).success) return false;
  return true;
}

/**
 * Parse a result at the supervisor's port straight into a {@link SubagentEnd},
 * by hand for the hot fields (see {@link SubagentTaskWire}) and with zod for
 * the rare nested ones (an error, a request, a suspended state); `error` says
 * what was wrong. `held`: the result a run hands over while it still holds
 * work (its thread is then recycled, so a cancel it reports was forced; its
 * tail went ahead of it as a batch).
 */
export function decodeSubagentResult(
  raw: unknown,
  held = false,
): { result: SubagentEnd; error?: never } | { result?: never; error: string } {
  // Indexing, not destructuring or spreads: this runs for every run's result.
  if (!Array.isArray(raw) || raw.length < 6)
    return { error: 'a result is an array [status, v, turns, usage, events, sent, ...]' };
  const unwalkable = findUnwalkable(raw);
  if (unwalkable !== undefined) return { error: `a result holding ${unwalkable}` };
  const status: unknown = raw[0];
  const turns: unknown = raw[2];
  const usage: unknown = raw[3];
  const events: unknown = raw[4];
  const sent: unknown = raw[5];
  if (raw[1] !== PROTOCOL_VERSION) {
    return { error: `protocol version ${String(raw[1])}, this supervisor speaks ${PROTOCOL_VERSION}` };
  }
  if (!isIndex(turns)) return { error: 'turns must be a non-negative integer' };
  if (usage !== null && !isUsage(usage)) return { error: 'usage must be { inputTokens, outputTokens } or null' };
  if (!checkEvents(events)) return { error: 'events must be session events or null' };
  if (!isIndex(sent)) return { error: 'sent must be a non-negative integer' };
  let body = typeof status === 'string' ? RESULT_LENGTH[status] : undefined;
  let output: unknown;
  if (status === 'done' && body !== undefined && raw.length > body && isRecord(raw[body])) {
    output = (raw[body] as { output?: unknown }).output;
    const bad = findNotJson(output, 'output');
    if (bad !== undefined) return { error: `done: ${bad.path} is ${bad.what}, not JSON` };
    body++;
  }
  let tail: unknown[] | undefined;
  if (body !== undefined && raw.length > body) {
    const t: unknown = raw[body];
    if (raw.length > body + 1 || !Array.isArray(t)) return { error: 'a result holds one tail of events at most' };
    tail = t;
  }
  const end = decodeEnd(raw, status, turns, events ?? NO_EVENTS, output, held);
  if (typeof end === 'string') return { error: end };
  return {
    result: { end, usage: (usage ?? NO_USAGE) as Usage, sent: sent as number, tail: held ? undefined : tail },
  };
}

// A result's own fields by status, read into its end (or what is wrong with them).
function decodeEnd(
  raw: unknown[],
  status: unknown,
  turns: number,
  events: readonly SessionEvent[],
  output: unknown,
  held: boolean,
): LoopEnd | string {
  switch (status) {
    case 'done': {
      const text: unknown = raw[6];
      const updates: unknown = raw[7];
      if (typeof text !== 'string') return 'done: text must be a string';
      if (updates !== null && !(Array.isArray(updates) && updates.every((o) => OperationSchema.safeParse(o).success))) {
        return 'done: updates must be operations or null';
      }
      const u = (updates ?? NO_UPDATES) as readonly Operation[];
      return output === undefined
        ? { status: 'done', text, updates: u, events, turns }
        : { status: 'done', text, output, updates: u, events, turns };
    }
    case 'failed': {
      const error = ErrorShape.safeParse(raw[6]);
      if (!error.success) return 'failed: not an error shape';
      return { status: 'failed', error: decodeError(error.data), events, turns };
    }
    case 'incomplete':
      return { status: 'incomplete', events, turns };
    case 'cancelled':
      if (!REASONS.has(raw[6])) return `cancelled: unknown reason ${JSON.stringify(raw[6])}`;
      return { status: 'cancelled', reason: raw[6] as CancelReason, forced: held };
    case 'suspended': {
      const request = Request.safeParse(raw[6]);
      const state = LoopStateSchema.safeParse(raw[7]);
      if (!request.success) return 'suspended: not a request';
      if (!state.success) return 'suspended: not a loop state';
      const badPending = findBadPending(state.data.pending);
      if (badPending !== undefined) return `suspended: ${badPending}`;
      return { status: 'suspended', state: state.data, events, turns };
    }
    default:
      return `unknown result status ${JSON.stringify(status)}`;
  }
}

/**
 * The marker of the worker → supervisor message a worker sends once it has
 * booted and loaded the subagent runtime (its value: true). Piscina marks its
 * initial workers ready before they boot; this is the real signal. The
 * supervisor knows which thread sent it from the `Worker` object it came
 * out of, never from the message.
 */
export const WORKER_READY = 'troupe.worker.ready';

/**
 * The marker of the worker → supervisor message that hands over a worker's
 * host channel (`{ [HOST_OPEN]: true, port }`). Bound to the thread whose
 * `Worker` object it came out of; a second one from the same thread is a
 * protocol violation.
 */
export const HOST_OPEN = 'troupe.host.open';

/** Worker → supervisor over the host channel: ask the approval handler about a call. */
export const HostApprovalRequest = z.object({
  toolName: z.string().min(1).max(64),
  toolCallId: z.string().min(1).max(256),
  arguments: z.unknown(),
});
/** See the {@link HostApprovalRequest} schema. */
export type HostApprovalRequest = z.infer<typeof HostApprovalRequest>;

/** Worker → supervisor: run a delegated task (a subagent's own `task` call). */
export const HostTaskRequest = z.object({
  /** The name of one of the calling agent's declared subagents. */
  subagent: z.string().min(1),
  instructions: z.string(),
  toolCallId: z.string().min(1),
  /** The calling agent's metadata: the child's snapshot. */
  metadata: z.record(z.string(), z.unknown()),
});
/** See the {@link HostTaskRequest} schema. */
export type HostTaskRequest = z.infer<typeof HostTaskRequest>;

/**
 * Check a {@link HostTaskRequest} as its schema would, by hand (every
 * delegation from a worker crosses here on the supervisor thread; a zod parse
 * cost ~0.8 µs warm). `undefined` when it is malformed.
 */
export function parseHostTaskRequest(raw: unknown): HostTaskRequest | undefined {
  if (!isRecord(raw)) return undefined;
  const { subagent, instructions, toolCallId, metadata } = raw;
  if (typeof subagent !== 'string' || subagent.length === 0 || subagent.length > 64) return undefined;
  if (typeof instructions !== 'string') return undefined;
  if (typeof toolCallId !== 'string' || toolCallId.length === 0 || toolCallId.length > 256) return undefined;
  if (!isRecord(metadata)) return undefined;
  return { subagent, instructions, toolCallId, metadata };
}

/** Supervisor → worker: how a delegated task ended. */
export const HostTaskResult = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('done'),
    result: z.string(),
    /** The child's structured output, when it has one. */
    output: z.unknown().optional(),
    updates: z.array(OperationSchema).optional(),
    events: z.array(SessionEventSchema),
    usage: z.custom<Usage>(isUsage).optional(),
  }),
  z.object({ status: z.literal('suspended'), request: Request }),
  z.object({
    status: z.literal('error'),
    error: ErrorShape,
    events: z.array(SessionEventSchema),
    usage: z.custom<Usage>(isUsage).optional(),
  }),
]);
/** See the {@link HostTaskResult} schema. */
export type HostTaskResult = z.infer<typeof HostTaskResult>;
