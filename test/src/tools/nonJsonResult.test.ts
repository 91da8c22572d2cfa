// Hostile-checker finding: a tool result that is cloneable but not JSON (a Date)
// passes the result check, then fails the whole message when the turn is saved
// (ERR_NOT_JSON from the default MemoryPersistence) — after the tool ran and the
// model answered; the transcript is rolled back. Without a store the same agent
// answers. DESIGN/STYLE: every bad input gets a clear typed error, no data is lost.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { stamper } from '../fixtures/agents/edges.js';

it('a tool returning a Date does not fail the message under the default store (the model saw its result and answered)', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 } });
  try {
    const agent = await supervisor.startAgent(stamper, { scope: {} });
    const reply = await agent.send('what time is it?');
    assert.equal(
      reply.status,
      'done',
      reply.status === 'failed' ? `${(reply.error as { code?: string }).code}: ${reply.error.message}` : '',
    );
    assert.equal(reply.status === 'done' && reply.text, 'it is time');
    // The turn is kept: user, assistant (the call), tool result, assistant (the answer) after the system prompt.
    assert.equal(agent.snapshot().messages.length, 5);
    // The transcript keeps what the model is shown of the Date: its JSON form.
    const tool = agent.snapshot().messages.find((m) => m.role === 'tool');
    assert.deepEqual(tool?.content, { when: '1970-01-01T00:00:00.000Z' });
  } finally {
    await supervisor.destroy();
  }
});

it('control: the same agent answers with persistence: null', async () => {
  const supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  try {
    const agent = await supervisor.startAgent(stamper, { scope: {} });
    const reply = await agent.send('what time is it?');
    assert.equal(reply.status, 'done');
    assert.equal(agent.snapshot().messages.length, 5);
  } finally {
    await supervisor.destroy();
  }
});
