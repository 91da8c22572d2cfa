// A message whose end could not be saved (the write failed: a full disk, a file made read-only) in
// a process that goes on. Its run's row stays `running` under this process's own store, and
// nothing runs it any more. Restored in this same process (the agent stopped and started again, or
// a second supervisor on the same store), the conversation must come back as after a crash:
// interrupted, resumable, the charge not run again — not refused as "running a message in another
// live process", which is false. A message running in another live process is still refused
// (liveElsewhere.test.ts).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

function place(): { file: string; effects: string } {
  const d = tempDir('unsaved-end');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite'), effects: join(d.dir, 'effects.log') };
}

function charges(file: string): number {
  return existsSync(file) ? (readFileSync(file, 'utf8').match(/^charge /gm)?.length ?? 0) : 0;
}

/**
 * Make every write that ends a run fail inside SQLite, until the returned function is called:
 * a trigger (made through a connection of its own) aborts the statement, so the store's
 * transaction fails and is rolled back as on a full disk; the store reports ERR_STORE_WRITE.
 */
function failRunEnds(file: string): () => void {
  const db = new Database(file);
  db.exec(`CREATE TRIGGER fail_run_end BEFORE UPDATE OF status ON runs
    WHEN NEW.status NOT IN ('running', 'suspended')
    BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`);
  return () => {
    db.exec('DROP TRIGGER fail_run_end');
    db.close();
  };
}

/** A message of agent `agentId` whose end fails to save; the writes work again afterwards. */
async function endUnsaved(
  supervisor: Supervisor,
  file: string,
  effects: string,
  agentId: string,
): Promise<{ runId: string }> {
  const failures: { code: unknown; runId: string }[] = [];
  const onFailed = (e: { error: Error; runId: string }) =>
    failures.push({ code: (e.error as { code?: unknown }).code, runId: e.runId });
  supervisor.on('persistence.failed', onFailed);
  const agent = await supervisor.startAgent(office, { scope: alice, agentId, toolContext: { effects } });
  const restore = failRunEnds(file);
  let reply: Awaited<ReturnType<typeof agent.send>>;
  try {
    reply = await agent.send('charge it');
  } finally {
    restore();
    supervisor.off('persistence.failed', onFailed);
  }
  assert.equal(reply.status, 'failed', JSON.stringify(reply));
  assert.ok(isTroupeError((reply as { error: unknown }).error, 'ERR_STORE_WRITE'), JSON.stringify(reply));
  const failure = failures.find((f) => f.code === 'ERR_STORE_WRITE');
  assert.ok(failure !== undefined, `persistence.failed: ${JSON.stringify(failures)}`);
  return { runId: failure.runId };
}

describe('a message whose end failed to save, in a process that goes on (SQLite)', () => {
  it('stopped and started again in the same supervisor: interrupted (as after a crash), resumed without charging twice', async () => {
    const at = place();
    const store: SqlitePersistence = sqlitePersistence({ file: at.file, tenantKey });
    const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    try {
      const { runId } = await endUnsaved(supervisor, at.file, at.effects, 'office-u1');
      assert.equal((await store.getRun(alice, runId))?.status, 'running', 'the run row was left running');
      assert.equal(charges(at.effects), 1);
      await supervisor.stopAgent('office-u1');
      const again = await supervisor.startAgent(office, {
        scope: alice,
        agentId: 'office-u1',
        toolContext: { effects: at.effects },
      });
      assert.equal(again.status, 'interrupted');
      assert.equal((await store.getRun(alice, runId))?.status, 'interrupted');
      const done = await again.resume();
      assert.equal(done.status, 'done', JSON.stringify(done));
      assert.equal(charges(at.effects), 1, 'the charge is not run again');
    } finally {
      await supervisor.close();
    }
  });

  it('a second supervisor on the same store: interrupted there, not refused as running in another live process', async () => {
    const at = place();
    const store = sqlitePersistence({ file: at.file, tenantKey });
    const first = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    const second = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    try {
      await endUnsaved(first, at.file, at.effects, 'office-u2');
      await first.stopAgent('office-u2');
      // Its toolContext again (never saved): a restore with none of its keys is refused (ERR_TOOL_CONTEXT_MISSING).
      const there = await second.startAgent(office, {
        scope: alice,
        agentId: 'office-u2',
        toolContext: { effects: at.effects },
      });
      assert.equal(there.status, 'interrupted');
    } finally {
      await second.close();
      await first.close();
    }
  });
});
