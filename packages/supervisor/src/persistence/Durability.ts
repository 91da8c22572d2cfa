import {
  type Answer,
  type Clock,
  isTroupeError,
  type LoopState,
  type Message,
  TroupeError,
  type Usage,
} from '@troupe/core';
import type { CheckpointCall } from '@troupe/core/internal';
import {
  type FinalEnd,
  hostRequest,
  type RequestEntry,
  type RunNode,
  type SavedConversation,
  totalOf,
} from '../internal/RunNode.js';
import type {
  AnswerResult,
  PersistenceAdapter,
  PersistenceContext,
  RequestOpening,
  RunRecord,
  RunStatus,
  ToolCallKey,
  TurnBatch,
} from './Persistence.js';
import type { AgentStateEnvelope } from './StateEnvelope.js';

/** Where a root's rows are saved: the conversation it belongs to. */
export interface Conversation {
  readonly agentId: string;
  readonly conversationId: string;
}

/**
 * What the run tree saves of its runs, through the persistence adapter:
 * run rows (the nodes: status, state, attempt as a fencing token), requests
 * when they open and close, and — with a durable store — a checkpoint of
 * every turn, tool calls marked started before their side effects and
 * committed with the state they produced. Writes of one tree go in order
 * (each waits for the one before); a failed write rejects its caller.
 *
 * Never saves the scope: it is only handed to the store as the first
 * argument, for the store's tenant key.
 */
export class Durability {
  readonly store: PersistenceAdapter;
  readonly #clock: Clock;
  /**
   * The last write of each tree (by its root), so the writes of one conversation keep their order:
   * a parent's save (what its reply waits for) goes after the writes its subagents asked for
   * before it — a subagent's question opened, its run suspended. A store that writes as it is
   * called (SQLite) did those before the reply anyway; one on a server (PostgreSQL) would
   * otherwise acknowledge the parent's `suspended` while the question it names is not saved yet
   * (an answer with { scope } then finds no such request, and the subagent's row still `running`).
   * A store on a server takes the conversation's writes one at a time all the same (one row lock).
   */
  readonly #last = new WeakMap<RunNode, Promise<unknown>>();
  /** Nodes a row of which was saved (so their end is saved too). */
  readonly #persisted = new WeakSet<RunNode>();
  /** Each node's calls marked started and not committed yet, with the attempt they were started under. */
  readonly #started = new WeakMap<RunNode, Map<string, number>>();
  /**
   * Roots a write of which the store fenced: another process carries their conversation forward,
   * and this copy writes nothing more (see {@link Durability.claim}).
   */
  readonly #fenced = new WeakMap<RunNode, Error>();
  /** The claim of each suspended node's next attempt, shared by the answers that resume it together. */
  readonly #claims = new WeakMap<RunNode, { readonly attempt: number; readonly claim: Promise<void> }>();

  constructor(store: PersistenceAdapter, clock: Clock) {
    this.store = store;
    this.#clock = clock;
  }

  /** Whether the store survives the process (turns are then checkpointed). */
  get durable(): boolean {
    return this.store.durable === true;
  }

  /** The conversation a node's rows go to; `undefined` for a direct spawn's tree (not saved). */
  conversationOf(node: RunNode): PersistenceContext | undefined {
    const c = node.root.conversation;
    return c === undefined ? undefined : { agentId: c.agentId as never, conversationId: c.conversationId };
  }

  row(node: RunNode, status: RunStatus, state: LoopState | undefined): RunRecord {
    const ctx = this.conversationOf(node) as PersistenceContext;
    const record: {
      -readonly [K in keyof RunRecord]: RunRecord[K];
    } = {
      runId: node.id,
      conversationId: ctx.conversationId,
      agentId: node.agentId,
      agentName: node.agent.name,
      kind: node.kind,
      status,
      attempt: Math.max(1, node.attempt),
      usage: node.usage as Usage,
      totalUsage: totalOf(node),
      updatedAt: this.#clock.now(),
    };
    if (node.parent !== undefined) record.parentRunId = node.parent.id;
    if (node.toolCallId !== undefined) record.toolCallId = node.toolCallId;
    if (node.agent.module !== undefined) record.module = node.agent.module;
    if (state !== undefined) record.state = state;
    if (node.end !== undefined) record.outcome = outcomeJson(node);
    return record;
  }

  // Writes of one tree (one conversation) in order: each starts once the previous settled. Once a
  // write of a tree was fenced, none of that tree's goes to the store: what this copy holds is
  // behind another process's, and a write of it (a run's end, a checkpoint before a tool runs)
  // would be that process's work undone — or a tool run twice.
  #chain<T>(node: RunNode, write: () => Promise<T>): Promise<T> {
    const root = node.root;
    const guarded = (): Promise<T> => {
      const fenced = this.#fenced.get(root);
      if (fenced !== undefined) return Promise.reject(fenced);
      return write().catch((error: unknown) => {
        if (isTroupeError(error, 'ERR_STORE_FENCED') && !this.#fenced.has(root)) {
          const c = root.conversation;
          this.#fenced.set(
            root,
            new TroupeError(
              `conversation ${c?.conversationId ?? root.agentId} is carried forward by another process (a write of this copy was fenced: ${(error as Error).message}): this copy writes nothing more; startAgent it again to load what is saved`,
              { code: 'ERR_STORE_FENCED', cause: error },
            ),
          );
        }
        throw error;
      });
    };
    const before = this.#last.get(root);
    const next = before === undefined ? guarded() : before.then(guarded, guarded);
    this.#last.set(
      root,
      next.catch(() => {}),
    );
    return next;
  }

  /**
   * A message starts (or an interrupted one resumes): its input, the run with
   * the state it starts from, and the conversation marked running — one
   * transaction. The run's row is written with its new attempt, which fences
   * out a writer still holding an older one.
   */
  messageStarted(
    root: RunNode,
    envelope: AgentStateEnvelope,
    input: Message | undefined,
    state: LoopState,
  ): Promise<void> {
    this.#persisted.add(root);
    return this.#chain(root, () =>
      this.#commitEnvelope(root, {
        envelope,
        messages: input === undefined ? undefined : [input],
        runs: [this.row(root, 'running', state)],
      }),
    );
  }

  /**
   * A conversation's message settled: its envelope, the messages to show, and
   * (when its run was saved) the run's row — one transaction, after every
   * earlier write of the run.
   */
  conversationSaved(
    root: RunNode,
    envelope: AgentStateEnvelope,
    messages: readonly Message[],
    status: RunStatus | undefined,
  ): Promise<void> {
    const runs =
      status !== undefined && this.#persisted.has(root)
        ? [this.row(root, status, status === 'suspended' ? root.state : undefined)]
        : undefined;
    const committed = status !== undefined && status !== 'suspended' ? this.#uncommitted(root) : undefined;
    return this.#chain(root, () =>
      this.#commitEnvelope(root, {
        envelope,
        messages: messages.length === 0 ? undefined : messages,
        runs,
        committedToolCalls: committed,
      }),
    );
  }

  // A batch with the conversation's envelope, based on the revision the agent holds (read when
  // the write starts: the writes before it in the chain have moved it); committed, it moves on.
  async #commitEnvelope(root: RunNode, batch: TurnBatch): Promise<void> {
    const conversation = root.conversation as SavedConversation;
    const basedOn = conversation.revision;
    await this.store.commit(
      root.scope,
      basedOn === undefined ? batch : { ...batch, basedOn },
      this.conversationOf(root) as PersistenceContext,
    );
    if (basedOn !== undefined && conversation.revision === basedOn) conversation.revision = basedOn + 1;
  }

  /** A node restored from what is saved: its rows exist (its end is saved too). */
  restored(node: RunNode): void {
    this.#persisted.add(node);
  }

  /** Calls a restored run had started and never committed (committed with its next turn). */
  adoptStarted(node: RunNode, calls: readonly { readonly toolCallId: string; readonly attempt: number }[]): void {
    if (calls.length === 0) return;
    const map = this.#startedOf(node);
    for (const c of calls) map.set(c.toolCallId, c.attempt);
  }

  #startedOf(node: RunNode): Map<string, number> {
    let map = this.#started.get(node);
    if (map === undefined) {
      map = new Map();
      this.#started.set(node, map);
    }
    return map;
  }

  // Every call of the node still marked started, taken off the list (a run that ends commits them).
  #uncommitted(node: RunNode): ToolCallKey[] | undefined {
    const map = this.#started.get(node);
    if (map === undefined || map.size === 0) return undefined;
    const keys = [...map].map(([toolCallId, attempt]) => ({ runId: node.id, toolCallId, attempt }));
    map.clear();
    return keys;
  }

  // The given calls that were marked started, taken off the list.
  #committing(node: RunNode, ids: readonly string[]): ToolCallKey[] | undefined {
    const map = this.#started.get(node);
    if (map === undefined || map.size === 0) return undefined;
    const keys: ToolCallKey[] = [];
    for (const id of ids) {
      const attempt = map.get(id);
      if (attempt === undefined) continue;
      map.delete(id);
      keys.push({ runId: node.id, toolCallId: id, attempt });
    }
    return keys.length === 0 ? undefined : keys;
  }

  /** A turn asked for tool calls: the state with them open, then the calls marked started. */
  beforeCalls(node: RunNode, state: LoopState, calls: readonly CheckpointCall[]): Promise<void> {
    const ctx = this.conversationOf(node);
    if (ctx === undefined) return Promise.resolve();
    this.#persisted.add(node);
    const attempt = Math.max(1, node.attempt);
    const map = this.#startedOf(node);
    return this.#chain(node, async () => {
      await this.store.commit(node.scope, { runs: [this.row(node, 'running', state)] }, ctx);
      // A call started again (re-run after an answer) is started under this attempt.
      const fresh = calls.filter((c) => map.get(c.id) !== attempt);
      if (fresh.length === 0) return;
      const at = this.#clock.now();
      await this.store.startToolCalls(
        node.scope,
        fresh.map((c) => ({
          runId: node.id,
          toolCallId: c.id,
          attempt,
          toolName: c.name,
          idempotent: c.idempotent,
          startedAt: at,
        })),
        ctx,
      );
      // Known as started once the store has them, not before: a start the store refused (a full
      // disk) must not be committed with the run's end, or the store refuses that end too.
      for (const c of fresh) map.set(c.id, attempt);
    });
  }

  /** A turn's calls have results: the state and the calls committed, in one transaction. */
  afterTurn(node: RunNode, state: LoopState, calls: readonly string[]): Promise<void> {
    const ctx = this.conversationOf(node);
    if (ctx === undefined) return Promise.resolve();
    this.#persisted.add(node);
    const committed = this.#committing(node, calls);
    return this.#chain(node, () =>
      this.store.commit(node.scope, { runs: [this.row(node, 'running', state)], committedToolCalls: committed }, ctx),
    );
  }

  /** A node stays suspended: its state, and the questions of its own not saved yet. */
  suspended(node: RunNode, opened: readonly RequestEntry[]): Promise<void> {
    const ctx = this.conversationOf(node);
    if (ctx === undefined) return Promise.resolve();
    this.#persisted.add(node);
    const openings: RequestOpening[] = opened.map((entry) => this.opening(entry));
    return this.#chain(node, () =>
      this.store.commit(node.scope, { runs: [this.row(node, 'suspended', node.state)], openedRequests: openings }, ctx),
    );
  }

  opening(entry: RequestEntry): RequestOpening {
    const node = entry.node;
    const ctx = this.conversationOf(node) as PersistenceContext;
    return {
      requestId: entry.id,
      conversationId: ctx.conversationId,
      agentId: node.root.agentId,
      runId: node.id,
      runAgentId: node.agentId,
      path: node.path,
      request: hostRequest(entry),
      localId: entry.local.id,
      toolCallId: entry.toolCallId,
      approval: entry.approval,
      ...(entry.call === undefined ? {} : { approvedCall: entry.call }),
      openedAt: entry.openedAt,
    };
  }

  /** A node ended (and was saved before): its final row. */
  ended(node: RunNode, status: RunStatus): Promise<void> {
    const ctx = this.conversationOf(node);
    if (ctx === undefined || !this.#persisted.has(node)) return Promise.resolve();
    const committed = this.#uncommitted(node);
    return this.#chain(node, () =>
      this.store.commit(node.scope, { runs: [this.row(node, status, undefined)], committedToolCalls: committed }, ctx),
    );
  }

  /**
   * Claim the next attempt of a suspended `node` before it resumes: its row, running at that
   * attempt (with the state it resumes from). An answer is taken by one process, and a process
   * that restores the conversation meanwhile may deliver the same answer: each claims the run
   * first, the store lets one write it (the other's write is fenced, `ERR_STORE_FENCED`: it runs
   * nothing and writes nothing more), and a process that dies after its claim leaves the row to
   * be marked interrupted (a restore finds it only claimed, and delivers the answer again).
   * Answers given together resume the run once: they share one claim of its next attempt.
   */
  claim(node: RunNode): Promise<void> {
    const ctx = this.conversationOf(node);
    if (ctx === undefined || !this.durable) return Promise.resolve();
    const attempt = node.attempt + 1;
    const made = this.#claims.get(node);
    if (made !== undefined && made.attempt === attempt) return made.claim;
    this.#persisted.add(node);
    const claim = this.#chain(node, () =>
      this.store.commit(node.scope, { runs: [{ ...this.row(node, 'running', node.state), attempt }] }, ctx),
    );
    this.#claims.set(node, { attempt, claim });
    return claim;
  }

  /** Whether the conversation `node` belongs to is gone from the store (deleted). */
  async deleted(node: RunNode): Promise<boolean> {
    const ctx = this.conversationOf(node);
    return ctx !== undefined && (await this.store.loadState(node.scope, ctx)) === undefined;
  }

  /**
   * Why the copy of a conversation `root` holds is behind what is saved, or `undefined` when it is
   * not: one of its open questions (`asked`, by id) answered or withdrawn in the store, or the
   * conversation saved past the revision this copy holds (or deleted). Another process carried it
   * forward. A store that cannot answer now counts as not behind (nothing is refused on a guess).
   */
  async behind(root: RunNode, asked: readonly string[]): Promise<string | undefined> {
    const ctx = this.conversationOf(root);
    if (ctx === undefined || !this.durable) return undefined;
    try {
      for (const id of asked) {
        const saved = await this.store.getRequest(root.scope, id);
        if (saved === undefined) return `its question ${id} is no longer saved`;
        if (saved.status !== 'open') return `its question ${id} was ${saved.status} there`;
      }
      const held = (root.conversation as SavedConversation).revision;
      if (held === undefined) return undefined;
      const envelope = await this.store.loadState(root.scope, ctx);
      if (envelope === undefined) return 'the conversation was deleted';
      if (envelope.revision !== undefined && envelope.revision !== held) {
        return `saved at revision ${envelope.revision}, this copy holds ${held}`;
      }
      return undefined;
    } catch {
      return undefined;
    }
  }

  /** Take an answer once, across processes (compare-and-set in the store). */
  answer(node: RunNode, requestId: string, answer: Answer): Promise<AnswerResult> {
    return this.#chain(node, () => this.store.answerRequest(node.scope, requestId, answer, this.#clock.now()));
  }

  /** Nobody will take an answer to it any more. */
  withdraw(node: RunNode, requestId: string): Promise<unknown> {
    return this.#chain(node, () => this.store.withdrawRequest(node.scope, requestId, this.#clock.now()));
  }

  /** Resolves once every write of `node`'s tree made so far has settled. */
  settled(node: RunNode): Promise<unknown> {
    return this.#last.get(node.root) ?? Promise.resolve();
  }
}

/**
 * The outcome a record keeps: the run's end but for the lists that grow with
 * the run (its events and updates: the state holds them), its error as name,
 * message and code.
 */
function outcomeJson(node: RunNode): unknown {
  const end = node.end as (FinalEnd & { readonly events?: unknown; readonly updates?: unknown }) | undefined;
  if (end === undefined) return undefined;
  const { events: _events, updates: _updates, ...kept } = end;
  if (!('error' in kept)) return kept;
  const error = kept.error;
  return { ...kept, error: { name: error.name, message: error.message, code: (error as { code?: unknown }).code } };
}
