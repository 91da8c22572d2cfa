// openaiModel against a chat-completions server on 127.0.0.1: what it sends,
// what it makes of what real servers stream back, and what it reports.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defineTool, type Message, type ModelDelta, type ModelRequest } from '@troupe/core';
import { MISSING_RESULT, normaliseChunks, openaiModel } from '@troupe/openai';
import { z } from 'zod';
import { ChatServer, chunksOf, fixture, json, replay, sse, textAnswer, textChunk } from './chatServer.js';

const weather = defineTool({
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: z.object({ city: z.string(), unit: z.enum(['c', 'f']).optional() }),
  execute: () => 'sunny',
});

function request(messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest {
  return { messages, tools: [], signal: new AbortController().signal, ...extra };
}

const hi: Message[] = [{ role: 'user', content: 'hi' }];

describe('openaiModel: streaming', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('streams text: onDelta in order, usage with cached tokens, call info', async () => {
    server.script(replay(fixture('openai-text.sse')));
    const deltas: ModelDelta[] = [];
    const model = openaiModel({ model: 'gpt-4.1-mini', baseURL: server.baseURL, apiKey: 'sk-test' });
    const response = await model.generate(request(hi, { onDelta: (d) => deltas.push(d) }));
    assert.deepEqual(response.message, { role: 'assistant', content: 'Hello, world!' });
    assert.deepEqual(
      deltas.map((d) => (d.type === 'text' ? d.text : d.type)),
      ['Hello', ', world', '!'],
    );
    assert.deepEqual(response.usage, {
      inputTokens: 1234,
      outputTokens: 5,
      cachedInputTokens: 1024,
      reasoningTokens: 0,
    });
    assert.equal(response.info?.model, 'gpt-4.1-mini-2025-04-14');
    assert.equal(response.info?.attempts, 1);
    assert.equal(response.info?.finishReason, 'stop');
    assert.equal(typeof response.info?.timeToFirstTokenMs, 'number');
    assert.ok((response.info?.timeToFirstTokenMs ?? -1) >= 0);
    assert.equal(model.name, 'gpt-4.1-mini');
    assert.equal(model.provider, 'openai-compatible');
  });

  it('sends the chat-completions request: model, messages, tools, usage in the stream, the key', async () => {
    server.script(textAnswer('ok'));
    const model = openaiModel({
      model: 'm1',
      baseURL: server.baseURL,
      apiKey: 'sk-test',
      headers: { 'x-team': 'blue' },
      temperature: 0.2,
      parallelToolCalls: true,
      extraBody: { max_tokens: 64, model: 'overridden' },
    });
    await model.generate(request([{ role: 'system', content: 'be brief' }, ...hi], { tools: [weather.spec] }));
    const got = server.received.at(-1);
    assert.equal(got?.method, 'POST');
    assert.equal(got?.url, '/v1/chat/completions');
    assert.equal(got?.headers.authorization, 'Bearer sk-test');
    assert.equal(got?.headers['x-team'], 'blue');
    assert.equal(got?.headers['x-stainless-retry-count'], '0');
    assert.deepEqual(got?.body.messages, [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ]);
    assert.equal(got?.body.model, 'm1', 'the fields Troupe sets win over extraBody');
    assert.equal(got?.body.max_tokens, 64);
    assert.equal(got?.body.stream, true);
    assert.deepEqual(got?.body.stream_options, { include_usage: true });
    assert.equal(got?.body.temperature, 0.2);
    assert.equal(got?.body.parallel_tool_calls, true);
    assert.deepEqual(got?.body.tools, [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'The weather in a city',
          parameters: {
            type: 'object',
            properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
            required: ['city'],
            additionalProperties: false,
          },
        },
      },
    ]);
  });

  it('a server without keys: no Authorization header, no tools field when there are none', async () => {
    server.script(textAnswer('ok'));
    const model = openaiModel({ model: 'llama3.2', baseURL: server.baseURL });
    await model.generate(request(hi));
    const got = server.received.at(-1);
    assert.equal(got?.headers.authorization, undefined);
    assert.equal('tools' in (got?.body ?? {}), false);
    assert.equal('parallel_tool_calls' in (got?.body ?? {}), false);
  });

  it('a single tool call, then the tool result goes back with its id', async () => {
    server.script(
      sse([
        {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  { index: 0, id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
                ],
              },
            },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      ]),
      textAnswer('It is sunny in Oslo.'),
    );
    const model = openaiModel({ model: 'm', baseURL: server.baseURL });
    const first = await model.generate(request(hi, { tools: [weather.spec] }));
    assert.deepEqual(first.message.toolCalls, [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }]);
    assert.equal(first.info?.finishReason, 'tool_calls');
    const history: Message[] = [
      ...hi,
      first.message,
      { role: 'tool', toolCallId: 'call_1', name: 'get_weather', content: { sky: 'sunny' }, isError: false },
    ];
    const second = await model.generate(request(history, { tools: [weather.spec] }));
    assert.equal(second.message.content, 'It is sunny in Oslo.');
    assert.deepEqual(server.received.at(-1)?.body.messages.slice(1), [
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"sky":"sunny"}' },
    ]);
  });

  it('a dangling tool call in the history is answered with an error result; an orphan result is left out', async () => {
    server.script(textAnswer('ok'));
    const model = openaiModel({ model: 'm', baseURL: server.baseURL });
    const history: Message[] = [
      ...hi,
      {
        role: 'assistant',
        content: 'checking',
        toolCalls: [
          { id: 'a', name: 'get_weather', arguments: { city: 'Rome' } },
          { id: 'b', name: 'get_weather', arguments: '{"city": broken' },
        ],
      },
      { role: 'tool', toolCallId: 'b', name: 'get_weather', content: { error: 'bad JSON' }, isError: true },
      { role: 'tool', toolCallId: 'zzz', name: 'get_weather', content: 'orphan', isError: false },
      { role: 'user', content: 'and?' },
    ];
    await model.generate(request(history));
    assert.deepEqual(server.received.at(-1)?.body.messages.slice(1), [
      {
        role: 'assistant',
        content: 'checking',
        tool_calls: [
          { id: 'a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
          { id: 'b', type: 'function', function: { name: 'get_weather', arguments: '{"city": broken' } },
        ],
      },
      { role: 'tool', tool_call_id: 'a', content: JSON.stringify(MISSING_RESULT) },
      { role: 'tool', tool_call_id: 'b', content: '{"error":"bad JSON"}' },
      { role: 'user', content: 'and?' },
    ]);
  });

  for (const name of [
    'openai-parallel-tools.sse',
    'ollama-tools.sse',
    'ollama-noid-tools.sse',
    'vllm-tools.sse',
    'llamacpp-tools.sse',
  ]) {
    it(`over HTTP, ${name} gives what the normaliser makes of it, deltas included`, async () => {
      const raw = fixture(name);
      server.script(replay(raw));
      const deltas: ModelDelta[] = [];
      const model = openaiModel({ model: 'm', baseURL: server.baseURL });
      const response = await model.generate(request(hi, { tools: [weather.spec], onDelta: (d) => deltas.push(d) }));
      // Ids the server did not send are made fresh per call: the expected answer takes the same ones.
      const expected = normaliseChunks(chunksOf(raw), { idFor: (i) => response.message.toolCalls?.[i]?.id ?? '?' });
      assert.deepEqual(response.message, expected.answer.message);
      assert.deepEqual(response.usage, expected.answer.usage);
      assert.equal(response.reasoning, expected.answer.reasoning);
      assert.deepEqual(deltas, expected.deltas);
      assert.ok(response.message.toolCalls !== undefined && response.message.toolCalls.length > 0);
    });
  }

  it('stream: false asks for one JSON answer (llama.cpp shape) and calls no onDelta', async () => {
    server.script((res) => json(res, 200, JSON.parse(fixture('llamacpp-completion.json'))));
    const deltas: ModelDelta[] = [];
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, stream: false });
    const response = await model.generate(request(hi, { onDelta: (d) => deltas.push(d) }));
    assert.equal(server.received.at(-1)?.body.stream, false);
    assert.equal('stream_options' in (server.received.at(-1)?.body ?? {}), false);
    assert.deepEqual(response.message.toolCalls, [{ id: 'xY7zW1', name: 'get_weather', arguments: { city: 'Quito' } }]);
    assert.equal(response.reasoning, 'One lookup.');
    assert.equal(response.info?.timeToFirstTokenMs, undefined);
    assert.deepEqual(deltas, []);
  });

  it('strictTools: strict, nullable optional fields; the nulls the model sends for them are dropped', async () => {
    server.script(
      sse([
        {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  { index: 0, id: 'c', function: { name: 'get_weather', arguments: '{"city":"Nice","unit":null}' } },
                ],
              },
            },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      ]),
    );
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, strictTools: true });
    const response = await model.generate(request(hi, { tools: [weather.spec] }));
    const fn = server.received.at(-1)?.body.tools[0].function;
    assert.equal(fn.strict, true);
    assert.deepEqual(fn.parameters.required, ['city', 'unit']);
    assert.deepEqual(fn.parameters.properties.unit, {
      anyOf: [{ type: 'string', enum: ['c', 'f'] }, { type: 'null' }],
    });
    assert.deepEqual(response.message.toolCalls, [{ id: 'c', name: 'get_weather', arguments: { city: 'Nice' } }]);
    assert.deepEqual(weather.parameters.parse(response.message.toolCalls?.[0]?.arguments), { city: 'Nice' });
  });

  it('reasoning deltas reach onDelta before the answer text', async () => {
    server.script(
      sse([
        { choices: [{ index: 0, delta: { reasoning_content: 'think' } }] },
        textChunk('done'),
        { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      ]),
    );
    const deltas: ModelDelta[] = [];
    const model = openaiModel({ model: 'm', baseURL: server.baseURL });
    const response = await model.generate(request(hi, { onDelta: (d) => deltas.push(d) }));
    assert.deepEqual(deltas, [
      { type: 'reasoning', text: 'think' },
      { type: 'text', text: 'done' },
    ]);
    assert.equal(response.reasoning, 'think');
  });
});
