// A real provider package, @ai-sdk/anthropic, behind aiSdkModel, against a
// server of the test's on 127.0.0.1 that speaks Anthropic's Messages API
// (streamed events): the whole path from the provider's HTTP request, through
// a tool call run on a worker thread, to the answer — thinking signed and sent
// back, usage with cached tokens, deltas reaching the host in order — and the
// provider's errors typed and retried.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import { type AiSdkModelOptions, aiSdkModel, ModelError } from '@troupe/ai-sdk';
import { isTroupeError, type ModelDelta, type ModelRequest } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { ChatServer } from '../openai/chatServer.js';
import { RecordingClock } from '../openai/RecordingClock.js';
import { BASE_URL_VARIABLE } from './anthropicAgents.js';
import {
  anthropicAnswer,
  anthropicError,
  anthropicEvent,
  anthropicText,
  messageStart,
  textBlock,
} from './anthropicWire.js';

describe('@ai-sdk/anthropic in a worker, through aiSdkModel', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  let agents: typeof import('./anthropicAgents.js');
  before(async () => {
    server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    agents = await import('./anthropicAgents.js');
    supervisor = createSupervisor({ pool: { threads: 1 } });
  });
  after(async () => {
    await supervisor?.destroy();
    delete process.env[BASE_URL_VARIABLE];
    await server?.close();
  });

  it('the whole path: the request, streamed thinking, text and tool_use, the tool on the worker, the signed thinking and the result sent back', async () => {
    server.reset();
    server.script(
      anthropicAnswer({
        thinking: { text: 'Oslo: use lookup.', signature: 'sig-abc' },
        text: ['Let me ', 'look.'],
        toolUse: { id: 'toolu_1', name: 'lookup', inputPieces: ['{"city":', '"Oslo"}'] },
        usage: { input: 30, output: 12, cacheRead: 20, cacheWrite: 4 },
      }),
      anthropicAnswer({ text: ['21 °C ', 'in Oslo'], usage: { input: 80, output: 6 } }),
    );
    const deltas: ModelDelta[] = [];
    const onDelta = (e: { readonly deltas: readonly ModelDelta[] }): void => {
      deltas.push(...e.deltas);
    };
    supervisor.on('model.delta', onDelta);
    const outcome = await supervisor.spawn(agents.claudeAgent, { input: 'How warm is Oslo?', scope: {} });
    supervisor.off('model.delta', onDelta);
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    assert.equal(outcome.status === 'done' ? outcome.result : '', '21 °C in Oslo');

    // What the provider package sent first: its headers, the system prompt, the tool as input_schema.
    const first = server.received[0];
    assert.equal(first?.url, '/v1/messages');
    assert.equal(first?.headers['x-api-key'], 'sk-ant-worker');
    assert.ok(first?.headers['anthropic-version'] !== undefined);
    assert.equal(first?.body.model, 'claude-test');
    assert.equal(first?.body.stream, true);
    assert.equal(first?.body.max_tokens, 1024);
    assert.deepEqual(first?.body.system, [{ type: 'text', text: 'Answer with the temperature.' }]);
    assert.deepEqual(first?.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'How warm is Oslo?' }] }]);
    assert.deepEqual(
      first?.body.tools.map((t: { name: string; input_schema: unknown }) => [t.name, t.input_schema]),
      [
        [
          'lookup',
          { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
        ],
      ],
    );

    // The second: the thinking block with its signature (Anthropic requires it back), the call, its result.
    const second = server.received[1]?.body.messages;
    assert.equal(second?.length, 3);
    assert.deepEqual(second?.[1], {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'Oslo: use lookup.', signature: 'sig-abc' },
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { city: 'Oslo' } },
      ],
    });
    const result = second?.[2].content[0];
    assert.equal(result.type, 'tool_result');
    assert.equal(result.tool_use_id, 'toolu_1');
    const value = JSON.parse(typeof result.content === 'string' ? result.content : result.content[0].text);
    assert.equal(value.city, 'Oslo');
    assert.ok(value.threadId > 0, `the tool ran on worker thread ${value.threadId}, not the host's (0)`);

    // The deltas reached the host in the order the server sent them.
    assert.deepEqual(deltas.slice(0, 7), [
      { type: 'reasoning', text: 'Oslo: use lookup.' },
      { type: 'text', text: 'Let me ' },
      { type: 'text', text: 'look.' },
      { type: 'tool_call', index: 0, id: 'toolu_1', name: 'lookup' },
      { type: 'tool_call', index: 0, arguments: '{"city":' },
      { type: 'tool_call', index: 0, arguments: '"Oslo"}' },
      { type: 'text', text: '21 °C ' },
    ]);
    // Usage: input counts cache reads and writes (Anthropic reports them apart); cached ones are kept.
    if (outcome.status === 'done') {
      assert.deepEqual(outcome.usage, { inputTokens: 54 + 80, outputTokens: 18, cachedInputTokens: 20 });
    }
  });

  it('a refused key fails the run with ERR_MODEL_AUTH, rebuilt with its fields on this side of the thread', async () => {
    server.reset();
    server.script(anthropicError(401, 'authentication_error', 'invalid x-api-key'));
    const outcome = await supervisor.spawn(agents.claudeAgent, { input: 'How warm is Oslo?', scope: {} });
    assert.equal(outcome.status, 'failed');
    const error = outcome.status === 'failed' ? outcome.error : undefined;
    assert.ok(isTroupeError(error, 'ERR_MODEL_AUTH'), String(error));
    assert.equal(error.name, 'ModelError');
    assert.equal((error as unknown as ModelError).status, 401);
    assert.equal((error as unknown as ModelError).serverCode, 'authentication_error');
    assert.match(
      error.message,
      /anthropic\.messages \(model "claude-test" at http:\/\/127\.0\.0\.1:\d+\/v1\/messages\) refused the credentials \(401: invalid x-api-key\)/,
    );
  });

  it("an error event inside the stream: ERR_MODEL with Anthropic's error type", async () => {
    server.reset();
    server.script((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      messageStart(res);
      textBlock(res, 0, ['Hmm']);
      anthropicEvent(res, 'error', { error: { type: 'overloaded_error', message: 'Overloaded' } });
      res.end();
    });
    const outcome = await supervisor.spawn(agents.claudeAgent, { input: 'How warm is Oslo?', scope: {} });
    const error = outcome.status === 'failed' ? outcome.error : undefined;
    assert.ok(isTroupeError(error, 'ERR_MODEL'), String(error));
    assert.equal((error as unknown as ModelError).serverCode, 'overloaded_error');
    assert.match(error.message, /failed inside the stream: Overloaded/);
  });
});

describe('@ai-sdk/anthropic through aiSdkModel: retries on its errors', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());
  const hi: ModelRequest = {
    messages: [{ role: 'user', content: 'hi' }],
    tools: [],
    signal: new AbortController().signal,
  };
  const model = (clock: RecordingClock, options: AiSdkModelOptions = {}) =>
    aiSdkModel(createAnthropic({ apiKey: 'sk-ant-test', baseURL: server.baseURL })('claude-test'), {
      clock,
      random: () => 0.5,
      backoffBaseMs: 10,
      ...options,
    });

  it('429 (rate_limit_error) with retry-after: waits what Anthropic asked, then succeeds', async () => {
    server.reset();
    const clock = new RecordingClock();
    server.script(anthropicError(429, 'rate_limit_error', 'slow down', { 'retry-after': '0.02' }), anthropicText('ok'));
    const response = await model(clock).generate(hi);
    assert.equal(response.message.content, 'ok');
    assert.equal(response.info?.attempts, 2);
    assert.ok(clock.delays.includes(20), `delays: ${clock.delays.join(', ')}`);
  });

  it('529 (overloaded_error) is retried; past maxAttempts it is ERR_MODEL with the status and type', async () => {
    server.reset();
    server.script(
      anthropicError(529, 'overloaded_error', 'Overloaded'),
      anthropicError(529, 'overloaded_error', 'Overloaded'),
    );
    const error = await model(new RecordingClock(), { maxAttempts: 2 })
      .generate(hi)
      .then(
        () => assert.fail('succeeded'),
        (e: unknown) => e as ModelError,
      );
    assert.ok(error instanceof ModelError);
    assert.equal(error.code, 'ERR_MODEL');
    assert.equal(error.status, 529);
    assert.equal(error.serverCode, 'overloaded_error');
    assert.equal(error.attempts, 2);
    assert.equal(server.received.length, 2);
  });

  it('400 (invalid_request_error) is not retried: ERR_MODEL_BAD_REQUEST with what Anthropic said', async () => {
    server.reset();
    server.script(anthropicError(400, 'invalid_request_error', 'max_tokens: too large'));
    const error = await model(new RecordingClock())
      .generate(hi)
      .then(
        () => assert.fail('succeeded'),
        (e: unknown) => e as ModelError,
      );
    assert.equal(error.code, 'ERR_MODEL_BAD_REQUEST');
    assert.match(error.message, /max_tokens: too large/);
    assert.equal(server.received.length, 1);
  });

  it('a stream cut after the first delta: ERR_MODEL_CONNECTION, not retried (a delta was delivered)', async () => {
    server.reset();
    server.script((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      messageStart(res);
      anthropicEvent(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      anthropicEvent(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hal' } });
      // Cut once what was written is out (a cut before the headers would be a failure to connect).
      res.write('\n', () => res.socket?.destroy());
    });
    const deltas: ModelDelta[] = [];
    const error = await model(new RecordingClock())
      .generate({ ...hi, onDelta: (d) => deltas.push(d) })
      .then(
        () => assert.fail('succeeded'),
        (e: unknown) => e as ModelError,
      );
    assert.equal(error.code, 'ERR_MODEL_CONNECTION');
    assert.deepEqual(deltas, [{ type: 'text', text: 'Hal' }]);
    assert.equal(server.received.length, 1);
  });
});
