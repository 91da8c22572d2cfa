import {
  type Agent,
  type AgentId,
  Answer,
  assertCloneable,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  createId,
  type DeepReadonly,
  InvalidArgumentError,
  isAgent,
  isTroupeError,
  type OutputOf,
  type Scope,
  type ScopeDefinition,
  sealScope,
  TroupeError,
} from '@troupe/core';
import { describeValue, freezeReceived, initialLoopState } from '@troupe/core/internal';
import { loadedAgent } from '@troupe/subagent';
import type { AgentHandle, AgentReply } from './AgentHandle.js';
import { definitionOf } from './internal/AgentDefinitions.js';
import { AgentRegistry } from './internal/AgentRegistry.js';
import { checkMetadata, checkRestoredToolContext, cloneMetadata, sealToolContext } from './internal/checkChannels.js';
import { checkSignal } from './internal/checkSignal.js';
import { reportDroppedRequests } from './internal/droppedRequests.js';
import { ParentAgent, type ParentAgentDeps } from './internal/ParentAgent.js';
import type { RootOwner, RunNode } from './internal/RunNode.js';
import { spawnOutcome } from './internal/spawnOutcome.js';
import { VersionedEmitter } from './internal/VersionedEmitter.js';
import { LocalTransport } from './LocalTransport.js';
import { Durability } from './persistence/Durability.js';
import type { ListOptions, Page, PersistenceContext, RequestRecord } from './persistence/Persistence.js';
import { Restorer } from './persistence/Restorer.js';
import { migrateEnvelope, stateBefore } from './persistence/StateEnvelope.js';
import { RunTree } from './RunTree.js';
import type { SubagentOutcome } from './SubagentOutcome.js';
import {
  type AgentFor,
  type AnswerOptions,
  type AnswerOptionsFor,
  type PendingRequestInfo,
  type ResolvedSupervisorOptions,
  resolveSupervisorOptions,
  type SpawnOptions,
  type SpawnOptionsFor,
  type StartAgentOptions,
  type StartAgentOptionsFor,
  type SupervisorOptions,
  type SupervisorStats,
} from './SupervisorOptions.js';

/**
 * The supervisor: owns parent agents (actors on this thread), the run tree
 * (every run at every depth, its cancellation, deadlines, questions and
 * usage), a warm pool of worker threads for subagents, and the watchdog.
 *
 * Emits typed events ({@link SupervisorEvents}). Lifecycle: `close()` is
 * graceful and bounded, `destroy()` immediate, both idempotent;
 * `await using supervisor = createSupervisor(...)` closes it; every call
 * after close fails with a `ClosedError`.
 *
 * Types: `S` and `I` are what the supervisor's scope schema produces and
 * accepts. `startAgent` and `spawn` take a scope of type `I`, and only an
 * agent whose tools read no more than `S` (and whose `toolContext` is given,
 * of the shape its tools declare). Without a schema (`S` unknown), the scope
 * passed is what the tools get, so it must be what they read.
 *
 * @example
 * ```ts
 * import { defineAgent } from '@troupe/core'
 *
 * const helper = defineAgent({ name: 'helper', instructions: 'Help.', model })
 * await using supervisor: Supervisor = createSupervisor({ agents: [helper], pool: { threads: 2 } })
 * supervisor.on('agent.failed', (e) => console.error(e.error))
 * const handle = await supervisor.startAgent('helper', { scope: {} })
 * const reply = await handle.send('Hello')
 * ```
 */
export class Supervisor<S = unknown, I = S, A extends Agent = Agent> extends VersionedEmitter {
  /** The worker pool, as far as a host needs it. */
  readonly pool: { ready(): Promise<void>; stats(): SupervisorStats['pool'] };
  readonly #o: ResolvedSupervisorOptions;
  readonly #tree: RunTree;
  readonly #clock: Clock;
  readonly #agents: AgentRegistry;
  readonly #durability: Durability | undefined;
  /** Restores conversations from the store (none without a store). */
  readonly #restorer: Restorer | undefined;
  /** What a direct spawn's root reports: its outcome. */
  readonly #spawnOwner: RootOwner;
  /** What every parent agent of this supervisor is given: one object for all of them (a resident agent is kept small). */
  readonly #agentDeps: ParentAgentDeps;
  readonly #parsedScopes = new WeakSet<object>();
  /** How long a cancelled run (or a reply being saved at shutdown) gets before it is cut off. */
  readonly #graceMs: number;
  #closing: Promise<void> | undefined;
  #destroying: Promise<void> | undefined;
  #closed = false;

  constructor(options: SupervisorOptions<S, I, A> = {}) {
    super();
    const o = resolveSupervisorOptions(options);
    this.#o = o;
    const clock = o.clock;
    this.#clock = clock;
    const store = o.persistence;
    this.#durability = store === undefined ? undefined : new Durability(store, clock);
    const transport = o.transport ?? new LocalTransport(o.pool);
    this.#graceMs = transport.graceMs;
    this.#agents = new AgentRegistry(o.maxIdleAgents, store !== undefined);
    const tree = new RunTree({
      beforeAnswer: (root, requestId) => this.#restorer?.answerHeldHere(root, requestId) ?? Promise.resolve(),
      clock,
      events: this,
      approval: o.approval,
      transport,
      subagentTimeoutMs: o.subagentTimeoutMs,
      deadlineIntervalMs: o.pool.watchdogIntervalMs,
      localCapacity: o.pool.tableCapacity,
      listenersVersion: () => this.listenersVersion,
      durability: this.#durability,
    });
    this.#tree = tree;
    this.#restorer =
      store === undefined
        ? undefined
        : new Restorer({
            store,
            clock,
            tree,
            agents: this.#agents,
            agentsByName: o.agents,
            sealScope: (input) => this.#sealScope(input),
            // The stored agent and scope are untyped here: the typed overloads are for hosts.
            startAgent: (agent, start) => this.#startAgent(agent, start),
            stopAgent: (agentId) => this.stopAgent(agentId),
          });
    this.#spawnOwner = Object.freeze({ settle: (root: RunNode) => spawnOutcome(root, tree) });
    this.#agentDeps = {
      tree,
      clock,
      events: this,
      durability: this.#durability,
      restart: o.restart,
      mailboxSize: o.mailboxSize,
      closed: () => this.#closed || this.#closing !== undefined,
      idle: (agent) => this.#agents.idle(agent),
      busy: (agent) => this.#agents.busy(agent),
      stale: (agent) => this.#agents.forget(agent),
    };
    this.pool = {
      ready: () => tree.transport.ready(),
      stats: () => this.stats().pool,
    };
  }

  /** Resolves once the transport can run subagents (a pool's threads booted: it starts them at construction). */
  ready(): Promise<void> {
    return this.#tree.transport.ready();
  }

  #assertOpen(): void {
    if (this.#closed || this.#closing !== undefined)
      throw new ClosedError('the supervisor is closed: create a new one');
  }

  #sealScope(input: unknown): Scope {
    // Without a schema, sealScope remembers what it sealed. With one, a scope is
    // taken as is only if this supervisor's schema produced it.
    const schema = this.#o.scope as ScopeDefinition<unknown> | undefined;
    if (schema === undefined) return sealScope(input, this.#o.scopeBudgetBytes) as Scope;
    if (typeof input === 'object' && input !== null && this.#parsedScopes.has(input)) return input as Scope;
    const scope = schema.parse(input);
    if (typeof scope === 'object' && scope !== null) this.#parsedScopes.add(scope);
    return scope as Scope;
  }

  /**
   * Start (or restore) a parent agent. With the `agentId` and
   * `conversationId` of a saved agent, its state is loaded from persistence
   * (with the scope given now: scope is never saved), including an open
   * request, which is listed by `pendingRequests()` again. `agent` is an
   * agent, or the name of one given in `options.agents`.
   *
   * Its types hold the scope to the supervisor's schema (or, without one, to
   * what the agent's tools read) and require the `toolContext` keys its tools
   * declare; a restore whose toolContext holds none of the keys the
   * conversation was started with is refused at run time too
   * (`ERR_TOOL_CONTEXT_MISSING`).
   */
  // One signature for an agent and a name (not two overloads): a wrong option is then reported at
  // its key, not as the agent not being a string (the error of the last overload tried).
  // (`G`: the agent given; the class's `A` are the agents of `options.agents`.)
  async startAgent<G extends AgentFor<S> | string>(
    agent: G,
    options: StartAgentOptionsFor<G, S, I>,
  ): Promise<AgentHandle<G extends Agent ? OutputOf<G> : unknown>> {
    return (await this.#startAgent(agent as Agent | string, options as StartAgentOptions)) as AgentHandle<never>;
  }

  async #startAgent(agent: Agent | string, options: StartAgentOptions): Promise<AgentHandle> {
    this.#assertOpen();
    const def = typeof agent === 'string' ? this.#o.agents.get(agent) : agent;
    if (def === undefined || !isAgent(def)) {
      throw new InvalidArgumentError(
        typeof agent === 'string'
          ? `no agent named "${agent}": pass it in options.agents or pass the agent itself`
          : 'startAgent(agent): pass an agent made with defineAgent',
        { code: 'ERR_UNKNOWN_AGENT' },
      );
    }
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('startAgent: pass { scope, ... }');
    const scope = this.#sealScope(options.scope);
    const toolContext = sealToolContext(options.toolContext);
    const metadata = options.metadata ?? {};
    checkMetadata(metadata);
    if (
      options.agentId !== undefined &&
      (typeof options.agentId !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(options.agentId))
    ) {
      throw new InvalidArgumentError('agentId must be 1-128 characters of [A-Za-z0-9_.:-]');
    }
    const id = (options.agentId ?? createId('agent')) as AgentId;
    const conversationId = options.conversationId ?? id;
    if (typeof conversationId !== 'string' || conversationId.length === 0) {
      throw new InvalidArgumentError('conversationId must be a non-empty string');
    }
    this.#agents.take(id);
    let parent: ParentAgent | undefined;
    try {
      const context: PersistenceContext = { agentId: id, conversationId };
      const store = this.#o.persistence;
      if (this.#restorer !== undefined) await this.#restorer.recover();
      const loaded = await store?.loadState(scope, context);
      // Stores migrate on read; an adapter that does not is held to the same versions here.
      const saved = loaded === undefined ? undefined : migrateEnvelope(loaded, `the saved state of ${id}`);
      if (saved !== undefined && saved.agentName !== def.name) {
        throw new InvalidArgumentError(
          `agent ${id} of conversation ${conversationId} was saved as "${saved.agentName}", not "${def.name}": start it with the agent it was saved with`,
          { code: 'ERR_UNKNOWN_AGENT' },
        );
      }
      // Checked once a conversation running elsewhere was refused (ERR_CONVERSATION_BUSY says more).
      const checkToolContext = (): void =>
        checkRestoredToolContext(saved?.toolContextKeys, toolContext, {
          agentId: id,
          conversationId,
          agentName: def.name,
        });
      if (saved !== undefined && this.#restorer === undefined) checkToolContext();
      this.#assertOpen();
      parent = new ParentAgent(
        def,
        {
          id,
          conversationId,
          scope,
          toolContext,
          // A suspended message's state is its run's (restored below): the agent's own is the one before it.
          state:
            saved === undefined
              ? initialLoopState(id, def.instructions, freezeReceived(cloneMetadata(metadata)))
              : stateBefore(saved, `the saved state of ${id}`),
          children: saved?.childCounter ?? 0,
          // Every save is based on what was loaded: a store that fences refuses a stale copy's.
          revision: saved === undefined ? 0 : saved.revision,
        },
        this.#agentDeps,
      );
      if (saved !== undefined && this.#restorer !== undefined)
        await this.#restorer.conversation(parent, def, saved, context, checkToolContext);
      this.#assertOpen();
    } catch (error) {
      this.#agents.abandoned(id);
      throw error;
    }
    this.#agents.started(parent);
    this.emit('agent.started', { agentId: id, agent: def.name, conversationId, at: this.#clock.now() });
    return parent;
  }

  /** The handle of a started agent, by id (`undefined` once it was let go idle and collected: `startAgent` restores it). */
  agent(agentId: string): AgentHandle | undefined {
    return this.#agents.get(agentId);
  }

  /** Requests waiting for a person in this supervisor, oldest first (every open one, at any depth). */
  pendingRequests(): PendingRequestInfo[] {
    return this.#tree.requests.openRequests().map(({ request, agentId, path, openedAt }) => ({
      request,
      agentId,
      path,
      openedAt,
      conversationId: this.#agents.held(agentId)?.conversationId,
    }));
  }

  /**
   * A tenant's open requests as the store has them — those of conversations
   * not started in this supervisor too (after a restart) — oldest first, a
   * page at a time. Answer one with `answer(id, answer, { scope })`.
   */
  async listRequests(
    scope: unknown,
    options: ListOptions & { readonly conversationId?: string } = {},
  ): Promise<Page<PendingRequestInfo>> {
    this.#assertOpen();
    const store = this.#o.persistence;
    if (store === undefined) {
      throw new InvalidArgumentError(
        'listRequests: this supervisor saves nothing (persistence: null); use pendingRequests()',
      );
    }
    const sealed = this.#sealScope(scope);
    await this.#restorer?.recover();
    const page = await store.listRequests(sealed, options);
    return { items: page.items.map(infoOf), next: page.next };
  }

  /**
   * Answer a pending request. The answer goes to the run whose tool asked
   * (at any depth) and resumes it on any worker: the tool is re-run exactly
   * once with `ctx.answer` (a declined or expired answer becomes an error
   * result the model sees). Resolves with the reply of the message (or
   * spawn) it belongs to, the next time nothing of its tree runs — which may
   * be another suspension.
   *
   * Answers given together (several questions of one run answered before it
   * resumes) resume it once: each answered call re-runs once with its own
   * answer, all in that resume, and each `answer()` resolves with the reply
   * that follows it. n answers so cost one resume and one save of the run's
   * state, not n.
   *
   * With `{ scope }` it answers a request this supervisor does not hold
   * (after a restart): its conversation is restored from the store with that
   * scope and `toolContext` — neither is ever saved, so give both again. When
   * the tools of the supervisor's `agents` declare toolContext keys, the types
   * require `toolContext` with the scope; a restore whose toolContext holds
   * none of the keys the conversation was started with is refused
   * (`ERR_TOOL_CONTEXT_MISSING`).
   *
   * Refused with a typed error, leaving the request open: a malformed answer
   * (`ERR_INVALID_ARGUMENT`), a restore without its toolContext
   * (`ERR_TOOL_CONTEXT_MISSING`). Refused: an unknown or withdrawn id
   * (`ERR_UNKNOWN_REQUEST`), a second answer (`ERR_REQUEST_ALREADY_ANSWERED`).
   */
  async answer<R extends AgentReply | SubagentOutcome = AgentReply>(
    requestId: string,
    answer: Omit<Answer, 'id'> & { readonly id?: string },
    options: AnswerOptionsFor<DeepReadonly<I>, A> = {},
  ): Promise<R> {
    this.#assertOpen();
    if (typeof requestId !== 'string' || requestId.length === 0) {
      throw new InvalidArgumentError('answer(requestId, answer): requestId must be the id of a pending request');
    }
    const parsed = Answer.safeParse({ ...answer, id: answer?.id ?? requestId });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new InvalidArgumentError(
        `malformed answer to ${requestId}: ${issue?.path.join('.') || 'answer'} ${issue?.message ?? 'is invalid'}; pass { ok: boolean, data?, reason?: string } (the request stays open)`,
      );
    }
    if (parsed.data.id !== requestId) {
      throw new InvalidArgumentError(
        `answer.id (${parsed.data.id}) is not the request id ${requestId} (the request stays open)`,
      );
    }
    assertCloneable(parsed.data.data, 'answer.data');
    const restorer = this.#restorer;
    if (options?.scope !== undefined && restorer !== undefined) {
      // Answered as someone: only a request of their tenant (the store keeps requests by tenant key).
      await restorer.forAnswer(requestId, options as AnswerOptions, this.#tree.requests.hasOpenRequest(requestId));
    }
    let root: RunNode;
    try {
      root = await this.#tree.requests.answer(requestId, parsed.data);
    } catch (error) {
      if (!isTroupeError(error, 'ERR_STORE_FENCED') || options?.scope === undefined || restorer === undefined)
        throw error;
      // The copy held here was behind what is saved, and is let go: answered on what is saved.
      await restorer.forAnswer(requestId, options as AnswerOptions, false);
      root = await this.#tree.requests.answer(requestId, parsed.data);
    }
    const reply = await this.#tree.whenQuiet(root);
    if (reply instanceof Error) throw reply;
    // The reply of whatever owns the request: a parent agent's AgentReply, a direct spawn's SubagentOutcome.
    return reply as R;
  }

  /**
   * Run one subagent directly (not through a parent's `task` call): the same
   * pool, cancellation, approval, deadlines and delegation as delegated runs.
   * Resolves with its outcome once its whole tree has ended — or suspended:
   * answer its question and `answer()` resolves with what it did then.
   */
  spawn<G extends AgentFor<S>>(agent: G, options: SpawnOptionsFor<G, S, I>): Promise<SubagentOutcome<OutputOf<G>>>;
  // Not an async function: a spawn of a loaded agent (the norm) starts its run
  // synchronously and its promise is settled by the run tree directly, with no
  // async frame and no await hop on every run's way back. Every throw before
  // the run starts is a rejection, as from an async function.
  spawn(agent: Agent, given: unknown): Promise<SubagentOutcome> {
    const options = given as SpawnOptions;
    try {
      this.#assertOpen();
      if (!isAgent(agent))
        throw new InvalidArgumentError('spawn(agent): pass an agent made with defineAgent', {
          code: 'ERR_UNKNOWN_AGENT',
        });
      if (typeof options !== 'object' || options === null)
        throw new InvalidArgumentError('spawn: pass { input, scope, ... }');
      if (typeof options.input !== 'string') throw new InvalidArgumentError('spawn: input must be a string');
      const timeoutMs = options.timeoutMs ?? this.#o.subagentTimeoutMs;
      if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
        throw new InvalidArgumentError(
          `spawn: timeoutMs must be a non-negative number of ms, got ${describeValue(timeoutMs)}`,
        );
      }
      if (checkSignal(options.signal, 'spawn({ signal })')?.aborted)
        throw new CancelledError('user', 'the spawn was aborted before it started');
      const scope = this.#sealScope(options.scope);
      const toolContext = sealToolContext(options.toolContext);
      if (options.metadata !== undefined) checkMetadata(options.metadata);
      // Loaded already (the common case): no await on the way to the dispatch.
      const loaded = agent.module === undefined ? undefined : loadedAgent(agent.module, agent.name);
      if (loaded === undefined) return this.#spawnLoading(agent, options, scope, toolContext, timeoutMs);
      return this.#spawnStart(loaded, options, scope, toolContext, timeoutMs);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async #spawnLoading(
    agent: Agent,
    options: SpawnOptions,
    scope: Scope,
    toolContext: Readonly<Record<string, unknown>>,
    timeoutMs: number | undefined,
  ): Promise<SubagentOutcome> {
    const def = await definitionOf(agent);
    this.#assertOpen();
    return this.#spawnStart(def, options, scope, toolContext, timeoutMs);
  }

  // Throws for a full queue (a rejection: both callers turn throws into one).
  #spawnStart(
    def: Agent,
    options: SpawnOptions,
    scope: Scope,
    toolContext: Readonly<Record<string, unknown>>,
    timeoutMs: number | undefined,
  ): Promise<SubagentOutcome> {
    if (!this.#tree.canQueue()) throw this.#tree.backpressure();
    const tree = this.#tree;
    const root = tree.startRoot({
      kind: 'spawn',
      agent: def,
      agentId: createId('agent'),
      scope,
      toolContext,
      owner: this.#spawnOwner,
      input: options.input,
      metadata: options.metadata,
      timeoutMs,
    });
    const signal = options.signal;
    const onAbort =
      signal === undefined
        ? undefined
        : (): void => {
            tree.cancel(root, 'user');
          };
    if (onAbort !== undefined) signal?.addEventListener('abort', onAbort, { once: true });
    return new Promise((resolve, reject) => {
      tree.onQuiet(root, (outcome) => {
        if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome as SubagentOutcome);
      });
    });
  }

  /**
   * The scope a live run acts for (a parent agent's message, a subagent at
   * any depth, a direct spawn), by agent id: for host code that derives
   * something from it at the edge, such as a tracing bridge's tenant hash.
   * `undefined` when no run of that agent is live.
   */
  scopeOf(agentId: string): Scope | undefined {
    return this.#tree.nodeOf(agentId)?.scope;
  }

  /** Cancel a parent agent's message, a direct spawn or any running subagent, by agent id (its whole subtree). */
  cancel(agentId: string, reason: CancelReason = 'user'): boolean {
    const parent = this.#agents.held(agentId);
    if (parent !== undefined) return parent.cancel(reason);
    return this.#tree.cancelAgent(agentId, reason);
  }

  stats(): SupervisorStats {
    const tree = this.#tree.stats();
    const transport = this.#tree.transport.stats();
    return {
      agents: this.#agents.size,
      pendingRequests: tree.requests,
      runs: tree.runs,
      suspendedSubagents: tree.suspendedBelowRoots,
      refused: transport.refused,
      pool: {
        threads: transport.threads ?? transport.slots,
        running: tree.running,
        queued: transport.queued,
        openPorts: transport.openPorts ?? 0,
        tableSize: (transport.tableSize ?? 0) + tree.localSlots,
        completed: transport.completed,
      },
    };
  }

  /**
   * Stop a parent agent and forget it. Its saved state stays in the store
   * (a new `startAgent` with its id restores it); an in-memory store may
   * drop it unless a request of it is open. A running message is cancelled;
   * a reply still being saved is waited for up to `pool.graceMs`, after
   * which its `send` settles `failed` with `ERR_AGENT_STOPPED` (the save was
   * not confirmed) — as `close()` and `destroy()` do, with `ERR_CLOSED`.
   */
  async stopAgent(agentId: string): Promise<void> {
    const parent = this.#agents.get(agentId);
    if (parent === undefined) return;
    const stopped = await this.#withinGrace(parent.stop());
    if (!stopped) {
      parent.abandon(
        new TroupeError(
          `agent ${agentId} was stopped while its reply was being saved and the store did not answer within the grace period (${this.#graceMs} ms): whether the reply was saved is not known; a restart loads what the store has`,
          { code: 'ERR_AGENT_STOPPED' },
        ),
      );
    }
    this.#agents.forget(parent);
    await this.#withinGrace(
      this.#o.persistence?.release(parent.scope, { agentId: parent.id, conversationId: parent.conversationId }),
    );
  }

  // True if `work` fulfilled within the grace period, false if the period ended first; rejects
  // if it rejected within it (a store's error is the caller's to see). The timer holds the process
  // while it waits (the system clock's timers are unref'd: a script awaiting this must not exit 13).
  async #withinGrace(work: Promise<unknown> | undefined): Promise<boolean> {
    if (work === undefined) return true;
    let timer: unknown;
    const grace = new Promise<boolean>((resolve) => {
      timer = this.#clock.setTimeout(() => resolve(false), this.#graceMs);
      (timer as { ref?: () => void }).ref?.();
    });
    try {
      return await Promise.race([work.then(() => true), grace]);
    } finally {
      this.#clock.clearTimeout(timer);
    }
  }

  /**
   * Refuse new work, let running messages and spawns finish for up to
   * `timeoutMs` (default 30 s), then cancel what still runs (reason
   * `shutdown`; killed after the grace period if it ignores it), persist,
   * and resolve once every worker has exited. Suspended conversations keep
   * their saved questions for a new supervisor — in a durable store: the
   * in-memory store (the default) and `persistence: null` drop them, and say
   * so (`requests.dropped`, or a process warning when nobody listens).
   * Idempotent.
   */
  close(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    if (typeof options !== 'object' || options === null) {
      return Promise.reject(
        new InvalidArgumentError(`close(options): pass { timeoutMs } or nothing, got ${describeValue(options)}`),
      );
    }
    const timeoutMs = options.timeoutMs ?? 30_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      return Promise.reject(
        new InvalidArgumentError(`close({ timeoutMs }) must be a non-negative number, got ${timeoutMs}`),
      );
    }
    this.#closing = (async () => {
      const tree = this.#tree;
      let timer: unknown;
      let timedOut = false;
      const deadline = new Promise<void>((resolve) => {
        timer = this.#clock.setTimeout(() => {
          timedOut = true;
          for (const a of this.#agents.values()) a.dropMailbox();
          tree.cancelRunning('shutdown');
          resolve();
        }, timeoutMs);
        // The system clock's timers are unref'd: a script awaiting close() must not exit under it
        // (exit 13) while a reply's write is still in flight and nothing else holds the process.
        (timer as { ref?: () => void }).ref?.();
      });
      // Messages queued in mailboxes still run until the deadline; then nothing new starts.
      const drained = (async () => {
        while (!timedOut) {
          await Promise.all([...this.#agents.values()].map((a) => a.whenIdle()));
          await tree.whenIdle();
          if ([...this.#agents.values()].every((a) => a.status !== 'running')) break;
        }
      })();
      await Promise.race([drained, deadline]);
      this.#clock.clearTimeout(timer);
      if (this.#destroying !== undefined) {
        // destroy() took over during the drain.
        await this.#destroying;
        return;
      }
      // Bounded: what was cancelled ends cooperatively or is killed after the grace period.
      await tree.whenIdle();
      this.#reportDropped();
      await this.#stopAgents();
      this.#agents.clear();
      tree.endSuspendedSpawns();
      await tree.closeTransport(this.#graceMs);
      await this.#o.persistence?.close?.();
      this.#closed = true;
    })();
    return this.#closing;
  }

  /**
   * Tear down at once, also during a `close()`: running messages and spawns
   * end cancelled (shutdown, forced); workers are terminated; the store is
   * closed, keeping what it saved (suspended conversations keep their
   * questions). Idempotent.
   */
  destroy(): Promise<void> {
    this.#closed = true;
    const tree = this.#tree;
    this.#destroying ??= (async () => {
      for (const a of this.#agents.values()) a.dropMailbox();
      tree.leaveSavedOnShutdown();
      tree.cancelRunning('shutdown');
      await tree.destroyTransport();
      await tree.whenIdle();
      this.#reportDropped();
      await this.#stopAgents();
      this.#agents.clear();
      tree.endSuspendedSpawns();
      // What was saved stays saved; the store is closed as by close() (a close() after this returns this).
      await this.#o.persistence?.close?.();
    })();
    this.#closing ??= this.#destroying;
    return this.#destroying;
  }

  #droppedReported = false;

  // The open questions a store that does not outlive the supervisor takes with it: said, once.
  #reportDropped(): void {
    if (this.#droppedReported) return;
    this.#droppedReported = true;
    const held = this.#tree.requests.openRequests().map((r) => r.request.id);
    reportDroppedRequests(this, this.#o.persistence, held, this.#clock.now());
  }

  // Stop every agent; a reply still being saved is waited for, up to the grace period (a
  // store that never answers does not hold a shutdown forever), before the store is closed.
  async #stopAgents(): Promise<void> {
    const agents = [...this.#agents.values()];
    const stopped = new Set<ParentAgent>();
    await this.#withinGrace(Promise.all(agents.map((a) => a.stop().finally(() => stopped.add(a)))));
    // Still saving when the grace period ended: their callers get an error now, not never.
    for (const a of agents) {
      if (stopped.has(a)) continue;
      a.abandon(
        new ClosedError(
          `the supervisor closed while agent ${a.id}'s reply was being saved and the store did not answer within the grace period (${this.#graceMs} ms): whether the reply was saved is not known; a restart loads what the store has`,
        ),
      );
    }
  }

  /** `await using supervisor = createSupervisor(...)` calls `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

// A store's request as the host sees it.
function infoOf(r: RequestRecord): PendingRequestInfo {
  return {
    request: r.request,
    agentId: r.agentId,
    path: r.path,
    openedAt: r.openedAt,
    conversationId: r.conversationId,
  };
}

/**
 * Create a supervisor: validated, defaulted options; a warm pool of worker
 * threads is started at once (await `supervisor.ready()` to wait for it).
 *
 * @example
 * ```ts
 * import { defineAgent } from '@troupe/core'
 *
 * const coordinator = defineAgent({ name: 'coordinator', instructions: 'Coordinate the incident work.', model })
 * await using supervisor = createSupervisor({ approval: async () => ({ decision: 'approve' }) })
 * const assistant = await supervisor.startAgent(coordinator, { scope: { userId: 'u1', orgId: 'o1', role: 'admin' } })
 * const reply = await assistant.send('Summarise the open incidents')
 * ```
 */
export function createSupervisor<S = unknown, I = S, A extends Agent = Agent>(
  options: SupervisorOptions<S, I, A> = {},
): Supervisor<S, I, A> {
  return new Supervisor(options);
}
