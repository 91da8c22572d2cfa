/**
 * @troupe/sqlite — the SQLite persistence adapter of Troupe (better-sqlite3):
 * one file, WAL, explicit `synchronous`, migrations with a version table. The
 * default store of daemons.
 */

export { SCHEMA_VERSION } from './internal/migrations.js';
export { SqlitePersistence, sqlitePersistence } from './SqlitePersistence.js';
export type { SqlitePersistenceOptions } from './SqlitePersistenceOptions.js';
