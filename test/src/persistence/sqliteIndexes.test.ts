import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sqlitePersistence } from '@troupe/sqlite';
import Database from 'better-sqlite3';
import { SQL } from '../../../packages/sqlite/dist/internal/statements.js';
import { ctx, envelope, run, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

// A daemon's store grows for years: no statement of it may read a whole table (a restore, an
// interrupt or a prune that scans every run ever saved gets slower with every message), and a
// turn that saves a finished run again writes no index entry it does not move.

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
function file(name = 'store.sqlite'): string {
  const d = tempDir('indexes');
  dirs.push(d);
  return join(d.dir, name);
}

/** Bind placeholder values to a statement's parameters (named `@x` or positional `?`). */
function placeholders(sql: string): unknown[] {
  const named = [...sql.matchAll(/@(\w+)/g)].map((m) => m[1] as string);
  if (named.length > 0) return [Object.fromEntries(named.map((n) => [n, n === 'live' ? '[]' : null]))];
  return Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 'x');
}

/** The query plan's lines of every statement that reads a table. */
function plans(db: Database.Database): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, sql] of Object.entries(SQL)) {
    const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...placeholders(sql)) as { detail: string }[];
    out.set(
      name,
      rows.map((r) => r.detail),
    );
  }
  return out;
}

// Tables a store reads whole by design: its own few owner rows (one per open store).
const SMALL = new Set(['owners']);

function assertNoTableScan(db: Database.Database): void {
  const scans: string[] = [];
  for (const [name, lines] of plans(db)) {
    for (const line of lines) {
      const scan = /^SCAN (\w+)$/.exec(line);
      if (scan !== null && !SMALL.has(scan[1] as string)) scans.push(`${name}: ${line}`);
    }
  }
  assert.deepEqual(scans, [], 'statements that read a whole table');
}

describe('SQLite indexes', () => {
  it('no statement of the store reads a whole table of the current schema', async () => {
    const path = file();
    await sqlitePersistence({ file: path, tenantKey }).close();
    const db = new Database(path, { readonly: true });
    try {
      assertNoTableScan(db);
      const p = plans(db);
      // The live runs are read from the partial index that holds them only.
      assert.match((p.get('liveRuns') ?? []).join(), /USING INDEX runs_live/);
      assert.match((p.get('liveAndInterruptedRuns') ?? []).join(), /USING INDEX runs_live/);
      assert.match((p.get('interrupt') ?? []).join(), /USING INDEX runs_live/);
      assert.match((p.get('runningRuns') ?? []).join(), /USING INDEX runs_live/);
      assert.match((p.get('pruneRuns') ?? []).join(), /USING INDEX runs_finished/);
      // A conversation's deletion cascades to its runs by an index (SQLite looks child rows up by the key).
      const cascade = db
        .prepare('EXPLAIN QUERY PLAN DELETE FROM runs WHERE tenant = ? AND conversation_id = ?')
        .all('t', 'c') as { detail: string }[];
      assert.match(cascade.map((r) => r.detail).join(), /USING (COVERING )?INDEX runs_of_conversation/);
    } finally {
      db.close();
    }
  });

  it('a store of schema 3 opens migrated: the run indexes of schema 4, nothing scans', async () => {
    const path = file();
    const fixture = fileURLToPath(new URL('../../src/persistence/fixtures/schema-3.sqlite', import.meta.url));
    copyFileSync(fixture, path);
    const before = new Database(path, { readonly: true });
    const old = before
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'")
      .pluck()
      .all();
    before.close();
    assert.ok(old.includes('runs_by_status') && !old.includes('runs_live'), 'the fixture is of schema 3');
    const store = sqlitePersistence({ file: path, tenantKey });
    const scope = { tenant: 'fixture-tenant' };
    // What the fixture holds is read through the new indexes: its suspended run is live.
    assert.deepEqual(
      (await store.loadRuns(scope, ctx('conversation-v2', 'agent-v2'))).map((r) => [r.runId, r.status]),
      [['run-v2', 'suspended']],
    );
    await store.close();
    const db = new Database(path, { readonly: true });
    try {
      const names = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL")
        .pluck()
        .all();
      assert.deepEqual([...names].sort(), ['runs_finished', 'runs_live', 'runs_of_conversation']);
      assertNoTableScan(db);
    } finally {
      db.close();
    }
  });

  it('a run is in the live runs’ index while it runs, out of it once it ends, and pruned by age', async () => {
    const path = file();
    const store = sqlitePersistence({ file: path, tenantKey });
    const scope = { tenant: 't1' };
    const c = ctx('c1');
    await store.commit(scope, { envelope: envelope(c), runs: [run(c, 'r1', { status: 'running' })] }, c);
    const live = () => {
      const db = new Database(path, { readonly: true });
      try {
        return db
          .prepare(
            "SELECT run_id FROM runs INDEXED BY runs_live WHERE tenant = ? AND conversation_id = ? AND status IN ('running', 'suspended', 'interrupted')",
          )
          .pluck()
          .all('t1', 'c1');
      } finally {
        db.close();
      }
    };
    assert.deepEqual(live(), ['r1']);
    await store.commit(scope, { runs: [run(c, 'r1', { status: 'done', updatedAt: 50 })] }, c);
    assert.deepEqual(live(), []);
    assert.deepEqual(await store.loadRuns(scope, c), []);
    // Pruned by the finished runs' index once old enough (and only then).
    assert.equal((await store.prune({ finishedRunsOlderThanMs: 10, now: 5, scope })).runs, 0);
    assert.equal((await store.prune({ finishedRunsOlderThanMs: 10, now: 100, scope })).runs, 1);
    await store.close();
  });
});
