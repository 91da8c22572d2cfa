// Opening a PostgreSQL store: bad URLs and credentials, a schema of another application or of a
// newer Troupe, a read-only role, hosts migrating at once, bad options.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { postgresPersistence, SCHEMA_VERSION } from '@troupe/postgres';
import { SCHEMA_VERSION as SQLITE_SCHEMA_VERSION } from '@troupe/sqlite';
import { freshSchema, server } from './postgresStores.js';
import { rejectsWith } from './records.js';

async function tablesOf(schema: string): Promise<string[]> {
  const s = await server();
  const rows = (await s.sql('SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename', [schema])).rows;
  return rows.map((r: { tablename: string }) => r.tablename);
}

describe('PostgresPersistence: opening', () => {
  it('is at the schema version of the SQLite store (the same logical schema)', () => {
    assert.equal(SCHEMA_VERSION, SQLITE_SCHEMA_VERSION);
  });

  it('a server that is not there: ERR_STORE_UNREACHABLE naming host, port and database, never the password', async () => {
    // Port 1: nothing listens there.
    const url = 'postgres://troupe:hunter2-secret@127.0.0.1:1/appdb';
    await assert.rejects(postgresPersistence({ connectionString: url }), (error: unknown) => {
      assert.ok(isTroupeError(error, 'ERR_STORE_UNREACHABLE'), String(error));
      assert.match(error.message, /127\.0\.0\.1:1\/appdb/);
      assert.doesNotMatch(error.message, /hunter2/);
      return true;
    });
  });

  it('a role the server does not know: ERR_STORE_UNREACHABLE naming the role and database, never the password', async () => {
    const s = await server();
    const url = `postgres://nobody_here:hunter2-secret@127.0.0.1:${s.port}/${s.database}`;
    await assert.rejects(postgresPersistence({ connectionString: url }), (error: unknown) => {
      assert.ok(isTroupeError(error, 'ERR_STORE_UNREACHABLE'), String(error));
      assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${s.port}/${s.database}`));
      assert.match(error.message, /nobody_here/);
      assert.doesNotMatch(error.message, /hunter2/);
      return true;
    });
  });

  it('a database that does not exist: ERR_STORE_UNREACHABLE saying to create it', async () => {
    const s = await server();
    await rejectsWith(
      postgresPersistence({ connectionString: s.urlOf('no_such_db') }),
      'ERR_STORE_UNREACHABLE',
      /no_such_db does not exist: create it/,
    );
  });

  it('a schema holding another application’s tables: ERR_STORE_CORRUPT at open, touching nothing', async () => {
    const s = await server();
    const schema = freshSchema('app');
    await s.sql(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.customers (id int PRIMARY KEY, name text)`);
    await s.sql(`INSERT INTO ${schema}.customers VALUES (1, 'Ada')`);
    await rejectsWith(
      postgresPersistence({ connectionString: s.url, schema }),
      'ERR_STORE_CORRUPT',
      /not a Troupe store's \(customers\): nothing was changed/,
    );
    assert.deepEqual(await tablesOf(schema), ['customers']);
    assert.deepEqual((await s.sql(`SELECT * FROM ${schema}.customers`)).rows, [{ id: 1, name: 'Ada' }]);
  });

  it('a store of a newer schema version: ERR_STORE_VERSION at open, touching nothing', async () => {
    const s = await server();
    const schema = freshSchema('newer');
    await (await postgresPersistence({ connectionString: s.url, schema })).close();
    await s.sql(`INSERT INTO ${schema}.schema_version VALUES (${SCHEMA_VERSION + 1}, 0)`);
    const before = (await s.sql(`SELECT count(*)::int AS n FROM ${schema}.owners`)).rows[0];
    await rejectsWith(
      postgresPersistence({ connectionString: s.url, schema }),
      'ERR_STORE_VERSION',
      new RegExp(
        `schema version ${SCHEMA_VERSION + 1}, newer than this Troupe's ${SCHEMA_VERSION}: nothing was changed`,
      ),
    );
    assert.deepEqual((await s.sql(`SELECT count(*)::int AS n FROM ${schema}.owners`)).rows[0], before);
  });

  it('a read-only role: ERR_STORE_WRITE naming the role', async () => {
    const s = await server();
    const schema = freshSchema('ro');
    await (await postgresPersistence({ connectionString: s.url, schema })).close();
    const role = `reader_${process.pid}`;
    await s.sql(`CREATE ROLE ${role} LOGIN`);
    await s.sql(
      `GRANT USAGE ON SCHEMA ${schema} TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA ${schema} TO ${role}`,
    );
    await rejectsWith(
      postgresPersistence({ connectionString: `postgres://${role}@127.0.0.1:${s.port}/${s.database}`, schema }),
      'ERR_STORE_WRITE',
      new RegExp(`role ${role} may not write there`),
    );
    // A fresh schema: it may not create it either.
    await rejectsWith(
      postgresPersistence({
        connectionString: `postgres://${role}@127.0.0.1:${s.port}/${s.database}`,
        schema: freshSchema('ro_new'),
      }),
      'ERR_STORE_WRITE',
      new RegExp(`role ${role}`),
    );
  });

  it('hosts opening a new schema at once migrate it once (under an advisory lock)', async () => {
    const s = await server();
    const schema = freshSchema('race');
    const stores = await Promise.all(
      Array.from({ length: 6 }, () => postgresPersistence({ connectionString: s.url, schema })),
    );
    try {
      const versions = (await s.sql(`SELECT version::int AS v FROM ${schema}.schema_version ORDER BY version`)).rows;
      assert.deepEqual(versions, [{ v: SCHEMA_VERSION }]);
      assert.equal((await s.sql(`SELECT count(*)::int AS n FROM ${schema}.owners`)).rows[0].n, 6);
    } finally {
      for (const store of stores) await store.close();
    }
    assert.equal((await s.sql(`SELECT count(*)::int AS n FROM ${schema}.owners`)).rows[0].n, 0);
  });

  it('refuses bad options, naming each (one check per rule)', async () => {
    const cases: [unknown, RegExp][] = [
      [{}, /exactly one of connectionString/],
      [{ connectionString: 'postgres://x/y', pool: {} }, /connectionString|pool/],
      [{ connectionString: 'postgres://x/y', leaseMs: 50 }, /leaseMs: pass a whole number of milliseconds from 300/],
      [{ connectionString: 'postgres://x/y', schema: 'a"; DROP' }, /schema: pass an unquoted SQL identifier/],
      [{ connectionString: 'postgres://x/y', maxConnections: 0 }, /maxConnections/],
      [{ connectionString: 'postgres://x/y', tenantKey: 'org' }, /tenantKey: pass a function/],
      [{ connectionString: 'postgres://x/y', file: 'a.db' }, /unknown option file/],
      [null, /pass \{ connectionString \} or \{ pool \}/],
    ];
    for (const [options, pattern] of cases) {
      await assert.rejects(postgresPersistence(options as never), (error: unknown) => {
        assert.ok(isTroupeError(error, 'ERR_INVALID_ARGUMENT'), String(error));
        assert.match(error.message, pattern);
        return true;
      });
    }
  });
});
