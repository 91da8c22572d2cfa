import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PersistenceAdapter } from '../../persistence/Persistence.js';
import { type MakeStore, PersistenceFixtures, type TestScope } from '../PersistenceFixtures.js';

const { call, ctx, envelope, rejectsWith, request, run, scopeOf, withStore } = PersistenceFixtures;

const c = ctx('shared-conversation', 'shared-agent');

/** Save one of everything under `scope`, all with the same ids another tenant will use. */
async function fill(store: PersistenceAdapter, scope: TestScope): Promise<void> {
  await store.startToolCalls(scope, [call('shared-run', 'k1')], c);
  await store.commit(
    scope,
    {
      envelope: envelope(c),
      messages: [{ role: 'user', content: 'mine' }],
      runs: [run(c, 'shared-run')],
      openedRequests: [request(c, 'shared-request')],
    },
    c,
  );
}

/** Tenant keys partition every row: one test per operation. */
export function contractTenants(name: string, make: MakeStore): void {
  const mine = scopeOf('tenant-a');
  const theirs = scopeOf('tenant-b');
  const each = (what: string, check: (store: PersistenceAdapter) => Promise<void>) =>
    it(`nothing saved under one tenant is ${what} under another`, async () => {
      await withStore(make, async (store) => {
        await fill(store, mine);
        await check(store);
      });
    });

  describe(`${name}: tenants`, () => {
    each('loaded (state)', async (store) => {
      assert.equal(await store.loadState(theirs, c), undefined);
      assert.equal((await store.loadState(mine, c))?.agentId, c.agentId);
    });
    each('loaded (messages)', async (store) => {
      assert.deepEqual(await store.loadMessages(theirs, c), []);
    });
    each('loaded (runs)', async (store) => {
      assert.deepEqual(await store.loadRuns(theirs, c), []);
    });
    each('loaded (tool calls)', async (store) => {
      assert.deepEqual(await store.loadToolCalls(theirs, 'shared-run'), []);
      assert.equal((await store.loadToolCalls(mine, 'shared-run')).length, 1);
    });
    each('loaded (a request)', async (store) => {
      assert.equal(await store.getRequest(theirs, 'shared-request'), undefined);
    });
    each('listed (requests)', async (store) => {
      assert.deepEqual((await store.listRequests(theirs)).items, []);
      assert.equal((await store.listRequests(mine)).items.length, 1);
    });
    each('listed (conversations)', async (store) => {
      assert.deepEqual((await store.listConversations(theirs)).items, []);
    });
    each('answered', async (store) => {
      assert.deepEqual(await store.answerRequest(theirs, 'shared-request', { id: 'x', ok: true }, 1), {
        status: 'unknown',
      });
      assert.equal((await store.getRequest(mine, 'shared-request'))?.status, 'open');
    });
    each('withdrawn', async (store) => {
      assert.deepEqual(await store.withdrawRequest(theirs, 'shared-request', 1), { status: 'unknown' });
      await store.commit(theirs, { withdrawnRequests: ['shared-request'] }, c);
      assert.equal((await store.getRequest(mine, 'shared-request'))?.status, 'open');
    });
    each('deleted', async (store) => {
      assert.equal(await store.deleteConversation(theirs, c), false);
      assert.equal((await store.loadState(mine, c))?.agentId, c.agentId);
    });
    each('released', async (store) => {
      assert.equal(await store.release(theirs, c), false);
      assert.equal((await store.loadState(mine, c))?.agentId, c.agentId);
    });
    each('pruned by scope', async (store) => {
      await store.commit(mine, { runs: [run(c, 'shared-run', { status: 'done', updatedAt: 1 })] }, c);
      assert.deepEqual(await store.prune({ finishedRunsOlderThanMs: 0, now: 10, scope: theirs }), {
        runs: 0,
        toolCalls: 0,
        requests: 0,
      });
      assert.equal((await store.prune({ finishedRunsOlderThanMs: 0, now: 10, scope: mine })).runs, 1);
    });
    each('interrupted by scope', async (store) => {
      assert.deepEqual(await store.markInterrupted({ scope: theirs }), []);
      assert.equal((await store.loadRuns(mine, c)).length, 1);
    });
    each('fenced or overwritten', async (store) => {
      // The same run id under another tenant is another run: attempt 1 there is not stale.
      await store.commit(theirs, { runs: [run(c, 'shared-run', { state: { theirs: true } })] }, c);
      await store.commit(mine, { runs: [run(c, 'shared-run', { attempt: 5 })] }, c);
      assert.deepEqual((await store.loadRuns(theirs, c))[0]?.state, { theirs: true });
      assert.equal((await store.loadRuns(mine, c))[0]?.attempt, 5);
    });

    it('without a tenantKey every scope shares the default tenant', async () => {
      await withStore(
        make,
        async (store) => {
          await store.persistState(mine, envelope(c), c);
          assert.equal((await store.loadState(theirs, c))?.agentId, c.agentId);
        },
        {},
      );
    });

    it('refuses a tenantKey that returns no string, and one that throws', async () => {
      await withStore(
        make,
        async (store) => {
          await rejectsWith(store.loadState({ tenant: 7 }, c), 'ERR_INVALID_ARGUMENT', /tenantKey/);
          await rejectsWith(store.loadState(null, c), 'ERR_INVALID_ARGUMENT', /tenantKey\(scope\) threw/);
        },
        { tenantKey: (s) => (s as { tenant: string }).tenant },
      );
    });

    it('reads nothing of the scope but what tenantKey reads (it is never copied or stored)', async () => {
      const touched: string[] = [];
      const target = { tenant: 'tenant-a', tenantSecret: 'never-stored' };
      const watched = new Proxy(target, {
        get: (t, key, receiver) => {
          touched.push(String(key));
          return Reflect.get(t, key, receiver);
        },
        ownKeys: (t) => {
          touched.push('<ownKeys>');
          return Reflect.ownKeys(t);
        },
        getOwnPropertyDescriptor: (t, key) => {
          touched.push(`<descriptor ${String(key)}>`);
          return Reflect.getOwnPropertyDescriptor(t, key);
        },
      });
      await withStore(make, async (store) => {
        await fill(store, watched as TestScope);
        await store.answerRequest(watched, 'shared-request', { id: 'x', ok: true }, 1);
        await store.listConversations(watched);
        await store.loadState(watched, c);
        await store.prune({ finishedRunsOlderThanMs: 0, scope: watched });
      });
      assert.ok(touched.length > 0);
      assert.deepEqual([...new Set(touched)], ['tenant']);
    });
  });
}
