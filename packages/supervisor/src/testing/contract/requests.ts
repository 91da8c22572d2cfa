import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MakeStore, PersistenceFixtures, type TestScope } from '../PersistenceFixtures.js';

const { ctx, envelope, rejectsWith, request, withStore } = PersistenceFixtures;

/** Requests (answered by compare-and-set) and listings. */
export function contractRequests(name: string, make: MakeStore, scope: TestScope): void {
  describe(`${name}: requests`, () => {
    it('openRequest stores the record as open; getRequest returns it', async () => {
      await withStore(make, async (store) => {
        const c = ctx('c1');
        const opening = request(c, 'q1', {
          approval: true,
          request: { id: 'l1', kind: 'approval', prompt: 'Refund?', data: { amount: 5 } },
        });
        await store.openRequest(scope, opening);
        const saved = await store.getRequest(scope, 'q1');
        assert.deepEqual(saved, { ...opening, status: 'open' });
      });
    });

    it('refuses a request id that already exists', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        await rejectsWith(store.openRequest(scope, request(ctx('c2'), 'q1')), 'ERR_INVALID_ARGUMENT', /already exists/);
      });
    });

    it('answerRequest is taken once: the first gets the record with its answer, later ones already-answered', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        const first = await store.answerRequest(
          scope,
          'q1',
          { id: 'local-q1', ok: true, data: { account: 'A-1' } },
          2_000,
        );
        assert.equal(first.status, 'taken');
        assert.ok(first.status === 'taken');
        assert.deepEqual(
          [first.record.status, first.record.answer?.data, first.record.closedAt],
          ['answered', { account: 'A-1' }, 2_000],
        );
        assert.deepEqual(await store.answerRequest(scope, 'q1', { id: 'local-q1', ok: false }, 3_000), {
          status: 'already-answered',
        });
        assert.deepEqual((await store.getRequest(scope, 'q1'))?.answer, {
          id: 'local-q1',
          ok: true,
          data: { account: 'A-1' },
        });
      });
    });

    it('of many concurrent answers to one request exactly one is taken', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => store.answerRequest(scope, 'q1', { id: 'x', ok: true, data: i }, i)),
        );
        assert.equal(results.filter((r) => r.status === 'taken').length, 1);
        assert.equal(results.filter((r) => r.status === 'already-answered').length, 19);
      });
    });

    it('answering a withdrawn request says withdrawn; an unknown one says unknown', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        assert.deepEqual(await store.withdrawRequest(scope, 'q1', 5), { status: 'withdrawn' });
        assert.deepEqual(await store.answerRequest(scope, 'q1', { id: 'x', ok: true }, 6), { status: 'withdrawn' });
        assert.deepEqual(await store.answerRequest(scope, 'nope', { id: 'x', ok: true }, 6), { status: 'unknown' });
      });
    });

    it('withdrawRequest reports already-withdrawn, already-answered and unknown', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        await store.openRequest(scope, request(ctx('c1'), 'q2'));
        await store.withdrawRequest(scope, 'q1', 5);
        await store.answerRequest(scope, 'q2', { id: 'x', ok: true }, 5);
        assert.deepEqual(await store.withdrawRequest(scope, 'q1', 6), { status: 'already-withdrawn' });
        assert.deepEqual(await store.withdrawRequest(scope, 'q2', 6), { status: 'already-answered' });
        assert.deepEqual(await store.withdrawRequest(scope, 'q3', 6), { status: 'unknown' });
      });
    });

    it('a commit withdraws only its own conversation’s open requests', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        await store.openRequest(scope, request(ctx('c2'), 'q2'));
        await store.commit(scope, { withdrawnRequests: ['q1', 'q2'], at: 7 }, ctx('c1'));
        assert.equal((await store.getRequest(scope, 'q1'))?.status, 'withdrawn');
        assert.equal((await store.getRequest(scope, 'q1'))?.closedAt, 7);
        assert.equal((await store.getRequest(scope, 'q2'))?.status, 'open');
      });
    });

    it('refuses an answer JSON cannot carry, taking nothing', async () => {
      await withStore(make, async (store) => {
        await store.openRequest(scope, request(ctx('c1'), 'q1'));
        await rejectsWith(
          store.answerRequest(scope, 'q1', { id: 'x', ok: true, data: { big: 1n } }, 1),
          'ERR_NOT_JSON',
          /answer\.data\.big is a bigint/,
        );
        assert.equal((await store.getRequest(scope, 'q1'))?.status, 'open');
      });
    });

    it('listRequests lists open requests oldest first, by conversation, in pages', async () => {
      await withStore(make, async (store) => {
        for (let i = 0; i < 5; i++) {
          await store.openRequest(scope, request(ctx(i % 2 === 0 ? 'even' : 'odd'), `q${i}`, { openedAt: 100 - i }));
        }
        await store.answerRequest(scope, 'q2', { id: 'x', ok: true }, 1);
        const all = await store.listRequests(scope);
        assert.deepEqual(
          all.items.map((r) => r.requestId),
          ['q4', 'q3', 'q1', 'q0'],
        );
        assert.equal(all.next, undefined);
        const even = await store.listRequests(scope, { conversationId: 'even' });
        assert.deepEqual(
          even.items.map((r) => r.requestId),
          ['q4', 'q0'],
        );
        const first = await store.listRequests(scope, { limit: 3 });
        assert.deepEqual(
          first.items.map((r) => r.requestId),
          ['q4', 'q3', 'q1'],
        );
        const second = await store.listRequests(scope, { limit: 3, after: first.next });
        assert.deepEqual(
          second.items.map((r) => r.requestId),
          ['q0'],
        );
        assert.equal(second.next, undefined);
      });
    });

    it('refuses a limit out of range and a cursor it did not make', async () => {
      await withStore(make, async (store) => {
        await rejectsWith(store.listRequests(scope, { limit: 0 }), 'ERR_INVALID_ARGUMENT', /limit/);
        await rejectsWith(store.listConversations(scope, { after: 'garbage' }), 'ERR_INVALID_ARGUMENT', /cursor/);
      });
    });
  });

  describe(`${name}: listing conversations`, () => {
    it('lists the tenant’s conversations newest first with agent name, status, time and open requests', async () => {
      await withStore(make, async (store) => {
        await store.persistState(scope, envelope(ctx('a'), { savedAt: 10, agentName: 'alpha' }), ctx('a'));
        await store.persistState(scope, envelope(ctx('b'), { savedAt: 30, status: 'suspended' }), ctx('b'));
        await store.persistState(scope, envelope(ctx('c'), { savedAt: 20 }), ctx('c'));
        await store.openRequest(scope, request(ctx('b'), 'q1'));
        await store.openRequest(scope, request(ctx('b'), 'q2'));
        const page = await store.listConversations(scope);
        assert.deepEqual(
          page.items.map((s) => [s.conversationId, s.agentName, s.status, s.updatedAt, s.openRequests]),
          [
            ['b', 'triage', 'suspended', 30, 2],
            ['c', 'triage', 'idle', 20, 0],
            ['a', 'alpha', 'idle', 10, 0],
          ],
        );
        assert.equal(page.items[0]?.agentId, ctx('b').agentId);
      });
    });

    it('pages with limit and after', async () => {
      await withStore(make, async (store) => {
        for (let i = 0; i < 5; i++)
          await store.persistState(scope, envelope(ctx(`c${i}`), { savedAt: i }), ctx(`c${i}`));
        const seen: string[] = [];
        let after: string | undefined;
        do {
          const page = await store.listConversations(scope, { limit: 2, after });
          seen.push(...page.items.map((s) => s.conversationId));
          after = page.next;
        } while (after !== undefined);
        assert.deepEqual(seen, ['c4', 'c3', 'c2', 'c1', 'c0']);
      });
    });

    it('a conversation without a saved envelope is not listed', async () => {
      await withStore(make, async (store) => {
        await store.saveMessage(scope, { role: 'user', content: 'x' }, ctx('only-messages'));
        assert.deepEqual((await store.listConversations(scope)).items, []);
      });
    });
  });
}
