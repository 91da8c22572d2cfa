// Issue 31, item 8: a conversation id holding a lone surrogate went into SQLite and came back as
// U+FFFD (another id, naming no messages, not deletable). Through a supervisor on a real SQLite
// file and real workers: such an id or tenant key is refused before anything is saved, naming the
// position; a well-formed id with astral characters lives, is listed, restored and deleted as given.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { echo } from '../fixtures/agents/basic.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function open(tenantKey: (scope: unknown) => string = (s) => (s as { org: string }).org) {
  const d = tempDir('ids');
  dirs.push(d);
  const file = join(d.dir, 'troupe.sqlite');
  const store = sqlitePersistence({ file, tenantKey });
  const supervisor = createSupervisor({ agents: [echo], persistence: store, pool: { threads: 1 } });
  return { store, supervisor, file };
}

const refused = (pattern: RegExp) => (error: unknown) =>
  isTroupeError(error, 'ERR_INVALID_ARGUMENT') && pattern.test((error as Error).message);

describe('ids and tenant keys through a supervisor on SQLite', () => {
  it('a conversation id with a lone surrogate is refused at startAgent, naming it and its index; nothing is saved', async () => {
    const { store, supervisor } = open();
    try {
      await assert.rejects(
        supervisor.startAgent(echo, { scope: { org: 'acme' }, agentId: 'a1', conversationId: 'conv-\udc00' }),
        refused(/conversationId holds a lone surrogate \(\\udc00\) at index 5/),
      );
      assert.deepEqual((await store.listConversations({ org: 'acme' })).items, []);
      // The id is free again: nothing was half-started.
      const agent = await supervisor.startAgent(echo, { scope: { org: 'acme' }, agentId: 'a1', conversationId: 'c' });
      assert.equal((await agent.send('hi')).status, 'done');
    } finally {
      await supervisor.close();
    }
  });

  it('a tenant key with a lone surrogate is refused, naming the hook and the index', async () => {
    const { store, supervisor } = open((s) => `org-${(s as { org: string }).org}`);
    try {
      await assert.rejects(
        supervisor.startAgent(echo, { scope: { org: '\ud800' }, agentId: 'a1', conversationId: 'c1' }),
        refused(/tenant key tenantKey\(scope\) returned holds a lone surrogate \(\\ud800\) at index 4/),
      );
      assert.deepEqual((await store.listConversations({ org: 'x' })).items, []);
    } finally {
      await supervisor.close();
    }
  });

  it('a conversation id and tenant key with astral characters round-trip exactly: run, listed, restored, deleted', async () => {
    const { store, supervisor } = open();
    const scope = { org: 'acme-🦜' };
    const conversationId = 'conv-😀-\u{10FFFF}';
    try {
      const agent = await supervisor.startAgent(echo, { scope, agentId: 'a1', conversationId });
      assert.equal((await agent.send('hello')).status, 'done');
      await supervisor.stopAgent('a1');
      const listed = (await store.listConversations(scope)).items.map((c) => c.conversationId);
      assert.deepEqual(listed, [conversationId]);
      const again = await supervisor.startAgent(echo, { scope, agentId: 'a1', conversationId });
      const messages = await store.loadMessages(scope, { agentId: 'a1' as never, conversationId });
      assert.deepEqual(
        messages.map((m) => m.role),
        ['user', 'assistant'],
        'the restored conversation names its messages',
      );
      assert.equal(again.status, 'idle');
      await supervisor.stopAgent('a1');
      assert.equal(await store.deleteConversation(scope, { agentId: 'a1' as never, conversationId }), true);
      assert.deepEqual((await store.listConversations(scope)).items, []);
    } finally {
      await supervisor.close();
    }
  });
});
