import { randomUUID } from 'node:crypto';
import { ClosedError, findNotJson, InvalidArgumentError, TroupeError } from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import {
  DEFAULT_TENANT_KEY,
  isTerminalRunStatus,
  type ListOptions,
  type Page,
  type PersistenceContext,
  type RequestOpening,
  type RunRecord,
  type RunStatus,
  type TenantKey,
  type ToolCallKey,
  type ToolCallStart,
  type TurnBatch,
} from './Persistence.js';
import { type AgentStateEnvelope, STATE_ENVELOPE_VERSION } from './StateEnvelope.js';

const RUN_STATUSES: ReadonlySet<string> = new Set<RunStatus>([
  'running',
  'suspended',
  'done',
  'failed',
  'cancelled',
  'crashed',
  'incomplete',
  'interrupted',
]);
const RUN_KINDS: ReadonlySet<string> = new Set(['message', 'subagent', 'spawn']);
const CONVERSATION_STATUSES: ReadonlySet<string> = new Set(['idle', 'running', 'suspended', 'stopped']);
const DEFAULT_LIMIT = 100;
const EMPTY_RUNS: readonly RunRecord[] = Object.freeze([]);
const MAX_LIMIT = 1000;

function bad(message: string): InvalidArgumentError {
  return new InvalidArgumentError(message);
}

/**
 * A lone surrogate (half of a UTF-16 pair, without its other half: a pair is one code point under
 * `u`): a key holding one has no UTF-8 form, so a store would save another key than the one given
 * (U+FFFD in its place), and two such keys could meet.
 */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * Refuse a string UTF-8 cannot carry, naming where. Every store keeps ids and tenant keys as
 * UTF-8 text (SQLite's and PostgreSQL's TEXT, JSON on a queue, span attributes): SQLite turned a
 * lone surrogate into U+FFFD — another id, naming no messages, that could not be deleted — while
 * the in-memory store kept it. Refused here, the answer is the same in every store.
 */
function wellFormed(value: string, what: string): void {
  const at = value.search(LONE_SURROGATE);
  if (at === -1) return;
  const unit = value.charCodeAt(at).toString(16).padStart(4, '0');
  throw bad(
    `${what} holds a lone surrogate (\\u${unit}) at index ${at}: ids and tenant keys are stored as UTF-8 text, which cannot hold one (it would come back as another id): pass a well-formed string (encode binary ids, for example as hex or base64url)`,
  );
}

function id(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 512 || value.includes('\u0000')) {
    throw bad(
      `${what} must be a non-empty string of at most 512 characters without NUL or a lone surrogate, got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  wellFormed(value, what);
  return value;
}

function time(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw bad(`${what} must be a finite number (milliseconds since the epoch), got ${describeValue(value)}`);
  }
  return value;
}

function object(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw bad(`${what} must be an object`);
  return value as Record<string, unknown>;
}

function usage(value: unknown, what: string): void {
  const u = object(value, what);
  if (typeof u.inputTokens !== 'number' || typeof u.outputTokens !== 'number') {
    throw bad(`${what} must be { inputTokens, outputTokens } (numbers)`);
  }
}

function json(value: unknown, what: string, depth = 0): void {
  const notJson = findNotJson(value, what, { undefinedPropertiesAreAbsent: true, depth });
  if (notJson !== undefined) {
    throw new InvalidArgumentError(`${notJson.path} is ${notJson.what}: ${notJson.instead}`, {
      code: notJson.tooDeep ? 'ERR_NOT_CLONEABLE' : 'ERR_NOT_JSON',
    });
  }
}

/**
 * The JSON of messages that cannot change (frozen objects of primitives: the loop seals the
 * messages of primitives it appends), for the conversations being saved now. A conversation's state is saved on
 * every turn with all its messages: an active one writes each message's JSON once, not on every
 * save. Kept in two generations that turn over every {@link GENERATION_SAVES} saves, so a message
 * no save has used for that long lets its copy go: an idle conversation keeps no second copy of
 * its transcript in memory.
 */
const GENERATION_SAVES = 512;
let messageJsonNow = new WeakMap<object, string>();
let messageJsonBefore = new WeakMap<object, string>();
let savesThisGeneration = 0;

/** One save (an envelope or a run with its state) is being written: turn the generations over. */
function countSave(): void {
  if (++savesThisGeneration < GENERATION_SAVES) return;
  savesThisGeneration = 0;
  messageJsonBefore = messageJsonNow;
  messageJsonNow = new WeakMap();
}

function plainRecord(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** The cached JSON of a message, if it has one (taken into the current generation). */
function cachedJson(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const known = messageJsonNow.get(message);
  if (known !== undefined) return known;
  const older = messageJsonBefore.get(message);
  if (older !== undefined) messageJsonNow.set(message, older);
  return older;
}

function messageJson(message: unknown, what: string): string {
  const cached = cachedJson(message);
  if (cached !== undefined) return cached;
  // A message sits three levels down (record.state.messages[i]): it counts toward the depth bound.
  json(message, what, 3);
  const text = JSON.stringify(message);
  if (unchangeable(message)) messageJsonNow.set(message, text);
  return text;
}

/**
 * A frozen plain object of primitives held in data properties: its JSON can never change (what the
 * loop seals; a membership in a set would cost memory per message, a frozen object costs none).
 */
function unchangeable(message: unknown): message is object {
  if (typeof message !== 'object' || message === null || !Object.isFrozen(message) || !plainRecord(message)) {
    return false;
  }
  for (const key in message) {
    const d = Object.getOwnPropertyDescriptor(message, key);
    if (d === undefined || d.get !== undefined || d.set !== undefined) return false;
    if (typeof d.value === 'object' && d.value !== null) return false;
  }
  return true;
}

/**
 * Freeze the parsed messages of primitives, as the agent loop seals them (the parsed copy is the
 * store's own). (Module-internal: the memory store's held records read theirs the same way.)
 */
export function sealParsedMessages(messages: readonly unknown[]): void {
  for (const m of messages) {
    if (!plainRecord(m)) continue;
    let flat = true;
    for (const key in m) {
      const v = m[key];
      if (typeof v === 'object' && v !== null) flat = false;
    }
    if (flat) Object.freeze(m);
  }
}

/**
 * Stands in for a state's messages while the rest of a record is checked and written: a string no
 * saved value holds (a NUL and this process's random id), so its JSON is found once in the text.
 */
const MESSAGES_HERE = `\u0000troupe:messages:${randomUUID()}`;
const MESSAGES_HERE_JSON = JSON.stringify(MESSAGES_HERE);

/** {@link PersistenceRules.encodeWithState}'s fast path: the record without its messages, then the messages. */
function encodeSplit(
  value: Record<string, unknown>,
  state: Record<string, unknown>,
  messages: readonly unknown[],
  what: string,
): string {
  countSave();
  // Everything but the messages in one check and one stringify; the messages from their cache.
  const shell = { ...value, state: { ...state, messages: MESSAGES_HERE } };
  json(shell, what);
  // Messages not in the cache are checked in one pass (a refusal is named by encode() again), then
  // written one by one so that those that cannot change are cached.
  const known: (string | undefined)[] = new Array(messages.length);
  const fresh: unknown[] = [];
  for (let i = 0; i < messages.length; i++) {
    const text = cachedJson(messages[i]);
    if (text === undefined) fresh.push(messages[i]);
    else known[i] = text;
  }
  if (fresh.length > 0) json(fresh, `${what}.state.messages`, 2);
  let list = '[';
  for (let i = 0; i < messages.length; i++) {
    let text = known[i];
    if (text === undefined) {
      const m = messages[i] as object;
      text = JSON.stringify(m);
      if (unchangeable(m)) messageJsonNow.set(m, text);
    }
    list += i === 0 ? text : `,${text}`;
  }
  const text = JSON.stringify(shell);
  const at = text.indexOf(MESSAGES_HERE_JSON);
  if (at < 0 || text.indexOf(MESSAGES_HERE_JSON, at + 1) >= 0) return PersistenceRules.encode(value, what);
  return `${text.slice(0, at)}${list}]${text.slice(at + MESSAGES_HERE_JSON.length)}`;
}

/**
 * The messages of a record's state, when the record can be written as its shell and its messages
 * apart (a plain record, a plain state, a plain list without holes, nothing a spread would not carry).
 * (Module-internal: the memory store's held records split the same records.)
 */
export function splittable(value: unknown): readonly unknown[] | undefined {
  const state = plainRecord(value) ? value.state : undefined;
  const messages = plainRecord(state) ? state.messages : undefined;
  if (
    !Array.isArray(messages) ||
    Object.getPrototypeOf(messages) !== Array.prototype ||
    Object.keys(messages).length !== messages.length || // holes or named keys: encode() says which
    // What a copy by spread would not carry (symbol keys, a toJSON): encode() writes or refuses it.
    hasSymbolsOrToJson(value) ||
    hasSymbolsOrToJson(state) ||
    typeof (messages as { toJSON?: unknown }).toJSON === 'function'
  ) {
    return undefined;
  }
  return messages;
}

function hasSymbolsOrToJson(o: unknown): boolean {
  return (
    Object.getOwnPropertySymbols(o as object).length > 0 || typeof (o as { toJSON?: unknown }).toJSON === 'function'
  );
}

/**
 * The checks and conventions every {@link PersistenceAdapter} applies, in one
 * place, so the in-memory store, the SQLite store and a store you write
 * yourself refuse the same input with the same typed errors. Each check
 * throws an `InvalidArgumentError` (`ERR_INVALID_ARGUMENT`, or `ERR_NOT_JSON`
 * for a value JSON cannot carry) saying what to pass instead.
 *
 * @example
 * ```ts
 * const tenantKey: TenantKey = (scope) => (scope as { tenantId: string }).tenantId
 * const tenant = PersistenceRules.tenantOf(tenantKey, { tenantId: 't1' }) // 't1'
 * const text = PersistenceRules.encode({ notes: ['call back'] }, 'metadata') // '{"notes":["call back"]}'
 * PersistenceRules.encode({ at: new Date() }, 'metadata') // throws ERR_NOT_JSON naming metadata.at
 * ```
 */
export const PersistenceRules = Object.freeze({
  /** The tenant key of `scope` under `tenantKey` (default {@link DEFAULT_TENANT_KEY}), checked. */
  tenantOf(tenantKey: TenantKey | undefined, scope: unknown): string {
    if (tenantKey === undefined) return DEFAULT_TENANT_KEY;
    let key: unknown;
    try {
      key = tenantKey(scope);
    } catch (error) {
      throw new InvalidArgumentError(`tenantKey(scope) threw: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
    if (typeof key !== 'string' || key.length === 0 || key.length > 512 || key.includes('\u0000')) {
      throw bad(
        'tenantKey(scope) must return a non-empty string of at most 512 characters without NUL or a lone surrogate: fix the tenantKey hook',
      );
    }
    wellFormed(key, 'the tenant key tenantKey(scope) returned');
    return key;
  },

  /**
   * Check an id argument (a run's, a request's, a conversation's): a non-empty string of at most 512
   * characters without NUL or a lone surrogate (which UTF-8 cannot carry: the error names its index).
   */
  checkId(value: unknown, what: string): string {
    return id(value, what);
  },

  /** Check a time argument: a finite number of milliseconds since the epoch. */
  checkTime(value: unknown, what: string): number {
    return time(value, what);
  },

  /** Check the options of `markInterrupted` (nothing, or an object whose `now` is a finite time if given). */
  checkMarkInterrupted(options: unknown): void {
    if (options === undefined) return;
    const o = object(options, 'markInterrupted(options)');
    if (o.now !== undefined) time(o.now, 'markInterrupted({ now })');
  },

  /** Check a {@link PersistenceContext}. */
  checkContext(context: PersistenceContext): void {
    object(context, 'the persistence context');
    id(context.agentId, 'context.agentId');
    id(context.conversationId, 'context.conversationId');
  },

  /** Check an envelope to be written: the current version, for the context's agent and conversation. */
  checkEnvelope(envelope: AgentStateEnvelope, context: PersistenceContext): void {
    const e = object(envelope, 'the envelope');
    if (e.version !== STATE_ENVELOPE_VERSION) {
      throw bad(
        `the envelope has version ${String(e.version)}: a store writes version ${STATE_ENVELOPE_VERSION} only (upgrade older ones with migrateEnvelope)`,
      );
    }
    if (e.agentId !== context.agentId || e.conversationId !== context.conversationId) {
      throw bad(
        `the envelope is for agent ${String(e.agentId)} of conversation ${String(e.conversationId)}, the context names ${context.agentId} of ${context.conversationId}: pass the matching context`,
      );
    }
    id(e.agentName, 'envelope.agentName');
    if (typeof e.status !== 'string' || !CONVERSATION_STATUSES.has(e.status)) {
      throw bad(
        `envelope.status must be one of ${[...CONVERSATION_STATUSES].join(', ')}, got ${describeValue(e.status)}`,
      );
    }
    object(e.state, 'envelope.state');
    time(e.savedAt, 'envelope.savedAt');
  },

  /** Check a run row; with a context, it must belong to the context's conversation. */
  checkRun(run: RunRecord, context?: PersistenceContext): void {
    const r = object(run, 'a run');
    id(r.runId, 'run.runId');
    id(r.conversationId, 'run.conversationId');
    if (context !== undefined && r.conversationId !== context.conversationId) {
      throw bad(
        `run ${String(r.runId)} belongs to conversation ${String(r.conversationId)}, not ${context.conversationId}: commit it with its own conversation`,
      );
    }
    id(r.agentId, 'run.agentId');
    id(r.agentName, 'run.agentName');
    if (r.parentRunId !== undefined) id(r.parentRunId, 'run.parentRunId');
    if (r.toolCallId !== undefined) id(r.toolCallId, 'run.toolCallId');
    if (r.module !== undefined && typeof r.module !== 'string') throw bad('run.module must be a string');
    if (typeof r.kind !== 'string' || !RUN_KINDS.has(r.kind)) {
      throw bad(`run.kind must be message, subagent or spawn, got ${describeValue(r.kind)}`);
    }
    if (typeof r.status !== 'string' || !RUN_STATUSES.has(r.status)) {
      throw bad(`run.status must be one of ${[...RUN_STATUSES].join(', ')}, got ${describeValue(r.status)}`);
    }
    if (!Number.isSafeInteger(r.attempt) || (r.attempt as number) < 1) {
      throw bad(`run.attempt is a fencing token: an integer ≥ 1, got ${describeValue(r.attempt)}`);
    }
    usage(r.usage, 'run.usage');
    usage(r.totalUsage, 'run.totalUsage');
    time(r.updatedAt, 'run.updatedAt');
  },

  /** Check a tool-call key. */
  checkToolCallKey(key: ToolCallKey): void {
    const k = object(key, 'a tool call');
    id(k.runId, 'toolCall.runId');
    id(k.toolCallId, 'toolCall.toolCallId');
    if (!Number.isSafeInteger(k.attempt) || (k.attempt as number) < 1) {
      throw bad(`toolCall.attempt must be an integer ≥ 1, got ${describeValue(k.attempt)}`);
    }
  },

  /** Check a tool call about to start. */
  checkToolCallStart(call: ToolCallStart): void {
    PersistenceRules.checkToolCallKey(call);
    id(call.toolName, 'toolCall.toolName');
    if (typeof call.idempotent !== 'boolean') throw bad('toolCall.idempotent must be a boolean');
    time(call.startedAt, 'toolCall.startedAt');
  },

  /** Check a request to open; with a context, it must belong to the context's conversation. */
  checkRequestOpening(request: RequestOpening, context?: PersistenceContext): void {
    const r = object(request, 'a request');
    id(r.requestId, 'request.requestId');
    id(r.conversationId, 'request.conversationId');
    if (context !== undefined && r.conversationId !== context.conversationId) {
      throw bad(
        `request ${String(r.requestId)} belongs to conversation ${String(r.conversationId)}, not ${context.conversationId}`,
      );
    }
    id(r.agentId, 'request.agentId');
    id(r.runId, 'request.runId');
    id(r.runAgentId, 'request.runAgentId');
    if (!Array.isArray(r.path) || r.path.length === 0)
      throw bad('request.path must list the agent ids from the parent down');
    for (const step of r.path) id(step, 'request.path[i]');
    const inner = object(r.request, 'request.request');
    id(inner.id, 'request.request.id');
    id(inner.kind, 'request.request.kind');
    if (typeof inner.prompt !== 'string') throw bad('request.request.prompt must be a string');
    id(r.localId, 'request.localId');
    id(r.toolCallId, 'request.toolCallId');
    if (typeof r.approval !== 'boolean') throw bad('request.approval must be a boolean');
    if (r.approvedCall !== undefined) {
      const call = object(r.approvedCall, 'request.approvedCall');
      id(call.toolName, 'request.approvedCall.toolName');
      json(call.arguments ?? null, 'request.approvedCall.arguments');
    }
    time(r.openedAt, 'request.openedAt');
    json(r.request, 'request.request');
  },

  /** Check an answer before it is saved. */
  checkAnswer(answer: unknown): void {
    const a = object(answer, 'the answer');
    id(a.id, 'answer.id');
    if (typeof a.ok !== 'boolean') throw bad('answer.ok must be a boolean');
    if (a.reason !== undefined && typeof a.reason !== 'string') throw bad('answer.reason must be a string');
    json(answer, 'answer');
  },

  /** Check every part of a {@link TurnBatch} against its context. */
  checkBatch(batch: TurnBatch, context: PersistenceContext): void {
    PersistenceRules.checkContext(context);
    object(batch, 'the batch');
    if (batch.envelope !== undefined) PersistenceRules.checkEnvelope(batch.envelope, context);
    for (const message of batch.messages ?? []) {
      const m = object(message, 'a message');
      if (typeof m.role !== 'string' || typeof m.content !== 'string') {
        throw bad('a message must be { role, content } with string role and content');
      }
    }
    const runIds = new Set<string>();
    for (const run of batch.runs ?? []) {
      PersistenceRules.checkRun(run, context);
      if (runIds.has(run.runId)) throw bad(`run ${run.runId} is twice in one batch: upsert it once`);
      runIds.add(run.runId);
    }
    for (const key of batch.committedToolCalls ?? []) PersistenceRules.checkToolCallKey(key);
    for (const request of batch.openedRequests ?? []) PersistenceRules.checkRequestOpening(request, context);
    for (const requestId of batch.withdrawnRequests ?? []) id(requestId, 'a withdrawn request id');
    if (batch.at !== undefined) time(batch.at, 'batch.at');
    if (batch.basedOn !== undefined) {
      if (!Number.isSafeInteger(batch.basedOn) || batch.basedOn < 0)
        throw bad(
          `batch.basedOn must be an integer ≥ 0 (the revision loadState returned), not ${String(batch.basedOn)}`,
        );
      if (batch.envelope === undefined)
        throw bad('batch.basedOn is the revision of an envelope: pass it with the envelope');
    }
  },

  /**
   * `JSON.stringify` that refuses instead of mangling: a value JSON cannot
   * carry exactly is an `ERR_NOT_JSON` naming its path (an object property
   * holding `undefined` counts as absent).
   */
  encode(value: unknown, what: string): string {
    json(value, what);
    return JSON.stringify(value);
  },

  /**
   * {@link PersistenceRules.encode} of a state envelope or a run record: the same text and the same
   * errors, but each deep-frozen message of its `state` is checked and written once (cached by
   * identity), so a turn's save costs what changed, not the whole conversation.
   */
  encodeWithState(value: unknown, what: string): string {
    const messages = splittable(value);
    if (messages === undefined) return PersistenceRules.encode(value, what);
    try {
      const state = (value as { state: Record<string, unknown> }).state;
      return encodeSplit(value as Record<string, unknown>, state, messages, what);
    } catch {
      // Refused: encode() names the first value it finds, as it always did.
      return PersistenceRules.encode(value, what);
    }
  },

  /**
   * A state envelope (or run record) in two parts, for a store that keeps a state's messages in
   * rows of their own: the record with `state.messages` written as their number, and the JSON of
   * each message from index `from` on (the store holds those before it already, unchanged). The
   * same checks and errors as {@link PersistenceRules.encodeWithState}, for the messages it writes;
   * `undefined` for a record whose messages cannot be split off exactly (symbol keys, a `toJSON`, a
   * list with holes): save that one whole, with `encodeWithState`.
   *
   * @example
   * ```ts
   * const parts = PersistenceRules.encodeStateParts(envelope, 'envelope', 0)
   * // parts.shell: '{"version":2,…,"state":{…,"messages":3,…}}', parts.messages: three JSON texts
   * ```
   */
  encodeStateParts(value: unknown, what: string, from = 0): { shell: string; messages: string[] } | undefined {
    const messages = splittable(value);
    if (messages === undefined || !Number.isSafeInteger(from) || from < 0 || from > messages.length) return undefined;
    countSave();
    const state = (value as { state: Record<string, unknown> }).state;
    const shell = { ...(value as Record<string, unknown>), state: { ...state, messages: MESSAGES_HERE } };
    try {
      json(shell, what);
    } catch {
      PersistenceRules.encode(value, what); // names the first value JSON cannot carry
      return undefined;
    }
    const texts: string[] = new Array(messages.length - from);
    for (let i = from; i < messages.length; i++)
      texts[i - from] = messageJson(messages[i], `${what}.state.messages[${i}]`);
    const text = JSON.stringify(shell);
    const at = text.indexOf(MESSAGES_HERE_JSON);
    if (at < 0 || text.indexOf(MESSAGES_HERE_JSON, at + 1) >= 0) return undefined;
    return {
      shell: `${text.slice(0, at)}${messages.length}${text.slice(at + MESSAGES_HERE_JSON.length)}`,
      messages: texts,
    };
  },

  /**
   * `JSON.parse` of a saved envelope or run record, with the text messages of its state sealed as
   * the agent loop seals them (frozen: the parsed copy is the store's own), so a restored
   * conversation's later saves write them from the cache too.
   */
  parseWithState(json: string): unknown {
    const value: unknown = JSON.parse(json);
    const messages = plainRecord(value) && plainRecord(value.state) ? value.state.messages : undefined;
    if (Array.isArray(messages)) sealParsedMessages(messages);
    return value;
  },

  /**
   * Read a saved record back with its shape checked: a row that is not JSON,
   * or not the record it should be (damaged by hand, by a tool, or by a
   * disk), is `ERR_STORE_CORRUPT` naming `where` (its table and key) — never
   * a bare `SyntaxError` or a `TypeError` later, and never taken for an empty
   * one. A state envelope's shape is checked after its migration
   * ({@link PersistenceRules.checkEnvelope}); here only that it is an object.
   */
  readRecord(json: unknown, kind: 'state' | 'run' | 'request' | 'message', where: string): unknown {
    try {
      if (typeof json !== 'string') throw bad(`it holds ${describeValue(json)}, not JSON text`);
      const value = kind === 'state' || kind === 'run' ? PersistenceRules.parseWithState(json) : JSON.parse(json);
      if (kind === 'run') PersistenceRules.checkRun(value as RunRecord);
      else if (kind === 'request') {
        PersistenceRules.checkRequestOpening(value as RequestOpening);
        const status = (value as { status?: unknown }).status;
        if (status !== 'open' && status !== 'answered' && status !== 'withdrawn')
          throw bad(`request.status must be open, answered or withdrawn, got ${describeValue(status)}`);
      } else if (kind === 'message') {
        const m = object(value, 'the message');
        if (typeof m.role !== 'string' || typeof m.content !== 'string')
          throw bad('a message must be { role, content } with string role and content');
      } else object(value, 'the state');
      return value;
    } catch (error) {
      throw PersistenceRules.corrupt(where, error);
    }
  },

  /** The error of a saved record that cannot be read (see {@link PersistenceRules.readRecord}). */
  corrupt(where: string, error: unknown): TroupeError {
    if (error instanceof TroupeError && error.code === 'ERR_STORE_CORRUPT') return error;
    const reason = (error as Error)?.message ?? String(error);
    return new TroupeError(
      `${where} is damaged (${reason}): restore the store from a backup, or delete the conversation it belongs to`,
      { code: 'ERR_STORE_CORRUPT', cause: error },
    );
  },

  /**
   * The JSON texts of a list kept in chunks (a transcript's, a state's messages: rows of one JSON
   * text per line, numbered 1…n, each with its `count` of lines), in order. Chunks numbered other
   * than 1…n, or whose count is not their number of lines, are `ERR_STORE_CORRUPT` named by
   * `whereOf` (the message's position), never a shorter list. For a store that keeps lists so.
   *
   * @example
   * ```ts
   * PersistenceRules.readChunks([{ chunk: 1, count: 2, json: '{"a":1}\n{"b":2}\n' }], 'the transcript', (n) => `message ${n}`)
   * // ['{"a":1}', '{"b":2}']
   * ```
   */
  readChunks(
    rows: readonly { readonly chunk: number; readonly count: number; readonly json: unknown }[],
    list: string,
    whereOf: (n: number) => string,
  ): string[] {
    const out: string[] = [];
    for (const [i, row] of rows.entries()) {
      if (row.chunk !== i + 1) {
        throw PersistenceRules.corrupt(
          whereOf(out.length + 1),
          new Error(`${list}'s chunk ${i + 1} is missing (the next is ${String(row.chunk)})`),
        );
      }
      const lines = typeof row.json === 'string' ? row.json.split('\n') : undefined;
      if (lines === undefined || !(row.count >= 1) || lines.length !== row.count + 1 || lines[row.count] !== '') {
        const held = lines === undefined ? 'no text' : `${lines.length - 1} complete lines`;
        throw PersistenceRules.corrupt(
          whereOf(out.length + 1),
          new Error(`chunk ${row.chunk} of ${list} says it holds ${row.count} messages, and holds ${held}`),
        );
      }
      for (let k = 0; k < row.count; k++) out.push(lines[k] as string);
    }
    return out;
  },

  /** {@link PersistenceRules.encode} of one message, cached as {@link PersistenceRules.encodeWithState} caches. */
  encodeMessage(message: unknown, what: string): string {
    return messageJson(message, what);
  },

  /** The limit and cursor of a listing, checked. */
  page(options: ListOptions | undefined): { limit: number; after: string | undefined } {
    const limit = options?.limit ?? DEFAULT_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      throw bad(`limit must be an integer from 1 to ${MAX_LIMIT}, got ${describeValue(limit)}`);
    }
    const after = options?.after;
    if (after !== undefined && (typeof after !== 'string' || after.length === 0)) {
      throw bad('after must be the `next` cursor of a previous page');
    }
    return { limit, after };
  },

  /** A listing cursor: a time and an id, ordered by both. */
  cursor(at: number, key: string): string {
    return `${at}:${key}`;
  },

  /**
   * The page of a listing from `rows` read in its order with one more than `limit` (whether more
   * follow): the first `limit`, each made an item by `item`, and the cursor after the last of them.
   */
  pageOf<R, T>(
    rows: readonly R[],
    limit: number,
    item: (row: R) => T,
    at: (row: R) => number,
    key: (row: R) => string,
  ): Page<T> {
    const kept = rows.length > limit ? rows.slice(0, limit) : rows;
    const last = kept[kept.length - 1];
    return {
      items: kept.map(item),
      next: rows.length > limit && last !== undefined ? PersistenceRules.cursor(at(last), key(last)) : undefined,
    };
  },

  /** Read a cursor made by {@link PersistenceRules.cursor}. */
  parseCursor(cursor: string): { at: number; key: string } {
    const colon = cursor.indexOf(':');
    const at = Number(cursor.slice(0, colon));
    if (colon <= 0 || !Number.isFinite(at))
      throw bad(`"${cursor}" is not a cursor: pass the \`next\` of a previous page`);
    return { at, key: cursor.slice(colon + 1) };
  },

  /** The error of an upsert fenced by a newer attempt. */
  fenced(runId: string, attempt: number, saved: number): TroupeError {
    return new TroupeError(
      `run ${runId} is saved at attempt ${saved}; an upsert at attempt ${attempt} is stale (another process resumed it): stop working on this run`,
      { code: 'ERR_STORE_FENCED' },
    );
  },

  /** The error of an upsert of a run another store is running at the same attempt. */
  takenRun(runId: string, attempt: number): TroupeError {
    return new TroupeError(
      `run ${runId} is running at attempt ${attempt} in another process (it resumed the run first): stop working on this run; nothing of this write was saved`,
      { code: 'ERR_STORE_FENCED' },
    );
  },

  /** The error of an envelope saved over a revision it was not based on. */
  staleState(agentId: string, basedOn: number, saved: number | undefined): TroupeError {
    const now =
      saved === undefined
        ? 'it is no longer saved (its conversation was deleted)'
        : basedOn === 0
          ? `another process saved it first (revision ${saved})`
          : `another process saved revision ${saved} since`;
    return new TroupeError(
      `the state of agent ${agentId} was loaded at revision ${basedOn}, and ${now}: nothing of this write was saved; start the agent again (startAgent) to go on from what is saved`,
      { code: 'ERR_STORE_FENCED' },
    );
  },

  /**
   * The run, among a batch's runs or a `startToolCalls`' calls, that was dispatched before
   * (attempt > 1: resumed after an answer, a restart or a restore), if one is. Written without an
   * envelope to a conversation that is gone, its conversation existed and was deleted since: the
   * write is refused ({@link PersistenceRules.deletedConversation}). A first attempt's rows are how
   * a new conversation's first message starts (no envelope is saved before them).
   */
  resumedRun(items: readonly { readonly runId: string; readonly attempt: number }[] | undefined): string | undefined {
    for (const item of items ?? EMPTY_RUNS) if (item.attempt > 1) return item.runId;
    return undefined;
  },

  /** The error of a write of run `runId` for a conversation deleted while the run was live. */
  deletedConversation(conversationId: string, runId: string): TroupeError {
    return new TroupeError(
      `conversation ${conversationId} was deleted while run ${runId} was live: nothing of this write was saved (a deleted conversation is not written back); stop working on it, or start a new conversation`,
      { code: 'ERR_STORE_FENCED' },
    );
  },

  /**
   * The error of deleting a conversation while a message of it runs: run `runId` is `running`
   * under a live writer, in this process (`here`) or another one. Nothing was deleted.
   */
  busyConversation(conversationId: string, runId: string, where: 'here' | 'elsewhere'): TroupeError {
    const place = where === 'here' ? 'in this process' : 'in another live process';
    return new TroupeError(
      `conversation ${conversationId} is running a message (run ${runId}, ${place}): nothing was deleted; cancel the message (agent.cancel(), in the process that runs it) or wait for its reply, then delete the conversation`,
      { code: 'ERR_CONVERSATION_BUSY' },
    );
  },

  /**
   * The runs a batch ends (a terminal status): when the batch fails, the writer has stopped
   * running them all the same, and their rows still say what was saved before.
   */
  endedRuns(batch: TurnBatch): readonly RunRecord[] {
    const runs = batch.runs;
    if (runs === undefined || runs.length === 0) return EMPTY_RUNS;
    return runs.filter((run) => isTerminalRunStatus(run.status));
  },

  /** The error of a second start of a tool call that already committed. */
  alreadyCommitted(key: ToolCallKey): TroupeError {
    return bad(
      `tool call ${key.toolCallId} of run ${key.runId} (attempt ${key.attempt}) already committed: its side effect must not run again; start a new attempt`,
    );
  },

  /** The error of committing a tool call that was never started. */
  notStarted(key: ToolCallKey): TroupeError {
    return bad(
      `tool call ${key.toolCallId} of run ${key.runId} (attempt ${key.attempt}) was never started: call startToolCalls before its side effect`,
    );
  },

  /** The error of opening a request whose id is taken. */
  duplicateRequest(requestId: string): TroupeError {
    return bad(`request ${requestId} already exists: request ids are unique in a tenant`);
  },

  /** The error of a call after `close()`. */
  closed(store: string): ClosedError {
    return new ClosedError(`${store} is closed: open a new store`);
  },
});
