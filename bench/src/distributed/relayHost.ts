// A worker host's relay in a process of its own, for the relayed-call figure:
// it takes the bench's job, claims it from the API host (bullmqTransport in the
// bench process), and then times `count` relayed approval calls, one after the
// other, through the same RelayClient a worker host uses; it sends the times
// (ms) over IPC. argv: <redis url> <queue> <count>

import {
  decodeToHost,
  encodeWire,
  type Grant,
  JobData,
  RedisNames,
  RelayClient,
  WIRE_VERSION,
} from '@troupe/bullmq/internal';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url, queue, count] = process.argv.slice(2) as [string, string, string];
const hostId = `bench-relay-${process.pid}`;
const names = new RedisNames('troupe', queue);
const pub = new Redis(url, { maxRetriesPerRequest: null });
const sub = new Redis(url, { maxRetriesPerRequest: null });
const grants = new Map<string, (g: Grant) => void>();
let relay: RelayClient | undefined;
sub.on('messageBuffer', (_c: Buffer, bytes: Buffer) => {
  const m = decodeToHost(bytes, 8 * 1024 * 1024);
  if (typeof m === 'string') return;
  if (m[0] === 'grant') grants.get(m[1])?.(m[3]);
  else if (m[0] === 'ack') relay?.acked(m[2], m[3], m[4]);
});
await sub.subscribe(names.toHost(hostId));
await pub.set(names.hostLease(hostId), 'bench 1', 'PX', 600_000);
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(
  queue,
  async (job) => {
    const d = JobData.parse(job.data);
    const jobId = String(job.id);
    const grant = await new Promise<Grant>((resolve) => {
      grants.set(jobId, resolve);
      void pub.publish(names.toOwner(d.owner), encodeWire(['claim', WIRE_VERSION, jobId, d.nonce, hostId, d.build]));
    });
    relay = new RelayClient(
      jobId,
      grant.capability,
      8 * 1024 * 1024,
      (b) => void pub.publish(names.toOwner(d.owner), b),
    );
    const times: number[] = [];
    for (let i = 0; i < Number(count); i++) {
      const t0 = performance.now();
      await relay.call('approve', { toolName: 'ship', toolCallId: `call_${i}`, arguments: { i } }, Date.now());
      times.push(performance.now() - t0);
    }
    process.send?.({ times });
    return 'ok';
  },
  { connection, prefix: 'troupe', concurrency: 1 },
);
await worker.waitUntilReady();
process.send?.('ready');
process.once('disconnect', () => {
  void worker.close().then(() => {
    for (const c of [pub, sub, connection]) c.disconnect();
    process.exit(0);
  });
});
