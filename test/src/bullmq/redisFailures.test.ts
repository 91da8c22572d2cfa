// Redis failing under a cluster: paused 5 s mid-tool (every lease and lock
// lapses meanwhile), restarted empty mid-tool and mid-model-stream (every job,
// lock, lease and flag gone), and a cancel published while the worker host's
// subscriber was disconnected (it reads the durable flag when it reconnects).
// Every side effect is a line in a file outside the system: none runs twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { ChatServer, event, finishChunk, sse, startSse, textAnswer, textChunk } from '../openai/chatServer.js';
import { BASE_URL_VARIABLE, coordinator, streamer } from './cluster/agents.js';
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
      // Redis holds every connection for five seconds by its own clock (DEBUG SLEEP: its main
      // thread answers nothing, every lease and lock lapses meanwhile); its reply says it is back.
      assert.equal(await c.redis.command('DEBUG', 'SLEEP', '5'), 'OK');
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.equal(c.lines().filter((x) => x.startsWith('start p1 ')).length, 1, c.lines().join('\n'));
    } finally {
      await c.close();
    }
  });

  it('Redis restarted empty mid-tool: the run finishes from its checkpoint, the stale attempt stops, nothing runs twice', async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const directory = mkdtempSync(join(tmpdir(), 'troupe-restart-'));
    const c = await startCluster(2, { supervisor: { persistence: sqlitePersistence({ directory }) } });
    try {
      const handle = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = handle.send('hold r1');
      await c.until((l) => l.some((x) => x.startsWith('start r1 ')));
      // Every job, lock, lease and flag is gone; the connections drop and come back.
      await c.redis.restart({ empty: true });
      const r = await reply;
      assert.equal(r.status, 'done', JSON.stringify(r));
      // Its tool had started and is not idempotent: not run again; the model was told.
      assert.match((r as { text: string }).text, /ERR_INTERRUPTED|interrupted/);
      // Where it ran, the attempt learnt it was lost (its lock, or its owner's answer) and stopped.
      await c.until((l) => l.some((x) => x.startsWith('released r1 ')));
      // The cluster goes on after the restart: the next run, on the empty Redis.
      const next = await handle.send('effect r2');
      assert.equal(next.status, 'done', JSON.stringify(next));
      const lines = c.lines();
      assert.equal(lines.filter((x) => x.startsWith('start r1 ')).length, 1, lines.join('\n'));
      assert.equal(lines.filter((x) => x.startsWith('done r2 ')).length, 1, lines.join('\n'));
    } finally {
      await c.close();
    }
  });

  it('Redis restarted empty mid-model-stream of a direct spawn (nothing saved): it runs again, its tool once', async () => {
    const server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    const c = await startCluster(2);
    try {
      server.script(
        // Its first model call streams one delta, then holds: Redis restarts meanwhile.
        (res) => {
          startSse(res);
          event(res, textChunk('Let me'));
        },
        sse([
          {
            choices: [
              {
                index: 0,
                delta: {
                  tool_calls: [{ index: 0, id: 'c1', function: { name: 'effect', arguments: '{"key":"r3"}' } }],
                },
              },
            ],
          },
          finishChunk('tool_calls'),
        ]),
        textAnswer('charged'),
      );
      const outcome = c.supervisor.spawn(streamer, { input: 'charge r3', scope: c.scope, toolContext: c.toolContext });
      const first = await server.request(1);
      await c.redis.restart({ empty: true });
      const r = await outcome;
      assert.equal(r.status, 'done', JSON.stringify(r));
      // The first attempt's host learnt it had lost it (its lock, its owner) and stopped its model call.
      await first.socketClosed;
      assert.equal(c.lines().filter((x) => x.startsWith('done r3 ')).length, 1, c.lines().join('\n'));
      // Queued again once for its lost job; once more if its next host was granted it before that
      // host had renewed the lease Redis lost (the API host takes a missing lease for a dead host).
      const requeued = c.transport.stats().requeued;
      assert.ok(requeued === 1 || requeued === 2, `queued again ${requeued} times`);
    } finally {
      await c.close();
      delete process.env[BASE_URL_VARIABLE];
      await server.close();
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
