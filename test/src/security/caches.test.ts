// Issue 11, item 6: no data crosses runs through Troupe's own caches — the
// scope copies a worker keeps per scope version, the bytes a heavy scope
// crosses in, module caches, anything kept between tasks on a worker.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KEPT_SCOPES } from '@troupe/core/internal';
import { createSupervisor } from '@troupe/supervisor';
import { contextProbe, scopeIdentity } from '../fixtures/agents/basic.js';
import { exiter } from '../fixtures/agents/crashy.js';
import { Board, intruder } from '../fixtures/agents/hostile.js';
import { changed, newBoard } from './hostileSupervisor.js';

describe("caches: one run never sees another run's data through them", () => {
  it("a heavy scope's bytes rewritten by a worker reach no run on another thread", async () => {
    // Heavy (over 8 KiB: it crosses as bytes in a SharedArrayBuffer) and sealed (versioned: kept).
    const supervisor = createSupervisor({ pool: { threads: 2, graceMs: 200 }, scopeBudgetBytes: 64 * 1024 });
    try {
      await supervisor.pool.ready();
      const scope = { tag: 'role-reader', padding: 'p'.repeat(12_000) };
      // The hostile module loaded on both threads first (one run each, at once): a worker decodes a
      // task's scope before it loads the task's agent, so only code loaded by an earlier run can
      // watch the bytes go by.
      const warm = await Promise.all(
        [0, 1].map(() =>
          supervisor.spawn(intruder, { input: JSON.stringify({ tool: 'mutate', bait: false }), scope: {} }),
        ),
      );
      assert.deepEqual(
        warm.map((w) => w.status),
        ['done', 'done'],
      );
      const board = newBoard();
      // The hostile run decodes the scope on its thread, rewrites its bytes, and holds that thread.
      const hostile = supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'tamperScope', args: { from: 'role-reader', to: 'role-writer' }, bait: false }),
        scope,
        toolContext: { board },
      });
      await changed(board, Board.stashed);
      // The same scope object (one conversation's), on the other thread, seen for the first time there.
      const honest = await supervisor.spawn(scopeIdentity, { input: 'look', scope });
      Atomics.store(board, Board.release, 1);
      Atomics.notify(board, Board.release);
      const h = await hostile;
      assert.equal(h.status === 'done' && h.result, 'rewrote 1', 'the attack reached the bytes it was sent');
      assert.equal(honest.status, 'done');
      const seen = JSON.parse(honest.status === 'done' ? honest.result : '{}') as { tag?: string };
      assert.equal(seen.tag, 'role-reader');
    } finally {
      await supervisor.destroy();
    }
  });

  it('what one run writes into its channels on a worker reaches no later run there; kept copies stay its own', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await supervisor.pool.ready();
      const a = { tag: 'tenant-a', nested: { deep: 'a' } };
      const b = { tag: 'tenant-b', nested: { deep: 'b' } };
      // The hostile run gets scope a (sealed: versioned, so the worker keeps its copy), a toolContext and metadata.
      const hostile = await supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'mutate', bait: false }),
        scope: a,
        toolContext: { requestId: 'req-a' },
        metadata: { note: 'a' },
      });
      assert.equal(hostile.status, 'done');
      const tried = JSON.parse(hostile.status === 'done' ? hostile.result : '{}') as Record<string, string>;
      assert.deepEqual(tried, {
        scope: 'refused',
        scopeNested: 'refused',
        toolContext: 'refused',
        metadata: 'refused',
        prototype: 'refused',
      });
      // Later runs on the same thread: scope a again (the kept copy), scope b, and no channels at all.
      const probe = async (
        scope: unknown,
        extra: { toolContext?: Record<string, unknown>; metadata?: Record<string, unknown> },
      ) => {
        const out = await supervisor.spawn(contextProbe, { input: 'probe', scope, ...extra });
        assert.equal(out.status, 'done');
        return JSON.parse(out.status === 'done' ? out.result : '{}') as {
          scope: unknown;
          toolContext: unknown;
          metadata: unknown;
        };
      };
      const again = await probe(a, {});
      assert.deepEqual(again.scope, { tag: 'tenant-a', nested: { deep: 'a' } });
      assert.deepEqual(again.toolContext, {});
      assert.deepEqual(again.metadata, {});
      const other = await probe(b, { toolContext: { requestId: 'req-b' }, metadata: { note: 'b' } });
      assert.deepEqual(other.scope, { tag: 'tenant-b', nested: { deep: 'b' } });
      assert.deepEqual(other.toolContext, { requestId: 'req-b' });
      assert.deepEqual(other.metadata, { note: 'b' });
      const bare = await probe({ tag: 'tenant-c' }, {});
      assert.deepEqual(bare.scope, { tag: 'tenant-c' });
      assert.deepEqual(bare.toolContext, {});
      assert.deepEqual(bare.metadata, {});
    } finally {
      await supervisor.destroy();
    }
  });

  it('a thread that holds a scope version gets tasks without it: more versions than it keeps, in turn, and a replaced thread', async () => {
    // One thread: every task goes to it. More frozen scopes than a worker keeps, spawned in a turn
    // that makes it drop the first ones while later ones are still held — the supervisor's record
    // of what the thread holds must drop the same ones, or a run would get another's scope or none.
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await supervisor.pool.ready();
      const scopes = Array.from({ length: KEPT_SCOPES + 5 }, (_, i) => Object.freeze({ tag: `tenant-${i}` }));
      const order = [
        ...scopes.keys(),
        ...[...scopes.keys()].reverse(),
        ...[0, 1, 2, KEPT_SCOPES + 4, 3, KEPT_SCOPES, 0, KEPT_SCOPES + 4],
      ];
      const look = async (i: number): Promise<{ tag?: string; frozen?: boolean }> => {
        const out = await supervisor.spawn(scopeIdentity, { input: 'look', scope: scopes[i] });
        assert.equal(out.status, 'done', `run of scope ${i}: ${JSON.stringify(out)}`);
        return JSON.parse(out.status === 'done' ? out.result : '{}') as { tag?: string; frozen?: boolean };
      };
      for (const i of order) {
        const seen = await look(i);
        assert.equal(seen.tag, `tenant-${i}`, `the run of scope ${i} saw ${String(seen.tag)}`);
        assert.equal(seen.frozen, true);
      }
      // The thread dies; its replacement holds nothing: the scopes the old one held go in full again.
      const crashed = await supervisor.spawn(exiter, { input: 'exit', scope: scopes[1] });
      assert.equal(crashed.status, 'crashed');
      for (const i of [1, 2, KEPT_SCOPES + 4, 1]) assert.equal((await look(i)).tag, `tenant-${i}`);
    } finally {
      await supervisor.destroy();
    }
  });
});

describe('caches: the record of what a thread keeps is current when its next task is bound', () => {
  it('a task queued behind the one that makes the thread drop a version is sent that version in full', async () => {
    // One thread, holding KEPT_SCOPES versions. A run of a new version is on it, and a run of the
    // first version (the one the new one makes the worker drop) waits for the thread. The waiting
    // task is bound the moment the thread frees up — before the answer of the run before it is
    // counted in the supervisor's record — and must still go with its scope.
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await supervisor.pool.ready();
      const scopes = Array.from({ length: KEPT_SCOPES + 1 }, (_, i) => Object.freeze({ tag: `tenant-${i}` }));
      for (let i = 0; i < KEPT_SCOPES; i++) {
        const out = await supervisor.spawn(scopeIdentity, { input: 'look', scope: scopes[i] });
        assert.equal(out.status, 'done', JSON.stringify(out));
      }
      const [last, first] = await Promise.all([
        supervisor.spawn(scopeIdentity, { input: 'look', scope: scopes[KEPT_SCOPES] }),
        supervisor.spawn(scopeIdentity, { input: 'look', scope: scopes[0] }),
      ]);
      assert.equal(last.status, 'done', JSON.stringify(last));
      assert.equal(first.status, 'done', `the queued run of scope 0: ${JSON.stringify(first)}`);
      assert.equal((JSON.parse(first.status === 'done' ? first.result : '{}') as { tag?: string }).tag, 'tenant-0');
    } finally {
      await supervisor.destroy();
    }
  });
});
