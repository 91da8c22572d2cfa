// Found by memory.fuzz.test.ts: answer() accepted for a listed request, then
// stopAgent() in the same tick (before the store's compare-and-set returned):
// the answer rejects with ERR_UNKNOWN_REQUEST "no pending request", as if the
// id had never existed. The request was open when it was answered: the answer
// should win (the agent stops after), or be refused for what happened
// (ERR_AGENT_STOPPED) — not reported as an unknown request.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { type LeadPlan, lead } from '../fuzz/agents.js';
import { withStoredQuestion } from '../fuzz/harness.js';

describe('answer() then stopAgent() in the same tick', () => {
  it('the answer is not refused as an unknown request', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const agent = await supervisor.startAgent(lead, { scope: { tenantId: 't1' } });
      const plan: LeadPlan = { n: 'p1', u: 1, items: [], own: 'ask' };
      const reply = await agent.send(JSON.stringify(plan));
      assert.equal(reply.status, 'suspended');
      const id = reply.status === 'suspended' ? reply.request.id : '';
      assert.ok(supervisor.pendingRequests().some((p) => p.request.id === id));
      const answered = supervisor.answer(id, { ok: true, data: { n: 'p1' } }).then(
        (r) => r.status,
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      );
      const stopped = supervisor.stopAgent(agent.id);
      const result = await answered;
      await stopped;
      assert.ok(
        !result.startsWith('ERR_UNKNOWN_REQUEST'),
        `answer(${id}) to a request that was open and listed, taken before stopAgent(), was refused as unknown: ${result}`,
      );
    } finally {
      await supervisor.close({ timeoutMs: 1000 });
    }
  });
});

describe('answer({ scope }) then stopAgent() of a restored conversation, in the same tick', () => {
  // Found by sqlite.fuzz.test.ts (seed 1102878975): the answer saw the request open in the tree,
  // awaited the store, and by then stopAgent() had let the tree go of it: ERR_UNKNOWN_REQUEST
  // for a request the store still had open. The answer restores the conversation and resumes it.
  it('the answer restores the stopped conversation and resumes the run that asked', async () => {
    const scope = { tenantId: 't1' };
    await withStoredQuestion(scope, 'a-7', async (second, id) => {
      const again = await second.startAgent(lead, { scope, agentId: 'a-7' });
      assert.equal(again.status, 'suspended');
      const answering = second.answer(id, { ok: true, data: { n: 'p1' } }, { scope }).then(
        (r) => r.status,
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      );
      const stopped = second.stopAgent('a-7');
      const answered = await answering;
      await stopped;
      assert.equal(answered, 'done', `the answer to ${id}, open in the store, resumes its run`);
      assert.deepEqual((await second.listRequests(scope)).items, []);
    });
  });
});
