import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PersistenceAdapter } from '../persistence/Persistence.js';
import { contractIds } from './contract/ids.js';
import { contractRequests } from './contract/requests.js';
import { contractRuns } from './contract/runs.js';
import { contractTenants } from './contract/tenants.js';
import { type MakeStore, PersistenceFixtures } from './PersistenceFixtures.js';

const { ctx, envelope, loopState, rejectsWith, run, scopeOf, tenantKey, withStore } = PersistenceFixtures;

/**
 * The persistence contract: every rule of {@link PersistenceAdapter}, one `node:test` test each,
 * run against a fresh store made by `make` for every test (closed and cleaned up after it). Call it
 * at the top level of a test file run by `node --test`; it declares the suites, named after `name`.
 * This repository runs it against `MemoryPersistence`, `@troupe/sqlite` and `@troupe/postgres`:
 * a store of your own that passes it refuses, fences, answers once and keeps tenants apart as they do.
 *
 * What it cannot check alone: what only several processes show (two hosts racing on one
 * conversation, a writer killed mid-turn, liveness of another process). Test those with your
 * store's own processes, as this repository's store tests do.
 *
 * @example
 * ```ts
 * import { MemoryPersistence } from '@troupe/supervisor'
 *
 * runPersistenceContract('MemoryPersistence', async (options) => ({
 *   store: new MemoryPersistence(options),
 *   cleanup: async () => {},
 * }))
 * ```
 */
export function runPersistenceContract(name: string, make: MakeStore): void {
  const scope = scopeOf('t1');
  describe(`${name}: states and messages`, () => {
    it('persistState then loadState returns the envelope', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.persistState(scope, envelope(c), c);
        const loaded = await store.loadState(scope, c);
        // With the revision the store keeps beside it (1: saved once).
        assert.deepEqual(loaded, { ...JSON.parse(JSON.stringify(envelope(c))), revision: 1 });
      });
    });

    it('a save based on the revision it loaded is taken, and counts the revision up', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c, { savedAt: 1 }), basedOn: 0 }, c);
        assert.equal((await store.loadState(scope, c))?.revision, 1);
        await store.commit(scope, { envelope: envelope(c, { savedAt: 2 }), basedOn: 1 }, c);
        await store.commit(scope, { envelope: envelope(c, { savedAt: 3 }), basedOn: 2 }, c);
        const loaded = await store.loadState(scope, c);
        assert.deepEqual([loaded?.revision, loaded?.savedAt], [3, 3]);
        // Without basedOn the envelope is saved over whatever is there, and still counted.
        await store.persistState(scope, envelope(c, { savedAt: 4 }), c);
        assert.equal((await store.loadState(scope, c))?.revision, 4);
      });
    });

    it('a save based on a revision another writer has moved on from is fenced: nothing of its batch is saved', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { envelope: envelope(c, { savedAt: 1 }), basedOn: 0 }, c);
        // Two copies loaded revision 1; the first saves, the second is stale.
        await store.commit(scope, { envelope: envelope(c, { savedAt: 2 }), basedOn: 1 }, c);
        await rejectsWith(
          store.commit(
            scope,
            {
              envelope: envelope(c, { savedAt: 99 }),
              basedOn: 1,
              messages: [{ role: 'user', content: 'stale' }],
              runs: [run(c, 'r-stale')],
            },
            c,
          ),
          'ERR_STORE_FENCED',
          /loaded at revision 1.*revision 2.*nothing of this write was saved/,
        );
        // A second copy that found nothing saved, when something is now.
        await rejectsWith(
          store.commit(scope, { envelope: envelope(c, { savedAt: 98 }), basedOn: 0 }, c),
          'ERR_STORE_FENCED',
          /another process saved it first/,
        );
        const loaded = await store.loadState(scope, c);
        assert.deepEqual([loaded?.revision, loaded?.savedAt], [2, 2]);
        assert.deepEqual(await store.loadMessages(scope, c), []);
        assert.deepEqual(await store.loadRuns(scope, c), []);
      });
    });

    it('refuses a basedOn that is not an integer ≥ 0, or one without an envelope', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        for (const basedOn of [-1, 1.5, Number.NaN, '1']) {
          await rejectsWith(
            store.commit(scope, { envelope: envelope(c), basedOn: basedOn as number }, c),
            'ERR_INVALID_ARGUMENT',
            /basedOn must be an integer ≥ 0/,
          );
        }
        await rejectsWith(
          store.commit(scope, { messages: [{ role: 'user', content: 'x' }], basedOn: 0 }, c),
          'ERR_INVALID_ARGUMENT',
          /pass it with the envelope/,
        );
      });
    });

    it('loadState of an unknown agent is undefined', async () => {
      await withStore(make, async (store) => {
        assert.equal(await store.loadState(scope, ctx('nobody')), undefined);
      });
    });

    it('copies on the way in and out: changing a saved or loaded value changes nothing saved', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        const state = { ...loopState(c.agentId), metadata: { list: [1] } };
        await store.persistState(scope, envelope(c, { state }), c);
        (state.metadata.list as number[]).push(2);
        const first = await store.loadState(scope, c);
        assert.ok(first !== undefined);
        (first.state.metadata.list as number[]).push(3);
        const second = await store.loadState(scope, c);
        assert.deepEqual(second?.state.metadata, { list: [1] });
      });
    });

    it('a later persistState replaces the earlier one', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.persistState(scope, envelope(c, { savedAt: 1 }), c);
        await store.persistState(scope, envelope(c, { savedAt: 2, status: 'suspended' }), c);
        const loaded = await store.loadState(scope, c);
        assert.equal(loaded?.savedAt, 2);
        assert.equal(loaded?.status, 'suspended');
      });
    });

    it('saveMessage appends; loadMessages returns them in order, per agent', async () => {
      await withStore(make, async (store) => {
        const a = ctx('c1', 'a');
        const b = ctx('c1', 'b');
        await store.saveMessage(scope, { role: 'user', content: 'one' }, a);
        await store.saveMessage(scope, { role: 'assistant', content: 'two' }, a);
        await store.saveMessage(scope, { role: 'user', content: 'other' }, b);
        assert.deepEqual(
          (await store.loadMessages(scope, a)).map((m) => m.content),
          ['one', 'two'],
        );
        assert.deepEqual(
          (await store.loadMessages(scope, b)).map((m) => m.content),
          ['other'],
        );
      });
    });

    it('refuses an envelope of another version (write the current one; migrateEnvelope upgrades old ones)', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        const old = { ...envelope(c), version: 1 } as never;
        await rejectsWith(store.persistState(scope, old, c), 'ERR_INVALID_ARGUMENT', /migrateEnvelope/);
      });
    });

    it('refuses an envelope whose agent or conversation is not the context’s', async () => {
      await withStore(make, async (store) => {
        await rejectsWith(
          store.persistState(scope, envelope(ctx('c1')), ctx('c2')),
          'ERR_INVALID_ARGUMENT',
          /matching context/,
        );
      });
    });

    it('refuses a value JSON cannot carry with ERR_NOT_JSON naming the path, saving nothing', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        const state = { ...loopState(c.agentId), metadata: { when: new Date(0) } };
        await rejectsWith(
          store.commit(scope, { envelope: envelope(c, { state }), messages: [{ role: 'user', content: 'x' }] }, c),
          'ERR_NOT_JSON',
          /envelope\.state\.metadata\.when is a Date/,
        );
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1', { state: { n: Number.NaN } })] }, c),
          'ERR_NOT_JSON',
          /NaN/,
        );
        assert.equal(await store.loadState(scope, c), undefined);
        assert.deepEqual(await store.loadMessages(scope, c), []);
        assert.deepEqual(await store.loadRuns(scope, c), []);
      });
    });

    it('refuses a malformed context', async () => {
      await withStore(make, async (store) => {
        await rejectsWith(
          store.loadState(scope, { agentId: '', conversationId: 'c' } as never),
          'ERR_INVALID_ARGUMENT',
        );
      });
    });
  });

  describe(`${name}: the turn commit`, () => {
    it('saves the envelope, messages, runs, committed tool calls and requests of one turn together', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.startToolCalls(
          scope,
          [{ runId: 'r1', toolCallId: 'k1', attempt: 1, toolName: 'charge', idempotent: false, startedAt: 1 }],
          c,
        );
        await store.commit(
          scope,
          {
            envelope: envelope(c, { status: 'suspended', waitingOn: 'q1' }),
            messages: [{ role: 'user', content: 'hi' }],
            runs: [run(c, 'r1', { status: 'suspended' })],
            committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }],
            openedRequests: [
              {
                requestId: 'q1',
                conversationId: 'c1',
                agentId: c.agentId,
                runId: 'r1',
                runAgentId: c.agentId,
                path: [c.agentId],
                request: { id: 'ask', kind: 'input', prompt: '?' },
                localId: 'ask',
                toolCallId: 'k2',
                approval: false,
                openedAt: 5,
              },
            ],
          },
          c,
        );
        assert.equal((await store.loadState(scope, c))?.waitingOn, 'q1');
        assert.equal((await store.loadMessages(scope, c)).length, 1);
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => r.status),
          ['suspended'],
        );
        assert.deepEqual(await store.loadToolCalls(scope, 'r1'), []);
        assert.equal((await store.getRequest(scope, 'q1'))?.status, 'open');
      });
    });

    it('is all or nothing: a batch with one refused part saves none of it', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await store.commit(scope, { runs: [run(c, 'r1')] }, c); // the run's first attempt starts the conversation
        await store.commit(scope, { runs: [run(c, 'r1', { attempt: 3 })] }, c);
        await rejectsWith(
          store.commit(
            scope,
            {
              envelope: envelope(c),
              messages: [{ role: 'user', content: 'lost' }],
              openedRequests: [
                {
                  requestId: 'q1',
                  conversationId: 'c1',
                  agentId: c.agentId,
                  runId: 'r2',
                  runAgentId: c.agentId,
                  path: [c.agentId],
                  request: { id: 'x', kind: 'input', prompt: '?' },
                  localId: 'x',
                  toolCallId: 'k',
                  approval: false,
                  openedAt: 1,
                },
              ],
              runs: [run(c, 'r2'), run(c, 'r1', { attempt: 2 })],
            },
            c,
          ),
          'ERR_STORE_FENCED',
          /stale/,
        );
        assert.equal(await store.loadState(scope, c), undefined);
        assert.deepEqual(await store.loadMessages(scope, c), []);
        assert.equal(await store.getRequest(scope, 'q1'), undefined);
        assert.deepEqual(
          (await store.loadRuns(scope, c)).map((r) => [r.runId, r.attempt]),
          [['r1', 3]],
        );
      });
    });

    it('refuses to commit a tool call that was never started, saving nothing', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await rejectsWith(
          store.commit(
            scope,
            { envelope: envelope(c), committedToolCalls: [{ runId: 'r', toolCallId: 'k', attempt: 1 }] },
            c,
          ),
          'ERR_INVALID_ARGUMENT',
          /never started/,
        );
        assert.equal(await store.loadState(scope, c), undefined);
      });
    });

    it('refuses a run or request of another conversation than the context’s', async () => {
      await withStore(make, async (store) => {
        await rejectsWith(
          store.commit(scope, { runs: [run(ctx('c2'), 'r1')] }, ctx('c1')),
          'ERR_INVALID_ARGUMENT',
          /c2/,
        );
      });
    });

    it('refuses the same run twice in one batch', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        await rejectsWith(
          store.commit(scope, { runs: [run(c, 'r1'), run(c, 'r1')] }, c),
          'ERR_INVALID_ARGUMENT',
          /twice/,
        );
      });
    });
  });

  contractRuns(name, make, scope);
  contractRequests(name, make, scope);
  contractTenants(name, make);
  contractIds(name, make);

  describe(`${name}: lifecycle`, () => {
    it('close is idempotent and every later call rejects with ERR_CLOSED', async () => {
      const { store, cleanup } = await make({ tenantKey });
      await store.close?.();
      await store.close?.();
      await rejectsWith(store.loadState(scope, ctx('c1')), 'ERR_CLOSED');
      await rejectsWith(store.persistState(scope, envelope(ctx('c1')), ctx('c1')), 'ERR_CLOSED');
      await rejectsWith(store.markInterrupted(), 'ERR_CLOSED');
      await cleanup();
    });
  });
}
