// PostgreSQL stores for tests: one server per test file (started by the harness, stopped by
// itself), one fresh schema per store.
import { after } from 'node:test';
import { type PostgresPersistence, type PostgresPersistenceOptions, postgresPersistence } from '@troupe/postgres';
import type { MakeStore } from '@troupe/supervisor/testing';
import { type PostgresServer, startPostgres } from '../servers/postgres.js';

let started: Promise<PostgresServer> | undefined;
// Registered as this module loads (the file's top level), so it runs after all of the file's tests.
after(async () => (await started)?.stop());

/** This file's server, started on first use and stopped after the file's tests. */
export function server(): Promise<PostgresServer> {
  started ??= startPostgres({ label: 'store' });
  return started;
}

let schemas = 0;

/** A new schema name, unique in this process. */
export function freshSchema(label = 's'): string {
  return `${label}_${process.pid}_${++schemas}`;
}

/** Open a store on this file's server in a schema of its own. */
export async function openStore(
  options: Omit<PostgresPersistenceOptions, 'connectionString' | 'pool'> & { schema?: string } = {},
): Promise<PostgresPersistence> {
  const s = await server();
  return postgresPersistence({ connectionString: s.url, schema: options.schema ?? freshSchema(), ...options });
}

/** {@link MakeStore} of the contract: a fresh schema per store, dropped at cleanup. */
export const makePostgresStore: MakeStore = async (options) => {
  const s = await server();
  const schema = freshSchema('contract');
  const store = await postgresPersistence({ connectionString: s.url, schema, ...options });
  return { store, cleanup: async () => void (await s.sql(`DROP SCHEMA ${schema} CASCADE`)) };
};
