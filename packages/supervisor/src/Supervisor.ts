import {
  type Agent,
  type AgentId,
  Answer,
  type ApprovalHandler,
  assertCloneable,
  type CancelReason,
  type Clock,
  ClosedError,
  createId,
  DEFAULT_SCOPE_BUDGET_BYTES,
  deepFreeze,
  freezeReceived,
  InvalidArgumentError,
  initialLoopState,
  isAgent,
  type Metadata,
  type Request,
  type Scope,
  type ScopeDefinition,
  sealScope,
} from '@troupe/core';
import { EventEmitter } from 'eventemitter3';
import type { AgentHandle, AgentReply } from './AgentHandle.js';
import { Delegation, emitOutcome, emitSpawned, hasTelemetryListeners } from './internal/Delegation.js';
import { ParentAgent } from './internal/ParentAgent.js';
import { MemoryPersistence } from './MemoryPersistence.js';
import type { PersistenceAdapter } from './Persistence.js';
import { checkRestartPolicy, type RestartPolicy } from './RestartPolicy.js';
import { migrateEnvelope } from './StateEnvelope.js';
import type { SubagentOutcome } from './SubagentOutcome.js';
import { type SpawnSpec, SubagentPool, type SubagentPoolOptions } from './SubagentPool.js';
import type { SupervisorEvents } from './SupervisorEvents.js';

/** Options of `createSupervisor`; validated and defaulted once. */
export interface SupervisorOptions {
  /** Parent agents the host may start by name (optional: `startAgent` also takes an agent). */
  readonly agents?: readonly Agent[];
  /** The worker pool (threads, resourceLimits, maxQueue, graceMs, ...). */
  readonly pool?: SubagentPoolOptions;
  /**
   * Decides on calls of tools with `requiresApproval`, for parents and
   * subagents alike, on the supervisor thread only. None: such calls are denied.
   */
  readonly approval?: ApprovalHandler;
  /** Where agent state is saved (default: in memory; `null`: nowhere). */
  readonly persistence?: PersistenceAdapter | null;
  readonly clock?: Clock;
  /** Validates every scope at the edge (default: any cloneable plain data within the budget). */
  readonly scope?: ScopeDefinition<unknown>;
  /** Serialized-size budget of a scope when no `scope` definition is given (default 4096). */
  readonly scopeBudgetBytes?: number;
  /** Messages a parent agent may hold waiting (default 256). */
  readonly mailboxSize?: number;
  /** OTP-style restart intensity of parent agents (default 3 within 5000 ms). */
  readonly restart?: Partial<RestartPolicy>;
  /** Default relative deadline of every subagent run (default none). */
  readonly subagentTimeoutMs?: number;
}

/** Options of {@link Supervisor.startAgent}. */
export interface StartAgentOptions {
  /** Who the agent acts for. Never persisted: re-supply it on restore. */
  readonly scope: unknown;
  readonly toolContext?: Readonly<Record<string, unknown>>;
  /** Groups the saved state; default: the agent id. */
  readonly conversationId?: string;
  /** Give the same id (and conversation) to restore a saved agent; default: a fresh id. */
  readonly agentId?: string;
  /** Initial metadata of a new agent (default `{}`). */
  readonly metadata?: Metadata;
}

/** A request waiting for a person, as the host sees it. */
export interface PendingRequestInfo {
  readonly request: Request;
  /** The parent agent that holds the conversation. */
  readonly agentId: AgentId;
  /** Agent ids from the parent down to the one whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
}

/** Figures about a supervisor, for daemons and leak checks. */
export interface SupervisorStats {
  readonly agents: number;
  readonly pendingRequests: number;
  readonly pool: ReturnType<SubagentPool['stats']>;
  readonly suspendedSubagents: number;
}

const ANSWERED_MEMORY = 10_000;
const EMPTY_CONTEXT: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * The supervisor: owns parent agents (actors on this thread), a warm pool of
 * worker threads for subagents, the shared cancellation table and its
 * watchdog, approval routing and the requests waiting for people.
 *
 * Emits typed events ({@link SupervisorEvents}). Lifecycle: `close()` is
 * graceful and bounded, `destroy()` immediate, both idempotent;
 * `await using supervisor = createSupervisor(...)` closes it; every call
 * after close fails with a `ClosedError`.
 */
export class Supervisor extends EventEmitter<SupervisorEvents> {
  /** The worker pool. */
  readonly pool: SubagentPool;
  readonly #clock: Clock;
  readonly #delegation: Delegation;
  readonly #persistence: PersistenceAdapter | undefined;
  readonly #scope: ScopeDefinition<unknown> | undefined;
  readonly #scopeBudget: number;
  readonly #mailboxSize: number;
  readonly #restart: RestartPolicy;
  readonly #agentsByName = new Map<string, Agent>();
  readonly #agents = new Map<string, ParentAgent>();
  readonly #pending = new Map<string, PendingRequestInfo & { readonly agent: ParentAgent }>();
  readonly #answered = new Set<string>();
  readonly #parsedScopes = new WeakSet<object>();
  #closing: Promise<void> | undefined;
  #closed = false;

  constructor(options: SupervisorOptions = {}) {
    super();
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('createSupervisor(options): pass an object');
    for (const agent of options.agents ?? []) {
      if (!isAgent(agent)) throw new InvalidArgumentError('options.agents must hold agents made with defineAgent');
      if (this.#agentsByName.has(agent.name)) throw new InvalidArgumentError(`two agents are named "${agent.name}"`);
      this.#agentsByName.set(agent.name, agent);
    }
    if (options.approval !== undefined && typeof options.approval !== 'function') {
      throw new InvalidArgumentError('options.approval must be a function (request, { signal }) => decision');
    }
    const mailboxSize = options.mailboxSize ?? 256;
    if (!Number.isSafeInteger(mailboxSize) || mailboxSize < 1) {
      throw new InvalidArgumentError(`options.mailboxSize must be a positive integer, got ${String(mailboxSize)}`);
    }
    const budget = options.scopeBudgetBytes ?? options.scope?.budgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES;
    if (!Number.isSafeInteger(budget) || budget <= 0) {
      throw new InvalidArgumentError(`options.scopeBudgetBytes must be a positive integer, got ${String(budget)}`);
    }
    const timeout = options.subagentTimeoutMs;
    if (timeout !== undefined && (!Number.isFinite(timeout) || timeout <= 0)) {
      throw new InvalidArgumentError(
        `options.subagentTimeoutMs must be a positive number of ms, got ${String(timeout)}`,
      );
    }
    const persistence =
      options.persistence === undefined ? new MemoryPersistence() : (options.persistence ?? undefined);
    if (
      persistence !== undefined &&
      (typeof persistence.persistState !== 'function' || typeof persistence.loadState !== 'function')
    ) {
      throw new InvalidArgumentError('options.persistence must implement persistState, loadState and saveMessage');
    }
    this.#restart = checkRestartPolicy(options.restart);
    this.#mailboxSize = mailboxSize;
    this.#scope = options.scope;
    this.#scopeBudget = budget;
    this.#persistence = persistence;
    this.pool = new SubagentPool({
      ...options.pool,
      scopeBudgetBytes: budget,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
    this.#clock = this.pool.clock;
    this.#delegation = new Delegation({
      pool: this.pool,
      clock: this.#clock,
      events: this,
      approval: options.approval,
      subagentTimeoutMs: timeout,
    });
  }

  #assertOpen(): void {
    if (this.#closed || this.#closing !== undefined)
      throw new ClosedError('the supervisor is closed: create a new one');
  }

  #sealScope(input: unknown): Scope {
    // Without a schema, sealScope remembers what it sealed. With one, a scope is
    // taken as is only if this supervisor's schema produced it.
    if (this.#scope === undefined) return sealScope(input, this.#scopeBudget) as Scope;
    if (typeof input === 'object' && input !== null && this.#parsedScopes.has(input)) return input as Scope;
    const scope = this.#scope.parse(input);
    if (typeof scope === 'object' && scope !== null) this.#parsedScopes.add(scope);
    return scope as Scope;
  }

  /**
   * Start (or restore) a parent agent. With the `agentId` and
   * `conversationId` of a saved agent, its state is loaded from persistence
   * (with the scope given now: scope is never saved), including an open
   * request, which is listed by `pendingRequests()` again.
   */
  async startAgent(agent: Agent | string, options: StartAgentOptions): Promise<AgentHandle> {
    this.#assertOpen();
    const def = typeof agent === 'string' ? this.#agentsByName.get(agent) : agent;
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
    const toolContext = options.toolContext ?? {};
    if (typeof toolContext !== 'object' || toolContext === null || Array.isArray(toolContext)) {
      throw new InvalidArgumentError('toolContext must be a plain object of static data (feature flags, request ids)');
    }
    assertCloneable(toolContext, 'toolContext');
    const metadata = options.metadata ?? {};
    assertCloneable(metadata, 'metadata');
    if (
      options.agentId !== undefined &&
      (typeof options.agentId !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(options.agentId))
    ) {
      throw new InvalidArgumentError('agentId must be 1-128 characters of [A-Za-z0-9_.:-]');
    }
    const id = (options.agentId ?? createId('agent')) as AgentId;
    if (this.#agents.has(id)) throw new InvalidArgumentError(`agent ${id} is already started: use its handle`);
    const conversationId = options.conversationId ?? id;
    if (typeof conversationId !== 'string' || conversationId.length === 0) {
      throw new InvalidArgumentError('conversationId must be a non-empty string');
    }
    const loaded = await this.#persistence?.loadState(scope, { agentId: id, conversationId });
    // Stores migrate on read; an adapter that does not is held to the same versions here.
    const saved = loaded === undefined ? undefined : migrateEnvelope(loaded, `the saved state of ${id}`);
    this.#assertOpen();
    const parent = new ParentAgent(
      def,
      {
        id,
        conversationId,
        scope,
        toolContext: deepFreeze({ ...toolContext }),
        state: saved?.state ?? initialLoopState(id, def.instructions, freezeReceived(structuredClone(metadata))),
        pending:
          saved?.pendingRequest === undefined
            ? undefined
            : { request: saved.pendingRequest.request, path: saved.pendingRequest.path },
        children: saved?.childCounter ?? 0,
      },
      {
        table: this.pool.table,
        clock: this.#clock,
        events: this,
        delegation: this.#delegation,
        persistence: this.#persistence,
        restart: this.#restart,
        mailboxSize: this.#mailboxSize,
        onRequestOpened: (a, request, path) => this.#open(a, request, path),
        onRequestWithdrawn: (requestId) => {
          this.#pending.delete(requestId);
        },
        closed: () => this.#closed || this.#closing !== undefined,
      },
    );
    this.#agents.set(id, parent);
    this.emit('agent.started', { agentId: id, agent: def.name, conversationId, at: this.#clock.now() });
    if (parent.pendingRequest !== undefined) {
      this.#open(parent, parent.pendingRequest.request, parent.pendingRequest.path);
    }
    return parent;
  }

  #open(agent: ParentAgent, request: Request, path: readonly AgentId[]): void {
    const info = { request, agentId: agent.id, path, openedAt: this.#clock.now(), agent };
    this.#pending.set(request.id, info);
    this.emit('request.opened', { request, agentId: agent.id, path, at: info.openedAt });
  }

  /** The handle of a started agent, by id. */
  agent(agentId: string): AgentHandle | undefined {
    return this.#agents.get(agentId);
  }

  /** Requests waiting for a person, oldest first. */
  pendingRequests(): PendingRequestInfo[] {
    return [...this.#pending.values()].map(({ agent: _agent, ...info }) => info);
  }

  /**
   * Answer a pending request and resume its run on any worker: the tool that
   * asked is re-run exactly once with `ctx.answer` (a declined or expired
   * answer becomes an error result the model sees). Resolves with the
   * resumed message's reply, which may be another suspension.
   *
   * Refused with a typed error, leaving the request open: a malformed answer
   * (`ERR_INVALID_ARGUMENT`). Refused: an unknown id (`ERR_UNKNOWN_REQUEST`), a
   * second answer (`ERR_REQUEST_ALREADY_ANSWERED`).
   */
  async answer(requestId: string, answer: Omit<Answer, 'id'> & { readonly id?: string }): Promise<AgentReply> {
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
    const entry = this.#pending.get(requestId);
    if (entry === undefined) {
      if (this.#answered.has(requestId)) {
        throw new InvalidArgumentError(`request ${requestId} was already answered: an answer is taken once`, {
          code: 'ERR_REQUEST_ALREADY_ANSWERED',
        });
      }
      throw new InvalidArgumentError(`no pending request ${requestId}: see pendingRequests()`, {
        code: 'ERR_UNKNOWN_REQUEST',
      });
    }
    this.#pending.delete(requestId);
    this.#answered.add(requestId);
    if (this.#answered.size > ANSWERED_MEMORY) {
      const oldest = this.#answered.values().next().value;
      if (oldest !== undefined) this.#answered.delete(oldest);
    }
    this.emit('request.answered', { requestId, agentId: entry.agentId, ok: parsed.data.ok, at: this.#clock.now() });
    return entry.agent.resume(parsed.data);
  }

  /**
   * Run one subagent directly (not through a parent's `task` call): the same
   * pool, cancellation, approval and delegation as delegated runs.
   */
  async spawn(
    agent: Agent,
    options: {
      readonly input: string;
      readonly scope: unknown;
      readonly toolContext?: Readonly<Record<string, unknown>>;
      readonly metadata?: Metadata;
      readonly timeoutMs?: number;
      readonly signal?: AbortSignal;
    },
  ): Promise<SubagentOutcome> {
    this.#assertOpen();
    const scope = this.#sealScope(options.scope);
    // Frozen in place, as startAgent does: a copy per call would be a new object
    // the pool has never checked, walked and frozen again on every spawn.
    const toolContext = options.toolContext === undefined ? EMPTY_CONTEXT : deepFreeze(options.toolContext);
    const agentId = createId('agent');
    let n = 0;
    const telemetry = hasTelemetryListeners(this);
    const spec: SpawnSpec = {
      agent,
      agentId,
      input: options.input,
      scope,
      toolContext,
      metadata: options.metadata,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
      telemetry,
      host: this.#delegation.hostFor(
        { agentId, agent, scope, toolContext, ancestry: [], nextChild: () => ++n },
        telemetry,
      ),
    };
    // A direct spawn is a spawn like any other: the same events, so a daemon sees its scope cost.
    emitSpawned(this, this.#clock, spec, agentId, undefined, agent.name);
    const outcome = await this.pool.run(spec);
    // Like a delegated run, a direct one is over only when its own children are.
    const children = this.#delegation.drain(agentId);
    if (children !== undefined) await children;
    emitOutcome(this, this.#clock.now(), outcome, undefined);
    return outcome;
  }

  /** Cancel a parent agent's message or any running subagent, by id. */
  cancel(agentId: string, reason: CancelReason = 'user'): boolean {
    const parent = this.#agents.get(agentId);
    if (parent !== undefined) return parent.cancel(reason);
    return this.pool.cancel(agentId as AgentId, reason);
  }

  stats(): SupervisorStats {
    return {
      agents: this.#agents.size,
      pendingRequests: this.#pending.size,
      pool: this.pool.stats(),
      suspendedSubagents: this.#delegation.sizes.suspended,
    };
  }

  /** Stop a parent agent and forget it (its saved state stays in persistence). */
  async stopAgent(agentId: string): Promise<void> {
    const parent = this.#agents.get(agentId);
    if (parent === undefined) return;
    await parent.stop();
    this.#agents.delete(agentId);
  }

  /**
   * Refuse new work, let running messages finish for up to `timeoutMs`
   * (default 30 s), then cancel them (reason `shutdown`), persist, and resolve
   * once every worker has exited. Idempotent.
   */
  close(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    const timeoutMs = options.timeoutMs ?? 30_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      return Promise.reject(
        new InvalidArgumentError(`close({ timeoutMs }) must be a non-negative number, got ${timeoutMs}`),
      );
    }
    this.#closing = (async () => {
      const started = this.#clock.now();
      const idle = Promise.all([...this.#agents.values()].map((a) => a.whenIdle()));
      let timer: unknown;
      const timedOut = new Promise<void>((resolve) => {
        timer = this.#clock.setTimeout(() => {
          for (const a of this.#agents.values()) a.cancel('shutdown');
          resolve();
        }, timeoutMs);
      });
      await Promise.race([idle, timedOut]);
      await idle;
      this.#clock.clearTimeout(timer);
      // Every agent is idle or suspended now, its state saved after its last message:
      // stop them (a suspended one keeps its saved request for a new supervisor).
      await Promise.all([...this.#agents.values()].map((a) => a.stop()));
      this.#agents.clear();
      this.#pending.clear();
      const left = Math.max(0, timeoutMs - (this.#clock.now() - started));
      await this.pool.close({ timeoutMs: left });
      await this.#persistence?.close?.();
      this.#closed = true;
    })();
    return this.#closing;
  }

  /** Tear down at once: running messages end cancelled (shutdown); workers are terminated. Idempotent. */
  async destroy(): Promise<void> {
    this.#closed = true;
    this.#closing ??= Promise.resolve();
    for (const a of this.#agents.values()) a.cancel('shutdown');
    await this.pool.destroy();
    this.#agents.clear();
    this.#pending.clear();
  }

  /** `await using supervisor = createSupervisor(...)` calls `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Create a supervisor: validated, defaulted options; a warm pool of worker
 * threads is started at once (await `supervisor.pool.ready()` to wait for it).
 *
 * @example
 * ```ts
 * await using supervisor = createSupervisor({ approval: async () => ({ decision: 'approve' }) })
 * const assistant = await supervisor.startAgent(coordinator, { scope: { userId: 'u1', orgId: 'o1', role: 'admin' } })
 * const reply = await assistant.send('Summarise the open incidents')
 * ```
 */
export function createSupervisor(options: SupervisorOptions = {}): Supervisor {
  return new Supervisor(options);
}
