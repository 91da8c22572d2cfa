// Hostile-checker finding: under the default store (MemoryPersistence), a parent's tool
// that asks with `data` holding a Date (ToolResult.pending accepts it) suspends the
// message — the reply is `suspended`, pendingRequests() lists the request — but saving
// it failed (a `persistence.failed` event, ERR_NOT_JSON), the request was withdrawn, and
// answer() refuses it with ERR_UNKNOWN_REQUEST: the conversation stays `suspended`
// forever, with a question nobody can answer (every later send queues behind it).
// DESIGN §6: answer(requestId) resumes the run; every bad input gets a typed error.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createSupervisor, MemoryPersistence, type PersistenceContext, type TurnBatch } from '@troupe/supervisor';
import { office } from '../fixtures/agents/durable.js';
import { dateAsker, dateAskerLead } from '../fixtures/agents/edges.js';

for (const [where, agentDef] of [
  ['asked by a parent agent', dateAsker],
  ['asked by its subagent (depth 2)', dateAskerLead],
] as const) {
  it(`a question the host is shown can be answered (or is refused where it is asked): a Date in request.data, ${where}`, async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const agent = await supervisor.startAgent(agentDef, { scope: {} });
      const reply = await agent.send('schedule it');
      if (reply.status === 'suspended') {
        // Shown to the host as open: it must be answerable.
        assert.deepEqual(
          supervisor.pendingRequests().map((p) => p.request.id),
          [reply.request.id],
        );
        const answered = await supervisor.answer(reply.request.id, { ok: true });
        assert.equal(answered.status, 'done');
      } else {
        // Or refused where it was asked: an error result the model saw, the message went on.
        assert.equal(reply.status, 'done');
        assert.match(reply.text, /request\.data\.at is a Date/);
      }
      assert.equal(agent.status, 'idle');
    } finally {
      await supervisor.destroy();
    }
  });
}

it('with persistence: null the same question is refused the same way (it does not depend on the store)', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  try {
    const agent = await supervisor.startAgent(dateAsker, { scope: {} });
    const reply = await agent.send('schedule it');
    assert.equal(reply.status, 'done');
    assert.match(reply.status === 'done' ? reply.text : '', /request\.data\.at is a Date/);
    assert.equal(agent.status, 'idle');
  } finally {
    await supervisor.destroy();
  }
});

// A store that cannot save a question (a full disk, say): the question stays answerable in
// this process — the store cannot take an answer to what it never had.
class NoQuestions extends MemoryPersistence {
  override async commit(scope: unknown, batch: TurnBatch, context: PersistenceContext): Promise<void> {
    if ((batch.openedRequests?.length ?? 0) > 0) throw new Error('disk full');
    return super.commit(scope, batch, context);
  }
}

it('a question whose opening failed to save is answered in this process (persistence.failed reported)', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: new NoQuestions() });
  try {
    const failed = new Promise<unknown>((resolve) => supervisor.once('persistence.failed', resolve));
    const agent = await supervisor.startAgent(office, { scope: { org: 'acme' }, agentId: 'office-nq' });
    const reply = await agent.send('release');
    assert.equal(reply.status, 'suspended');
    await failed;
    const done = await supervisor.answer(reply.status === 'suspended' ? reply.request.id : '', {
      ok: true,
      data: { env: 'eu' },
    });
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.equal(agent.status, 'idle');
  } finally {
    await supervisor.destroy();
  }
});
