// The crash fuzz (crashRounds.ts) on PostgreSQL: an API host killed with SIGKILL at random points —
// mid-turn, during an answer, inside a tool call, mid-restore — round after round over one
// database; each new host takes over what the last left once its lease has run out (300 ms here).
import { describe, it } from 'node:test';
import { postgresPersistence } from '@troupe/postgres';
import { byDepth } from '../fixtures/testDepth.js';
import { crashRounds } from './crashRounds.js';
import { freshSchema, server } from './postgresStores.js';

// As many as SQLite's crash fuzz in pnpm test; 50 in the deep tier (TROUPE_TEST_DEPTH=deep).
const ROUNDS = Number(process.env.TROUPE_CRASH_ROUNDS ?? byDepth({ quick: 8, deep: 50 }));
const tenantKey = (s: unknown) => (s as { org: string }).org;

describe('PostgreSQL: restore after a crash (SIGKILL) of an API host', () => {
  it(`${ROUNDS} kills at random points: saved messages stay, open requests are answerable, interrupted runs resume, no side effect twice`, async () => {
    const s = await server();
    const schema = freshSchema('crash');
    await crashRounds(ROUNDS, {
      env: () => ({ CRASH_PG_URL: s.url, CRASH_PG_SCHEMA: schema }),
      open: () => postgresPersistence({ connectionString: s.url, schema, tenantKey }),
      unfinishedParents: async () =>
        (
          await s.sql(
            `SELECT run_id AS "runId", status FROM ${schema}.runs
             WHERE status IN ('running', 'interrupted', 'suspended') AND (json::json ->> 'kind') = 'message'`,
          )
        ).rows,
    });
  });
});
