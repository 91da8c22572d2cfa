// A worker host's end of the cluster protocol (startWorkerHost), against an
// API host played by the test over a real Redis: its lease, its claims, and
// the jobs it refuses or is denied — none of which runs anything.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startWorkerHost, type WorkerHost } from '@troupe/bullmq';
import { JOB_VERSION, WIRE_VERSION } from '@troupe/bullmq/internal';
import { createId } from '@troupe/core';
import { type RedisServer, startRedis } from '../servers/redis.js';
import { helper, nothingRuns, PeerOwner } from './peer.js';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

let queues = 0;
async function setup(options: { claimTimeoutMs?: number; relayRetryMs?: number } = {}) {
  const queue = `h${++queues}`;
  const transport = nothingRuns();
  const host: WorkerHost = await startWorkerHost({
    connection: redis.url,
    build: 'b1',
    queue,
    agents: { helper },
    concurrency: 2,
    hostId: `host-${queues}`,
    transport: () => transport,
    ...options,
  });
  const owner = await PeerOwner.connect(redis.url, `owner-${queues}`, queue);
  await owner.lease(60_000);
  const refused: { jobId: string; error: Error }[] = [];
  host.on('job.refused', (e) => refused.push(e));
  return {
    host,
    owner,
    transport,
    refused,
    job(overrides: Record<string, unknown> = {}) {
      const runId = createId('run');
      return {
        jobId: `${runId}.1`,
        data: {
          v: JOB_VERSION,
          runId,
          attempt: 1,
          owner: owner.ownerId,
          nonce: 'n'.repeat(22),
          agent: 'helper',
          build: 'b1',
          ...overrides,
        },
      };
    },
    async close() {
      await host.close();
      await owner.close();
    },
  };
}

describe('startWorkerHost', () => {
  it('holds a lease naming its build and slots while it runs, and removes it on close', async () => {
    const s = await setup();
    const key = s.owner.names.hostLease(s.host.hostId);
    try {
      assert.equal(await s.owner.command('GET', key), 'b1 2');
      const ttl = Number(await s.owner.command('PTTL', key));
      assert.ok(ttl > 0 && ttl <= 5_000, `a TTL within the lease (${ttl})`);
    } finally {
      await s.close();
    }
    assert.equal(await s.owner.command('EXISTS', key).catch(() => 0), 0);
  });

  it('claims a job from its owner with the job’s nonce, its id and its build', async () => {
    const s = await setup();
    try {
      const { jobId, data } = s.job();
      await s.owner.add(jobId, data);
      const claim = await s.owner.next('claim');
      assert.deepEqual(claim, ['claim', WIRE_VERSION, jobId, data.nonce, s.host.hostId, 'b1']);
      // Denied: the job ends failed with the denial, and nothing ran.
      await s.owner.publish(s.host.hostId, [
        'deny',
        jobId,
        data.nonce,
        { name: 'TroupeError', message: 'claim denied: the attempt was cancelled', code: 'ERR_HOST_REFUSED' },
      ]);
      assert.match(await s.owner.failure(jobId), /cancelled/);
      assert.equal(s.transport.dispatched.length, 0);
      assert.equal(s.refused.length, 1);
    } finally {
      await s.close();
    }
  });

  it('a denial with another nonce is not its job’s: ignored', async () => {
    const s = await setup({ claimTimeoutMs: 300, relayRetryMs: 50 });
    try {
      const { jobId, data } = s.job();
      await s.owner.add(jobId, data);
      await s.owner.next('claim');
      await s.owner.publish(s.host.hostId, [
        'deny',
        jobId,
        'x'.repeat(22),
        { name: 'TroupeError', message: 'forged denial', code: 'ERR_HOST_REFUSED' },
      ]);
      // The claim goes on (sent again) until its timeout, and the job fails for that, not the forgery.
      await s.owner.next('claim');
      assert.match(await s.owner.failure(jobId), /no grant .* nothing ran/);
      assert.equal(s.transport.dispatched.length, 0);
    } finally {
      await s.close();
    }
  });

  it('a job of another build is refused on both sides with ERR_VERSION_SKEW; nothing runs', async () => {
    const s = await setup();
    try {
      const { jobId, data } = s.job({ build: 'b2' });
      await s.owner.add(jobId, data);
      const refuse = await s.owner.next('refuse');
      assert.equal(refuse[2], jobId);
      assert.equal((refuse[5] as { code: string }).code, 'ERR_VERSION_SKEW');
      assert.match(await s.owner.failure(jobId), /version skew.*b2.*b1/);
      assert.equal(s.refused[0]?.error.name, 'VersionSkewError');
      assert.equal(s.transport.dispatched.length, 0);
    } finally {
      await s.close();
    }
  });

  it('a job of an agent id it does not run is refused with ERR_UNKNOWN_AGENT', async () => {
    const s = await setup();
    try {
      const { jobId, data } = s.job({ agent: 'stranger' });
      await s.owner.add(jobId, data);
      const refuse = await s.owner.next('refuse');
      assert.equal((refuse[5] as { code: string }).code, 'ERR_UNKNOWN_AGENT');
      assert.match(await s.owner.failure(jobId), /runs no agent "stranger"/);
      assert.equal(s.transport.dispatched.length, 0);
    } finally {
      await s.close();
    }
  });

  it('a job of another protocol version is refused with ERR_VERSION_SKEW', async () => {
    const s = await setup();
    try {
      const { jobId, data } = s.job({ v: JOB_VERSION + 1 });
      await s.owner.add(jobId, data);
      assert.equal(((await s.owner.next('refuse'))[5] as { code: string }).code, 'ERR_VERSION_SKEW');
    } finally {
      await s.close();
    }
  });

  it('a job that is not an attempt (other fields) fails with ERR_PROTOCOL and claims nothing', async () => {
    const s = await setup();
    try {
      const { jobId } = s.job();
      await s.owner.add(jobId, { hello: 'world' });
      assert.match(await s.owner.failure(jobId), /not a Troupe attempt/);
      assert.equal(s.owner.received.length, 0);
      assert.equal(s.transport.dispatched.length, 0);
    } finally {
      await s.close();
    }
  });
});

describe('startWorkerHost against a hostile publisher', () => {
  it('garbage, forged grants and acknowledgements on its channel are ignored: nothing runs, it goes on', async () => {
    const s = await setup({ claimTimeoutMs: 400, relayRetryMs: 50 });
    try {
      const { jobId, data } = s.job();
      await s.owner.add(jobId, data);
      await s.owner.next('claim');
      const { serialize } = await import('node:v8');
      const channel = s.owner.names.toHost(s.host.hostId);
      const sparse: unknown[] = [];
      sparse.length = 2 ** 32 - 1;
      for (const message of [
        ['grant', jobId, 'x'.repeat(22), { capability: 'c'.repeat(24), agentId: 'a', toolContext: {}, features: 0 }],
        ['grant', jobId, data.nonce, { capability: 'short' }],
        ['ack', jobId, 1, 1, 'forged'],
        ['cancel', jobId, 'nonsense'],
        sparse,
        'not a tuple',
      ]) {
        await s.owner.command('PUBLISH', channel, serialize(message) as unknown as string);
      }
      await s.owner.command('PUBLISH', channel, Buffer.from([0xff, 0x0f, 0x01]) as unknown as string);
      // The claim goes on until its timeout; nothing was dispatched.
      assert.match(await s.owner.failure(jobId), /no grant/);
      assert.equal(s.transport.dispatched.length, 0);
      // And the host still takes and claims the next job.
      const next = s.job();
      await s.owner.add(next.jobId, next.data);
      assert.equal((await s.owner.next('claim', (m) => m[2] === next.jobId))[2], next.jobId);
    } finally {
      await s.close();
    }
  });
});
