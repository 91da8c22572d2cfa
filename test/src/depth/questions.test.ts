// Questions opened at depth 3 in several branches at once: answered out of
// order, declined, expired, and one answered after its branch was cancelled.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { type Plan, tree0 } from '../fixtures/agents/tree.js';
import { checkRunTree } from '../supervisor/checkRunTree.js';
import { EventLog } from '../supervisor/EventLog.js';

let supervisor: Supervisor;
let log: EventLog;

before(async () => {
  supervisor = createSupervisor({ persistence: null, pool: { threads: 4 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});
after(() => supervisor.close({ timeoutMs: 2000 }));

const branch = (label: string, leaf: Plan): Plan => ({
  kind: 'delegate',
  label,
  u: 1,
  children: [{ kind: 'delegate', label: `${label}x`, u: 1, children: [leaf] }],
});

describe('questions at depth 3', () => {
  it('four branches ask at once; answered out of order, one declined, one expired, one after its branch was cancelled', async () => {
    const expiresAt = Date.now() - 1; // already past: any answer is late
    const plan: Plan = {
      kind: 'delegate',
      label: 'root',
      u: 1,
      children: [
        branch('A', { kind: 'ask', label: 'qa', u: 1 }),
        branch('B', { kind: 'ask', label: 'qb', u: 1 }),
        branch('C', { kind: 'ask', label: 'qc', u: 1, expiresAt }),
        branch('D', { kind: 'ask', label: 'qd', u: 1 }),
      ],
    };
    const agent = await supervisor.startAgent(tree0, { scope: {} });
    const id = agent.id;
    const from = log.entries.length;
    const first = await agent.send(JSON.stringify(plan));
    assert.equal(first.status, 'suspended');
    const open = supervisor.pendingRequests();
    assert.equal(open.length, 4, JSON.stringify(open));
    const byPrompt = new Map(open.map((p) => [p.request.prompt, p]));
    const q = (l: string) => byPrompt.get(l)?.request.id as string;
    // Every question's path goes down to a depth-3 run.
    for (const p of open) assert.equal(p.path.length, 4, JSON.stringify(p.path));
    // D's branch is cancelled while suspended.
    assert.equal(supervisor.cancel(`${id}-sub-4`, 'user'), true, 'a suspended branch can be cancelled');
    await log.whenNamed('request.withdrawn', (e) => e.requestId === q('qd'));
    await assert.rejects(supervisor.answer(q('qd'), { ok: true, data: 'late' }), (e: Error & { code?: string }) => {
      assert.equal(typeof e.code, 'string', String(e));
      return true;
    });
    // Out of order: B, then C (expired), then A declined.
    const r1 = await supervisor.answer(q('qb'), { ok: true, data: 'bee' });
    assert.equal(r1.status, 'suspended', 'still waiting for A and C');
    const r2 = await supervisor.answer(q('qc'), { ok: true, data: 'sea' });
    assert.equal(r2.status, 'suspended', 'still waiting for A');
    const r3 = await supervisor.answer(q('qa'), { ok: false, reason: 'no' });
    assert.equal(r3.status, 'done', JSON.stringify(r3));
    const root = JSON.parse(r3.text) as { results: string[] };
    const leafOf = (i: number) => {
      const b = JSON.parse(String(root.results[i])) as { results: string[] };
      const bx = JSON.parse(String(b.results[0])) as { results: string[] };
      return JSON.parse(String(bx.results[0])) as { label: string; results: unknown[] };
    };
    assert.deepEqual(leafOf(1).results, [{ answered: 'bee' }], 'B got its answer');
    assert.equal(
      (leafOf(2).results[0] as { error?: unknown }).error !== undefined,
      true,
      `C expired: ${JSON.stringify(leafOf(2))}`,
    );
    assert.equal(
      (leafOf(0).results[0] as { error?: unknown }).error !== undefined,
      true,
      `A declined: ${JSON.stringify(leafOf(0))}`,
    );
    assert.match(
      JSON.stringify(root.results[3]),
      /ERR_|cancel/i,
      `D's task call is a cancelled error: ${JSON.stringify(root.results[3])}`,
    );
    assert.equal(supervisor.pendingRequests().length, 0);
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);
    const problems = checkRunTree(log.entries.slice(from), { final: true });
    assert.deepEqual(problems, [], `${problems.join('\n')}\n${log.dump(from)}`);
    // usage: every model call of the tree reports u=1 in; totals are consistent.
    const stops = log.entries
      .slice(from)
      .filter((e) => e.name === 'model.stop' && String(e.payload.agentId).startsWith(id));
    assert.equal(
      r3.totalUsage.inputTokens,
      stops.length,
      `${JSON.stringify(first.totalUsage)} ${JSON.stringify(r3.totalUsage)} vs ${stops.length} model calls`,
    );
  });

  it('answers to three depth-3 questions at once (same tick), and a duplicate answer at once', async () => {
    const plan: Plan = {
      kind: 'delegate',
      label: 'cc',
      u: 1,
      children: [
        branch('P', { kind: 'ask', label: 'qp', u: 1 }),
        branch('Q', { kind: 'ask', label: 'qq', u: 1 }),
        branch('R', { kind: 'ask', label: 'qr', u: 1 }),
      ],
    };
    const agent = await supervisor.startAgent(tree0, { scope: {} });
    const from = log.entries.length;
    const first = await agent.send(JSON.stringify(plan));
    assert.equal(first.status, 'suspended');
    const open = supervisor.pendingRequests();
    assert.equal(open.length, 3);
    const ids = open.map((p) => p.request.id);
    const settled = await Promise.allSettled([
      supervisor.answer(ids[0] as string, { ok: true, data: 'p' }),
      supervisor.answer(ids[1] as string, { ok: true, data: 'q' }),
      supervisor.answer(ids[2] as string, { ok: true, data: 'r' }),
      supervisor.answer(ids[2] as string, { ok: true, data: 'r-again' }),
    ]);
    const statuses = settled.map((s) =>
      s.status === 'fulfilled' ? s.value.status : `rejected ${(s.reason as { code?: string }).code}`,
    );
    assert.equal(statuses.filter((s) => s.startsWith('rejected')).length, 1, statuses.join(', '));
    assert.ok(statuses.slice(0, 3).includes('done'), statuses.join(', '));
    const done = settled.find((s) => s.status === 'fulfilled' && s.value.status === 'done') as PromiseFulfilledResult<{
      status: 'done';
      text: string;
    }>;
    const text = done.value.text.replace(/\\/g, '');
    for (const d of ['p', 'q', 'r']) assert.ok(text.includes(`"answered":"${d}"`), `${d} in ${text}`);
    assert.ok(!text.includes('r-again'));
    assert.equal(supervisor.pendingRequests().length, 0);
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(agent.status, 'idle');
    const problems = checkRunTree(log.entries.slice(from), { final: true });
    assert.deepEqual(problems, [], `${problems.join('\n')}\n${log.dump(from)}`);
    // The parent ran its final turn once.
    const rootDone = log.entries.slice(from).filter((e) => e.name === 'agent.done' && e.payload.agentId === agent.id);
    assert.equal(rootDone.length, 1);
  });
});
