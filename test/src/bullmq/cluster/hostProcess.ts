// A worker host in a process of its own, for the cluster tests:
// argv: <redis url> <host id> <queue> [concurrency] [leaseMs] [lockMs].
// It prints `ready` once it takes jobs, drains on SIGTERM and exits 0.
import { startWorkerHost } from '@troupe/bullmq';
import { agents } from './agents.js';

const [url, hostId, queue, concurrency = '2', leaseMs = '600', lockMs = '2000'] = process.argv.slice(2) as [
  string,
  string,
  string,
];
process.env.TROUPE_HOST_ID = hostId;
const host = await startWorkerHost({
  connection: url,
  build: 'cluster-test',
  queue,
  hostId,
  agents,
  concurrency: Number(concurrency),
  leaseMs: Number(leaseMs),
  lockDurationMs: Number(lockMs),
  stalledIntervalMs: Number(lockMs),
  relayRetryMs: 100,
  drainMs: 2_000,
  graceMs: 500,
});
host.on('error', () => {});
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void host.close().then(() => process.exit(0));
});
