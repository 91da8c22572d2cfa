// The transport conformance suite, unchanged, against bullmqTransport with two
// worker-host processes on a Redis of the test's own.
import { after, before } from 'node:test';
import { bullmqTransport } from '@troupe/bullmq';
import { runTransportConformance } from '@troupe/supervisor/testing';
import { type RedisServer, startRedis } from '../servers/redis.js';
import { type HostProcess, startHost, stopHosts } from './cluster/hosts.js';

const graceMs = 250;
let redis: RedisServer;
let hosts: HostProcess[] = [];
before(async () => {
  redis = await startRedis();
  const o = { queue: 'conformance', agents: 'conformance', concurrency: 2, graceMs, build: 'conformance' } as const;
  hosts = await Promise.all([startHost(redis.url, 'host-a', o), startHost(redis.url, 'host-b', o)]);
});
after(async () => {
  await stopHosts(hosts);
  await redis.stop();
});

runTransportConformance(
  'bullmq (2 worker-host processes)',
  () =>
    bullmqTransport({
      connection: redis.url,
      build: 'conformance',
      queue: 'conformance',
      graceMs,
      relaySlackMs: 1_000,
      leaseCheckMs: 100,
    }),
  { graceMs },
);
