// A worker host in a process of its own, for the cluster tests. argv:
// <redis url> <host id> <queue> <agents: cluster | conformance> [concurrency] [leaseMs] [lockMs] [graceMs] [build]
// It prints `ready` once it takes jobs, drains on SIGTERM and exits 0, and ends
// itself when its parent dies (its stdin, a pipe from the parent, closes).

import { startWorkerHost } from '@troupe/bullmq';
import type { Agent } from '@troupe/core';
import { conformanceAgents } from '@troupe/supervisor/testing';
import { agents as clusterAgents } from './agents.js';

const [
  url,
  hostId,
  queue,
  set,
  concurrency = '2',
  leaseMs = '600',
  lockMs = '2000',
  graceMs = '500',
  build = 'cluster-test',
] = process.argv.slice(2) as [string, string, string, string];
process.env.TROUPE_HOST_ID = hostId;
process.stdin.on('end', () => process.exit(1));
process.stdin.resume();
const agents: Record<string, Agent> =
  set === 'conformance' ? Object.fromEntries(conformanceAgents.map((a) => [a.name, a])) : clusterAgents;
const host = await startWorkerHost({
  connection: url,
  build,
  queue,
  hostId,
  agents,
  concurrency: Number(concurrency),
  leaseMs: Number(leaseMs),
  lockDurationMs: Number(lockMs),
  stalledIntervalMs: Number(lockMs),
  relayRetryMs: 100,
  claimTimeoutMs: 2_000,
  drainMs: 2_000,
  graceMs: Number(graceMs),
});
host.on('error', () => {});
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void host.close().then(() => process.exit(0));
});
