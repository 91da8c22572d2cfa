import type { AgentId, Answer, Message, Request, Usage } from '@troupe/core';
import type { AgentStateEnvelope, ConversationStatus } from './StateEnvelope.js';

/** What a persistence callback learns besides the scope: which agent of which conversation. */
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
 * @example
 * ```ts
 * const tenantKey: TenantKey = (scope) => (scope as { tenantId: string }).tenantId
 * ```
 */
export type TenantKey = (scope: unknown) => string;

/** The tenant key used when a store is given no {@link TenantKey}: every scope shares it. */
export const DEFAULT_TENANT_KEY = 'default';

/** Where a RunTree node came from: a parent agent's message, a delegated subagent, a direct spawn. */
export type RunKind = 'message' | 'subagent' | 'spawn';

/**
 * A run's status. `running` and `suspended` are live; every other status is
 * terminal ({@link isTerminalRunStatus}). `interrupted` is what a run left
 * `running` by a process that died becomes ({@link PersistenceAdapter.markInterrupted}).
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

/** The terminal run statuses: a run in one of them never changes again and can be pruned. */
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
 * const run: RunRecord = {
 *   runId, conversationId, agentId, agentName: 'triage', kind: 'message', status: 'suspended',
 *   attempt: 1, state: loopState, usage, totalUsage: usage, updatedAt: clock.now(),
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

/** Identifies one execution of one tool call: a retry or a resumed call is a new `attempt`. */
export interface ToolCallKey {
  readonly runId: string;
  readonly toolCallId: string;
  readonly attempt: number;
}

/** A tool call recorded before its side effect ({@link PersistenceAdapter.startToolCalls}). */
export interface ToolCallStart extends ToolCallKey {
  readonly toolName: string;
  /** Safe to run again after a crash: only such a call is re-run when it never committed. */
  readonly idempotent: boolean;
  readonly startedAt: number;
}

/** A tool call as saved: `started` until the turn that used its result commits. */
export interface ToolCallRecord extends ToolCallStart {
  readonly status: 'started' | 'committed';
  readonly committedAt: number | undefined;
}

/** A request opened for a person, as given to the store. */
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
  readonly openedAt: number;
}

/** A request's state: `open` until answered (exactly once) or withdrawn. */
export type RequestStatus = 'open' | 'answered' | 'withdrawn';

/** A request as saved. */
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
 */
export type AnswerResult =
  | { readonly status: 'taken'; readonly record: RequestRecord }
  | { readonly status: 'already-answered' }
  | { readonly status: 'withdrawn' }
  | { readonly status: 'unknown' };

/** The result of {@link PersistenceAdapter.withdrawRequest}. */
export type WithdrawResult =
  | { readonly status: 'withdrawn' }
  | { readonly status: 'already-answered' }
  | { readonly status: 'already-withdrawn' }
  | { readonly status: 'unknown' };

/**
 * Everything one turn of a conversation saves, committed in ONE transaction
 * by {@link PersistenceAdapter.commit}: all of it is saved or none. Every run
 * and request in it belongs to the conversation named by the context.
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
}

/** A page of a listing; pass `next` as `after` to get the following page (`undefined`: no more). */
export interface Page<T> {
  readonly items: readonly T[];
  readonly next: string | undefined;
}

/** Paging of a listing: at most `limit` items (default 100, at most 1,000) after the cursor `after`. */
export interface ListOptions {
  readonly limit?: number | undefined;
  readonly after?: string | undefined;
}

/** Options of {@link PersistenceAdapter.listRequests}. */
export interface RequestListOptions extends ListOptions {
  /** Only this conversation's requests. */
  readonly conversationId?: string | undefined;
}

/** One conversation in {@link PersistenceAdapter.listConversations}, from its last saved envelope. */
export interface ConversationSummary {
  readonly conversationId: string;
  readonly agentId: AgentId;
  readonly agentName: string;
  readonly status: ConversationStatus;
  readonly updatedAt: number;
  /** How many requests of the conversation wait for an answer. */
  readonly openRequests: number;
}

/** Retention policy of {@link PersistenceAdapter.prune}. */
export interface PruneOptions {
  /** Terminal runs (and committed tool calls, closed requests) last changed longer ago than this are removed. */
  readonly finishedRunsOlderThanMs: number;
  /** The time the policy is measured from; defaults to the store's clock. */
  readonly now?: number | undefined;
  /** Prune only this scope's tenant; without it, every tenant (a maintenance job). */
  readonly scope?: unknown;
}

/** How many rows {@link PersistenceAdapter.prune} removed. */
export interface PruneResult {
  readonly runs: number;
  readonly toolCalls: number;
  readonly requests: number;
}

/** Options of {@link PersistenceAdapter.markInterrupted}. */
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
 * Two implementations pass one contract suite: `MemoryPersistence` (bounded,
 * for tests and scripts) and `SqlitePersistence` from `@troupe/sqlite` (the
 * default for daemons). Every method is async and rejects (never throws) with
 * a `TroupeError`: `ERR_INVALID_ARGUMENT` for a malformed record,
 * `ERR_NOT_JSON` for a value JSON cannot carry, `ERR_STORE_VERSION` for data
 * written by a newer Troupe, `ERR_STORE_WRITE` when the write failed (nothing
 * of it is visible afterwards), `ERR_STORE_LOCKED` when a run is fenced by a
 * newer attempt or the file stays busy, `ERR_CLOSED` after `close()`.
 *
 * @example
 * ```ts
 * const ctx = { agentId, conversationId }
 * await store.startToolCalls(scope, [{ runId, toolCallId, attempt: 1, toolName: 'charge', idempotent: false, startedAt }], ctx)
 * // ... the side effect ...
 * await store.commit(scope, { envelope, messages, runs: [run], committedToolCalls: [{ runId, toolCallId, attempt: 1 }] }, ctx)
 * ```
 */
export interface PersistenceAdapter {
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
  /** The conversation's live runs (`running`, `suspended`), oldest first. */
  loadRuns(scope: unknown, context: PersistenceContext): Promise<readonly RunRecord[]>;
  /** One run in any status (an interrupted one included), or `undefined`. */
  getRun(scope: unknown, runId: string): Promise<RunRecord | undefined>;
  /**
   * True for a store that survives the process (a file): the supervisor then
   * checkpoints every turn, so a crash loses no committed tool result.
   */
  readonly durable?: boolean | undefined;
  /**
   * Turn runs left `running` by a process that is gone into `interrupted` and
   * return them. Call it once at startup, before runs are resumed.
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
  /** Delete a conversation: every agent's state and messages, its runs, tool calls and requests. True if it existed. */
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
