// Spans of an openaiModel tree at depth 3: fan-out, a crash, a tool timeout,
// a cancel, a question answered and resumed. Usage attributes against the
// server's tokens, span statuses, every span ended, no scope value anywhere.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Agent } from '@troupe/core';
import { GenAi, instrument, TroupeAttr } from '@troupe/otel';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { memoryTracing, renderTree, useAsyncContext } from '../otel/traceTree.js';
import { EventLog } from '../supervisor/EventLog.js';
import { type Plan, PlanServer } from './planServer.js';

let server: PlanServer;
let d0: Agent;
let supervisor: Supervisor;
let log: EventLog;
const SECRET = 'scope-secret-7f3a';

before(async () => {
  useAsyncContext();
  server = await PlanServer.start();
  process.env.DEEP_BASE_URL = server.baseURL;
  ({ d0 } = await import('../fixtures/agents/deepOpenai.js'));
  supervisor = createSupervisor({ persistence: null, pool: { threads: 8, graceMs: 200 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

const attr = (s: ReadableSpan, k: string) => s.attributes[k];

describe('spans at depth', () => {
  it('fan-out, crash, timeout: usage attributes match the server; statuses; no scope value', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const plan: Plan = {
      label: 'r',
      kind: 'delegate',
      u: 1000,
      o: 1,
      children: [
        {
          label: 'a',
          kind: 'delegate',
          u: 100,
          o: 1,
          children: [
            { label: 'a0', kind: 'delegate', u: 10, o: 1, children: [{ label: 'a00', kind: 'answer', u: 1, o: 1 }] },
            { label: 'a1', kind: 'tool', tool: 'slow', u: 20, o: 1 },
          ],
        },
        { label: 'b', kind: 'answer', u: 200, o: 1 },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: { userId: SECRET, org: SECRET } });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done');
    assert.equal(tracing.stats().open, 0, 'every span ended');
    const spans = exporter.getFinishedSpans();
    const text = JSON.stringify(spans.map((s) => ({ n: s.name, a: s.attributes, e: s.events, st: s.status })));
    assert.ok(!text.includes(SECRET), 'no scope value in any span');
    const chats = spans.filter((s) => s.name.startsWith('chat '));
    const chatIn = chats.reduce((n, s) => n + Number(attr(s, GenAi.usageInputTokens) ?? 0), 0);
    assert.equal(chatIn, server.totals().input, 'chat spans carry every token');
    const root = spans.find((s) => s.name === 'invoke_agent d0') as ReadableSpan;
    assert.equal(attr(root, TroupeAttr.totalInputTokens), server.totals().input, 'root total');
    const a = spans.find((s) => attr(s, GenAi.agentId) === `${agent.id}-sub-1`) as ReadableSpan;
    const sub = ['a', 'a0', 'a00', 'a1'].reduce((n, l) => n + (server.reported.get(l)?.input ?? 0), 0);
    assert.equal(attr(a, TroupeAttr.totalInputTokens), sub, `d1 total ${renderTree(spans)}`);
    const timeout = spans.find((s) => s.name === 'execute_tool slow') as ReadableSpan;
    assert.equal(timeout.status.code, SpanStatusCode.ERROR);
    tracing.stop();
  });

  it('a cancel at depth 2 and a question at depth 3 answered: statuses, links, every span ended', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const plan: Plan = {
      label: 'q',
      kind: 'delegate',
      children: [
        {
          label: 'qa',
          kind: 'delegate',
          children: [{ label: 'qa0', kind: 'delegate', children: [{ label: 'qa00', kind: 'tool', tool: 'spin' }] }],
        },
        { label: 'qb', kind: 'answer' },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: { userId: SECRET } });
    const id = agent.id;
    const spinning = log.whenNamed(
      'tool.execute.start',
      (e) => e.agentId === `${id}-sub-1-sub-1-sub-1` && e.toolName === 'spin',
    );
    const replyP = agent.send(JSON.stringify(plan));
    await spinning;
    assert.equal(supervisor.cancel(`${id}-sub-1-sub-1`, 'user'), true);
    const reply = await replyP;
    assert.equal(reply.status, 'done');
    assert.equal(tracing.stats().open, 0, 'every span ended');
    const spans = exporter.getFinishedSpans();
    const tree = renderTree(spans);
    const cancelled = spans.filter((s) => s.name === 'invoke_agent d2' || s.name === 'invoke_agent d3');
    for (const s of cancelled) assert.notEqual(s.status.code, SpanStatusCode.UNSET, `${s.name} has a status\n${tree}`);
    assert.equal(spans.filter((s) => s.name === 'invoke_agent d3').length, 1, tree);
    tracing.stop();
  });

  it('a question at depth 3 in two branches, answered: suspended spans, resumed spans link back, every span ended', async () => {
    const { exporter, tracer } = memoryTracing();
    const tracing = instrument(supervisor, { tracer });
    const branch = (l: string): Plan => ({
      label: l,
      kind: 'delegate',
      children: [{ label: `${l}x`, kind: 'delegate', children: [{ label: `${l}y`, kind: 'tool', tool: 'ask' }] }],
    });
    const plan: Plan = { label: 'sq', kind: 'delegate', children: [branch('s1'), branch('s2')] };
    const agent = await supervisor.startAgent(d0, { scope: { userId: SECRET } });
    const first = await agent.send(JSON.stringify(plan));
    assert.equal(first.status, 'suspended');
    const open = supervisor.pendingRequests();
    assert.equal(open.length, 2);
    const [qa, qb] = open.map((p) => p.request.id);
    await supervisor.answer(qb as string, { ok: true, data: 'two' });
    const reply = await supervisor.answer(qa as string, { ok: false, reason: 'nope' });
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.equal(tracing.stats().open, 0, 'every span ended');
    const spans = exporter.getFinishedSpans();
    const tree = renderTree(spans);
    const invoke = spans.filter((s) => s.name.startsWith('invoke_agent'));
    const byAgent = new Map<string, ReadableSpan[]>();
    for (const s of invoke) {
      const a = String(attr(s, GenAi.agentId));
      byAgent.set(a, [...(byAgent.get(a) ?? []), s]);
    }
    for (const [a, list] of byAgent) {
      const suspended = list.filter((s) => JSON.stringify(s.attributes).includes('suspended'));
      const resumed = list.filter((s) => s.links.length > 0);
      assert.ok(list.length >= 2, `${a} ran twice (suspended, resumed)\n${tree}`);
      assert.ok(suspended.length >= 1 && resumed.length >= 1, `${a}: suspended and resumed spans\n${tree}`);
      for (const r of resumed) {
        const ids = new Set(list.map((s) => s.spanContext().spanId));
        assert.ok(
          r.links.every((l) => ids.has(l.context.spanId)),
          `${a}: the resumed run links to its suspended span`,
        );
      }
    }
    const text = JSON.stringify(spans.map((s) => ({ n: s.name, a: s.attributes, e: s.events, st: s.status })));
    assert.ok(!text.includes(SECRET), 'no scope value in any span');
    tracing.stop();
  });
});
