// The PostgreSQL server unreachable or restarted mid-run: typed errors (ERR_STORE_UNREACHABLE,
// saying to retry), nothing acknowledged lost, and the same store usable again once the server is
// back — under a store, and under a supervisor whose message runs into the outage.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineAgent, isTroupeError } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor } from '@troupe/supervisor';
import { freshSchema, openStore, server } from './postgresStores.js';
import { ctx, envelope, rejectsWith, run, scopeOf, tenantKey } from './records.js';

const scope = scopeOf('t1');

describe('PostgresPersistence: the server goes away and comes back', () => {
  for (const how of ['crashServer', 'stopServer'] as const) {
    it(`${how === 'crashServer' ? 'killed (immediate shutdown)' : 'stopped (fast shutdown)'}: typed errors meanwhile, every acknowledged save kept, usable again after`, async () => {
      const s = await server();
      const store = await openStore({ schema: freshSchema('restart'), tenantKey });
      const c = ctx('c1');
      try {
        for (let i = 1; i <= 5; i++) {
          await store.commit(
            scope,
            {
              envelope: envelope(c, { savedAt: i }),
              messages: [{ role: 'user', content: `m${i}` }],
              runs: [run(c, 'r1', { updatedAt: i })],
              basedOn: i - 1,
            },
            c,
          );
        }
        await s[how]();
        await rejectsWith(
          store.commit(scope, { envelope: envelope(c, { savedAt: 6 }), basedOn: 5 }, c),
          'ERR_STORE_UNREACHABLE',
          /saving a turn on PostgreSQL 127\.0\.0\.1:\d+\/troupe .*nothing of it was acknowledged: retry once the server is back/,
        );
        await rejectsWith(store.loadState(scope, c), 'ERR_STORE_UNREACHABLE', /loading a state/);
        await rejectsWith(store.answerRequest(scope, 'q', { id: 'q', ok: true }, 1), 'ERR_STORE_UNREACHABLE');
        await s.startServer();
        const state = await store.loadState(scope, c);
        assert.deepEqual([state?.revision, state?.savedAt], [5, 5], 'every acknowledged save is there');
        assert.deepEqual(
          (await store.loadMessages(scope, c)).map((m) => m.content),
          ['m1', 'm2', 'm3', 'm4', 'm5'],
        );
        await store.commit(scope, { envelope: envelope(c, { savedAt: 6 }), basedOn: 5 }, c);
        assert.equal((await store.loadState(scope, c))?.revision, 6);
      } finally {
        await store.close();
      }
    });
  }

  it('a supervisor whose message runs into the outage: a typed failure, then it goes on once the server is back', async () => {
    const s = await server();
    const store = await openStore({ schema: freshSchema('supervised'), tenantKey });
    const echo = defineAgent({ name: 'echo', instructions: 'Echo.', model: ScriptedModel.answering('ok') });
    const supervisor = createSupervisor({ agents: [echo], persistence: store, pool: { threads: 1 } });
    try {
      const agent = await supervisor.startAgent(echo, { scope, agentId: 'echo-1' });
      assert.equal((await agent.send('before')).status, 'done');
      await s.crashServer();
      let code: string | undefined;
      try {
        const reply = await agent.send('during');
        code = reply.status === 'failed' ? (reply.error as { code?: string }).code : `reply ${reply.status}`;
      } catch (error) {
        code = isTroupeError(error) ? error.code : String(error);
      }
      assert.match(String(code), /^ERR_STORE_(UNREACHABLE|FENCED)$/, `the outage surfaced as ${code}`);
      await s.startServer();
      // Restored from the store as it was saved: the message before the outage is there.
      await supervisor.stopAgent('echo-1').catch(() => {});
      const again = await supervisor.startAgent(echo, { scope, agentId: 'echo-1' });
      const reply = await again.send('after');
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      const said = (await store.loadMessages(scope, { agentId: again.id, conversationId: 'echo-1' })).map(
        (m) => m.content,
      );
      assert.ok(said.includes('before') && said.includes('after'), said.join(' | '));
    } finally {
      await supervisor.close();
    }
  });
});
