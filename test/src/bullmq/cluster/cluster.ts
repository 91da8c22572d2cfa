// A cluster for the tests: a Redis of the test's own, worker hosts as child
// processes, an API host (a supervisor on bullmqTransport) in this process,
// and the effects file the cluster's tools write (outside the system).
import { mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BullmqTransport, bullmqTransport } from '@troupe/bullmq';
import { createSupervisor, type Supervisor, type SupervisorOptions } from '@troupe/supervisor';
import { type RedisServer, startRedis } from '../../servers/redis.js';
import { type HostOptions, type HostProcess, startHost, stopHosts } from './hosts.js';

export const SCOPE_MARKER = 'SCOPE-MARKER-c0ffee';
export const TOOLCONTEXT_MARKER = 'TOOLCONTEXT-MARKER-f00d';

export interface Cluster {
  readonly redis: RedisServer;
  readonly hosts: HostProcess[];
  readonly supervisor: Supervisor;
  /** The API host's transport (its stats: `lost`, `requeued`). */
  readonly transport: BullmqTransport;
  readonly dir: string;
  readonly effects: string;
  readonly scope: { readonly tenant: string; readonly marker: string };
  readonly toolContext: { readonly effects: string; readonly marker: string };
  /** The effects file's lines. */
  lines(): string[];
  /** Resolves once `done(lines)` holds (the file is watched; no polling). */
  until(done: (lines: string[]) => boolean): Promise<string[]>;
  close(): Promise<void>;
}

let queues = 0;

export async function startCluster(
  hostCount: number,
  options: {
    readonly host?: Partial<HostOptions>;
    readonly transport?: Partial<Parameters<typeof bullmqTransport>[0]>;
    readonly supervisor?: Partial<SupervisorOptions>;
  } = {},
): Promise<Cluster> {
  const redis = await startRedis();
  const queue = `cluster-${process.pid}-${++queues}`;
  const dir = mkdtempSync(join(tmpdir(), 'troupe-cluster-'));
  const effects = join(dir, 'effects.log');
  writeFileSync(effects, '');
  const hostOptions: HostOptions = { queue, agents: 'cluster', ...options.host };
  const hosts = await Promise.all(
    Array.from({ length: hostCount }, (_, i) =>
      startHost(redis.url, `host-${String.fromCharCode(97 + i)}`, hostOptions),
    ),
  );
  const transport = bullmqTransport({
    connection: redis.url,
    build: hostOptions.build ?? 'cluster-test',
    queue,
    graceMs: hostOptions.graceMs ?? 500,
    leaseCheckMs: 100,
    relaySlackMs: 1_000,
    ...options.transport,
  });
  const supervisor = createSupervisor({ transport, ...options.supervisor });
  await supervisor.ready();
  const lines = () =>
    readFileSync(effects, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
  return {
    redis,
    hosts,
    supervisor,
    transport,
    dir,
    effects,
    scope: { tenant: 't1', marker: SCOPE_MARKER },
    toolContext: { effects, marker: TOOLCONTEXT_MARKER },
    lines,
    until(done) {
      return new Promise((resolve) => {
        const check = (): boolean => {
          const now = lines();
          if (!done(now)) return false;
          watcher.close();
          resolve(now);
          return true;
        };
        const watcher = watch(effects, () => void check());
        check();
      });
    },
    async close() {
      await supervisor.destroy();
      await stopHosts(hosts);
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The host a line `<word> <key> <host> ...` names. */
export function hostOf(line: string): string {
  return line.split(' ')[2] ?? '';
}
