// An API host and worker hosts as child processes on a Redis of the test's
// own: a fan-out placed across hosts, a whole subtree cancelled across hosts,
// a question asked on one host and resumed on another exactly once, and no
// scope in any Redis key or value. Every side effect is a line in a file
// outside the system.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { coordinator } from './cluster/agents.js';
import { hostOf, SCOPE_MARKER, startCluster, TOOLCONTEXT_MARKER } from './cluster/cluster.js';

describe('a cluster: an API host and two worker hosts', () => {
  it('a fan-out spreads over both hosts; cancelling the parent stops the whole subtree across hosts', async () => {
    const c = await startCluster(2);
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send(['spin a', 'spin b', 'spin c', 'spin d'].join('\n'));
      reply.catch(() => {});
      // Four busy tools on four slots: two per host.
      const started = await c.until((l) => l.filter((x) => x.startsWith('spinning ')).length === 4);
      const hosts = started.map(hostOf).sort();
      assert.deepEqual(hosts, ['host-a', 'host-a', 'host-b', 'host-b'], started.join('\n'));
      assert.equal(c.supervisor.cancel(handle.id, 'user'), true);
      // Each busy tool saw its cancel (a load of its slot on its host's thread) and stopped.
      const stopped = await c.until((l) => l.filter((x) => x.startsWith('cancelled ')).length === 4);
      assert.deepEqual(
        stopped
          .filter((x) => x.startsWith('cancelled '))
          .map(hostOf)
          .sort(),
        hosts,
      );
      assert.deepEqual(await reply.then((r) => [r.status, (r as { reason?: string }).reason]), ['cancelled', 'user']);
    } finally {
      await c.close();
    }
  });

  it('a question asked on one host is answered after that host died, resumed on another, exactly once', async () => {
    const c = await startCluster(2);
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send('ask deploy');
      const first = await reply;
      assert.equal(first.status, 'suspended');
      const askedOn = hostOf(c.lines().find((x) => x.startsWith('asked deploy ')) as string);
      // Nothing waits on the host while a person thinks: its slot is free, and it can even die.
      assert.equal(c.supervisor.stats().pool.running, 0, 'no attempt holds a slot');
      const pending = c.supervisor.pendingRequests();
      assert.equal(pending.length, 1);
      const dead = c.hosts.find((h) => h.hostId === askedOn);
      dead?.kill('SIGKILL');
      await dead?.exited;
      const resumed = (await c.supervisor.answer(pending[0]?.request.id as string, { ok: true })) as {
        status: string;
        text: string;
      };
      const other = askedOn === 'host-a' ? 'host-b' : 'host-a';
      assert.equal(resumed.status, 'done', JSON.stringify(resumed));
      assert.match(resumed.text, new RegExp(`answered on ${other}`));
      const lines = c.lines().filter((x) => x.startsWith('answered deploy '));
      assert.deepEqual(lines, [`answered deploy ${other}`], 'the pending tool ran once, on the other host');
    } finally {
      await c.close();
    }
  });

  it('no scope or toolContext value is in any Redis key or value, while runs are queued, running and done', async () => {
    const c = await startCluster(1, { host: { concurrency: 1 } });
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send(['spin x', 'effect y', 'effect z'].join('\n'));
      // One slot: the first runs (busy), the others wait in the queue.
      await c.until((l) => l.some((x) => x.startsWith('spinning x ')));
      const during = await c.redis.dump();
      assert.ok(during.includes('cluster-test'), 'the dump reads the jobs');
      c.supervisor.cancel(handle.id, 'user');
      await reply.catch(() => {});
      const after = await c.redis.dump();
      for (const dump of [during, after]) {
        assert.ok(!dump.includes(SCOPE_MARKER), 'a scope value in Redis');
        assert.ok(!dump.includes(TOOLCONTEXT_MARKER), 'a toolContext value in Redis');
      }
    } finally {
      await c.close();
    }
  });
});
