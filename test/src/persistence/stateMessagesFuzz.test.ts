import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { Message } from '@troupe/core';
import { sealMessage } from '@troupe/core/internal';
import { sqlitePersistence } from '@troupe/sqlite';
import type { AgentStateEnvelope, PersistenceContext } from '@troupe/supervisor';
import { byDepth } from '../fixtures/testDepth.js';
import { ctx, envelope, loopState, request, scopeOf, tenantKey } from './records.js';
import { tempDir } from './sqliteFiles.js';

// Review of schema 6: many turns of random sizes around 2 KiB, two stores on one file, deletes,
// failed commits, subagents, restarts; every step the state read back is exactly the one saved last.

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const scope = scopeOf('acme');
type Store = ReturnType<typeof sqlitePersistence>;

function withMessages(c: PersistenceContext, messages: readonly Message[], savedAt: number): AgentStateEnvelope {
  return envelope(c, { state: { ...loopState(c.agentId), messages }, savedAt });
}

describe('schema 6 review: state messages under random turns', () => {
  // Six seeds in the deep tier (TROUPE_TEST_DEPTH=deep), one in pnpm test.
  const STEPS = 400;
  const checkEvery = byDepth({ quick: 5, deep: 1 });
  for (const seed of byDepth({ quick: [1], deep: [1, 2, 3, 4, 5, 6] })) {
    it(`seed ${seed}: every load is exactly the last saved list`, async () => {
      const d = tempDir('review-state');
      dirs.push(d);
      const path = join(d.dir, 'troupe.sqlite');
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
      const contexts = [ctx('c1', 'a1'), ctx('c1', 'a2'), ctx('c1', 'a3'), ctx('c2', 'b1')];
      const stores: Store[] = [
        sqlitePersistence({ file: path, tenantKey }),
        sqlitePersistence({ file: path, tenantKey }),
      ];
      // What each store believes of each state: the revision and list it saved or loaded last.
      const mine: Map<string, { revision: number; list: Message[] }>[] = [new Map(), new Map()];
      const truth = new Map<string, { revision: number; list: Message[] } | undefined>();
      let n = 0;
      let savedAt = 1;
      let requestN = 0;
      const msg = (): Message => {
        n++;
        const size = rand() < 0.5 ? 1900 + Math.floor(rand() * 300) : Math.floor(rand() * 400);
        return sealMessage({ role: rand() < 0.5 ? 'user' : 'assistant', content: `m${n}:`.padEnd(size, 'x') });
      };
      const keyOf = (c: PersistenceContext) => `${c.conversationId}/${c.agentId}`;
      for (let step = 0; step < STEPS; step++) {
        const si = Math.floor(rand() * 2);
        const store = stores[si] as Store;
        const c = pick(contexts);
        const k = keyOf(c);
        const t = truth.get(k);
        const r = rand();
        let desc = '';
        try {
          if (r < 0.04) {
            desc = 'delete';
            if (await store.deleteConversation(scope, c)) {
              for (const [kk] of truth) if (kk.startsWith(`${c.conversationId}/`)) truth.set(kk, undefined);
            }
          } else if (r < 0.1) {
            desc = 'restart';
            await store.close();
            stores[si] = sqlitePersistence({ file: path, tenantKey });
            mine[si] = new Map();
          } else if (r < 0.2) {
            desc = 'load';
            const s = await store.loadState(scope, c);
            if (s === undefined) mine[si]?.delete(k);
            else mine[si]?.set(k, { revision: s.revision as number, list: [...(s.state.messages as Message[])] });
          } else {
            const m = mine[si]?.get(k);
            const base = m?.list ?? [];
            const kind = rand();
            let list: Message[];
            if (kind < 0.8) list = [...base, ...Array.from({ length: Math.floor(rand() * 4) }, msg)];
            else if (kind < 0.9) list = base.slice(0, Math.floor(rand() * base.length));
            else list = [msg(), ...base.slice(1)];
            const basedOnRoll = rand();
            const basedOn =
              basedOnRoll < 0.1 ? undefined : basedOnRoll < 0.15 ? (m?.revision ?? 0) + 1 : (m?.revision ?? 0);
            const failRequest = rand() < 0.08;
            const openedRequests = failRequest
              ? [request(c, 'dup'), request(c, 'dup')]
              : [request(c, `r${requestN++}`)];
            desc = `commit basedOn=${String(basedOn)} n=${list.length} fail=${failRequest}`;
            await store.commit(
              scope,
              {
                envelope: withMessages(c, list, savedAt++),
                ...(basedOn === undefined ? {} : { basedOn }),
                openedRequests,
              },
              c,
            );
            const revision = basedOn === undefined ? (t?.revision ?? 0) + 1 : basedOn + 1;
            truth.set(k, { revision, list });
            mine[si]?.set(k, { revision, list });
          }
        } catch (error) {
          const code = (error as { code?: string }).code;
          assert.ok(
            typeof code === 'string' && code !== 'ERR_STORE_CORRUPT' && desc.startsWith('commit'),
            `step ${step} ${desc}: unexpected ${String(error)} ${code}`,
          );
        }
        // Check every state from a fresh reader: after every step in the deep tier; in pnpm test after
        // every delete and restart and every fifth step (a reader is a new store: its own connection
        // and checkpointer thread, about 0.1 s here).
        if (step % checkEvery !== 0 && desc !== 'delete' && desc !== 'restart' && step !== STEPS - 1) continue;
        const reader = sqlitePersistence({ file: path, tenantKey });
        try {
          for (const cc of contexts) {
            const tt = truth.get(keyOf(cc));
            const s = await reader.loadState(scope, cc);
            if (tt === undefined) continue;
            assert.ok(s !== undefined, `step ${step} ${desc}: ${keyOf(cc)} missing`);
            assert.deepEqual(
              (s.state.messages as Message[]).map((x) => (x.content as string).split(':')[0]),
              tt.list.map((x) => (x.content as string).split(':')[0]),
              `step ${step} (${desc}) store ${si}: ${keyOf(cc)}`,
            );
            assert.equal(s.revision, tt.revision, `step ${step} ${desc}: revision of ${keyOf(cc)}`);
          }
        } finally {
          await reader.close();
        }
      }
      for (const s of stores) await s.close();
    });
  }
});
