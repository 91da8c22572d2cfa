// Issue 32, item 5: close() with the in-memory store (the default) dropped
// open questions without a word. Now the supervisor says so — the event
// `requests.dropped` with the ids and how to keep them (a durable store), or,
// when nobody listens, a process warning — and a durable store, which keeps
// them, says nothing. The questions are asked on a worker thread.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentReply,
  createSupervisor,
  MemoryPersistence,
  type Supervisor,
  type SupervisorEvents,
} from '@troupe/supervisor';
import { lead } from '../fixtures/agents/hitl.js';
import { tempDir } from './sqliteFiles.js';

type Dropped = SupervisorEvents['requests.dropped'][0];
const scope = Object.freeze({ tenantId: 'acme' });

/** Ask a question through a subagent on a worker: its id. */
async function ask(supervisor: Supervisor, agentId?: string): Promise<string> {
  const agent = await supervisor.startAgent(lead, { scope, ...(agentId === undefined ? {} : { agentId }) });
  const reply: AgentReply = await agent.send('deploy it');
  assert.equal(reply.status, 'suspended', JSON.stringify(reply));
  return reply.status === 'suspended' ? reply.request.id : '';
}

/** The process warnings of `code` emitted while `fn` runs (and the tick after, when they are delivered). */
async function warningsDuring(code: string, fn: () => Promise<void>): Promise<Error[]> {
  const seen: Error[] = [];
  const onWarning = (w: Error & { code?: string }): void => {
    if (w.code === code) seen.push(w);
  };
  process.on('warning', onWarning);
  try {
    await fn();
    // emitWarning delivers on the next tick: a marker warning emitted after it arrives after it.
    await new Promise<void>((resolve) => {
      const marker = (w: Error & { code?: string }): void => {
        if (w.code !== 'TEST_MARKER') return;
        process.off('warning', marker);
        resolve();
      };
      process.on('warning', marker);
      process.emitWarning('marker', { code: 'TEST_MARKER' });
    });
  } finally {
    process.off('warning', onWarning);
  }
  return seen;
}

const DURABLE_HINT =
  /keep them in a durable store — createSupervisor\(\{ persistence: sqlitePersistence\(\{ file \}\) \}\) from @troupe\/sqlite/;

describe('close() and the questions a store does not keep', () => {
  it('the in-memory store: requests.dropped names them and how to keep them, and nothing is printed', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    const dropped: Dropped[] = [];
    supervisor.on('requests.dropped', (e) => dropped.push(e));
    const id = await ask(supervisor);
    const warned = await warningsDuring('TROUPE_REQUESTS_DROPPED', () => supervisor.close());
    assert.equal(dropped.length, 1);
    assert.deepEqual(dropped[0]?.requestIds, [id]);
    assert.match(
      dropped[0]?.message ?? '',
      new RegExp(
        `^the supervisor closed with 1 open question \\(${id}\\), now dropped: the in-memory store \\(MemoryPersistence, the default\\) keeps them only while the supervisor is open`,
      ),
    );
    assert.match(dropped[0]?.message ?? '', DURABLE_HINT);
    assert.deepEqual(warned, [], 'a listener handles it: no warning');
  });

  it('nobody listening: a process warning (TROUPE_REQUESTS_DROPPED), also for a question of a conversation it no longer holds', async () => {
    const store = new MemoryPersistence();
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: store });
    const held = await ask(supervisor, 'held');
    const released = await ask(supervisor, 'released');
    // Stopped: the supervisor lets it go, the store keeps its question (a restore would answer it).
    await supervisor.stopAgent('released');
    assert.deepEqual(
      supervisor.pendingRequests().map((p) => p.request.id),
      [held],
    );
    assert.deepEqual(store.openRequestIds().sort(), [held, released].sort());
    const warned = await warningsDuring('TROUPE_REQUESTS_DROPPED', () => supervisor.close());
    assert.equal(warned.length, 1);
    assert.equal(warned[0]?.name, 'TroupeWarning');
    assert.match(warned[0]?.message ?? '', /^the supervisor closed with 2 open questions \(/);
    for (const id of [held, released]) assert.ok(warned[0]?.message.includes(id), `names ${id}`);
    assert.match(warned[0]?.message ?? '', DURABLE_HINT);
    assert.deepEqual(store.openRequestIds(), [], 'closed with it: dropped');
  });

  it('persistence: null says so; destroy() reports too, once', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
    const dropped: Dropped[] = [];
    supervisor.on('requests.dropped', (e) => dropped.push(e));
    const id = await ask(supervisor);
    await supervisor.destroy();
    await supervisor.close();
    assert.equal(dropped.length, 1);
    assert.deepEqual(dropped[0]?.requestIds, [id]);
    assert.match(dropped[0]?.message ?? '', /this supervisor saves nothing \(persistence: null\)/);
  });

  it('nothing open, or a durable store (which keeps them): nothing is said', async (t) => {
    const idle = createSupervisor({ pool: { threads: 1 } });
    const none: Dropped[] = [];
    idle.on('requests.dropped', (e) => none.push(e));
    await idle.close();
    assert.deepEqual(none, []);

    const dir = tempDir('dropped-durable');
    t.after(() => dir.remove());
    const durable = createSupervisor({ pool: { threads: 1 }, persistence: sqlitePersistence({ directory: dir.dir }) });
    const dropped: Dropped[] = [];
    durable.on('requests.dropped', (e) => dropped.push(e));
    const id = await ask(durable);
    const warned = await warningsDuring('TROUPE_REQUESTS_DROPPED', () => durable.close());
    assert.deepEqual(dropped, []);
    assert.deepEqual(warned, []);
    const next = createSupervisor({ pool: { threads: 1 }, persistence: sqlitePersistence({ directory: dir.dir }) });
    try {
      const listed = await next.listRequests(scope);
      assert.deepEqual(
        listed.items.map((r) => r.request.id),
        [id],
        'kept for the next supervisor',
      );
    } finally {
      await next.close();
    }
  });
});
