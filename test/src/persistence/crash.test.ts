// Issue 13 item 6: a supervisor on SQLite killed with SIGKILL at random points — mid-turn,
// mid-tool, mid-restore — fifty times over one file; each new process restores what the last left
// (see crashRounds.ts for what is checked).
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { byDepth } from '../fixtures/testDepth.js';
import { crashRounds } from './crashRounds.js';

// 50 rounds in the deep tier (TROUPE_TEST_DEPTH=deep), 8 in pnpm test.
const ROUNDS = Number(process.env.TROUPE_CRASH_ROUNDS ?? byDepth({ quick: 8, deep: 50 }));
const tenantKey = (s: unknown) => (s as { org: string }).org;

describe('restore after a crash (SIGKILL)', () => {
  it(`${ROUNDS} kills at random points: saved messages stay, open requests are answerable, interrupted runs resume, no side effect twice`, async () => {
    await crashRounds(ROUNDS, {
      env: (dir) => ({ CRASH_FILE: join(dir, 'troupe.sqlite') }),
      open: async (dir) => sqlitePersistence({ file: join(dir, 'troupe.sqlite'), tenantKey }),
      unfinishedParents: async (dir) => {
        // No message was dropped on the way: every parent's run the file holds has ended (a
        // conversation restored idle over a run left interrupted would keep it so for ever).
        const db = new Database(join(dir, 'troupe.sqlite'), { readonly: true });
        try {
          return db
            .prepare(
              `SELECT run_id AS runId, status FROM runs
               WHERE json_extract(json, '$.kind') = 'message' AND status IN ('running', 'interrupted', 'suspended')`,
            )
            .all();
        } finally {
          db.close();
        }
      },
    });
  });
});
