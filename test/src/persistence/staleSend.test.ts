// Issue 31, item 6: a send to a stale copy. Process A suspends a conversation; process B starts
// the same conversation (it holds a suspended copy); A answers. B's send('hello') queued behind
// its copy's suspension and waited for an answer that had been taken elsewhere: it neither
// resolved nor rejected, and B went on listing the answered request. A stale copy finds out as a
// message is queued: the send is refused with a typed error (ERR_STORE_FENCED), the copy is let go
// (nothing of it is listed), and a new startAgent loads what is saved.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { isTroupeError, type Request } from '@troupe/core';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const alice = { org: 'acme', userId: 'alice' };

function open(t: TestContext, file: string): { supervisor: Supervisor; store: SqlitePersistence } {
  const store = sqlitePersistence({ file, tenantKey });
  const supervisor = createSupervisor({ agents: [office], persistence: store, pool: { threads: 1, graceMs: 100 } });
  t.after(() => supervisor.close());
  return { supervisor, store };
}

/** `promise`, or a rejection once it has not settled within `ms` (a bound: before the fix it never settled). */
function within<T>(t: TestContext, promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms);
    t.after(() => clearTimeout(timer));
    promise.then(resolve, reject);
  });
}

const stale = (e: unknown) => isTroupeError(e, 'ERR_STORE_FENCED') && /behind what is saved/.test((e as Error).message);

async function twoCopies(t: TestContext, agentId: string, gate?: Int32Array) {
  const d = tempDir('stale-send');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const a = open(t, file);
  const b = open(t, file);
  const onA = await a.supervisor.startAgent(office, {
    scope: alice,
    agentId,
    toolContext: gate === undefined ? {} : { gate },
  });
  const asked = await onA.send('please release');
  assert.equal(asked.status, 'suspended', JSON.stringify(asked));
  const request = (asked as { request: Request }).request;
  // The same toolContext keys: a restore without one it was started with is refused (ERR_TOOL_CONTEXT_MISSING).
  const onB = await b.supervisor.startAgent(office, {
    scope: alice,
    agentId,
    toolContext: gate === undefined ? {} : { gate },
  });
  assert.equal(onB.status, 'suspended');
  assert.deepEqual(
    b.supervisor.pendingRequests().map((p) => p.request.id),
    [request.id],
  );
  return { a, b, onB, request };
}

describe('a send to a copy of a conversation another process moved on', () => {
  it('answered and finished there: the send is refused at once, typed; the copy is let go', async (t) => {
    const { a, b, onB, request } = await twoCopies(t, 'stale-1');
    const done = await a.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } });
    assert.equal(done.status, 'done', JSON.stringify(done));
    await assert.rejects(within(t, onB.send('hello'), 20_000), stale);
    assert.deepEqual(b.supervisor.pendingRequests(), [], 'the answered request is no longer listed');
    assert.equal(onB.status, 'stopped');
    // A new start loads what is saved, and the message goes through.
    const fresh = await b.supervisor.startAgent(office, { scope: alice, agentId: 'stale-1' });
    assert.equal(fresh.status, 'idle');
    const reply = await fresh.send('hello');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match((reply as { text: string }).text, /noted: hello/);
  });

  it('answered there and still running: the send is refused, typed, not queued behind it', async (t) => {
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const { a, b, onB, request } = await twoCopies(t, 'stale-2', gate);
    const answered = a.supervisor.answer(request.id, { ok: true, data: { env: 'prod' } });
    // The answered tool holds in A (its gate): A runs the conversation's message now.
    while (Atomics.load(gate, 1) === 0) await Atomics.waitAsync(gate, 1, 0).value;
    await assert.rejects(within(t, onB.send('hello'), 20_000), stale);
    assert.deepEqual(b.supervisor.pendingRequests(), []);
    Atomics.store(gate, 0, 1);
    Atomics.notify(gate, 0);
    assert.equal((await answered).status, 'done');
  });
});
