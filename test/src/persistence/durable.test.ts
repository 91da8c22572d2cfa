// Issue 13: a supervisor on SQLite, stopped (close, destroy) and started again on the same file —
// nothing open is lost, nothing runs twice. The crash (SIGKILL) version is crash.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { defineAgent, isTroupeError, type Request } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { type AgentReply, createSupervisor, type Supervisor, type SupervisorOptions } from '@troupe/supervisor';
import Database from 'better-sqlite3';
import { cashier, office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

interface Place {
  readonly file: string;
  readonly effects: string;
}

function place(): Place {
  const d = tempDir('durable');
  dirs.push(d);
  return { file: join(d.dir, 'troupe.sqlite'), effects: join(d.dir, 'effects.log') };
}

const tenantKey = (s: unknown) => (s as { org: string }).org;

function open(
  at: Place,
  options: Partial<SupervisorOptions> = {},
): { supervisor: Supervisor; store: SqlitePersistence } {
  const store = sqlitePersistence({ file: at.file, tenantKey });
  const supervisor = createSupervisor({
    agents: [office],
    persistence: store,
    pool: { threads: 2, graceMs: 100 },
    ...options,
  });
  return { supervisor, store };
}

function effects(at: Place): string[] {
  return existsSync(at.effects) ? readFileSync(at.effects, 'utf8').trim().split('\n').filter(Boolean) : [];
}

function requestOf(reply: AgentReply): Request {
  assert.equal(reply.status, 'suspended', `expected a suspension, got ${JSON.stringify(reply)}`);
  return (reply as { request: Request }).request;
}

const alice = { org: 'acme', userId: 'alice' };

describe('durable state: a question asked two levels down survives a restart', () => {
  it('after close(), the answer resumes the same child with the new caller’s scope; the tool re-runs exactly once', async () => {
    const at = place();
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-1',
      conversationId: 'conv-1',
      toolContext: { effects: at.effects },
    });
    const request = requestOf(await agent.send('please release'));
    const [pending] = a.supervisor.pendingRequests();
    assert.deepEqual(pending?.path, ['office-1', 'office-1-sub-1', 'office-1-sub-1-sub-1']);
    await a.supervisor.close();

    const b = open(at);
    const listed = await b.supervisor.listRequests(alice);
    assert.deepEqual(
      listed.items.map((r) => [r.request.id, r.agentId, r.conversationId, r.path]),
      [[request.id, 'office-1', 'conv-1', ['office-1', 'office-1-sub-1', 'office-1-sub-1-sub-1']]],
    );
    const resumed: string[] = [];
    const spawned: string[] = [];
    b.supervisor.on('subagent.done', (e) => resumed.push(e.agentId));
    b.supervisor.on('subagent.spawned', (e) => spawned.push(`${e.agentId}${e.resumed ? ' resumed' : ' new'}`));
    // The new caller's scope: the tool sees it (scope is never saved).
    const reply = await b.supervisor.answer(
      request.id,
      { ok: true, data: { env: 'prod' } },
      { scope: { org: 'acme', userId: 'bob' }, toolContext: { effects: at.effects } },
    );
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match((reply as { text: string }).text, /released api to prod for bob/);
    assert.deepEqual(resumed, ['office-1-sub-1-sub-1', 'office-1-sub-1'], 'the same children resumed and finished');
    assert.deepEqual(spawned, ['office-1-sub-1-sub-1 resumed', 'office-1-sub-1 resumed'], 'nothing spawned anew');
    const lines = effects(at);
    assert.equal(lines.filter((l) => l.startsWith('ask')).length, 1, 'asked once');
    assert.equal(lines.filter((l) => l.startsWith('release')).length, 1, 're-run once on the answer');
    await assert.rejects(b.supervisor.answer(request.id, { ok: true }), (e) =>
      isTroupeError(e, 'ERR_REQUEST_ALREADY_ANSWERED'),
    );
    await b.supervisor.close();

    // A third process finds it answered and the conversation idle, with its transcript.
    const c = open(at);
    // Its toolContext again (never saved): a restore with none of its keys is refused (ERR_TOOL_CONTEXT_MISSING).
    const again = await c.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-1',
      conversationId: 'conv-1',
      toolContext: { effects: at.effects },
    });
    assert.equal(again.status, 'idle');
    assert.equal((await c.supervisor.listRequests(alice)).items.length, 0);
    const messages = await c.store.loadMessages(alice, { agentId: 'office-1' as never, conversationId: 'conv-1' });
    assert.deepEqual(
      messages.map((m) => m.role),
      ['user', 'assistant'],
    );
    await c.supervisor.close();
  });

  it('a suspended subagent its parent no longer declares: the restore is refused ERR_UNKNOWN_AGENT and withdraws nothing', async () => {
    const at = place();
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-7' });
    const request = requestOf(await agent.send('please release'));
    await a.supervisor.close();

    // A build of "office" without its manager: the question asked under the manager has no run to go back to.
    const officeWithoutManager = defineAgent({
      name: office.name,
      module: office.module as string,
      instructions: office.instructions,
      model: office.model,
      tools: office.tools,
      subagents: [cashier],
    });
    const b = open(at);
    await assert.rejects(
      b.supervisor.startAgent(officeWithoutManager, { scope: alice, agentId: 'office-7' }),
      (e) => isTroupeError(e, 'ERR_UNKNOWN_AGENT') && /no longer declares in its subagents/.test((e as Error).message),
    );
    const listed = await b.supervisor.listRequests(alice);
    assert.deepEqual(
      listed.items.map((r) => r.request.id),
      [request.id],
      'the question stays open',
    );
    await b.supervisor.close();

    // The build that declares it (the supervisor's own "office") restores it, and the answer resumes the run.
    const c = open(at);
    const reply = await c.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } }, { scope: alice });
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    await c.supervisor.close();
  });

  it('destroy() loses no open request: a new supervisor answers it', async () => {
    const at = place();
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-2' });
    const request = requestOf(await agent.send('release it'));
    await a.supervisor.destroy();
    await a.store.close();

    const b = open(at);
    const reply = await b.supervisor.answer(request.id, { ok: false, reason: 'not today' }, { scope: alice });
    assert.equal(reply.status, 'done');
    // A declined answer is an error result for the tool that asked (it does not run again).
    assert.match((reply as { text: string }).text, /the request was declined: not today/);
    await b.supervisor.close();
  });

  it('an answer taken by a process that died before its run resumed is delivered on restore', async () => {
    const at = place();
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-3' });
    const request = requestOf(await agent.send('release'));
    await a.supervisor.destroy();
    // The dead process's compare-and-set went through; its run never resumed.
    const dead = sqlitePersistence({ file: at.file, tenantKey });
    const taken = await dead.answerRequest(alice, request.id, { id: request.id, ok: true, data: { env: 'eu' } }, 1);
    assert.equal(taken.status, 'taken');
    await dead.close();

    const b = open(at);
    const done = new Promise<unknown>((resolve) => b.supervisor.once('agent.done', resolve));
    const restored = await b.supervisor.startAgent(office, { scope: alice, agentId: 'office-3' });
    assert.equal(restored.status, 'running', 'the saved answer resumes it at once');
    await done;
    assert.equal(restored.status, 'idle');
    const last = restored.snapshot().messages.at(-1);
    assert.match(String(last?.content), /released api to eu/);
    await b.supervisor.close();
  });

  it('two supervisors on one file: an answer is taken once', async () => {
    const at = place();
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: 'office-4' });
    const request = requestOf(await agent.send('release'));
    const b = open(at);
    const results = await Promise.allSettled([
      a.supervisor.answer(request.id, { ok: true, data: { env: 'a' } }),
      b.supervisor.answer(request.id, { ok: true, data: { env: 'b' } }, { scope: alice }),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    assert.equal(won.length, 1, JSON.stringify(results.map((r) => r.status)));
    const why = (lost[0] as PromiseRejectedResult).reason;
    assert.ok(isTroupeError(why, 'ERR_REQUEST_ALREADY_ANSWERED'), String(why?.stack ?? why));
    await b.supervisor.close();
    await a.supervisor.close();
  });
});

describe('durable state: a message a restart interrupted', () => {
  it('a subagent held in its side effect: the parent is interrupted; resume() gives the started task ERR_INTERRUPTED', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-5',
      toolContext: { effects: at.effects, gate },
    });
    const reply = agent.send('delegate a charge');
    // The cashier's charge has written its side effect and holds its thread.
    while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
    await a.supervisor.destroy();
    assert.equal((await reply).status, 'cancelled');
    await a.store.close();

    const b = open(at);
    const restored = await b.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-5',
      toolContext: { effects: at.effects },
    });
    assert.equal(restored.status, 'interrupted');
    await assert.rejects(restored.send('something else'), (e) => isTroupeError(e, 'ERR_INTERRUPTED'));
    const done = await restored.resume();
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.match((done as { text: string }).text, /ERR_INTERRUPTED|interrupted by a restart/);
    assert.deepEqual(
      effects(at).filter((l) => l.startsWith('charge')).length,
      1,
      'the charge happened once and was not re-run',
    );
    // The conversation goes on.
    const next = await restored.send('hello');
    assert.equal(next.status, 'done');
    await b.supervisor.close();
  });

  it('a parent’s own tools: the started charge is not re-run, the idempotent lookup is', async () => {
    const at = place();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const a = open(at);
    const agent = await a.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-6',
      toolContext: { effects: at.effects, gate },
    });
    const reply = agent.send('charge it');
    while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
    await a.supervisor.destroy();
    assert.equal((await reply).status, 'cancelled');
    await a.store.close();

    const b = open(at);
    const restored = await b.supervisor.startAgent(office, {
      scope: alice,
      agentId: 'office-6',
      toolContext: { effects: at.effects },
    });
    assert.equal(restored.status, 'interrupted');
    const done = await restored.resume();
    assert.equal(done.status, 'done', JSON.stringify(done));
    const results = JSON.parse((done as { text: string }).text) as unknown[];
    assert.equal(results[0], 'order o-2 is paid', 'the idempotent lookup ran again');
    assert.match(JSON.stringify(results[1]), /ERR_INTERRUPTED/);
    const lines = effects(at);
    assert.equal(lines.filter((l) => l.startsWith('charge')).length, 1);
    assert.equal(lines.filter((l) => l.startsWith('lookup')).length, 2);
    Atomics.store(gate, 0, 1);
    Atomics.notify(gate, 0);
    await b.supervisor.close();
  });
});

describe('durable state: the scope is never stored', () => {
  it('conversations, suspensions at depth, answers, declines and restores leave no scope value in any byte of the files', async () => {
    const at = place();
    const secret = `secret-${randomBytes(12).toString('hex')}`;
    const email = `e-${randomBytes(8).toString('hex')}@example.test`;
    const scope = { org: 'acme', userId: 'carol', secret, profile: { email } };
    const a = open(at);
    const one = await a.supervisor.startAgent(office, { scope, agentId: 'office-7' });
    const two = await a.supervisor.startAgent(office, { scope, agentId: 'office-8' });
    assert.equal((await one.send('hello')).status, 'done');
    const q1 = requestOf(await one.send('release'));
    const q2 = requestOf(await two.send('release'));
    await a.supervisor.answer(q1.id, { ok: true, data: { env: 'x' } });
    requestOf(await one.send('release again'));
    await a.supervisor.close();
    const b = open(at);
    await b.supervisor.answer(q2.id, { ok: false, reason: 'no' }, { scope });
    const open1 = (await b.supervisor.listRequests(scope)).items[0];
    assert.ok(open1 !== undefined);
    await b.supervisor.answer(open1.request.id, { ok: true, data: { env: 'y' } }, { scope });
    // Scan while the store is open: the WAL holds the latest writes.
    const files = [at.file, `${at.file}-wal`, `${at.file}-shm`].filter((f) => existsSync(f));
    assert.ok(files.length >= 2);
    for (const f of files) {
      const bytes = readFileSync(f);
      for (const needle of [secret, email]) {
        assert.equal(bytes.indexOf(Buffer.from(needle, 'utf8')), -1, `${needle} found in ${f}`);
        assert.equal(bytes.indexOf(Buffer.from(needle, 'utf16le')), -1, `${needle} found in ${f} (UTF-16)`);
      }
    }
    const raw = new Database(at.file, { readonly: true });
    let cells = 0;
    for (const { name } of raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
      name: string;
    }[]) {
      for (const row of raw.prepare(`SELECT * FROM "${name}"`).all() as Record<string, unknown>[]) {
        for (const value of Object.values(row)) {
          cells++;
          const text = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
          assert.ok(!text.includes(secret) && !text.includes(email), `a scope value in table ${name}`);
        }
      }
    }
    raw.close();
    assert.ok(cells > 50, `the scan read the tables (${cells} cells)`);
    await b.supervisor.close();
  });
});

describe('durable state: memory stays bounded', () => {
  it('idle agents past maxIdleAgents are let go; a handle still held works; a collected one is restored by startAgent', async () => {
    const at = place();
    const a = open(at, { maxIdleAgents: 2 });
    const held = await a.supervisor.startAgent(office, { scope: alice, agentId: 'keep' });
    assert.equal((await held.send('one')).status, 'done');
    for (let i = 0; i < 6; i++) {
      const agent = await a.supervisor.startAgent(office, { scope: alice, agentId: `idle-${i}` });
      assert.equal((await agent.send(`hello ${i}`)).status, 'done');
    }
    assert.ok(a.supervisor.stats().agents <= 2, `at most 2 idle agents held (${a.supervisor.stats().agents})`);
    // Let go but still held by the host: the same handle goes on.
    assert.equal(a.supervisor.agent('keep'), held);
    assert.equal((await held.send('two')).status, 'done');
    assert.equal(held.snapshot().messages.filter((m) => m.role === 'user').length, 2);
    // A conversation nobody holds comes back from the store with its transcript.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    for (let i = 0; i < 10 && a.supervisor.agent('idle-0') !== undefined; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    assert.equal(a.supervisor.agent('idle-0'), undefined, 'collected once nobody holds it');
    const back = await a.supervisor.startAgent(office, { scope: alice, agentId: 'idle-0' });
    assert.equal(back.snapshot().messages.filter((m) => m.role === 'user').length, 1);
    await assert.rejects(a.supervisor.startAgent(office, { scope: alice, agentId: 'keep' }), /already started/);
    await a.supervisor.close();
  });
});
