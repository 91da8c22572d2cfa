// Issue 31, item 4: desk → manager → clerk, the clerk's tool running, the process killed. A run
// waiting on its child is saved `suspended` (the manager, deferred on a one-thread pool); a
// crash marks only `running` rows interrupted. The next process restored the message
// `interrupted` and resume() ended it `done`, but the store listed the manager's run as
// `suspended` for ever. Every run of a message ends in exactly one terminal status in the store.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, isTerminalRunStatus } from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { startProcess } from '../examples/startProcess.js';
import { desk } from '../fixtures/agents/deepDesk.js';
import { ctx } from './records.js';
import { tempDir } from './sqliteFiles.js';

const CHILD = fileURLToPath(new URL('./crashDeepChild.js', import.meta.url));
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

/** Every run row of the file: id, status, and the run it was spawned by. */
function runRows(file: string): { runId: string; status: string; parentRunId: string | null }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db
      .prepare(`SELECT run_id AS runId, status, json_extract(json, '$.parentRunId') AS parentRunId FROM runs`)
      .all() as { runId: string; status: string; parentRunId: string | null }[];
  } finally {
    db.close();
  }
}

describe('killed while the deepest run of three levels runs a tool', () => {
  it('restored interrupted and resumed: every run of the message ends in one terminal status in the store', async () => {
    const d = tempDir('deep');
    dirs.push(d);
    const file = join(d.dir, 'troupe.sqlite');
    const effects = join(d.dir, 'effects.log');
    const child = startProcess(CHILD, { DEEP_FILE: file, DEEP_EFFECTS: effects });
    await Promise.race([child.line(/^in-tool$/), child.exited]);
    assert.ok(child.lines.includes('in-tool'), `the child did not reach the clerk's tool: ${child.stderr()}`);
    child.child.kill('SIGKILL');
    assert.equal((await child.exited).signal, 'SIGKILL');
    const before = runRows(file);
    assert.equal(before.length, 3, `three runs were saved: ${JSON.stringify(before)}`);
    assert.ok(
      before.some((r) => r.status === 'suspended'),
      `a run waiting on its child was saved suspended: ${JSON.stringify(before)}`,
    );

    const store = sqlitePersistence({ file, tenantKey });
    const supervisor = createSupervisor({ agents: [desk], persistence: store, pool: { threads: 1, graceMs: 100 } });
    try {
      const agent = await supervisor.startAgent(desk, { scope: alice, agentId: 'desk-1', toolContext: { effects } });
      assert.equal(agent.status, 'interrupted');
      const reply = await agent.resume();
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      assert.match((reply as { text: string }).text, /interrupted by a restart/);
      assert.deepEqual(await store.loadRuns(alice, ctx('desk-1', 'desk-1')), [], 'no run of the conversation is live');
      const rows = runRows(file);
      assert.ok(rows.length >= 3, JSON.stringify(rows));
      for (const r of rows) assert.ok(isTerminalRunStatus(r.status as never), `run ${r.runId} is ${r.status}`);
      for (const r of before) {
        assert.ok(
          rows.some((x) => x.runId === r.runId),
          `run ${r.runId} is still in the store`,
        );
      }
      const filed = existsSync(effects) ? readFileSync(effects, 'utf8').trim().split('\n') : [];
      assert.equal(filed.length, 1, 'the clerk filed once (its tool is not re-run)');
    } finally {
      await supervisor.close();
    }
  });
});
