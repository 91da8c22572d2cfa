// Usage across restarts: a conversation whose tree is suspended at two depths, restored twice on
// SQLite (a part of the tree ends in the process between), ends with the same totals as without
// the restarts. Hostile-tester finding: a restore set no run's subtree total and not the root's
// own usage, so what a subtree spent in a process that ended was lost (the conversation's
// totalUsage read 2200/4 where 2222/8 was spent).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, it } from 'node:test';
import type { Usage } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, MemoryPersistence, type PersistenceAdapter, type Supervisor } from '@troupe/supervisor';
import { usageRoot } from '../fixtures/agents/usageTree.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const scope = { org: 'acme' };

/** Send, answer Y, then X (restarting before each answer if `restart`); the conversation's totals at the end. */
async function run(store: () => PersistenceAdapter, restart: boolean): Promise<{ usage: Usage; totalUsage: Usage }> {
  const open = (): Supervisor => createSupervisor({ agents: [usageRoot], persistence: store(), pool: { threads: 2 } });
  let supervisor = open();
  try {
    const agent = await supervisor.startAgent(usageRoot, { scope, agentId: 'acme.usage' });
    assert.equal((await agent.send('go')).status, 'suspended');
    const ids = new Map(supervisor.pendingRequests().map((r) => [r.request.prompt, r.request.id]));
    assert.deepEqual([...ids.keys()].sort(), ['X', 'Y']);
    let last: string | undefined;
    for (const prompt of ['Y', 'X']) {
      if (restart) {
        await supervisor.close();
        supervisor = open();
      }
      last = (await supervisor.answer(ids.get(prompt) as string, { ok: true }, { scope })).status;
    }
    assert.equal(last, 'done');
    let snapshot = supervisor.agent('acme.usage')?.snapshot();
    if (restart) {
      // And once more: what was saved at the end carries the same totals.
      const live = snapshot;
      await supervisor.close();
      supervisor = open();
      snapshot = (await supervisor.startAgent(usageRoot, { scope, agentId: 'acme.usage' })).snapshot();
      assert.deepEqual(
        { usage: snapshot.usage, totalUsage: snapshot.totalUsage },
        { usage: live?.usage, totalUsage: live?.totalUsage },
        'the conversation as restored after its last message',
      );
    }
    assert.ok(snapshot !== undefined);
    return { usage: snapshot.usage, totalUsage: snapshot.totalUsage };
  } finally {
    await supervisor.close();
  }
}

it("a conversation restored twice mid-tree ends with the totals it spent (no subtree's tokens lost)", async () => {
  const d = tempDir('usage-restart');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const inMemory = await run(() => new MemoryPersistence({ tenantKey }), false);
  // Root 2 × 1000, X 2 × 100, mid 2 × 10, Y 2 × 1 (input); one output token a turn, 8 turns.
  assert.deepEqual(inMemory, {
    usage: { inputTokens: 2000, outputTokens: 2 },
    totalUsage: { inputTokens: 2222, outputTokens: 8 },
  });
  const restarted = await run(() => sqlitePersistence({ file, tenantKey }), true);
  assert.deepEqual(restarted, inMemory);
});

/** Send, (restart,) answer Y if `answerY`, cancel the conversation mid-tree, (restart and load it): its totals. */
async function cancelled(store: () => PersistenceAdapter, restart: boolean, answerY: boolean): Promise<Usage> {
  const open = (): Supervisor => createSupervisor({ agents: [usageRoot], persistence: store(), pool: { threads: 2 } });
  let supervisor = open();
  try {
    const agent = await supervisor.startAgent(usageRoot, { scope, agentId: 'acme.cut' });
    assert.equal((await agent.send('go')).status, 'suspended');
    const y = supervisor.pendingRequests().find((r) => r.request.prompt === 'Y')?.request.id as string;
    if (restart) {
      await supervisor.close();
      supervisor = open();
      // Restored (suspended, both questions open) by starting it again.
      assert.equal((await supervisor.startAgent(usageRoot, { scope, agentId: 'acme.cut' })).status, 'suspended');
    }
    // Y answers, and so does its parent: X still waits for a person when the cancel comes.
    if (answerY) assert.equal((await supervisor.answer(y, { ok: true }, { scope })).status, 'suspended');
    // Its parent agent reports the cancel once the conversation is saved.
    const reported = new Promise((resolve) => supervisor.once('agent.cancelled', resolve));
    assert.equal(supervisor.cancel('acme.cut'), true);
    await reported;
    if (restart) {
      await supervisor.close();
      supervisor = open();
      return (await supervisor.startAgent(usageRoot, { scope, agentId: 'acme.cut' })).snapshot().totalUsage;
    }
    return supervisor.agent('acme.cut')?.snapshot().totalUsage as Usage;
  } finally {
    await supervisor.close();
  }
}

for (const [answerY, spent] of [
  // Root 1000 (one turn), X 100 (it asked), the middle 10 and Y 1 (they wait): an output token a turn.
  [false, { inputTokens: 1111, outputTokens: 4 }],
  // The same, and the middle's and Y's second turns once Y is answered.
  [true, { inputTokens: 1122, outputTokens: 6 }],
] as const) {
  it(`a conversation cancelled mid-tree after a restart (${answerY ? 'one question answered' : 'both open'}) keeps, saved, every token its tree spent`, async () => {
    const d = tempDir('usage-cancel');
    dirs.push(d);
    const file = join(d.dir, 'troupe.sqlite');
    const inMemory = await cancelled(() => new MemoryPersistence({ tenantKey }), false, answerY);
    assert.deepEqual(inMemory, spent);
    assert.deepEqual(await cancelled(() => sqlitePersistence({ file, tenantKey }), true, answerY), inMemory);
  });
}
