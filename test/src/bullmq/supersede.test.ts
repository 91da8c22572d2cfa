// A worker host granted an attempt of a run it still runs an older attempt of:
// the old one lost its job without the host seeing it (Redis restarted empty, a
// missed message) and its owner already ended it. The host stops the old one
// and runs the new one. Before, the new one was refused by the host's
// cancellation table ("run … is already registered"), ended lost, ran again,
// and could be refused again until the run's attempts ran out (seen in the
// Redis-restarted-empty test under load). Real Redis, a real worker host with
// its own threads, the real bullmqTransport as the owner.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { bullmqTransport, startWorkerHost } from '@troupe/bullmq';
import { type RedisServer, startRedis } from '../servers/redis.js';
import { worker } from './cluster/agents.js';
import { makeAttempt, transportHost } from './peer.js';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

/** Resolves when the effects file holds a line starting with `prefix` (the file is watched). */
function until(file: string, prefix: string): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (
        !readFileSync(file, 'utf8')
          .split('\n')
          .some((l) => l.startsWith(prefix))
      )
        return;
      watcher.close();
      resolve();
    };
    const watcher = watch(file, check);
    check();
  });
}

it('a grant of a newer attempt of a run the host still runs cancels the old one, waits for its end, then runs the new one once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-supersede-'));
  const effects = join(dir, 'effects');
  writeFileSync(effects, '');
  const queue = 'supersede';
  const host = await startWorkerHost({
    connection: redis.url,
    build: 'b1',
    queue,
    agents: { worker },
    concurrency: 2,
    hostId: 'host-s',
  });
  const transport = bullmqTransport({ connection: redis.url, build: 'b1', queue, leaseCheckMs: 50 });
  transport.start(transportHost());
  try {
    await transport.ready();
    const toolContext = Object.freeze({ effects });
    const first = makeAttempt({
      agent: worker,
      toolContext,
      work: { kind: 'start', input: 'hold s1', metadata: undefined },
    });
    const old = transport.dispatch(first.attempt);
    await until(effects, 'start s1 ');
    // The same run, attempt 2, while attempt 1 still holds its tool on the only host.
    const second = makeAttempt({
      agent: worker,
      toolContext,
      runId: first.attempt.runId,
      attempt: 2,
      work: { kind: 'start', input: 'effect s2', metadata: undefined },
    });
    const next = transport.dispatch(second.attempt);
    const { end } = await next.ended;
    assert.equal(end.status, 'done', JSON.stringify(end));
    // The old attempt was cancelled on the host (its tool saw it and returned) before the new one
    // ran, and handed back: not done.
    const { end: oldEnd } = await old.ended;
    assert.notEqual(oldEnd.status, 'done', JSON.stringify(oldEnd));
    assert.deepEqual(
      readFileSync(effects, 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
      ['start s1 api-host', 'released s1 api-host', 'done s2 api-host'],
    );
    assert.equal(host.stats().refused, 0);
  } finally {
    await transport.destroy();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
