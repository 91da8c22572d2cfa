// Issue 13, bad input: a conversation whose message runs in another live process (two
// supervisors, each with its own store connection and owner, on one file). Starting it here must
// neither take that message over (resume it as if its process had crashed) nor withdraw its open
// questions; a process that died after this supervisor started is found dead at this start.
// Crash/restart tester's findings.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isTroupeError, type Request } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { ctx } from './records.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

function place(): { file: string; effects: string } {
  const d = tempDir('elsewhere');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite'), effects: join(d.dir, 'effects.log') };
}

function open(file: string): { supervisor: Supervisor; store: SqlitePersistence } {
  const store = sqlitePersistence({ file, tenantKey });
  return {
    supervisor: createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } }),
    store,
  };
}

function effects(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
}

const busy = (e: unknown) =>
  isTroupeError(e, 'ERR_CONVERSATION_BUSY') && /another live process/.test((e as Error).message);

async function held(gate: Int32Array): Promise<void> {
  while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
}

function release(gate: Int32Array): void {
  Atomics.store(gate, 0, 1);
  Atomics.notify(gate, 0);
}

describe('a conversation running a message in another live process', () => {
  it('mid-tool: startAgent here is refused ERR_CONVERSATION_BUSY and changes nothing; the message finishes there, once', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at.file);
    const b = open(at.file);
    const agent = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-l1',
      toolContext: { effects: at.effects, gate },
    });
    const reply = agent.send('charge it');
    await held(gate);
    await assert.rejects(b.supervisor.startAgent(office, { scope: alice, agentId: 'office-l1' }), busy);
    release(gate);
    const done = await reply;
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.doesNotMatch((done as { text: string }).text, /interrupted/);
    assert.deepEqual(
      effects(at.effects).map((l) => l.split(' ')[0]),
      ['lookup', 'charge'],
      'each tool ran once, in the process that ran the message',
    );
    // Once that message has ended, this process starts the conversation as it was saved there.
    // Its toolContext again (never saved): a restore with none of its keys is refused (ERR_TOOL_CONTEXT_MISSING).
    const here = await b.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-l1',
      toolContext: { effects: at.effects },
    });
    assert.equal(here.status, 'idle');
    assert.deepEqual(
      (await b.store.loadMessages(alice, ctx('office-l1', 'office-l1'))).map((m) => m.role),
      ['user', 'assistant'],
    );
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('resumed by an answer: startAgent here is refused while the answered run runs there; no question is withdrawn', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at.file);
    const b = open(at.file);
    const agent = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-l2',
      toolContext: { effects: at.effects, gate },
    });
    const asked = await agent.send('please release');
    assert.equal(asked.status, 'suspended');
    const request = (asked as { request: Request }).request;
    // Before the answer: suspended, nothing runs — this process may hold a copy (its saves are fenced).
    const answered = a.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } });
    await held(gate);
    await assert.rejects(b.supervisor.startAgent(office, { scope: alice, agentId: 'office-l2' }), busy);
    release(gate);
    const reply = await answered;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match((reply as { text: string }).text, /released api to prod/);
    // Its toolContext again (never saved): a restore with none of its keys is refused (ERR_TOOL_CONTEXT_MISSING).
    const here = await b.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-l2',
      toolContext: { effects: at.effects },
    });
    assert.equal(here.status, 'idle');
    assert.equal(effects(at.effects).filter((l) => l.startsWith('release')).length, 1);
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('a refused start marks nothing: the refusing process’s own running message stays its own', async () => {
    const at = place();
    const gateA = new Int32Array(new SharedArrayBuffer(8));
    const gateB = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at.file);
    const b = open(at.file);
    const onA = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-c1',
      toolContext: { effects: at.effects, gate: gateA },
    });
    const onB = await b.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-c2',
      toolContext: { effects: at.effects, gate: gateB },
    });
    const replyA = onA.send('charge it');
    const replyB = onB.send('charge it');
    await held(gateA);
    await held(gateB);
    // Each is refused the other's conversation; neither refusal marks the refusing store's own run.
    await assert.rejects(a.supervisor.startAgent(office, { scope: alice, agentId: 'office-c2' }), busy);
    await assert.rejects(b.supervisor.startAgent(office, { scope: alice, agentId: 'office-c1' }), busy);
    release(gateA);
    release(gateB);
    for (const reply of [await replyA, await replyB]) {
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      assert.doesNotMatch((reply as { text: string }).text, /interrupted/);
    }
    assert.equal(effects(at.effects).filter((l) => l.startsWith('lookup')).length, 2, 'one lookup each');
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('two supervisors sharing one store: the second is refused the first one’s running conversation', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const store = sqlitePersistence({ file: at.file, tenantKey });
    const first = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    const second = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
    const agent = await first.startAgent(office, {
      scope: alice,
      agentId: 'office-s1',
      toolContext: { effects: at.effects, gate },
    });
    const reply = agent.send('charge it');
    await held(gate);
    await assert.rejects(second.startAgent(office, { scope: alice, agentId: 'office-s1' }), busy);
    release(gate);
    assert.equal((await reply).status, 'done');
    await second.close();
    await first.close();
  });

  it('a copy held here, quiet: its other question is refused while another process runs the conversation', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at.file);
    const b = open(at.file);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-h1' });
    assert.equal((await agent.send('ship twice')).status, 'suspended');
    const [q1, q2] = a.supervisor.pendingRequests().map((p) => p.request.id);
    assert.ok(q1 !== undefined && q2 !== undefined);
    await a.supervisor.stopAgent('office-h1');
    // b holds the suspended conversation, both questions open in its tree.
    await b.supervisor.startAgent(office, { scope: alice, agentId: 'office-h1' });
    assert.equal(b.supervisor.pendingRequests().length, 2);
    // a answers the first (restoring it there); its answered tool holds.
    const first = a.supervisor.answer(
      q1,
      { ok: true, data: { env: 'prod' } },
      { scope: alice, toolContext: { effects: at.effects, gate } },
    );
    await held(gate);
    await assert.rejects(b.supervisor.answer(q2, { ok: true, data: { env: 'eu' } }), busy);
    assert.equal((await b.store.getRequest(alice, q2))?.status, 'open', 'the refused answer is not taken');
    release(gate);
    const after = await first;
    assert.equal(after.status, 'suspended', JSON.stringify(after));
    const last = await a.supervisor.answer(q2, { ok: true, data: { env: 'eu' } });
    assert.equal(last.status, 'done', JSON.stringify(last));
    assert.equal(effects(at.effects).filter((l) => l.startsWith('release')).length, 2, 'each answered tool ran once');
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('a copy held here that another process saved past: its answer is refused before it is taken, then answered on what is saved', async () => {
    const at = place();
    const a = open(at.file);
    const b = open(at.file);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-h2' });
    assert.equal((await agent.send('ship twice')).status, 'suspended');
    const [q1, q2] = a.supervisor.pendingRequests().map((p) => p.request.id);
    assert.ok(q1 !== undefined && q2 !== undefined);
    await a.supervisor.stopAgent('office-h2');
    await b.supervisor.startAgent(office, { scope: alice, agentId: 'office-h2', toolContext: { effects: at.effects } });
    // a answers the first and goes on to wait on the second: the store is past b's copy.
    const first = await a.supervisor.answer(
      q1,
      { ok: true, data: { env: 'prod' } },
      { scope: alice, toolContext: { effects: at.effects } },
    );
    assert.equal(first.status, 'suspended', JSON.stringify(first));
    await assert.rejects(
      b.supervisor.answer(q2, { ok: true, data: { env: 'eu' } }),
      (e) => isTroupeError(e, 'ERR_STORE_FENCED') && /stays open/.test((e as Error).message),
    );
    assert.equal((await b.store.getRequest(alice, q2))?.status, 'open');
    assert.equal(b.supervisor.agent('office-h2'), undefined, 'the stale copy is let go');
    await a.supervisor.stopAgent('office-h2');
    // With a scope, the answer restores what is saved and resumes the run that asked.
    const done = await b.supervisor.answer(
      q2,
      { ok: true, data: { env: 'eu' } },
      { scope: alice, toolContext: { effects: at.effects } },
    );
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.match((done as { text: string }).text, /prod[\s\S]*eu|eu[\s\S]*prod/);
    assert.doesNotMatch((done as { text: string }).text, /interrupted/);
    assert.equal(effects(at.effects).filter((l) => l.startsWith('release')).length, 2, 'each answered tool ran once');
    await a.supervisor.close();
    await b.supervisor.close();
  });

  it('a process that died after this supervisor started: its message is found interrupted here, with what its subagent spent', async () => {
    const at = place();
    // This supervisor recovered (its first start) before the other process ran and died.
    const c = open(at.file);
    await (await c.supervisor.startAgent(office, { scope: alice, agentId: 'office-other' })).send('hello');
    const child = fork(fileURLToPath(new URL('./liveElsewhereChild.js', import.meta.url)), [at.file, at.effects], {
      stdio: 'ignore',
    });
    try {
      // The charge's side effect is written, then its tool pauses: the window to kill in.
      while (!effects(at.effects).some((l) => l.startsWith('charge'))) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      child.kill('SIGKILL');
      await once(child, 'exit');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    const agent = await c.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-l3',
      toolContext: { effects: at.effects },
    });
    assert.equal(agent.status, 'interrupted');
    const done = await agent.resume();
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.deepEqual(done.totalUsage, { inputTokens: 100, outputTokens: 10 });
    assert.equal(effects(at.effects).filter((l) => l.startsWith('charge')).length, 1, 'the charge is not re-run');
    await c.supervisor.close();
  });
});
