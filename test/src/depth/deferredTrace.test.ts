// A tree deeper than the pool (2 threads, the default on a 2-core machine):
// worker parents give their thread up while a child runs. Nobody is asked
// anything, so neither events nor spans may say a call was suspended, and a
// child's span lies within its task call's span.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Agent } from '@troupe/core';
import { instrument } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { memoryTracing, ms, renderTree, useAsyncContext } from '../otel/traceTree.js';
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

describe('a tree deeper than the pool, traced', () => {
  it('no call is reported suspended when nobody was asked; child spans lie within their task call', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const plan: Plan = {
      label: 'r',
      kind: 'delegate',
      children: [
        {
          label: 'a',
          kind: 'delegate',
          children: [
            { label: 'b', kind: 'delegate', children: [{ label: 'c', kind: 'answer' }] },
            { label: 'b2', kind: 'answer' },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    tracing.stop();
    assert.equal(reply.status, 'done');
    assert.deepEqual(log.named('request.opened'), [], 'nobody was asked anything');
    const problems: string[] = [];
    for (const e of log.named('tool.execute.stop')) {
      if (e.payload.status === 'pending') {
        problems.push(
          `event: tool.execute.stop status=pending for ${e.payload.toolName} of ${String(e.payload.agentId).slice(agent.id.length)}`,
        );
      }
    }
    // Every call that started has stopped (a deferred task call's stop comes from the supervisor).
    const stopped = new Set(log.named('tool.execute.stop').map((e) => e.payload.toolCallId));
    for (const e of log.named('tool.execute.start')) {
      if (!stopped.has(e.payload.toolCallId))
        problems.push(`event: no tool.execute.stop for ${e.payload.toolName} ${e.payload.toolCallId}`);
    }
    const spans = exporter.getFinishedSpans();
    const tree = renderTree(spans);
    for (const line of tree.split('\n')) if (line.includes('(suspended)')) problems.push(`span: ${line.trim()}`);
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    for (const s of spans) {
      const parent = byId.get(s.parentSpanContext?.spanId ?? '') as ReadableSpan | undefined;
      if (parent !== undefined && ms(s.endTime) > ms(parent.endTime)) {
        problems.push(`span: ${s.name} ends after its parent ${parent.name}`);
      }
    }
    assert.deepEqual(problems, [], tree);
  });
});
