// Deadlines at depth: a run deadline shorter than its children's, the
// supervisor's subagentTimeoutMs on a middle run: who is reported timed out.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { type Plan, tree0 } from '../fixtures/agents/tree.js';
import { checkRunTree } from '../supervisor/checkRunTree.js';
import { EventLog, type Logged } from '../supervisor/EventLog.js';

let supervisor: Supervisor;
let log: EventLog;

before(async () => {
  supervisor = createSupervisor({ persistence: null, subagentTimeoutMs: 20_000, pool: { threads: 6, graceMs: 300 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});
after(() => supervisor.close({ timeoutMs: 2000 }));

/** Input tokens of every model call logged (model.stop), at any depth. */
function inputTokensSpent(entries: readonly Logged[]): number {
  let total = 0;
  for (const e of entries) if (e.name === 'model.stop') total += e.payload.usage?.inputTokens ?? 0;
  return total;
}

const spinTree: Plan = {
  kind: 'delegate',
  label: 'top',
  u: 5,
  children: [
    { kind: 'delegate', label: 'm', u: 3, children: [{ kind: 'spin', label: 'leaf', u: 2, poll: false }] },
    { kind: 'answer', label: 'quick', u: 7 },
  ],
};

describe('deadlines at depth', () => {
  it('a spawn deadline (200 ms) shorter than its children’s (20 s): the spawn is the one timed out', async () => {
    const from = log.entries.length;
    const started = performance.now();
    const outcome = await supervisor.spawn(tree0, { input: JSON.stringify(spinTree), scope: {}, timeoutMs: 200 });
    // Not before its time (a bound that holds on any machine; the millisecond clock may round down).
    assert.ok(performance.now() - started >= 199, `ended ${performance.now() - started} ms after the spawn`);
    const mine = log.entries.slice(from);
    const ends = mine
      .filter((e) => /^(subagent|agent)\.(cancelled|done|failed|crashed)$/.test(e.name))
      .map((e) =>
        `${e.name} ${String(e.payload.agentId).replace(/^.*?(-sub|$)/, '$1')} ${e.payload.reason ?? ''}`.trim(),
      );
    console.log(ends.join('\n'));
    assert.equal(outcome.status, 'cancelled', JSON.stringify(outcome));
    assert.equal(outcome.status === 'cancelled' && outcome.reason, 'deadline');
    // Tokens: top 1 call (5) + m 1 call (3) + leaf 1 call (2) + quick 1 call (7) = 17 when every
    // call is made before the deadline; on a machine too busy for that in 200 ms, the calls that
    // were made: the tree's total is what its model calls spent, whichever of them ran.
    const spent = inputTokensSpent(mine);
    assert.ok(spent >= 5 && spent <= 17, `spent ${spent}: the top's call and at most one of each child's`);
    assert.equal(outcome.totalUsage.inputTokens, spent, JSON.stringify(outcome.totalUsage));
    assert.equal(outcome.usage.inputTokens, 5);
    const problems = checkRunTree(mine, { final: true });
    assert.deepEqual(problems, [], problems.join('\n'));
  });

  it('subagentTimeoutMs (200 ms) on a parent message’s tree: the child is timed out, the parent’s task call sees a typed error, the tree goes on', async () => {
    const short = createSupervisor({ persistence: null, subagentTimeoutMs: 200, pool: { threads: 4, graceMs: 300 } });
    const slog = new EventLog(short);
    try {
      await short.ready();
      const agent = await short.startAgent(tree0, { scope: {} });
      const reply = await agent.send(JSON.stringify(spinTree));
      const ends = slog.entries
        .filter((e) => /^(subagent|agent)\.(cancelled|done|failed|crashed)$/.test(e.name))
        .map((e) =>
          `${e.name} ${String(e.payload.agentId).replace(/^.*?(-sub|$)/, '$1')} ${e.payload.reason ?? ''}`.trim(),
        );
      console.log(ends.join('\n'));
      assert.equal(reply.status, 'done', JSON.stringify(reply));
      const answer = JSON.parse(reply.text) as { results: unknown[] };
      console.log(JSON.stringify(answer));
      assert.match(JSON.stringify(answer.results[0]), /ERR_/, 'a typed error for the timed-out child');
      const m = slog.entries.find((e) => e.name === 'subagent.cancelled' && e.payload.agentId === `${agent.id}-sub-1`);
      assert.equal(m?.payload.reason, 'deadline', 'the child whose deadline passed is the one timed out');
      // 5 + 3 + 2 + 7 + 5 when the children call their models within their 200 ms (on a machine too
      // busy for that, without them): what the tree's model calls spent, the parent's two included.
      const spent = inputTokensSpent(slog.entries);
      assert.ok(
        spent >= 5 + 5 && spent <= 22,
        `spent ${spent}: the parent's two calls and at most one of each child's`,
      );
      assert.equal(reply.totalUsage.inputTokens, spent, JSON.stringify(reply.totalUsage));
      const problems = checkRunTree(slog.entries, { final: true });
      assert.deepEqual(problems, [], problems.join('\n'));
    } finally {
      await short.close({ timeoutMs: 1000 });
    }
  });
});
