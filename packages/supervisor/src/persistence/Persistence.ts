import type { AgentId, Answer, Message, Request, Usage } from '@troupe/core';
import type { AgentStateEnvelope, ConversationStatus } from './StateEnvelope.js';

/**
 * What a persistence callback learns besides the scope: which agent of which conversation.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const context: PersistenceContext = { agentId: createId('agent'), conversationId: 'c1' }
 * const messages = await new MemoryPersistence().loadMessages({ tenantId: 't1' }, context)
 * ```
 */
export interface PersistenceContext {
  readonly agentId: AgentId;
  readonly conversationId: string;
}

/**
 * Maps a scope to the tenant key every row is stored under. Must be pure and
 * cheap (it runs on every call) and return a non-empty string. Nothing saved
 * under one key can be loaded, listed, answered, deleted or pruned under
 * another. The scope itself is never stored; only this key is.
 *
 * `S` is the scope it reads: what the supervisor's scope schema produces.
 * Declare it on the parameter and the store is typed by it: a supervisor
 * whose schema produces another scope refuses the store at compile time.
 *
 * @example
 * ```ts
 * import { defineScope, type ScopeOf } from '@troupe/core'
 *
 * const TenantScope = defineScope(z.object({ tenantId: z.string(), userId: z.string() }))
 * const tenantKey: TenantKey<ScopeOf<typeof TenantScope>> = (scope) => scope.tenantId
 * const supervisor = createSupervisor({ scope: TenantScope, persistence: new MemoryPersistence({ tenantKey }) })
 * ```
 */
export type TenantKey<S = unknown> = (scope: S) => string;

/**
 * The tenant key used when a store is given no {@link TenantKey}: every scope shares it.
 *
 * @example
 * ```ts
 * PersistenceRules.tenantOf(undefined, { tenantId: 't1' }) === DEFAULT_TENANT_KEY // true: no tenantKey, one shared tenant
 * ```
 */
export const DEFAULT_TENANT_KEY = 'default';

/**
 * Where a RunTree node came from: a parent agent's message, a delegated subagent, a direct spawn.
 *
 * @example
 * ```ts
 * const run = await new MemoryPersistence().getRun({ tenantId: 't1' }, 'run_1')
 * const kind: RunKind | undefined = run?.kind // 'message', 'subagent' or 'spawn'
 * ```
 */
export type RunKind = 'message' | 'subagent' | 'spawn';

/**
 * A run's status. `running` and `suspended` are live; every other status is
 * terminal ({@link isTerminalRunStatus}). `interrupted` is what a run left
 * `running` by a process that died, or by a write of its end that failed,
 * becomes ({@link PersistenceAdapter.markInterrupted}).
 *
 * @example
 * ```ts
 * const run = await new MemoryPersistence().getRun({ tenantId: 't1' }, 'run_1')
 * const status: RunStatus | undefined = run?.status
 * if (status !== undefined && !isTerminalRunStatus(status)) console.log('still live')
 * ```
 */
export type RunStatus =
  | 'running'
  | 'suspended'
  | 'done'
  | 'failed'
  | 'cancelled'
  | 'crashed'
  | 'incomplete'
  | 'interrupted';

/**
 * The terminal run statuses: a run in one of them never changes again and can be pruned.
 *
 * @example
 * ```ts
 * TERMINAL_RUN_STATUSES.has('suspended')   // false: it may still resume
 * TERMINAL_RUN_STATUSES.has('interrupted') // true
 * ```
 */
export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>([
  'done',
  'failed',
  'cancelled',
  'crashed',
  'incomplete',
  'interrupted',
]);

/**
 * True for a terminal status (not `running`, not `suspended`).
 *
 * @example
 * ```ts
 * isTerminalRunStatus('suspended') // false
 * ```
 */
export function isTerminalRunStatus(status: RunStatus): boolean {
  return TERMINAL_RUN_STATUSES.has(status);
}

/**
 * One RunTree node as saved. `attempt` is a fencing token: an upsert whose
 * attempt is lower than the saved one is refused (a stale writer, e.g. a
 * process that resumed the run before another took it over) and changes
 * nothing. `state` and `outcome` are JSON.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const usage = { inputTokens: 120, outputTokens: 30 }
 * const run: RunRecord = {
 *   runId: createId('run'), conversationId: 'c1', agentId: createId('agent'), agentName: 'triage',
 *   kind: 'message', status: 'running', attempt: 1, usage, totalUsage: usage, updatedAt: Date.now(),
 * }
 * ```
 */
export interface RunRecord {
  readonly runId: string;
  /** The conversation whose parent agent the run belongs to (a subagent's too). */
  readonly conversationId: string;
  /** The agent this run runs. */
  readonly agentId: AgentId;
  readonly parentRunId?: string | undefined;
  /** The parent's task call that spawned this run. */
  readonly toolCallId?: string | undefined;
  readonly agentName: string;
  /** The agent module a worker imports to resume it. */
  readonly module?: string | undefined;
  readonly kind: RunKind;
  readonly status: RunStatus;
  /** Fencing token, an integer ≥ 1. */
  readonly attempt: number;
  /** The loop state to resume from (JSON). */
  readonly state?: unknown;
  /** The run's outcome once terminal (JSON). */
  readonly outcome?: unknown;
  readonly usage: Usage;
  /** This run's usage plus its subtree's. */
  readonly totalUsage: Usage;
  readonly updatedAt: number;
}

/**
 * Identifies one execution of one tool call: a retry or a resumed call is a new `attempt`.
 *
 * @example
 * ```ts
 * const key: ToolCallKey = { runId: 'run_1', toolCallId: 'call_1', attempt: 1 }
 * ```
 */
export interface ToolCallKey {
  readonly runId: string;
  readonly toolCallId: string;
  readonly attempt: number;
}

/**
 * A tool call recorded before its side effect ({@link PersistenceAdapter.startToolCalls}).
 *
 * @example
 * ```ts
 * const start: ToolCallStart = { runId: 'run_1', toolCallId: 'call_1', attempt: 1, toolName: 'charge', idempotent: false, startedAt: Date.now() }
 * ```
 */
export interface ToolCallStart extends ToolCallKey {
  readonly toolName: string;
  /** Safe to run again after a crash: only such a call is re-run when it never committed. */
  readonly idempotent: boolean;
  readonly startedAt: number;
}

/**
 * A tool call as saved: `started` until the turn that used its result commits.
 *
 * What `loadToolCalls` returns: calls whose side effect may have happened
 * without their result being saved.
 *
 * @example
 * ```ts
 * const calls: readonly ToolCallRecord[] = await new MemoryPersistence().loadToolCalls({ tenantId: 't1' }, 'run_1')
 * const unsafe = calls.filter((c) => c.status === 'started' && !c.idempotent)
 * ```
 */
export interface ToolCallRecord extends ToolCallStart {
  readonly status: 'started' | 'committed';
  readonly committedAt: number | undefined;
}

/**
 * A request opened for a person, as given to the store.
 *
 * Written by the supervisor when a tool asks; a store you write saves it as given.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const agentId = createId('agent')
 * const opening: RequestOpening = {
 *   requestId: createId('req'), conversationId: 'c1', agentId, runId: createId('run'), runAgentId: agentId,
 *   path: [agentId], request: { id: 'r1', kind: 'input', prompt: 'Which account?' }, localId: 'r1',
 *   toolCallId: createId('call'), approval: false, openedAt: Date.now(),
 * }
 * await new MemoryPersistence().openRequest({ tenantId: 't1' }, opening)
 * ```
 */
export interface RequestOpening {
  /** Host-visible and unique in its tenant: what `answer(requestId, ...)` names. */
  readonly requestId: string;
  readonly conversationId: string;
  /** The conversation's parent agent. */
  readonly agentId: AgentId;
  /** The run that asked, and its agent. */
  readonly runId: string;
  readonly runAgentId: AgentId;
  /** Agent ids from the parent agent down to the one whose tool asked. */
  readonly path: readonly AgentId[];
  readonly request: Request;
  /** The id the tool gave its request (unique only within its run). */
  readonly localId: string;
  readonly toolCallId: string;
  /** True when the request asks to approve a tool call. */
  readonly approval: boolean;
  /**
   * For an approval: the call the handler was asked about (its tool and arguments). A yes
   * pre-approves that call only; a record without it (saved by an older Troupe) pre-approves
   * nothing, and the handler is asked again.
   */
  readonly approvedCall?: { readonly toolName: string; readonly arguments: unknown } | undefined;
  readonly openedAt: number;
}

/**
 * A request's state: `open` until answered (exactly once) or withdrawn.
 *
 * @example
 * ```ts
 * const record = await new MemoryPersistence().getRequest({ tenantId: 't1' }, 'req_1')
 * const status: RequestStatus | undefined = record?.status
 * ```
 */
export type RequestStatus = 'open' | 'answered' | 'withdrawn';

/**
 * A request as saved.
 *
 * @example
 * ```ts
 * const record: RequestRecord | undefined = await new MemoryPersistence().getRequest({ tenantId: 't1' }, 'req_1')
 * if (record?.status === 'answered') console.log(record.answer?.data)
 * ```
 */
export interface RequestRecord extends RequestOpening {
  readonly status: RequestStatus;
  readonly answer: Answer | undefined;
  /** When it was answered or withdrawn. */
  readonly closedAt: number | undefined;
}

/**
 * The result of {@link PersistenceAdapter.answerRequest}: `taken` for the one
 * caller whose compare-and-set moved the request from `open` to `answered`
 * (with the record, answer included); every other caller learns why not.
 *
 * What `supervisor.answer` builds on: only the `taken` caller resumes the run.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const result: AnswerResult = await store.answerRequest({ tenantId: 't1' }, 'req_1', { id: 'req_1', ok: true }, Date.now())
 * if (result.status !== 'taken') console.log(`not resumed: ${result.status}`)
 * ```
 */
export type AnswerResult =
  | { readonly status: 'taken'; readonly record: RequestRecord }
  | { readonly status: 'already-answered' }
  | { readonly status: 'withdrawn' }
  | { readonly status: 'unknown' };

/**
 * The result of {@link PersistenceAdapter.withdrawRequest}.
 *
 * @example
 * ```ts
 * const result: WithdrawResult = await new MemoryPersistence().withdrawRequest({ tenantId: 't1' }, 'req_1', Date.now())
 * if (result.status === 'already-answered') console.log('too late: it was answered')
 * ```
 */
export type WithdrawResult =
  | { readonly status: 'withdrawn' }
  | { readonly status: 'already-answered' }
  | { readonly status: 'already-withdrawn' }
  | { readonly status: 'unknown' };

/**
 * Everything one turn of a conversation saves, committed in ONE transaction
 * by {@link PersistenceAdapter.commit}: all of it is saved or none. Every run
 * and request in it belongs to the conversation named by the context.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const context = { agentId: createId('agent'), conversationId: 'c1' }
 * const batch: TurnBatch = { messages: [{ role: 'user', content: 'Hello' }], at: Date.now() }
 * await new MemoryPersistence().commit({ tenantId: 't1' }, batch, context)
 * ```
 */
export interface TurnBatch {
  /** The conversation agent's new envelope (its `agentId`/`conversationId` match the context). */
  readonly envelope?: AgentStateEnvelope | undefined;
  /** Display messages to append, in order. */
  readonly messages?: readonly Message[] | undefined;
  /** Runs to insert or update (fenced by `attempt`). */
  readonly runs?: readonly RunRecord[] | undefined;
  /** Tool calls whose results this turn's state holds: marked `committed` (each must have been started). */
  readonly committedToolCalls?: readonly ToolCallKey[] | undefined;
  /** Requests opened by this turn. */
  readonly openedRequests?: readonly RequestOpening[] | undefined;
  /** Requests withdrawn by this turn (by `requestId`; an answered one stays answered). */
  readonly withdrawnRequests?: readonly string[] | undefined;
  /** The time the turn is saved at (committed tool calls, withdrawals); defaults to the store's clock. */
  readonly at?: number | undefined;
  /**
   * The revision of the saved envelope this one replaces: the `revision` of
   * what `loadState` returned (0 when it returned nothing), plus one for each
   * envelope committed since. A store that fences refuses the whole batch
   * with `ERR_STORE_FENCED` when the saved revision is another (someone else
   * saved the conversation in between), so a stale copy never overwrites a
   * newer turn. Without it the envelope is saved whatever is there.
   */
  readonly basedOn?: number | undefined;
}

/**
 * A page of a listing; pass `next` as `after` to get the following page (`undefined`: no more).
 *
 * Keep calling with `after: page.next` until `next` is `undefined`.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const all: RequestRecord[] = []
 * for (let page: Page<RequestRecord> | undefined = await store.listRequests({ tenantId: 't1' }); page !== undefined; ) {
 *   all.push(...page.items)
 *   page = page.next === undefined ? undefined : await store.listRequests({ tenantId: 't1' }, { after: page.next })
 * }
 * ```
 */
export interface Page<T> {
  readonly items: readonly T[];
  readonly next: string | undefined;
}

/**
 * Paging of a listing: at most `limit` items (default 100, at most 1,000) after the cursor `after`.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const options: ListOptions = { limit: 50 }
 * const first = await store.listConversations({ tenantId: 't1' }, options)
 * const second = first.next === undefined ? undefined : await store.listConversations({ tenantId: 't1' }, { ...options, after: first.next })
 * ```
 */
export interface ListOptions {
  readonly limit?: number | undefined;
  readonly after?: string | undefined;
}

/**
 * Options of {@link PersistenceAdapter.listRequests}.
 *
 * @example
 * ```ts
 * const options: RequestListOptions = { conversationId: 'c1', limit: 10 }
 * const open = await new MemoryPersistence().listRequests({ tenantId: 't1' }, options)
 * ```
 */
export interface RequestListOptions extends ListOptions {
  /** Only this conversation's requests. */
  readonly conversationId?: string | undefined;
}

/**
 * One conversation in {@link PersistenceAdapter.listConversations}, from its last saved envelope.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const page = await store.listConversations({ tenantId: 't1' }, { limit: 20 })
 * for (const c of page.items satisfies readonly ConversationSummary[]) console.log(c.agentName, c.status, c.openRequests)
 * ```
 */
export interface ConversationSummary {
  readonly conversationId: string;
  readonly agentId: AgentId;
  readonly agentName: string;
  readonly status: ConversationStatus;
  readonly updatedAt: number;
  /** How many requests of the conversation wait for an answer. */
  readonly openRequests: number;
}

/**
 * Retention policy of {@link PersistenceAdapter.prune}.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const options: PruneOptions = { finishedRunsOlderThanMs: 7 * 24 * 3600_000 }
 * const removed = await store.prune(options)
 * ```
 */
export interface PruneOptions {
  /** Terminal runs (and committed tool calls, closed requests) last changed longer ago than this are removed. */
  readonly finishedRunsOlderThanMs: number;
  /** The time the policy is measured from; defaults to the store's clock. */
  readonly now?: number | undefined;
  /** Prune only this scope's tenant; without it, every tenant (a maintenance job). */
  readonly scope?: unknown;
}

/**
 * How many rows {@link PersistenceAdapter.prune} removed.
 *
 * @example
 * ```ts
 * const removed: PruneResult = await new MemoryPersistence().prune({ finishedRunsOlderThanMs: 86_400_000 })
 * console.log(`pruned ${removed.runs} runs, ${removed.toolCalls} tool calls, ${removed.requests} requests`)
 * ```
 */
export interface PruneResult {
  readonly runs: number;
  readonly toolCalls: number;
  readonly requests: number;
}

/**
 * Options of {@link PersistenceAdapter.markInterrupted}.
 *
 * @example
 * ```ts
 * const store = new MemoryPersistence()
 * const options: MarkInterruptedOptions = { scope: { tenantId: 't1' } }
 * const interrupted = await store.markInterrupted(options) // runs left `running` by a dead process
 * ```
 */
export interface MarkInterruptedOptions {
  /** Only this scope's tenant; without it, every tenant (what a daemon does at startup). */
  readonly scope?: unknown;
  /** The time written as the runs' `updatedAt`; defaults to the store's clock. */
  readonly now?: number | undefined;
}

/**
 * Where a supervisor keeps what must outlive a process. Every callback takes
 * the scope first so a store can partition rows by tenant ({@link TenantKey});
 * the scope itself is never stored. Stores save JSON only and copy on the way
 * in and out: a value given to a store can be changed afterwards without
 * changing what was saved.
 *
 * Three implementations pass one contract suite (`runPersistenceContract` from
 * `@troupe/supervisor/testing`, which checks a store of yours too):
 * `MemoryPersistence` (bounded, for tests and scripts), `SqlitePersistence`
 * from `@troupe/sqlite` (the default for daemons) and `PostgresPersistence`
 * from `@troupe/postgres` (several API hosts on one database). Every method is async and rejects (never throws) with
 * a `TroupeError`: `ERR_INVALID_ARGUMENT` for a malformed record,
 * `ERR_NOT_JSON` for a value JSON cannot carry, `ERR_STORE_VERSION` for data
 * written by a newer Troupe, `ERR_STORE_WRITE` when the write failed (nothing
 * of it is visible afterwards), `ERR_STORE_LOCKED` when the file stays busy,
 * `ERR_STORE_UNREACHABLE` when a store's server cannot be reached,
 * `ERR_STORE_FENCED` when a run is fenced by a newer attempt or an envelope
 * by a newer revision (`TurnBatch.basedOn`), `ERR_STORE_CORRUPT` for a saved
 * record that cannot be read back, `ERR_CLOSED` after `close()`.
 *
 * @example
 * ```ts
 * import { createId } from '@troupe/core'
 *
 * const store: PersistenceAdapter = new MemoryPersistence()
 * const scope = { tenantId: 't1' }
 * const ctx: PersistenceContext = { agentId: createId('agent'), conversationId: 'c1' }
 * const call: ToolCallKey = { runId: createId('run'), toolCallId: createId('call'), attempt: 1 }
 * await store.startToolCalls(scope, [{ ...call, toolName: 'charge', idempotent: false, startedAt: Date.now() }], ctx)
 * // ... the side effect ...
 * await store.commit(scope, { committedToolCalls: [call] }, ctx)
 * ```
 */
export interface PersistenceAdapter<S = unknown> {
  /**
   * The hook mapping a scope to its tenant key, when the store has one. Its
   * type carries the scope the store expects (`S`): a supervisor holds a
   * store to its own scope schema through it.
   */
  readonly tenantKey?: TenantKey<S> | undefined;
  /** Save the agent's envelope (a commit holding only it). */
  persistState(scope: unknown, data: AgentStateEnvelope, context: PersistenceContext): Promise<void>;
  /** The agent's last saved envelope, migrated to the current version, or `undefined`. */
  loadState(scope: unknown, context: PersistenceContext): Promise<AgentStateEnvelope | undefined>;
  /** Append a message shown to people (the transcript as displayed). */
  saveMessage(scope: unknown, message: Message, context: PersistenceContext): Promise<void>;
  /** The agent's saved display messages, in the order saved. */
  loadMessages(scope: unknown, context: PersistenceContext): Promise<readonly Message[]>;
  /** Save one turn atomically: see {@link TurnBatch}. */
  commit(scope: unknown, batch: TurnBatch, context: PersistenceContext): Promise<void>;
  /**
   * The conversation's live runs (`running`, `suspended`), oldest first; with
   * `{ interrupted: true }` its `interrupted` runs too (a restore reads what
   * the subagents of an interrupted message had spent before the crash).
   */
  loadRuns(
    scope: unknown,
    context: PersistenceContext,
    options?: { readonly interrupted?: boolean },
  ): Promise<readonly RunRecord[]>;
  /** One run in any status (an interrupted one included), or `undefined`. */
  getRun(scope: unknown, runId: string): Promise<RunRecord | undefined>;
  /**
   * True for a store that survives the process (a file): the supervisor then
   * checkpoints every turn, so a crash loses no committed tool result.
   */
  readonly durable?: boolean | undefined;
  /**
   * Turn runs left `running` by a process that is gone into `interrupted` and
   * return them — and runs whose end this process asked the store to save when
   * the write failed (their writer stopped running them; a later write of the
   * run that succeeds takes that back). Call it once at startup, before runs
   * are resumed; the supervisor also calls it before it restores a
   * conversation whose run the store says is running.
   */
  markInterrupted(options?: MarkInterruptedOptions): Promise<readonly RunRecord[]>;
  /** Record tool calls as `started`, durably, before their side effects run (a small transaction of its own). */
  startToolCalls(scope: unknown, calls: readonly ToolCallStart[], context: PersistenceContext): Promise<void>;
  /** A run's tool calls that started and never committed (their side effects may have happened). */
  loadToolCalls(scope: unknown, runId: string): Promise<readonly ToolCallRecord[]>;
  /** Open a request (a commit holding only it). Its `requestId` must be new in the tenant. */
  openRequest(scope: unknown, request: RequestOpening): Promise<void>;
  /** Compare-and-set `open` → `answered`: exactly one caller gets `taken`, across processes too. */
  answerRequest(scope: unknown, requestId: string, answer: Answer, at: number): Promise<AnswerResult>;
  /** `open` → `withdrawn` (nobody will take an answer to it any more). */
  withdrawRequest(scope: unknown, requestId: string, at: number): Promise<WithdrawResult>;
  /** One request in any status, or `undefined`. */
  getRequest(scope: unknown, requestId: string): Promise<RequestRecord | undefined>;
  /** The tenant's open requests, oldest first. */
  listRequests(scope: unknown, options?: RequestListOptions): Promise<Page<RequestRecord>>;
  /** The tenant's conversations, most recently saved first. */
  listConversations(scope: unknown, options?: ListOptions): Promise<Page<ConversationSummary>>;
  /**
   * Delete a conversation: every agent's state and messages, its runs, tool calls and requests.
   * True if it existed.
   *
   * Refused with `ERR_CONVERSATION_BUSY`, deleting nothing, while a message of it runs (a run of
   * it is `running` under a live writer, in this process or another): its next save would write
   * the conversation back. Cancel the message (`agent.cancel()`, where it runs) or wait for its
   * reply, then delete. A run a dead process left `running`, or one whose end failed to save,
   * holds nothing up. A suspended conversation is deleted with its questions (an answer to one is
   * then unknown). A save based on a state it deleted (a copy held idle, a message that ran
   * through the deletion) is refused with `ERR_STORE_FENCED` and writes nothing back; one started
   * anew under the same id (based on nothing saved) is saved. So is a batch without an envelope,
   * or a `startToolCalls`, of a run's later attempt (> 1: resumed after an answer, a restart) that
   * finds no conversation: the run was live when it was deleted (an answer taken just before the
   * deletion resumes it before it has saved anything). A run's first attempt starts a
   * conversation (a new conversation's first message saves its runs before its envelope).
   *
   * A durable store holds a running message's runs from its start. A store that is not durable
   * (`MemoryPersistence`) is written nothing of a message until it suspends or ends, so it
   * deletes while the message runs, and then refuses the message's save of the deleted state.
   */
  deleteConversation(scope: unknown, context: PersistenceContext): Promise<boolean>;
  /** Apply a retention policy; see {@link PruneOptions}. */
  prune(options: PruneOptions): Promise<PruneResult>;
  /**
   * The agent stopped: a store that keeps conversations in memory may drop
   * this one unless a request of it is open. True if it was dropped (a file
   * store keeps everything: the file is the home, and returns false).
   */
  release(scope: unknown, context: PersistenceContext): Promise<boolean>;
  /** Release the store (close files). Idempotent; every later call rejects with `ERR_CLOSED`. */
  close?(): Promise<void>;
}
