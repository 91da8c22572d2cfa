// While a worker parent has given its thread up for a child (a tree deeper
// than the pool), the host's views of open questions show only questions.
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
  supervisor = createSupervisor({ pool: { threads: 2 } }); // the default store (memory)
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 1000 });
  await server.close();
});

describe('deferred parents and the host', () => {
  it('pendingRequests, listRequests, stats and the snapshot while a parent is deferred', async () => {
    const plan: Plan = {
      label: 'r',
      kind: 'delegate',
      children: [
        {
          label: 'a',
          kind: 'delegate',
          children: [{ label: 'b', kind: 'delegate', children: [{ label: 'c', kind: 'tool', tool: 'spin' }] }],
        },
      ],
    };
    const scope = { userId: 'u1' };
    const agent = await supervisor.startAgent(d0, { scope });
    const id = agent.id;
    const spinning = log.whenNamed(
      'tool.execute.start',
      (e) => e.agentId === `${id}-sub-1-sub-1-sub-1` && e.toolName === 'spin',
    );
    const replyP = agent.send(JSON.stringify(plan));
    await spinning;
    const seen = {
      pending: supervisor.pendingRequests().map((p) => p.request.kind),
      listed: (await supervisor.listRequests(scope)).items.map((p) => p.request.kind),
      status: agent.status,
      snapshotPending: agent.snapshot().pendingRequest?.kind,
      suspendedSubagents: supervisor.stats().suspendedSubagents,
    };
    agent.cancel('user');
    const reply = await replyP;
    assert.equal(reply.status, 'cancelled');
    assert.deepEqual(seen, {
      pending: [],
      listed: [],
      status: 'running',
      snapshotPending: undefined,
      suspendedSubagents: 0,
    });
  });
});
