// A message restored suspended goes back, when it fails, to the conversation as it was before
// it, and its reply counts its tokens from its start — as it does without a restart. The
// suspended envelope's state is the message's run, mid-way; a restore took it for the agent's
// own state too, so a failure after a restart kept the failed message's input and its
// unanswered turn (the next message ran that turn again and asked the question anew), and the
// reply's usage counted from the restore (0 tokens where the message had spent 100).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { AgentId } from '@troupe/core';
import { sqlitePersistence } from '@troupe/sqlite';
import {
  type AgentReply,
  type AgentSnapshot,
  createSupervisor,
  MemoryPersistence,
  type Supervisor,
} from '@troupe/supervisor';
import { askThenFail } from '../fixtures/agents/askThenFail.js';
import { tempDir } from './sqliteFiles.js';

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});
const tenantKey = (s: unknown) => (s as { org: string }).org;
const scope = { org: 'acme' };

interface Seen {
  readonly answered: AgentReply;
  readonly afterAnswer: AgentSnapshot | undefined;
  readonly next: AgentReply | undefined;
  readonly end: AgentSnapshot | undefined;
}

/** Send "go", (restart,) answer `data`, then send "hi": what each step left. */
async function conversation(file: string, restart: boolean, data: string): Promise<Seen> {
  const open = (): Supervisor =>
    createSupervisor({
      agents: [askThenFail],
      persistence: sqlitePersistence({ file, tenantKey }),
      pool: { threads: 1 },
    });
  let supervisor = open();
  try {
    const agent = await supervisor.startAgent(askThenFail, { scope, agentId: 'acme.ops' });
    const asked = await agent.send('go');
    assert.equal(asked.status, 'suspended', JSON.stringify(asked));
    const id = asked.status === 'suspended' ? asked.request.id : '';
    if (restart) {
      await supervisor.close();
      supervisor = open();
      assert.equal((await supervisor.startAgent(askThenFail, { scope, agentId: 'acme.ops' })).status, 'suspended');
    }
    const answered = await supervisor.answer(id, { ok: true, data }, { scope });
    const handle = supervisor.agent('acme.ops');
    const afterAnswer = handle?.snapshot();
    const next = await handle?.send('hi');
    return { answered, afterAnswer, next, end: handle?.snapshot() };
  } finally {
    await supervisor.close();
  }
}

describe('a suspended message restored from the store', () => {
  it('fails back to the conversation before it, as without a restart; its reply counts the tokens it spent', async () => {
    const d = tempDir('restore-checkpoint');
    dirs.push(d);
    const live = await conversation(join(d.dir, 'live.sqlite'), false, 'boom');
    const restarted = await conversation(join(d.dir, 'restarted.sqlite'), true, 'boom');
    assert.equal(live.answered.status, 'failed');
    assert.deepEqual(live.answered.usage, { inputTokens: 100, outputTokens: 1 });
    assert.deepEqual(restarted.answered, live.answered, 'the failed reply');
    // Back to the conversation before "go", with the tokens "go" spent.
    assert.deepEqual(
      restarted.afterAnswer?.messages.map((m) => m.role),
      ['system'],
      JSON.stringify(restarted.afterAnswer?.messages),
    );
    assert.equal(restarted.afterAnswer?.turns, 0);
    assert.deepEqual(restarted.afterAnswer, live.afterAnswer);
    // The next message is answered, not the failed one's question asked again.
    assert.equal(restarted.next?.status === 'done' && restarted.next.text, 'hello', JSON.stringify(restarted.next));
    assert.deepEqual(restarted.end, live.end);
    assert.deepEqual(restarted.end?.usage, { inputTokens: 101, outputTokens: 2 });
  });

  it('done after a restart: its reply counts the whole message, the turns before the restart too', async () => {
    const d = tempDir('restore-checkpoint');
    dirs.push(d);
    const live = await conversation(join(d.dir, 'live.sqlite'), false, 'prod');
    const restarted = await conversation(join(d.dir, 'restarted.sqlite'), true, 'prod');
    assert.equal(live.answered.status === 'done' && live.answered.text, 'deployed');
    assert.deepEqual(live.answered.usage, { inputTokens: 110, outputTokens: 2 });
    assert.deepEqual(restarted.answered, live.answered);
    assert.deepEqual(restarted.end, live.end);
  });

  it('a malformed record of the conversation before the message is refused with ERR_STORE_CORRUPT', async () => {
    const store = new MemoryPersistence({ tenantKey });
    const supervisor = createSupervisor({ agents: [askThenFail], persistence: store, pool: { threads: 1 } });
    try {
      const agent = await supervisor.startAgent(askThenFail, { scope, agentId: 'acme.bad' });
      assert.equal((await agent.send('go')).status, 'suspended');
      const context = { agentId: 'acme.bad' as AgentId, conversationId: agent.conversationId };
      const saved = await store.loadState(scope, context);
      assert.ok(saved?.before !== undefined, 'a suspended envelope keeps the conversation before its message');
      assert.equal(saved.before.messageCount, 1);
      await supervisor.stopAgent('acme.bad');
      await store.persistState(scope, { ...saved, before: { messageCount: 99, state: saved.before.state } }, context);
      await assert.rejects(supervisor.startAgent(askThenFail, { scope, agentId: 'acme.bad' }), {
        code: 'ERR_STORE_CORRUPT',
        message: /malformed "before"/,
      });
    } finally {
      await supervisor.close();
    }
  });
});
