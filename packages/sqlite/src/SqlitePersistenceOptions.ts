import type { Clock } from '@troupe/core';
import type { TenantKey } from '@troupe/supervisor';

/**
 * Options of {@link sqlitePersistence}: give `file`, or `directory` (the file is `troupe.sqlite` in it).
 * `S` is the scope its `tenantKey` reads.
 *
 * @example
 * ```ts
 * const options: SqlitePersistenceOptions = { directory: './data', synchronous: 'NORMAL', busyTimeoutMs: 2000 }
 * const store = sqlitePersistence(options)
 * ```
 */
export interface SqlitePersistenceOptions<S = unknown> {
  /** The database file (created if missing). */
  readonly file?: string;
  /** A directory (created if missing) holding `troupe.sqlite`. */
  readonly directory?: string;
  /**
   * Maps a scope to the tenant its rows are kept under; default: every scope
   * shares `'default'`. Type its parameter as the supervisor's scope
   * (`(scope: TenantScope) => scope.tenantId`): the store is then typed by it,
   * and a supervisor of another scope schema refuses it at compile time.
   */
  readonly tenantKey?: TenantKey<S>;
  /**
   * `NORMAL` (default): in WAL mode a commit survives the process dying at
   * any point (SIGKILL, a crash) and the file is never corrupted; only a
   * power loss or an OS crash can lose the last commits. `FULL` syncs the
   * WAL on every commit, surviving power loss too, at the disk's sync cost
   * (milliseconds on most disks, over the turn budget).
   */
  readonly synchronous?: 'NORMAL' | 'FULL';
  /** How long a write waits for another connection's write to finish before `ERR_STORE_LOCKED` (default 5,000 ms). */
  readonly busyTimeoutMs?: number;
  /** Where default times come from (`prune`, `markInterrupted`, a batch without `at`). */
  readonly clock?: Pick<Clock, 'now'>;
}
