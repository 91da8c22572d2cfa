// agent.stream() over an openaiModel tree at depth 3 with fan-out: a slow
// consumer with a tiny high-water mark, and an early break.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Agent } from '@troupe/core';
import { createSupervisor, type StreamChunk, type Supervisor } from '@troupe/supervisor';
import { type Plan, PlanServer } from './planServer.js';

let server: PlanServer;
let d0: Agent;
let supervisor: Supervisor;
const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => unhandled.push(e);

before(async () => {
  process.on('unhandledRejection', onUnhandled);
  server = await PlanServer.start();
  process.env.DEEP_BASE_URL = server.baseURL;
  ({ d0 } = await import('../fixtures/agents/deepOpenai.js'));
  supervisor = createSupervisor({ persistence: null, pool: { threads: 4 } });
  await supervisor.ready();
});

after(async () => {
  await supervisor.close({ timeoutMs: 2000 });
  await server.close();
  process.off('unhandledRejection', onUnhandled);
});

const fan = (p: string): Plan => ({
  label: `${p}r`,
  kind: 'delegate',
  pieces: 20,
  children: [
    {
      label: `${p}a`,
      kind: 'delegate',
      pieces: 20,
      children: [
        { label: `${p}a0`, kind: 'delegate', pieces: 20, children: [{ label: `${p}a00`, kind: 'answer', pieces: 30 }] },
        { label: `${p}a1`, kind: 'answer', pieces: 30 },
      ],
    },
    { label: `${p}b`, kind: 'answer', pieces: 30 },
  ],
});

describe('streams at depth', () => {
  it('a slow consumer (highWaterMark 2) still gets every run’s text whole and in order, then the reply', async () => {
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const stream = agent.stream(JSON.stringify(fan('s')), { highWaterMark: 2 });
    const chunks: StreamChunk[] = [];
    for await (const c of stream) {
      chunks.push(c);
      await new Promise((r) => setImmediate(r)); // a slow reader, on purpose
    }
    const reply = await stream.reply;
    assert.equal(reply.status, 'done');
    const byAgent = new Map<string, string>();
    for (const c of chunks) if (c.type === 'text') byAgent.set(c.agentId, (byAgent.get(c.agentId) ?? '') + c.text);
    const id = agent.id;
    const where: Record<string, string> = {
      sr: id,
      sa: `${id}-sub-1`,
      sa0: `${id}-sub-1-sub-1`,
      sa00: `${id}-sub-1-sub-1-sub-1`,
      sa1: `${id}-sub-1-sub-2`,
      sb: `${id}-sub-2`,
    };
    for (const [label, agentId] of Object.entries(where)) {
      assert.equal(byAgent.get(agentId), server.sent.get(label)?.join(''), `${label}'s text`);
    }
    for (const c of chunks) assert.equal(c.path[c.path.length - 1], c.agentId);
  });

  it('an early break: the message still ends, stream.reply resolves, nothing unhandled, no run left', async () => {
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const stream = agent.stream(JSON.stringify(fan('e')));
    let n = 0;
    for await (const _ of stream) {
      if (++n === 2) break;
    }
    const reply = await stream.reply;
    assert.equal(reply.status, 'done');
    assert.deepEqual(await stream.next(), { value: undefined, done: true });
    const again = agent.stream(JSON.stringify({ label: 'e2', kind: 'answer', pieces: 5 }));
    const texts: string[] = [];
    for await (const c of again) if (c.type === 'text') texts.push(c.text);
    assert.equal(texts.join(''), server.sent.get('e2')?.join(''));
    assert.equal(supervisor.stats().runs, 0);
    assert.deepEqual(unhandled, []);
  });

  it('aborting the stream’s signal mid-stream at depth: the iterator ends, the reply says cancelled, no delta after it', async () => {
    const agent = await supervisor.startAgent(d0, { scope: {} });
    const controller = new AbortController();
    const plan: Plan = {
      label: 'ab',
      kind: 'delegate',
      children: [{ label: 'ab1', kind: 'delegate', children: [{ label: 'ab2', kind: 'answer', fail: 'hang' }] }],
    };
    const stream = agent.stream(JSON.stringify(plan), { signal: controller.signal });
    const seen: StreamChunk[] = [];
    for await (const c of stream) {
      seen.push(c);
      if (c.agentId === `${agent.id}-sub-1-sub-1` && c.type === 'text') controller.abort();
    }
    const reply = await stream.reply;
    assert.equal(reply.status, 'cancelled');
    assert.ok(
      seen.some((c) => c.agentId === `${agent.id}-sub-1-sub-1`),
      'the depth-2 delta came through',
    );
    assert.equal(supervisor.stats().runs, 0);
    assert.deepEqual(unhandled, []);
  });
});
