// Issue 6 §5: every spawn event carries the serialized byte count of its
// channels, so a daemon can watch scope cost in production.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serialize } from 'node:v8';
import { createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';
import { coordinator } from '../fixtures/agents/nested.js';

type Spawned = SupervisorEvents['subagent.spawned'][0];

/** A ~40 KiB scope of objects and strings. */
function heavyScope(): Record<string, unknown> {
  const events: Record<string, unknown> = {};
  for (let i = 0; i < 400; i++) events[`evt_${i}`] = { action: 'login', at: `2024-01-${i % 28}`, note: 'n'.repeat(60) };
  return { userId: 'u1', orgId: 'o1', role: 'admin', events };
}

describe('issue 6: spawn events carry the bytes of each channel', () => {
  let supervisor: Supervisor;
  before(async () => {
    supervisor = createSupervisor({ pool: { threads: 2 }, persistence: null, scopeBudgetBytes: 64 * 1024 });
    await supervisor.pool.ready();
  });
  after(() => supervisor.destroy());

  it('every delegated spawn, nested ones included, reports the v8-serialized size of scope, toolContext and metadata', async () => {
    const seen: Spawned[] = [];
    // Spawns, not resumes (a worker parent whose child waits for a thread resumes after it).
    const listener = (e: Spawned) => {
      if (!e.resumed) seen.push(e);
    };
    supervisor.on('subagent.spawned', listener);
    try {
      const scope = heavyScope();
      const toolContext = { featureFlags: { beta: true }, requestId: 'req-7' };
      const metadata = { title: 'Incident review' };
      const parent = await supervisor.startAgent(coordinator, { scope, toolContext, metadata });
      assert.equal((await parent.send('review')).status, 'done');
      // coordinator → middle → leaf, and coordinator → contextProbe: three spawns, one of them from a worker.
      assert.equal(seen.length, 3);
      const scopeBytes = serialize(scope).byteLength;
      assert.ok(scopeBytes > 40_000);
      for (const e of seen) {
        assert.equal(e.bytes.scope, scopeBytes, `${e.agentId}: scope`);
        assert.equal(e.bytes.toolContext, serialize(toolContext).byteLength, `${e.agentId}: toolContext`);
        assert.equal(e.bytes.total, e.bytes.scope + e.bytes.toolContext + e.bytes.metadata);
      }
      // The parent's direct children start from its metadata snapshot.
      for (const e of seen.filter((s) => s.parentAgentId === parent.id)) {
        assert.equal(e.bytes.metadata, serialize(metadata).byteLength, `${e.agentId}: metadata`);
      }
    } finally {
      supervisor.off('subagent.spawned', listener);
    }
  });

  // Regression (fixed in e395e3c): the size was measured before freezing, and V8 writes a frozen
  // array sparse (2 B more per element), so the event under-reported (67 B for 73 B posted).
  it('the scope figure is the size of what crosses: a scope holding an array', async () => {
    const seen: Spawned[] = [];
    const listener = (e: Spawned) => seen.push(e);
    supervisor.on('subagent.spawned', listener);
    try {
      const scope = { userId: 'u1', orgId: 'o1', role: 'admin', teamIds: ['t1', 't2', 't3'] };
      const parent = await supervisor.startAgent(coordinator, { scope });
      assert.equal((await parent.send('review')).status, 'done');
      // `scope` is the object the supervisor froze and posted.
      for (const e of seen) assert.equal(e.bytes.scope, serialize(scope).byteLength);
    } finally {
      supervisor.off('subagent.spawned', listener);
    }
  });

  // Regression (fixed in e395e3c): supervisor.spawn() emitted no event, so a daemon spawning directly saw no cost.
  it('a run started with supervisor.spawn() is a spawn too', async () => {
    const seen: Spawned[] = [];
    const listener = (e: Spawned) => seen.push(e);
    supervisor.on('subagent.spawned', listener);
    try {
      const outcome = await supervisor.spawn(echo, { scope: { userId: 'u1' }, input: 'hi' });
      assert.equal(outcome.status, 'done');
      assert.equal(seen.length, 1);
      assert.equal(seen[0]?.bytes.scope, serialize({ userId: 'u1' }).byteLength);
    } finally {
      supervisor.off('subagent.spawned', listener);
    }
  });
});
