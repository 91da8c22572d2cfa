// A second live worker host that turns hostile, end to end: it is a real
// worker host (lease, jobs, grants, threads) in a process of its own, which
// also reads every host's channel (a Redis without ACLs) and publishes
// relayed messages of its own making. A forged capability naming the honest
// host's attempt is refused and counted, and the honest attempt goes on; the
// rogue's own capability replayed onto the honest host's job is refused, its
// own attempt fenced, and counted against it; past `maxViolations` it is
// granted no more work. The API host survives all of it. Every side effect is
// a line in a file outside the system.
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { WorkerHostStats } from '@troupe/bullmq';
import type { SupervisorEvents } from '@troupe/supervisor';
import { coordinator } from './cluster/agents.js';
import { type Cluster, startCluster } from './cluster/cluster.js';

const entry = fileURLToPath(new URL('./cluster/rogueHost.js', import.meta.url));

type Grant = [jobId: string, hostId: string, capability: string];

/** The rogue worker host's process, driven over IPC. */
async function rogue(c: Cluster, hostId: string) {
  const child: ChildProcess = fork(entry, [c.redis.url, hostId, c.transport.options.queue], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [ready] = (await once(child, 'message')) as [unknown];
  assert.equal(ready, 'ready');
  const ask = async <T>(message: unknown, key: string): Promise<T> => {
    const reply = new Promise<T>((resolve) => {
      const on = (m: Record<string, unknown>) => {
        if (!(key in m)) return;
        child.off('message', on);
        resolve(m[key] as T);
      };
      child.on('message', on);
    });
    child.send(message as never);
    return reply;
  };
  return {
    child,
    grants: () => ask<Grant[]>({ grants: true }, 'grants'),
    stats: () => ask<WorkerHostStats>({ stats: true }, 'stats'),
    forge: (jobId: string, capability: string, rseq: number, kind: string, payload: unknown) =>
      ask<true>({ forge: [jobId, capability, rseq, kind, payload] }, 'forged'),
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
  };
}

it('a forged or replayed capability from a second live worker host: refused, counted, the API host goes on, the offender is granted no more work', async () => {
  // host-a is honest and has one slot; host-r (the rogue) too.
  const c = await startCluster(1, { host: { concurrency: 1 }, transport: { maxViolations: 2 } });
  let r: Awaited<ReturnType<typeof rogue>> | undefined;
  const refused: SupervisorEvents['host.refused'][0][] = [];
  c.supervisor.on('host.refused', (e) => refused.push(e));
  try {
    // The honest host's attempt: busy until cancelled, on host-a's only slot.
    const honest = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
    const honestReply = honest.send('spin a1');
    honestReply.catch(() => {});
    await c.until((l) => l.some((x) => x.startsWith('spinning a1 host-a')));
    // Its job, as anyone on Redis reads it (the queue's active list).
    const active = await c.redis.command('LRANGE', `troupe:${c.transport.options.queue}:active`, '0', '-1');
    const jobA = active.trim();
    assert.match(jobA, /^run_.*\.1$/, active);
    // Then the second host comes up.
    r = await rogue(c, 'host-r');
    const rogueHost = r;
    const grantOf = async (host: string, nth: number): Promise<Grant> => {
      for (;;) {
        const mine = (await rogueHost.grants()).filter((g) => g[1] === host);
        if (mine.length >= nth) return mine[nth - 1] as Grant;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    };

    // 1. A forged capability naming the honest attempt: refused and counted; nothing else happens.
    const before = c.transport.stats().refused;
    await rogueHost.forge(jobA, 'forgedforgedforgedforged', 1, 'approve', {
      toolName: 'effect',
      toolCallId: 'c1',
      arguments: { key: 'forged' },
    });
    while (c.transport.stats().refused === before) await new Promise<void>((resolve) => setImmediate(resolve));
    assert.match(refused.at(-1)?.reason ?? '', /did not grant/);
    assert.equal(refused.at(-1)?.recycled, false, 'the honest attempt is not fenced for what another sent');

    // 2. Twice: the rogue is granted an attempt (host-a is busy), then presents that attempt's
    // capability for the honest host's job. Refused; its own attempt is fenced; counted against it.
    for (const round of [1, 2]) {
      const victim = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
      const reply = victim.send(`spin r${round}`);
      await c.until((l) => l.some((x) => x.startsWith(`spinning r${round} host-r`)));
      const [, , capR] = await grantOf('host-r', round);
      await rogueHost.forge(jobA, capR, 1, 'approve', {
        toolName: 'effect',
        toolCallId: 'c2',
        arguments: { key: 'replayed' },
      });
      // Its own attempt is stopped on its host (told to kill it) and ends crashed for its parent.
      const answer = await reply;
      assert.equal(answer.status, 'done', JSON.stringify(answer));
      assert.match((answer as { text: string }).text, /broke the relay protocol/);
      const fenced = refused.filter((e) => e.recycled && e.host === 'host-r');
      assert.equal(fenced.length, round, JSON.stringify(refused));
      assert.match(fenced.at(-1)?.reason ?? '', /its capability was presented for/);
    }

    // 3. Past maxViolations (2) the rogue is granted nothing: the next task waits for host-a,
    // although the rogue's slot is free and it keeps taking the job.
    const next = await c.supervisor.startAgent(coordinator, { scope: c.scope, toolContext: c.toolContext });
    const nextReply = next.send('effect z1');
    for (;;) {
      if ((await rogueHost.stats()).refused > 0) break;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    assert.equal(
      c.lines().some((x) => x.startsWith('done z1 ')),
      false,
      'nothing ran it while host-a was busy',
    );
    assert.equal(c.supervisor.cancel(honest.id, 'user'), true);
    const z = await nextReply;
    assert.equal(z.status, 'done', JSON.stringify(z));
    assert.deepEqual(
      c.lines().filter((x) => x.startsWith('done z1 ')),
      ['done z1 host-a'],
    );
    // The honest attempt saw only its own cancel; the forged approvals ran nothing.
    assert.deepEqual(
      c
        .lines()
        .filter((x) => x.includes(' a1 '))
        .map((x) => x.split(' ')[0]),
      ['spinning', 'cancelled'],
    );
    assert.equal((await honestReply).status, 'cancelled');
    assert.equal(
      c.lines().some((x) => x.includes('forged') || x.includes('replayed')),
      false,
    );
    assert.equal((await rogueHost.stats()).completed >= 2, true);
  } finally {
    await r?.stop();
    await c.close();
  }
});
