import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineAgent, isTroupeError } from '@troupe/core';
import { ScriptedModel } from '@troupe/core/testing';
import { createSupervisor, MemoryPersistence } from '@troupe/supervisor';
import { runPersistenceContract } from '@troupe/supervisor/testing';
import { ctx, envelope, request, scopeOf, tenantKey } from './records.js';

runPersistenceContract('MemoryPersistence', async (options) => ({
  store: new MemoryPersistence(options),
  cleanup: async () => {},
}));

const scope = scopeOf('t1');

describe('MemoryPersistence: bounded', () => {
  it('keeps at most maxConversations, dropping the least recently used first', async () => {
    const store = new MemoryPersistence({ maxConversations: 3 });
    for (const id of ['a', 'b', 'c']) await store.persistState(scope, envelope(ctx(id)), ctx(id));
    await store.loadState(scope, ctx('a')); // a is now the most recently used
    await store.persistState(scope, envelope(ctx('d')), ctx('d'));
    assert.equal(store.size, 3);
    assert.equal(await store.loadState(scope, ctx('b')), undefined);
    for (const id of ['a', 'c', 'd']) assert.equal((await store.loadState(scope, ctx(id)))?.conversationId, id);
  });

  it('keeps one order of recency across tenants: the same conversation id in two tenants is two conversations, each with its place', async () => {
    const store = new MemoryPersistence({ maxConversations: 3, tenantKey });
    const [t1, t2] = [scopeOf('t1'), scopeOf('t2')];
    await store.persistState(t1, envelope(ctx('a')), ctx('a'));
    await store.persistState(t2, envelope(ctx('a')), ctx('a'));
    await store.persistState(t1, envelope(ctx('b')), ctx('b'));
    await store.loadState(t1, ctx('a')); // t1's a is now the most recently used; t2's a the least
    await store.persistState(t2, envelope(ctx('c')), ctx('c'));
    assert.equal(store.size, 3);
    assert.equal(await store.loadState(t2, ctx('a')), undefined, "t2's a was the least recently used");
    assert.equal((await store.loadState(t1, ctx('a')))?.conversationId, 'a');
    assert.deepEqual(
      (await store.listConversations(t2)).items.map((c) => c.conversationId),
      ['c'],
    );
    assert.deepEqual((await store.listConversations(t1)).items.map((c) => c.conversationId).sort(), ['a', 'b']);
    // Dropping the last of a tenant's conversations, then saving one again, finds it again.
    assert.equal(await store.deleteConversation(t2, ctx('c')), true);
    assert.deepEqual((await store.listConversations(t2)).items, []);
    await store.persistState(t2, envelope(ctx('c')), ctx('c'));
    assert.equal((await store.loadState(t2, ctx('c')))?.conversationId, 'c');
  });

  it('never drops a conversation that waits on a person', async () => {
    const store = new MemoryPersistence({ maxConversations: 2 });
    await store.commit(
      scope,
      { envelope: envelope(ctx('waiting')), openedRequests: [request(ctx('waiting'), 'q1')] },
      ctx('waiting'),
    );
    for (const id of ['x', 'y', 'z']) await store.persistState(scope, envelope(ctx(id)), ctx(id));
    assert.equal((await store.getRequest(scope, 'q1'))?.status, 'open');
    assert.equal((await store.loadState(scope, ctx('waiting')))?.conversationId, 'waiting');
    assert.equal(await store.loadState(scope, ctx('y')), undefined);
  });

  it('refuses a new conversation with ERR_BACKPRESSURE when every kept one waits on a person', async () => {
    const store = new MemoryPersistence({ maxConversations: 2 });
    for (const id of ['p', 'q']) await store.openRequest(scope, request(ctx(id), `req-${id}`));
    await assert.rejects(
      store.persistState(scope, envelope(ctx('r')), ctx('r')),
      (e) => isTroupeError(e, 'ERR_BACKPRESSURE') && /maxConversations/.test((e as Error).message),
    );
    assert.equal(store.size, 2);
  });

  it('a state dropped for the bound is saved again by its agent, at the revision the agent counts from (not fenced)', async () => {
    const store = new MemoryPersistence({ maxConversations: 1 });
    const a = ctx('a');
    await store.commit(scope, { envelope: envelope(a), basedOn: 0 }, a);
    await store.commit(scope, { envelope: envelope(a), basedOn: 1 }, a);
    await store.persistState(scope, envelope(ctx('b')), ctx('b')); // a is dropped
    assert.equal(await store.loadState(scope, a), undefined);
    await store.commit(scope, { envelope: envelope(a), basedOn: 2 }, a);
    await store.commit(scope, { envelope: envelope(a), basedOn: 3 }, a);
    assert.equal((await store.loadState(scope, a))?.revision, 4);
  });

  it('a supervisor’s resident agent goes on after its conversation was dropped for the bound', async () => {
    const supervisor = createSupervisor({
      persistence: new MemoryPersistence({ maxConversations: 1 }),
      pool: { threads: 1 },
    });
    try {
      const echo = defineAgent({ name: 'echo', instructions: 'Echo.', model: ScriptedModel.answering('ok') });
      const first = await supervisor.startAgent(echo, { scope, agentId: 'echo-a' });
      const second = await supervisor.startAgent(echo, { scope, agentId: 'echo-b' });
      // Each agent's save drops the other's conversation; each goes on with two messages in a row.
      for (let i = 0; i < 3; i++) {
        for (const agent of [first, first, second, second]) {
          const reply = await agent.send('hi');
          assert.equal(reply.status, 'done', JSON.stringify(reply));
        }
      }
    } finally {
      await supervisor.close();
    }
  });

  it('release drops a stopped agent’s conversation at once', async () => {
    const store = new MemoryPersistence();
    await store.commit(scope, { envelope: envelope(ctx('a')), messages: [{ role: 'user', content: 'x' }] }, ctx('a'));
    assert.equal(await store.release(scope, ctx('a')), true);
    assert.equal(store.size, 0);
    assert.equal(await store.loadState(scope, ctx('a')), undefined);
  });

  it('stays at its bound while 20,000 conversations pass through', async () => {
    const store = new MemoryPersistence({ maxConversations: 100 });
    for (let i = 0; i < 20_000; i++) {
      const c = ctx(`c${i}`);
      await store.commit(scope, { envelope: envelope(c), messages: [{ role: 'user', content: 'hi' }] }, c);
      if (i % 2 === 0) await store.release(scope, c);
    }
    assert.ok(store.size <= 100, `size ${store.size}`);
  });

  it('refuses a maxConversations that is not an integer ≥ 1', () => {
    assert.throws(() => new MemoryPersistence({ maxConversations: 0 }), /maxConversations/);
  });
});
