// Restarting a supervisor in the same process (a daemon reloading, a test
// suite, a per-tenant supervisor) must not leak: once `close()` resolves, the
// closed supervisor is garbage and none of its file descriptors stay open.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { byDepth } from '../fixtures/testDepth.js';
import { boss, sub } from './agents.js';
import { settleGc } from './soak.js';

/** Lifetimes counted for file descriptors: a descriptor kept by each shows past the slack of 6 either way. */
const LIFETIMES = byDepth({ quick: 12, deep: 40 });
const directory = mkdtempSync(join(tmpdir(), 'troupe-soak-restart-'));
after(() => rmSync(directory, { recursive: true, force: true }));

const open = (store = true): Supervisor =>
  createSupervisor({
    agents: [boss, sub],
    // One thread: the subagent of a lifetime runs on it (a leak per thread would show per lifetime all the same).
    pool: { threads: 1 },
    persistence: store ? sqlitePersistence({ directory }) : null,
  });

// One daemon lifetime: a conversation, a message with a subagent on a worker, close.
async function lifetime(i: number, store = true): Promise<WeakRef<Supervisor>> {
  const supervisor = open(store);
  const agent = await supervisor.startAgent(boss, { scope: {}, agentId: `r-${i}`, conversationId: `rc-${i}` });
  const reply = await agent.send(JSON.stringify({ sub: 'quick', own: false }));
  assert.equal(reply.status, 'done');
  await supervisor.close({ timeoutMs: 5000 });
  return new WeakRef(supervisor);
}

function openFiles(): string[] {
  return readdirSync('/proc/self/fd').map((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return '?';
    }
  });
}

describe('supervisor restarts in one process', () => {
  it('a closed supervisor is garbage once close() has resolved', async () => {
    await lifetime(-1); // warm-up: modules loaded, the store's file created
    const refs: WeakRef<Supervisor>[] = [];
    for (let i = 0; i < 5; i++) refs.push(await lifetime(i));
    await settleGc();
    const alive = refs.filter((r) => r.deref() !== undefined).length;
    // Each closed supervisor keeps its whole graph (run tree, its 1,024- and 10,000-slot rings, agents,
    // pool) while piscina's close() timer (closeTimeout 30 s, unref'd, never cleared) holds its pool.
    assert.equal(alive, 0, `${alive} of 5 closed supervisors are still reachable after close() and a forced GC`);
  });

  for (const store of [true, false]) {
    it(`close() leaves no file descriptor open (${store ? 'SQLite store' : 'no store'})`, async () => {
      await lifetime(100, store);
      await settleGc();
      const before = openFiles();
      for (let i = 0; i < LIFETIMES; i++) await lifetime(1000 * Number(store) + 101 + i, store);
      await settleGc();
      const now = openFiles();
      const extra = now.length - before.length;
      const sample = now
        .filter((f) => !before.includes(f))
        .slice(0, 5)
        .join(', ');
      assert.ok(
        extra <= 6,
        `${LIFETIMES} open/send/close lifetimes left ${extra} more file descriptors open (e.g. ${sample}); the count should return to its baseline`,
      );
    });
  }
});
