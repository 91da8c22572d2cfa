import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { type Answer, type Clock, InvalidArgumentError, type Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import {
  type AgentStateEnvelope,
  type AnswerResult,
  type ConversationSummary,
  type ListOptions,
  type MarkInterruptedOptions,
  migrateEnvelope,
  type Page,
  type PersistenceAdapter,
  type PersistenceContext,
  type PruneOptions,
  type PruneResult,
  PersistenceRules as R,
  type RequestListOptions,
  type RequestOpening,
  type RequestRecord,
  type RunRecord,
  STATE_ENVELOPE_VERSION,
  type TenantKey,
  type ToolCallRecord,
  type ToolCallStart,
  type TurnBatch,
  type WithdrawResult,
} from '@troupe/supervisor';
import type Database from 'better-sqlite3';
import type { CheckpointerData } from './internal/checkpointer.js';
import { openDatabase } from './internal/openDatabase.js';
import { processAlive, processStart } from './internal/processAlive.js';
import { prepareStatements, type Statements } from './internal/statements.js';
import { storeError } from './internal/storeError.js';
import { appendChunks, type ChunkRow, type ChunkWriters, readChunks, readTranscript } from './internal/transcript.js';
import * as Unsaved from './internal/unsavedEnds.js';
import type { SqlitePersistenceOptions } from './SqlitePersistenceOptions.js';

/** How often the checkpointer thread copies the WAL into the database file. */
const CHECKPOINT_INTERVAL_MS = 50;
/** The writer's own checkpoint threshold, in pages of 4 KiB: a bound, not the routine. */
const WAL_AUTOCHECKPOINT_PAGES = 20_000;

/** What a commit reads of a saved run before it writes over it. */
interface RunHead {
  readonly conversationId: string;
  readonly attempt: number;
  readonly status: string;
  readonly ownerId: string;
}

/**
 * What this store last wrote of one state's messages: the revision it saved and the messages, by
 * identity (the agent loop never changes a message it holds; it adds new ones), whose rows hold
 * them. A turn whose state starts with those same messages adds rows for the rest only.
 */
interface Written {
  readonly revision: number;
  readonly messages: readonly unknown[];
}

/**
 * How many states' written messages a store remembers (the most recently saved): a conversation
 * past them saves its transcript whole once, then adds again. Bounds the memory to references.
 */
const WRITTEN_MAX = 256;

/** The key of one agent's state in {@link SqlitePersistence}'s written messages. */
function stateKey(tenant: string, conversationId: string, agentId: string): string {
  return `${tenant}\u0000${conversationId}\u0000${agentId}`;
}

/** How many leading messages of `now` are `before`'s, by identity: all of `before`'s, or 0. */
function sharedPrefix(before: readonly unknown[], now: readonly unknown[]): number {
  if (now.length < before.length) return 0;
  for (let i = 0; i < before.length; i++) if (before[i] !== now[i]) return 0;
  return before.length;
}

/**
 * A state's message read back from its row: an object with a string `role` (a loop's message of any
 * kind), or `ERR_STORE_CORRUPT` naming where. Frozen when it is of primitives, as the loop seals it,
 * so later saves write it from the cache.
 */
function readStateMessage(json: string, where: string): unknown {
  let message: unknown;
  try {
    message = JSON.parse(json);
  } catch (error) {
    throw R.corrupt(where, error);
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    throw R.corrupt(where, new Error('it is not a message object'));
  }
  if (typeof (message as { role?: unknown }).role !== 'string') {
    throw R.corrupt(where, new Error('a message must have a string role'));
  }
  return sealMessage(message as Message);
}

/** When this process started (see processStart): with its pid, it names this process. */
const OWN_START = processStart(process.pid);

// Stores of this thread that were closed, by owner id (their row stays when the file could not be written).
const closedHere = new Set<string>();

/**
 * The SQLite {@link PersistenceAdapter} (better-sqlite3): one file, WAL,
 * `synchronous` set explicitly, foreign keys on, statements prepared once,
 * one immediate transaction per commit, numbered migrations recorded in a
 * `schema_version` table and applied at open.
 *
 * Several processes may open one file at once, and that is safe: SQLite
 * serialises their writes, an answer is a compare-and-set inside a write
 * transaction (exactly one process takes it), a run's `attempt` fences a
 * stale writer, and `markInterrupted` leaves alone runs owned by another
 * store that is still open (each open store records its process in the
 * file; a run is only marked when its process is gone).
 *
 * Opening refuses a file that is not a Troupe store (`ERR_STORE_CORRUPT`,
 * naming the file), one written by a newer Troupe (`ERR_STORE_VERSION`), and
 * a file it cannot write (`ERR_STORE_WRITE`). A write that fails (full disk,
 * read-only file) rejects with `ERR_STORE_WRITE` and leaves nothing of it.
 *
 * @example
 * ```ts
 * import { createSupervisor } from '@troupe/supervisor'
 *
 * const store = sqlitePersistence({ directory: './data', tenantKey: (scope: { org: string }) => scope.org })
 * const supervisor = createSupervisor({ persistence: store })
 * // ...
 * await supervisor.close() // closes the store too
 * ```
 */
export class SqlitePersistence<S = unknown> implements PersistenceAdapter<S> {
  /** The database file. */
  readonly file: string;
  /** The store's tenant hook (`undefined`: every scope shares one tenant). */
  readonly tenantKey: TenantKey<S> | undefined;
  readonly #db: Database.Database;
  readonly #s: Statements;
  /** The statements that write a transcript's chunks, and a state's messages' chunks. */
  readonly #transcriptChunks: ChunkWriters;
  readonly #stateChunks: ChunkWriters;
  readonly #tenantKey: TenantKey | undefined;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #owner = randomUUID();
  readonly #checkpointer: Worker;
  /**
   * One transaction function, made at open: `db.transaction(fn)` builds a
   * wrapper and defines its four variants on every call (~5 % of a turn).
   */
  readonly #transaction: Database.Transaction<(fn: () => unknown) => unknown>;
  /** The messages this store last wrote of recently saved states (at most {@link WRITTEN_MAX}). */
  readonly #written = new Map<string, Written>();
  #closed = false;

  constructor(options: SqlitePersistenceOptions<S>) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('sqlitePersistence(options): pass { file } or { directory }');
    }
    if (options.tenantKey !== undefined && typeof options.tenantKey !== 'function') {
      throw new InvalidArgumentError('tenantKey must be a function (scope) => string');
    }
    this.tenantKey = options.tenantKey;
    // The rules read a scope as data of any shape (the supervisor hands over what its schema made).
    this.#tenantKey = options.tenantKey as TenantKey | undefined;
    this.#clock = options.clock ?? { now: () => Date.now() };
    const opened = openDatabase(options, WAL_AUTOCHECKPOINT_PAGES);
    this.file = opened.file;
    this.#db = opened.db;
    try {
      this.#s = prepareStatements(this.#db);
      this.#transcriptChunks = { append: this.#s.appendMessages, add: this.#s.addMessages };
      this.#stateChunks = { append: this.#s.appendStateMessages, add: this.#s.addStateMessages };
      this.#transaction = this.#db.transaction((fn: () => unknown) => fn());
      this.#s.addOwner.run(this.#owner, process.pid, processStart(process.pid), Date.now());
    } catch (error) {
      this.#db.close();
      throw storeError(error, this.file, 'opening the store');
    }
    const data: CheckpointerData = {
      file: this.file,
      synchronous: opened.synchronous,
      intervalMs: CHECKPOINT_INTERVAL_MS,
    };
    this.#checkpointer = new Worker(new URL('./internal/checkpointer.js', import.meta.url), { workerData: data });
    this.#checkpointer.on('error', () => {
      // A checkpointer that died leaves the writer's autocheckpoint in charge.
    });
    this.#checkpointer.unref();
  }

  #tenant(scope: unknown): string {
    if (this.#closed) throw R.closed(`the store ${this.file}`);
    return R.tenantOf(this.#tenantKey, scope);
  }

  /** Where a row is, for an error: its table, key and file. */
  #where(table: 'run' | 'request', key: string): string {
    return `the ${table} row ${JSON.stringify(key)} (table ${table}s) in ${this.file}`;
  }

  /** Run `fn` in an immediate write transaction; SQLite's failures become typed errors. */
  #write<T>(operation: string, fn: () => T): T {
    try {
      return this.#transaction.immediate(fn) as T;
    } catch (error) {
      throw storeError(error, this.file, operation);
    }
  }

  /**
   * {@link SqlitePersistence.#write} of a turn. The runs a failed turn ends are no longer run by
   * their writer, though their rows still say `running` (see internal/unsavedEnds); a saved turn's runs'
   * rows say what it says.
   */
  #writeTurn(tenant: string, batch: TurnBatch, fn: () => void): void {
    try {
      this.#write('saving a turn', fn);
    } catch (error) {
      Unsaved.noteUnsaved(this.#owner, tenant, R.endedRuns(batch));
      throw error;
    }
    Unsaved.noteSaved(this.#owner, tenant, batch.runs);
  }

  #read<T>(operation: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw storeError(error, this.file, operation, 'read');
    }
  }

  async persistState(scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { envelope: data }, context);
  }

  async loadState(scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const { conversationId, agentId } = context;
    // The state and its messages' rows from one snapshot (one read transaction): another process's
    // commit between two reads would pair one revision's state with another's rows.
    const read = this.#read('loading a state', () =>
      this.#transaction(() => {
        const row = this.#s.getState.get(tenant, conversationId, agentId) as
          | { json: string; revision: number; writer: string | null }
          | undefined;
        return row === undefined ? undefined : { row, messages: this.#stateMessages(tenant, row.json, context) };
      }),
    ) as
      | { row: { json: string; revision: number; writer: string | null }; messages: ChunkRow[] | undefined }
      | undefined;
    if (read === undefined) return undefined;
    const { row } = read;
    const where = `the saved state of ${agentId} in ${this.file}`;
    const record = R.readRecord(row.json, 'state', where) as { state?: Record<string, unknown> };
    let messages: unknown[] | undefined;
    if (typeof record.state === 'object' && record.state !== null && typeof record.state.messages === 'number') {
      const count = record.state.messages;
      const messageWhere = (n: number) => `message ${n} of the saved state of ${agentId} in ${this.file}`;
      const lines = readChunks(read.messages ?? [], 'the state', messageWhere);
      if (!Number.isSafeInteger(count) || count < 0 || lines.length !== count) {
        throw R.corrupt(
          where,
          new Error(`it holds ${String(count)} messages, but state_messages holds ${lines.length} for it`),
        );
      }
      messages = lines.map((line, i) => readStateMessage(line, messageWhere(i + 1)));
      record.state.messages = messages;
    }
    const envelope = migrateEnvelope(record, where);
    try {
      R.checkEnvelope(envelope, context);
    } catch (error) {
      throw R.corrupt(where, error);
    }
    if (!Number.isSafeInteger(row.revision) || row.revision < 1) {
      throw R.corrupt(where, new Error(`its revision is ${JSON.stringify(row.revision)}, not an integer ≥ 1`));
    }
    // Rows this store wrote: its next save of this state adds to them.
    const key = stateKey(tenant, conversationId, agentId);
    if (messages !== undefined && row.writer === this.#owner && envelope.state.messages === messages) {
      this.#remember(key, { revision: row.revision, messages });
    } else this.#written.delete(key);
    return { ...envelope, revision: row.revision };
  }

  /** The rows of a state's messages, when its JSON says they are apart (a state saved before holds them). */
  #stateMessages(tenant: string, json: string, context: PersistenceContext): ChunkRow[] | undefined {
    // A state saved apart holds `"messages":<n>`; the quick test may say yes for one that is not (then the rows are unused).
    if (!/"messages":\d/.test(json)) return undefined;
    return this.#s.getStateMessages.all(tenant, context.conversationId, context.agentId) as ChunkRow[];
  }

  #remember(key: string, written: Written): void {
    this.#written.delete(key);
    this.#written.set(key, written);
    if (this.#written.size > WRITTEN_MAX) this.#written.delete(this.#written.keys().next().value as string);
  }

  /**
   * The owners whose runs run, each with whether it is of this process: this store, another open
   * store of this process, a store of a live process. Those of processes that are gone are
   * dropped. Call inside a write.
   */
  #liveOwners(): Map<string, boolean> {
    const live = new Map<string, boolean>();
    for (const o of this.#s.owners.all() as { ownerId: string; pid: number; pidStart: string }[]) {
      const here = o.pid === process.pid && o.pidStart === OWN_START;
      // This store's own runs run in this process while it is open (a supervisor asks mid-life
      // too, and supervisors may share a store). Another store of this process: open unless this
      // thread closed it (one of another thread is not known here; its process is this one, alive).
      // A store of an earlier process with this pid (a container's pid 1, restarted) started at
      // another time: that process is gone.
      const alive = o.ownerId === this.#owner || (here ? !closedHere.has(o.ownerId) : processAlive(o.pid, o.pidStart));
      if (alive) live.set(o.ownerId, here);
      else this.#s.dropOwner.run(o.ownerId);
    }
    return live;
  }

  async saveMessage(scope: unknown, message: Message, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { messages: [message] }, context);
  }

  async loadMessages(scope: unknown, context: PersistenceContext): Promise<readonly Message[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const rows = this.#read('loading messages', () =>
      this.#s.getMessages.all(tenant, context.conversationId, context.agentId),
    ) as ChunkRow[];
    return readTranscript(rows, context.agentId, this.file) as Message[];
  }

  async commit(scope: unknown, batch: TurnBatch, context: PersistenceContext): Promise<void> {
    const tenant = this.#tenant(scope);
    R.checkBatch(batch, context);
    const at = batch.at ?? this.#clock.now();
    const conv = context.conversationId;
    const agent = context.agentId;
    const e = batch.envelope;
    const basedOn = batch.basedOn;
    // Encode outside the transaction: the write lock is held for the writes only. A state's
    // messages go to rows of their own; of a state that starts with the messages this store last
    // wrote for it (at the revision this save is based on), only the new ones are encoded.
    const key = stateKey(tenant, conv, agent);
    let list: readonly unknown[] | undefined;
    let from = 0;
    let parts: { shell: string; messages: string[] } | undefined;
    let whole: string | undefined;
    if (e !== undefined) {
      const known = basedOn === undefined ? undefined : this.#written.get(key);
      list = e.state.messages;
      if (known !== undefined && known.revision === basedOn) from = sharedPrefix(known.messages, list);
      parts = R.encodeStateParts(e, 'envelope', from);
      if (parts === undefined) whole = R.encodeWithState(e, 'envelope');
    }
    const messages = (batch.messages ?? []).map((m) => R.encodeMessage(m, 'message'));
    const runs = (batch.runs ?? []).map((run) => ({ run, json: R.encodeWithState(run, `run ${run.runId}`) }));
    const opened = (batch.openedRequests ?? []).map((r) => ({
      r,
      json: R.encode({ ...r, status: 'open' }, `request ${r.requestId}`),
    }));
    const s = this.#s;
    const owner = this.#owner;
    this.#writeTurn(tenant, batch, () => {
      if (e !== undefined) {
        // The conversation's row and its summary in one statement (it must exist before the state's row).
        s.summarizeConversation.run(tenant, conv, e.agentId, e.agentName, e.status, e.savedAt);
        const version = STATE_ENVELOPE_VERSION;
        if (
          parts !== undefined &&
          from > 0 &&
          s.appendState.run(version, parts.shell, tenant, conv, agent, basedOn, owner).changes === 1
        ) {
          // Its chunks hold the `from` messages this store wrote at that revision: the rest go after them.
          appendChunks(this.#stateChunks, tenant, conv, agent, parts.messages);
        } else {
          // The whole state: its rows written again (another writer's, or none yet), or its JSON whole.
          const all = parts !== undefined && from > 0 ? R.encodeStateParts(e, 'envelope', 0) : parts;
          const json = all === undefined ? (whole ?? R.encodeWithState(e, 'envelope')) : all.shell;
          if (basedOn === undefined) s.putState.run(tenant, conv, agent, version, json, owner);
          else if (
            (basedOn === 0
              ? s.insertState.run(tenant, conv, agent, version, json, owner)
              : s.updateState.run(version, json, owner, tenant, conv, agent, basedOn)
            ).changes !== 1
          ) {
            throw R.staleState(agent, basedOn, s.getStateRevision.get(tenant, conv, agent) as number | undefined);
          }
          // Written whole: whatever chunks it had go (none, unless the file was edited, for a first save).
          s.clearStateMessages.run(tenant, conv, agent);
          if (all !== undefined) appendChunks(this.#stateChunks, tenant, conv, agent, all.messages);
          if (all === undefined) parts = undefined; // nothing of it to remember
        }
      } else if (s.touchConversation.run(tenant, conv).changes === 1) {
        // Its conversation is gone, and a run of it was dispatched before: deleted while it was live.
        const resumed = R.resumedRun(batch.runs);
        if (resumed !== undefined) throw R.deletedConversation(conv, resumed);
      }
      if (messages.length > 0) appendChunks(this.#transcriptChunks, tenant, conv, agent, messages);
      for (const { run, json } of runs) {
        if (s.putRun.run(tenant, run.runId, conv, run.status, run.attempt, run.updatedAt, this.#owner, json).changes)
          continue;
        // Refused by the statement's fence: say which.
        const head = s.getRunHead.get(tenant, run.runId) as RunHead;
        if (head.conversationId !== conv) {
          throw new InvalidArgumentError(
            `run ${run.runId} belongs to conversation ${head.conversationId}, not ${conv}`,
          );
        }
        if (run.attempt < head.attempt) throw R.fenced(run.runId, run.attempt, head.attempt);
        // Running at this attempt under another store: that process took the attempt first.
        throw R.takenRun(run.runId, run.attempt);
      }
      for (const key of batch.committedToolCalls ?? []) {
        const status = s.getCallStatus.get(tenant, key.runId, key.toolCallId, key.attempt);
        if (status === undefined) throw R.notStarted(key);
        s.commitCall.run(at, tenant, key.runId, key.toolCallId, key.attempt);
      }
      for (const { r, json } of opened) {
        if (s.getRequest.get(tenant, r.requestId) !== undefined) throw R.duplicateRequest(r.requestId);
        s.openRequest.run(tenant, r.requestId, conv, r.openedAt, json);
      }
      for (const requestId of batch.withdrawnRequests ?? []) {
        const row = s.getRequest.get(tenant, requestId) as { conversationId: string } | undefined;
        if (row?.conversationId === conv) this.#closeRequest(tenant, requestId, 'withdrawn', undefined, at);
      }
    });
    if (e === undefined) return;
    // Saved: the rows now hold these messages, at the revision after basedOn (unknown without one).
    if (parts !== undefined && basedOn !== undefined && list !== undefined) {
      this.#remember(key, { revision: basedOn + 1, messages: list.slice() });
    } else this.#written.delete(key);
  }

  /** Move an open request to `status`; false when it was not open. Call inside a write. */
  #closeRequest(
    tenant: string,
    requestId: string,
    status: 'answered' | 'withdrawn',
    answer: Answer | undefined,
    at: number,
  ) {
    const row = this.#s.getRequest.get(tenant, requestId) as { status: string; json: string } | undefined;
    if (row === undefined || row.status !== 'open') return undefined;
    const saved = R.readRecord(row.json, 'request', this.#where('request', requestId)) as RequestRecord;
    const record: RequestRecord = { ...saved, status, answer, closedAt: at };
    const changed = this.#s.closeRequest.run(status, at, JSON.stringify(record), tenant, requestId).changes;
    return changed === 1 ? record : undefined;
  }

  async loadRuns(
    scope: unknown,
    context: PersistenceContext,
    options: { readonly interrupted?: boolean } = {},
  ): Promise<readonly RunRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const statement = options?.interrupted === true ? this.#s.liveAndInterruptedRuns : this.#s.liveRuns;
    const rows = this.#read('loading runs', () => statement.all(tenant, context.conversationId)) as string[];
    return rows.map(
      (json) =>
        R.readRecord(json, 'run', `a run of conversation ${context.conversationId} in ${this.file}`) as RunRecord,
    );
  }

  async getRun(scope: unknown, runId: string): Promise<RunRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const json = this.#read('loading a run', () => this.#s.getRun.get(tenant, runId)) as string | undefined;
    return json === undefined ? undefined : (R.readRecord(json, 'run', this.#where('run', runId)) as RunRecord);
  }

  /** This store survives the process: the supervisor checkpoints every turn. */
  readonly durable = true;

  /**
   * Mark `interrupted` the runs left `running` by a store whose process is gone (or that this
   * thread closed), and those whose end a store of this thread failed to save: their writer
   * stopped running them, though its store is open. Runs of a store open in a live process are
   * left alone.
   */
  async markInterrupted(options: MarkInterruptedOptions = {}): Promise<readonly RunRecord[]> {
    R.checkMarkInterrupted(options);
    const tenant = options.scope === undefined ? null : this.#tenant(options.scope);
    if (this.#closed) throw R.closed(`the store ${this.file}`);
    const now = options.now ?? this.#clock.now();
    // Runs of this thread's stores that stopped with their end unsaved: marked too (of the tenant asked for).
    const stopped = Unsaved.unsavedOf(tenant);
    const rows = this.#write('marking interrupted runs', () => {
      const live = [...this.#liveOwners().keys()];
      const out = this.#s.interrupt.all({ now, tenant, live: JSON.stringify(live) }) as string[];
      for (const end of stopped) {
        const json = this.#s.interruptRun.get({
          now,
          tenant: end.tenant,
          run: end.runId,
          owner: end.owner,
          attempt: end.attempt,
        });
        if (json !== undefined) out.push(json as string);
      }
      return out;
    });
    // Marked (or no longer running at that attempt: written since, or marked with a dead process's).
    Unsaved.settle(stopped);
    const marked: RunRecord[] = [];
    for (const json of rows) {
      try {
        marked.push(R.readRecord(json, 'run', `an interrupted run in ${this.file}`) as RunRecord);
      } catch {
        // Damaged: marked in its status column, and reported (ERR_STORE_CORRUPT) when its conversation is read.
      }
    }
    return marked;
  }

  async startToolCalls(scope: unknown, calls: readonly ToolCallStart[], context: PersistenceContext): Promise<void> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    if (!Array.isArray(calls))
      throw new InvalidArgumentError('startToolCalls(scope, calls, context): calls must be an array');
    for (const call of calls) R.checkToolCallStart(call);
    const s = this.#s;
    const conv = context.conversationId;
    this.#write('recording started tool calls', () => {
      if (s.touchConversation.run(tenant, conv).changes === 1) {
        const resumed = R.resumedRun(calls);
        if (resumed !== undefined) throw R.deletedConversation(conv, resumed);
      }
      for (const c of calls) {
        const owner = s.getCallConversation.get(tenant, c.runId) as string | undefined;
        if (owner !== undefined && owner !== conv) {
          throw new InvalidArgumentError(`run ${c.runId} belongs to conversation ${owner}, not ${conv}`);
        }
        // Fenced in this transaction: a run saved at a later attempt was taken over by another
        // writer (resumed after an answer, a restart); this attempt's side effects must not start.
        const head = s.getRunHead.get(tenant, c.runId) as RunHead | undefined;
        if (head !== undefined && head.attempt > c.attempt) throw R.fenced(c.runId, c.attempt, head.attempt);
        if (s.getCallStatus.get(tenant, c.runId, c.toolCallId, c.attempt) === 'committed') throw R.alreadyCommitted(c);
        s.startCall.run(tenant, c.runId, c.toolCallId, c.attempt, conv, c.toolName, c.idempotent ? 1 : 0, c.startedAt);
      }
    });
  }

  async loadToolCalls(scope: unknown, runId: string): Promise<readonly ToolCallRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const rows = this.#read('loading tool calls', () => this.#s.openCalls.all(tenant, runId)) as (Omit<
      ToolCallRecord,
      'idempotent' | 'committedAt'
    > & { idempotent: number; committedAt: number | null })[];
    return rows.map((r) => ({ ...r, idempotent: r.idempotent === 1, committedAt: r.committedAt ?? undefined }));
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
    const copy = JSON.parse(R.encode(answer, 'answer')) as Answer;
    return this.#write('answering a request', (): AnswerResult => {
      const row = this.#s.getRequest.get(tenant, requestId) as { status: string } | undefined;
      if (row === undefined) return { status: 'unknown' };
      if (row.status === 'answered') return { status: 'already-answered' };
      if (row.status === 'withdrawn') return { status: 'withdrawn' };
      const record = this.#closeRequest(tenant, requestId, 'answered', copy, at);
      return record === undefined ? { status: 'already-answered' } : { status: 'taken', record };
    });
  }

  async withdrawRequest(scope: unknown, requestId: string, at: number): Promise<WithdrawResult> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    if (typeof at !== 'number' || !Number.isFinite(at)) throw new InvalidArgumentError('at must be a finite time');
    return this.#write('withdrawing a request', (): WithdrawResult => {
      const row = this.#s.getRequest.get(tenant, requestId) as { status: string } | undefined;
      if (row === undefined) return { status: 'unknown' };
      if (row.status === 'answered') return { status: 'already-answered' };
      if (row.status === 'withdrawn') return { status: 'already-withdrawn' };
      this.#closeRequest(tenant, requestId, 'withdrawn', undefined, at);
      return { status: 'withdrawn' };
    });
  }

  async getRequest(scope: unknown, requestId: string): Promise<RequestRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    const row = this.#read('loading a request', () => this.#s.getRequest.get(tenant, requestId)) as
      | { json: string }
      | undefined;
    return row === undefined
      ? undefined
      : (R.readRecord(row.json, 'request', this.#where('request', requestId)) as RequestRecord);
  }

  async listRequests(scope: unknown, options: RequestListOptions = {}): Promise<Page<RequestRecord>> {
    const tenant = this.#tenant(scope);
    const { limit, after } = R.page(options);
    if (options.conversationId !== undefined) R.checkId(options.conversationId, 'listRequests({ conversationId })');
    const from = after === undefined ? undefined : R.parseCursor(after);
    const at = from?.at ?? null;
    const key = from?.key ?? null;
    const conversation = options.conversationId;
    const rows = this.#read('listing requests', () =>
      conversation === undefined
        ? this.#s.listRequests.all({ tenant, at, key, limit: limit + 1 })
        : this.#s.listConversationRequests.all({ tenant, conversation, at, key, limit: limit + 1 }),
    ) as { openedAt: number; requestId: string; json: string }[];
    return R.pageOf(
      rows,
      limit,
      (r) => R.readRecord(r.json, 'request', this.#where('request', r.requestId)) as RequestRecord,
      (r) => r.openedAt,
      (r) => r.requestId,
    );
  }

  async listConversations(scope: unknown, options: ListOptions = {}): Promise<Page<ConversationSummary>> {
    const tenant = this.#tenant(scope);
    const { limit, after } = R.page(options);
    const from = after === undefined ? undefined : R.parseCursor(after);
    const rows = this.#read('listing conversations', () =>
      this.#s.listConversations.all({ tenant, at: from?.at ?? null, key: from?.key ?? null, limit: limit + 1 }),
    ) as ConversationSummary[];
    return R.pageOf(
      rows,
      limit,
      (c) => c,
      (c) => c.updatedAt,
      (c) => c.conversationId,
    );
  }

  /**
   * Delete a conversation and every row of it ({@link PersistenceAdapter.deleteConversation}).
   * Refused with `ERR_CONVERSATION_BUSY`, deleting nothing, while a run of it is `running` under
   * a store that is open in a live process (this one included): cancel that message or wait for
   * its reply, then delete. Checked in the deletion's own write transaction, so no message can
   * start between the check and the deletion (one loaded before is then fenced at its first save).
   */
  async deleteConversation(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = context.conversationId;
    const deleted = this.#write('deleting a conversation', () => {
      // A message of it runs (a run is `running` under a live writer): its next save would write the
      // conversation back. Refused in the same transaction as the deletion, so none starts between.
      const running = this.#s.runningRuns.all(tenant, conv) as { runId: string; ownerId: string; attempt: number }[];
      if (running.length > 0) {
        const live = this.#liveOwners();
        for (const r of running) {
          const here = live.get(r.ownerId);
          if (here === undefined || Unsaved.isUnsaved(r.ownerId, tenant, r.runId, r.attempt)) continue;
          throw R.busyConversation(conv, r.runId, here ? 'here' : 'elsewhere');
        }
      }
      // Foreign keys cascade: states (and their messages' rows), messages, runs, tool calls and requests go with it.
      return this.#s.deleteConversation.run(tenant, conv).changes > 0;
    });
    const prefix = stateKey(tenant, context.conversationId, '');
    for (const key of [...this.#written.keys()]) if (key.startsWith(prefix)) this.#written.delete(key);
    return deleted;
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('prune: pass { finishedRunsOlderThanMs }');
    const tenant = options.scope === undefined ? null : this.#tenant(options.scope);
    if (this.#closed) throw R.closed(`the store ${this.file}`);
    const ms = options.finishedRunsOlderThanMs;
    if (typeof ms !== 'number' || !(ms >= 0))
      throw new InvalidArgumentError('finishedRunsOlderThanMs must be a number ≥ 0');
    if (options.now !== undefined) R.checkTime(options.now, 'prune({ now })');
    const cutoff = (options.now ?? this.#clock.now()) - ms;
    return this.#write('pruning', () => {
      const pruned = this.#s.pruneRuns.all({ cutoff, tenant }) as { tenant: string; runId: string }[];
      let toolCalls = 0;
      for (const run of pruned) toolCalls += this.#s.pruneRunCalls.run(run.tenant, run.runId).changes;
      toolCalls += this.#s.pruneCalls.run({ cutoff, tenant }).changes;
      const requests = this.#s.pruneRequests.run({ cutoff, tenant }).changes;
      return { runs: pruned.length, toolCalls, requests };
    });
  }

  /** The file is the home of every conversation: nothing is dropped (always false). */
  async release(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    this.#written.delete(stateKey(tenant, context.conversationId, context.agentId));
    return false;
  }

  /** Close the file (checkpointing the WAL). Idempotent; later calls reject with `ERR_CLOSED`. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    closedHere.add(this.#owner);
    // Its runs are a closed store's now: markInterrupted marks every one left running.
    Unsaved.forgetOwner(this.#owner);
    const exited = once(this.#checkpointer, 'exit');
    this.#checkpointer.ref(); // hold the loop open until the thread is gone
    this.#checkpointer.postMessage('close');
    await exited;
    try {
      this.#s.dropOwner.run(this.#owner);
    } catch {
      // A read-only or full file keeps the row; a later markInterrupted sees this process gone.
    }
    this.#db.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Open (or create) a SQLite store; see {@link SqlitePersistence}. Throws a
 * typed error at once for a file it cannot use.
 *
 * @example
 * ```ts
 * const store = sqlitePersistence({ file: '/var/lib/app/troupe.sqlite', synchronous: 'FULL' })
 * ```
 */
export function sqlitePersistence<S = unknown>(options: SqlitePersistenceOptions<S>): SqlitePersistence<S> {
  return new SqlitePersistence(options);
}
