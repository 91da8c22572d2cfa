// Structured output through aiSdkModel (issue 32): an agent's `output` schema
// goes to the provider as its JSON `responseFormat` — seen by the AI SDK's mock
// model as the specification passes it, and by a server of the test's speaking
// Anthropic's Messages API as what @ai-sdk/anthropic makes of it (its native
// output format, or its own JSON tool when its options ask for that) — and the answer comes back as the reply's typed `output`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { type AiSdkModelOptions, aiSdkModel } from '@troupe/ai-sdk';
import { defineAgent, OUTPUT_NAME } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { ChatServer } from '../openai/chatServer.js';
import { BASE_URL_VARIABLE, Forecast } from './anthropicAgents.js';
import { anthropicAnswer, anthropicText } from './anthropicWire.js';

/** The JSON Schema core makes of `Forecast`: what the provider is given. */
const FORECAST_SCHEMA = defineAgent({
  name: 'schema',
  instructions: '',
  model: { generate: () => Promise.reject(new Error('unused')) },
  output: Forecast,
}).output?.spec.schema;

/** The forecast's schema as the provider sent it (Anthropic's package drops `$schema` and closes objects). */
function assertForecastSchema(value: unknown): void {
  const sent = value as { properties?: unknown; required?: unknown; type?: unknown } | undefined;
  const schema = FORECAST_SCHEMA as { properties: unknown; required: unknown };
  assert.equal(sent?.type, 'object', JSON.stringify(sent));
  assert.deepEqual(sent?.properties, schema.properties);
  assert.deepEqual(sent?.required, schema.required);
}

/** A mock model answering `text` to every call, recording what it was asked. */
function mockAnswering(text: string): MockLanguageModelV4 {
  const parts: LanguageModelV4StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    {
      type: 'finish',
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: { total: 5, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 2, text: undefined, reasoning: undefined },
      },
    },
  ];
  return new MockLanguageModelV4({
    modelId: 'mock-1',
    doStream: async () => ({ stream: convertArrayToReadableStream([...parts]) }),
  });
}

describe('structured output with aiSdkModel: the AI SDK mock model', () => {
  it('an agent’s output schema is the call’s JSON responseFormat, and the answer its typed output', async () => {
    const language = mockAnswering('{"city":"Oslo","tempC":4}');
    const agent = defineAgent({
      name: 'forecast',
      instructions: 'Forecast.',
      model: aiSdkModel(language),
      output: Forecast,
    });
    await using supervisor = createSupervisor({ persistence: null });
    const reply = await (await supervisor.startAgent(agent, { scope: {} })).send('Oslo?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    if (reply.status === 'done') {
      const tempC: number = reply.output.tempC;
      assert.deepEqual(reply.output, { city: 'Oslo', tempC: 4 });
      assert.equal(tempC, 4);
    }
    assert.deepEqual(language.doStreamCalls[0]?.responseFormat, {
      type: 'json',
      schema: FORECAST_SCHEMA,
      name: OUTPUT_NAME,
    });
  });

  it('without an output schema, or with structuredOutput: none, no responseFormat is sent (the loop still checks)', async () => {
    const plain = mockAnswering('hello');
    await using supervisor = createSupervisor({ persistence: null });
    const chat = defineAgent({ name: 'chat', instructions: 'Chat.', model: aiSdkModel(plain) });
    assert.equal((await (await supervisor.startAgent(chat, { scope: {} })).send('hi')).status, 'done');
    assert.equal(plain.doStreamCalls[0]?.responseFormat, undefined);

    const unasked = mockAnswering('{"city":"Oslo","tempC":"warm"}');
    const agent = defineAgent({
      name: 'unasked',
      instructions: 'Forecast as JSON.',
      model: aiSdkModel(unasked, { structuredOutput: 'none' }),
      output: Forecast,
      outputRetries: 0,
    });
    const reply = await (await supervisor.startAgent(agent, { scope: {} })).send('Oslo?');
    assert.equal(unasked.doStreamCalls[0]?.responseFormat, undefined);
    assert.equal(reply.status, 'failed');
    assert.match(reply.status === 'failed' ? reply.error.message : '', /tempC/);
  });
});

describe('structured output with aiSdkModel: @ai-sdk/anthropic against a Messages API server', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  before(async () => {
    server = await ChatServer.start();
    supervisor = createSupervisor({ persistence: null, pool: { threads: 1 } });
    await supervisor.ready();
  });
  after(async () => {
    await supervisor.destroy();
    delete process.env[BASE_URL_VARIABLE];
    await server.close();
  });

  const anthropicOn = (options: Partial<AiSdkModelOptions> = {}) =>
    aiSdkModel(createAnthropic({ apiKey: 'sk-ant', baseURL: server.baseURL })('claude-sonnet-4-5'), {
      maxAttempts: 1,
      maxOutputTokens: 1024,
      ...options,
    });

  it('a model with native structured output gets the schema as its output format', async () => {
    server.reset();
    server.script(anthropicText('{"city":"Oslo","tempC":4}'));
    const agent = defineAgent({
      name: 'native',
      instructions: 'Forecast.',
      model: anthropicOn(),
      output: Forecast,
    });
    const reply = await (await supervisor.startAgent(agent, { scope: {} })).send('Oslo?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.deepEqual(reply.status === 'done' ? reply.output : undefined, { city: 'Oslo', tempC: 4 });
    const body = server.received[0]?.body;
    assert.equal(body.output_config?.format?.type, 'json_schema', JSON.stringify(body));
    assertForecastSchema(body.output_config.format.schema);
    assert.equal(body.tools, undefined, 'no tool stands in for the format');
  });

  it('asked for the provider’s JSON tool instead (its own option), the tool’s call comes back as the answer', async () => {
    server.reset();
    server.script(
      anthropicAnswer({ toolUse: { id: 'toolu_1', name: 'json', inputPieces: ['{"city":"Oslo",', '"tempC":4}'] } }),
    );
    const agent = defineAgent({
      name: 'tooled',
      instructions: 'Forecast.',
      model: anthropicOn({ providerOptions: { anthropic: { structuredOutputMode: 'jsonTool' } } }),
      output: Forecast,
    });
    const reply = await (await supervisor.startAgent(agent, { scope: {} })).send('Oslo?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.deepEqual(reply.status === 'done' ? reply.output : undefined, { city: 'Oslo', tempC: 4 });
    const body = server.received[0]?.body;
    assert.equal(body.output_config?.format, undefined, JSON.stringify(body));
    const json = (body.tools as { name: string; input_schema: unknown }[]).find((t) => t.name === 'json');
    assertForecastSchema(json?.input_schema);
  });

  it('in a worker, with the model made by a model factory there: the output crosses back typed', async () => {
    // Set after the worker started: the factory reads it when the agent first runs there.
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    const { forecaster } = await import('./anthropicAgents.js');
    server.reset();
    server.script(anthropicText('{"city":"Bergen","tempC":7}'));
    const outcome = await supervisor.spawn(forecaster, { input: 'Bergen?', scope: {} });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    if (outcome.status === 'done') {
      const city: string = outcome.output.city;
      assert.equal(city, 'Bergen');
    }
    assertForecastSchema(server.received[0]?.body.output_config?.format?.schema);
  });
});
