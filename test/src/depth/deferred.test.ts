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

  it('on 2 threads: a depth-3 crash under a deferred parent reaches it as a typed error', async () => {
    const plan: Plan = {
      label: 'cr',
      kind: 'delegate',
      children: [
        {
          label: 'ca',
          kind: 'delegate',
          children: [
            { label: 'cb', kind: 'delegate', children: [{ label: 'cc', kind: 'tool', tool: 'exit' }] },
            { label: 'cb2', kind: 'answer' },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match(reply.text, /ERR_WORKER_CRASHED/);
    assert.equal(supervisor.stats().runs, 0);
  });

  it('on 2 threads: cancel while a parent is deferred ends the whole tree before the reply', async () => {
    const plan: Plan = {
      label: 'xr',
      kind: 'delegate',
      children: [
        {
          label: 'xa',
          kind: 'delegate',
          children: [{ label: 'xb', kind: 'delegate', children: [{ label: 'xc', kind: 'tool', tool: 'spin' }] }],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const id = agent.id;
    const spinning = log.whenNamed(
      'tool.execute.start',
      (e) => e.agentId === `${id}-sub-1-sub-1-sub-1` && e.toolName === 'spin',
    );
    const from = log.entries.length;
    const replyP = agent.send(JSON.stringify(plan));
    await spinning;
    assert.equal(agent.cancel('user'), true);
    const reply = await replyP;
    const replied = log.note('reply', {}).seq;
    assert.equal(reply.status, 'cancelled');
    await supervisor.spawn(d0, { input: JSON.stringify({ label: 'xlate', kind: 'answer' }), scope: {} });
    const late = log.entries.filter((e) => e.seq > replied && String(e.payload?.agentId).startsWith(id));
    assert.deepEqual(
      late.map((e) => `${e.name} ${e.payload.agentId}`),
      [],
    );
    const ends = log.entries
      .slice(from)
      .filter((e) => /^subagent\.(cancelled|done|failed|crashed|suspended)$/.test(e.name))
      .map((e) => `${e.name} ${String(e.payload.agentId).slice(id.length)}`);
    assert.ok(ends.includes('subagent.cancelled -sub-1-sub-1-sub-1'), ends.join('\n'));
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);
    assert.deepEqual(supervisor.pendingRequests(), []);
  });

  it('on 2 threads: a real question under a deferred parent; answered, the tree finishes', async () => {
    const plan: Plan = {
      label: 'hr',
      kind: 'delegate',
      children: [
        {
          label: 'ha',
          kind: 'delegate',
          children: [
            { label: 'hb', kind: 'delegate', children: [{ label: 'hc', kind: 'tool', tool: 'ask' }] },
            { label: 'hb2', kind: 'answer' },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const from = log.entries.length;
    const first = await agent.send(JSON.stringify(plan));
    assert.equal(first.status, 'suspended', JSON.stringify(first));
    const open = supervisor.pendingRequests();
    assert.equal(open.length, 1, JSON.stringify(open));
    assert.equal(open[0]?.request.kind, 'input', 'the host sees only the person’s question');
    const reply = await supervisor.answer(open[0]?.request.id as string, { ok: true, data: 'yes' });
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.ok(reply.text.replace(/\\/g, '').includes('"answered":"yes"'), reply.text);
    assert.equal(reply.totalUsage.inputTokens, log.entries.slice(from).filter((e) => e.name === 'model.stop').length);
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);
  });

  it('on 2 threads: cancel of the deferred parent itself stops its child, and the tree goes on', async () => {
    const plan: Plan = {
      label: 'kr',
      kind: 'delegate',
      children: [
        {
          label: 'ka',
          kind: 'delegate',
          children: [{ label: 'kb', kind: 'delegate', children: [{ label: 'kc', kind: 'tool', tool: 'spin' }] }],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const id = agent.id;
    const spinning = log.whenNamed(
      'tool.execute.start',
      (e) => e.agentId === `${id}-sub-1-sub-1-sub-1` && e.toolName === 'spin',
    );
    const from = log.entries.length;
    const replyP = agent.send(JSON.stringify(plan));
    await spinning;
    // kb (depth 2) gave its thread up for kc: cancel kb.
    assert.equal(supervisor.cancel(`${id}-sub-1-sub-1`, 'user'), true, 'a deferred run can be cancelled');
    const reply = await replyP;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.match(reply.text, /ERR_CANCELLED/);
    const ends = log.entries
      .slice(from)
      .filter((e) => /^subagent\.(cancelled|done|failed|crashed)$/.test(e.name))
      .map((e) => `${e.name} ${String(e.payload.agentId).slice(id.length)} ${e.payload.reason ?? ''}`.trim());
    assert.ok(ends.includes('subagent.cancelled -sub-1-sub-1-sub-1 parent'), ends.join('\n'));
    assert.ok(ends.includes('subagent.cancelled -sub-1-sub-1 user'), ends.join('\n'));
    assert.equal(supervisor.stats().runs, 0);
    assert.equal(supervisor.stats().suspendedSubagents, 0);
  });
});
