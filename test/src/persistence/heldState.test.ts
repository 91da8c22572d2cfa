// Issue 31, item 13: the memory store holds an idle envelope whose state is frozen (what a parent
// agent keeps between messages) as itself — no JSON of it — and the messages to show as where they
// are in that state's list while they are a run of it. What it hands back is still a copy, every
// read gives what was saved, and a state it cannot hold as itself is held as JSON as before.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentId, LoopState, Message } from '@troupe/core';
import { type AgentStateEnvelope, MemoryPersistence } from '@troupe/supervisor';
import { ctx, envelope, scopeOf, tenantKey } from './records.js';

const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
};
const msg = (role: 'system' | 'user' | 'assistant', content: string): Message =>
  Object.freeze({ role, content }) as Message;

// A frozen state, as a parent agent keeps it: frozen messages in a frozen list, frozen values.
function frozenState(agentId: string, messages: readonly Message[], turns: number): LoopState {
  return deepFreeze({
    agentId: agentId as AgentId,
    messages: Object.freeze([...messages]),
    todos: [],
    metadata: { note: 'kept', nested: { list: [1, 2] } },
    updates: [],
    events: [],
    turns,
    usage: { inputTokens: 10 * turns, outputTokens: 5 * turns, cachedInputTokens: undefined },
    failedTurns: 0,
    messageStartTurn: undefined,
    pending: undefined,
  });
}

describe('the memory store and a frozen state', () => {
  it('holds it as itself, hands back copies, and shows the messages it was given', async () => {
    const store = new MemoryPersistence({ tenantKey });
    const scope = scopeOf('t1');
    const c = ctx('conv-1');
    const system = msg('system', 'be brief');
    const u0 = msg('user', 'hello');
    const a0 = msg('assistant', 'hi');
    const s1 = frozenState(c.agentId, [system, u0, a0], 1);
    await store.commit(scope, { envelope: envelope(c, { state: s1, savedAt: 2_000 }), messages: [u0, a0] }, c);

    const loaded = (await store.loadState(scope, c)) as AgentStateEnvelope & { revision: number };
    assert.equal(loaded.revision, 1);
    assert.deepEqual({ ...loaded.state, messages: [...loaded.state.messages] }, JSON.parse(JSON.stringify(s1)));
    assert.notEqual(loaded.state, s1, 'a copy of the state');
    assert.ok(!Object.hasOwn(loaded.state.usage, 'cachedInputTokens'), 'as JSON holds it: undefined left out');
    assert.equal(loaded.state.messages[1], u0, 'a sealed message is handed back as itself');
    (loaded.state.metadata as { note: string }).note = 'changed by the caller';
    const again = await store.loadState(scope, c);
    assert.ok(again !== undefined);
    assert.equal((again.state.metadata as { note: string }).note, 'kept', 'nothing the caller did reached the store');
    assert.deepEqual(await store.loadMessages(scope, c), [u0, a0]);
    const page = await store.listConversations(scope);
    assert.deepEqual(page.items, [
      {
        conversationId: 'conv-1',
        agentId: c.agentId,
        agentName: 'triage',
        status: 'idle',
        updatedAt: 2_000,
        openRequests: 0,
      },
    ]);

    // The next message: its input and answer are shown after the first ones.
    const u1 = msg('user', 'again');
    const a1 = msg('assistant', 'sure');
    const s2 = frozenState(c.agentId, [system, u0, a0, u1, a1], 2);
    await store.commit(
      scope,
      { envelope: envelope(c, { state: s2, savedAt: 3_000 }), basedOn: 1, messages: [u1, a1] },
      c,
    );
    assert.deepEqual(await store.loadMessages(scope, c), [u0, a0, u1, a1]);

    // A message saved to show that is not the state's: shown after them, the state unchanged.
    const note = { role: 'assistant', content: 'a note' } as Message;
    await store.saveMessage(scope, note, c);
    assert.deepEqual(await store.loadMessages(scope, c), [u0, a0, u1, a1, note]);

    // Back to an earlier state (a failed message falls back): what was shown stays shown.
    await store.commit(scope, { envelope: envelope(c, { state: s1, savedAt: 4_000 }), basedOn: 2 }, c);
    assert.deepEqual(await store.loadMessages(scope, c), [u0, a0, u1, a1, note]);
    assert.equal((await store.loadState(scope, c))?.state.messages.length, 3);
  });

  it('shows the messages a later state no longer holds where they were', async () => {
    const store = new MemoryPersistence({ tenantKey });
    const scope = scopeOf('t1');
    const c = ctx('conv-2');
    const system = msg('system', 'be brief');
    const u0 = msg('user', 'one');
    const a0 = msg('assistant', 'two');
    await store.commit(
      scope,
      { envelope: envelope(c, { state: frozenState(c.agentId, [system, u0, a0], 1) }), messages: [u0, a0] },
      c,
    );
    // A state whose list was compacted (its first messages replaced by a summary).
    const summary = msg('system', 'summary: one, two');
    const u1 = msg('user', 'three');
    await store.commit(
      scope,
      { envelope: envelope(c, { state: frozenState(c.agentId, [summary, u1], 2) }), basedOn: 1, messages: [u1] },
      c,
    );
    assert.deepEqual(await store.loadMessages(scope, c), [u0, a0, u1]);
  });

  it('holds a state that can change, or an envelope with a question, as JSON: later changes do not reach it', async () => {
    const store = new MemoryPersistence({ tenantKey });
    const scope = scopeOf('t1');
    const c = ctx('conv-3');
    const state = frozenState(c.agentId, [msg('system', 'be brief')], 1);
    const open = { ...state, metadata: { note: 'open' } }; // not frozen
    const e = envelope(c, { state: Object.freeze(open) });
    await store.commit(scope, { envelope: e }, c);
    (open.metadata as { note: string }).note = 'changed after the save';
    const held = await store.loadState(scope, c);
    assert.ok(held !== undefined);
    assert.equal((held.state.metadata as { note: string }).note, 'open');
    const suspended = envelope(c, { state, status: 'suspended', waitingOn: 'q1', runId: 'r1' });
    await store.commit(scope, { envelope: suspended, basedOn: 1 }, c);
    const loaded = await store.loadState(scope, c);
    assert.equal(loaded?.status, 'suspended');
    assert.equal(loaded?.waitingOn, 'q1');
  });
});
