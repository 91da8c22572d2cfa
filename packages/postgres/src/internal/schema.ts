import { TroupeError } from '@troupe/core';
import type pg from 'pg';
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js';
import { quoteIdent, statementsFor } from './statements.js';
import { describeAddress, type StoreAddress } from './storeError.js';

/** What marks a schema as Troupe's (in `troupe_meta`), as in the SQLite store. */
const FORMAT = 'troupe-persistence';

/** The first key of the advisory lock the migration holds (the second is the schema's hash): "tr". */
const LOCK_CLASS = 0x7472;

/**
 * Bring the store's schema to {@link SCHEMA_VERSION} in one transaction, holding a transaction-level
 * advisory lock of the schema, so that two hosts opening at once migrate once (the second waits,
 * then finds the schema current). Refuses, changing nothing: a schema holding tables that are not a
 * Troupe store's (`ERR_STORE_CORRUPT`), one of a newer Troupe (`ERR_STORE_VERSION`).
 */
export async function migrate(client: pg.ClientBase, address: StoreAddress): Promise<void> {
  const schema = address.schema;
  const where = describeAddress(address);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, schema]);
    const tables = new Set(
      (
        await client.query<{ name: string }>(
          'SELECT tablename AS name FROM pg_catalog.pg_tables WHERE schemaname = $1',
          [schema],
        )
      ).rows.map((r) => r.name),
    );
    const q = quoteIdent(schema);
    let current = 0;
    if (tables.size > 0) {
      const format = tables.has('troupe_meta')
        ? (await client.query<{ value: string }>(`SELECT value FROM ${q}.troupe_meta WHERE key = 'format'`)).rows[0]
            ?.value
        : undefined;
      if (format !== FORMAT || !tables.has('schema_version')) {
        throw new TroupeError(
          `${where} holds tables that are not a Troupe store's (${[...tables].slice(0, 5).join(', ')}): nothing was changed; pass another database or schema ({ schema: 'troupe' }) for the store`,
          { code: 'ERR_STORE_CORRUPT' },
        );
      }
      const max = (await client.query<{ v: string | null }>(`SELECT max(version)::text AS v FROM ${q}.schema_version`))
        .rows[0]?.v;
      current = Number(max ?? 0);
      if (!Number.isSafeInteger(current) || current < (MIGRATIONS[0]?.version ?? 1)) {
        throw new TroupeError(
          `${where} is a Troupe store whose schema_version table is empty or damaged (it says ${String(max)}): its schema cannot be known; restore it from a backup`,
          { code: 'ERR_STORE_CORRUPT' },
        );
      }
    }
    if (current > SCHEMA_VERSION) {
      throw new TroupeError(
        `${where} has schema version ${current}, newer than this Troupe's ${SCHEMA_VERSION}: nothing was changed; open it with the newer Troupe that wrote it`,
        { code: 'ERR_STORE_VERSION' },
      );
    }
    const pending = MIGRATIONS.filter((m) => m.version > current);
    if (pending.length > 0) {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${q}`);
      await client.query(`SET LOCAL search_path TO ${q}`);
      if (current === 0) {
        await client.query(
          'CREATE TABLE schema_version (version bigint PRIMARY KEY, applied_at double precision NOT NULL)',
        );
      }
      for (const m of pending) {
        await client.query(m.sql);
        if (current === 0 && m === pending[0]) {
          await client.query("INSERT INTO troupe_meta (key, value) VALUES ('format', $1)", [FORMAT]);
        }
        await client.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)', [m.version, Date.now()]);
      }
    }
    await checkStatements(client, address);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * Prepare (and drop) every statement the store runs, inside the open's transaction: a table, a
 * column or a function the store relies on that is missing (the schema changed by something other
 * than Troupe) is refused at open as `ERR_STORE_CORRUPT`, not at the first write that needs it.
 */
async function checkStatements(client: pg.ClientBase, address: StoreAddress): Promise<void> {
  const statements = statementsFor(address.schema);
  for (const [name, text] of Object.entries(statements)) {
    try {
      await client.query(`PREPARE troupe_check AS ${text}`);
      await client.query('DEALLOCATE troupe_check');
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (code.startsWith('42')) {
        throw new TroupeError(
          `${describeAddress(address)}: the store's schema is damaged (${name}: ${(error as Error).message}): restore it from a backup, or pass another schema`,
          { code: 'ERR_STORE_CORRUPT', cause: error },
        );
      }
      throw error;
    }
  }
}
