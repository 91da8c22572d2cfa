// A worker host of the cluster demo: argv <redis url> <host id> <queue>. It says
// `ready` over IPC, drains on SIGTERM, and ends with its parent.
import { startWorkerHost } from '@troupe/bullmq';
import { agents } from './agents.js';

const [url, hostId, queue] = process.argv.slice(2) as [string, string, string];
process.env.TROUPE_HOST_ID = hostId;
const host = await startWorkerHost({
  connection: url,
  build: 'demo',
  queue,
  hostId,
  agents,
  concurrency: 2,
  leaseMs: 900,
  lockDurationMs: 3_000,
  stalledIntervalMs: 3_000,
  relayRetryMs: 200,
  drainMs: 1_000,
  graceMs: 500,
});
host.on('error', () => {});
process.send?.('ready');
process.once('SIGTERM', () => void host.close().then(() => process.exit(0)));
process.once('disconnect', () => void host.destroy().then(() => process.exit(0)));
