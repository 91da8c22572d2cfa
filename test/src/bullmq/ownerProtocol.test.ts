// The API host's end of the cluster protocol (bullmqTransport), against a
// worker host played by the test over a real Redis: jobs, claims, grants and
// denials, relayed host operations (in order, once), cancel, leases, fencing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BullmqTransport, bullmqTransport } from '@troupe/bullmq';
import { encodeEnd, WIRE_VERSION } from '@troupe/bullmq/internal';
import { isTroupeError } from '@troupe/core';
import { HostFeature } from '@troupe/core/internal';
import { type RedisServer, startRedis } from '../servers/redis.js';
import { makeAttempt, PeerHost, transportHost } from './peer.js';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

/** An attempt the tree checkpoints (a durable store): the tree, not the transport, runs it again. */
const checkpointed = { features: HostFeature.durable };

let queues = 0;
/** A transport and a peer host on a queue of their own. */
async function pair(options: Partial<Parameters<typeof bullmqTransport>[0]> = {}) {
  const queue = `q${++queues}`;
  const transport = bullmqTransport({ connection: redis.url, build: 'b1', queue, leaseCheckMs: 50, ...options });
  const host = transportHost();
  transport.start(host);
  await transport.ready();
  const peer = await PeerHost.connect(redis.url, `peer-${queues}`, 'troupe', queue);
  return {
    transport,
    host,
    peer,
    owner: transport.options.ownerId,
    async close() {
      await transport.destroy();
      await peer.close();
    },
  };
}

/** Dispatch, read the job, claim it and take the grant. */
async function granted(t: Awaited<ReturnType<typeof pair>>, overrides = {}) {
  // A worker host holds its lease before it takes a job.
  await t.peer.lease(2, 60_000);
  const { attempt, served } = makeAttempt(overrides);
  const handle = t.transport.dispatch(attempt);
  const jobId = `${attempt.runId}.${attempt.attempt}`;
  const nonce = await t.peer.nonce(jobId);
  await t.peer.claim(t.owner, jobId, nonce, 'b1');
  const grant = await t.peer.next('grant', jobId);
  return { attempt, served, handle, jobId, nonce, grant };
}

describe('bullmqTransport: the job', () => {
  it('is one attempt: <runId>.<attempt>, BullMQ retries off, naming the run, owner, nonce, agent id and build — never scope, toolContext or capability', async () => {
    const t = await pair();
    try {
      const { attempt } = makeAttempt();
      t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const job = await t.peer.job(jobId);
      assert.ok(job);
      assert.equal(job.id, jobId);
      assert.equal(job.opts.attempts, 1);
      const data = job.data as Record<string, unknown>;
      assert.deepEqual(Object.keys(data).sort(), ['agent', 'attempt', 'build', 'nonce', 'owner', 'runId', 'v']);
      assert.equal(data.agent, 'helper');
      assert.equal(data.build, 'b1');
      assert.equal(data.owner, t.owner);
      const dump = await redis.dump();
      assert.ok(dump.includes(jobId), 'the dump reads the job');
      for (const secret of ['SCOPE-MARKER-7f3a', 'TOOLCONTEXT-MARKER-9c1e', attempt.capability]) {
        assert.ok(!dump.includes(secret), `${secret} is in Redis`);
      }
    } finally {
      await t.close();
    }
  });
});

describe('bullmqTransport: claims', () => {
  it('grants a current attempt once, with its scope, toolContext and capability, to the host that read the job', async () => {
    const t = await pair();
    try {
      const { attempt, grant, jobId, nonce } = await granted(t);
      assert.equal(grant[3].capability, attempt.capability);
      assert.deepEqual(grant[3].scope, attempt.scope);
      assert.deepEqual(grant[3].toolContext, attempt.toolContext);
      assert.deepEqual(grant[3].work, attempt.work);
      assert.equal(t.transport.stats().running, 1);
      // The same host asking again (a lost grant) is granted the same; another host is denied.
      await t.peer.claim(t.owner, jobId, nonce, 'b1');
      assert.equal((await t.peer.next('grant', jobId))[3].capability, attempt.capability);
      const other = await PeerHost.connect(redis.url, 'other-host', 'troupe', t.transport.options.queue);
      try {
        await other.claim(t.owner, jobId, nonce, 'b1');
        const deny = await other.next('deny', jobId);
        assert.match(String((deny[3] as { message: string }).message), /already granted/);
      } finally {
        await other.close();
      }
    } finally {
      await t.close();
    }
  });

  it('the grant carries the time the attempt has left (its queue wait counts); the job its trace context', async () => {
    const t = await pair();
    try {
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const { grant, jobId } = await granted(t, { timeoutMs: 5_000, traceparent } as never);
      const left = grant[3].timeoutMs;
      assert.ok(left !== undefined && left > 0 && left <= 5_000, String(left));
      const job = await t.peer.job(jobId);
      assert.equal((job?.data as { traceparent?: string } | undefined)?.traceparent, traceparent);
    } finally {
      await t.close();
    }
  });

  it('denies a claim with another nonce (forged or replayed), and counts it against the host', async () => {
    const t = await pair();
    try {
      const { attempt } = makeAttempt();
      t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      await t.peer.job(jobId);
      await t.peer.claim(t.owner, jobId, 'x'.repeat(22), 'b1');
      const deny = await t.peer.next('deny', jobId);
      assert.match(String((deny[3] as { message: string }).message), /nonce/);
      assert.equal(t.transport.stats().refused, 1);
      assert.equal(t.transport.stats().running, 0);
    } finally {
      await t.close();
    }
  });

  it('denies a claim for an attempt that was withdrawn; the attempt ends cancelled, not forced, nothing ran', async () => {
    const t = await pair();
    try {
      const { attempt } = makeAttempt();
      const handle = t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await t.peer.nonce(jobId);
      assert.equal(t.transport.withdraw(handle), true);
      const { end } = await handle.ended;
      assert.deepEqual(end, { status: 'cancelled', reason: 'user', forced: false });
      await t.peer.claim(t.owner, jobId, nonce, 'b1');
      const deny = await t.peer.next('deny', jobId);
      assert.match(String((deny[3] as { message: string }).message), /not current/);
    } finally {
      await t.close();
    }
  });

  it('a claim of another build is denied with ERR_VERSION_SKEW; the attempt fails with it', async () => {
    const t = await pair();
    try {
      const { attempt } = makeAttempt();
      const handle = t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await t.peer.nonce(jobId);
      await t.peer.claim(t.owner, jobId, nonce, 'b2');
      const deny = await t.peer.next('deny', jobId);
      assert.equal((deny[3] as { code: string }).code, 'ERR_VERSION_SKEW');
      const { end } = await handle.ended;
      assert.equal(end.status, 'failed');
      assert.ok(end.status === 'failed' && isTroupeError(end.error, 'ERR_VERSION_SKEW'));
    } finally {
      await t.close();
    }
  });

  it("a host's refusal (an agent id it does not know) fails the attempt with the host's typed error", async () => {
    const t = await pair();
    try {
      const { attempt } = makeAttempt();
      const handle = t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await t.peer.nonce(jobId);
      await t.peer.send(t.owner, [
        'refuse',
        WIRE_VERSION,
        jobId,
        nonce,
        t.peer.hostId,
        { name: 'TroupeError', message: 'no agent "helper" here', code: 'ERR_UNKNOWN_AGENT' },
      ]);
      const { end } = await handle.ended;
      assert.ok(end.status === 'failed' && isTroupeError(end.error, 'ERR_UNKNOWN_AGENT'));
    } finally {
      await t.close();
    }
  });
});

describe('bullmqTransport: relayed host operations', () => {
  it('serves each message once, in order, and answers a repeat with the same reply', async () => {
    const t = await pair();
    try {
      const { served, jobId, grant, handle } = await granted(t);
      const cap = grant[3].capability;
      const approval = { toolName: 'ship', toolCallId: 'call_1', arguments: { n: 1 } };
      // 2 and 3 arrive before 1 (a retry reorders); 1 is then sent twice.
      await t.peer.relay(t.owner, jobId, cap, 2, 'events', [['t', 'agent.turn', { turn: 1 }]]);
      await t.peer.relay(t.owner, jobId, cap, 3, 'placed', [4]);
      await t.peer.relay(t.owner, jobId, cap, 1, 'approve', approval);
      assert.deepEqual(await t.peer.ack(jobId, 1), [1, { decision: 'approve' }]);
      await t.peer.relay(t.owner, jobId, cap, 1, 'approve', approval);
      assert.deepEqual(await t.peer.ack(jobId, 1), [1, { decision: 'approve' }]);
      await t.peer.ack(jobId, 3);
      assert.equal(served.approvals.length, 1, 'the approval handler was asked once');
      assert.deepEqual(served.events, [[['t', 'agent.turn', { turn: 1 }]]]);
      assert.equal((served.placements[0] as { threadId: number; host: string }).threadId, 4);
      assert.equal((served.placements[0] as { host: string }).host, t.peer.hostId);
      // The end is the last message; its ack follows the end.
      const end = encodeEnd({
        end: { status: 'done', text: 'ok', updates: [], events: [], turns: 1 },
        usage: { inputTokens: 3, outputTokens: 2 },
      });
      await t.peer.relay(t.owner, jobId, cap, 4, 'end', end);
      const ended = await handle.ended;
      assert.deepEqual(ended, {
        end: { status: 'done', text: 'ok', updates: [], events: [], turns: 1 },
        usage: { inputTokens: 3, outputTokens: 2 },
      });
      // A late message of the ended attempt is refused; it acts on nothing.
      await t.peer.relay(t.owner, jobId, cap, 5, 'approve', { ...approval, toolCallId: 'call_2' });
      const [ok, value] = await t.peer.ack(jobId, 5);
      assert.equal(ok, 0);
      assert.equal((value as { code: string }).code, 'ERR_HOST_REFUSED');
      assert.equal(served.approvals.length, 1);
    } finally {
      await t.close();
    }
  });

  it('a nested task and a checkpoint are served by the tree and answered', async () => {
    const t = await pair();
    try {
      const { served, jobId, grant } = await granted(t, checkpointed);
      const cap = grant[3].capability;
      await t.peer.relay(t.owner, jobId, cap, 1, 'task', {
        subagent: 'child',
        instructions: 'go',
        toolCallId: 'call_9',
        metadata: {},
      });
      assert.deepEqual(await t.peer.ack(jobId, 1), [1, { status: 'done', result: 'child done', events: [] }]);
      const checkpoint = { phase: 'before', state: { agentId: 'helper-1', messages: [], metadata: {} }, calls: [] };
      await t.peer.relay(t.owner, jobId, cap, 2, 'checkpoint', checkpoint);
      // Answered with the receipt the attempt's next checkpoint presents.
      const [ok, receipt] = await t.peer.ack(jobId, 2);
      assert.equal(ok, 1);
      assert.match(String(receipt), /^[\w-]{24}$/);
      assert.equal(served.tasks.length, 1);
      assert.equal(served.checkpoints.length, 1);
    } finally {
      await t.close();
    }
  });

  it('a malformed message is refused and its attempt fenced: it ends crashed, its host is told to kill it', async () => {
    const t = await pair();
    try {
      const { served, jobId, grant, handle } = await granted(t);
      await t.peer.relay(t.owner, jobId, grant[3].capability, 1, 'approve', { toolName: 7 });
      const { end } = await handle.ended;
      assert.equal(end.status, 'crashed');
      assert.match(end.status === 'crashed' ? end.error.message : '', /broke the relay protocol/);
      await t.peer.next('kill', jobId);
      assert.equal(served.approvals.length, 0);
      assert.ok(t.host.refused.some((r) => r.recycled && /approval/.test(r.reason)));
    } finally {
      await t.close();
    }
  });

  it("a capability presented for another attempt's job fences the attempt it belongs to", async () => {
    const t = await pair();
    try {
      const a = await granted(t);
      const b = await granted(t);
      await t.peer.relay(t.owner, b.jobId, a.grant[3].capability, 1, 'events', [['t', 'agent.turn', {}]]);
      assert.equal((await a.handle.ended).end.status, 'crashed');
      assert.equal(t.transport.stats().running, 1, 'the other attempt goes on');
      assert.equal(b.served.events.length, 0);
    } finally {
      await t.close();
    }
  });

  it('a flood from a host fences the attempt it floods and the host is granted no more work past maxViolations', async () => {
    const t = await pair({ floodLimit: 10, maxViolations: 1 });
    try {
      const a = await granted(t);
      const deltas = Array.from({ length: 20 }, () => ({ type: 'text', text: 'x' }));
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'events', [['d', deltas]]);
      assert.equal((await a.handle.ended).end.status, 'crashed');
      const { attempt } = makeAttempt();
      t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await t.peer.nonce(jobId);
      await t.peer.claim(t.owner, jobId, nonce, 'b1');
      const deny = await t.peer.next('deny', jobId);
      assert.match(String((deny[3] as { message: string }).message), /granted no more work/);
    } finally {
      await t.close();
    }
  });

  it('an oversized or unreadable message is refused without touching any attempt', async () => {
    const t = await pair({ maxRelayBytes: 4096 });
    try {
      const a = await granted(t);
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'events', [
        ['t', 'agent.turn', { big: 'x'.repeat(8000) }],
      ]);
      await t.peer.send(t.owner, ['nonsense']);
      // The refusal count reaches 2, and the attempt still serves its next message.
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'placed', [1]);
      await t.peer.ack(a.jobId, 1);
      assert.equal(t.transport.stats().refused, 2);
      assert.equal(t.transport.stats().running, 1);
    } finally {
      await t.close();
    }
  });
});

describe('bullmqTransport: cancel, leases, bounds', () => {
  it('cancel sets a durable flag and tells the host; without an end the backstop ends it cancelled, forced', async () => {
    const t = await pair({ graceMs: 0, relaySlackMs: 100 });
    try {
      const a = await granted(t);
      t.transport.cancel(a.handle, 'user');
      const message = await t.peer.next('cancel', a.jobId);
      assert.equal(message[2], 'user');
      assert.equal(await t.peer.command('GET', t.peer.names.cancelFlag(a.jobId)), 'user');
      const ttl = Number(await t.peer.command('PTTL', t.peer.names.cancelFlag(a.jobId)));
      assert.ok(ttl > 0, `the flag has a TTL (${ttl})`);
      const { end } = await a.handle.ended;
      assert.deepEqual(end, { status: 'cancelled', reason: 'user', forced: true });
      await t.peer.next('kill', a.jobId);
    } finally {
      await t.close();
    }
  });

  it('a granted attempt whose host lease lapses ends lost (ERR_ATTEMPT_LOST)', async () => {
    const t = await pair();
    try {
      const a = await granted(t, checkpointed);
      await t.peer.dropLease();
      const { end } = await a.handle.ended;
      assert.equal(end.status, 'lost');
      assert.ok(end.status === 'lost' && isTroupeError(end.error, 'ERR_ATTEMPT_LOST'));
      assert.match(end.status === 'lost' ? end.error.message : '', /lease/);
    } finally {
      await t.close();
    }
  });

  it('a host handing an attempt back ends it lost', async () => {
    const t = await pair();
    try {
      const a = await granted(t, checkpointed);
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'handback', ['draining']);
      const { end } = await a.handle.ended;
      assert.equal(end.status, 'lost');
    } finally {
      await t.close();
    }
  });

  it('without the tree’s checkpoints, the grant asks the worker to check in before each tool; the transport answers it, the tree never sees it', async () => {
    const t = await pair();
    try {
      const a = await granted(t);
      assert.equal(a.grant[3].features & HostFeature.durable, HostFeature.durable);
      const checkpoint = { phase: 'before', state: { agentId: 'helper-1', messages: [], metadata: {} }, calls: [] };
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'checkpoint', checkpoint);
      const [ok, receipt] = await t.peer.ack(a.jobId, 1);
      assert.equal(ok, 1);
      assert.equal(typeof receipt, 'string');
      assert.equal(a.served.checkpoints.length, 0);
      // A malformed one is refused as a thread's is, and fences the attempt.
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 2, 'checkpoint', { phase: 'sideways' });
      assert.equal((await a.handle.ended).end.status, 'crashed');
    } finally {
      await t.close();
    }
  });

  it('lost before any tool started (no check-in yet), an attempt is queued again: a new job, nonce and capability; the old host is told to stop; its late messages are refused', async () => {
    const t = await pair();
    try {
      const a = await granted(t);
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'placed', [3]);
      assert.deepEqual(await t.peer.ack(a.jobId, 1), [1, undefined]);
      await t.peer.dropLease();
      // The old leg is told to stop where it ran.
      await t.peer.next('kill', a.jobId);
      const again = `${a.attempt.runId}.1.2`;
      const nonce = await t.peer.nonce(again);
      assert.notEqual(nonce, a.nonce);
      await t.peer.lease(1, 60_000);
      await t.peer.claim(t.owner, again, nonce, 'b1');
      const grant = await t.peer.next('grant', again);
      assert.notEqual(grant[3].capability, a.grant[3].capability, 'a fresh capability');
      assert.deepEqual(grant[3].work, a.attempt.work, 'the same work');
      assert.equal(t.transport.stats().requeued, 1);
      // The old leg's late message is refused; the new leg is served.
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 2, 'approve', {
        toolName: 'ship',
        toolCallId: 'c1',
        arguments: {},
      });
      assert.equal((await t.peer.ack(a.jobId, 2))[0], 0);
      assert.equal(a.served.approvals.length, 0);
      await t.peer.relay(t.owner, again, grant[3].capability, 1, 'placed', [4]);
      await t.peer.ack(again, 1);
      assert.deepEqual(
        a.served.placements.map((p) => (p as { threadId: number; host: string }).threadId),
        [3, 4],
        'placed once per leg',
      );
      await t.peer.relay(
        t.owner,
        again,
        grant[3].capability,
        2,
        'end',
        encodeEnd({ end: { status: 'incomplete', events: [], turns: 1 }, usage: { inputTokens: 0, outputTokens: 0 } }),
      );
      assert.equal((await a.handle.ended).end.status, 'incomplete');
    } finally {
      await t.close();
    }
  });

  it('lost after its worker checked in before a tool, an attempt ends lost (the tool may have run)', async () => {
    const t = await pair();
    try {
      const a = await granted(t);
      const checkpoint = {
        phase: 'before',
        state: { agentId: 'helper-1', messages: [], metadata: {} },
        calls: [{ id: 'c1', name: 'charge', idempotent: false }],
      };
      await t.peer.relay(t.owner, a.jobId, a.grant[3].capability, 1, 'checkpoint', checkpoint);
      await t.peer.ack(a.jobId, 1);
      await t.peer.dropLease();
      const { end } = await a.handle.ended;
      assert.equal(end.status, 'lost');
      assert.equal(t.transport.stats().requeued, 0);
    } finally {
      await t.close();
    }
  });

  it('canQueue is false at maxInFlight, and the live hosts lend their slots', async () => {
    const t = await pair({ maxInFlight: 2 });
    try {
      await t.peer.lease(3, 60_000);
      assert.equal(t.transport.canQueue(), true);
      t.transport.dispatch(makeAttempt().attempt);
      t.transport.dispatch(makeAttempt().attempt);
      assert.equal(t.transport.canQueue(), false);
      // The slots come from the next lease scan.
      while (t.transport.stats().slots !== 3) await new Promise<void>((r) => setImmediate(r));
      assert.equal(t.transport.stats().queued, 2);
    } finally {
      await t.close();
    }
  });

  it("past a tenant's cap, its next attempt waits on the API host and goes out when one ends", async () => {
    const t = await pair({ tenantOf: (s) => (s as { tenant: string }).tenant, maxInFlightPerTenant: 1 });
    try {
      const first = makeAttempt();
      const second = makeAttempt();
      const h1 = t.transport.dispatch(first.attempt);
      t.transport.dispatch(second.attempt);
      await t.peer.job(`${first.attempt.runId}.1`);
      assert.equal(await t.peer.queue.getJob(`${second.attempt.runId}.1`), undefined);
      t.transport.withdraw(h1);
      assert.ok(await t.peer.job(`${second.attempt.runId}.1`));
    } finally {
      await t.close();
    }
  });

  it('close lets a running attempt end within its budget, then ends the rest cancelled, forced', async () => {
    const t = await pair();
    try {
      const a = await granted(t);
      await t.transport.close({ drainMs: 50 });
      assert.deepEqual((await a.handle.ended).end, { status: 'cancelled', reason: 'shutdown', forced: true });
      const late = t.transport.dispatch(makeAttempt().attempt);
      assert.deepEqual((await late.ended).end, { status: 'cancelled', reason: 'shutdown', forced: false });
    } finally {
      await t.peer.close();
    }
  });
});

describe('bullmqTransport: Redis and BullMQ failures', () => {
  it("a queued job that Redis lost (restarted empty) is queued again by the API host's reconcile", async () => {
    const own = await startRedis();
    const transport = bullmqTransport({ connection: own.url, build: 'b1', queue: 'reconcile', leaseCheckMs: 50 });
    transport.start(transportHost());
    await transport.ready();
    const peer = await PeerHost.connect(own.url, 'peer-r', 'troupe', 'reconcile');
    try {
      const { attempt } = makeAttempt();
      transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await peer.nonce(jobId);
      await own.restart();
      assert.equal(await own.command('EXISTS', `troupe:reconcile:${jobId}`), '0', 'the restart lost the job');
      // Back, with the same nonce (the same attempt, not a new one): a host can claim it.
      assert.equal(await peer.nonce(jobId), nonce);
      await peer.lease(1, 60_000);
      await peer.claim(transport.options.ownerId, jobId, nonce, 'b1');
      assert.equal((await peer.next('grant', jobId))[3].capability, attempt.capability);
    } finally {
      await transport.destroy();
      await peer.close();
      await own.stop();
    }
  });

  it('a granted attempt whose job fails in BullMQ (stalled past maxStalledCount 0, or its host threw) ends lost', async () => {
    const t = await pair();
    const { Worker } = await import('bullmq');
    const { Redis } = await import('ioredis');
    const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
    try {
      await t.peer.lease(1, 60_000);
      const { attempt } = makeAttempt(checkpointed);
      const handle = t.transport.dispatch(attempt);
      const jobId = `${attempt.runId}.1`;
      const nonce = await t.peer.nonce(jobId);
      // A worker takes the job, is granted the attempt, and then its job fails.
      const worker = new Worker(
        t.transport.options.queue,
        async () => {
          await t.peer.claim(t.owner, jobId, nonce, 'b1');
          await t.peer.next('grant', jobId);
          throw new Error('job stalled more than allowable limit');
        },
        { connection, prefix: 'troupe', removeOnFail: { count: 0 } },
      );
      const { end } = await handle.ended;
      await worker.close();
      assert.equal(end.status, 'lost');
      assert.match(end.status === 'lost' ? end.error.message : '', /its job failed in BullMQ \(job stalled/);
    } finally {
      connection.disconnect();
      await t.close();
    }
  });

  it('the API host holds a lease (its build and incarnation) while it runs and removes it on close', async () => {
    // (No lease check during the test: its renewal would write over the other incarnation's.)
    const t = await pair({ ownerLeaseMs: 2_000, leaseCheckMs: 60_000 });
    const again = bullmqTransport({
      connection: redis.url,
      build: 'b1',
      ownerId: t.owner,
      queue: t.transport.options.queue,
    });
    try {
      const key = t.peer.names.ownerLease(t.owner);
      const value = String(await t.peer.command('GET', key));
      assert.match(value, /^b1 [\w-]{16}$/);
      const ttl = Number(await t.peer.command('PTTL', key));
      assert.ok(ttl > 0 && ttl <= 2_000, `a TTL within the lease (${ttl})`);
      // Another transport under the same owner id (a restarted API host) is another incarnation.
      again.start(transportHost());
      await again.ready();
      assert.notEqual(String(await t.peer.command('GET', key)), value);
      await again.destroy();
      await t.transport.close({ drainMs: 0 });
      assert.equal(await t.peer.command('EXISTS', key), 0);
    } finally {
      await again.destroy();
      await t.close();
    }
  });
});

describe('bullmqTransport: start', () => {
  it('is a BullmqTransport named bullmq', () => {
    const transport = bullmqTransport({ connection: redis.url, build: 'b1' });
    assert.ok(transport instanceof BullmqTransport);
    assert.equal(transport.name, 'bullmq');
  });
});
