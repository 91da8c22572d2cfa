// A subagent whose worker crashes after its model answered: the tokens the
// server reported for it are spent, and the tree's totals must count them
// (issue 12 item 7: a node's total is its own plus its children's; the reply's
// totalUsage is every token of the message's tree).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Agent } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
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
  supervisor = createSupervisor({ persistence: null, pool: { threads: 4, graceMs: 100 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

describe('usage of a crashed subagent at depth', () => {
  it('the tokens a crashed grandchild spent are in its parent and the reply totals', async () => {
    const plan: Plan = {
      label: 'root',
      kind: 'delegate',
      u: 100,
      o: 10,
      children: [
        {
          label: 'X',
          kind: 'delegate',
          u: 20,
          o: 2,
          children: [
            { label: 'X0', kind: 'tool', tool: 'exit', u: 7, o: 3 },
            { label: 'X1', kind: 'answer', u: 5, o: 1 },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done');
    // The server answered X0's one model call (7 in, 3 out) before its tool killed the worker,
    // and the supervisor saw it: model.stop of X0 carries those tokens.
    const x0 = `${agent.id}-sub-1-sub-1`;
    const stop = log.named('model.stop').find((e) => e.payload.agentId === x0);
    assert.equal(stop?.payload.usage?.inputTokens, 7, 'model.stop of the crashed run carries its tokens');
    assert.equal(server.reported.get('X0')?.input, 7);
    const crashed = log.named('subagent.crashed').find((e) => e.payload.agentId === x0);
    assert.ok(crashed !== undefined, 'X0 crashed');
    const total = server.totals();
    // X's subtree: X (2 calls) + X0 + X1.
    const subX = ['X', 'X0', 'X1'].reduce((s, l) => s + (server.reported.get(l)?.input ?? 0), 0);
    const doneX = log.named('subagent.done').find((e) => e.payload.agentId === `${agent.id}-sub-1`);
    assert.deepEqual(
      {
        crashedOwn: crashed.payload.usage?.inputTokens,
        subtreeOfX: doneX?.payload.totalUsage?.inputTokens,
        reply: reply.totalUsage.inputTokens,
        snapshot: agent.snapshot().totalUsage.inputTokens,
      },
      { crashedOwn: 7, subtreeOfX: subX, reply: total.input, snapshot: total.input },
      'every token the server reported is counted',
    );
  });

  it('the tokens of a run killed after the grace (forced cancel) are in the totals', async () => {
    const plan: Plan = {
      label: 'froot',
      kind: 'delegate',
      u: 100,
      o: 10,
      children: [
        {
          label: 'F',
          kind: 'delegate',
          u: 20,
          o: 2,
          children: [{ label: 'F0', kind: 'tool', tool: 'busy', u: 7, o: 3 }],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const f0 = `${agent.id}-sub-1-sub-1`;
    const busy = log.whenNamed('tool.execute.start', (e) => e.agentId === f0 && e.toolName === 'busy');
    const replyP = agent.send(JSON.stringify(plan));
    await busy;
    agent.cancel('user');
    const reply = await replyP;
    assert.equal(reply.status, 'cancelled');
    const ended = log.named('subagent.cancelled').find((e) => e.payload.agentId === f0);
    assert.equal(ended?.payload.forced, true, 'F0 was killed');
    const total = ['froot', 'F', 'F0'].reduce((s, l) => s + (server.reported.get(l)?.input ?? 0), 0);
    assert.deepEqual(
      { killedOwn: ended?.payload.usage?.inputTokens, reply: reply.totalUsage.inputTokens },
      { killedOwn: 7, reply: total },
      'the killed run spent 7 input tokens (its model.stop said so); the reply counts them',
    );
  });

  it('the tokens of a run whose never-yielding tool overran its timeout (forced ToolTimeoutError) are in the totals', async () => {
    const plan: Plan = {
      label: 'troot',
      kind: 'delegate',
      u: 100,
      o: 10,
      children: [
        {
          label: 'T',
          kind: 'delegate',
          u: 20,
          o: 2,
          children: [{ label: 'T0', kind: 'tool', tool: 'busyTimed', u: 7, o: 3 }],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const t0 = `${agent.id}-sub-1-sub-1`;
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match(reply.text, /ERR_TOOL_TIMEOUT/);
    const failed = log.named('subagent.failed').find((e) => e.payload.agentId === t0);
    assert.ok(failed !== undefined, 'T0 failed');
    const total = ['troot', 'T', 'T0'].reduce((s, l) => s + (server.reported.get(l)?.input ?? 0), 0);
    assert.deepEqual(
      { ownOfT0: failed.payload.usage?.inputTokens, reply: reply.totalUsage.inputTokens },
      { ownOfT0: 7, reply: total },
    );
  });
});
