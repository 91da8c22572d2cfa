// Hostile-checker finding: under the default store (MemoryPersistence), a parent's tool
// that asks with `data` holding a Date (ToolResult.pending accepts it) suspends the
// message — the reply is `suspended`, pendingRequests() lists the request — but saving
// it failed (a `persistence.failed` event, ERR_NOT_JSON), the request was withdrawn, and
// answer() refuses it with ERR_UNKNOWN_REQUEST: the conversation stays `suspended`
// forever, with a question nobody can answer (every later send queues behind it).
// DESIGN §6: answer(requestId) resumes the run; every bad input gets a typed error.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { dateAsker, dateAskerLead } from './agents.js';

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
      }
      assert.equal(agent.status, 'idle');
    } finally {
      await supervisor.destroy();
    }
  });
}

it('control: with persistence: null the same question is answered', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  try {
    const agent = await supervisor.startAgent(dateAsker, { scope: {} });
    const reply = await agent.send('schedule it');
    assert.equal(reply.status, 'suspended');
    const answered = await supervisor.answer(reply.status === 'suspended' ? reply.request.id : '', { ok: true });
    assert.equal(answered.status, 'done');
    assert.equal(agent.status, 'idle');
  } finally {
    await supervisor.destroy();
  }
});
