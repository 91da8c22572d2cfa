// A worker host of the distributed suite: argv <redis url> <host id> <queue> <concurrency> <leaseMs> [tap log].
// Sends `ready` over IPC; ends with its parent (the IPC channel closing). With a tap log, a
// second subscriber of its own channel, on its event loop, notes when each cancel arrives
// there (`hosttap <epoch ms>`, written after the loop's turn), and its event-loop delay is
// noted when it ends (`hostloop <p99 ms> <max ms>`): the cancel figure's breakdown.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startWorkerHost } from '@troupe/bullmq';
import { decodeToHost, RedisNames } from '@troupe/bullmq/internal';
import { Redis } from 'ioredis';
import { agents } from './agents.js';

const [url, hostId, queue, concurrency, leaseMs, tapLog] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string | undefined,
];
process.env.TROUPE_HOST_ID = hostId;
const loop = monitorEventLoopDelay({ resolution: 1 });
if (tapLog !== undefined) {
  const tap = new Redis(url);
  tap.on('messageBuffer', (_c: Buffer, bytes: Buffer) => {
    const at = performance.timeOrigin + performance.now();
    const m = decodeToHost(bytes, 1 << 20);
    // Written after this turn of the loop: the host's own subscriber is not kept waiting on the file.
    if (typeof m !== 'string' && m[0] === 'cancel') setImmediate(() => appendFileSync(tapLog, `hosttap ${at}\n`));
  });
  await tap.subscribe(new RedisNames('troupe', queue).toHost(hostId));
  loop.enable();
}
const host = await startWorkerHost({
  connection: url,
  build: 'bench',
  queue,
  hostId,
  agents,
  concurrency: Number(concurrency),
  leaseMs: Number(leaseMs),
  graceMs: 500,
  relayRetryMs: 200,
});
host.on('error', () => {});
process.send?.('ready');
process.once('disconnect', () => {
  if (tapLog !== undefined) appendFileSync(tapLog, `hostloop ${loop.percentile(99) / 1e6} ${loop.max / 1e6}\n`);
  void host.destroy().then(() => process.exit(0));
});
