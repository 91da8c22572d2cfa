import { availableParallelism, hostname } from 'node:os';
import { type Agent, InvalidArgumentError, isAgent } from '@troupe/core';
import type { RunTransport } from '@troupe/supervisor';
import type { RedisOptions } from 'ioredis';
import { z } from 'zod';
import { ClusterShape, checkOptions, describeConnection, ms, NAME } from './internal/clusterSchema.js';
import { mintId } from './internal/mintId.js';

/**
 * An agent a worker host loads itself: the URL of the module that exports it,
 * and its name (as an entry of `startWorkerHost({ agents })`).
 *
 * @example
 * ```ts
 * const researcher: AgentModuleRef = { module: new URL('./agents.js', import.meta.url).href, name: 'researcher' }
 * ```
 */
export interface AgentModuleRef {
  /** A `file:` URL (`new URL('./agents.js', import.meta.url).href`). */
  readonly module: string;
  readonly name: string;
}

/**
 * What {@link startWorkerHost} accepts. `connection`, `build` and `agents` are
 * required; every other option has the default written beside it.
 *
 * @example
 * ```ts
 * const options: WorkerHostOptions = {
 *   connection: 'redis://127.0.0.1:6379',
 *   build: '2026.12.1',
 *   agents: { researcher: { module: new URL('./agents.js', import.meta.url).href, name: 'researcher' } },
 *   concurrency: 4,
 * }
 * const host = await startWorkerHost(options)
 * ```
 */
export interface WorkerHostOptions {
  /** The Redis 7 server: a `redis://` or `rediss://` URL, or ioredis options. */
  readonly connection: string | RedisOptions;
  /** The build this host runs; a job of another build is refused (`ERR_VERSION_SKEW`). */
  readonly build: string;
  /**
   * The agents this host runs, by logical id (the id jobs name them by; by default an
   * agent's `name` on the API host): an agent, or where to import it from.
   */
  readonly agents: Readonly<Record<string, Agent | AgentModuleRef>>;
  /** Attempts it runs at once: its BullMQ worker's concurrency and its threads (default: the CPUs). */
  readonly concurrency?: number | undefined;
  /** Prefix of every Redis key and channel (default `troupe`); as the API host's. */
  readonly prefix?: string | undefined;
  /** The BullMQ queue it takes jobs from (default `runs`); as the API host's. */
  readonly queue?: string | undefined;
  /** This host's id in leases, channels and events (default: `<hostname>-<pid>-<random>`). */
  readonly hostId?: string | undefined;
  /**
   * Its lease in Redis, renewed every third of it (default 5,000 ms). An API host that finds
   * it lapsed ends the attempts it had granted here `lost` and runs them again elsewhere.
   */
  readonly leaseMs?: number | undefined;
  /**
   * Its BullMQ job locks (default 30,000 ms, BullMQ's). A lock it fails to renew
   * (`lockRenewalFailed`) cancels the attempt here at once: another host may run it.
   */
  readonly lockDurationMs?: number | undefined;
  /** How often its BullMQ worker looks for stalled jobs (default 30,000 ms, BullMQ's). */
  readonly stalledIntervalMs?: number | undefined;
  /** How long it waits for the owner's grant of a job it took; past it the job ends, nothing ran (default 5,000 ms). */
  readonly claimTimeoutMs?: number | undefined;
  /** How long it waits for the owner's acknowledgement of a relayed message before it sends it again (default 1,000 ms). */
  readonly relayRetryMs?: number | undefined;
  /**
   * On `close()` (and on SIGTERM in `troupe-worker`): how long running attempts may go on
   * before they are handed back to their owners (who run them again elsewhere from their
   * last checkpoint) and stopped (default 30,000 ms).
   */
  readonly drainMs?: number | undefined;
  /** A cancelled attempt's grace before it is killed here (default 5,000 ms). */
  readonly graceMs?: number | undefined;
  /** The largest message between hosts, either way (default 8 MiB). */
  readonly maxRelayBytes?: number | undefined;
  /** How long starting waits to reach Redis (default 5,000 ms). */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * What runs the attempts on this host, given its concurrency and grace. Default: the local
   * pool of worker threads (`localTransport({ threads: concurrency, graceMs })`), with its
   * cancellation table, watchdog and host channel (which checks every call of a thread before
   * it is relayed).
   */
  readonly transport?: ((options: { readonly slots: number; readonly graceMs: number }) => RunTransport) | undefined;
}

/**
 * {@link WorkerHostOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const o: ResolvedWorkerHostOptions = resolveWorkerHostOptions({ connection: 'redis://127.0.0.1:6379', build: 'b1', agents: { helper: agent } })
 * o.leaseMs // 5000
 * ```
 */
export interface ResolvedWorkerHostOptions {
  readonly connection: string | RedisOptions;
  /** The connection as it may be shown (no password). */
  readonly connectionName: string;
  readonly build: string;
  readonly agents: ReadonlyMap<string, Agent | AgentModuleRef>;
  readonly concurrency: number;
  readonly prefix: string;
  readonly queue: string;
  readonly hostId: string;
  readonly leaseMs: number;
  readonly lockDurationMs: number;
  readonly stalledIntervalMs: number;
  readonly claimTimeoutMs: number;
  readonly relayRetryMs: number;
  readonly drainMs: number;
  readonly graceMs: number;
  readonly maxRelayBytes: number;
  readonly connectTimeoutMs: number;
  readonly transport: ((options: { readonly slots: number; readonly graceMs: number }) => RunTransport) | undefined;
}

const AgentEntry = z.union([
  z.custom<Agent>((v) => isAgent(v)),
  z.strictObject({ module: z.string().regex(/^file:\/\//), name: z.string().min(1).max(64) }),
]);

const Schema = z.strictObject({
  ...ClusterShape,
  agents: z.record(z.string().regex(NAME), AgentEntry),
  concurrency: z.number().int().min(1).max(4096).optional(),
  hostId: z.string().regex(NAME).optional(),
  leaseMs: ms(100),
  lockDurationMs: ms(100),
  stalledIntervalMs: ms(100),
  claimTimeoutMs: ms(10),
  relayRetryMs: ms(10),
  drainMs: ms(0),
  graceMs: ms(0),
  transport: z.custom<ResolvedWorkerHostOptions['transport']>((v) => typeof v === 'function').optional(),
});

/**
 * Validate {@link startWorkerHost}'s options once, into a fully defaulted
 * read-only object. A bad option throws an `InvalidArgumentError` naming it
 * and what to pass.
 *
 * @example
 * ```ts
 * const o = resolveWorkerHostOptions({ connection: 'redis://127.0.0.1:6379', build: 'b1', agents: { helper: agent }, concurrency: 2 })
 * o.concurrency // 2
 * ```
 */
export function resolveWorkerHostOptions(options: WorkerHostOptions): ResolvedWorkerHostOptions {
  const o = checkOptions('startWorkerHost', Schema, options);
  const agents = new Map(Object.entries(o.agents));
  if (agents.size === 0) {
    throw new InvalidArgumentError(
      'startWorkerHost: agents is empty: pass the agents this host runs, by logical id ({ researcher: researcherAgent })',
    );
  }
  for (const [id, agent] of agents) {
    if (isAgent(agent) && agent.module === undefined) {
      throw new InvalidArgumentError(
        `startWorkerHost: agents.${id} has no module: define it with module: import.meta.url (its threads import it)`,
      );
    }
  }
  const leaseMs = o.leaseMs ?? 5_000;
  return Object.freeze({
    connection: o.connection,
    connectionName: describeConnection(o.connection),
    build: o.build,
    agents,
    concurrency: o.concurrency ?? availableParallelism(),
    prefix: o.prefix ?? 'troupe',
    queue: o.queue ?? 'runs',
    hostId:
      o.hostId ??
      `${hostname()
        .replace(/[^A-Za-z0-9._-]/g, '_')
        .slice(0, 40)}-${process.pid}-${mintId(6)}`,
    leaseMs,
    lockDurationMs: o.lockDurationMs ?? 30_000,
    stalledIntervalMs: o.stalledIntervalMs ?? 30_000,
    claimTimeoutMs: o.claimTimeoutMs ?? 5_000,
    relayRetryMs: o.relayRetryMs ?? 1_000,
    drainMs: o.drainMs ?? 30_000,
    graceMs: o.graceMs ?? 5_000,
    maxRelayBytes: o.maxRelayBytes ?? 8 * 1024 * 1024,
    connectTimeoutMs: o.connectTimeoutMs ?? 5_000,
    transport: o.transport,
  });
}
