// openaiModel through the whole supervisor: a parent agent on the supervisor
// thread and its subagent in a worker, both talking to a chat-completions
// server on 127.0.0.1. Their tokens reach the host in order (as `model.delta`
// events and through `agent.stream`), their model calls are reported with
// tokens, latency and attempts, usage rolls up, and a cancel from the
// supervisor closes the socket of the call it stops. Everything waits on
// events and on what the server observed, never on time.
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { type AgentId, isTroupeError, type ModelDelta, type Usage } from '@troupe/core';
import { normaliseChunks } from '@troupe/openai';
import { createSupervisor, type StreamChunk, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { ChatServer, event, type Handler, json, startSse, textAnswer } from './chatServer.js';
import { BASE_URL_VARIABLE } from './openaiAgents.js';

type Agents = typeof import('./supervisorAgents.js');
type Payload<K extends keyof SupervisorEvents> = SupervisorEvents[K][0];
/** Model events as the supervisor emits them: with the run's ids added. */
type WithRun<T> = T & { readonly runId: string; readonly path: readonly AgentId[] };

const scope = Object.freeze({ userId: 'u1' });

/** A chunk that streams answer text, as `served` says it is. */
const text = (content: string, served: string): unknown => ({
  id: 'chatcmpl-s',
  object: 'chat.completion.chunk',
  model: served,
  choices: [{ index: 0, delta: { content }, finish_reason: null }],
});
const reasoning = (content: string, served: string): unknown => ({
  model: served,
  choices: [{ index: 0, delta: { reasoning_content: content }, finish_reason: null }],
});
const finish = (reason: string, served: string): unknown => ({
  model: served,
  choices: [{ index: 0, delta: {}, finish_reason: reason }],
});
const usage = (input: number, output: number, cached?: number, reasoned?: number): unknown => ({
  choices: [],
  usage: {
    prompt_tokens: input,
    completion_tokens: output,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
    ...(reasoned === undefined ? {} : { completion_tokens_details: { reasoning_tokens: reasoned } }),
  },
});

// The parent's first turn: some text, then a `task` call whose arguments come in two pieces.
const LEAD_TURN_1 = [
  text('Asking ', 'served-lead'),
  text('the helper.', 'served-lead'),
  {
    model: 'served-lead',
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [{ index: 0, id: 'call_task', function: { name: 'task', arguments: '{"subagent":"helper",' } }],
        },
      },
    ],
  },
  {
    model: 'served-lead',
    choices: [
      { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"instructions":"What is 6 x 7?"}' } }] } },
    ],
  },
  finish('tool_calls', 'served-lead'),
  usage(100, 20, 64, 5),
];
// The subagent: reasoning, then 40 words, one per chunk.
const HELPER_ANSWER = [
  reasoning('6 x 7 ', 'served-helper'),
  reasoning('is 42', 'served-helper'),
  ...Array.from({ length: 40 }, (_, i) => text(`w${i} `, 'served-helper')),
  finish('stop', 'served-helper'),
  usage(30, 40, undefined, 8),
];
// The parent's second turn.
const LEAD_TURN_2 = [
  text('The answer ', 'served-lead'),
  text('is 42.', 'served-lead'),
  finish('stop', 'served-lead'),
  usage(150, 10, 100),
];
const LEAD_USAGE: Usage = { inputTokens: 250, outputTokens: 30, cachedInputTokens: 164, reasoningTokens: 5 };
const HELPER_USAGE: Usage = { inputTokens: 30, outputTokens: 40, reasoningTokens: 8 };

/** What the model hands `onDelta` for these chunks, in this thread: the reference. */
const deltasOf = (...streams: readonly unknown[][]): ModelDelta[] =>
  streams.flatMap((chunks) => [...normaliseChunks(chunks).deltas]);

/** The whole answer in one write (one read for the client). */
function burst(chunks: readonly unknown[]): Handler {
  return (res: ServerResponse) => {
    startSse(res);
    res.end(`${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`);
  };
}

/** The headers, then the first chunk `afterMs` later, then the rest (a model that thinks first). */
function thinking(afterMs: number, chunks: readonly unknown[]): Handler {
  return (res: ServerResponse) => {
    startSse(res);
    setTimeout(() => {
      for (const c of chunks) event(res, c);
      res.end('data: [DONE]\n\n');
    }, afterMs);
  };
}

/** One chunk of text, then nothing: the call stays mid-stream until the client hangs up. */
function holding(first: string, served: string): Handler {
  return (res: ServerResponse) => {
    startSse(res);
    event(res, text(first, served));
  };
}

/** Listen to `name` until the test ends. */
function on<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  listener: (payload: Payload<K>) => void,
  t: { after(fn: () => void): void },
): void {
  supervisor.on(name as keyof SupervisorEvents, listener as never);
  t.after(() => supervisor.off(name as keyof SupervisorEvents, listener as never));
}

/** Every emission of `name` until the test ends. */
function record<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  t: { after(fn: () => void): void },
): Payload<K>[] {
  const seen: Payload<K>[] = [];
  on(supervisor, name, (p) => seen.push(p), t);
  return seen;
}

/** The next emission of `name` that passes `filter`. */
function next<K extends keyof SupervisorEvents>(
  supervisor: Supervisor,
  name: K,
  filter: (payload: Payload<K>) => boolean,
): Promise<Payload<K>> {
  return new Promise((resolve) => {
    const listener = (payload: Payload<K>): void => {
      if (!filter(payload)) return;
      supervisor.off(name as keyof SupervisorEvents, listener as never);
      resolve(payload);
    };
    supervisor.on(name as keyof SupervisorEvents, listener as never);
  });
}

/** The tool result a request sent back to the model. */
function toolResultOf(body: { messages?: { role: string; content: string }[] } | undefined) {
  return body?.messages?.find((m) => m.role === 'tool');
}

/** Consecutive duplicates collapsed: the order in which runs took turns. */
function turns<T>(items: readonly T[]): T[] {
  return items.filter((item, i) => i === 0 || items[i - 1] !== item);
}

// The bound turns a hang (a socket never closed, a delta never delivered) into a failure.
describe('openaiModel through the supervisor: a parent on this thread, its subagent in a worker', {
  timeout: 60_000,
}, () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  let agents: Agents;
  let n = 0;
  const fresh = (): string => {
    server.reset();
    n++;
    return `lead-${n}`;
  };

  before(async () => {
    server = await ChatServer.start();
    // Before the module is evaluated (its parent's model is built on this thread) and before
    // the pool starts (each worker copies the environment and builds the subagent's model there).
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    agents = await import('./supervisorAgents.js');
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(async () => {
    await supervisor.destroy();
    delete process.env[BASE_URL_VARIABLE];
    await server.close();
  });

  it('model.delta: both runs’ deltas, in order, with their agent ids and paths, batched from the worker', async (t) => {
    const id = fresh();
    const child = `${id}-sub-1`;
    server.script(burst(LEAD_TURN_1), burst(HELPER_ANSWER), burst(LEAD_TURN_2));
    const seen = record(supervisor, 'model.delta', t);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const reply = await lead.send('What is 6 x 7?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.equal(reply.status === 'done' ? reply.text : '', 'The answer is 42.');
    assert.deepEqual(
      server.received.map((r) => [r.body.model, r.headers.authorization]),
      [
        [agents.LEAD_MODEL, 'Bearer sk-lead'],
        [agents.HELPER_MODEL, 'Bearer sk-helper'],
        [agents.LEAD_MODEL, 'Bearer sk-lead'],
      ],
    );

    const parentEvents = seen.filter((e) => e.agentId === id);
    const childEvents = seen.filter((e) => e.agentId === child);
    assert.equal(parentEvents.length + childEvents.length, seen.length, 'no delta from another run');
    // Every delta the model produced, in the order it produced them, with nothing added or lost.
    assert.deepEqual(
      parentEvents.flatMap((e) => e.deltas),
      deltasOf(LEAD_TURN_1, LEAD_TURN_2),
    );
    assert.deepEqual(
      childEvents.flatMap((e) => e.deltas),
      deltasOf(HELPER_ANSWER),
    );
    for (const e of parentEvents) assert.deepEqual(e.path, [id]);
    for (const e of childEvents) assert.deepEqual(e.path, [id, child]);
    assert.equal(new Set(parentEvents.map((e) => e.runId)).size, 1, "one run: the parent's message");
    assert.equal(new Set(childEvents.map((e) => e.runId)).size, 1, "one run: the subagent's");
    assert.notEqual(parentEvents[0]?.runId, childEvents[0]?.runId);
    // The parent's first turn, the whole subagent run, then the parent's second turn.
    assert.deepEqual(turns(seen.map((e) => e.agentId)), [id, child, id]);
    // 42 deltas read in one socket read cross the thread in far fewer messages than deltas.
    const childDeltas = childEvents.reduce((sum, e) => sum + e.deltas.length, 0);
    assert.ok(
      childEvents.length * 4 <= childDeltas,
      `${childDeltas} deltas came in ${childEvents.length} host messages`,
    );
  });

  it('a burst read in one go crosses in messages of at most 64 deltas, in order', async (t) => {
    const id = fresh();
    const child = `${id}-sub-1`;
    const long = [
      ...Array.from({ length: 300 }, (_, i) => text(`d${i} `, 'served-helper')),
      finish('stop', 'served-helper'),
      usage(30, 300),
    ];
    server.script(burst(LEAD_TURN_1), burst(long), burst(LEAD_TURN_2));
    const seen = record(supervisor, 'model.delta', t);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const reply = await lead.send('What is 6 x 7?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const childEvents = seen.filter((e) => e.agentId === child);
    assert.deepEqual(
      childEvents.flatMap((e) => e.deltas),
      deltasOf(long),
    );
    assert.ok(
      childEvents.every((e) => e.deltas.length <= 64),
      `batches of ${childEvents.map((e) => e.deltas.length).join(', ')}`,
    );
    assert.ok(childEvents.length >= 5, `${childEvents.length} messages for 300 deltas`);
  });

  it('agent.stream(): the parent’s own tokens and its subagent’s under it, then the reply', async () => {
    const id = fresh();
    const child = `${id}-sub-1`;
    server.script(burst(LEAD_TURN_1), burst(HELPER_ANSWER), burst(LEAD_TURN_2));
    assert.equal(supervisor.listenerCount('model.delta'), 0, 'only the stream listens');
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const stream = lead.stream('What is 6 x 7?');
    const chunks: StreamChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const reply = await stream.reply;
    assert.equal(reply.status, 'done', JSON.stringify(reply));

    const strip = ({ agentId: _a, runId: _r, path: _p, ...delta }: StreamChunk): ModelDelta => delta as ModelDelta;
    const own = chunks.filter((c) => c.agentId === id);
    const under = chunks.filter((c) => c.agentId === child);
    assert.equal(own.length + under.length, chunks.length);
    assert.deepEqual(own.map(strip), deltasOf(LEAD_TURN_1, LEAD_TURN_2));
    assert.deepEqual(under.map(strip), deltasOf(HELPER_ANSWER));
    for (const c of own) assert.deepEqual(c.path, [id]);
    for (const c of under) assert.deepEqual(c.path, [id, child]);
    assert.deepEqual(turns(chunks.map((c) => c.agentId)), [id, child, id]);
    assert.equal(
      under
        .filter((c) => c.type === 'text')
        .map((c) => (c.type === 'text' ? c.text : ''))
        .join(''),
      Array.from({ length: 40 }, (_, i) => `w${i} `).join(''),
    );
  });

  it('model.start/stop: model, tokens (cached, reasoning), latency, time to first token, attempts; usage rolls up', async (t) => {
    const id = fresh();
    const child = `${id}-sub-1`;
    const THINK_MS = 40;
    server.script(
      burst(LEAD_TURN_1),
      // The subagent's first attempt is refused (retried at once: no backoff), the second thinks first.
      (res) => json(res, 503, { error: { message: 'overloaded' } }),
      thinking(THINK_MS, HELPER_ANSWER),
      thinking(THINK_MS, LEAD_TURN_2),
    );
    const starts = record(supervisor, 'model.start', t) as WithRun<Payload<'model.start'>>[];
    const stops = record(supervisor, 'model.stop', t) as WithRun<Payload<'model.stop'>>[];
    const errors = record(supervisor, 'model.error', t);
    const done = next(supervisor, 'subagent.done', (e) => e.agentId === child);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const reply = await lead.send('What is 6 x 7?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.equal(errors.length, 0, 'a retried attempt is not a failed call');

    assert.deepEqual(
      starts.map((e) => [e.agentId, e.path, e.model, e.provider, e.turn]),
      [
        [id, [id], agents.LEAD_MODEL, 'openai-compatible', 1],
        [child, [id, child], agents.HELPER_MODEL, 'openai-compatible', 1],
        [id, [id], agents.LEAD_MODEL, 'openai-compatible', 2],
      ],
    );
    assert.deepEqual(
      stops.map((e) => [e.agentId, e.path, e.model, e.responseModel, e.attempts, e.finishReason, e.toolCalls]),
      [
        [id, [id], agents.LEAD_MODEL, 'served-lead', 1, 'tool_calls', 1],
        [child, [id, child], agents.HELPER_MODEL, 'served-helper', 2, 'stop', 0],
        [id, [id], agents.LEAD_MODEL, 'served-lead', 1, 'stop', 0],
      ],
    );
    const [first, helperStop, second] = stops;
    assert.deepEqual(first?.usage, { inputTokens: 100, outputTokens: 20, cachedInputTokens: 64, reasoningTokens: 5 });
    assert.deepEqual(helperStop?.usage, HELPER_USAGE);
    assert.deepEqual(second?.usage, { inputTokens: 150, outputTokens: 10, cachedInputTokens: 100 });
    for (const stop of stops) {
      const ttft = stop.timeToFirstTokenMs;
      assert.ok(typeof ttft === 'number' && ttft >= 0, `time to first token: ${ttft}`);
      assert.ok(Number.isFinite(stop.durationMs) && stop.durationMs >= ttft, `latency ${stop.durationMs} ≥ ${ttft}`);
    }
    // The server held the first chunk back: the time to it is measured from the call, across the retry too.
    for (const stop of [helperStop, second]) {
      assert.ok((stop?.timeToFirstTokenMs ?? 0) >= THINK_MS - 1, `ttft ${stop?.timeToFirstTokenMs} ms`);
    }

    // Usage: the parent's own calls, and its tree's (its own + the subagent's).
    assert.deepEqual(reply.usage, LEAD_USAGE);
    assert.deepEqual(reply.totalUsage, {
      inputTokens: LEAD_USAGE.inputTokens + HELPER_USAGE.inputTokens,
      outputTokens: LEAD_USAGE.outputTokens + HELPER_USAGE.outputTokens,
      cachedInputTokens: 164,
      reasoningTokens: 5 + 8,
    });
    const childDone = await done;
    assert.deepEqual(childDone.usage, HELPER_USAGE);
    assert.deepEqual(childDone.totalUsage, HELPER_USAGE);
    assert.deepEqual(lead.snapshot().totalUsage, reply.totalUsage);
  });

  it('model.error: a refused key in the worker and an exhausted retry budget here, with attempts and a typed error', async (t) => {
    const id = fresh();
    const child = `${id}-sub-1`;
    server.script(
      burst(LEAD_TURN_1),
      (res) => json(res, 401, { error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } }),
      textAnswer('the helper could not answer'),
      (res) => json(res, 500, { error: { message: 'boom' } }),
      (res) => json(res, 500, { error: { message: 'boom again' } }),
    );
    const errors = record(supervisor, 'model.error', t) as WithRun<Payload<'model.error'>>[];
    const failed = next(supervisor, 'subagent.failed', (e) => e.agentId === child);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const reply = await lead.send('What is 6 x 7?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const childFailure = await failed;
    assert.ok(isTroupeError(childFailure.error, 'ERR_MODEL_AUTH'), String(childFailure.error));
    const toolResult = toolResultOf(server.received[2]?.body);
    assert.match(toolResult?.content ?? '', /ERR_MODEL_AUTH/);

    const second = await lead.send('Again?');
    assert.equal(second.status, 'failed', JSON.stringify(second));
    assert.ok(isTroupeError(second.status === 'failed' ? second.error : undefined, 'ERR_MODEL'));

    assert.equal(errors.length, 2, JSON.stringify(errors));
    const [inWorker, here] = errors;
    assert.deepEqual(
      [inWorker?.agentId, inWorker?.path, inWorker?.model, inWorker?.attempts, inWorker?.cancelled, inWorker?.turn],
      [child, [id, child], agents.HELPER_MODEL, 1, false, 1],
    );
    // Rebuilt on this side of the thread: the same class, code and fields.
    const workerError = inWorker?.error as { name: string; status: number; message: string };
    assert.ok(isTroupeError(workerError, 'ERR_MODEL_AUTH'), String(workerError));
    assert.equal(workerError.name, 'ModelError');
    assert.equal(workerError.status, 401);
    assert.match(workerError.message, /check apiKey/);
    assert.deepEqual(
      [here?.agentId, here?.path, here?.model, here?.attempts, here?.cancelled],
      [id, [id], agents.LEAD_MODEL, 2, false],
    );
    assert.ok(isTroupeError(here?.error, 'ERR_MODEL'), String(here?.error));
    for (const e of errors) assert.ok(Number.isFinite(e.durationMs) && e.durationMs >= 0);
  });

  it('a cancel of the subagent mid-stream closes its socket; it ends cancelled and its parent goes on', async (t) => {
    const id = fresh();
    const child = `${id}-sub-1`;
    server.script(burst(LEAD_TURN_1), holding('partial', 'served-helper'), textAnswer('the helper was stopped'));
    const errors = record(supervisor, 'model.error', t) as WithRun<Payload<'model.error'>>[];
    const firstToken = next(supervisor, 'model.delta', (e) => e.agentId === child);
    const cancelled = next(supervisor, 'subagent.cancelled', (e) => e.agentId === child);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const replied = lead.send('What is 6 x 7?');
    const token = await firstToken;
    assert.deepEqual(token.deltas, [{ type: 'text', text: 'partial' }]);
    const held = await server.request(2);
    assert.equal(held.body.model, agents.HELPER_MODEL);
    assert.equal(supervisor.cancel(child, 'user'), true);
    await held.socketClosed;
    const outcome = await cancelled;
    assert.equal(outcome.reason, 'user');
    assert.equal(outcome.forced, false, 'the model call stopped by itself: no worker was killed');
    const reply = await replied;
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    const toolResult = toolResultOf(server.received[2]?.body);
    assert.match(toolResult?.content ?? '', /ERR_CANCELLED/);
    const childError = errors.find((e) => e.agentId === child);
    assert.equal(childError?.cancelled, true, JSON.stringify(errors));
  });

  it('a cancel of the parent mid-stream (its own tokens) closes its socket; the reply is cancelled', async (t) => {
    const id = fresh();
    server.script(holding('Let me', 'served-lead'));
    const errors = record(supervisor, 'model.error', t) as WithRun<Payload<'model.error'>>[];
    const firstToken = next(supervisor, 'model.delta', (e) => e.agentId === id);
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const replied = lead.send('What is 6 x 7?');
    const token = await firstToken;
    assert.deepEqual(token.deltas, [{ type: 'text', text: 'Let me' }]);
    const held = await server.request(1);
    assert.equal(supervisor.cancel(id, 'user'), true);
    await held.socketClosed;
    const reply = await replied;
    assert.equal(reply.status, 'cancelled', JSON.stringify(reply));
    assert.equal(reply.status === 'cancelled' ? reply.reason : '', 'user');
    assert.equal(server.received.length, 1);
    assert.deepEqual(
      errors.map((e) => [e.agentId, e.cancelled]),
      [[id, true]],
    );
  });

  it('a cancel of the parent while its subagent streams closes the subagent’s socket; the reply is cancelled', async () => {
    const id = fresh();
    const child = `${id}-sub-1`;
    server.script(burst(LEAD_TURN_1), holding('partial', 'served-helper'));
    const lead = await supervisor.startAgent(agents.lead, { agentId: id, scope });
    const stream = lead.stream('What is 6 x 7?');
    const cancelled = next(supervisor, 'subagent.cancelled', (e) => e.agentId === child);
    const chunks: StreamChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      // The subagent's first token reached the host through the stream: cancel the whole message.
      if (chunk.agentId === child) assert.equal(lead.cancel('user'), true);
    }
    const held = await server.request(2);
    await held.socketClosed;
    const reply = await stream.reply;
    assert.equal(reply.status, 'cancelled', JSON.stringify(reply));
    assert.equal(reply.status === 'cancelled' ? reply.reason : '', 'user');
    assert.equal((await cancelled).reason, 'parent');
    assert.deepEqual(
      chunks.filter((c) => c.agentId === child).map((c) => (c.type === 'text' ? c.text : c.type)),
      ['partial'],
    );
    assert.equal(server.received.length, 2, 'the parent did not call its model again');
  });
});
