// The API host SIGKILLed mid-run and started again on its SQLite file, under
// the same owner id: its conversation is restored `interrupted` and finishes;
// the attempt the dead API host had granted is stopped on its worker host (it
// held the host's only slot: nothing else could run until it was), and its
// side effect is never run again. Every side effect is a line in a file
// outside the system.
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../servers/redis.js';
import { hostOf, SCOPE_MARKER, TOOLCONTEXT_MARKER } from './cluster/cluster.js';
import { startHost, stopHosts } from './cluster/hosts.js';

const entry = fileURLToPath(new URL('./cluster/apiHostProcess.js', import.meta.url));

type FromApiHost =
  | 'ready'
  | { sent?: true; reply?: { status: string; text?: string }; status?: string; error?: string };

/** An API-host process and the messages it sent, in order. */
async function apiHost(args: readonly string[]) {
  const child: ChildProcess = fork(entry, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const inbox: FromApiHost[] = [];
  const waiters: (() => void)[] = [];
  child.on('message', (m: FromApiHost) => {
    inbox.push(m);
    for (const w of waiters.splice(0)) w();
  });
  const exited = once(child, 'exit');
  /** The next message that `pick` accepts (an error message fails the test). */
  const next = async <T>(pick: (m: FromApiHost) => T | undefined): Promise<T> => {
    for (;;) {
      for (const m of inbox) {
        if (typeof m === 'object' && m.error !== undefined) throw new Error(`the API host failed: ${m.error}`);
        const got = pick(m);
        if (got !== undefined) {
          inbox.splice(inbox.indexOf(m), 1);
          return got;
        }
      }
      await Promise.race([
        new Promise<void>((r) => waiters.push(r)),
        exited.then(() => Promise.reject(new Error('the API host exited'))),
      ]);
    }
  };
  await next((m) => (m === 'ready' ? true : undefined));
  return { child, next, exited };
}

// Bounded below the old owner's lease (60 s): only the incarnation check can free the slot in time.
it('the API host SIGKILLed mid-tool and restarted on its store: the conversation finishes, the dead owner’s attempt is stopped, nothing runs twice', {
  timeout: 45_000,
}, async () => {
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'troupe-api-death-'));
  const effects = join(dir, 'effects.log');
  writeFileSync(effects, '');
  const queue = `api-death-${process.pid}`;
  // One worker host with one slot: the dead API host's attempt holds it.
  const hosts = [await startHost(redis.url, 'host-a', { queue, agents: 'cluster', concurrency: 1 })];
  const lines = () =>
    readFileSync(effects, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
  const until = (done: (l: string[]) => boolean) =>
    new Promise<string[]>((resolve) => {
      const check = () => {
        const now = lines();
        if (done(now)) {
          watcher.close();
          resolve(now);
        }
      };
      const watcher = watch(effects, check);
      check();
    });
  const args = [
    redis.url,
    queue,
    join(dir, 'store'),
    'api-1',
    JSON.stringify({ tenant: 't1', marker: SCOPE_MARKER }),
    JSON.stringify({ effects, marker: TOOLCONTEXT_MARKER }),
  ];
  mkdirSync(join(dir, 'store'));
  let second: Awaited<ReturnType<typeof apiHost>> | undefined;
  try {
    const first = await apiHost(args);
    first.child.send({ send: 'hold k1' });
    await first.next((m) => (typeof m === 'object' && m.sent === true ? true : undefined));
    await until((l) => l.some((x) => x.startsWith('start k1 ')));
    first.child.kill('SIGKILL');
    await first.exited;

    // The same owner id, a new incarnation, the same store.
    second = await apiHost(args);
    second.child.send({ resume: true });
    const status = await second.next((m) => (typeof m === 'object' ? m.status : undefined));
    assert.equal(status, 'interrupted', 'the conversation comes back interrupted');
    const resumed = await second.next((m) => (typeof m === 'object' ? m.reply : undefined));
    assert.equal(resumed.status, 'done', JSON.stringify(resumed));
    // The subagent that was running is not run again: its parent's task got ERR_INTERRUPTED.
    assert.match(resumed.text ?? '', /ERR_INTERRUPTED|interrupted/);

    // The host's only slot is free again: the dead owner's attempt was stopped there.
    second.child.send({ send: 'effect k2' });
    const after = await second.next((m) => (typeof m === 'object' ? m.reply : undefined));
    assert.equal(after.status, 'done', JSON.stringify(after));
    assert.deepEqual(
      lines().filter((l) => l.startsWith('start k1 ') || l.startsWith('done k2 ')),
      ['start k1 host-a', 'done k2 host-a'],
      'the held side effect started once and never again; the next ran on the freed slot',
    );
    assert.equal(hostOf(lines()[0] as string), 'host-a');
  } finally {
    second?.child.kill('SIGKILL');
    if (second !== undefined) await second.exited;
    await stopHosts(hosts);
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
