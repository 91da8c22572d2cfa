// openaiModel at depth 3 with fan-out, against a local server that answers
// from each run's plan: usage sums, streams per run, errors at depth.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Agent } from '@troupe/core';
import { createSupervisor, type StreamChunk, type Supervisor } from '@troupe/supervisor';
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
  supervisor = createSupervisor({ persistence: null, pool: { threads: 3 } });
  log = new EventLog(supervisor);
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
});

describe('openaiModel at depth', () => {
  it('usage at every level sums what the server reported; every delta of every run streams in order', async () => {
    const plan: Plan = {
      label: 'root',
      kind: 'delegate',
      u: 1000,
      o: 100,
      children: [
        {
          label: 'A',
          kind: 'delegate',
          u: 200,
          o: 20,
          children: [
            { label: 'A0', kind: 'answer', u: 3, o: 5, pieces: 4 },
            {
              label: 'A1',
              kind: 'delegate',
              u: 7,
              o: 11,
              children: [
                { label: 'A10', kind: 'answer', u: 13, o: 17, pieces: 5 },
                { label: 'A11', kind: 'answer', u: 19, o: 23, fail: '429' },
              ],
            },
          ],
        },
        { label: 'B', kind: 'answer', u: 29, o: 31, fail: '500' },
        { label: 'C', kind: 'delegate', u: 37, o: 41, children: [{ label: 'C0', kind: 'answer', u: 43, o: 47 }] },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const from = log.entries.length;
    const stream = agent.stream(JSON.stringify(plan));
    const chunks: StreamChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const reply = await stream.reply;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const total = server.totals();
    const own = server.reported.get('root');
    assert.deepEqual(
      { in: reply.usage.inputTokens, out: reply.usage.outputTokens },
      { in: own?.input, out: own?.output },
      'usage is the parent model calls',
    );
    assert.deepEqual(
      { in: reply.totalUsage.inputTokens, out: reply.totalUsage.outputTokens },
      { in: total.input, out: total.output },
      'totalUsage is every token the server reported',
    );
    // Per label: the text deltas of the final answer arrived, in order, on one run.
    for (const [label, sent] of server.sent) {
      const whole = sent.join('');
      const runs = new Set<string>();
      let got = '';
      for (const c of chunks) {
        if (c.type !== 'text') continue;
        if (
          c.text.length > 0 &&
          whole.includes(c.text) &&
          got + c.text === whole.slice(0, got.length + c.text.length)
        ) {
          // attributed below by run
        }
      }
      const byRun = new Map<string, string>();
      for (const c of chunks) if (c.type === 'text') byRun.set(c.runId, (byRun.get(c.runId) ?? '') + c.text);
      for (const [run, text] of byRun) if (text.includes(whole)) runs.add(run);
      got = [...runs].length === 1 ? whole : '';
      assert.equal(got, whole, `the answer of ${label} streamed whole on one run`);
    }
    const problems = checkRunTree(log.entries.slice(from), { final: true });
    assert.deepEqual(problems, [], problems.join('\n'));
    // model.stop of the retried calls says how many attempts they took.
    const attemptsOf = (agentId: string) =>
      log
        .named('model.stop')
        .filter((e) => e.payload.agentId === agentId)
        .map((e) => e.payload.attempts);
    assert.deepEqual(attemptsOf(`${agent.id}-sub-2`), [2], 'B: a 500 then an answer');
    assert.deepEqual(
      attemptsOf(`${agent.id}-sub-1-sub-2-sub-2`),
      [2],
      'A11: a 429 with retry-after-ms, then an answer',
    );
    // Events: subagent.done totals; snapshot total.
    const snap = agent.snapshot();
    assert.equal(snap.totalUsage.inputTokens, total.input, 'snapshot totalUsage');
    const doneA = log.named('subagent.done').find((e) => e.payload.agentId === `${agent.id}-sub-1`);
    const subA = ['A', 'A0', 'A1', 'A10', 'A11'].reduce((s, l) => s + (server.reported.get(l)?.input ?? 0), 0);
    assert.equal(doneA?.payload.totalUsage?.inputTokens, subA, `subagent.done of A: ${JSON.stringify(doneA?.payload)}`);
  });

  it('errors at depth 2: a 500 every time, bad JSON, a stream cut mid-chunk, a 400 — typed errors, the tree goes on', async () => {
    const plan: Plan = {
      label: 'r2',
      kind: 'delegate',
      children: [
        {
          label: 'E',
          kind: 'delegate',
          children: [
            { label: 'E0', kind: 'answer', fail: '500always' },
            { label: 'E1', kind: 'answer', fail: 'badjson' },
            { label: 'E2', kind: 'answer', fail: 'cut' },
            { label: 'E3', kind: 'answer', fail: '400' },
            { label: 'E4', kind: 'answer' },
            { label: 'E5', kind: 'answer', fail: '429days' },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const answer = JSON.parse(reply.text) as { results: string[] };
    const inner = JSON.parse(String(answer.results[0])) as { results: string[] };
    assert.equal(inner.results.length, 6);
    assert.match(String(inner.results[5]), /ERR_MODEL_RATE_LIMITED/);
    assert.equal(server.requests.get('E5'), 1, 'a retry-after past the cap is not waited for');
    for (const [i, r] of inner.results.slice(0, 4).entries()) {
      const parsed = JSON.parse(r) as { code?: string };
      assert.equal(typeof parsed.code, 'string', `E${i}'s task call is a typed error: ${r}`);
    }
    assert.match(String(inner.results[4]), /E4/);
  });

  it('cached and reasoning tokens roll up through the tree like input and output', async () => {
    const plan: Plan = {
      label: 'k',
      kind: 'delegate',
      u: 50,
      cached: 40,
      reasoning: 4,
      children: [
        {
          label: 'k1',
          kind: 'delegate',
          u: 30,
          cached: 20,
          reasoning: 2,
          children: [
            {
              label: 'k2',
              kind: 'delegate',
              u: 9,
              cached: 8,
              reasoning: 1,
              children: [{ label: 'k3', kind: 'answer', u: 5, cached: 3, reasoning: 7 }],
            },
          ],
        },
      ],
    };
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const reply = await agent.send(JSON.stringify(plan));
    assert.equal(reply.status, 'done');
    let cached = 0;
    let reasoning = 0;
    for (const l of ['k', 'k1', 'k2', 'k3']) {
      cached += server.reported.get(l)?.cached ?? 0;
      reasoning += server.reported.get(l)?.reasoning ?? 0;
    }
    const stop = log.named('model.stop').find((e) => e.payload.agentId === `${agent.id}-sub-1-sub-1-sub-1`);
    assert.equal(stop?.payload.usage?.cachedInputTokens, 3, 'the depth-3 model call reports its cached tokens');
    assert.deepEqual(
      { cached: reply.totalUsage.cachedInputTokens, reasoning: reply.totalUsage.reasoningTokens },
      { cached, reasoning },
    );
    assert.deepEqual(
      { cached: reply.usage.cachedInputTokens, reasoning: reply.usage.reasoningTokens },
      { cached: 80, reasoning: 8 },
    );
  });
});
