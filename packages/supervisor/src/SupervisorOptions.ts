import {
  type Agent,
  type AgentId,
  type ApprovalHandler,
  type Clock,
  DEFAULT_SCOPE_BUDGET_BYTES,
  type DeepReadonly,
  InvalidArgumentError,
  isAgent,
  type Metadata,
  type Request,
  type ScopeDefinition,
} from '@troupe/core';
import { describeValue } from '@troupe/core/internal';
import { systemClock } from '@troupe/subagent';
import { z } from 'zod';
import {
  type LocalTransportOptions,
  type ResolvedLocalTransportOptions,
  resolveLocalTransportOptions,
} from './LocalTransport.js';
import { MemoryPersistence } from './persistence/MemoryPersistence.js';
import type { PersistenceAdapter } from './persistence/Persistence.js';
import { checkRestartPolicy, type RestartPolicy } from './RestartPolicy.js';
import type { RunTransport } from './RunTransport.js';

/**
 * Options of the worker pool (`createSupervisor({ pool })`): the default
 * transport's, {@link LocalTransportOptions}.
 *
 * @example
 * ```ts
 * const pool: PoolOptions = { threads: 2, maxQueue: 256, resourceLimits: { maxOldGenerationSizeMb: 256 } }
 * const supervisor = createSupervisor({ pool })
 * ```
 */
export type PoolOptions = LocalTransportOptions;

/**
 * Options of `createSupervisor`; validated and defaulted once. `S` and `I` are
 * what the `scope` definition produces and accepts (see {@link Supervisor});
 * `A` the agents given in `agents` (what `answer(id, answer, { scope })` may
 * restore, so what its `toolContext` must hold).
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
export interface SupervisorOptions<S = unknown, I = S, A extends Agent = Agent> {
  /**
   * Parent agents the host may start by name (optional: `startAgent` also
   * takes an agent), and that `answer(id, answer, { scope })` may restore
   * after a restart.
   */
  readonly agents?: readonly A[];
  /** The worker pool (threads, resourceLimits, maxQueue, graceMs, ...) of the default transport. */
  readonly pool?: PoolOptions;
  /**
   * What runs subagents (default: a pool of worker threads of this process,
   * configured by `pool`). Give `localTransport(options)`, or a transport that
   * runs them on other machines; not both `pool` and `transport`.
   */
  readonly transport?: RunTransport;
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
   * open (`startAgent`, `answer(id, answer, { scope })`). A store whose
   * `tenantKey` reads a typed scope (`tenantKey: (scope: TenantScope) => ...`)
   * is held to this supervisor's scope schema: one typed for another scope
   * does not compile.
   */
  // biome-ignore lint/suspicious/noExplicitAny: without a schema, a store typed for any scope fits.
  readonly persistence?: PersistenceAdapter<unknown extends S ? any : NoInfer<S>> | null;
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

/**
 * Options of `supervisor.answer`: who answers a request this supervisor does
 * not hold (after a restart, or one another process asked). `I` is the scope
 * it takes (the supervisor's schema input), `TC` the toolContext.
 *
 * @example
 * ```ts
 * const options: AnswerOptions = { scope: { tenantId: 't1' }, toolContext: { requestId: 'req-7' } }
 * await supervisor.answer('req_123', { ok: true }, options)
 * ```
 */
export interface AnswerOptions<I = unknown, TC extends object = Readonly<Record<string, unknown>>> {
  /**
   * Who answers, when the request is not open in this supervisor (after a
   * restart): the store is asked for it under this scope's tenant and its
   * conversation is restored with this scope (scope is never saved).
   */
  readonly scope?: I;
  /**
   * The restored conversation's toolContext: never saved either, so give it
   * again, with the keys its tools need (one holding none of the keys the
   * conversation was started with is refused with `ERR_TOOL_CONTEXT_MISSING`,
   * nothing restored).
   */
  readonly toolContext?: TC;
}

// biome-ignore lint/suspicious/noExplicitAny: an agent of any tool context and output.
type AnyOf<S> = Agent<S, any, any>;
// biome-ignore lint/suspicious/noExplicitAny: an agent of any output (what is inferred is its scope and tool context).
type AgentOf<SA, TC extends object> = Agent<SA, TC, any>;

/**
 * The agents a supervisor whose scope schema produces `S` may start or spawn:
 * those whose tools read no more than `S` (without a schema, any agent: the
 * scope given is then what its tools read).
 *
 * @example
 * ```ts
 * import { defineScope, type ScopeOf } from '@troupe/core'
 *
 * const Tenant = defineScope(z.object({ tenantId: z.string() }))
 * const ok: AgentFor<ScopeOf<typeof Tenant>> = agent
 * ```
 */
export type AgentFor<S> = unknown extends S ? Agent : AnyOf<S>;

/**
 * What `startAgent(agent, options)` takes for `A` (an agent, or the name of
 * one given in `agents`): the scope (the schema's input, or what the agent's
 * tools read when there is no schema) and, when its tools declare keys, the
 * `toolContext` holding them.
 *
 * @example
 * ```ts
 * import { defineAgent, defineTool, type ToolContext } from '@troupe/core'
 *
 * const lookup = defineTool({
 *   name: 'lookup',
 *   description: 'Look the ticket up',
 *   parameters: z.object({}),
 *   execute: (_args, ctx: ToolContext<unknown, { ticketId: string }>) => ctx.ticketId,
 * })
 * const triage = defineAgent({ name: 'triage', instructions: 'Triage.', tools: [lookup], model })
 * const options: StartAgentOptionsFor<typeof triage, unknown, unknown> = { scope: {}, toolContext: { ticketId: 'T-1' } }
 * ```
 */
export type StartAgentOptionsFor<A, S, I> =
  // Not distributed: an agent typed `never` (a cast) takes any options, as a bare agent does.
  [A] extends [AgentOf<infer SA, infer TC>]
    ? StartAgentOptions<DeepReadonly<unknown extends S ? SA : I>, TC> &
        (Partial<TC> extends TC ? unknown : { readonly toolContext: TC })
    : StartAgentOptions<DeepReadonly<I>>;

/**
 * What `spawn(agent, options)` takes for agent `A` (as {@link StartAgentOptionsFor}, with the input).
 *
 * @example
 * ```ts
 * const options: SpawnOptionsFor<typeof agent, unknown, unknown> = { input: 'Summarise the incident', scope: {} }
 * ```
 */
export type SpawnOptionsFor<A, S, I> = [A] extends [AgentOf<infer SA, infer TC>]
  ? SpawnOptions<DeepReadonly<unknown extends S ? SA : I>, TC> &
      (Partial<TC> extends TC ? unknown : { readonly toolContext: TC })
  : never;

/** The `toolContext` shapes of agents `A`, as a union (`never` for none). */
// biome-ignore lint/suspicious/noExplicitAny: an agent of any scope.
type ToolContextsOf<A> = 0 extends 1 & A ? never : A extends AgentOf<any, infer TC> ? TC : never;
/** Those of the shapes `TC` that declare a required key (an `any` shape declares none that is known). */
type WithRequiredKeys<TC> = 0 extends 1 & TC
  ? never
  : TC extends unknown
    ? Partial<TC> extends TC
      ? never
      : TC
    : never;

/**
 * What `answer(requestId, answer, options)` takes on a supervisor whose
 * `agents` are `A`: with a `scope` (a request of a conversation restored from
 * the store), the `toolContext` its conversation was started with — required
 * when one of those agents' tools declares a key (which one the request
 * belongs to is known only at run time: the toolContext must fit one of
 * them, and the run-time check holds it to the conversation's own keys).
 *
 * @example
 * ```ts
 * import { defineAgent, defineTool, type ToolContext } from '@troupe/core'
 *
 * const lookup = defineTool({
 *   name: 'lookup',
 *   description: 'Look the ticket up',
 *   parameters: z.object({}),
 *   execute: (_args, ctx: ToolContext<unknown, { ticketId: string }>) => ctx.ticketId,
 * })
 * const triage = defineAgent({ name: 'triage', instructions: 'Triage.', tools: [lookup], model })
 * // After a restart: the scope and the toolContext are given again (neither is saved).
 * const options: AnswerOptionsFor<{ tenantId: string }, typeof triage> = {
 *   scope: { tenantId: 'acme' },
 *   toolContext: { ticketId: 'T-1' },
 * }
 * ```
 */
export type AnswerOptionsFor<I, A> = [WithRequiredKeys<ToolContextsOf<A>>] extends [never]
  ? AnswerOptions<I>
  :
      | { readonly scope?: never; readonly toolContext?: never }
      | { readonly scope: I; readonly toolContext: ToolContextsOf<A> };

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

/** The methods a persistence adapter must have (one missing: the store is refused at construction). */
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

const positiveInteger = (name: string) =>
  z.custom<number>((v) => Number.isSafeInteger(v) && (v as number) > 0, {
    error: (issue) => `options.${name} must be a positive integer, got ${describeValue(issue.input)}`,
  });

/**
 * The options of {@link SupervisorOptions}, as one schema: each rule once, each
 * message naming the option and saying what it takes. (`pool` is the default
 * transport's own schema; `restart` is checked by its policy.)
 */
const SupervisorOptionsSchema = z
  .object({
    agents: z
      .custom<readonly Agent[]>((v) => Array.isArray(v), {
        error: (issue) =>
          `options.agents must be an array of agents made with defineAgent, got ${describeValue(issue.input)}`,
      })
      .check((ctx) => {
        const seen = new Set<string>();
        for (const [i, agent] of ctx.value.entries()) {
          if (!isAgent(agent)) {
            ctx.issues.push({
              code: 'custom',
              input: agent,
              path: [i],
              message: `options.agents[${i}] must be an agent made with defineAgent, got ${describeValue(agent)}`,
            });
            return;
          }
          if (seen.has(agent.name)) {
            ctx.issues.push({
              code: 'custom',
              input: agent,
              path: [i],
              message: `options.agents: two agents are named "${agent.name}": give each agent its own name`,
            });
            return;
          }
          seen.add(agent.name);
        }
      })
      .optional(),
    pool: z.unknown().optional(),
    transport: z
      .custom<RunTransport>(
        (v) =>
          typeof v === 'object' &&
          v !== null &&
          typeof (v as Partial<RunTransport>).dispatch === 'function' &&
          typeof (v as Partial<RunTransport>).start === 'function',
        {
          error: (issue) =>
            `options.transport must be a RunTransport (localTransport(options), or a transport of another package), got ${describeValue(issue.input)}`,
        },
      )
      .optional(),
    approval: z
      .custom<ApprovalHandler>((v) => typeof v === 'function', {
        error: (issue) =>
          `options.approval must be a function (request, { signal }) => decision, got ${describeValue(issue.input)}`,
      })
      .optional(),
    persistence: z
      .custom<PersistenceAdapter | null>(
        (v) =>
          v === null ||
          (typeof v === 'object' &&
            ADAPTER_METHODS.every((m) => typeof (v as Record<string, unknown>)[m] === 'function')),
        {
          error: (issue) => {
            const v = issue.input;
            if (typeof v !== 'object' || v === null) {
              return `options.persistence must be a PersistenceAdapter (e.g. sqlitePersistence({ file }) from @troupe/sqlite) or null, got ${describeValue(v)}`;
            }
            const missing = ADAPTER_METHODS.filter((m) => typeof (v as Record<string, unknown>)[m] !== 'function');
            return `options.persistence does not implement ${missing.join(', ')}: implement the whole PersistenceAdapter contract (MemoryPersistence and @troupe/sqlite do), or pass null to save nothing`;
          },
        },
      )
      .optional(),
    maxIdleAgents: z
      .custom<number>((v) => Number.isSafeInteger(v) && (v as number) >= 0, {
        error: (issue) => `options.maxIdleAgents must be a non-negative integer, got ${describeValue(issue.input)}`,
      })
      .optional(),
    clock: z
      .custom<Clock>(
        (v) =>
          typeof v === 'object' &&
          v !== null &&
          typeof (v as Clock).now === 'function' &&
          typeof (v as Clock).setTimeout === 'function' &&
          typeof (v as Clock).clearTimeout === 'function',
        {
          error: (issue) =>
            `options.clock must have now(), setTimeout() and clearTimeout(), got ${describeValue(issue.input)}`,
        },
      )
      .optional(),
    scope: z
      .custom<ScopeDefinition<unknown>>(
        (v) => typeof v === 'object' && v !== null && typeof (v as { parse?: unknown }).parse === 'function',
        {
          error: (issue) =>
            `options.scope must be a scope definition made with defineScope(schema), got ${describeValue(issue.input)}`,
        },
      )
      .optional(),
    scopeBudgetBytes: positiveInteger('scopeBudgetBytes').optional(),
    mailboxSize: positiveInteger('mailboxSize').optional(),
    restart: z.unknown().optional(),
    subagentTimeoutMs: z
      .custom<number>((v) => typeof v === 'number' && Number.isFinite(v) && v > 0, {
        error: (issue) =>
          `options.subagentTimeoutMs must be a positive number of ms, got ${describeValue(issue.input)}`,
      })
      .optional(),
  })
  .strict();

/** {@link SupervisorOptions} checked and defaulted: what a supervisor runs with. */
export interface ResolvedSupervisorOptions {
  readonly agents: ReadonlyMap<string, Agent>;
  /** The default transport's options (used when no `transport` is given, and for deadlines' interval). */
  readonly pool: ResolvedLocalTransportOptions;
  readonly transport: RunTransport | undefined;
  readonly approval: ApprovalHandler | undefined;
  readonly persistence: PersistenceAdapter | undefined;
  readonly maxIdleAgents: number;
  readonly clock: Clock;
  readonly scope: ScopeDefinition<unknown> | undefined;
  readonly scopeBudgetBytes: number;
  readonly mailboxSize: number;
  readonly restart: RestartPolicy;
  readonly subagentTimeoutMs: number | undefined;
}

const OPTION_NAMES = Object.keys(SupervisorOptionsSchema.shape);

/**
 * Check `createSupervisor`'s options once and default them. Throws an
 * `InvalidArgumentError` naming the first option that is wrong and what it
 * takes (an unknown option too: a misspelt one would be ignored).
 */
export function resolveSupervisorOptions(options: unknown): ResolvedSupervisorOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`createSupervisor(options): pass an object, got ${describeValue(options)}`);
  }
  const parsed = SupervisorOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue?.code === 'unrecognized_keys') {
      throw new InvalidArgumentError(
        `createSupervisor: unknown option "${issue.keys[0]}" (a misspelling?); the options are ${OPTION_NAMES.join(', ')}`,
        { cause: parsed.error },
      );
    }
    throw new InvalidArgumentError(issue?.message ?? 'createSupervisor: invalid options', { cause: parsed.error });
  }
  const o = parsed.data;
  if (o.transport !== undefined && o.pool !== undefined) {
    throw new InvalidArgumentError(
      "createSupervisor: give either pool (the default transport's options) or transport, not both: pass localTransport(pool) as the transport",
    );
  }
  const agents = new Map<string, Agent>();
  for (const agent of o.agents ?? []) agents.set(agent.name, agent);
  return Object.freeze({
    agents,
    pool: resolveLocalTransportOptions(o.pool as LocalTransportOptions | undefined),
    transport: o.transport,
    approval: o.approval,
    persistence: o.persistence === undefined ? new MemoryPersistence() : (o.persistence ?? undefined),
    maxIdleAgents: o.maxIdleAgents ?? 1000,
    clock: o.clock ?? systemClock,
    scope: o.scope,
    scopeBudgetBytes: o.scopeBudgetBytes ?? o.scope?.budgetBytes ?? DEFAULT_SCOPE_BUDGET_BYTES,
    mailboxSize: o.mailboxSize ?? 256,
    restart: checkRestartPolicy(o.restart as Partial<RestartPolicy> | undefined),
    subagentTimeoutMs: o.subagentTimeoutMs,
  });
}
