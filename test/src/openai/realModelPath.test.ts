// The real-model path through the supervisor, against a server on 127.0.0.1
// that never answers or streams a long answer: a spawn's deadline, a send's
// signal and close() each end the call and close its socket; a slow consumer
// of agent.stream() loses nothing (text merged past the high-water mark, tool
// call fragments kept in order, multi-byte characters intact).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSupervisor, type StreamChunk, type Supervisor } from '@troupe/supervisor';
import { ChatServer, event, finishChunk, startSse, textChunk } from './chatServer.js';

const BASE_URL_VARIABLE = 'TROUPE_TEST_CHAT_BASE_URL';

describe('the real-model path: deadlines, cancels, close and a slow consumer', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  let agents: typeof import('./serverAgents.js');
  before(async () => {
    server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    agents = await import('./serverAgents.js');
    supervisor = createSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await supervisor?.close({ timeoutMs: 5000 });
    await server?.close();
  });

  it("a worker's model on a server that never answers: the spawn's deadline ends it and closes the socket", async () => {
    server.reset();
    server.script(() => {}); // headers never come
    const outcome = supervisor.spawn(agents.worker, { input: 'go', scope: {}, timeoutMs: 3000 });
    const received = await server.request(1);
    const ended = await outcome;
    assert.equal(ended.status, 'cancelled');
    assert.ok(ended.status === 'cancelled' && ended.reason === 'deadline');
    await received.socketClosed; // the worker's socket is closed, not left to the server's timeout
  });

  it("a parent's model on a server that never answers: the send's signal ends it and closes the socket", async () => {
    server.reset();
    server.script(() => {});
    const agent = await supervisor.startAgent(agents.lead, { scope: {} });
    const controller = new AbortController();
    const reply = agent.send('hi', { signal: controller.signal });
    const received = await server.request(1);
    controller.abort();
    const ended = await reply;
    assert.equal(ended.status, 'cancelled');
    await received.socketClosed;
    await supervisor.stopAgent(agent.id);
  });

  it('close() with a parent and a subagent waiting on a silent server: both calls end, both sockets close', async () => {
    const local = createSupervisor({ pool: { threads: 1 } });
    server.reset();
    server.script(
      () => {},
      () => {},
    );
    const agent = await local.startAgent(agents.lead, { scope: {} });
    const reply = agent.send('hi');
    const spawned = local.spawn(agents.worker, { input: 'go', scope: {} });
    const [first, second] = await Promise.all([server.request(1), server.request(2)]);
    await local.close({ timeoutMs: 100 });
    assert.equal((await reply).status, 'cancelled');
    assert.equal((await spawned).status, 'cancelled');
    await Promise.all([first.socketClosed, second.socketClosed]);
  });

  it('a slow consumer of agent.stream() reads after the reply: every delta, in order, characters intact', async () => {
    server.reset();
    const words = Array.from({ length: 300 }, (_, i) => `w${i}é `);
    const args = JSON.stringify({ note: 'naïve ☃ 😀 note', tags: ['a', 'b'] });
    const taskArgs = JSON.stringify({ subagent: 'fc-worker', instructions: 'record it' });
    const fragment = (index: number, piece: string, first?: { id: string; name: string }) => ({
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              first === undefined
                ? { index, function: { arguments: piece } }
                : { index, id: first.id, type: 'function', function: { name: first.name, arguments: piece } },
            ],
          },
        },
      ],
    });
    server.script(
      (res) => {
        startSse(res);
        [...taskArgs].forEach((ch, i) => {
          event(res, fragment(0, ch, i === 0 ? { id: 'call_task', name: 'task' } : undefined));
        });
        event(res, finishChunk('tool_calls'));
        res.end('data: [DONE]\n\n');
      },
      (res) => {
        startSse(res);
        for (const w of words) event(res, textChunk(w));
        // The arguments one character a chunk: split inside the emoji's UTF-16 pair too.
        const pieces = [
          ...args.slice(0, args.indexOf('😀')).split(''),
          '\ud83d',
          '\ude00',
          ...args.slice(args.indexOf('😀') + 2).split(''),
        ];
        pieces.forEach((p, i) => {
          event(res, fragment(0, p, i === 0 ? { id: 'call_rec', name: 'record' } : undefined));
        });
        event(res, finishChunk('tool_calls'));
        res.end('data: [DONE]\n\n');
      },
      (res) => {
        startSse(res);
        for (const w of words) event(res, textChunk(w.toUpperCase()));
        event(res, finishChunk());
        event(res, {
          choices: [],
          usage: {
            prompt_tokens: 3,
            completion_tokens: 4,
            prompt_tokens_details: { cached_tokens: 2 },
            completion_tokens_details: { reasoning_tokens: 1 },
          },
        });
        res.end('data: [DONE]\n\n');
      },
      (res) => {
        startSse(res);
        event(res, textChunk('lead done'));
        event(res, finishChunk());
        res.end('data: [DONE]\n\n');
      },
    );
    const agent = await supervisor.startAgent(agents.lead, { scope: {} });
    const stream = agent.stream('hi', { highWaterMark: 4 });
    const reply = await stream.reply; // nothing read until the whole tree has answered
    assert.equal(reply.status, 'done');
    const chunks: StreamChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const of = (depth: number, type: StreamChunk['type']) =>
      chunks.filter((c) => c.path.length === depth && c.type === type);
    const text = (cs: StreamChunk[]) => cs.map((c) => (c as { text: string }).text).join('');
    const toolArgs = (cs: StreamChunk[]) => cs.map((c) => (c as { arguments?: string }).arguments ?? '').join('');
    assert.equal(
      text(of(2, 'text')),
      words.join('') + words.join('').toUpperCase(),
      "the worker's text, whole and in order",
    );
    assert.equal(toolArgs(of(2, 'tool_call')), args, "the worker's tool-call fragments, in order");
    assert.equal(toolArgs(of(1, 'tool_call')), taskArgs, "the lead's task-call fragments, in order");
    assert.equal(text(of(1, 'text')), 'lead done');
    // The tool got exactly what was streamed, and its result went back to the model with its id.
    const third = (await server.request(3)).body.messages.at(-1);
    assert.deepEqual(third, { role: 'tool', tool_call_id: 'call_rec', content: args });
    assert.deepEqual(reply.totalUsage, { inputTokens: 3, outputTokens: 4, cachedInputTokens: 2, reasoningTokens: 1 });
    await supervisor.stopAgent(agent.id);
  });
});
