// `pnpm demo:cluster`: Troupe past one machine, on this one. It starts a Redis
// of its own, three worker hosts (processes) and an API host (this process, on
// SQLite), then shows and checks: a fan-out spread over the hosts (where each
// subagent ran, as the supervisor's events say), a cancel across hosts timed on
// the spot, a question asked on one host and answered after that host left,
// resumed on another, and a host killed mid-tool with the run finished
// elsewhere and its side effect done once; last, it scans every Redis key and
// value for the scope. Exit 1 if a claim does not hold.
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bullmqTransport } from '@troupe/bullmq';
import { REDIS_MISSING, type RedisServer, startRedisServer } from '@troupe/bullmq/testing';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { lead } from './cluster/agents.js';

const started = performance.now();
const failures: string[] = [];
function claim(ok: boolean, what: string): void {
  console.log(`${ok ? '✓' : '✗'} ${what}`);
  if (!ok) failures.push(what);
}

let redis: RedisServer;
try {
  redis = await startRedisServer();
} catch (error) {
  console.error((error as Error).message === REDIS_MISSING ? REDIS_MISSING : (error as Error).message);
  process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), 'troupe-cluster-demo-'));
const ledger = join(dir, 'ledger.log');
writeFileSync(ledger, '');
const queue = 'demo';
const entry = fileURLToPath(new URL('./cluster/workerHost.js', import.meta.url));
const hosts = new Map<string, ChildProcess>();
async function startHost(id: string): Promise<void> {
  const child = fork(entry, [redis.url, id, queue], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [message] = (await once(child, 'message')) as [unknown];
  if (message !== 'ready') throw new Error(`worker host ${id} did not start`);
  hosts.set(id, child);
}
await Promise.all(['host-1', 'host-2', 'host-3'].map(startHost));
console.log(
  `Redis on ${redis.url}; worker hosts ${[...hosts.keys()].join(', ')}; the API host is this process (SQLite in ${dir})`,
);

const supervisor = createSupervisor({
  transport: bullmqTransport({ connection: redis.url, build: 'demo', queue, graceMs: 500, leaseCheckMs: 100 }),
  persistence: sqlitePersistence({ directory: dir }),
});
await supervisor.ready();
// Where each subagent ran: its end event names the worker host (RunPlacement.host).
const ranOn = new Map<string, string>();
supervisor.on('subagent.done', (e) => {
  if (e.host !== undefined) ranOn.set(e.agentId, e.host);
});

const lines = (): string[] =>
  existsSync(ledger)
    ? readFileSync(ledger, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
    : [];
/** Resolves when the ledger holds what `done` looks for (the file is watched, not polled). */
function until(done: (l: string[]) => boolean): Promise<string[]> {
  return new Promise((resolve) => {
    const check = (): void => {
      const now = lines();
      if (!done(now)) return;
      watcher.close();
      resolve(now);
    };
    const watcher = watch(ledger, check);
    check();
  });
}
const field = (line: string | undefined, i: number): string => line?.split(' ')[i] ?? '';

const scope = { tenant: 'acme', user: 'SCOPE-MARKER-7e57' };
const toolContext = { ledger };
try {
  // 1. A fan-out: six tasks of 300 ms on three hosts of two slots each.
  const fan = await supervisor.startAgent(lead, { scope, toolContext });
  const reply = await fan.send(['work a', 'work b', 'work c', 'work d', 'work e', 'work f'].join('\n'));
  const placed = [...ranOn].filter(([agentId]) => agentId.startsWith(`${fan.id}-sub-`));
  console.log('fan-out (from the subagent.done events):');
  for (const [agentId, host] of placed) console.log(`  ${agentId} ran on ${host}`);
  const used = new Set(placed.map(([, host]) => host));
  claim(reply.status === 'done' && placed.length === 6, 'six subagents ran to the end');
  claim(used.size === 3, `the fan-out spread over all three hosts (${[...used].join(', ')})`);
  // The events and the side effects agree: each host did as many tasks as the events say it ran.
  const tally = (hosts: readonly string[]) =>
    [...hosts].sort().reduce((m, h) => m.set(h, (m.get(h) ?? 0) + 1), new Map<string, number>());
  const byEvents = tally(placed.map(([, host]) => host));
  const byLedger = tally(
    lines()
      .filter((l) => l.startsWith('work '))
      .map((l) => field(l, 2)),
  );
  claim(
    JSON.stringify([...byEvents]) === JSON.stringify([...byLedger]),
    `each host did the tasks the events say it ran (${[...byEvents].map(([h, k]) => `${h}: ${k}`).join(', ')})`,
  );

  // 2. A cancel across hosts: the API host cancels; a busy tool on a worker host sees it.
  const spinner = await supervisor.startAgent(lead, { scope, toolContext });
  const spinning = spinner.send('spin s1');
  const on = field(
    (await until((l) => l.some((x) => x.startsWith('spinning s1 ')))).find((x) => x.startsWith('spinning s1 ')),
    2,
  );
  const t0 = performance.timeOrigin + performance.now();
  supervisor.cancel(spinner.id, 'user');
  const seen = Number(
    field(
      (await until((l) => l.some((x) => x.startsWith('cancelled s1 ')))).find((x) => x.startsWith('cancelled s1 ')),
      3,
    ),
  );
  const cancelled = await spinning;
  claim(
    cancelled.status === 'cancelled',
    `a busy tool on ${on} saw the API host's cancel ${(seen - t0).toFixed(1)} ms after it was issued`,
  );

  // 3. A question: asked on one host, which then leaves; answered, resumed on another, once.
  const asker = await supervisor.startAgent(lead, { scope, toolContext });
  const asked = await asker.send('ask deploy');
  const askedOn = field(
    lines().find((l) => l.startsWith('asked deploy ')),
    2,
  );
  claim(asked.status === 'suspended', `a tool on ${askedOn} asked a person; its run suspended and freed its slot`);
  const leaving = hosts.get(askedOn);
  leaving?.kill('SIGTERM');
  if (leaving !== undefined) await once(leaving, 'exit');
  hosts.delete(askedOn);
  const request = supervisor.pendingRequests()[0]?.request.id as string;
  const answered = (await supervisor.answer(request, { ok: true })) as { status: string; text?: string };
  const answeredOn = lines().filter((l) => l.startsWith('answered deploy '));
  claim(
    answered.status === 'done' && answeredOn.length === 1 && field(answeredOn[0], 2) !== askedOn,
    `answered after ${askedOn} left: resumed on ${field(answeredOn[0], 2)}, the tool ran once`,
  );

  // 4. A host killed mid-tool: the run finishes elsewhere; the side effect is not run again.
  const payer = await supervisor.startAgent(lead, { scope, toolContext });
  const paying = payer.send('charge card-42');
  const chargedOn = field(
    (await until((l) => l.some((x) => x.startsWith('charge card-42 ')))).find((x) => x.startsWith('charge card-42 ')),
    2,
  );
  const killedAt = performance.now();
  hosts.get(chargedOn)?.kill('SIGKILL');
  const paid = (await paying) as { status: string; text?: string };
  const charges = lines().filter((l) => l.startsWith('charge card-42 ')).length;
  claim(
    paid.status === 'done' && /ERR_INTERRUPTED|interrupted/.test(paid.text ?? ''),
    `${chargedOn} was killed mid-charge; the run finished on another host ${(performance.now() - killedAt).toFixed(0)} ms later, its model told the charge was interrupted`,
  );
  claim(charges === 1, `the charge ran once (side-effect counter: ${charges})`);

  // 5. The scope never reaches Redis.
  const dump = await redis.dump();
  const found = dump.split(scope.user).length - 1;
  claim(
    found === 0 && dump.length > 0,
    `Redis scanned (${dump.length} bytes of keys and values): the scope marker found ${found} times`,
  );
} catch (error) {
  claim(false, `the demo ran to its end (${(error as Error).stack ?? String(error)})`);
} finally {
  await supervisor.destroy();
  for (const child of hosts.values()) child.kill('SIGKILL');
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  `${failures.length === 0 ? 'every claim held' : `${failures.length} claim(s) failed`} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
);
process.exit(failures.length === 0 ? 0 : 1);
