// Byte-for-byte parity of the PostgreSQL store with the SQLite store: the same records saved
// through both read back the same (as JSON text: key order included), refusals are the same, and
// listings page in the same order with the same cursors.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Message } from '@troupe/core';
import type { PostgresPersistence } from '@troupe/postgres';
import { type SqlitePersistence, sqlitePersistence } from '@troupe/sqlite';
import type { PersistenceAdapter, PersistenceContext } from '@troupe/supervisor';
import { openStore } from './postgresStores.js';
import { call, ctx, envelope, loopState, rejectsWith, request, run, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

const scope = scopeOf('t1');
const dir = tempDir('parity');
let sqlite: SqlitePersistence;
let postgres: PostgresPersistence;

before(async () => {
  sqlite = sqlitePersistence({ file: join(dir.dir, 'parity.sqlite'), tenantKey });
  postgres = await openStore({ tenantKey });
});
after(async () => {
  await sqlite?.close();
  await postgres?.close();
  dir.remove();
});

/** Run `fn` against both stores and return what each gave, as JSON text (key order included). */
async function both(fn: (store: PersistenceAdapter) => Promise<unknown>): Promise<string> {
  const a = JSON.stringify(await fn(sqlite));
  const b = JSON.stringify(await fn(postgres));
  assert.equal(b, a, 'PostgreSQL read back other bytes than SQLite');
  return a;
}

// Values JSON carries that a database could mangle: U+0000 and other controls, lone surrogates
// (escaped by JSON.stringify), 1e21 and other numbers at the edges, keys in a non-alphabetical order.
const awkward = {
  nul: 'a\u0000b',
  controls: '\u0001\u001f\u007f\n\t',
  loneHigh: 'x\ud800y',
  loneLow: '\udc00',
  pair: '😀',
  big: 1e21,
  tiny: 5e-324,
  max: Number.MAX_SAFE_INTEGER,
  negZeroIsZero: 0,
  fraction: 0.1 + 0.2,
  zeta: 'last key first',
  alpha: { z: 1, a: 2, m: [3, { y: true, b: null }] },
  ключ: 'кириллица',
  '': 'empty key',
};

describe('PostgreSQL ↔ SQLite parity', () => {
  it('a state, transcript, runs, tool calls and a request read back the same bytes', async () => {
    const c = ctx('conv-awkward');
    const state = { ...loopState(c.agentId), metadata: awkward };
    state.messages = [
      ...state.messages,
      { role: 'user', content: 'nul \u0000 and lone \ud83d here' },
      { role: 'assistant', content: `long ${'x'.repeat(3000)}` },
    ] as Message[];
    const messages: Message[] = [
      { role: 'user', content: 'with \u0000 inside' },
      { role: 'assistant', content: '\ud800\udc00 and \udfff' },
      { role: 'user', content: 'é'.repeat(1500) }, // more than a chunk's 2 KiB in UTF-8, fewer in characters
    ];
    await both(async (store) => {
      await store.startToolCalls(
        scope,
        [call('r1', 'k1', { startedAt: 1.5 }), call('r1', 'k2', { idempotent: true })],
        c,
      );
      await store.commit(
        scope,
        {
          envelope: envelope(c, { state, savedAt: 1_700_000_000_123.25, status: 'suspended', waitingOn: 'q1' }),
          messages,
          runs: [run(c, 'r1', { status: 'suspended', state: awkward, updatedAt: 1e15 + 0.5 })],
          committedToolCalls: [{ runId: 'r1', toolCallId: 'k1', attempt: 1 }],
          openedRequests: [
            request(c, 'q1', { request: { id: 'ask', kind: 'input', prompt: '\u0000?', data: awkward } }),
          ],
          at: 2.25,
          basedOn: 0,
        },
        c,
      );
      return null;
    });
    const loaded = await both((store) => store.loadState(scope, c));
    assert.equal(
      JSON.stringify((JSON.parse(loaded) as { state: { metadata: unknown } }).state.metadata),
      JSON.stringify(awkward),
    );
    await both((store) => store.loadMessages(scope, c));
    assert.deepEqual(await postgres.loadMessages(scope, c), messages);
    await both((store) => store.loadRuns(scope, c));
    await both((store) => store.getRun(scope, 'r1'));
    await both((store) => store.loadToolCalls(scope, 'r1'));
    await both((store) => store.getRequest(scope, 'q1'));
    await both((store) =>
      store.answerRequest(scope, 'q1', { id: 'ask', ok: true, data: { ...awkward, again: '\u0000' } }, 3.5),
    );
    await both((store) => store.getRequest(scope, 'q1'));
    // A turn after it (the state's messages appended to its chunks) reads the same again.
    const more = { ...state, messages: [...state.messages, { role: 'user', content: 'next \u0000' } as Message] };
    await both(async (store) => {
      await store.commit(scope, { envelope: envelope(c, { state: more }), basedOn: 1 }, c);
      return store.loadState(scope, c);
    });
    await both((store) => store.markInterrupted({ now: 9.75 }));
  });

  it('refuses the same way: ids with a lone surrogate or NUL, values JSON cannot carry', async () => {
    for (const store of [sqlite, postgres] as PersistenceAdapter[]) {
      for (const bad of ['a\ud800', '\udc00b', 'a\u0000b']) {
        await rejectsWith(store.loadState(scope, ctx(bad)), 'ERR_INVALID_ARGUMENT', /lone surrogate/);
        await rejectsWith(store.getRun(scope, bad), 'ERR_INVALID_ARGUMENT');
        await rejectsWith(store.commit(scope, { runs: [run(ctx('c'), bad)] }, ctx('c')), 'ERR_INVALID_ARGUMENT');
      }
      await rejectsWith(
        store.commit(scope, { runs: [run(ctx('c'), 'r', { state: { n: Number.POSITIVE_INFINITY } })] }, ctx('c')),
        'ERR_NOT_JSON',
      );
    }
  });

  it('lists page in the same order with the same cursors (ids by code point, times as the same numbers)', async () => {
    // Code point order differs from a locale's (case, accents) and from UTF-16's (U+FB00 < U+1F600 by
    // code point, > by UTF-16 code unit).
    const ids = ['B', 'a', 'é', 'Z', '_', '~', '\ufb00', '😀', 'a b', 'ab', 'A', '0', '10', '9'];
    const times = [5, 5, 5, 1.25, 1.25, 7, 5, 5, 1e12, 5, 7, 3, 3, 3];
    await both(async (store) => {
      for (const [i, id] of ids.entries()) {
        const c: PersistenceContext = ctx(`list-${id}`, `agent-${id}`);
        await store.commit(
          scope,
          {
            envelope: envelope(c, { savedAt: times[i] as number }),
            openedRequests: [request(c, `req-${id}`, { openedAt: times[i] as number })],
          },
          c,
        );
      }
      return null;
    });
    const pages = async (store: PersistenceAdapter, kind: 'requests' | 'conversations') => {
      const out: unknown[] = [];
      let after: string | undefined;
      do {
        const page =
          kind === 'requests'
            ? await store.listRequests(scope, { limit: 3, after })
            : await store.listConversations(scope, { limit: 3, after });
        out.push({
          items: page.items.map((i) => ('requestId' in i ? i.requestId : i.conversationId)),
          next: page.next,
        });
        after = page.next;
      } while (after !== undefined);
      return out;
    };
    const requests = JSON.parse(await both((store) => pages(store, 'requests'))) as { items: string[] }[];
    await both((store) => pages(store, 'conversations'));
    const order = requests.flatMap((p) => p.items).filter((id) => id.startsWith('req-') && id !== 'req-q1');
    assert.equal(order.length, ids.length);
    // By time, then by code point: '\ufb00' before '😀' (UTF-16 order would put it after).
    assert.ok(order.indexOf('req-\ufb00') < order.indexOf('req-😀'), order.join(' '));
  });
});
