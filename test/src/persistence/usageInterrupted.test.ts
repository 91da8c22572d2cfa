// Usage across a crash: what a subagent spent before the process died, mid-tool, is in the totals
// of the message that resume() finishes (crash/restart tester: it was lost).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

it('a subagent interrupted in its side effect: resume() reports the tokens it spent before the crash', async () => {
  const d = tempDir('usage-interrupted');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const effects = join(d.dir, 'effects.log');
  const open = () =>
    createSupervisor({
      agents: [office],
      persistence: sqlitePersistence({ file, tenantKey }),
      pool: { threads: 1, graceMs: 100 },
    });

  // Without a crash: the cashier's first model call is the message's only spend.
  const plain = open();
  const calm = await plain.startAgent(office, { scope: alice, agentId: 'office-u0', toolContext: { effects } });
  const whole = await calm.send('delegate a charge');
  assert.equal(whole.status, 'done', JSON.stringify(whole));
  assert.deepEqual(whole.totalUsage, { inputTokens: 100, outputTokens: 10 });
  await plain.close();

  const gate = new Int32Array(new SharedArrayBuffer(8));
  const a = open();
  const agent = await a.startAgent(office, { scope: alice, agentId: 'office-u1', toolContext: { effects, gate } });
  const reply = agent.send('delegate a charge');
  while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
  await a.destroy();
  assert.equal((await reply).status, 'cancelled');
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0);

  const b = open();
  const restored = await b.startAgent(office, { scope: alice, agentId: 'office-u1', toolContext: { effects } });
  assert.equal(restored.status, 'interrupted');
  const done = await restored.resume();
  assert.equal(done.status, 'done', JSON.stringify(done));
  assert.deepEqual(done.totalUsage, { inputTokens: 100, outputTokens: 10 }, 'the cashier’s tokens before the crash');
  // And the conversation keeps them for its next message's baseline.
  const next = await restored.send('hello');
  assert.deepEqual(next.totalUsage, { inputTokens: 0, outputTokens: 0 });
  await b.close();
});
