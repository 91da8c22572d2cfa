// Worker hosts as child processes for the cluster tests (hostProcess.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('./hostProcess.js', import.meta.url));

/** A worker-host process. */
export interface HostProcess {
  readonly hostId: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** What it printed on stderr (for failures). */
  stderr(): string;
  kill(signal: NodeJS.Signals): void;
}

/** Options of {@link startHost}. */
export interface HostOptions {
  readonly queue: string;
  readonly agents: 'cluster' | 'conformance';
  readonly concurrency?: number;
  readonly leaseMs?: number;
  readonly lockMs?: number;
  readonly graceMs?: number;
  readonly build?: string;
}

/** Start one worker-host process and wait until it takes jobs. */
export async function startHost(url: string, hostId: string, o: HostOptions): Promise<HostProcess> {
  const child = spawn(
    process.execPath,
    [
      '--enable-source-maps',
      entry,
      url,
      hostId,
      o.queue,
      o.agents,
      String(o.concurrency ?? 2),
      String(o.leaseMs ?? 600),
      String(o.lockMs ?? 2000),
      String(o.graceMs ?? 500),
      o.build ?? 'cluster-test',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let err = '';
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ready\n')) resolve();
    });
    void exited.then(({ code, signal }) => reject(new Error(`host ${hostId} exited (${code ?? signal}): ${err}`)));
  });
  child.stdout?.resume();
  return {
    hostId,
    child,
    exited,
    stderr: () => err,
    kill: (signal) => {
      child.kill(signal);
    },
  };
}

/** Stop hosts still running (SIGKILL) and wait for them. */
export async function stopHosts(hosts: readonly HostProcess[]): Promise<void> {
  await Promise.all(
    hosts.map(async (h) => {
      if (h.child.exitCode === null && h.child.signalCode === null) h.child.kill('SIGKILL');
      await h.exited;
    }),
  );
}

export { once };
