import { type Answer, type Clock, InvalidArgumentError, type Message } from '@troupe/core';
import {
  addShown,
  agentRows,
  agentsOf,
  type ConversationExtras,
  ConversationTable,
  callKey,
  heldMessages,
  heldRecordOf,
  keepShown,
  obtainAgentRows,
  SEP,
  type StoredRequest,
  setHeldMessages,
  shownOf,
} from './ConversationTable.js';
import {
  copyMessage,
  flat,
  type HeldMessage,
  holdRecord,
  holdShown,
  type NewHeldRecord,
  readRecord,
} from './HeldState.js';
import type {
  AnswerResult,
  ConversationSummary,
  ListOptions,
  MarkInterruptedOptions,
  Page,
  PersistenceAdapter,
  PersistenceContext,
  PruneOptions,
  PruneResult,
  RequestListOptions,
  RequestOpening,
  RequestRecord,
  RunRecord,
  TenantKey,
  ToolCallRecord,
  ToolCallStart,
  TurnBatch,
  WithdrawResult,
} from './Persistence.js';
import { isTerminalRunStatus } from './Persistence.js';
import { PersistenceRules as R } from './PersistenceRules.js';
import { type AgentStateEnvelope, migrateEnvelope } from './StateEnvelope.js';

/**
 * Options of {@link MemoryPersistence}. `S` is the scope its `tenantKey` reads.
 *
 * @example
 * ```ts
 * const options: MemoryPersistenceOptions<{ tenantId: string }> = {
 *   tenantKey: (scope) => scope.tenantId,
 *   maxConversations: 500,
 * }
 * const store = new MemoryPersistence(options)
 * ```
 */
export interface MemoryPersistenceOptions<S = unknown> {
  /**
   * Maps a scope to the tenant its rows are kept under; default: every scope
   * shares `'default'`. Type its parameter as the supervisor's scope
   * (`(scope: TenantScope) => scope.tenantId`): the store is then typed by it.
   */
  readonly tenantKey?: TenantKey<S>;
  /** How many conversations are kept before the least recently used one without an open request is dropped (default 10,000). */
  readonly maxConversations?: number;
  /** Where the default times (`prune`, `markInterrupted`, a batch without `at`) come from. */
  readonly clock?: Pick<Clock, 'now'>;
}

/**
 * Default of {@link MemoryPersistenceOptions.maxConversations}.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence({ maxConversations: DEFAULT_MAX_CONVERSATIONS / 10 })
 * ```
 */
export const DEFAULT_MAX_CONVERSATIONS = 10_000;

/**
 * The in-memory {@link PersistenceAdapter}: for tests, scripts and hosts that
 * do not need to survive a restart. Same semantics as the SQLite store for
 * every operation (one contract suite runs against both): values are saved
 * as copies (JSON text; a value JSON cannot carry is refused the same way),
 * a batch is all or nothing, answers are a compare-and-set, runs are fenced
 * by `attempt`. A message the agent loop sealed (a frozen record of strings,
 * numbers, booleans) cannot change: it is kept as itself, not copied, so an
 * idle conversation's transcript is held once, by its agent and its store
 * together.
 *
 * Bounded: at most `maxConversations` are kept; past that the least recently
 * used conversation without an open request is dropped, and `release` drops
 * a stopped agent's conversation at once. When every kept conversation waits
 * on a person, a new one is refused with `ERR_BACKPRESSURE` (a question
 * waiting for a person is never dropped).
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence({ maxConversations: 1000, tenantKey: (s: { org: string }) => s.org })
 * const supervisor = createSupervisor({ persistence: store })
 * ```
 */
export class MemoryPersistence<S = unknown> implements PersistenceAdapter<S> {
  /** The store's tenant hook (`undefined`: every scope shares one tenant). */
  readonly tenantKey: TenantKey<S> | undefined;
  readonly #tenantKey: TenantKey | undefined;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #t: ConversationTable;
  /**
   * Runs whose end this store was asked to save and could not (`tenant NUL runId` → attempt): their
   * rows still say `running`, yet their writer stopped. See {@link MemoryPersistence.markInterrupted}.
   */
  readonly #unsavedEnds = new Map<string, number>();
  /** The states of deleted conversations (`tenant NUL conversation NUL agent`); the oldest go past `maxConversations`. */
  readonly #deleted = new Set<string>();
  /** Conversations deleted here (the most recent, as many as the bound): a resumed run of one is not written back. */
  readonly #deletedConversations = new Set<string>();
  #closed = false;

  constructor(options: MemoryPersistenceOptions<S> = {}) {
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('MemoryPersistence(options): pass an object');
    if (options.tenantKey !== undefined && typeof options.tenantKey !== 'function') {
      throw new InvalidArgumentError('tenantKey must be a function (scope) => string');
    }
    const max = options.maxConversations ?? DEFAULT_MAX_CONVERSATIONS;
    if (!Number.isSafeInteger(max) || max < 1)
      throw new InvalidArgumentError('maxConversations must be an integer ≥ 1');
    this.tenantKey = options.tenantKey;
    // The rules read a scope as data of any shape (the supervisor hands over what its schema made).
    this.#tenantKey = options.tenantKey as TenantKey | undefined;
    this.#t = new ConversationTable(max);
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  #tenant(scope: unknown): string {
    if (this.#closed) throw R.closed('MemoryPersistence');
    return R.tenantOf(this.#tenantKey, scope);
  }

  async persistState(scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { envelope: data }, context);
  }

  async loadState(scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = this.#t.find(tenant, context.conversationId);
    const rows = conv === undefined ? undefined : agentRows(conv, context.agentId);
    const saved = conv === undefined || rows === undefined ? undefined : heldRecordOf(conv, rows);
    return saved === undefined || rows === undefined
      ? undefined
      : {
          ...migrateEnvelope(readRecord(saved), `the saved state of ${context.agentId}`),
          revision: rows.revision,
        };
  }

  async saveMessage(scope: unknown, message: Message, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { messages: [message] }, context);
  }

  async loadMessages(scope: unknown, context: PersistenceContext): Promise<readonly Message[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = this.#t.find(tenant, context.conversationId);
    const rows = conv === undefined ? undefined : agentRows(conv, context.agentId);
    return rows === undefined ? [] : shownOf(rows).map((held) => copyMessage(held) as Message);
  }

  async commit(scope: unknown, batch: TurnBatch, context: PersistenceContext): Promise<void> {
    const tenant = this.#tenant(scope);
    R.checkBatch(batch, context);
    try {
      this.#commit(tenant, batch, context);
    } catch (error) {
      // The runs it ends are no longer run by their writer, though their rows say what was saved before.
      for (const run of R.endedRuns(batch)) this.#unsavedEnds.set(`${tenant}${SEP}${run.runId}`, run.attempt);
      throw error;
    }
    if (batch.runs !== undefined && this.#unsavedEnds.size > 0) {
      for (const run of batch.runs) this.#unsavedEnds.delete(`${tenant}${SEP}${run.runId}`);
    }
  }

  // A commit's checks and writes (synchronous, so no other call interleaves); throws before any write.
  #commit(tenant: string, batch: TurnBatch, context: PersistenceContext): void {
    const at = batch.at ?? this.#clock.now();
    // Phase 1: encode and check everything against what is saved; nothing changes yet.
    const existing = this.#t.find(tenant, context.conversationId);
    const saved = existing === undefined ? undefined : agentRows(existing, context.agentId);
    const revision = saved?.held === undefined ? undefined : saved.revision;
    // The messages it held already are taken as they are (see HeldState): a turn holds what it added.
    const envelope: NewHeldRecord | undefined =
      batch.envelope === undefined
        ? undefined
        : holdRecord(batch.envelope, 'envelope', saved === undefined ? undefined : heldMessages(saved));
    const messages: HeldMessage[] = (batch.messages ?? []).map((m) => holdShown(m, 'message', envelope));
    const runs = (batch.runs ?? []).map((run) => ({ run, json: flat(R.encodeWithState(run, `run ${run.runId}`)) }));
    const opened = (batch.openedRequests ?? []).map((r) => ({
      r,
      json: flat(R.encode({ ...r, status: 'open' }, `request ${r.requestId}`)),
    }));
    // Fenced only against a saved state: one dropped for the bound is saved again by its agent.
    if (batch.basedOn !== undefined && revision !== undefined && batch.basedOn !== revision) {
      throw R.staleState(context.agentId, batch.basedOn, revision);
    }
    // One deleted is not: a save based on it (a message that ran through the deletion, a copy held
    // idle) would write the conversation back.
    const stateKey = `${tenant}${SEP}${context.conversationId}${SEP}${context.agentId}`;
    if (
      batch.envelope !== undefined &&
      batch.basedOn !== undefined &&
      batch.basedOn > 0 &&
      revision === undefined &&
      this.#deleted.has(stateKey)
    ) {
      throw R.staleState(context.agentId, batch.basedOn, undefined);
    }
    const convKey = `${tenant}${SEP}${context.conversationId}`;
    if (existing === undefined && batch.envelope === undefined && this.#deletedConversations.has(convKey)) {
      const resumed = R.resumedRun(batch.runs);
      if (resumed !== undefined) throw R.deletedConversation(context.conversationId, resumed);
    }
    for (const { run } of runs) {
      const owner = this.#t.runIndex.get(`${tenant}${SEP}${run.runId}`);
      const stored = owner?.more?.runs?.get(run.runId);
      if (owner !== undefined && owner.id !== context.conversationId) {
        throw new InvalidArgumentError(
          `run ${run.runId} belongs to conversation ${owner.id}, not ${context.conversationId}`,
        );
      }
      if (stored !== undefined && run.attempt < stored.attempt) throw R.fenced(run.runId, run.attempt, stored.attempt);
    }
    const seen = new Set<string>();
    for (const { r } of opened) {
      if (this.#t.requests.has(`${tenant}${SEP}${r.requestId}`) || seen.has(r.requestId)) {
        throw R.duplicateRequest(r.requestId);
      }
      seen.add(r.requestId);
    }
    for (const key of batch.committedToolCalls ?? []) {
      const call = existing?.more?.toolCalls?.get(key.runId)?.get(callKey(key));
      if (call === undefined) throw R.notStarted(key);
    }
    // Phase 2: apply (synchronous, so no other call interleaves).
    const conv = existing ?? this.#t.obtain(tenant, context.conversationId);
    if (envelope !== undefined && batch.envelope !== undefined) {
      if (this.#deleted.size > 0) this.#deleted.delete(stateKey);
      if (this.#deletedConversations.size > 0) this.#deletedConversations.delete(convKey);
      // A state dropped for the bound comes back at the revision its writer counts from.
      const revised = (revision ?? batch.basedOn ?? 0) + 1;
      const rows = obtainAgentRows(conv, context.agentId);
      keepShown(rows, envelope.kept);
      // Held in the rows' fields (checkBatch: the envelope's agent and conversation are the
      // context's): a held shell's state and fields, or the JSON and the fields a listing shows.
      const shell = envelope.shell;
      const e = typeof shell === 'string' ? batch.envelope : shell;
      rows.held = typeof shell === 'string' ? shell : shell.state;
      setHeldMessages(rows, envelope.messages);
      rows.revision = revised;
      rows.version = typeof shell === 'string' ? undefined : shell.version;
      rows.childCounter = typeof shell === 'string' ? undefined : shell.childCounter;
      rows.agentName = e.agentName;
      rows.status = e.status;
      rows.savedAt = e.savedAt;
      conv.savedBy(rows);
    }
    if (messages.length > 0) addShown(obtainAgentRows(conv, context.agentId), messages);
    for (const { run, json } of runs) {
      const more = conv.extras();
      more.runs ??= new Map();
      more.runs.set(run.runId, { json, status: run.status, attempt: run.attempt, updatedAt: run.updatedAt });
      this.#t.runIndex.set(`${tenant}${SEP}${run.runId}`, conv);
    }
    for (const key of batch.committedToolCalls ?? []) {
      const calls = conv.more?.toolCalls?.get(key.runId);
      const call = calls?.get(callKey(key));
      if (calls !== undefined && call !== undefined && call.status === 'started') {
        calls.set(callKey(key), { ...call, status: 'committed', committedAt: at });
      }
    }
    for (const { r, json } of opened) {
      const stored: StoredRequest = { conv, json, status: 'open', openedAt: r.openedAt, closedAt: undefined };
      this.#t.requests.set(`${tenant}${SEP}${r.requestId}`, stored);
      const more = conv.extras();
      more.requests ??= new Set();
      more.requests.add(r.requestId);
      more.open++;
    }
    for (const requestId of batch.withdrawnRequests ?? []) {
      if (this.#t.requests.get(`${tenant}${SEP}${requestId}`)?.conv === conv)
        this.#close(tenant, requestId, 'withdrawn', undefined, at);
    }
  }

  #close(
    tenant: string,
    requestId: string,
    status: 'answered' | 'withdrawn',
    answer: Answer | undefined,
    at: number,
  ): StoredRequest | undefined {
    const stored = this.#t.requests.get(`${tenant}${SEP}${requestId}`);
    if (stored === undefined || stored.status !== 'open') return undefined;
    const record = JSON.parse(stored.json) as RequestRecord;
    stored.json = flat(JSON.stringify({ ...record, status, answer, closedAt: at }));
    stored.status = status;
    stored.closedAt = at;
    // Open: its conversation has its extras since it was opened.
    (stored.conv.more as ConversationExtras).open--;
    return stored;
  }

  async loadRuns(
    scope: unknown,
    context: PersistenceContext,
    options: { readonly interrupted?: boolean } = {},
  ): Promise<readonly RunRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const interrupted = options?.interrupted === true;
    const conv = this.#t.find(tenant, context.conversationId);
    const out: RunRecord[] = [];
    for (const run of conv?.more?.runs?.values() ?? []) {
      if (!isTerminalRunStatus(run.status) || (interrupted && run.status === 'interrupted'))
        out.push(JSON.parse(run.json));
    }
    return out.sort((a, b) => a.updatedAt - b.updatedAt || (a.runId < b.runId ? -1 : 1));
  }

  async getRun(scope: unknown, runId: string): Promise<RunRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const conv = this.#t.runIndex.get(`${tenant}${SEP}${runId}`);
    const run = conv?.more?.runs?.get(runId);
    return run === undefined ? undefined : (JSON.parse(run.json) as RunRecord);
  }

  /**
   * Marks the runs whose end this store was asked to save and could not (the batch was refused):
   * their writer stopped running them. Every other run this store holds is its own, and a store's
   * own runs run in this process while it is open (what a memory store holds does not outlive the
   * process).
   */
  async markInterrupted(options: MarkInterruptedOptions = {}): Promise<readonly RunRecord[]> {
    R.checkMarkInterrupted(options);
    const tenant = options.scope === undefined ? undefined : this.#tenant(options.scope);
    if (this.#closed) throw R.closed('MemoryPersistence');
    const now = options.now ?? this.#clock.now();
    const marked: RunRecord[] = [];
    for (const [key, attempt] of this.#unsavedEnds) {
      if (tenant !== undefined && key.slice(0, key.indexOf(SEP)) !== tenant) continue;
      this.#unsavedEnds.delete(key);
      const conv = this.#t.runIndex.get(key);
      const runId = key.slice(key.indexOf(SEP) + 1);
      const runsOf = conv?.more?.runs;
      const run = runsOf?.get(runId);
      if (runsOf === undefined || run === undefined || run.status !== 'running' || run.attempt !== attempt) continue;
      const record: RunRecord = { ...(JSON.parse(run.json) as RunRecord), status: 'interrupted', updatedAt: now };
      const json = flat(JSON.stringify(record));
      runsOf.set(runId, { json, status: 'interrupted', attempt, updatedAt: now });
      marked.push(JSON.parse(json) as RunRecord);
    }
    return marked;
  }

  async startToolCalls(scope: unknown, calls: readonly ToolCallStart[], context: PersistenceContext): Promise<void> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    if (!Array.isArray(calls))
      throw new InvalidArgumentError('startToolCalls(scope, calls, context): calls must be an array');
    for (const call of calls) R.checkToolCallStart(call);
    const existing = this.#t.find(tenant, context.conversationId);
    if (existing === undefined && this.#deletedConversations.has(`${tenant}${SEP}${context.conversationId}`)) {
      const resumed = R.resumedRun(calls);
      if (resumed !== undefined) throw R.deletedConversation(context.conversationId, resumed);
    }
    for (const call of calls) {
      const owner = this.#t.callIndex.get(`${tenant}${SEP}${call.runId}`);
      if (owner !== undefined && owner.id !== context.conversationId) {
        throw new InvalidArgumentError(
          `run ${call.runId} belongs to conversation ${owner.id}, not ${context.conversationId}`,
        );
      }
      // A run saved at a later attempt was taken over: this attempt's side effects must not start.
      const saved = existing?.more?.runs?.get(call.runId)?.attempt;
      if (saved !== undefined && saved > call.attempt) throw R.fenced(call.runId, call.attempt, saved);
      if (existing?.more?.toolCalls?.get(call.runId)?.get(callKey(call))?.status === 'committed')
        throw R.alreadyCommitted(call);
    }
    const conv = existing ?? this.#t.obtain(tenant, context.conversationId);
    for (const call of calls) {
      const more = conv.extras();
      more.toolCalls ??= new Map();
      let byRun = more.toolCalls.get(call.runId);
      if (byRun === undefined) {
        byRun = new Map();
        more.toolCalls.set(call.runId, byRun);
      }
      byRun.set(callKey(call), {
        runId: call.runId,
        toolCallId: call.toolCallId,
        attempt: call.attempt,
        toolName: call.toolName,
        idempotent: call.idempotent,
        startedAt: call.startedAt,
        status: 'started',
        committedAt: undefined,
      });
      this.#t.callIndex.set(`${tenant}${SEP}${call.runId}`, conv);
    }
  }

  async loadToolCalls(scope: unknown, runId: string): Promise<readonly ToolCallRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const calls = this.#t.callIndex.get(`${tenant}${SEP}${runId}`)?.more?.toolCalls?.get(runId);
    const out: ToolCallRecord[] = [];
    for (const call of calls?.values() ?? []) if (call.status === 'started') out.push({ ...call });
    return out.sort(
      (a, b) => a.startedAt - b.startedAt || (a.toolCallId < b.toolCallId ? -1 : 1) || a.attempt - b.attempt,
    );
  }

  async openRequest(scope: unknown, request: RequestOpening): Promise<void> {
    if (typeof request !== 'object' || request === null)
      throw new InvalidArgumentError('openRequest: pass the request');
    return this.commit(
      scope,
      { openedRequests: [request] },
      { agentId: request.agentId, conversationId: request.conversationId },
    );
  }

  async answerRequest(scope: unknown, requestId: string, answer: Answer, at: number): Promise<AnswerResult> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    R.checkAnswer(answer);
    if (typeof at !== 'number' || !Number.isFinite(at)) throw new InvalidArgumentError('at must be a finite time');
    const json = R.encode(answer, 'answer');
    const stored = this.#t.requests.get(`${tenant}${SEP}${requestId}`);
    if (stored === undefined) return { status: 'unknown' };
    if (stored.status === 'answered') return { status: 'already-answered' };
    if (stored.status === 'withdrawn') return { status: 'withdrawn' };
    this.#close(tenant, requestId, 'answered', JSON.parse(json) as Answer, at);
    return { status: 'taken', record: JSON.parse(stored.json) as RequestRecord };
  }

  async withdrawRequest(scope: unknown, requestId: string, at: number): Promise<WithdrawResult> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    if (typeof at !== 'number' || !Number.isFinite(at)) throw new InvalidArgumentError('at must be a finite time');
    const stored = this.#t.requests.get(`${tenant}${SEP}${requestId}`);
    if (stored === undefined) return { status: 'unknown' };
    if (stored.status === 'answered') return { status: 'already-answered' };
    if (stored.status === 'withdrawn') return { status: 'already-withdrawn' };
    this.#close(tenant, requestId, 'withdrawn', undefined, at);
    return { status: 'withdrawn' };
  }

  async getRequest(scope: unknown, requestId: string): Promise<RequestRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    const stored = this.#t.requests.get(`${tenant}${SEP}${requestId}`);
    return stored === undefined ? undefined : (JSON.parse(stored.json) as RequestRecord);
  }

  async listRequests(scope: unknown, options: RequestListOptions = {}): Promise<Page<RequestRecord>> {
    const tenant = this.#tenant(scope);
    const { limit, after } = R.page(options);
    if (options.conversationId !== undefined) R.checkId(options.conversationId, 'listRequests({ conversationId })');
    const from = after === undefined ? undefined : R.parseCursor(after);
    const open: { at: number; id: string; s: StoredRequest }[] = [];
    for (const [key, s] of this.#t.requests) {
      if (s.status !== 'open' || s.conv.tenant !== tenant) continue;
      if (options.conversationId !== undefined && s.conv.id !== options.conversationId) continue;
      const id = key.slice(tenant.length + 1);
      if (from !== undefined && (s.openedAt < from.at || (s.openedAt === from.at && id <= from.key))) continue;
      open.push({ at: s.openedAt, id, s });
    }
    open.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1));
    return R.pageOf(
      open,
      limit,
      (x) => JSON.parse(x.s.json) as RequestRecord,
      (x) => x.at,
      (x) => x.id,
    );
  }

  async listConversations(scope: unknown, options: ListOptions = {}): Promise<Page<ConversationSummary>> {
    const tenant = this.#tenant(scope);
    const { limit, after } = R.page(options);
    const from = after === undefined ? undefined : R.parseCursor(after);
    const all: ConversationSummary[] = [];
    for (const conv of this.#t.of(tenant)) {
      const s = conv.summary;
      if (s === undefined) continue;
      const updatedAt = s.savedAt as number;
      if (from !== undefined && (updatedAt > from.at || (updatedAt === from.at && conv.id <= from.key))) continue;
      all.push({
        conversationId: conv.id,
        agentId: s.agentId as ConversationSummary['agentId'],
        agentName: s.agentName as string,
        status: s.status as ConversationSummary['status'],
        updatedAt,
        openRequests: conv.open,
      });
    }
    all.sort((a, b) => b.updatedAt - a.updatedAt || (a.conversationId < b.conversationId ? -1 : 1));
    return R.pageOf(
      all,
      limit,
      (c) => c,
      (c) => c.updatedAt,
      (c) => c.conversationId,
    );
  }

  /**
   * Delete a conversation ({@link PersistenceAdapter.deleteConversation}). Refused with
   * `ERR_CONVERSATION_BUSY`, deleting nothing, while a run of it is `running` (every writer of a
   * memory store is in this process). This store is not durable, so a supervisor writes nothing of
   * a message until it suspends or ends: deleted while such a message runs, the conversation stays
   * deleted, and the message's save of it is refused (`ERR_STORE_FENCED`).
   */
  async deleteConversation(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = this.#t.peek(tenant, context.conversationId);
    if (conv === undefined) return false;
    // A message of it runs (its writer is this process): its next save would write it back.
    for (const [runId, run] of conv.more?.runs ?? []) {
      if (run.status === 'running' && this.#unsavedEnds.get(`${tenant}${SEP}${runId}`) !== run.attempt) {
        throw R.busyConversation(context.conversationId, runId, 'here');
      }
    }
    this.#t.drop(conv);
    const key = `${tenant}${SEP}${conv.id}`;
    this.#deletedConversations.add(key);
    if (this.#deletedConversations.size > this.#t.max) {
      this.#deletedConversations.delete(this.#deletedConversations.values().next().value as string);
    }
    for (const { agentId, held } of agentsOf(conv)) {
      if (held === undefined) continue;
      this.#deleted.add(`${key}${SEP}${agentId}`);
      if (this.#deleted.size > this.#t.max) this.#deleted.delete(this.#deleted.values().next().value as string);
    }
    for (const runId of conv.more?.runs?.keys() ?? []) this.#unsavedEnds.delete(`${tenant}${SEP}${runId}`);
    return true;
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('prune: pass { finishedRunsOlderThanMs }');
    const tenant = options.scope === undefined ? undefined : this.#tenant(options.scope);
    if (this.#closed) throw R.closed('MemoryPersistence');
    const ms = options.finishedRunsOlderThanMs;
    if (typeof ms !== 'number' || !(ms >= 0))
      throw new InvalidArgumentError('finishedRunsOlderThanMs must be a number ≥ 0');
    if (options.now !== undefined) R.checkTime(options.now, 'prune({ now })');
    const cutoff = (options.now ?? this.#clock.now()) - ms;
    const result = { runs: 0, toolCalls: 0, requests: 0 };
    for (const conv of tenant === undefined ? this.#t.all() : this.#t.of(tenant)) {
      const more = conv.more;
      if (more === undefined) continue;
      for (const [runId, run] of more.runs ?? []) {
        if (!isTerminalRunStatus(run.status) || run.updatedAt >= cutoff) continue;
        more.runs?.delete(runId);
        this.#t.runIndex.delete(`${conv.tenant}${SEP}${runId}`);
        result.runs++;
        const calls = more.toolCalls?.get(runId);
        if (calls !== undefined) {
          result.toolCalls += calls.size;
          more.toolCalls?.delete(runId);
          this.#t.callIndex.delete(`${conv.tenant}${SEP}${runId}`);
        }
      }
      for (const calls of more.toolCalls?.values() ?? []) {
        for (const [key, call] of calls) {
          if (call.status === 'committed' && (call.committedAt ?? 0) < cutoff) {
            calls.delete(key);
            result.toolCalls++;
          }
        }
      }
      for (const requestId of more.requests ?? []) {
        const stored = this.#t.requests.get(`${conv.tenant}${SEP}${requestId}`);
        if (stored !== undefined && stored.status !== 'open' && (stored.closedAt ?? 0) < cutoff) {
          this.#t.requests.delete(`${conv.tenant}${SEP}${requestId}`);
          more.requests?.delete(requestId);
          result.requests++;
        }
      }
    }
    return result;
  }

  async release(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = this.#t.peek(tenant, context.conversationId);
    if (conv === undefined || conv.open > 0) return false;
    this.#t.drop(conv);
    return true;
  }

  /**
   * The ids of the requests it holds open, of every tenant: what `close()`
   * drops. A supervisor closing this store reports them (`requests.dropped`,
   * or a process warning when nobody listens).
   *
   * @example
   * ```ts
   * const store = new MemoryPersistence()
   * const supervisor = createSupervisor({ persistence: store })
   * // ...
   * if (store.openRequestIds().length > 0) console.warn('close() will drop open questions: answer them first')
   * ```
   */
  openRequestIds(): string[] {
    const ids: string[] = [];
    for (const [key, stored] of this.#t.requests) {
      if (stored.status === 'open') ids.push(key.slice(stored.conv.tenant.length + SEP.length));
    }
    return ids;
  }

  /**
   * Drop everything it holds — open questions too: it lives in this process's
   * memory only. Keep questions across a restart with a durable store
   * (`sqlitePersistence` from `@troupe/sqlite`).
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#t.clear();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** How many conversations are kept (a bound: see `maxConversations`). */
  get size(): number {
    return this.#t.size;
  }
}
