import { type Clock, InvalidArgumentError } from '@troupe/core';
import type { TenantKey } from '@troupe/supervisor';
import type pg from 'pg';
import { z } from 'zod';

/**
 * Options of {@link postgresPersistence}: give `connectionString`, or a `pool` of your own. `S` is
 * the scope its `tenantKey` reads.
 *
 * @example
 * ```ts
 * const options: PostgresPersistenceOptions = {
 *   connectionString: 'postgres://troupe@db.internal:5432/app',
 *   schema: 'troupe',
 *   leaseMs: 10_000,
 * }
 * const store = await postgresPersistence(options)
 * ```
 */
export interface PostgresPersistenceOptions<S = unknown> {
  /** `postgres://user:password@host:port/database`: the store makes its own pool (and ends it at close). */
  readonly connectionString?: string | undefined;
  /**
   * A `pg.Pool` of yours (one per process is plenty): the store takes clients from it and never
   * ends it. Give it an `'error'` listener: an idle client whose server restarts emits one, and a
   * pool with no listener throws it.
   */
  readonly pool?: pg.Pool | undefined;
  /**
   * The PostgreSQL schema (namespace) holding the store's tables (default `public`). Created if
   * missing. A schema holding tables that are not a Troupe store's is refused at open, untouched.
   */
  readonly schema?: string | undefined;
  /** Connections of the pool the store makes from `connectionString` (default 10). */
  readonly maxConnections?: number | undefined;
  /**
   * Maps a scope to the tenant its rows are kept under; default: every scope shares `'default'`.
   * Type its parameter as the supervisor's scope (`(scope: TenantScope) => scope.tenantId`): the
   * store is then typed by it, and a supervisor of another scope schema refuses it at compile time.
   */
  readonly tenantKey?: TenantKey<S> | undefined;
  /**
   * How long this store's claim to be alive lasts on the database clock without being renewed
   * (default 10,000 ms; renewed every third of it). Another host takes over this host's
   * conversations once it has run out: `startAgent` and `answer` there restore them within
   * `leaseMs` plus a second of this host's death. A host whose event loop stalls longer than this
   * may see its runs taken over.
   */
  readonly leaseMs?: number | undefined;
  /** Where default times come from (`prune`, `markInterrupted`, a batch without `at`). */
  readonly clock?: Pick<Clock, 'now'> | undefined;
}

/**
 * {@link PostgresPersistenceOptions} validated and defaulted.
 *
 * @example
 * ```ts
 * const resolved: ResolvedPostgresPersistenceOptions = resolvePostgresPersistenceOptions({ connectionString: 'postgres://localhost/app' })
 * resolved.schema  // 'public'
 * resolved.leaseMs // 10000
 * ```
 */
export interface ResolvedPostgresPersistenceOptions {
  readonly connectionString: string | undefined;
  readonly pool: pg.Pool | undefined;
  readonly schema: string;
  readonly maxConnections: number;
  readonly tenantKey: TenantKey | undefined;
  readonly leaseMs: number;
  readonly clock: Pick<Clock, 'now'>;
}

const Schema = z
  .strictObject({
    connectionString: z.string().min(1).optional(),
    pool: z
      .custom<pg.Pool>(
        (v) => typeof v === 'object' && v !== null && typeof (v as pg.Pool).connect === 'function' && 'totalCount' in v,
      )
      .optional(),
    schema: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_$]{0,62}$/)
      .optional(),
    maxConnections: z.number().int().min(1).max(1000).optional(),
    tenantKey: z.custom<TenantKey>((v) => typeof v === 'function').optional(),
    leaseMs: z.number().int().min(300).max(3_600_000).optional(),
    clock: z.custom<Pick<Clock, 'now'>>((v) => typeof (v as Clock | undefined)?.now === 'function').optional(),
  })
  .refine((o) => (o.connectionString === undefined) !== (o.pool === undefined), {
    message: 'pass exactly one of connectionString or pool',
    path: ['connectionString'],
  });

const HINTS: Record<string, string> = {
  connectionString: 'pass exactly one of connectionString ("postgres://user@host:5432/database") or pool (a pg.Pool)',
  pool: 'pass a pg.Pool (new pg.Pool({ connectionString })), or a connectionString instead',
  schema:
    'pass an unquoted SQL identifier: letters, digits, _ or $, starting with a letter or _, at most 63 characters',
  maxConnections: 'pass an integer from 1 to 1000',
  tenantKey: 'pass a function (scope) => string',
  leaseMs: 'pass a whole number of milliseconds from 300 to 3600000',
  clock: 'pass an object with a now() method',
};

/**
 * Validate options once, at the edge, into a fully defaulted object. A bad option throws an
 * `InvalidArgumentError` naming it and what to pass (never echoing a connection string: it may hold
 * a password).
 *
 * @example
 * ```ts
 * resolvePostgresPersistenceOptions({ connectionString: 'postgres://localhost/app', leaseMs: 50 }) // throws: leaseMs …
 * ```
 */
export function resolvePostgresPersistenceOptions<S = unknown>(
  options: PostgresPersistenceOptions<S>,
): ResolvedPostgresPersistenceOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('postgresPersistence(options): pass { connectionString } or { pool }');
  }
  const parsed = Schema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? (issue?.code === 'unrecognized_keys' ? issue.keys[0] : ''));
    const hint = HINTS[key] ?? `known options: ${Object.keys(HINTS).join(', ')}`;
    const what = issue?.code === 'unrecognized_keys' ? `unknown option ${issue.keys.join(', ')}` : `invalid ${key}`;
    throw new InvalidArgumentError(`postgresPersistence: ${what}: ${hint}`);
  }
  const o = parsed.data;
  return Object.freeze({
    connectionString: o.connectionString,
    pool: o.pool,
    schema: o.schema ?? 'public',
    maxConnections: o.maxConnections ?? 10,
    // The store reads a scope as data of any shape (the supervisor hands over what its schema made).
    tenantKey: o.tenantKey as TenantKey | undefined,
    leaseMs: o.leaseMs ?? 10_000,
    clock: o.clock ?? { now: () => Date.now() },
  });
}
