// @troupe/bullmq's options: one test per validation rule, the documented
// defaults, and a start that cannot reach Redis or finds it evicting.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  bullmqTransport,
  RedisUnreachableError,
  resolveBullmqTransportOptions,
  resolveWorkerHostOptions,
  startWorkerHost,
} from '@troupe/bullmq';
import { InvalidArgumentError, isTroupeError } from '@troupe/core';
import { startRedis } from '../servers/redis.js';
import { helper, transportHost } from './peer.js';

const base = { connection: 'redis://127.0.0.1:6379', build: 'b1' } as const;
const invalid = (fn: () => unknown, pattern: RegExp) =>
  assert.throws(fn, (e: unknown) => e instanceof InvalidArgumentError && pattern.test((e as Error).message));

describe('bullmqTransport options', () => {
  it('defaults, as documented', () => {
    const o = resolveBullmqTransportOptions(base);
    assert.equal(o.prefix, 'troupe');
    assert.equal(o.queue, 'runs');
    assert.match(o.ownerId, /^owner-[A-Za-z0-9_-]{12}$/);
    assert.equal(o.maxInFlight, 1024);
    assert.equal(o.leaseCheckMs, 1_000);
    assert.equal(o.ownerLeaseMs, 10_000);
    assert.equal(o.graceMs, 5_000);
    assert.equal(o.relaySlackMs, 2_000);
    assert.equal(o.cancelFlagTtlMs, 86_400_000);
    assert.equal(o.maxRelayBytes, 8 * 1024 * 1024);
    assert.equal(o.floodLimit, 50_000);
    assert.equal(o.maxViolations, 3);
    assert.equal(o.connectTimeoutMs, 5_000);
    assert.equal(o.agentIdOf(helper), 'helper');
    assert.ok(Object.isFrozen(o));
  });
  it('connection must be a redis URL or ioredis options', () => {
    invalid(
      () => resolveBullmqTransportOptions({ ...base, connection: 'http://x' }),
      /connection is invalid.*redis:\/\//,
    );
  });
  it('a password in a bad or shown URL is never repeated', () => {
    assert.equal(
      resolveBullmqTransportOptions({ ...base, connection: 'redis://user:s3cret@127.0.0.1:1/0' }).connectionName,
      'redis://user:***@127.0.0.1:1/0',
    );
    assert.equal(
      resolveBullmqTransportOptions({ ...base, connection: 'redis://s3cret@127.0.0.1:1' }).connectionName,
      'redis://***@127.0.0.1:1',
    );
  });
  it('build is required and names a build', () => {
    invalid(() => resolveBullmqTransportOptions({ connection: base.connection } as never), /build is invalid/);
    invalid(() => resolveBullmqTransportOptions({ ...base, build: 'a b' }), /build is invalid/);
  });
  it('prefix and queue are key-safe names', () => {
    invalid(() => resolveBullmqTransportOptions({ ...base, queue: 'a:b' }), /queue is invalid/);
    invalid(() => resolveBullmqTransportOptions({ ...base, prefix: '' }), /prefix is invalid/);
  });
  it('an unknown option is refused by name', () => {
    invalid(() => resolveBullmqTransportOptions({ ...base, leaseMs: 5 } as never), /unknown option leaseMs/);
  });
  it('maxInFlight is a positive whole number', () => {
    invalid(() => resolveBullmqTransportOptions({ ...base, maxInFlight: 0 }), /maxInFlight is invalid/);
  });
  it('maxInFlightPerTenant needs tenantOf', () => {
    invalid(() => resolveBullmqTransportOptions({ ...base, maxInFlightPerTenant: 2 }), /without tenantOf/);
  });
  it('times are whole milliseconds', () => {
    invalid(() => resolveBullmqTransportOptions({ ...base, leaseCheckMs: 1.5 }), /leaseCheckMs is invalid/);
  });
});

describe('startWorkerHost options', () => {
  const host = { ...base, agents: { helper } };
  it('defaults, as documented', () => {
    const o = resolveWorkerHostOptions(host);
    assert.equal(o.leaseMs, 5_000);
    assert.equal(o.lockDurationMs, 30_000);
    assert.equal(o.stalledIntervalMs, 30_000);
    assert.equal(o.claimTimeoutMs, 5_000);
    assert.equal(o.relayRetryMs, 1_000);
    assert.equal(o.drainMs, 30_000);
    assert.equal(o.graceMs, 5_000);
    assert.ok(o.concurrency >= 1);
    assert.match(o.hostId, new RegExp(`-${process.pid}-`));
  });
  it('agents must not be empty', () => {
    invalid(() => resolveWorkerHostOptions({ ...base, agents: {} }), /agents is empty/);
  });
  it('an agent id is a key-safe name; an entry is an agent or { module, name } with a file URL', () => {
    invalid(() => resolveWorkerHostOptions({ ...base, agents: { 'a b': helper } }), /agents is invalid/);
    invalid(
      () => resolveWorkerHostOptions({ ...base, agents: { x: { module: './agents.js', name: 'x' } } }),
      /agents is invalid/,
    );
  });
  it('concurrency is 1 to 4096', () => {
    invalid(() => resolveWorkerHostOptions({ ...host, concurrency: 0 }), /concurrency is invalid/);
  });
  it('startWorkerHost rejects (never throws) a bad option', async () => {
    const started = startWorkerHost({ ...host, concurrency: -1 });
    await assert.rejects(started, InvalidArgumentError);
  });
});

describe('a start that fails leaves nothing started', () => {
  it('Redis unreachable: ERR_REDIS_UNREACHABLE naming the URL without its password', async () => {
    const transport = bullmqTransport({
      ...base,
      connection: 'redis://u:hunter2@127.0.0.1:1',
      connectTimeoutMs: 500,
    });
    transport.start(transportHost());
    const before = process.getActiveResourcesInfo().filter((r) => r === 'TCPWRAP').length;
    await assert.rejects(transport.ready(), (e: unknown) => {
      assert.ok(e instanceof RedisUnreachableError);
      assert.ok(isTroupeError(e, 'ERR_REDIS_UNREACHABLE'));
      assert.equal(e.url, 'redis://u:***@127.0.0.1:1');
      assert.ok(!e.message.includes('hunter2'));
      return true;
    });
    const after = process.getActiveResourcesInfo().filter((r) => r === 'TCPWRAP').length;
    assert.equal(after, before, 'no connection left open');
  });

  it('maxmemory-policy other than noeviction: ERR_REDIS_CONFIG, and no connection left to Redis', async () => {
    const redis = await startRedis({ maxmemoryPolicy: 'allkeys-lru' });
    try {
      const transport = bullmqTransport({ ...base, connection: redis.url });
      transport.start(transportHost());
      await assert.rejects(transport.ready(), (e: unknown) => {
        assert.ok(isTroupeError(e, 'ERR_REDIS_CONFIG'));
        assert.match((e as Error).message, /allkeys-lru.*noeviction/);
        return true;
      });
      // Only this check's own connection is a client now.
      const clients = (await redis.command('CLIENT', 'LIST')).trim().split('\n');
      assert.equal(clients.length, 1, clients.join('\n'));
      await assert.rejects(
        startWorkerHost({ ...base, connection: redis.url, agents: { helper }, transport: () => assert.fail() }),
        (e: unknown) => isTroupeError(e, 'ERR_REDIS_CONFIG'),
      );
    } finally {
      await redis.stop();
    }
  });
});
