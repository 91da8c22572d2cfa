// Redis failing under a cluster: paused 5 s mid-tool (every lease and lock
// lapses meanwhile), restarted empty mid-tool and mid-model-stream (every job,
// lock, lease and flag gone), and a cancel published while the worker host's
// subscriber was disconnected (it reads the durable flag when it reconnects).
// Every side effect is a line in a file outside the system: none runs twice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedisNames } from '@troupe/bullmq/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import { Redis } from 'ioredis';
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
      assert.equal(c.transport.stats().requeued, 1);
    } finally {
      await c.close();
      delete process.env[BASE_URL_VARIABLE];
      await server.close();
    }
  });

  it('Redis restarted empty, the hosts not yet renewed: a run granted meanwhile is not taken for lost', async () => {
    const server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    // Its host renews its lease every second; the API host checks the leases every 10 ms.
    const c = await startCluster(1, { host: { leaseMs: 3_000 }, transport: { leaseCheckMs: 10 } });
    const watch = new Redis(c.redis.url, { maxRetriesPerRequest: null });
    watch.on('error', () => {});
    try {
      let release = (): void => {};
      const released = new Promise<void>((r) => {
        release = r;
      });
      server.script(
        // Its first model call holds until the API host has checked the leases while its host's is missing.
        async (res) => {
          startSse(res);
          event(res, textChunk('Let me'));
          await released;
          event(res, {
            choices: [
              {
                index: 0,
                delta: {
                  tool_calls: [{ index: 0, id: 'c1', function: { name: 'effect', arguments: '{"key":"r4"}' } }],
                },
              },
            ],
          });
          event(res, finishChunk('tool_calls'));
          res.end('data: [DONE]\n\n');
        },
        textAnswer('charged'),
      );
      await c.redis.restart({ empty: true });
      const o = c.transport.options;
      const names = new RedisNames(o.prefix, o.queue);
      const hostId = c.hosts[0]?.hostId as string;
      // Every write of the API host's lease is one of its checks: counted by keyspace notification.
      assert.equal(await watch.config('SET', 'notify-keyspace-events', 'K$'), 'OK');
      let checks = 0;
      let counted = (): void => {};
      await watch.subscribe(`__keyspace@0__:${names.ownerLease(o.ownerId)}`);
      watch.on('message', () => {
        checks++;
        counted();
      });
      const checked = (n: number) =>
        new Promise<void>((resolve) => {
          const until = checks + n;
          counted = () => {
            if (checks >= until) resolve();
          };
        });
      const outcome = c.supervisor.spawn(streamer, { input: 'charge r4', scope: c.scope, toolContext: c.toolContext });
      await server.request(1);
      // Its host's lease is missing, as if its renewal had not come yet: three checks pass so.
      const cmd = new Redis(c.redis.url);
      try {
        await cmd.del(names.hostLease(hostId));
      } finally {
        cmd.disconnect();
      }
      await checked(3);
      release();
      const r = await outcome;
      assert.equal(r.status, 'done', JSON.stringify(r));
      assert.equal(c.transport.stats().requeued, 0, 'the attempt was queued again');
      assert.equal(c.lines().filter((x) => x.startsWith('done r4 ')).length, 1, c.lines().join('\n'));
    } finally {
      watch.disconnect();
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
