// Two answers with a scope to one stored question, in the same tick: the
// first wins, the second is refused as a second answer
// (ERR_REQUEST_ALREADY_ANSWERED) — not with whatever the other's restore of
// the conversation left in its way ("agent … is already started"), and the run
// resumes once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Supervisor } from '@troupe/supervisor';
import { lead } from '../fuzz/agents.js';
import { withStoredQuestion } from '../fuzz/harness.js';

const scope = { tenantId: 't1' };

function settle(p: Promise<{ status: string }>): Promise<string> {
  return p.then(
    (r) => r.status,
    (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
  );
}

async function race(second: Supervisor, id: string): Promise<void> {
  let resumed = 0;
  second.on('agent.done', () => resumed++);
  const results = await Promise.all([
    settle(second.answer(id, { ok: true, data: { n: 'p1' } }, { scope })),
    settle(second.answer(id, { ok: true, data: { n: 'p1' } }, { scope })),
  ]);
  assert.equal(results.filter((r) => r === 'done').length, 1, `one answer wins: ${results.join(' | ')}`);
  const loser = results.find((r) => r !== 'done') ?? '';
  assert.ok(
    loser.startsWith('ERR_REQUEST_ALREADY_ANSWERED'),
    `the second answer is refused as a second answer: ${loser}`,
  );
  assert.equal(resumed, 1, 'the run resumed once');
  assert.deepEqual((await second.listRequests(scope)).items, []);
}

describe('two answers with a scope to one stored question, in the same tick', () => {
  it('after a restart, the conversation not started here', async () => {
    await withStoredQuestion(scope, 'a-9', race);
  });

  it('the conversation started here, then stopped', async () => {
    await withStoredQuestion(scope, 'a-9', race, async (second) => {
      const again = await second.startAgent(lead, { scope, agentId: 'a-9' });
      assert.equal(again.status, 'suspended');
      await second.stopAgent('a-9');
    });
  });
});
