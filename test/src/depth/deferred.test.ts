// A tree deeper than the pool: worker parents give their thread up while a
// child runs (an internal deferral). What the host sees of it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Agent } from '@troupe/core';
import { instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { memoryTracing, renderTree, useAsyncContext } from '../otel/traceTree.js';
import { EventLog } from '../supervisor/EventLog.js';
import { type Plan, PlanServer } from './planServer.js';

let server: PlanServer;
let d0: Agent;
let supervisor: Supervisor;
let log: EventLog;

before(async () => {
  useAsyncContext();
  server = await PlanServer.start();
  process.env.DEEP_BASE_URL = server.baseURL;
  ({ d0 } = await import('../fixtures/agents/deepOpenai.js'));
  supervisor = createSupervisor({ persistence: null, pool: { threads: 2 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 1000 });
  await server.close();
});

describe('a tree deeper than the pool', () => {
  it('d0 → d1 → (d2 → d3, d2) on 2 threads', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const plan: Plan = {
      label: 'r',
      kind: 'delegate',
      u: 1000,
      children: [
        {
          label: 'a',
          kind: 'delegate',
          u: 100,
          children: [
            { label: 'b', kind: 'delegate', u: 10, children: [{ label: 'c', kind: 'answer', u: 1 }] },
            { label: 'b2', kind: 'answer', u: 3 },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    tracing.stop();
    console.log(log.dump());
    console.log(renderTree(exporter.getFinishedSpans()));
    console.log(
      JSON.stringify(reply.totalUsage),
      JSON.stringify(server.totals()),
      JSON.stringify([...server.requests]),
    );
    assert.equal(reply.status, 'done');
  });
});
