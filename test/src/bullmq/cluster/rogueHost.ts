// A live worker host that turns hostile, in a process of its own: a real
// worker host (lease, jobs, grants, threads) that also reads every host's
// channel (a Redis without ACLs) and, when told over IPC, publishes relayed
// messages of its own making to the API host. argv: <redis url> <host id> <queue>
// Sends `ready`; answers:
//   { grants: true }  → { grants: [[jobId, hostId, capability], ...] } every grant seen so far;
//   { forge: [jobId, capability, rseq, kind, payload] } → { forged: true } once published;
//   { stats: true }   → { stats } its worker host's stats.
// It ends when its parent does (the IPC channel closing).
import { startWorkerHost } from '@troupe/bullmq';
import { decodeToHost, encodeWire, RedisNames, type RelayKind } from '@troupe/bullmq/internal';
import { Redis } from 'ioredis';
import { agents } from './agents.js';

const [url, hostId, queue] = process.argv.slice(2) as [string, string, string];
process.env.TROUPE_HOST_ID = hostId;
process.once('disconnect', () => process.exit(1));

const names = new RedisNames('troupe', queue);
const spy = new Redis(url);
const pub = new Redis(url);
const grants: [string, string, string][] = [];
spy.on('pmessageBuffer', (_pattern: Buffer, channel: Buffer, message: Buffer) => {
  const decoded = decodeToHost(message, 1 << 23);
  if (typeof decoded === 'string' || decoded[0] !== 'grant') return;
  const host = channel.toString().slice(names.toHost('').length);
  grants.push([decoded[1], host, decoded[3].capability]);
});
await spy.psubscribe(names.toHost('*'));

const host = await startWorkerHost({
  connection: url,
  build: 'cluster-test',
  queue,
  hostId,
  agents,
  concurrency: 1,
  leaseMs: 600,
  lockDurationMs: 2_000,
  stalledIntervalMs: 2_000,
  relayRetryMs: 100,
  claimTimeoutMs: 2_000,
  graceMs: 500,
});
host.on('error', () => {});

process.on('message', (m: { grants?: true; forge?: [string, string, number, RelayKind, unknown]; stats?: true }) => {
  void (async () => {
    if (m.grants === true) process.send?.({ grants });
    else if (m.stats === true) process.send?.({ stats: host.stats() });
    else if (m.forge !== undefined) {
      const [jobId, capability, rseq, kind, payload] = m.forge;
      // Every API host of the queue reads its own channel: the owner is in the job's data.
      const owners = await pub.keys(`${names.ownerLease('')}*`);
      for (const key of owners) {
        const owner = key.slice(names.ownerLease('').length);
        await pub.publish(names.toOwner(owner), encodeWire(['relay', jobId, capability, rseq, kind, payload]));
      }
      process.send?.({ forged: true });
    }
  })();
});
process.send?.('ready');
