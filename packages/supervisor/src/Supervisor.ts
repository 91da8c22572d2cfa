import type { ResourceLimits } from 'node:worker_threads';
import {
  type Agent,
  type AgentId,
  Answer,
  type ApprovalHandler,
  assertCloneable,
  assertJson,
  BackpressureError,
  CancelledError,
  type CancelReason,
  type Clock,
  ClosedError,
  createId,
  DEFAULT_SCOPE_BUDGET_BYTES,
  type DeepReadonly,
  deepFreeze,
  InvalidArgumentError,
  isAgent,
  isDeepFrozen,
  isTroupeError,
  type LoopState,
  type Metadata,
  type Request,
  type Scope,
  type ScopeDefinition,
  sealScope,
  TroupeError,
  type Usage,
} from '@troupe/core';
import { describeValue, freezeReceived, initialLoopState } from '@troupe/core/internal';
import { loadedAgent, systemClock } from '@troupe/subagent';
import { EventEmitter } from 'eventemitter3';
import { z } from 'zod';
import type { AgentHandle, AgentReply } from './AgentHandle.js';
import { checkSignal } from './internal/checkSignal.js';
import { ParentAgent, type ParentAgentDeps } from './internal/ParentAgent.js';
import { firstOpenRequest, type RootOwner, type RunNode, totalOf } from './internal/RunNode.js';
import { Durability } from './persistence/Durability.js';
import { MemoryPersistence } from './persistence/MemoryPersistence.js';
import type {
  ListOptions,
  Page,
  PersistenceAdapter,
  PersistenceContext,
  RequestRecord,
  RunRecord,
} from './persistence/Persistence.js';
import { type AgentStateEnvelope, migrateEnvelope, stateBefore } from './persistence/StateEnvelope.js';
import { checkRestartPolicy, type RestartPolicy } from './RestartPolicy.js';
import { definitionOf, type RestoredRequest, type RestoredRun, RunTree, restoredDefinition } from './RunTree.js';
import type { SubagentOutcome } from './SubagentOutcome.js';
import type { SupervisorEvents } from './SupervisorEvents.js';

/**
 * Options of the worker pool (`createSupervisor({ pool })`).
 *
 * @example
 * ```ts
 * const pool: PoolOptions = { threads: 2, maxQueue: 256, resourceLimits: { maxOldGenerationSizeMb: 256 } }
 * const supervisor = createSupervisor({ pool })
 * ```
 */
export interface PoolOptions {
  /** Worker threads, started up front (default: the machine's available parallelism). */
  readonly threads?: number;
  /** Per-worker V8 limits; a worker over its heap limit dies and its run ends `crashed`. */
  readonly resourceLimits?: ResourceLimits;
  /** Runs that may wait for a thread; past it a spawn is refused with a `BackpressureError` (default 1024). */
  readonly maxQueue?: number;
  /**
   * How long a cancelled run may take to stop before its worker is killed (default 1000 ms); also
   * how long `close()`, `destroy()` and `stopAgent()` wait for a reply still being saved.
   */
  readonly graceMs?: number;
  /** How often the watchdog looks at deadlines while runs are in flight (default 10 ms). */
  readonly watchdogIntervalMs?: number;
  /** Initial capacity of this thread's cancellation slots (they grow). */
  readonly tableCapacity?: number;
  /** Host-channel messages a worker may send per second before it counts as a flood and is recycled (default 50,000). */
  readonly floodLimit?: number;
}

/**
 * Options of `createSupervisor`; validated and defaulted once. `S` and `I` are
 * what the `scope` definition produces and accepts (see {@link Supervisor}).
 *
 * @example
 * ```ts
 * const options: SupervisorOptions = {
 *   pool: { threads: 2 },
 *   scopeBudgetBytes: 2048,
 *   subagentTimeoutMs: 60_000,
 *   approval: () => ({ decision: 'approve' }),
 * }
 * const supervisor = createSupervisor(options)
 * ```
 */
export interface SupervisorOptions<S = unknown, I = S> {
  /** Parent agents the host may start by name (optional: `startAgent` also takes an agent). */
  readonly agents?: readonly Agent[];
  /** The worker pool (threads, resourceLimits, maxQueue, graceMs, ...). */
  readonly pool?: PoolOptions;
  /**
   * Decides on calls of tools with `requiresApproval`, for parents and
   * subagents alike, on the supervisor thread only. None: such calls are denied.
   */
  readonly approval?: ApprovalHandler;
  /**
   * Where conversations, runs, questions and tool calls are saved (default:
   * a bounded `MemoryPersistence`; `null`: nowhere). A daemon passes
   * `sqlitePersistence({ file })` from `@troupe/sqlite`: every turn is then
   * checkpointed, and a new supervisor on the same file restores what was
   * open (`startAgent`, `answer(id, answer, { scope })`).
   */
  readonly persistence?: PersistenceAdapter | null;
  /**
   * Idle parent agents this supervisor keeps holding (least recently used
   * first out; default 1000). Past it an idle agent is held only by its
   * handle: once the host drops that too, it is collected, and `startAgent`
   * with its id restores it from the store. Without a store nothing is let go.
   */
  readonly maxIdleAgents?: number;
  /**
   * The supervisor's time base: run deadlines, request expiry, event times.
   * Workers cannot share an injected clock: a deadline reaches a worker as
   * the time it has left, and a tool's own timeout runs on the system clock.
   */
  readonly clock?: Clock;
  /** Validates every scope at the edge (default: any cloneable plain data within the budget). */
  readonly scope?: ScopeDefinition<S, I>;
  /** Serialized-size budget of a scope when no `scope` definition is given (default 4096). */
  readonly scopeBudgetBytes?: number;
  /** Messages a parent agent may hold waiting (default 256). */
  readonly mailboxSize?: number;
  /** Restart intensity of parent agents (default 3 within 5000 ms). */
  readonly restart?: Partial<RestartPolicy>;
  /** Default relative deadline of every subagent run and direct spawn, re-armed on each resume (default none). */
  readonly subagentTimeoutMs?: number;
}

/**
 * Options of {@link Supervisor.startAgent}: `I` is the scope it takes, `TC` the
 * agent's `toolContext` (required when the agent's tools declare keys).
 *
 * @example
 * ```ts
 * const options: StartAgentOptions = { scope: { userId: 'u1' }, conversationId: 'support-42' }
 * const handle = await supervisor.startAgent(agent, options)
 * ```
 */
export interface StartAgentOptions<I = unknown, TC extends object = Readonly<Record<string, unknown>>> {
  /** Who the agent acts for. Never persisted: re-supply it on restore. */
  readonly scope: I;
  readonly toolContext?: TC;
  /** Groups the saved state; default: the agent id. */
  readonly conversationId?: string;
  /** Give the same id (and conversation) to restore a saved agent; default: a fresh id. */
  readonly agentId?: string;
  /** Initial metadata of a new agent (default `{}`). */
  readonly metadata?: Metadata;
}

/** Options of {@link Supervisor.answer}. */
export interface AnswerOptions {
  /**
   * Who answers, when the request is not open in this supervisor (after a
   * restart): the store is asked for it under this scope's tenant and its
   * conversation is restored with this scope (scope is never saved).
   */
  readonly scope?: unknown;
  /** The restored conversation's toolContext. */
  readonly toolContext?: Readonly<Record<string, unknown>>;
}

/**
 * Options of {@link Supervisor.spawn}: `I` and `TC` as in {@link StartAgentOptions}.
 *
 * @example
 * ```ts
 * const options: SpawnOptions = { input: 'Classify this ticket', scope: { tenantId: 't1' }, timeoutMs: 30_000 }
 * const outcome = await supervisor.spawn(agent, options)
 * ```
 */
export interface SpawnOptions<I = unknown, TC extends object = Readonly<Record<string, unknown>>> {
  readonly input: string;
  readonly scope: I;
  readonly toolContext?: TC;
  readonly metadata?: Metadata;
  /** Relative deadline of the run (default: the supervisor's `subagentTimeoutMs`). */
  readonly timeoutMs?: number;
  /** Aborting it cancels the run (reason `user`); already aborted: the spawn is refused. */
  readonly signal?: AbortSignal;
}

/**
 * A request waiting for a person, as the host sees it.
 *
 * @example
 * ```ts
 * for (const pending of supervisor.pendingRequests() satisfies PendingRequestInfo[]) {
 *   console.log(`${pending.request.prompt} (from ${pending.path.join(' > ')})`)
 * }
 * ```
 */
export interface PendingRequestInfo {
  readonly request: Request;
  /** The conversation it belongs to (a direct spawn's: none). */
  readonly conversationId?: string | undefined;
  /** The parent agent that holds the conversation (or the spawned agent). */
  readonly agentId: AgentId;
  /** Agent ids from the parent down to the one whose tool asked. */
  readonly path: readonly AgentId[];
  readonly openedAt: number;
}

/**
 * Figures about a supervisor, for daemons and leak checks.
 *
 * @example
 * ```ts
 * const stats: SupervisorStats = supervisor.stats()
 * console.log(`${stats.runs} runs, ${stats.pool.queued} queued, ${stats.pendingRequests} waiting on people`)
 * ```
 */
export interface SupervisorStats {
  readonly agents: number;
  readonly pendingRequests: number;
  /** Runs alive in the run tree (running, suspended or ending). */
  readonly runs: number;
  /** Runs suspended below a parent (waiting on a person somewhere under them). */
  readonly suspendedSubagents: number;
  /** Host-channel messages refused so far. */
  readonly refused: number;
  readonly pool: {
    readonly threads: number;
    readonly running: number;
    readonly queued: number;
    /** Host channels open (at most one per worker thread). */
    readonly openPorts: number;
    /** Cancellation slots in use on this thread. */
    readonly tableSize: number;
    readonly completed: number;
  };
}

const PoolSchema = z
  .object({
    threads: z.number().int().min(1).max(256).optional(),
    resourceLimits: z
      .object({
        maxOldGenerationSizeMb: z.number().positive().optional(),
        maxYoungGenerationSizeMb: z.number().positive().optional(),
        codeRangeSizeMb: z.number().positive().optional(),
        stackSizeMb: z.number().positive().optional(),
      })
      .strict()
      .optional(),
    maxQueue: z.number().int().min(0).optional(),
    graceMs: z.number().finite().min(0).optional(),
    watchdogIntervalMs: z.number().finite().min(1).optional(),
    tableCapacity: z.number().int().positive().optional(),
    floodLimit: z.number().int().positive().optional(),
  })
  .strict();

const EMPTY_CONTEXT: Readonly<Record<string, unknown>> = Object.freeze({});

// A parent agent's toolContext: a frozen copy (the caller's object stays theirs); one shared
// frozen empty object for every agent given none.
function frozenToolContext(toolContext: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> {
  return Object.keys(toolContext).length === 0 ? EMPTY_CONTEXT : deepFreeze({ ...toolContext });
}

const ADAPTER_METHODS = [
  'persistState',
  'loadState',
  'saveMessage',
  'loadMessages',
  'commit',
  'loadRuns',
  'getRun',
  'markInterrupted',
  'startToolCalls',
  'loadToolCalls',
  'openRequest',
  'answerRequest',
  'withdrawRequest',
  'getRequest',
  'listRequests',
  'listConversations',
  'deleteConversation',
  'prune',
  'release',
] as const;

/** What a direct spawn's caller gets: the run's outcome each time its tree is quiet. */
/** The keys of {@link SupervisorOptions}: any other is refused (a misspelt option would be ignored). */
const SUPERVISOR_OPTIONS: ReadonlySet<string> = new Set([
  'agents',
  'pool',
  'approval',
  'persistence',
  'maxIdleAgents',
  'clock',
  'scope',
  'scopeBudgetBytes',
  'mailboxSize',
  'restart',
  'subagentTimeoutMs',
]);

const SPAWN_OWNER: RootOwner = Object.freeze({ settle: outcomeOf });

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
export class Supervisor<S = unknown, I = S> extends EventEmitter<SupervisorEvents> {
  /** The worker pool, as far as a host needs it. */
  readonly pool: { ready(): Promise<void>; stats(): SupervisorStats['pool'] };
  readonly #tree: RunTree;
  readonly #clock: Clock;
  readonly #persistence: PersistenceAdapter | undefined;
  readonly #scope: ScopeDefinition<unknown> | undefined;
  readonly #scopeBudget: number;
  readonly #mailboxSize: number;
  readonly #restart: RestartPolicy;
  readonly #maxQueue: number;
  readonly #subagentTimeoutMs: number | undefined;
  readonly #agentsByName = new Map<string, Agent>();
  /** Parent agents held: every one with work (running, suspended, queued) and up to `maxIdleAgents` idle ones. */
  readonly #agents = new Map<string, ParentAgent>();
  /** Idle agents held, least recently used first (a subset of #agents). */
  readonly #idleAgents = new Set<ParentAgent>();
  /** Agents let go while idle: alive as long as the host holds their handles. */
  readonly #released = new Map<string, WeakRef<ParentAgent>>();
  /** Conversations being restored for an answer, by agent id: a second answer waits for the first restore. */
  readonly #restoring = new Map<string, Promise<void>>();
  readonly #collected = new FinalizationRegistry<string>((id) => {
    const ref = this.#released.get(id);
    if (ref !== undefined && ref.deref() === undefined) this.#released.delete(id);
  });
  /** Agent ids being started (loaded from the store) right now. */
  readonly #starting = new Set<string>();
  readonly #maxIdle: number;
  readonly #durability: Durability | undefined;
  /** The store's runs left running by a dead process, marked interrupted (once, before the first restore). */
  #recovered: Promise<void> | undefined;
  readonly #parsedScopes = new WeakSet<object>();
  readonly #checkedToolContexts = new WeakSet<object>();
  #closing: Promise<void> | undefined;
  /** How long a cancelled run (or a reply being saved at shutdown) gets before it is cut off. */
  readonly #graceMs: number;
  #destroying: Promise<void> | undefined;
  /** Bumped on every listener change (the run tree caches whether anyone listens). */
  #listeners = 0;
  #closed = false;

  constructor(options: SupervisorOptions<S, I> = {}) {
    super();
    if (typeof options !== 'object' || options === null)
      throw new InvalidArgumentError('createSupervisor(options): pass an object');
    for (const key of Object.keys(options)) {
      if (!SUPERVISOR_OPTIONS.has(key)) {
        throw new InvalidArgumentError(
          `createSupervisor: unknown option "${key}" (a misspelling?); the options are ${[...SUPERVISOR_OPTIONS].join(', ')}`,
        );
      }
    }
    if (options.agents !== undefined && !Array.isArray(options.agents)) {
      throw new InvalidArgumentError(
        `options.agents must be an array of agents made with defineAgent, got ${describeValue(options.agents)}`,
      );
    }
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
      throw new InvalidArgumentError(
        `options.mailboxSize must be a positive integer, got ${describeValue(mailboxSize)}`,
      );
    }
    const budget = options.scopeBudgetBytes ?? options.scope?.budgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES;
    if (!Number.isSafeInteger(budget) || budget <= 0) {
      throw new InvalidArgumentError(
        `options.scopeBudgetBytes must be a positive integer, got ${describeValue(budget)}`,
      );
    }
    const timeout = options.subagentTimeoutMs;
    if (timeout !== undefined && (!Number.isFinite(timeout) || timeout <= 0)) {
      throw new InvalidArgumentError(
        `options.subagentTimeoutMs must be a positive number of ms, got ${describeValue(timeout)}`,
      );
    }
    const clock = options.clock ?? systemClock;
    if (
      typeof clock?.now !== 'function' ||
      typeof clock.setTimeout !== 'function' ||
      typeof clock.clearTimeout !== 'function'
    ) {
      throw new InvalidArgumentError('options.clock must have now(), setTimeout() and clearTimeout()');
    }
    const pool = PoolSchema.safeParse(options.pool ?? {});
    if (!pool.success) {
      const issue = pool.error.issues[0];
      throw new InvalidArgumentError(
        `invalid option pool.${issue?.path.join('.') || ''}: ${issue?.message ?? 'invalid'}`,
        { cause: pool.error },
      );
    }
    const persistence =
      options.persistence === undefined ? new MemoryPersistence() : (options.persistence ?? undefined);
    if (persistence !== undefined) {
      if (typeof persistence !== 'object') {
        throw new InvalidArgumentError(
          'options.persistence must be a PersistenceAdapter (e.g. sqlitePersistence({ file }) from @troupe/sqlite) or null',
        );
      }
      const missing = ADAPTER_METHODS.filter(
        (m) => typeof (persistence as unknown as Record<string, unknown>)[m] !== 'function',
      );
      if (missing.length > 0) {
        throw new InvalidArgumentError(
          `options.persistence does not implement ${missing.join(', ')}: implement the whole PersistenceAdapter contract (MemoryPersistence and @troupe/sqlite do), or pass null to save nothing`,
        );
      }
    }
    const maxIdle = options.maxIdleAgents ?? 1000;
    if (!Number.isSafeInteger(maxIdle) || maxIdle < 0) {
      throw new InvalidArgumentError(
        `options.maxIdleAgents must be a non-negative integer, got ${describeValue(maxIdle)}`,
      );
    }
    this.#maxIdle = maxIdle;
    this.#restart = checkRestartPolicy(options.restart);
    this.#mailboxSize = mailboxSize;
    this.#scope = options.scope;
    this.#scopeBudget = budget;
    this.#persistence = persistence;
    this.#durability = persistence === undefined ? undefined : new Durability(persistence, clock);
    this.#clock = clock;
    this.#subagentTimeoutMs = timeout;
    const p = pool.data;
    this.#maxQueue = p.maxQueue ?? 1024;
    this.#graceMs = p.graceMs ?? 1000;
    this.#tree = new RunTree({
      beforeAnswer: (root, requestId) => this.#answerHeldHere(root, requestId),
      clock,
      events: this,
      approval: options.approval,
      threads: p.threads,
      resourceLimits: p.resourceLimits as ResourceLimits | undefined,
      maxQueue: this.#maxQueue,
      graceMs: this.#graceMs,
      watchdogIntervalMs: p.watchdogIntervalMs ?? 10,
      tableCapacity: p.tableCapacity,
      subagentTimeoutMs: timeout,
      floodLimit: p.floodLimit,
      listenersVersion: () => this.#listeners,
      durability: this.#durability,
    });
    const tree = this.#tree;
    this.pool = {
      ready: () => tree.pool.ready(),
      stats: () => this.stats().pool,
    };
  }

  override on<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#listeners++;
    return super.on(event, fn as never, context);
  }

  override addListener<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#listeners++;
    return super.addListener(event, fn as never, context);
  }

  override once<T extends keyof SupervisorEvents>(
    event: T,
    fn: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
  ): this {
    this.#listeners++;
    return super.once(event, fn as never, context);
  }

  override off<T extends keyof SupervisorEvents>(
    event: T,
    fn?: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
    once?: boolean,
  ): this {
    this.#listeners++;
    return super.off(event, fn as never, context, once);
  }

  override removeListener<T extends keyof SupervisorEvents>(
    event: T,
    fn?: (...args: SupervisorEvents[T]) => void,
    context?: unknown,
    once?: boolean,
  ): this {
    this.#listeners++;
    return super.removeListener(event, fn as never, context, once);
  }

  override removeAllListeners(event?: keyof SupervisorEvents): this {
    this.#listeners++;
    return super.removeAllListeners(event);
  }

  /** Resolves once every worker thread has booted (the pool starts them at construction). */
  ready(): Promise<void> {
    return this.#tree.pool.ready();
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

  // Checked and frozen once per object (in place: a copy per call would be checked again every time).
  #toolContext(toolContext: Readonly<Record<string, unknown>> | undefined): Readonly<Record<string, unknown>> {
    if (toolContext === undefined) return EMPTY_CONTEXT;
    if (typeof toolContext !== 'object' || toolContext === null || Array.isArray(toolContext)) {
      throw new InvalidArgumentError('toolContext must be a plain object of static data (feature flags, request ids)');
    }
    if (this.#checkedToolContexts.has(toolContext)) return toolContext;
    assertCloneable(toolContext, 'toolContext');
    const frozen = deepFreeze(toolContext);
    this.#checkedToolContexts.add(frozen);
    return frozen;
  }

  /**
   * Start (or restore) a parent agent. With the `agentId` and
   * `conversationId` of a saved agent, its state is loaded from persistence
   * (with the scope given now: scope is never saved), including an open
   * request, which is listed by `pendingRequests()` again.
   */
  startAgent<SA = unknown, TC extends object = Record<never, never>>(
    agent: Agent<unknown extends S ? SA : S, TC>,
    options: StartAgentOptions<DeepReadonly<unknown extends S ? SA : I>, TC> &
      (Partial<TC> extends TC ? unknown : { readonly toolContext: TC }),
  ): Promise<AgentHandle>;
  /** Start (or restore) an agent given in `options.agents`, by name. */
  startAgent(agent: string, options: StartAgentOptions<DeepReadonly<I>>): Promise<AgentHandle>;
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
    this.#takeId(id);
    this.#starting.add(id);
    try {
      const context: PersistenceContext = { agentId: id, conversationId };
      const store = this.#persistence;
      if (store !== undefined) await this.#recover();
      const loaded = await store?.loadState(scope, context);
      // Stores migrate on read; an adapter that does not is held to the same versions here.
      const saved = loaded === undefined ? undefined : migrateEnvelope(loaded, `the saved state of ${id}`);
      if (saved !== undefined && saved.agentName !== def.name) {
        throw new InvalidArgumentError(
          `agent ${id} of conversation ${conversationId} was saved as "${saved.agentName}", not "${def.name}": start it with the agent it was saved with`,
          { code: 'ERR_UNKNOWN_AGENT' },
        );
      }
      this.#assertOpen();
      const parent = new ParentAgent(
        def,
        {
          id,
          conversationId,
          scope,
          toolContext: frozenToolContext(toolContext),
          // A suspended message's state is its run's (restored below): the agent's own is the one before it.
          state:
            saved === undefined
              ? initialLoopState(id, def.instructions, freezeReceived(cloneMetadata(metadata)))
              : stateBefore(saved, `the saved state of ${id}`),
          children: saved?.childCounter ?? 0,
          // Every save is based on what was loaded: a store that fences refuses a stale copy's.
          revision: saved === undefined ? 0 : saved.revision,
        },
        this.#parentDeps(),
      );
      if (saved !== undefined && store !== undefined) await this.#restore(parent, def, saved, context);
      this.#assertOpen();
      this.#agents.set(id, parent);
      this.emit('agent.started', { agentId: id, agent: def.name, conversationId, at: this.#clock.now() });
      if (parent.status === 'idle') this.#agentIdle(parent);
      return parent;
    } finally {
      this.#starting.delete(id);
    }
  }

  // What every parent agent of this supervisor is given: one object for all of them (a resident
  // agent is kept small).
  #agentDeps: ParentAgentDeps | undefined;
  #parentDeps(): ParentAgentDeps {
    this.#agentDeps ??= {
      tree: this.#tree,
      clock: this.#clock,
      events: this,
      durability: this.#durability,
      restart: this.#restart,
      mailboxSize: this.#mailboxSize,
      closed: () => this.#closed || this.#closing !== undefined,
      idle: (agent) => this.#agentIdle(agent),
      busy: (agent) => this.#busy(agent),
      stale: (agent) => this.#forget(agent),
    };
    return this.#agentDeps;
  }

  // An id is free, or held by an idle agent nobody holds any more (restored anew from the store).
  #takeId(id: string): void {
    if (this.#starting.has(id) || this.#agents.has(id)) {
      throw new InvalidArgumentError(
        `agent ${id} is already started: use its handle (supervisor.agent(id)); agent ids are unique per supervisor, across tenants and conversations, so another tenant's conversation needs an id of its own (for example "<tenant>:<name>")`,
      );
    }
    const released = this.#released.get(id)?.deref();
    if (released !== undefined) {
      // Still alive in a handle the host kept: it is that agent, not a second one.
      throw new InvalidArgumentError(`agent ${id} is already started: use its handle (supervisor.agent(id))`);
    }
    this.#released.delete(id);
  }

  // Once per supervisor, before anything is restored: runs a dead process left running read interrupted.
  #recover(): Promise<void> {
    const store = this.#persistence;
    if (store === undefined) return Promise.resolve();
    this.#recovered ??= store.markInterrupted().then(
      () => {},
      (error: unknown) => {
        this.#recovered = undefined;
        throw error;
      },
    );
    return this.#recovered;
  }

  /**
   * A saved conversation comes back: suspended (its runs at every depth, its
   * questions open under their ids, answers taken before a crash delivered),
   * or interrupted (a message that was mid-turn, resumed by `resume()`) — also
   * one whose envelope is still suspended while its row says a resumed run was
   * interrupted: the answer was taken and the process died inside the re-run.
   * Questions of runs that did not survive are withdrawn.
   */
  async #restore(parent: ParentAgent, def: Agent, saved: AgentStateEnvelope, ctx: PersistenceContext): Promise<void> {
    const store = this.#persistence as PersistenceAdapter;
    const scope = parent.scope;
    // Its live runs, and those a crash interrupted (what their subagents had spent is counted below).
    let live = await store.loadRuns(scope, ctx, { interrupted: true });
    if (saved.runId !== undefined && store.durable === true && runningIn(live, saved.runId) !== undefined) {
      live = await this.#refuseIfRunningElsewhere(store, scope, ctx, saved.runId);
    }
    const rootRow =
      saved.runId === undefined
        ? undefined
        : (live.find((r) => r.runId === saved.runId) ?? (await store.getRun(scope, saved.runId)));
    const kept = new Set<string>();
    // Suspended when its root's row says so (the envelope may be a write behind it), or, with no row, its envelope.
    if (rootRow?.status === 'suspended' || (rootRow === undefined && saved.status === 'suspended')) {
      const rootState = (rootRow?.state as LoopState | undefined) ?? saved.state;
      // The suspended runs under the root, parents before children.
      const rows = new Map<string, RunRecord>();
      for (const r of live) if (r.status === 'suspended' && r.runId !== saved.runId) rows.set(r.runId, r);
      const descendants: RestoredRun[] = [];
      const agents = new Map<string, Agent>([[saved.runId ?? '', def]]);
      const states = new Map<string, LoopState>([[saved.runId ?? '', rootState]]);
      for (let grew = true; grew; ) {
        grew = false;
        for (const [runId, r] of rows) {
          const parentAgent = r.parentRunId === undefined ? undefined : agents.get(r.parentRunId);
          if (parentAgent === undefined || r.toolCallId === undefined || r.state === undefined) continue;
          rows.delete(runId);
          grew = true;
          const agent = await restoredDefinition(parentAgent, r.agentName);
          if (agent === undefined) {
            // Its question would be withdrawn unasked and its parent told it was interrupted: refused
            // instead, before anything is changed, so a build that declares it again can restore it.
            throw new InvalidArgumentError(
              `conversation ${ctx.conversationId} is suspended in run ${runId} of subagent "${r.agentName}", which agent "${parentAgent.name}" no longer declares in its subagents: start it with a build that declares "${r.agentName}" (nothing was changed; its requests stay open), or deleteConversation to drop it`,
              { code: 'ERR_UNKNOWN_AGENT' },
            );
          }
          agents.set(runId, agent);
          states.set(runId, r.state as LoopState);
          descendants.push({
            runId,
            parentRunId: r.parentRunId as string,
            agentId: r.agentId,
            toolCallId: r.toolCallId,
            agent,
            state: r.state as LoopState,
            usage: r.usage,
            attempt: r.attempt,
          });
        }
      }
      // Every open question of every restored run, as the store has it now.
      const requests: RestoredRequest[] = [];
      const answered: { id: string; answer: import('@troupe/core').Answer }[] = [];
      // An envelope of version 1 names the root's questions by the host's ids only in its list.
      const listed = new Map((saved.openRequests ?? []).map((r) => [r.toolCallId, r]));
      for (const [runId, state] of states) {
        for (const p of state.pending ?? []) {
          if (p.result !== undefined || p.delegated === true || p.request === undefined) continue;
          const old = runId === (saved.runId ?? '') ? listed.get(p.call.id) : undefined;
          const id = old?.id ?? p.request.id;
          const record = await store.getRequest(scope, id);
          const local: Request =
            record !== undefined ? { ...record.request, id: record.localId } : (old?.local ?? p.request);
          requests.push({
            id,
            toolCallId: p.call.id,
            local,
            // Whether it asks for an approval is what the supervisor saved, never what a run's state says.
            approval: record?.approval ?? old?.approval ?? false,
            // And the call it approves, as saved then (none: a yes asks the handler again).
            call: record?.approvedCall,
            runId: runId === '' ? undefined : runId,
          });
          kept.add(id);
          if (record?.status === 'answered' && record.answer !== undefined) {
            answered.push({ id, answer: record.answer });
          } else if (record?.status === 'withdrawn') {
            answered.push({ id, answer: { id, ok: false, reason: 'the request was withdrawn before a restart' } });
          }
        }
      }
      parent.reserveChildren(saved.childCounter + tasksOfMessage(rootState));
      parent.restoreSuspended(
        { runId: saved.runId, attempt: rootRow?.attempt ?? 0, state: rootState },
        requests,
        descendants,
      );
      // Answers a dead process took before its run resumed: delivered now (the tool re-runs once).
      parent.redeliver(answered);
    } else if (
      rootRow !== undefined &&
      !isEndedRow(rootRow) &&
      // Mid-turn when its envelope says so, or when its row does: a message resumed by an answer
      // writes its run's row (running, a new attempt) and no envelope until it settles.
      (saved.status === 'running' || rootRow.status === 'interrupted')
    ) {
      const calls = await store.loadToolCalls(scope, rootRow.runId);
      const state = (rootRow.state as LoopState | undefined) ?? saved.state;
      // What its subagents cut off by the crash had spent (their rows' subtree totals), by task call.
      const lost = new Map<string, Usage>();
      for (const r of live) {
        if (r.parentRunId === rootRow.runId && r.toolCallId !== undefined && r.status === 'interrupted')
          lost.set(r.toolCallId, r.totalUsage);
      }
      // Children it may have spawned before the crash keep their ids: new ones are numbered past them.
      parent.reserveChildren(saved.childCounter + tasksOfMessage(state));
      parent.restoreInterrupted({
        runId: rootRow.runId,
        attempt: rootRow.attempt,
        state,
        started: calls
          .filter((c) => c.status === 'started')
          .map((c) => ({ toolCallId: c.toolCallId, attempt: c.attempt })),
        lost,
      });
    }
    // Questions of runs that did not come back (interrupted under a crash) can never be answered.
    for (let after: string | undefined, more = true; more; ) {
      const page = await store.listRequests(scope, { conversationId: ctx.conversationId, after, limit: 1000 });
      for (const r of page.items) {
        if (!kept.has(r.requestId)) await store.withdrawRequest(scope, r.requestId, this.#clock.now());
      }
      after = page.next;
      more = after !== undefined;
    }
  }

  // An agent with nothing to do: held among the idle ones, the least recently used let go past the bound.
  #agentIdle(agent: ParentAgent): void {
    if (this.#agents.get(agent.id) !== agent || agent.status !== 'idle') return;
    this.#idleAgents.delete(agent);
    this.#idleAgents.add(agent);
    if (this.#persistence === undefined) return;
    while (this.#idleAgents.size > this.#maxIdle) {
      const oldest = this.#idleAgents.values().next().value as ParentAgent;
      this.#idleAgents.delete(oldest);
      if (oldest.status !== 'idle') continue;
      this.#agents.delete(oldest.id);
      this.#released.set(oldest.id, new WeakRef(oldest));
      this.#collected.register(oldest, oldest.id);
    }
  }

  // An agent let go while idle got work again (the host still held it): held again.
  #busy(agent: ParentAgent): void {
    this.#idleAgents.delete(agent);
    if (this.#agents.get(agent.id) === agent) return;
    this.#released.delete(agent.id);
    this.#agents.set(agent.id, agent);
  }

  /** The handle of a started agent, by id (`undefined` once it was let go idle and collected: `startAgent` restores it). */
  agent(agentId: string): AgentHandle | undefined {
    return this.#agents.get(agentId) ?? this.#released.get(agentId)?.deref();
  }

  /** Requests waiting for a person in this supervisor, oldest first (every open one, at any depth). */
  pendingRequests(): PendingRequestInfo[] {
    return this.#tree.openRequests().map(({ request, agentId, path, openedAt }) => ({
      request,
      agentId,
      path,
      openedAt,
      conversationId: this.#agents.get(agentId)?.conversationId,
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
    const store = this.#persistence;
    if (store === undefined) {
      throw new InvalidArgumentError(
        'listRequests: this supervisor saves nothing (persistence: null); use pendingRequests()',
      );
    }
    const sealed = this.#sealScope(scope);
    await this.#recover();
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
   * Refused with a typed error, leaving the request open: a malformed answer
   * (`ERR_INVALID_ARGUMENT`). Refused: an unknown or withdrawn id
   * (`ERR_UNKNOWN_REQUEST`), a second answer (`ERR_REQUEST_ALREADY_ANSWERED`).
   */
  async answer(
    requestId: string,
    answer: Omit<Answer, 'id'> & { readonly id?: string },
    options: AnswerOptions = {},
  ): Promise<AgentReply> {
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
    if (options?.scope !== undefined && this.#persistence !== undefined) {
      // Answered as someone: only a request of their tenant (the store keeps requests by tenant key).
      await this.#restoreFor(requestId, options, this.#tree.hasOpenRequest(requestId));
    }
    let root: RunNode;
    try {
      root = await this.#tree.answer(requestId, parsed.data);
    } catch (error) {
      if (!isTroupeError(error, 'ERR_STORE_FENCED') || options?.scope === undefined || this.#persistence === undefined)
        throw error;
      // The copy held here was behind what is saved, and is let go: answered on what is saved.
      await this.#restoreFor(requestId, options, false);
      root = await this.#tree.answer(requestId, parsed.data);
    }
    const reply = await this.#tree.whenQuiet(root);
    if (reply instanceof Error) throw reply;
    return root.kind === 'spawn' ? replyOf(reply as SubagentOutcome) : (reply as AgentReply);
  }

  /**
   * The store holds a running run of the conversation's message `rootRunId`: a message running in
   * another live process (or another supervisor of this one), in one that died after this
   * supervisor recovered at its start, or one whose end could not be saved (the write failed, and
   * this process went on). The store tells which now: a dead process's runs, and those whose
   * writer failed to save their end, become interrupted (returned with the others, to be restored
   * or resumed here); a live writer's are its own — refused, changing nothing. Runs of older
   * messages (a row its process could not save as ended) are not this message's.
   */
  async #refuseIfRunningElsewhere(
    store: PersistenceAdapter,
    scope: Scope,
    ctx: PersistenceContext,
    rootRunId: string,
  ): Promise<readonly RunRecord[]> {
    await store.markInterrupted({ scope });
    const live = await store.loadRuns(scope, ctx, { interrupted: true });
    const running = runningIn(live, rootRunId);
    if (running !== undefined) {
      throw new TroupeError(
        `conversation ${ctx.conversationId} is running a message in another live process, or in another supervisor of this process (run ${running.runId} of agent ${running.agentId}): nothing was changed; retry once that message has ended, or send to (or answer through) the supervisor that runs it`,
        { code: 'ERR_CONVERSATION_BUSY' },
      );
    }
    return live;
  }

  /**
   * A request open in a tree held here and quiet here, with a durable store: another live process
   * may be running the same conversation's message (this copy is then behind it; answering it here
   * would run the answered tool beside that process and save over it). Refused before the answer
   * is taken. A tree that runs here is this process's own: answered as usual.
   */
  async #answerHeldHere(root: RunNode, requestId: string): Promise<void> {
    const store = this.#persistence;
    const conversation = root.conversation;
    if (store?.durable !== true || conversation === undefined) return;
    const ctx: PersistenceContext = {
      agentId: conversation.agentId as AgentId,
      conversationId: conversation.conversationId,
    };
    const live = await store.loadRuns(root.scope, ctx);
    if (runningIn(live, root.id) !== undefined) await this.#refuseIfRunningElsewhere(store, root.scope, ctx, root.id);
    // Quiet there too, but saved past this copy (another process answered one of its questions and
    // went on): answered here, the stale copy would run and be fenced at its save, the answer spent.
    const held = conversation.revision;
    // A request no longer open there is the store's compare-and-set to refuse, as it says.
    if (held === undefined || (await store.getRequest(root.scope, requestId))?.status !== 'open') return;
    const saved = (await store.loadState(root.scope, ctx))?.revision;
    if (saved !== undefined && saved !== held) {
      // Let go of the stale copy (it writes nothing): an answer with { scope } restores what is saved.
      (root.owner as RootOwner | undefined)?.takenElsewhere?.(root, requestId);
      throw new TroupeError(
        `conversation ${ctx.conversationId} was saved by another process after this copy was (revision ${saved}, this copy ${held}): nothing was answered and request ${requestId} stays open; answer again with { scope } to answer it on what is saved`,
        { code: 'ERR_STORE_FENCED' },
      );
    }
  }

  // A request the store has open, of a conversation not started here: start (restore) it with the caller's scope.
  async #restoreFor(requestId: string, options: AnswerOptions, open: boolean): Promise<void> {
    const store = this.#persistence as PersistenceAdapter;
    const scope = this.#sealScope(options.scope);
    await this.#recover();
    const record = await store.getRequest(scope, requestId);
    if (record === undefined) {
      // Not this tenant's (or never saved): the same answer as for an id nobody knows.
      throw new InvalidArgumentError(`no pending request ${requestId} for this scope: see listRequests(scope)`, {
        code: 'ERR_UNKNOWN_REQUEST',
      });
    }
    // Open in this tree (still, after the awaits above): answered where it is held.
    if (record.status === 'open' && this.#tree.hasOpenRequest(requestId)) return;
    // Open here, closed in the store: another process took it, and what this supervisor holds is stale.
    if (open && (record.status === 'answered' || record.status === 'withdrawn')) {
      this.#tree.takenElsewhere(requestId, record.status);
    }
    if (record.status === 'answered') {
      throw new InvalidArgumentError(`request ${requestId} was already answered: an answer is taken once`, {
        code: 'ERR_REQUEST_ALREADY_ANSWERED',
      });
    }
    if (record.status === 'withdrawn') {
      throw new InvalidArgumentError(
        `request ${requestId} was withdrawn (its run was cancelled or ended): nothing waits for an answer`,
        {
          code: 'ERR_UNKNOWN_REQUEST',
        },
      );
    }
    // One restore of a conversation at a time: an answer racing another one's restore waits for it
    // and looks again (then it finds the question here, or answered: ERR_REQUEST_ALREADY_ANSWERED),
    // instead of meeting the agent the other one started.
    const busy = this.#restoring.get(record.agentId);
    if (busy !== undefined) {
      await busy;
      return this.#restoreFor(requestId, options, this.#tree.hasOpenRequest(requestId));
    }
    const restoring = this.#restoreHeld(requestId, record, scope, options);
    const done = restoring.catch(() => {});
    this.#restoring.set(record.agentId, done);
    try {
      await restoring;
    } finally {
      if (this.#restoring.get(record.agentId) === done) this.#restoring.delete(record.agentId);
    }
  }

  // The restore itself: the conversation of `record`, held here or not, started with the caller's scope.
  async #restoreHeld(requestId: string, record: RequestRecord, scope: Scope, options: AnswerOptions): Promise<void> {
    const store = this.#persistence as PersistenceAdapter;
    const held = this.#agents.get(record.agentId as AgentId) ?? this.#released.get(record.agentId)?.deref();
    const ours =
      held !== undefined &&
      held.conversationId === record.conversationId &&
      (await store.getRequest(held.scope, requestId)) !== undefined;
    if (ours && held.status !== 'running') {
      // This conversation, held without its question (being stopped as the answer came, or a copy
      // older than what is saved): let it go, and restore what is saved below.
      await this.stopAgent(record.agentId);
    } else if (held !== undefined) {
      // Held here without this question: another conversation under the same id (agent ids are one
      // namespace per supervisor, across tenants), or this one busy with a message. Its answer would
      // reach the wrong agent, or be lost.
      throw new InvalidArgumentError(
        ours
          ? `request ${requestId} is open in the store for conversation ${record.conversationId}, whose agent ${record.agentId} is running a message here without it (a copy older than what is saved): answer again once that message has ended; the request stays open`
          : `request ${requestId} is open for conversation ${record.conversationId} of agent ${record.agentId}, but this supervisor holds another conversation under that id (agent ids are unique per supervisor, across tenants): stopAgent("${record.agentId}") and answer again, or give each tenant's agents their own ids (for example "<tenant>.<name>"); the request stays open`,
        { code: 'ERR_AGENT_ID_IN_USE' },
      );
    }
    const ctx: PersistenceContext = { agentId: record.agentId, conversationId: record.conversationId };
    const envelope = await store.loadState(scope, ctx);
    const name = (envelope as { agentName?: unknown } | undefined)?.agentName;
    const def = typeof name === 'string' ? this.#agentsByName.get(name) : undefined;
    if (def === undefined) {
      throw new InvalidArgumentError(
        `request ${requestId} belongs to agent ${record.agentId} ("${String(name)}"), which this supervisor does not know by name: pass it in options.agents, or startAgent it first (the request stays open)`,
        { code: 'ERR_UNKNOWN_AGENT' },
      );
    }
    // The stored agent and scope are untyped here: the typed overloads are for hosts.
    await (this as Supervisor).startAgent(def, {
      agentId: record.agentId,
      conversationId: record.conversationId,
      scope,
      ...(options.toolContext === undefined ? {} : { toolContext: options.toolContext }),
    });
  }

  /**
   * Run one subagent directly (not through a parent's `task` call): the same
   * pool, cancellation, approval, deadlines and delegation as delegated runs.
   * Resolves with its outcome once its whole tree has ended — or suspended:
   * answer its question and `answer()` resolves with what it did then.
   */
  spawn<SA = unknown, TC extends object = Record<never, never>>(
    agent: Agent<unknown extends S ? SA : S, TC>,
    options: SpawnOptions<DeepReadonly<unknown extends S ? SA : I>, TC> &
      (Partial<TC> extends TC ? unknown : { readonly toolContext: TC }),
  ): Promise<SubagentOutcome>;
  // Not an async function: a spawn of a loaded agent (the norm) starts its run
  // synchronously and its promise is settled by the run tree directly, with no
  // async frame and no await hop on every run's way back. Every throw before
  // the run starts is a rejection, as from an async function.
  spawn(agent: Agent, options: SpawnOptions): Promise<SubagentOutcome> {
    try {
      this.#assertOpen();
      if (!isAgent(agent))
        throw new InvalidArgumentError('spawn(agent): pass an agent made with defineAgent', {
          code: 'ERR_UNKNOWN_AGENT',
        });
      if (typeof options !== 'object' || options === null)
        throw new InvalidArgumentError('spawn: pass { input, scope, ... }');
      if (typeof options.input !== 'string') throw new InvalidArgumentError('spawn: input must be a string');
      const timeoutMs = options.timeoutMs ?? this.#subagentTimeoutMs;
      if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
        throw new InvalidArgumentError(
          `spawn: timeoutMs must be a non-negative number of ms, got ${describeValue(timeoutMs)}`,
        );
      }
      if (checkSignal(options.signal, 'spawn({ signal })')?.aborted)
        throw new CancelledError('user', 'the spawn was aborted before it started');
      const scope = this.#sealScope(options.scope);
      const toolContext = this.#toolContext(options.toolContext);
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
    if (!this.#tree.canQueue()) {
      throw new BackpressureError(
        `the subagent queue is full (${this.#maxQueue} runs waiting for a thread): retry later or raise pool.maxQueue`,
        this.#maxQueue,
      );
    }
    const tree = this.#tree;
    const root = tree.startRoot({
      kind: 'spawn',
      agent: def,
      agentId: createId('agent'),
      scope,
      toolContext,
      owner: SPAWN_OWNER,
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
    const parent = this.#agents.get(agentId);
    if (parent !== undefined) return parent.cancel(reason);
    return this.#tree.cancelAgent(agentId, reason);
  }

  stats(): SupervisorStats {
    const tree = this.#tree.stats();
    const pool = this.#tree.pool;
    return {
      agents: this.#agents.size,
      pendingRequests: tree.requests,
      runs: tree.runs,
      suspendedSubagents: tree.suspendedBelowRoots,
      refused: tree.refused,
      pool: {
        threads: pool.threads,
        running: tree.running,
        queued: pool.queued,
        openPorts: pool.openPorts,
        tableSize: this.#tree.table.size,
        completed: tree.completed,
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
    const parent = this.#agents.get(agentId) ?? this.#released.get(agentId)?.deref();
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
    this.#forget(parent);
    await this.#withinGrace(
      this.#persistence?.release(parent.scope, { agentId: parent.id, conversationId: parent.conversationId }),
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

  #forget(parent: ParentAgent): void {
    if (this.#agents.get(parent.id) === parent) this.#agents.delete(parent.id);
    this.#idleAgents.delete(parent);
    if (this.#released.get(parent.id)?.deref() === parent) this.#released.delete(parent.id);
  }

  /**
   * Refuse new work, let running messages and spawns finish for up to
   * `timeoutMs` (default 30 s), then cancel what still runs (reason
   * `shutdown`; killed after the grace period if it ignores it), persist,
   * and resolve once every worker has exited. Suspended conversations keep
   * their saved questions for a new supervisor. Idempotent.
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
      await this.#stopAgents();
      this.#letGo();
      tree.endSuspendedSpawns();
      await tree.closeTransport();
      await this.#persistence?.close?.();
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
      await this.#stopAgents();
      this.#letGo();
      tree.endSuspendedSpawns();
      // What was saved stays saved; the store is closed as by close() (a close() after this returns this).
      await this.#persistence?.close?.();
    })();
    this.#closing ??= this.#destroying;
    return this.#destroying;
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

  // A closed supervisor holds no agent (something of the pool may outlive close() for a while).
  #letGo(): void {
    this.#agents.clear();
    this.#idleAgents.clear();
    this.#released.clear();
  }

  /** `await using supervisor = createSupervisor(...)` calls `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** A direct spawn's tree, as its outcome (literals, not spreads: this runs for every spawn). */
function outcomeOf(root: RunNode): SubagentOutcome {
  const agentId = root.agentId;
  const runId = root.id;
  const usage = root.usage;
  const totalUsage = totalOf(root);
  if (root.phase !== 'ended') {
    const first = firstOpenRequest(root);
    const state = root.state as LoopState;
    return {
      agentId,
      runId,
      usage,
      totalUsage,
      status: 'suspended',
      request: first?.request ?? { id: '', kind: 'none', prompt: '' },
      state,
      events: state.events,
      turns: state.turns,
    };
  }
  const end = root.end;
  switch (end?.status) {
    case 'done':
      return {
        agentId,
        runId,
        usage,
        totalUsage,
        status: 'done',
        result: end.text,
        updates: end.updates,
        events: end.events,
        turns: end.turns,
      };
    case 'failed':
      return {
        agentId,
        runId,
        usage,
        totalUsage,
        status: 'failed',
        error: end.error,
        events: end.events,
        turns: end.turns,
      };
    case 'incomplete':
      return { agentId, runId, usage, totalUsage, status: 'incomplete', events: end.events, turns: end.turns };
    case 'crashed':
      return { agentId, runId, usage, totalUsage, status: 'crashed', error: end.error, exitCode: end.exitCode };
    case 'cancelled':
      return { agentId, runId, usage, totalUsage, status: 'cancelled', reason: end.reason, forced: end.forced };
    default:
      return { agentId, runId, usage, totalUsage, status: 'cancelled', reason: 'shutdown', forced: false };
  }
}

/** A direct spawn's outcome, as an answer's reply. */
function replyOf(outcome: SubagentOutcome): AgentReply {
  const usage = outcome.usage;
  const totalUsage = outcome.totalUsage;
  switch (outcome.status) {
    case 'done':
      return { usage, totalUsage, status: 'done', text: outcome.result, turns: outcome.turns };
    case 'suspended':
      return { usage, totalUsage, status: 'suspended', request: outcome.request, path: [outcome.agentId] };
    case 'failed':
    case 'crashed':
      return { usage, totalUsage, status: 'failed', error: outcome.error, restarted: false };
    case 'cancelled':
      return { usage, totalUsage, status: 'cancelled', reason: outcome.reason };
    case 'incomplete':
      return { usage, totalUsage, status: 'incomplete', turns: outcome.turns };
  }
}

// Metadata becomes the state's, saved as JSON: a plain object JSON carries exactly (ContextUpdate
// refuses the same values). A deep-frozen one — a fan-out passes one snapshot to every spawn — is
// checked once.
const checkedMetadata = new WeakSet<object>();

function checkMetadata(metadata: unknown): void {
  if (typeof metadata === 'object' && metadata !== null && checkedMetadata.has(metadata)) return;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new InvalidArgumentError(
      `metadata must be a plain object of JSON data (its keys are the state's metadata), got ${describeValue(metadata)}`,
    );
  }
  assertCloneable(metadata, 'metadata');
  try {
    assertJson(metadata, 'metadata');
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new InvalidArgumentError(
      'metadata is nested too deeply to be copied or saved: pass plain data, nested less deeply',
      {
        code: 'ERR_NOT_CLONEABLE',
      },
    );
  }
  if (isDeepFrozen(metadata)) checkedMetadata.add(metadata);
}

// A copy of the host's metadata; one too deep to copy is refused like one that cannot cross a thread.
function cloneMetadata(metadata: Metadata): Metadata {
  try {
    return structuredClone(metadata);
  } catch (error) {
    throw new InvalidArgumentError(
      `metadata cannot be copied (${(error as Error)?.message ?? String(error)}): pass plain data, nested less deeply`,
      { code: 'ERR_NOT_CLONEABLE', cause: error },
    );
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
 * How many subagents the message a state is in may have spawned: its task
 * calls since the last user message (a call checkpointed is spawned after).
 * An upper bound: ids past the saved counter are never given twice.
 */
function tasksOfMessage(state: LoopState): number {
  const messages = state.messages;
  let n = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m === undefined || m.role === 'user') break;
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) if (c.name === 'task') n++;
  }
  return n;
}

function isEndedRow(row: RunRecord): boolean {
  return row.status !== 'running' && row.status !== 'suspended' && row.status !== 'interrupted';
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
export function createSupervisor<S = unknown, I = S>(options: SupervisorOptions<S, I> = {}): Supervisor<S, I> {
  return new Supervisor(options);
}

/** A run of `rootRunId`'s tree (itself or a descendant, by parent) that the store has running. */
function runningIn(rows: readonly RunRecord[], rootRunId: string): RunRecord | undefined {
  const tree = new Set([rootRunId]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const r of rows) {
      if (!tree.has(r.runId) && r.parentRunId !== undefined && tree.has(r.parentRunId)) {
        tree.add(r.runId);
        grew = true;
      }
    }
  }
  return rows.find((r) => r.status === 'running' && tree.has(r.runId));
}
