/**
 * @troupe/postgres — the PostgreSQL persistence adapter of Troupe (`pg` 8): several API hosts on
 * one database, the same logical schema and contract as `@troupe/sqlite`, writer liveness by a
 * lease on the database clock.
 */

export { SCHEMA_VERSION } from './internal/migrations.js';
export type { StoreAddress } from './internal/storeError.js';
export { PostgresPersistence, postgresPersistence } from './PostgresPersistence.js';
export {
  type PostgresPersistenceOptions,
  type ResolvedPostgresPersistenceOptions,
  resolvePostgresPersistenceOptions,
} from './PostgresPersistenceOptions.js';
