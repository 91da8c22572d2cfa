// Issue 13, bad input: two processes (here two supervisors, each with its own connection and
// owner row, as two processes have) on one SQLite file. A copy of a conversation that another
// one saved after it loaded is stale: its save is refused (ERR_STORE_FENCED), nothing of it is
// written, and the stale agent stops; a new startAgent loads what is saved.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { type AgentReply, createSupervisor, type Supervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { ctx as conversation } from './records.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

function open(file: string): { supervisor: Supervisor; store: SqlitePersistence } {
  const store = sqlitePersistence({ file, tenantKey });
  const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
  return { supervisor, store };
}

function place(): { file: string; effects: string } {
  const d = tempDir('fencing');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite'), effects: join(d.dir, 'effects.log') };
}

function fenced(reply: AgentReply): boolean {
  return reply.status === 'failed' && isTroupeError(reply.error, 'ERR_STORE_FENCED') && reply.restarted === false;
}

describe('two supervisors on one file: a stale copy of a conversation never overwrites a newer one', () => {
  it('an idle copy held while another process ran a message: its next send is refused, nothing is saved, and a new start goes on from what is saved', async () => {
    const at = place();
    const a = open(at.file);
    const b = open(at.file);
    const stale = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-f1' });
    assert.equal((await stale.send('hello')).status, 'done');
    const fresh = await b.supervisor.startAgent(office, { scope: alice, agentId: 'office-f1' });
    assert.equal((await fresh.send('hello')).status, 'done');
    assert.equal((await fresh.send('hello')).status, 'done');
    const ctx = conversation('office-f1', 'office-f1');
    const before = await b.store.loadState(alice, ctx);
    const shown = await b.store.loadMessages(alice, ctx);
    assert.equal(shown.filter((m) => m.role === 'user').length, 3);

    const reply = await stale.send('hello');
    assert.ok(fenced(reply), JSON.stringify(reply));
    assert.equal(stale.status, 'stopped');
    assert.equal(a.supervisor.agent('office-f1'), undefined, 'the stale agent is let go');
    // Nothing of the stale message was written: the saved state and messages are b's.
    const saved = await b.store.loadState(alice, ctx);
    assert.deepEqual(
      [saved?.revision, saved?.state.messages.length],
      [before?.revision, before?.state.messages.length],
    );
    assert.deepEqual(await b.store.loadMessages(alice, ctx), shown);

    // Started again, the copy is b's conversation, and its saves are taken.
    const again = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-f1' });
    assert.equal(again.snapshot().messages.length, before?.state.messages.length);
    assert.equal((await again.send('hello')).status, 'done');
    assert.equal((await b.store.loadMessages(alice, ctx)).filter((m) => m.role === 'user').length, 4);
    // And now b's copy is the stale one.
    assert.ok(fenced(await fresh.send('hello')));
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('two processes resume one interrupted message: one resumes it, the other is refused before anything of it runs', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const first = open(at.file);
    const agent = await first.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-f2',
      toolContext: { effects: at.effects, gate },
    });
    const reply = agent.send('charge it');
    while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
    await first.supervisor.destroy();
    assert.equal((await reply).status, 'cancelled');
    Atomics.store(gate, 0, 1);
    Atomics.notify(gate, 0);
    await first.store.close();

    const b = open(at.file);
    const c = open(at.file);
    const options = { scope: alice, agentId: 'office-f2', toolContext: { effects: at.effects } };
    const onB = await b.supervisor.startAgent(office, options);
    const onC = await c.supervisor.startAgent(office, options);
    assert.deepEqual([onB.status, onC.status], ['interrupted', 'interrupted']);
    const replies = await Promise.all([onB.resume(), onC.resume()]);
    const done = replies.filter((r) => r.status === 'done');
    const refused = replies.filter(fenced);
    assert.deepEqual([done.length, refused.length], [1, 1], JSON.stringify(replies));
    const lines = existsSync(at.effects) ? readFileSync(at.effects, 'utf8').trim().split('\n') : [];
    assert.equal(lines.filter((l) => l.startsWith('charge')).length, 1, 'the charge happened once');
    assert.equal(lines.filter((l) => l.startsWith('lookup')).length, 2, 'the idempotent lookup re-ran once, not twice');
    const ctx = conversation('office-f2', 'office-f2');
    const shown = await b.store.loadMessages(alice, ctx);
    assert.deepEqual(
      shown.map((m) => m.role),
      ['user', 'assistant'],
      'one user message, one reply',
    );
    const saved = await b.store.loadState(alice, ctx);
    assert.equal(saved?.status, 'idle');
    await b.supervisor.close();
    await c.supervisor.close();
  });
});
