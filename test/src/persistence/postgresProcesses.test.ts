// Several processes (API hosts' stores) writing one PostgreSQL database at once: every
// compare-and-set holds across them — answers taken once, saves based on a revision fenced,
// tool-call starts fenced by the run's attempt.
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freshSchema, openStore, server } from './postgresStores.js';
import { ctx, envelope, rejectsWith, request, run, scopeOf, tenantKey } from './records.js';

const CHILD = fileURLToPath(new URL('./postgresChild.js', import.meta.url));
const scope = scopeOf('t1');

function child(args: string[]): { proc: ChildProcess; next(): Promise<unknown> } {
  const proc = fork(CHILD, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(proc, 'exit').then(([code, signal]) => {
    throw new Error(`the store child exited (${signal ?? code}) before it answered`);
  });
  exited.catch(() => {});
  return { proc, next: async () => (await Promise.race([once(proc, 'message'), exited]))[0] };
}

async function race(children: ReturnType<typeof child>[]): Promise<unknown[]> {
  assert.deepEqual(
    await Promise.all(children.map((c) => c.next())),
    children.map(() => 'ready'),
  );
  const results = children.map((c) => c.next());
  for (const c of children) c.proc.send('go');
  const out = await Promise.all(results);
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill();
  return out;
}

describe('PostgresPersistence across processes', () => {
  it('three processes racing to answer the same requests: each is taken exactly once, with the winner’s answer', async (t) => {
    const s = await server();
    const schema = freshSchema('answers');
    const store = await openStore({ schema, tenantKey });
    const n = 150;
    for (let i = 0; i < n; i++) await store.openRequest(scope, request(ctx(`c${i % 7}`), `q${i}`));
    const racers = ['forward', 'reverse', 'forward'].map((d) => child(['answer', s.url, schema, String(n), d]));
    const taken = ((await race(racers)) as { taken: string[] }[]).map((r) => r.taken);
    const all = taken.flat();
    assert.equal(all.length, n, `taken ${taken.map((x) => x.length).join(' + ')}`);
    assert.equal(new Set(all).size, n);
    t.diagnostic(`taken per process: ${taken.map((x) => x.length).join(', ')}`);
    for (let i = 0; i < n; i++) {
      const saved = await store.getRequest(scope, `q${i}`);
      const winner = racers[taken.findIndex((x) => x.includes(`q${i}`))]?.proc.pid;
      assert.equal(saved?.status, 'answered');
      assert.equal(saved?.answer?.data, winner);
    }
    await store.close();
  });

  it('three processes saving one conversation from what each loaded: no save is lost, none is overwritten', async (t) => {
    const s = await server();
    const schema = freshSchema('turns');
    const store = await openStore({ schema, tenantKey });
    const c = ctx('shared');
    await store.commit(scope, { envelope: envelope(c), basedOn: 0 }, c);
    const rounds = 25;
    const writers = ['a', 'b', 'c'].map((name) => child(['turns', s.url, schema, String(rounds), name]));
    const results = (await race(writers)) as { taken: string[]; fenced: number }[];
    const taken = results.flatMap((r) => r.taken);
    const fenced = results.reduce((n, r) => n + r.fenced, 0);
    t.diagnostic(`saves taken: ${taken.length}, fenced: ${fenced}`);
    assert.equal(taken.length + fenced, 3 * rounds);
    const state = await store.loadState(scope, c);
    // Every taken save moved the revision by one, and added its message to the state it loaded.
    assert.equal(state?.revision, 1 + taken.length);
    const stateSaid = state?.state.messages.slice(2).map((m) => m.content);
    const transcript = (await store.loadMessages(scope, c)).map((m) => m.content);
    assert.deepEqual(transcript, stateSaid, 'the transcript and the state saw the saves in the same order');
    assert.deepEqual([...(transcript as string[])].sort(), [...taken].sort());
    await store.close();
  });

  it('a tool call of an attempt another process has moved past is refused in the same transaction', async () => {
    const s = await server();
    const schema = freshSchema('fence');
    const store = await openStore({ schema, tenantKey });
    const holder = child(['hold', s.url, schema, '1']);
    try {
      assert.equal(await holder.next(), 'ready');
      holder.proc.send('calls');
      assert.equal(await holder.next(), 'ok');
      // This host resumes the run: attempt 2.
      const c = ctx('shared');
      await store.commit(scope, { runs: [run(c, 'r1', { attempt: 2 })] }, c);
      holder.proc.send('calls');
      assert.equal(await holder.next(), 'ERR_STORE_FENCED');
      assert.deepEqual(
        (await store.loadToolCalls(scope, 'r1')).map((k) => [k.toolCallId, k.attempt]),
        [['k-1', 1]],
      );
    } finally {
      holder.proc.kill();
      await store.close();
    }
  });

  it('liveness is the lease: a store whose lease ran out (a stalled host) loses its runs to another, never to itself', async () => {
    const s = await server();
    const schema = freshSchema('lease');
    // A lease of an hour: renewed every 20 minutes, so no renewal falls inside this test.
    const stalled = await openStore({ schema, tenantKey, leaseMs: 3_600_000 });
    const other = await openStore({ schema, tenantKey });
    try {
      const c = ctx('c1');
      await stalled.commit(scope, { runs: [run(c, 'r1')] }, c);
      assert.deepEqual(await other.markInterrupted(), [], 'a live lease keeps its runs');
      // The stalled host's lease runs out (as if it had not renewed it), on the database clock.
      await s.sql(`UPDATE ${schema}.owners SET lease_until = clock_timestamp() - interval '1 second'`);
      assert.deepEqual(await stalled.markInterrupted(), [], 'a store never takes its own runs for a dead host’s');
      assert.deepEqual(
        (await other.markInterrupted()).map((r) => [r.runId, r.status]),
        [['r1', 'interrupted']],
      );
      // The stalled host's next write of the run at its attempt takes it back (no other attempt
      // started); a resumed attempt (2) elsewhere would fence it.
      await other.commit(scope, { runs: [run(c, 'r1', { attempt: 2 })] }, c);
      await rejectsWith(stalled.commit(scope, { runs: [run(c, 'r1')] }, c), 'ERR_STORE_FENCED', /attempt 1 is stale/);
    } finally {
      await stalled.close();
      await other.close();
    }
  });
});
