// Redis failing under a cluster: paused 5 s mid-tool (every lease and lock
// lapses meanwhile), and a cancel published while the worker host's subscriber
// was disconnected (it reads the durable flag when it reconnects). Every side
// effect is a line in a file outside the system: none runs twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { coordinator } from './cluster/agents.js';
import { startCluster } from './cluster/cluster.js';

describe('Redis failures', () => {
  it('Redis paused 5 s mid-tool: the run finishes, its side effect not run twice', async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const directory = mkdtempSync(join(tmpdir(), 'troupe-pause-'));
    const c = await startCluster(2, { supervisor: { persistence: sqlitePersistence({ directory }) } });
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send('hold p1');
      await c.until((l) => l.some((x) => x.startsWith('start p1 ')));
      c.redis.pause();
      // Five seconds of a Redis that answers nothing (a timer here, not a wait for a result:
      // what is tested is what happens after).
      await new Promise((r) => setTimeout(r, 5_000));
      c.redis.resume();
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.equal(c.lines().filter((x) => x.startsWith('start p1 ')).length, 1, c.lines().join('\n'));
    } finally {
      await c.close();
    }
  });

  it("a cancel sent while the host's subscriber was disconnected reaches the tool through its flag", async () => {
    const c = await startCluster(1, { host: { concurrency: 1 } });
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send('spin q1');
      await c.until((l) => l.some((x) => x.startsWith('spinning q1 ')));
      // Drop the worker host's subscriber connection, then cancel at once: the message is published
      // while nobody of that host listens (ioredis reconnects 50 ms later at the earliest).
      const clients = (await c.redis.command('CLIENT', 'LIST')).split('\n');
      const sub = clients.find((l) => l.includes(`name=troupe-host-${c.hosts[0]?.hostId}-sub`));
      assert.ok(sub !== undefined, clients.join('\n'));
      const id = /\bid=(\d+)/.exec(sub)?.[1] as string;
      assert.equal(await c.redis.command('CLIENT', 'KILL', 'ID', id), '1');
      c.supervisor.cancel(handle.id, 'user');
      await c.until((l) => l.some((x) => x.startsWith('cancelled q1 ')));
      const r = await reply;
      assert.equal(r.status, 'cancelled');
    } finally {
      await c.close();
    }
  });
});
