import {
  type AgentId,
  type Answer,
  ApprovalDecision,
  type ApprovalHandler,
  asError,
  type Clock,
  ClosedError,
  createId,
  InvalidArgumentError,
  isTroupeError,
  type Request,
  TroupeError,
} from '@troupe/core';
import type { Durability } from '../persistence/Durability.js';
import { RecentMap } from './RecentMap.js';
import type { RunEvents } from './RunEvents.js';
import { type ApprovedCall, hostRequest, type RequestEntry, type RootOwner, type RunNode } from './RunNode.js';

/** A request waiting for a person, as the tree lists it. */
export interface OpenRequest {
  readonly request: Request;
  /** The root run's agent (the parent agent holding the conversation, or the spawned agent). */
  readonly agentId: AgentId;
  /** Agent ids from the root down to the run whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
  readonly runId: string;
}

/** What the requests need of the run tree they belong to. */
export interface RequestHost {
  readonly clock: Clock;
  readonly events: RunEvents;
  readonly approval: ApprovalHandler | undefined;
  readonly durability: Durability | undefined;
  /**
   * Before a saved request's answer is taken from the store, the root whose tree asked it, while
   * nothing of that tree runs here: rejects (the answer is refused, the request stays open) when
   * another live process runs that conversation's message.
   */
  readonly beforeAnswer: ((root: RunNode, requestId: string) => Promise<void>) | undefined;
  /** An answer reached a suspended run: the tree resumes it (soon: with every answer that reaches it meanwhile). */
  delivered(node: RunNode): void;
  /** Count something as running until {@link RequestHost.uncount} (an answer being taken by the store). */
  count(): void;
  uncount(): void;
  /** A shutdown cancelled what ran: nothing resumes after it. */
  shutDown(): boolean;
  /** A shutdown leaves what is saved of `node` as it is. */
  keepsSaved(node: RunNode): boolean;
}

const CLOSED_MEMORY = 10_000;
const NO_ENTRIES: ReadonlyMap<string, RequestEntry> = new Map();

/**
 * Human in the loop, for the whole run tree: every question a run asks
 * (a tool's `pending` result, or an approval the handler turned into one),
 * open until it is answered — once, through the store's compare-and-set
 * when it was saved — or withdrawn with its run. Ids the host sees are
 * minted here, unique per supervisor; each entry names the run whose own
 * tool asked, so an answer goes to the deepest run. Also the approval
 * handler as runs ask it: decided here, on the supervisor thread, for
 * parents and subagents alike.
 */
export class RequestBook {
  readonly #h: RequestHost;
  readonly #requests = new Map<string, RequestEntry>();
  readonly #closed = new RecentMap<string, 'answered' | 'withdrawn'>(CLOSED_MEMORY);
  /** Each run's own open questions, by the tool call that asked. */
  readonly #byNode = new Map<RunNode, Map<string, RequestEntry>>();
  /** Each run's answered questions not yet delivered to it (it runs, or resumes soon), by the tool call that asked. */
  readonly #answered = new Map<RunNode, Map<string, RequestEntry>>();
  /** The check of a quiet root's conversation before answers to its tree are taken, while it runs. */
  readonly #checks = new Map<RunNode, Promise<void>>();
  /** Aborted when a run's own work ends (an approval handler stops asking). */
  readonly #running = new Map<RunNode, AbortController>();

  constructor(host: RequestHost) {
    this.#h = host;
  }

  /** Requests open (answered or not yet delivered). */
  get size(): number {
    return this.#requests.size;
  }

  /** `node`'s own open questions, by the tool call that asked. */
  of(node: RunNode): ReadonlyMap<string, RequestEntry> {
    return this.#byNode.get(node) ?? NO_ENTRIES;
  }

  /** `node`'s answered questions not yet delivered to it, by the tool call that asked (all taken at its next resume). */
  answered(node: RunNode): ReadonlyMap<string, RequestEntry> {
    return this.#answered.get(node) ?? NO_ENTRIES;
  }

  /** `node`'s own work ended: an approval handler deciding for it is told to stop. */
  runEnded(node: RunNode): void {
    const running = this.#running.get(node);
    if (running === undefined) return;
    this.#running.delete(node);
    running.abort(new TroupeError(`run ${node.agentId} ended`, { code: 'ERR_CANCELLED' }));
  }

  /** The approval handler a run's executor asks: the host's, with its `ask` decisions opened as requests. */
  approvalFor(node: RunNode): ApprovalHandler | undefined {
    const handler = this.#h.approval;
    if (handler === undefined) return undefined;
    return async (request) => {
      let running = this.#running.get(node);
      if (running === undefined) {
        running = new AbortController();
        this.#running.set(node, running);
      }
      let raw: unknown;
      try {
        raw = await handler(
          { ...request, agentId: node.agentId, parentAgentId: node.parent?.agentId, scope: node.scope },
          { signal: running.signal },
        );
      } catch (error) {
        return {
          decision: 'reject',
          reason: `the approval handler threw: ${(error as Error)?.message ?? String(error)}`,
        };
      }
      // Cancelled (or ended) while the handler decided: the call stopped waiting for it; a question
      // opened now would be listed for a run that asks nothing.
      if (node.phase !== 'running' || node.cancelled !== undefined) {
        return { decision: 'reject', reason: 'the run was cancelled while the approval handler decided' };
      }
      const decision = ApprovalDecision.safeParse(raw);
      if (decision.success && decision.data.decision === 'ask') {
        const d = decision.data;
        const id = createId('req');
        const local: Request = {
          id,
          kind: 'approval',
          prompt: d.prompt,
          data: d.data ?? { toolName: request.toolName, arguments: request.arguments },
          ...(d.expiresAt === undefined ? {} : { expiresAt: d.expiresAt }),
        };
        this.open(node, request.toolCallId, local, true, undefined, true, {
          toolName: request.toolName,
          arguments: request.arguments,
        });
        return { ...d, requestId: id };
      }
      // Anything else goes back as it came: the executor denies what is not a decision, and says so.
      return raw as ApprovalDecision;
    };
  }

  /** A run's tool asked a question (a worker reports it as an event; the same question twice is one). */
  question(node: RunNode, toolCallId: string, request: Request): void {
    const known = this.of(node).get(toolCallId);
    if (known !== undefined && known.local.id === request.id) return;
    this.open(node, toolCallId, request, false);
  }

  /** Open a request for `node`'s call `toolCallId` (under `known`, an id the host knows already). */
  open(
    node: RunNode,
    toolCallId: string,
    local: Request,
    approval: boolean,
    known?: string,
    announce = true,
    call?: ApprovedCall,
  ): RequestEntry {
    const id = known ?? (approval ? local.id : createId('req'));
    const entry: RequestEntry = {
      id,
      local,
      node,
      toolCallId,
      approval,
      call: approval ? call : undefined,
      openedAt: this.#h.clock.now(),
      answer: undefined,
      saved: known !== undefined,
    };
    let own = this.#byNode.get(node);
    if (own === undefined) {
      own = new Map();
      this.#byNode.set(node, own);
    }
    own.set(toolCallId, entry);
    this.#requests.set(id, entry);
    const events = this.#h.events;
    if (announce && events.has('request.opened')) {
      events.emitter.emit('request.opened', {
        request: hostRequest(entry),
        agentId: node.root.agentId,
        runId: node.id,
        path: node.path,
        at: entry.openedAt,
      });
    }
    return entry;
  }

  /** An answer taken for `entry` is being delivered: it leaves `node`'s open questions. */
  take(entry: RequestEntry): void {
    this.#forgetOwn(entry);
    const answered = this.#answered.get(entry.node);
    if (answered === undefined || answered.get(entry.toolCallId) !== entry) return;
    answered.delete(entry.toolCallId);
    if (answered.size === 0) this.#answered.delete(entry.node);
  }

  /** Withdraw every open question of `node` (its run ended, or was cancelled); its undelivered answers are dropped. */
  withdrawAll(node: RunNode, why: string): void {
    this.#dropAnswered(node);
    const own = this.#byNode.get(node);
    if (own === undefined || own.size === 0) return;
    for (const entry of [...own.values()]) this.withdraw(entry, why);
  }

  /** Nobody will answer `entry` any more: withdrawn here, and in the store. */
  withdraw(entry: RequestEntry, why: string): void {
    if (this.#requests.get(entry.id) !== entry) return;
    this.#requests.delete(entry.id);
    this.#forgetOwn(entry);
    this.#closed.set(entry.id, 'withdrawn');
    const d = this.#h.durability;
    // A shutdown keeps what is saved as it is: a new supervisor resumes it.
    if (d !== undefined && entry.saved && !this.#h.keepsSaved(entry.node)) {
      d.withdraw(entry.node, entry.id).catch((error: unknown) => this.#h.events.saveFailed(entry.node, error));
    }
    const events = this.#h.events;
    if (events.has('request.withdrawn')) {
      events.emitter.emit('request.withdrawn', {
        requestId: entry.id,
        agentId: entry.node.root.agentId,
        reason: why,
        at: this.#h.clock.now(),
      });
    }
  }

  /** Let go of `node`'s questions without withdrawing them (another supervisor resumes them). */
  release(node: RunNode): void {
    this.#dropAnswered(node);
    const own = this.#byNode.get(node);
    if (own === undefined) return;
    for (const entry of own.values()) this.#requests.delete(entry.id);
    this.#byNode.delete(node);
  }

  // Answers `node` will never resume with (its run ended, was cancelled, or is let go).
  #dropAnswered(node: RunNode): void {
    const answered = this.#answered.get(node);
    if (answered === undefined) return;
    this.#answered.delete(node);
    for (const entry of answered.values()) this.#forgetOwn(entry);
  }

  #forgetOwn(entry: RequestEntry): void {
    const own = this.#byNode.get(entry.node);
    if (own === undefined) return;
    own.delete(entry.toolCallId);
    if (own.size === 0) this.#byNode.delete(entry.node);
  }

  /** The ids of the questions of agent `agentId`'s tree open now (nobody answered them here). */
  openIdsOf(agentId: string): string[] {
    const out: string[] = [];
    for (const entry of this.#requests.values()) {
      if (entry.answer === undefined && entry.taking !== true && entry.node.root.agentId === agentId)
        out.push(entry.id);
    }
    return out;
  }

  /** Requests waiting for a person, oldest first. */
  openRequests(): OpenRequest[] {
    const out: OpenRequest[] = [];
    for (const entry of this.#requests.values()) {
      // Answered, or its answer being taken by the store: nobody can answer it any more.
      if (entry.answer !== undefined || entry.taking === true) continue;
      out.push(listed(entry));
    }
    return out;
  }

  /** The open request `id`, if any. */
  request(id: string): OpenRequest | undefined {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined || entry.taking === true) return undefined;
    return listed(entry);
  }

  /** True while `id` is an open request of this tree (not answered, not withdrawn). */
  hasOpenRequest(id: string): boolean {
    const entry = this.#requests.get(id);
    return entry !== undefined && entry.answer === undefined;
  }

  /**
   * Take an answer (once) and route it to the run whose tool asked. Returns
   * the root whose tree it resumes; throws a typed error for an unknown,
   * answered or withdrawn request.
   */
  async answer(id: string, answer: Answer): Promise<RunNode> {
    const entry = this.#requests.get(id);
    const d = this.#h.durability;
    if (entry !== undefined && entry.answer === undefined && entry.saved && d !== undefined) {
      // Saved: the store takes it, exactly once across processes; meanwhile nobody else here can.
      if (entry.taking) {
        throw new InvalidArgumentError(`request ${id} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
        });
      }
      entry.taking = true;
      // Counted as running while the store takes it, until the run it resumes is counted itself:
      // a close() that began meanwhile drains it like a running message (and the process stays
      // alive), where it would have found the tree idle and let the resumed run escape it.
      this.#h.count();
      try {
        let taken: Awaited<ReturnType<Durability['answer']>>;
        let claim: Error | undefined;
        try {
          const root = entry.node.root;
          if (this.#h.beforeAnswer !== undefined && root.active === 0) await this.#checkBefore(root, id);
          taken = await d.answer(entry.node, id, { ...answer, id });
          // Taken: the run it resumes is claimed before anything of it runs. A process that restored
          // the conversation meanwhile read the answer taken and delivers it too: one claim wins.
          if (taken.status === 'taken') claim = await d.claim(entry.node).then(() => undefined, asError);
        } finally {
          entry.taking = false;
        }
        if (claim !== undefined) {
          // Fenced: another process resumed the run first (or the conversation was deleted, which
          // the store says in its own words): what this supervisor holds is stale either way.
          if (!isTroupeError(claim, 'ERR_STORE_FENCED')) throw claim;
          this.takenElsewhere(id, 'answered');
          if (await d.deleted(entry.node)) throw claim;
          throw new TroupeError(
            `conversation ${entry.node.root.conversation?.conversationId ?? entry.node.root.agentId} was restored by another process, which carries the answer to request ${id} forward (it read it taken from the store and resumed first): nothing ran or was saved here; its reply is that process's`,
            { code: 'ERR_CONVERSATION_BUSY', cause: claim },
          );
        }
        // The store never had it (its opening failed to save): answered here. Otherwise another
        // process took it, or it is gone there.
        const neverSaved = taken.status === 'unknown' && entry.unsaved === true;
        if (taken.status !== 'taken' && !neverSaved)
          this.takenElsewhere(id, taken.status === 'already-answered' ? 'answered' : 'withdrawn');
        else if (this.#requests.get(id) !== entry && this.#closed.get(id) === undefined) {
          // Its agent was stopped (the tree let go of it) while the store took the answer.
          throw new TroupeError(
            `agent ${entry.node.root.agentId} was stopped while the answer to request ${id} was being saved: its run did not resume here; a store that keeps the conversation keeps the answer too (startAgent it again to resume with it)`,
            { code: 'ERR_AGENT_STOPPED' },
          );
        } else if (this.#h.shutDown()) {
          // A shutdown cancelled what ran while the store took it (close()'s deadline, destroy()):
          // nothing resumes after that. The store keeps the answer; a supervisor that restores the
          // conversation resumes its run with it.
          throw new ClosedError(
            `the supervisor shut down while the answer to request ${id} was being saved: its run did not resume here; a store that keeps the conversation keeps the answer too (it resumes when a supervisor on that store restores it)`,
          );
        }
        return this.#deliver(id, answer);
      } finally {
        this.#h.uncount();
      }
    }
    if (this.#h.shutDown()) {
      throw new ClosedError(`the supervisor shut down: request ${id} was not answered (it stays open)`);
    }
    return this.#deliver(id, answer);
  }

  /**
   * Answers given together to a quiet tree share one check of its conversation (each would load
   * what the store has of it, the whole suspended state: n answers would cost n loads of it).
   */
  #checkBefore(root: RunNode, id: string): Promise<void> {
    const running = this.#checks.get(root);
    if (running !== undefined) return running;
    const check = (this.#h.beforeAnswer as NonNullable<RequestHost['beforeAnswer']>)(root, id);
    this.#checks.set(root, check);
    const done = (): void => {
      if (this.#checks.get(root) === check) this.#checks.delete(root);
    };
    check.then(done, done);
    return check;
  }

  /**
   * The store says another process answered (or withdrew) the open request
   * `id`: it is not answerable here either, and the root whose tree asked is
   * stale (that process resumed it from what is saved); its owner is told.
   */
  takenElsewhere(id: string, how: 'answered' | 'withdrawn'): void {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined) return;
    this.#requests.delete(id);
    this.#forgetOwn(entry);
    this.#closed.set(id, how);
    const root = entry.node.root;
    (root.owner as RootOwner | undefined)?.takenElsewhere?.(root, id);
  }

  /**
   * Deliver an answer the store took already (in a process that died before
   * its run resumed): no second compare-and-set.
   */
  redeliver(id: string, answer: Answer): RunNode {
    return this.#deliver(id, answer);
  }

  #deliver(id: string, answer: Answer): RunNode {
    const entry = this.#requests.get(id);
    if (entry === undefined || entry.answer !== undefined) {
      const closed = entry !== undefined ? 'answered' : this.#closed.get(id);
      if (closed === 'answered') {
        throw new InvalidArgumentError(`request ${id} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
        });
      }
      if (closed === 'withdrawn') {
        throw new InvalidArgumentError(`request ${id} was withdrawn (its run was cancelled or ended)`, {
          code: 'ERR_UNKNOWN_REQUEST',
        });
      }
      throw new InvalidArgumentError(`no pending request ${id}: see pendingRequests()`, {
        code: 'ERR_UNKNOWN_REQUEST',
      });
    }
    const expiresAt = entry.local.expiresAt;
    entry.answer = {
      // The state names it by the host's id (see the tree's reconsider).
      answer: { ...answer, id: entry.id },
      expired: expiresAt !== undefined && this.#h.clock.now() > expiresAt,
    };
    this.#requests.delete(id);
    this.#closed.set(id, 'answered');
    const node = entry.node;
    const events = this.#h.events;
    if (events.has('request.answered')) {
      events.emitter.emit('request.answered', {
        requestId: id,
        agentId: node.root.agentId,
        runId: node.id,
        ok: answer.ok,
        at: this.#h.clock.now(),
      });
    }
    let answered = this.#answered.get(node);
    if (answered === undefined) {
      answered = new Map();
      this.#answered.set(node, answered);
    }
    answered.set(entry.toolCallId, entry);
    // Suspended: the tree resumes it (with every answer that reached it by then). Still running
    // (it asked mid-turn, or resumes now): delivered with the others when it suspends.
    if (node.phase === 'suspended') this.#h.delivered(node);
    return node.root;
  }

  /**
   * The first question open anywhere in a suspended run's subtree, in call
   * order, depth first: what a reply that says `suspended` names.
   */
  firstOpen(node: RunNode): { request: Request; path: readonly AgentId[] } | undefined {
    const pending = node.state?.pending;
    if (pending === undefined) return undefined;
    const own = this.of(node);
    for (const call of pending) {
      if (call.result !== undefined) continue;
      if (call.delegated === true) {
        const child = node.childByCall.get(call.call.id);
        if (child !== undefined && child.phase === 'suspended') {
          const found = this.firstOpen(child);
          if (found !== undefined) return found;
        }
        continue;
      }
      const entry = own.get(call.call.id);
      if (entry !== undefined && entry.answer === undefined) return { request: hostRequest(entry), path: node.path };
    }
    return undefined;
  }
}

function listed(entry: RequestEntry): OpenRequest {
  return {
    request: hostRequest(entry),
    agentId: entry.node.root.agentId,
    path: entry.node.path,
    openedAt: entry.openedAt,
    runId: entry.node.id,
  };
}
