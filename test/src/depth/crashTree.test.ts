// Crashes and timeouts at depth 2 and 3 under openaiModel agents, traced.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SpanStatusCode } from '@opentelemetry/api';
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
  supervisor = createSupervisor({ persistence: null, pool: { threads: 3, graceMs: 200 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

describe('crashes and timeouts at depth', () => {
  it('process.exit, an uncaught error, a tool timeout at depth 2 and 3: typed errors, the tree goes on', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const plan: Plan = {
      label: 'root',
      kind: 'delegate',
      children: [
        {
          label: 'X',
          kind: 'delegate',
          children: [
            { label: 'X0', kind: 'tool', tool: 'exit' },
            { label: 'X1', kind: 'tool', tool: 'uncaught' },
            { label: 'X2', kind: 'tool', tool: 'slow' },
            { label: 'X3', kind: 'delegate', children: [{ label: 'X30', kind: 'tool', tool: 'exit' }] },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: { secret: 'scope-secret-value' } });
    const reply = await agent.send(JSON.stringify(plan));
    console.log(JSON.stringify(reply));
    console.log(log.dump());
    console.log(renderTree(exporter.getFinishedSpans()));
    for (const s of exporter.getFinishedSpans()) {
      if (s.status.code === SpanStatusCode.ERROR)
        console.log(s.name, s.attributes['gen_ai.agent.id'], s.status.message);
    }
    assert.equal(reply.status, 'done');
    tracing[Symbol.dispose]();
  });
});
