import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PersistenceAdapter } from '../../persistence/Persistence.js';
import { type MakeStore, PersistenceFixtures } from '../PersistenceFixtures.js';

const { call, ctx, envelope, rejectsWith, request, run, scopeOf, withStore } = PersistenceFixtures;

// Issue 31, item 8: a conversation id holding '\ud800' came back from SQLite as U+FFFD — another
// id, naming no messages, that could not be deleted — while the in-memory store kept it. UTF-8
// (SQLite's TEXT, PostgreSQL's text, JSON on a queue) has no encoding for a lone surrogate, so an
// id or tenant key holding one is refused at the store's edge, in every store alike, with the
// index of the offending code unit; every well-formed string, astral characters included,
// round-trips exactly.

const LONE = 'ab\ud800cd'; // the lone surrogate at index 2
const AT = /lone surrogate \(\\ud800\) at index 2/;

/** One id position each: what to call, and the name the error must give the position. */
const POSITIONS: readonly [string, RegExp, (store: PersistenceAdapter) => Promise<unknown>][] = [
  [
    'a conversation id',
    /context\.conversationId/,
    (s) => s.persistState(scopeOf('t1'), envelope(ctx(LONE, 'agent-1')), ctx(LONE, 'agent-1')),
  ],
  ['an agent id', /context\.agentId/, (s) => s.loadState(scopeOf('t1'), ctx('c1', LONE))],
  ['a run id', /run\.runId/, (s) => s.commit(scopeOf('t1'), { runs: [run(ctx('c1'), LONE)] }, ctx('c1'))],
  ['a request id', /request\.requestId/, (s) => s.openRequest(scopeOf('t1'), request(ctx('c1'), LONE))],
  ['a tool call id', /toolCall\.toolCallId/, (s) => s.startToolCalls(scopeOf('t1'), [call('r1', LONE)], ctx('c1'))],
  ['a run id to look up', /runId/, (s) => s.loadToolCalls(scopeOf('t1'), LONE)],
  ['a request id to answer', /requestId/, (s) => s.answerRequest(scopeOf('t1'), LONE, { id: 'x', ok: true }, 1)],
  ['a tenant key', /tenant key/, (s) => s.loadState(scopeOf(LONE), ctx('c1'))],
];

/** Ids UTF-8 can carry round-trip exactly; the rest are refused the same way in every store. */
export function contractIds(name: string, make: MakeStore): void {
  describe(`${name}: ids and tenant keys`, () => {
    for (const [what, field, attempt] of POSITIONS) {
      it(`${what} holding a lone surrogate is ERR_INVALID_ARGUMENT naming it and its index; nothing is saved`, async () => {
        await withStore(make, async (store) => {
          await rejectsWith(attempt(store), 'ERR_INVALID_ARGUMENT', field);
          await rejectsWith(attempt(store), 'ERR_INVALID_ARGUMENT', AT);
          assert.deepEqual((await store.listConversations(scopeOf('t1'))).items, []);
        });
      });
    }

    it('a lone surrogate at the start or end, and a reversed pair, are refused with their index', async () => {
      await withStore(make, async (store) => {
        for (const [id, at] of [
          ['\udfffx', 0],
          ['x\ud83d', 1],
          ['xy\ude00\ud83d', 2],
        ] as const) {
          await rejectsWith(
            store.loadState(scopeOf('t1'), ctx(id, 'agent-1')),
            'ERR_INVALID_ARGUMENT',
            new RegExp(`at index ${at}:`),
          );
        }
      });
    });

    it('a well-formed id with astral characters and U+FFFD itself round-trips exactly: listed, loaded, deleted', async () => {
      await withStore(make, async (store) => {
        const tenant = scopeOf('tenant-😀');
        const ids = ['conv-😀-\u{10FFFF}-é', 'conv-\ufffd'];
        for (const id of ids) {
          const c = ctx(id, 'agent-1');
          await store.commit(tenant, { envelope: envelope(c), runs: [run(c, `run-${id}`, { status: 'done' })] }, c);
        }
        const listed = (await store.listConversations(tenant)).items.map((i) => i.conversationId).sort();
        assert.deepEqual(listed, [...ids].sort());
        for (const id of ids) {
          const c = ctx(id, 'agent-1');
          assert.equal((await store.loadState(tenant, c))?.conversationId, id);
          assert.equal((await store.getRun(tenant, `run-${id}`))?.conversationId, id);
          assert.equal(await store.deleteConversation(tenant, c), true, `${JSON.stringify(id)} is deleted`);
        }
        assert.deepEqual((await store.listConversations(tenant)).items, []);
        // Another tenant whose key differs only where the first has an astral character sees nothing.
        await store.persistState(tenant, envelope(ctx('kept', 'agent-1')), ctx('kept', 'agent-1'));
        assert.deepEqual((await store.listConversations(scopeOf('tenant-\ufffd'))).items, []);
      });
    });
  });
}
