// Cancel at every depth of an openaiModel tree with fan-out: every descendant
// stops before the reply, no event of a descendant comes after it, and the
// tokens every run spent before the cancel are counted.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Agent } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { checkRunTree } from '../supervisor/checkRunTree.js';
import { EventLog } from '../supervisor/EventLog.js';
import { type Plan, PlanServer } from './planServer.js';

let server: PlanServer;
let d0: Agent;
let supervisor: Supervisor;
let log: EventLog;

before(async () => {
  server = await PlanServer.start();
  process.env.DEEP_BASE_URL = server.baseURL;
  ({ d0 } = await import('../fixtures/agents/deepOpenai.js'));
  supervisor = createSupervisor({ persistence: null, pool: { threads: 8, graceMs: 300 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

const tree = (p: string): Plan => ({
  label: `${p}root`,
  kind: 'delegate',
  u: 100,
  children: [
    {
      label: `${p}A`,
      kind: 'delegate',
      u: 10,
      children: [
        { label: `${p}A0`, kind: 'tool', tool: 'spin', u: 1 },
        { label: `${p}A1`, kind: 'tool', tool: 'spin', u: 2 },
      ],
    },
    {
      label: `${p}B`,
      kind: 'delegate',
      u: 20,
      children: [
        { label: `${p}B0`, kind: 'delegate', u: 3, children: [{ label: `${p}B00`, kind: 'tool', tool: 'spin', u: 4 }] },
      ],
    },
  ],
});

describe('cancel at depth', () => {
  for (const [where, target] of [
    ['the parent', ''],
    ['a child (depth 1)', '-sub-2'],
    ['a grandchild (depth 2)', '-sub-2-sub-1'],
    ['a depth-3 run', '-sub-2-sub-1-sub-1'],
  ] as const) {
    it(`cancel of ${where}: its subtree ends before the reply, nothing after, tokens kept`, async () => {
      const p = `c${target.length}`;
      const agent = await supervisor.startAgent(d0, { scope: {} });
      const id = agent.id;
      const spins = [`${id}-sub-1-sub-1`, `${id}-sub-1-sub-2`, `${id}-sub-2-sub-1-sub-1`].map((a) =>
        log.whenNamed('tool.execute.start', (e) => e.agentId === a && e.toolName === 'spin'),
      );
      const from = log.entries.length;
      const replyP = agent.send(JSON.stringify(tree(p)));
      await Promise.all(spins);
      assert.equal(supervisor.cancel(`${id}${target}`, 'user'), true);
      if (target !== '') {
        // The rest is still spinning: cancel the parent too once the target's subtree ended.
        await log.whenNamed('subagent.cancelled', (e) => e.agentId === `${id}${target}`);
        agent.cancel('user');
      }
      const reply = await replyP;
      const replied = log.note('reply', { agentId: id, status: reply.status }).seq;
      assert.equal(reply.status, 'cancelled');
      // Let anything late arrive: a round trip to the pool after the reply.
      await supervisor.spawn(d0, { input: JSON.stringify({ label: `${p}late`, kind: 'answer' }), scope: {} });
      const late = log.entries.filter(
        (e) => e.seq > replied && typeof e.payload?.agentId === 'string' && e.payload.agentId.startsWith(id),
      );
      assert.deepEqual(
        late.map((e) => `${e.name} ${e.payload.agentId}`),
        [],
        'no event of the tree after its reply',
      );
      const problems = checkRunTree(log.entries.slice(from), { final: false });
      assert.deepEqual(problems, [], problems.join('\n'));
      const spent = [...server.reported]
        .filter(([l]) => l.startsWith(p) && l !== `${p}late`)
        .reduce((s, [, r]) => s + r.input, 0);
      assert.equal(reply.totalUsage.inputTokens, spent, 'every token spent before the cancel is counted');
      assert.equal(supervisor.stats().runs, 0);
    });
  }
});
