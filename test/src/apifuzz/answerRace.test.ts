// Two answers with a scope to one stored question, in the same tick: the
// first wins, the second is refused as a second answer
// (ERR_REQUEST_ALREADY_ANSWERED) — not with whatever the other's restore of
// the conversation left in its way ("agent … is already started"), and the run
// resumes once.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { type LeadPlan, lead } from './agents.js';

const scope = { tenantId: 't1' };
const plan: LeadPlan = { n: 'p1', u: 1, items: [], own: 'ask' };

function settle(p: Promise<{ status: string }>): Promise<string> {
  return p.then(
    (r) => r.status,
    (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
  );
}

async function withStoredQuestion(
  run: (second: Supervisor, id: string) => Promise<void>,
  prepare: (second: Supervisor) => Promise<void> = async () => {},
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-apifuzz-'));
  const file = join(dir, 'race.sqlite');
  const open = () =>
    createSupervisor({ agents: [lead], pool: { threads: 1 }, persistence: sqlitePersistence({ file }) });
  try {
    const first = open();
    const agent = await first.startAgent(lead, { scope, agentId: 'a-9' });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'suspended');
    const id = reply.status === 'suspended' ? reply.request.id : '';
    await first.close();
    const second = open();
    try {
      await prepare(second);
      await run(second, id);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
    await withStoredQuestion(race);
  });

  it('the conversation started here, then stopped', async () => {
    await withStoredQuestion(race, async (second) => {
      const again = await second.startAgent(lead, { scope, agentId: 'a-9' });
      assert.equal(again.status, 'suspended');
      await second.stopAgent('a-9');
    });
  });
});
