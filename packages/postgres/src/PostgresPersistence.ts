import { randomUUID } from 'node:crypto';
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
import pg from 'pg';
import { appendChunks } from './internal/chunks.js';
import { OwnerLease } from './internal/OwnerLease.js';
import { migrate } from './internal/schema.js';
import { MESSAGE_CHUNK_BYTES, type StatementName, type Statements, statementsFor } from './internal/statements.js';
import { describeAddress, isConnectionError, type StoreAddress, storeError } from './internal/storeError.js';
import {
  type PostgresPersistenceOptions,
  type ResolvedPostgresPersistenceOptions,
  resolvePostgresPersistenceOptions,
} from './PostgresPersistenceOptions.js';

/** Runs one named statement on the transaction's client. */
type Query = (name: StatementName, values: unknown[]) => Promise<pg.QueryResult>;

/** What this store last wrote of one state's messages (see the SQLite store: the same cache). */
interface Written {
  readonly revision: number;
  readonly messages: readonly unknown[];
}

const WRITTEN_MAX = 256;

function stateKey(tenant: string, conversationId: string, agentId: string): string {
  return `${tenant}\u0000${conversationId}\u0000${agentId}`;
}

function sharedPrefix(before: readonly unknown[], now: readonly unknown[]): number {
  if (now.length < before.length) return 0;
  for (let i = 0; i < before.length; i++) if (before[i] !== now[i]) return 0;
  return before.length;
}

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

/** A batch of display messages and nothing else. */
function alone(batch: TurnBatch): boolean {
  return (
    batch.envelope === undefined &&
    (batch.runs?.length ?? 0) === 0 &&
    (batch.committedToolCalls?.length ?? 0) === 0 &&
    (batch.openedRequests?.length ?? 0) === 0 &&
    (batch.withdrawnRequests?.length ?? 0) === 0
  );
}

/** A bigint column as pg returns it (a string), as a number. */
function int(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

/** The address of a store from its options, for errors (host, port, database, user; never the password). */
function addressOf(options: ResolvedPostgresPersistenceOptions): StoreAddress {
  const from = (options.pool as { options?: pg.PoolConfig } | undefined)?.options ?? {};
  let parsed: {
    host?: string | null | undefined;
    port?: string | number | null | undefined;
    database?: string | null | undefined;
    user?: string | undefined;
  } = from;
  const connectionString = options.connectionString ?? from.connectionString;
  if (connectionString !== undefined) {
    try {
      const url = new URL(connectionString);
      parsed = {
        host: decodeURIComponent(url.hostname) || 'localhost',
        port: url.port === '' ? 5432 : Number(url.port),
        database: decodeURIComponent(url.pathname.slice(1)) || undefined,
        user: decodeURIComponent(url.username) || undefined,
      } as typeof parsed;
    } catch {
      parsed = {};
    }
  }
  const user = parsed.user ?? process.env.PGUSER ?? process.env.USER ?? 'postgres';
  return {
    host: parsed.host ?? process.env.PGHOST ?? 'localhost',
    port: parsed.port === undefined || parsed.port === null ? undefined : Number(parsed.port),
    database: parsed.database ?? process.env.PGDATABASE ?? user,
    user,
    schema: options.schema,
  };
}

/**
 * The PostgreSQL {@link PersistenceAdapter} (`pg` 8): the store of several API hosts on one
 * database. The same logical schema as `@troupe/sqlite` at the same version, the same contract
 * (one suite, `runPersistenceContract` from `@troupe/supervisor/testing`, runs against both), the
 * same bytes: JSON as `text`, ids ordered by code point (`COLLATE "C"`), times as the same numbers.
 *
 * Hosts share it safely: every write of a conversation locks the conversation's row first, so
 * its writers take turns across hosts and each re-reads what the last one committed; an answer is
 * a compare-and-set on the request's locked row (one host takes it); a run's `attempt` fences a
 * stale writer, tool-call starts included. Whether another host still runs a conversation is
 * judged by a lease on the database clock (`leaseMs`): once the host that ran it has died and its
 * lease has run out, another host's `startAgent` or `answer` restores the conversation
 * (`interrupted`, or suspended and answered once).
 *
 * Open it with {@link postgresPersistence} (migrates under an advisory lock; refuses a schema of
 * another application or of a newer Troupe, touching nothing). Errors: `ERR_STORE_UNREACHABLE` when
 * the server cannot be reached, refuses the login or goes away (naming host and database, never the
 * password), `ERR_STORE_WRITE` when the role may not write (naming it), and the contract's others.
 *
 * @example
 * ```ts
 * import { createSupervisor } from '@troupe/supervisor'
 *
 * const store = await postgresPersistence({ connectionString: process.env.DATABASE_URL ?? 'postgres://localhost/app' })
 * const supervisor = createSupervisor({ persistence: store })
 * // ...
 * await supervisor.close() // closes the store too
 * ```
 */
export class PostgresPersistence<S = unknown> implements PersistenceAdapter<S> {
  /** Where the store is: host, port, database, user and schema (never the password). */
  readonly address: StoreAddress;
  /** The store's tenant hook (`undefined`: every scope shares one tenant). */
  readonly tenantKey: TenantKey<S> | undefined;
  readonly #pool: pg.Pool;
  readonly #ownPool: boolean;
  readonly #sql: Statements;
  readonly #names: Record<StatementName, string>;
  readonly #tenantKey: TenantKey | undefined;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #lease: OwnerLease;
  readonly #owner: string;
  readonly #written = new Map<string, Written>();
  /** Runs whose end this store was asked to save and could not: their rows still say running. */
  readonly #unsaved = new Map<string, { tenant: string; runId: string; attempt: number }>();
  #closed = false;

  /** Use {@link postgresPersistence}: it opens the store (migrations, the owner's lease). */
  private constructor(options: ResolvedPostgresPersistenceOptions, pool: pg.Pool, ownPool: boolean) {
    this.address = addressOf(options);
    this.tenantKey = options.tenantKey as TenantKey<S> | undefined;
    this.#pool = pool;
    this.#ownPool = ownPool;
    this.#sql = statementsFor(options.schema);
    const names = {} as Record<StatementName, string>;
    for (const key of Object.keys(this.#sql) as StatementName[]) names[key] = `troupe:${options.schema}:${key}`;
    this.#names = names;
    this.#tenantKey = options.tenantKey;
    this.#clock = options.clock;
    this.#owner = randomUUID();
    this.#lease = new OwnerLease(pool, this.#sql, this.#owner, options.leaseMs);
  }

  /** Open a store: see {@link postgresPersistence}. */
  static async open<S = unknown>(options: PostgresPersistenceOptions<S>): Promise<PostgresPersistence<S>> {
    const resolved = resolvePostgresPersistenceOptions(options);
    const ownPool = resolved.pool === undefined;
    const pool =
      resolved.pool ??
      new pg.Pool({
        connectionString: resolved.connectionString,
        max: resolved.maxConnections,
        connectionTimeoutMillis: 10_000,
        // Connections stay open while the store is (no idle timer set and cleared on every
        // statement), and hold no process open while idle.
        idleTimeoutMillis: 0,
        allowExitOnIdle: true,
      });
    // An idle client whose server went away emits 'error' on the pool; without a listener it would
    // be thrown. The pool drops that client; the next call gets a new connection.
    if (ownPool) pool.on('error', () => {});
    const store = new PostgresPersistence<S>(resolved, pool, ownPool);
    try {
      const client = await pool.connect();
      try {
        await migrate(client, store.address);
      } finally {
        client.release();
      }
      await store.#lease.register();
    } catch (error) {
      await store.#lease.release().catch(() => {});
      if (ownPool) await pool.end().catch(() => {});
      throw storeError(error, store.address, 'opening the store');
    }
    return store;
  }

  #tenant(scope: unknown): string {
    if (this.#closed) throw R.closed(`the store on ${describeAddress(this.address)}`);
    return R.tenantOf(this.#tenantKey, scope);
  }

  #where(table: 'run' | 'request', key: string): string {
    return `the ${table} row ${JSON.stringify(key)} (table ${table}s) in ${describeAddress(this.address)}`;
  }

  #query(client: pg.ClientBase | pg.Pool): Query {
    return (name, values) => client.query({ name: this.#names[name], text: this.#sql[name], values });
  }

  /** One statement outside a transaction (a read, or a write that is one statement). */
  async #read<T>(operation: string, fn: (q: Query) => Promise<T>, kind: 'read' | 'write' = 'read'): Promise<T> {
    try {
      return await fn(this.#query(this.#pool));
    } catch (error) {
      throw storeError(error, this.address, operation, kind);
    }
  }

  /** `fn` in one READ COMMITTED transaction on one client; pg's failures become typed errors. */
  async #transaction<T>(operation: string, fn: (q: Query) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw storeError(error, this.address, operation);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const out = await fn(this.#query(client));
      await client.query('COMMIT');
      return out;
    } catch (error) {
      if (isConnectionError(error)) broken = error as Error;
      else {
        try {
          await client.query('ROLLBACK');
        } catch (rollback) {
          broken = rollback as Error;
        }
      }
      throw storeError(error, this.address, operation);
    } finally {
      client.release(broken);
    }
  }

  /**
   * Lock the conversation's row for this transaction, creating it if missing: every writer of a
   * conversation takes this lock first, so writers of one conversation take turns (across hosts).
   * True when the row was new (its conversation did not exist).
   */
  async #lockConversation(q: Query, tenant: string, conv: string): Promise<boolean> {
    return (await q('touchConversation', [tenant, conv])).rowCount === 1;
  }

  async persistState(scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { envelope: data }, context);
  }

  async loadState(scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const { conversationId, agentId } = context;
    const result = await this.#read('loading a state', (q) => q('getState', [tenant, conversationId, agentId]));
    const row = result.rows[0] as
      | { json: string; revision: string; writer: string | null; chunks: string[]; counts: string[]; texts: string[] }
      | undefined;
    if (row === undefined) return undefined;
    const where = `the saved state of ${agentId} in ${describeAddress(this.address)}`;
    const record = R.readRecord(row.json, 'state', where) as { state?: Record<string, unknown> };
    let messages: unknown[] | undefined;
    if (typeof record.state === 'object' && record.state !== null && typeof record.state.messages === 'number') {
      const count = record.state.messages;
      const messageWhere = (n: number) =>
        `message ${n} of the saved state of ${agentId} in ${describeAddress(this.address)}`;
      const chunkRows = row.chunks.map((chunk, i) => ({
        chunk: int(chunk),
        count: int(row.counts[i]),
        json: row.texts[i],
      }));
      const lines = R.readChunks(chunkRows, 'the state', messageWhere);
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
    const revision = int(row.revision);
    if (!Number.isSafeInteger(revision) || revision < 1) {
      throw R.corrupt(where, new Error(`its revision is ${JSON.stringify(row.revision)}, not an integer ≥ 1`));
    }
    const key = stateKey(tenant, conversationId, agentId);
    if (messages !== undefined && row.writer === this.#owner && envelope.state.messages === messages) {
      this.#remember(key, { revision, messages });
    } else this.#written.delete(key);
    return { ...envelope, revision };
  }

  #remember(key: string, written: Written): void {
    this.#written.delete(key);
    this.#written.set(key, written);
    if (this.#written.size > WRITTEN_MAX) this.#written.delete(this.#written.keys().next().value as string);
  }

  async saveMessage(scope: unknown, message: Message, context: PersistenceContext): Promise<void> {
    return this.commit(scope, { messages: [message] }, context);
  }

  async loadMessages(scope: unknown, context: PersistenceContext): Promise<readonly Message[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const result = await this.#read('loading messages', (q) =>
      q('getMessages', [tenant, context.conversationId, context.agentId]),
    );
    const rows = result.rows.map((r: { chunk: string; count: string; json: unknown }) => ({
      chunk: int(r.chunk),
      count: int(r.count),
      json: r.json,
    }));
    const where = (n: number) => `message ${n} of ${context.agentId} in ${describeAddress(this.address)}`;
    return R.readChunks(rows, 'the transcript', where).map(
      (line, i) => R.readRecord(line, 'message', where(i + 1)) as Message,
    );
  }

  async commit(scope: unknown, batch: TurnBatch, context: PersistenceContext): Promise<void> {
    const tenant = this.#tenant(scope);
    R.checkBatch(batch, context);
    const at = batch.at ?? this.#clock.now();
    const conv = context.conversationId;
    const agent = context.agentId;
    const e = batch.envelope;
    const basedOn = batch.basedOn;
    // Encoded before the transaction: its locks are held for the writes only.
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
    const owner = this.#owner;
    if (alone(batch) && messages.length > 0) {
      // Display messages alone (saveMessage), fitting one chunk: one statement, no transaction around it.
      const text = `${messages.join('\n')}\n`;
      if (Buffer.byteLength(text) <= MESSAGE_CHUNK_BYTES) {
        await this.#read(
          'saving a message',
          (q) => q('appendMessagesAlone', [tenant, conv, agent, text, messages.length]),
          'write',
        );
        return;
      }
    }
    try {
      await this.#transaction('saving a turn', async (q) => {
        const rows = async (name: StatementName, values: unknown[]) => (await q(name, values)).rowCount ?? 0;
        if (e !== undefined) {
          // The conversation's row and its summary in one statement, which also locks it.
          await q('summarizeConversation', [tenant, conv, e.agentId, e.agentName, e.status, e.savedAt]);
          const version = STATE_ENVELOPE_VERSION;
          if (
            parts !== undefined &&
            from > 0 &&
            (await rows('appendState', [version, parts.shell, tenant, conv, agent, basedOn, owner])) === 1
          ) {
            await appendChunks(rows, 'state', tenant, conv, agent, parts.messages);
          } else {
            const all = parts !== undefined && from > 0 ? R.encodeStateParts(e, 'envelope', 0) : parts;
            const json = all === undefined ? (whole ?? R.encodeWithState(e, 'envelope')) : all.shell;
            if (basedOn === undefined) await q('putState', [tenant, conv, agent, version, json, owner]);
            else if (
              (basedOn === 0
                ? await rows('insertState', [tenant, conv, agent, version, json, owner])
                : await rows('updateState', [version, json, owner, tenant, conv, agent, basedOn])) !== 1
            ) {
              const saved = (await q('getStateRevision', [tenant, conv, agent])).rows[0] as
                | { revision: string }
                | undefined;
              throw R.staleState(agent, basedOn, saved === undefined ? undefined : int(saved.revision));
            }
            await q('clearStateMessages', [tenant, conv, agent]);
            if (all !== undefined) await appendChunks(rows, 'state', tenant, conv, agent, all.messages);
            if (all === undefined) parts = undefined;
          }
        } else if (await this.#lockConversation(q, tenant, conv)) {
          const resumed = R.resumedRun(batch.runs);
          if (resumed !== undefined) throw R.deletedConversation(conv, resumed);
        }
        if (messages.length > 0) await appendChunks(rows, 'transcript', tenant, conv, agent, messages);
        for (const { run, json } of runs) {
          const values = [tenant, run.runId, conv, run.status, run.attempt, run.updatedAt, owner, json];
          if ((await rows('putRun', values)) === 1) continue;
          const head = (await q('getRunHead', [tenant, run.runId])).rows[0] as {
            conversationId: string;
            attempt: string;
          };
          if (head.conversationId !== conv) {
            throw new InvalidArgumentError(
              `run ${run.runId} belongs to conversation ${head.conversationId}, not ${conv}`,
            );
          }
          if (run.attempt < int(head.attempt)) throw R.fenced(run.runId, run.attempt, int(head.attempt));
          throw R.takenRun(run.runId, run.attempt);
        }
        for (const k of batch.committedToolCalls ?? []) {
          const status = (await q('getCallStatus', [tenant, k.runId, k.toolCallId, k.attempt])).rows[0];
          if (status === undefined) throw R.notStarted(k);
          await q('commitCall', [at, tenant, k.runId, k.toolCallId, k.attempt]);
        }
        for (const { r, json } of opened) {
          if ((await q('getRequest', [tenant, r.requestId])).rowCount !== 0) throw R.duplicateRequest(r.requestId);
          await q('openRequest', [tenant, r.requestId, conv, r.openedAt, json]);
        }
        for (const requestId of batch.withdrawnRequests ?? []) {
          const row = (await q('lockRequest', [tenant, requestId])).rows[0] as
            | { conversationId: string; status: string; json: string }
            | undefined;
          if (row?.conversationId === conv)
            await this.#closeRequest(q, tenant, requestId, row, 'withdrawn', undefined, at);
        }
      });
    } catch (error) {
      for (const run of R.endedRuns(batch)) {
        this.#unsaved.set(stateKey(tenant, run.runId, ''), { tenant, runId: run.runId, attempt: run.attempt });
      }
      throw error;
    }
    if (this.#unsaved.size > 0)
      for (const run of batch.runs ?? []) this.#unsaved.delete(stateKey(tenant, run.runId, ''));
    if (e === undefined) return;
    if (parts !== undefined && basedOn !== undefined && list !== undefined) {
      this.#remember(key, { revision: basedOn + 1, messages: list.slice() });
    } else this.#written.delete(key);
  }

  /** Move a request (its row locked by the caller) to `status`; `undefined` when it was not open. */
  async #closeRequest(
    q: Query,
    tenant: string,
    requestId: string,
    row: { status: string; json: string },
    status: 'answered' | 'withdrawn',
    answer: Answer | undefined,
    at: number,
  ): Promise<RequestRecord | undefined> {
    if (row.status !== 'open') return undefined;
    const saved = R.readRecord(row.json, 'request', this.#where('request', requestId)) as RequestRecord;
    const record: RequestRecord = { ...saved, status, answer, closedAt: at };
    const changed = (await q('closeRequest', [status, at, JSON.stringify(record), tenant, requestId])).rowCount;
    return changed === 1 ? record : undefined;
  }

  async loadRuns(
    scope: unknown,
    context: PersistenceContext,
    options: { readonly interrupted?: boolean } = {},
  ): Promise<readonly RunRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const name = options?.interrupted === true ? 'liveAndInterruptedRuns' : 'liveRuns';
    const result = await this.#read('loading runs', (q) => q(name, [tenant, context.conversationId]));
    const where = `a run of conversation ${context.conversationId} in ${describeAddress(this.address)}`;
    return result.rows.map((r: { json: string }) => R.readRecord(r.json, 'run', where) as RunRecord);
  }

  async getRun(scope: unknown, runId: string): Promise<RunRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const row = (await this.#read('loading a run', (q) => q('getRun', [tenant, runId]))).rows[0] as
      | { json: string }
      | undefined;
    return row === undefined ? undefined : (R.readRecord(row.json, 'run', this.#where('run', runId)) as RunRecord);
  }

  /** This store survives the process: the supervisor checkpoints every turn. */
  readonly durable = true;

  /**
   * Mark `interrupted` the runs left `running` by an owner whose lease has run out (a host that
   * died, or closed its store), and those whose end this store failed to save. Runs of an owner
   * whose lease is current — this store's, another live host's — are left alone.
   */
  async markInterrupted(options: MarkInterruptedOptions = {}): Promise<readonly RunRecord[]> {
    R.checkMarkInterrupted(options);
    const tenant = options.scope === undefined ? null : this.#tenant(options.scope);
    if (this.#closed) throw R.closed(`the store on ${describeAddress(this.address)}`);
    const now = options.now ?? this.#clock.now();
    const stopped = [...this.#unsaved.entries()].filter(([, end]) => tenant === null || end.tenant === tenant);
    const rows = await this.#transaction('marking interrupted runs', async (q) => {
      await q('dropExpiredOwners', []);
      const found = (await q('orphanedRuns', [tenant, this.#owner])).rows as {
        tenant: string;
        runId: string;
        json: string;
      }[];
      for (const [, end] of stopped) {
        const row = (await q('unsavedRun', [end.tenant, end.runId, this.#owner, end.attempt])).rows[0];
        if (row !== undefined) found.push(row as { tenant: string; runId: string; json: string });
      }
      if (found.length === 0) return found;
      const texts = found.map((r) => {
        try {
          const record = JSON.parse(r.json) as Record<string, unknown>;
          if (typeof record !== 'object' || record === null) return r.json;
          // Status and time replaced where they are (key order kept, as SQLite's json_set does).
          record.status = 'interrupted';
          record.updatedAt = now;
          return JSON.stringify(record);
        } catch {
          return r.json; // damaged: marked in its status column, reported when its conversation is read
        }
      });
      await q('interrupt', [now, found.map((r) => r.tenant), found.map((r) => r.runId), texts]);
      return found.map((r, i) => ({ ...r, json: texts[i] as string }));
    });
    for (const [k, end] of stopped) if (this.#unsaved.get(k) === end) this.#unsaved.delete(k);
    const marked: RunRecord[] = [];
    for (const r of rows) {
      try {
        marked.push(R.readRecord(r.json, 'run', `an interrupted run in ${describeAddress(this.address)}`) as RunRecord);
      } catch {
        // Damaged: reported (ERR_STORE_CORRUPT) when its conversation is read.
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
    const conv = context.conversationId;
    await this.#transaction('recording started tool calls', async (q) => {
      if (await this.#lockConversation(q, tenant, conv)) {
        const resumed = R.resumedRun(calls);
        if (resumed !== undefined) throw R.deletedConversation(conv, resumed);
      }
      for (const c of calls) {
        // Fenced in this transaction: a run saved at a later attempt was taken over (the
        // conversation's lock keeps its attempt from moving until this transaction ends).
        const head = (await q('getRunHead', [tenant, c.runId])).rows[0] as
          | { conversationId: string; attempt: string }
          | undefined;
        if (head !== undefined && head.conversationId !== conv) {
          throw new InvalidArgumentError(`run ${c.runId} belongs to conversation ${head.conversationId}, not ${conv}`);
        }
        if (head !== undefined && int(head.attempt) > c.attempt) throw R.fenced(c.runId, c.attempt, int(head.attempt));
        const owner = (await q('getCallConversation', [tenant, c.runId])).rows[0] as
          | { conversation_id: string }
          | undefined;
        if (owner !== undefined && owner.conversation_id !== conv) {
          throw new InvalidArgumentError(
            `run ${c.runId} belongs to conversation ${owner.conversation_id}, not ${conv}`,
          );
        }
        const status = (await q('getCallStatus', [tenant, c.runId, c.toolCallId, c.attempt])).rows[0] as
          | { status: string }
          | undefined;
        if (status?.status === 'committed') throw R.alreadyCommitted(c);
        await q('startCall', [
          tenant,
          c.runId,
          c.toolCallId,
          c.attempt,
          conv,
          c.toolName,
          c.idempotent ? 1 : 0,
          c.startedAt,
        ]);
      }
    });
  }

  async loadToolCalls(scope: unknown, runId: string): Promise<readonly ToolCallRecord[]> {
    const tenant = this.#tenant(scope);
    R.checkId(runId, 'runId');
    const result = await this.#read('loading tool calls', (q) => q('openCalls', [tenant, runId]));
    return result.rows.map(
      (r: {
        runId: string;
        toolCallId: string;
        attempt: string;
        toolName: string;
        idempotent: number;
        startedAt: number;
        status: 'started' | 'committed';
        committedAt: number | null;
      }) => ({
        runId: r.runId,
        toolCallId: r.toolCallId,
        attempt: int(r.attempt),
        toolName: r.toolName,
        idempotent: r.idempotent === 1,
        startedAt: r.startedAt,
        status: r.status,
        committedAt: r.committedAt ?? undefined,
      }),
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
    const copy = JSON.parse(R.encode(answer, 'answer')) as Answer;
    // Compare-and-set on the request's locked row: a second answerer waits for the first to
    // commit, then reads the row it left (READ COMMITTED re-reads a locked row's latest version).
    return this.#transaction('answering a request', async (q): Promise<AnswerResult> => {
      const row = (await q('lockRequest', [tenant, requestId])).rows[0] as { status: string; json: string } | undefined;
      if (row === undefined) return { status: 'unknown' };
      if (row.status === 'answered') return { status: 'already-answered' };
      if (row.status === 'withdrawn') return { status: 'withdrawn' };
      const record = await this.#closeRequest(q, tenant, requestId, row, 'answered', copy, at);
      return record === undefined ? { status: 'already-answered' } : { status: 'taken', record };
    });
  }

  async withdrawRequest(scope: unknown, requestId: string, at: number): Promise<WithdrawResult> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    if (typeof at !== 'number' || !Number.isFinite(at)) throw new InvalidArgumentError('at must be a finite time');
    return this.#transaction('withdrawing a request', async (q): Promise<WithdrawResult> => {
      const row = (await q('lockRequest', [tenant, requestId])).rows[0] as { status: string; json: string } | undefined;
      if (row === undefined) return { status: 'unknown' };
      if (row.status === 'answered') return { status: 'already-answered' };
      if (row.status === 'withdrawn') return { status: 'already-withdrawn' };
      await this.#closeRequest(q, tenant, requestId, row, 'withdrawn', undefined, at);
      return { status: 'withdrawn' };
    });
  }

  async getRequest(scope: unknown, requestId: string): Promise<RequestRecord | undefined> {
    const tenant = this.#tenant(scope);
    R.checkId(requestId, 'requestId');
    const row = (await this.#read('loading a request', (q) => q('getRequest', [tenant, requestId]))).rows[0] as
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
    const values: unknown[] = [tenant, from?.at ?? null, from?.key ?? null, limit + 1];
    const conversation = options.conversationId;
    const result = await this.#read('listing requests', (q) =>
      conversation === undefined ? q('listRequests', values) : q('listConversationRequests', [...values, conversation]),
    );
    const rows = result.rows as { openedAt: number; requestId: string; json: string }[];
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
    const result = await this.#read('listing conversations', (q) =>
      q('listConversations', [tenant, from?.at ?? null, from?.key ?? null, limit + 1]),
    );
    const rows = result.rows as ConversationSummary[];
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
   * Refused with `ERR_CONVERSATION_BUSY`, deleting nothing, while a run of it is `running` under an
   * owner whose lease is current (this store, or another live host). Checked holding the
   * conversation's lock, so no message can start between the check and the deletion.
   */
  async deleteConversation(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    const conv = context.conversationId;
    const deleted = await this.#transaction('deleting a conversation', async (q) => {
      if ((await q('lockConversation', [tenant, conv])).rowCount === 0) return false;
      const running = (await q('runningRuns', [tenant, conv, this.#owner])).rows as {
        runId: string;
        ownerId: string;
        attempt: string;
        live: boolean;
      }[];
      for (const r of running) {
        if (!r.live) continue;
        const unsaved = this.#unsaved.get(stateKey(tenant, r.runId, ''));
        if (r.ownerId === this.#owner && unsaved?.attempt === int(r.attempt)) continue;
        throw R.busyConversation(conv, r.runId, r.ownerId === this.#owner ? 'here' : 'elsewhere');
      }
      return ((await q('deleteConversation', [tenant, conv])).rowCount ?? 0) > 0;
    });
    const prefix = stateKey(tenant, conv, '');
    for (const key of [...this.#written.keys()]) if (key.startsWith(prefix)) this.#written.delete(key);
    return deleted;
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('prune: pass { finishedRunsOlderThanMs }');
    const tenant = options.scope === undefined ? null : this.#tenant(options.scope);
    if (this.#closed) throw R.closed(`the store on ${describeAddress(this.address)}`);
    const ms = options.finishedRunsOlderThanMs;
    if (typeof ms !== 'number' || !(ms >= 0))
      throw new InvalidArgumentError('finishedRunsOlderThanMs must be a number ≥ 0');
    if (options.now !== undefined) R.checkTime(options.now, 'prune({ now })');
    const cutoff = (options.now ?? this.#clock.now()) - ms;
    return this.#transaction('pruning', async (q) => {
      const pruned = (await q('pruneRuns', [cutoff, tenant])).rows as { tenant: string; runId: string }[];
      let toolCalls = 0;
      for (const run of pruned) toolCalls += (await q('pruneRunCalls', [run.tenant, run.runId])).rowCount ?? 0;
      toolCalls += (await q('pruneCalls', [cutoff, tenant])).rowCount ?? 0;
      const requests = (await q('pruneRequests', [cutoff, tenant])).rowCount ?? 0;
      return { runs: pruned.length, toolCalls, requests };
    });
  }

  /** The database is the home of every conversation: nothing is dropped (always false). */
  async release(scope: unknown, context: PersistenceContext): Promise<boolean> {
    const tenant = this.#tenant(scope);
    R.checkContext(context);
    this.#written.delete(stateKey(tenant, context.conversationId, context.agentId));
    return false;
  }

  /**
   * Drop this store's lease (its runs left running are then another host's to interrupt) and end
   * the pool it made (a pool you passed is left open). Idempotent; later calls reject with
   * `ERR_CLOSED`.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#lease.release();
    if (this.#ownPool) await this.#pool.end().catch(() => {});
  }

  async [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Open a PostgreSQL store ({@link PostgresPersistence}): connect, migrate under an advisory lock,
 * register this store's lease. Rejects with a typed error naming the server and database: the
 * server unreachable or the login refused (`ERR_STORE_UNREACHABLE`), a schema of another
 * application (`ERR_STORE_CORRUPT`) or of a newer Troupe (`ERR_STORE_VERSION`), untouched; a role
 * that may not write (`ERR_STORE_WRITE`).
 *
 * @example
 * ```ts
 * const store = await postgresPersistence({
 *   connectionString: 'postgres://troupe@127.0.0.1:5432/app',
 *   tenantKey: (scope: { orgId: string }) => scope.orgId,
 * })
 * ```
 */
export function postgresPersistence<S = unknown>(
  options: PostgresPersistenceOptions<S>,
): Promise<PostgresPersistence<S>> {
  return PostgresPersistence.open(options);
}
