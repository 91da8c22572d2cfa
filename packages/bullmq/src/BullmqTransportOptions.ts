import { type Agent, InvalidArgumentError, type Scope } from '@troupe/core';
import type { RedisOptions } from 'ioredis';
import { z } from 'zod';
import { ClusterShape, checkOptions, describeConnection, ms, NAME } from './internal/clusterSchema.js';
import { mintId } from './internal/mintId.js';

/**
 * What {@link bullmqTransport} accepts. `connection` and `build` are required;
 * every other option has the default written beside it.
 *
 * @example
 * ```ts
 * const options: BullmqTransportOptions = {
 *   connection: 'redis://127.0.0.1:6379',
 *   build: '2026.12.1',
 *   maxInFlight: 512,
 *   leaseCheckMs: 500,
 * }
 * const transport = bullmqTransport(options)
 * ```
 */
export interface BullmqTransportOptions {
  /** The Redis 7 server: a `redis://` or `rediss://` URL, or ioredis options. */
  readonly connection: string | RedisOptions;
  /**
   * The build this API host runs (a git sha, a version): every job carries it, and a
   * worker host of another build refuses the job (`ERR_VERSION_SKEW`, on both sides).
   */
  readonly build: string;
  /** Prefix of every Redis key and channel (default `troupe`). */
  readonly prefix?: string | undefined;
  /** The BullMQ queue's name (default `runs`); worker hosts of the same queue take its jobs. */
  readonly queue?: string | undefined;
  /** This API host's id in jobs and channels (default: a random one per transport). */
  readonly ownerId?: string | undefined;
  /**
   * The logical id an agent is known by on worker hosts (default: its `name`): a job names
   * the agent by this id and the build, never by a file URL; each worker host maps ids to
   * its own modules.
   */
  readonly agentIdOf?: ((agent: Agent) => string) | undefined;
  /** Attempts this API host may have queued or running at once; past it `canQueue()` is false (default 1024). */
  readonly maxInFlight?: number | undefined;
  /** The tenant an attempt counts against (with `maxInFlightPerTenant`), from its scope. */
  readonly tenantOf?: ((scope: Scope) => string) | undefined;
  /**
   * Attempts one tenant may have in Redis at once (default: no cap). Past it, the tenant's
   * next attempts wait on this API host, in order, and go out as its attempts end: one
   * busy tenant cannot fill every worker host.
   */
  readonly maxInFlightPerTenant?: number | undefined;
  /** How often the API host checks the hosts' leases and its attempts' jobs (default 1,000 ms). */
  readonly leaseCheckMs?: number | undefined;
  /** This API host's own lease in Redis; worker hosts stop its attempts when it lapses (default 10,000 ms). */
  readonly ownerLeaseMs?: number | undefined;
  /**
   * The grace a cancelled attempt has on its worker host before it is killed there (default
   * 5,000 ms, as the local pool's); the API host's backstop waits this plus `relaySlackMs`
   * for its end, then ends it `cancelled`, forced, and fences it.
   */
  readonly graceMs?: number | undefined;
  /** What a message between hosts may take beyond the grace, for the backstop (default 2,000 ms). */
  readonly relaySlackMs?: number | undefined;
  /**
   * How long a cancel flag lives in Redis (default 86,400,000 ms: a day). A worker host reads
   * the flags of its attempts after every reconnect; the flag is deleted when the attempt ends.
   */
  readonly cancelFlagTtlMs?: number | undefined;
  /** The largest message between hosts, either way (default 8 MiB); a larger one is refused. */
  readonly maxRelayBytes?: number | undefined;
  /**
   * Relayed messages, events and deltas one worker host may send within a second before it
   * counts as a flood (default 50,000, as the local host channel's).
   */
  readonly floodLimit?: number | undefined;
  /** Protocol violations after which a worker host is granted no more work (default 3). */
  readonly maxViolations?: number | undefined;
  /** How long `ready()` waits to reach Redis (default 5,000 ms). */
  readonly connectTimeoutMs?: number | undefined;
}

/**
 * {@link BullmqTransportOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const resolved = resolveBullmqTransportOptions({ connection: 'redis://127.0.0.1:6379', build: 'b1' })
 * resolved.queue       // 'runs'
 * resolved.maxInFlight // 1024
 * ```
 */
export interface ResolvedBullmqTransportOptions {
  readonly connection: string | RedisOptions;
  /** The connection as it may be shown in errors and logs (no password). */
  readonly connectionName: string;
  readonly build: string;
  readonly prefix: string;
  readonly queue: string;
  readonly ownerId: string;
  readonly agentIdOf: (agent: Agent) => string;
  readonly maxInFlight: number;
  readonly tenantOf: ((scope: Scope) => string) | undefined;
  readonly maxInFlightPerTenant: number | undefined;
  readonly leaseCheckMs: number;
  readonly ownerLeaseMs: number;
  readonly graceMs: number;
  readonly relaySlackMs: number;
  readonly cancelFlagTtlMs: number;
  readonly maxRelayBytes: number;
  readonly floodLimit: number;
  readonly maxViolations: number;
  readonly connectTimeoutMs: number;
}

const fn = <T>() => z.custom<T>((v) => typeof v === 'function').optional();
const count = z
  .number()
  .int()
  .min(1)
  .max(1 << 20);

const Schema = z.strictObject({
  ...ClusterShape,
  ownerId: z.string().regex(NAME).optional(),
  agentIdOf: fn<(agent: Agent) => string>(),
  maxInFlight: count.optional(),
  tenantOf: fn<(scope: Scope) => string>(),
  maxInFlightPerTenant: count.optional(),
  leaseCheckMs: ms(10),
  ownerLeaseMs: ms(100),
  graceMs: ms(0),
  relaySlackMs: ms(0),
  cancelFlagTtlMs: ms(1000),
  floodLimit: count.optional(),
  maxViolations: count.optional(),
});

/** The name an agent has by default on worker hosts. */
const byName = (agent: Agent): string => agent.name;

/**
 * Validate {@link bullmqTransport}'s options once, into a fully defaulted
 * read-only object. A bad option throws an `InvalidArgumentError` naming it
 * and what to pass (a connection's password is never shown).
 *
 * @example
 * ```ts
 * const o = resolveBullmqTransportOptions({ connection: 'redis://:secret@127.0.0.1:6379', build: 'b1' })
 * o.connectionName // 'redis://:***@127.0.0.1:6379'
 * ```
 */
export function resolveBullmqTransportOptions(options: BullmqTransportOptions): ResolvedBullmqTransportOptions {
  const o = checkOptions('bullmqTransport', Schema, options);
  if (o.maxInFlightPerTenant !== undefined && o.tenantOf === undefined) {
    throw new InvalidArgumentError(
      'bullmqTransport: maxInFlightPerTenant is set without tenantOf: pass tenantOf (scope => tenant key) too',
    );
  }
  return Object.freeze({
    connection: o.connection,
    connectionName: describeConnection(o.connection),
    build: o.build,
    prefix: o.prefix ?? 'troupe',
    queue: o.queue ?? 'runs',
    ownerId: o.ownerId ?? `owner-${mintId(12)}`,
    agentIdOf: o.agentIdOf ?? byName,
    maxInFlight: o.maxInFlight ?? 1024,
    tenantOf: o.tenantOf,
    maxInFlightPerTenant: o.maxInFlightPerTenant,
    leaseCheckMs: o.leaseCheckMs ?? 1_000,
    ownerLeaseMs: o.ownerLeaseMs ?? 10_000,
    graceMs: o.graceMs ?? 5_000,
    relaySlackMs: o.relaySlackMs ?? 2_000,
    cancelFlagTtlMs: o.cancelFlagTtlMs ?? 86_400_000,
    maxRelayBytes: o.maxRelayBytes ?? 8 * 1024 * 1024,
    floodLimit: o.floodLimit ?? 50_000,
    maxViolations: o.maxViolations ?? 3,
    connectTimeoutMs: o.connectTimeoutMs ?? 5_000,
  });
}
