// A middle run whose worker dies while its own children run on other
// workers: the children are stopped before the parent's task call settles,
// and nothing of them arrives after the reply.
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
  supervisor = createSupervisor({ persistence: null, pool: { threads: 6, graceMs: 200 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

describe('a middle run crashes under its running children', () => {
  it('its children (spinning, and one mid-model-call) stop before the parent goes on', async () => {
    // M (depth 1) calls task ×2 and a tool that kills its worker, in one turn.
    const plan: Plan = {
      label: 'or',
      kind: 'delegate',
      children: [
        {
          label: 'M',
          kind: 'delegate',
          tool: 'exitAfterGate',
          children: [
            { label: 'M0', kind: 'delegate', children: [{ label: 'M00', kind: 'tool', tool: 'spin' }] },
            { label: 'M1', kind: 'tool', tool: 'spin' },
          ],
        },
        { label: 'N', kind: 'answer' },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const id = agent.id;
    const from = log.entries.length;
    const spinning = [`${id}-sub-1-sub-1-sub-1`, `${id}-sub-1-sub-2`].map((a) =>
      log.whenNamed('tool.execute.start', (e) => e.agentId === a && e.toolName === 'spin'),
    );
    const replyP = agent.send(JSON.stringify(plan));
    await Promise.all(spinning);
    server.release();
    const reply = await replyP;
    const replied = log.note('reply', { agentId: id, status: reply.status }).seq;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match(reply.text, /ERR_WORKER_CRASHED/);
    await supervisor.spawn(d0, { input: JSON.stringify({ label: 'olate', kind: 'answer' }), scope: {} });
    const mine = log.entries.slice(from);
    const ends = mine
      .filter(
        (e) =>
          /^subagent\.(cancelled|done|failed|crashed|suspended)$/.test(e.name) &&
          String(e.payload.agentId).startsWith(id),
      )
      .map((e) => `${e.seq} ${e.name} ${String(e.payload.agentId).slice(id.length)} ${e.payload.reason ?? ''}`);
    const late = log.entries.filter((e) => e.seq > replied && String(e.payload?.agentId).startsWith(id));
    assert.deepEqual(
      late.map((e) => `${e.name} ${e.payload.agentId}`),
      [],
      'no event of the tree after the reply',
    );
    for (const child of ['-sub-1-sub-1', '-sub-1-sub-1-sub-1', '-sub-1-sub-2']) {
      assert.ok(
        ends.some((l) => l.includes(` ${child} `) || l.endsWith(` ${child}`)),
        `${child} ended:\n${ends.join('\n')}`,
      );
    }
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().pool.running, 0);
    const problems = checkRunTree(mine, { final: true });
    assert.deepEqual(problems, [], `${problems.join('\n')}\n${log.dump(from)}`);
  });

  it('a middle run crashes while its child waits on a question: the question is withdrawn, nothing is left suspended', async () => {
    server.reset();
    const plan: Plan = {
      label: 'qr',
      kind: 'delegate',
      children: [
        {
          label: 'QM',
          kind: 'delegate',
          tool: 'exitAfterGate',
          children: [{ label: 'QM0', kind: 'delegate', children: [{ label: 'QM00', kind: 'tool', tool: 'ask' }] }],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const id = agent.id;
    const opened = log.whenNamed('request.opened', (e) =>
      String(e.path?.[e.path.length - 1] ?? e.agentId).startsWith(id),
    );
    const from = log.entries.length;
    const replyP = agent.send(JSON.stringify(plan));
    const q = await opened;
    server.release();
    const reply = await replyP;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match(reply.text, /ERR_WORKER_CRASHED/);
    const requestId = q.payload.request?.id ?? q.payload.requestId;
    assert.deepEqual(supervisor.pendingRequests(), [], 'the question of a crashed branch is not open');
    assert.ok(
      log.entries.slice(from).some((e) => e.name === 'request.withdrawn' && e.payload.requestId === requestId),
      `request.withdrawn for ${requestId}\n${log.dump(from)}`,
    );
    assert.equal(supervisor.stats().suspendedSubagents, 0);
    assert.equal(supervisor.stats().runs, 0);
    await assert.rejects(supervisor.answer(requestId, { ok: true, data: 1 }));
    const problems = checkRunTree(log.entries.slice(from), { final: true });
    assert.deepEqual(problems, [], `${problems.join('\n')}\n${log.dump(from)}`);
  });
});
