// A worker host of the distributed suite: argv <redis url> <host id> <queue> <concurrency> <leaseMs>.
// Sends `ready` over IPC; ends with its parent (the IPC channel closing).
import { startWorkerHost } from '@troupe/bullmq';
import { agents } from './agents.js';

const [url, hostId, queue, concurrency, leaseMs] = process.argv.slice(2) as [string, string, string, string, string];
process.env.TROUPE_HOST_ID = hostId;
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
  void host.destroy().then(() => process.exit(0));
});
