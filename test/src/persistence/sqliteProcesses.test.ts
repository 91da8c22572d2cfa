import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sqlitePersistence } from '@troupe/sqlite';
import { ctx, request, run, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

const CHILD = fileURLToPath(new URL('./storeChild.js', import.meta.url));
const scope = scopeOf('t1');
const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function file(): string {
  const d = tempDir('procs');
  dirs.push(d);
  return join(d.dir, 'store.sqlite');
}

function child(args: string[]): { proc: ChildProcess; next(): Promise<unknown> } {
  const proc = fork(CHILD, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  // A child that dies before it answers (a store that cannot open) fails the test instead of hanging it.
  const exited = once(proc, 'exit').then(([code, signal]) => {
    throw new Error(`the store child exited (${signal ?? code}) before it answered`);
  });
  exited.catch(() => {});
  return { proc, next: async () => (await Promise.race([once(proc, 'message'), exited]))[0] };
}

describe('SqlitePersistence across processes', () => {
  it('two processes racing to answer the same requests: each request is taken exactly once', async (t) => {
    const path = file();
    const n = 200;
    const store = sqlitePersistence({ file: path, tenantKey });
    for (let i = 0; i < n; i++) await store.openRequest(scope, request(ctx(`c${i % 7}`), `q${i}`));
    await store.close();
    const racers = [child(['race', path, String(n)]), child(['race-reverse', path, String(n)])];
    assert.deepEqual(await Promise.all(racers.map((r) => r.next())), ['ready', 'ready']);
    const results = racers.map((r) => r.next());
    for (const r of racers) r.proc.send('go');
    const taken = (await Promise.all(results)).map((m) => (m as { taken: string[] }).taken);
    await Promise.all(racers.map((r) => (r.proc.exitCode === null ? once(r.proc, 'exit') : undefined)));
    const all = [...(taken[0] ?? []), ...(taken[1] ?? [])];
    assert.equal(all.length, n, `taken ${taken[0]?.length} + ${taken[1]?.length}`);
    assert.equal(new Set(all).size, n);
    t.diagnostic(`taken by the first process: ${taken[0]?.length}, by the second: ${taken[1]?.length}`);
    const check = sqlitePersistence({ file: path, tenantKey });
    const pids = racers.map((r) => r.proc.pid);
    for (let i = 0; i < n; i++) {
      const saved = await check.getRequest(scope, `q${i}`);
      assert.equal(saved?.status, 'answered');
      // The saved answer is the one of the process that was told `taken`.
      const winner = taken[0]?.includes(`q${i}`) ? pids[0] : pids[1];
      assert.equal(saved?.answer?.data, winner);
    }
    await check.close();
  });

  it('a second process may open the file: markInterrupted spares the runs of a live process and takes those of a dead one', async () => {
    const path = file();
    const owner = child(['own', path]);
    assert.equal(await owner.next(), 'ready');
    const store = sqlitePersistence({ file: path, tenantKey });
    try {
      const c = ctx('mine');
      await store.commit(scope, { runs: [run(c, 'r-mine')] }, c);
      // This store's own running runs run in this process while it is open: never marked (a
      // supervisor asks mid-life too); the live child's are spared.
      assert.deepEqual(await store.markInterrupted(), []);
      owner.proc.kill('SIGKILL');
      await once(owner.proc, 'exit');
      assert.deepEqual(
        (await store.markInterrupted()).map((r) => r.runId),
        ['r-child'],
      );
      assert.deepEqual(await store.loadRuns(scope, ctx('child-conversation')), []);
    } finally {
      if (owner.proc.exitCode === null && owner.proc.signalCode === null) owner.proc.kill('SIGKILL');
      await store.close();
    }
  });

  it('a live process’s running runs are left alone', async () => {
    const path = file();
    const owner = child(['own', path]);
    assert.equal(await owner.next(), 'ready');
    const store = sqlitePersistence({ file: path, tenantKey });
    try {
      assert.deepEqual(await store.markInterrupted(), []);
      assert.deepEqual(
        (await store.loadRuns(scope, ctx('child-conversation'))).map((r) => r.status),
        ['running'],
      );
    } finally {
      owner.proc.kill('SIGKILL');
      await once(owner.proc, 'exit');
      await store.close();
    }
  });
});
