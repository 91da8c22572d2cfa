// aiSdkModel against the AI SDK's own mock language models (`ai/test`), which
// implement the provider specification exactly as provider packages do: the
// stream parts turned into Troupe's deltas and answer, the transcript and
// tools turned into the specification's prompt and function tools, usage and
// finish reasons, provider data kept for the next turn, errors typed and
// retried, and a version-3 model adapted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  APICallError,
  type LanguageModelV4StreamPart,
  type LanguageModelV4Usage,
  LoadAPIKeyError,
} from '@ai-sdk/provider';
import { type AiSdkModelOptions, aiSdkModel, MISSING_RESULT, ModelError } from '@troupe/ai-sdk';
import { defineTool, isTroupeError, type Message, type ModelDelta, type ModelRequest } from '@troupe/core';
import { decodeError, encodeError } from '@troupe/core/internal';
import { convertArrayToReadableStream, MockLanguageModelV3, MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import { RecordingClock } from '../openai/RecordingClock.js';

const usage = (
  input: number,
  output: number,
  extra: Partial<LanguageModelV4Usage['inputTokens']> = {},
  reasoning?: number,
): LanguageModelV4Usage => ({
  inputTokens: { total: input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined, ...extra },
  outputTokens: { total: output, text: undefined, reasoning },
});
const finish = (
  unified: 'stop' | 'tool-calls' | 'length' | 'interrupted' = 'stop',
  u = usage(5, 2),
): LanguageModelV4StreamPart => ({
  type: 'finish',
  finishReason: { unified, raw: unified },
  usage: u,
});
const streamOf = (parts: readonly LanguageModelV4StreamPart[]) => ({
  stream: convertArrayToReadableStream([...parts]),
});
const textParts = (text: string): LanguageModelV4StreamPart[] => [
  { type: 'stream-start', warnings: [] },
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: text },
  { type: 'text-end', id: 't' },
  finish(),
];

const hi: Message[] = [{ role: 'user', content: 'hi' }];
const request = (extra: Partial<ModelRequest> = {}): ModelRequest => ({
  messages: hi,
  tools: [],
  signal: new AbortController().signal,
  ...extra,
});

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ModelError, `expected a ModelError, got ${String(error)}`);
    assert.ok(!error.message.includes('\n'), `the message is one line: ${error.message}`);
    return error;
  }
  assert.fail('the call succeeded');
}

const lookup = defineTool({
  name: 'lookup',
  description: 'The temperature in a city',
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => ({ city, celsius: 21 }),
});

describe('aiSdkModel: the stream as Troupe sees it', () => {
  it('streams reasoning, text and tool-call deltas in order, and assembles the answer with usage and finish reason', async () => {
    const language = new MockLanguageModelV4({
      modelId: 'mock-1',
      doStream: streamOf([
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', modelId: 'mock-1-2026' },
        { type: 'reasoning-start', id: 'r' },
        { type: 'reasoning-delta', id: 'r', delta: 'Oslo, ' },
        { type: 'reasoning-delta', id: 'r', delta: 'so lookup' },
        { type: 'reasoning-delta', id: 'r', delta: '', providerMetadata: { mock: { signature: 'sig-1' } } },
        { type: 'reasoning-end', id: 'r' },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Let me ' },
        { type: 'text-delta', id: 't', delta: 'look.' },
        { type: 'text-end', id: 't' },
        { type: 'tool-input-start', id: 'call_1', toolName: 'lookup' },
        { type: 'tool-input-delta', id: 'call_1', delta: '{"city":' },
        { type: 'tool-input-delta', id: 'call_1', delta: '"Oslo"}' },
        { type: 'tool-input-end', id: 'call_1' },
        {
          type: 'tool-call',
          toolCallId: 'call_1',
          toolName: 'lookup',
          input: '{"city":"Oslo"}',
          providerMetadata: { mock: { thoughtSignature: 'ts-1' } },
        },
        finish('tool-calls', usage(120, 30, { noCache: 20, cacheRead: 100 }, 12)),
      ]),
    });
    const deltas: ModelDelta[] = [];
    const response = await aiSdkModel(language).generate(
      request({ tools: [lookup.spec], onDelta: (d) => deltas.push(d) }),
    );
    assert.deepEqual(deltas, [
      { type: 'reasoning', text: 'Oslo, ' },
      { type: 'reasoning', text: 'so lookup' },
      { type: 'text', text: 'Let me ' },
      { type: 'text', text: 'look.' },
      { type: 'tool_call', index: 0, id: 'call_1', name: 'lookup' },
      { type: 'tool_call', index: 0, arguments: '{"city":' },
      { type: 'tool_call', index: 0, arguments: '"Oslo"}' },
    ]);
    assert.deepEqual(response.message, {
      role: 'assistant',
      content: 'Let me look.',
      toolCalls: [
        {
          id: 'call_1',
          name: 'lookup',
          arguments: { city: 'Oslo' },
          providerData: {
            aiSdk: {
              providerOptions: { mock: { thoughtSignature: 'ts-1' } },
              reasoning: [{ text: 'Oslo, so lookup', providerOptions: { mock: { signature: 'sig-1' } } }],
            },
          },
        },
      ],
    });
    assert.deepEqual(response.usage, {
      inputTokens: 120,
      outputTokens: 30,
      cachedInputTokens: 100,
      reasoningTokens: 12,
    });
    assert.equal(response.reasoning, 'Oslo, so lookup');
    assert.equal(response.info?.model, 'mock-1-2026');
    assert.equal(response.info?.finishReason, 'tool_calls');
    assert.equal(response.info?.attempts, 1);
    assert.equal(typeof response.info?.timeToFirstTokenMs, 'number');
  });

  it('a call sent whole (no input fragments) is one tool_call delta; one the provider ran itself is not the agent’s', async () => {
    const language = new MockLanguageModelV4({
      doStream: streamOf([
        { type: 'tool-call', toolCallId: 'web_1', toolName: 'web_search', input: '{}', providerExecuted: true },
        { type: 'tool-result', toolCallId: 'web_1', toolName: 'web_search', result: { hits: 3 } },
        { type: 'tool-call', toolCallId: 'c2', toolName: 'lookup', input: '{"city":"Rome"}' },
        { type: 'tool-call', toolCallId: 'c3', toolName: 'lookup', input: '' },
        finish('tool-calls'),
      ]),
    });
    const deltas: ModelDelta[] = [];
    const response = await aiSdkModel(language).generate(
      request({ tools: [lookup.spec], onDelta: (d) => deltas.push(d) }),
    );
    assert.deepEqual(deltas, [
      { type: 'tool_call', index: 0, id: 'c2', name: 'lookup' },
      { type: 'tool_call', index: 0, arguments: '{"city":"Rome"}' },
      { type: 'tool_call', index: 1, id: 'c3', name: 'lookup' },
    ]);
    assert.deepEqual(response.message.toolCalls, [
      { id: 'c2', name: 'lookup', arguments: { city: 'Rome' } },
      { id: 'c3', name: 'lookup', arguments: {} },
    ]);
    // Reasoning no provider asked back is not kept: no providerData at all.
    assert.equal('providerData' in (response.message.toolCalls?.[0] ?? {}), false);
  });

  it('arguments that are not JSON are kept as text (the agent loop tells the model), never thrown', async () => {
    const language = new MockLanguageModelV4({
      doStream: streamOf([
        { type: 'tool-call', toolCallId: 'c', toolName: 'lookup', input: '{"city": Oslo' },
        finish('tool-calls'),
      ]),
    });
    const response = await aiSdkModel(language).generate(request({ tools: [lookup.spec] }));
    assert.equal(response.message.toolCalls?.[0]?.arguments, '{"city": Oslo');
  });

  it('stream: false asks for the whole answer (doGenerate), and reports no deltas', async () => {
    const language = new MockLanguageModelV4({
      doGenerate: {
        content: [
          { type: 'reasoning', text: 'hmm', providerMetadata: { mock: { signature: 's' } } },
          { type: 'text', text: 'It is 21 °C.' },
          { type: 'tool-call', toolCallId: 'g1', toolName: 'lookup', input: '{"city":"Oslo"}' },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_use' },
        usage: usage(9, 4),
        warnings: [],
        response: { modelId: 'mock-whole' },
      },
    });
    const deltas: ModelDelta[] = [];
    const response = await aiSdkModel(language, { stream: false }).generate(
      request({ tools: [lookup.spec], onDelta: (d) => deltas.push(d) }),
    );
    assert.deepEqual(deltas, []);
    assert.equal(language.doStreamCalls.length, 0);
    assert.equal(response.message.content, 'It is 21 °C.');
    assert.deepEqual(response.message.toolCalls?.[0]?.providerData, {
      aiSdk: { reasoning: [{ text: 'hmm', providerOptions: { mock: { signature: 's' } } }] },
    });
    assert.equal(response.info?.model, 'mock-whole');
    assert.deepEqual(response.usage, { inputTokens: 9, outputTokens: 4 });
  });

  it('usage without totals is summed from its parts; a provider that reports none gives none', async () => {
    const parts = (u: LanguageModelV4Usage) => [
      { type: 'text-delta', id: 't', delta: 'x' } as const,
      finish('stop', u),
    ];
    const summed = await aiSdkModel(
      new MockLanguageModelV4({
        doStream: streamOf(
          parts({
            inputTokens: { total: undefined, noCache: 3, cacheRead: 4, cacheWrite: 5 },
            outputTokens: { total: undefined, text: 6, reasoning: 7 },
          }),
        ),
      }),
    ).generate(request());
    assert.deepEqual(summed.usage, { inputTokens: 12, outputTokens: 13, cachedInputTokens: 4, reasoningTokens: 7 });
    const none = await aiSdkModel(
      new MockLanguageModelV4({
        doStream: streamOf(
          parts({
            inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
            outputTokens: { total: undefined, text: undefined, reasoning: undefined },
          }),
        ),
      }),
    ).generate(request());
    assert.equal(none.usage, undefined);
  });
});

describe('aiSdkModel: what the provider is sent', () => {
  it('the transcript as the prompt: reasoning and calls with their provider options, results in call order, a missing one, an error', async () => {
    const language = new MockLanguageModelV4({ doStream: streamOf(textParts('ok')) });
    const messages: Message[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Oslo and Rome?' },
      {
        role: 'assistant',
        content: 'Looking.',
        toolCalls: [
          {
            id: 'a',
            name: 'lookup',
            arguments: { city: 'Oslo' },
            providerData: {
              aiSdk: {
                providerOptions: { mock: { thoughtSignature: 'ts' } },
                reasoning: [{ text: 'two cities', providerOptions: { mock: { signature: 'sig' } } }],
              },
            },
          },
          { id: 'b', name: 'lookup', arguments: { city: 'Rome' } },
          { id: 'c', name: 'lookup', arguments: { city: 'Paris' } },
        ],
      },
      { role: 'tool', toolCallId: 'b', name: 'lookup', content: { celsius: 25 }, isError: false },
      { role: 'tool', toolCallId: 'a', name: 'lookup', content: 'cold', isError: false },
      { role: 'tool', toolCallId: 'zzz', name: 'lookup', content: 'orphan', isError: false },
      { role: 'user', content: 'And Paris?' },
      { role: 'assistant', content: 'Paris failed.', toolCalls: [{ id: 'd', name: 'lookup', arguments: {} }] },
      {
        role: 'tool',
        toolCallId: 'd',
        name: 'lookup',
        content: { error: 'no city', code: 'ERR_TOOL_VALIDATION' },
        isError: true,
      },
    ];
    await aiSdkModel(language).generate(request({ messages }));
    assert.deepEqual(language.doStreamCalls[0]?.prompt, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo and Rome?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'reasoning', text: 'two cities', providerOptions: { mock: { signature: 'sig' } } },
          { type: 'text', text: 'Looking.' },
          {
            type: 'tool-call',
            toolCallId: 'a',
            toolName: 'lookup',
            input: { city: 'Oslo' },
            providerOptions: { mock: { thoughtSignature: 'ts' } },
          },
          { type: 'tool-call', toolCallId: 'b', toolName: 'lookup', input: { city: 'Rome' } },
          { type: 'tool-call', toolCallId: 'c', toolName: 'lookup', input: { city: 'Paris' } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'a', toolName: 'lookup', output: { type: 'text', value: 'cold' } },
          {
            type: 'tool-result',
            toolCallId: 'b',
            toolName: 'lookup',
            output: { type: 'json', value: { celsius: 25 } },
          },
          {
            type: 'tool-result',
            toolCallId: 'c',
            toolName: 'lookup',
            output: { type: 'error-json', value: MISSING_RESULT },
          },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: 'And Paris?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Paris failed.' },
          { type: 'tool-call', toolCallId: 'd', toolName: 'lookup', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'd',
            toolName: 'lookup',
            output: { type: 'error-json', value: { error: 'no city', code: 'ERR_TOOL_VALIDATION' } },
          },
        ],
      },
    ]);
  });

  it("Troupe's tools as function tools (zod's JSON Schema, without $schema), and the options as call settings", async () => {
    const language = new MockLanguageModelV4({ doStream: async () => streamOf(textParts('ok')) });
    const options: AiSdkModelOptions = {
      maxOutputTokens: 256,
      temperature: 0.2,
      topP: 0.9,
      stopSequences: ['END'],
      reasoning: 'low',
      toolChoice: 'required',
      providerOptions: { mock: { cache: true } },
      headers: { 'x-team': 'agents' },
    };
    await aiSdkModel(language, options).generate(request({ tools: [lookup.spec] }));
    const call = language.doStreamCalls[0];
    assert.deepEqual(call?.tools, [
      {
        type: 'function',
        name: 'lookup',
        description: 'The temperature in a city',
        inputSchema: {
          type: 'object',
          properties: { city: { type: 'string' } },
          required: ['city'],
          additionalProperties: false,
        },
      },
    ]);
    assert.deepEqual(call?.toolChoice, { type: 'required' });
    assert.equal(call?.maxOutputTokens, 256);
    assert.equal(call?.temperature, 0.2);
    assert.equal(call?.topP, 0.9);
    assert.deepEqual(call?.stopSequences, ['END']);
    assert.equal(call?.reasoning, 'low');
    assert.deepEqual(call?.providerOptions, { mock: { cache: true } });
    assert.deepEqual(call?.headers, { 'x-team': 'agents' });
    assert.ok(call?.abortSignal instanceof AbortSignal, 'each attempt gives the provider a signal');
    // Without tools, no tool choice is sent.
    await aiSdkModel(language, options).generate(request());
    assert.equal(language.doStreamCalls[1]?.toolChoice, undefined);
    assert.equal(language.doStreamCalls[1]?.tools, undefined);
  });

  it('a version-3 model (a provider package of AI SDK 6) is adapted by the ai package, on first use', async () => {
    const language = new MockLanguageModelV3({
      modelId: 'v3-model',
      doStream: {
        stream: convertArrayToReadableStream([
          { type: 'text-delta', id: 't', delta: 'from v3' },
          {
            type: 'finish',
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: {
              inputTokens: { total: 4, noCache: 4, cacheRead: undefined, cacheWrite: undefined },
              outputTokens: { total: 2, text: 2, reasoning: undefined },
            },
          },
        ]),
      },
    });
    const model = aiSdkModel(language);
    assert.equal(model.name, 'v3-model');
    const response = await model.generate(
      request({ messages: [...hi, { role: 'assistant', content: 'earlier' }, ...hi] }),
    );
    assert.equal(response.message.content, 'from v3');
    assert.deepEqual(response.usage, { inputTokens: 4, outputTokens: 2 });
    assert.equal(language.doStreamCalls[0]?.prompt.length, 3);
  });
});

describe('aiSdkModel: errors and retries', () => {
  const apiError = (
    status: number | undefined,
    headers: Record<string, string> = {},
    data?: unknown,
    cause?: unknown,
  ) =>
    new APICallError({
      message: status === undefined ? 'Cannot connect to API: connect ECONNREFUSED 127.0.0.1:1' : `error ${status}`,
      url: 'https://api.example.test/v1/messages?key=secret',
      requestBodyValues: {},
      ...(status === undefined ? {} : { statusCode: status }),
      responseHeaders: headers,
      data,
      cause,
    });
  /** A model whose calls fail with `errors` in turn, then answer. */
  const failing = (...errors: unknown[]) => {
    let n = 0;
    return new MockLanguageModelV4({
      doStream: async () => {
        const error = errors[n++];
        if (error !== undefined) throw error;
        return streamOf(textParts('finally'));
      },
    });
  };
  const model = (language: MockLanguageModelV4, clock: RecordingClock, options: AiSdkModelOptions = {}) =>
    aiSdkModel(language, { clock, random: () => 0.5, backoffBaseMs: 10, ...options });

  it('429 with retry-after-ms: waits what the provider asked, then succeeds', async () => {
    const clock = new RecordingClock();
    const language = failing(
      apiError(429, { 'retry-after-ms': '15' }, { type: 'error', error: { type: 'rate_limit_error' } }),
    );
    const response = await model(language, clock).generate(request());
    assert.equal(response.message.content, 'finally');
    assert.equal(response.info?.attempts, 2);
    assert.ok(clock.delays.includes(15), `delays: ${clock.delays.join(', ')}`);
  });

  it('5xx and a connection failure are retried with backoff, up to maxAttempts; then the last failure, typed', async () => {
    const clock = new RecordingClock();
    const error = await failure(
      model(
        failing(
          apiError(529),
          apiError(undefined, {}, undefined, Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })),
        ),
        clock,
        {
          maxAttempts: 2,
        },
      ).generate(request()),
    );
    assert.equal(error.code, 'ERR_MODEL_CONNECTION');
    assert.equal(error.attempts, 2);
    assert.match(
      error.message,
      /cannot reach mock-provider \(model "mock-model-id" at https:\/\/api\.example\.test\/v1\/messages\) \(ECONNREFUSED, 2 attempts\)/,
    );
    assert.ok(!error.message.includes('secret'), 'the query (where keys may be) is not shown');
    assert.ok(clock.delays.includes(5), `a backoff of base × jitter: ${clock.delays.join(', ')}`);
  });

  it('401: ERR_MODEL_AUTH at once, with the status and the provider’s error type', async () => {
    const error = await failure(
      model(
        failing(
          apiError(401, {}, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }),
        ),
        new RecordingClock(),
      ).generate(request()),
    );
    assert.equal(error.code, 'ERR_MODEL_AUTH');
    assert.equal(error.status, 401);
    assert.equal(error.serverCode, 'authentication_error');
    assert.equal(error.attempts, 1);
    assert.match(error.message, /refused the credentials \(401: error 401\): check the API key/);
  });

  it('a retry-after over the cap fails at once with ERR_MODEL_RATE_LIMITED, saying how long', async () => {
    const error = await failure(
      model(failing(apiError(429, { 'retry-after': '86400' })), new RecordingClock(), {
        retryAfterCapMs: 1_000,
      }).generate(request()),
    );
    assert.equal(error.code, 'ERR_MODEL_RATE_LIMITED');
    assert.equal(error.retryAfterMs, 86_400_000);
    assert.match(error.message, /asked to wait 24 h before retrying .*over the 1 s cap/);
  });

  it('other 4xx: ERR_MODEL_BAD_REQUEST, not retried; 404 says to check the model id', async () => {
    const bad = await failure(model(failing(apiError(400)), new RecordingClock()).generate(request()));
    assert.equal(bad.code, 'ERR_MODEL_BAD_REQUEST');
    assert.equal(bad.attempts, 1);
    const missing = await failure(model(failing(apiError(404)), new RecordingClock()).generate(request()));
    assert.match(missing.message, /was not found .*check the model id/);
  });

  it('no API key: ERR_MODEL_AUTH saying where to put one', async () => {
    const error = await failure(
      model(failing(new LoadAPIKeyError({ message: 'Anthropic API key is missing.' })), new RecordingClock()).generate(
        request(),
      ),
    );
    assert.equal(error.code, 'ERR_MODEL_AUTH');
    assert.match(
      error.message,
      /has no API key .*pass apiKey to the provider's factory or set its environment variable/,
    );
  });

  it('an error part in the stream after a delta: ERR_MODEL with the provider’s type, never retried', async () => {
    const language = new MockLanguageModelV4({
      doStream: streamOf([
        { type: 'text-delta', id: 't', delta: 'half' },
        { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      ]),
    });
    const error = await failure(aiSdkModel(language).generate(request()));
    assert.equal(error.code, 'ERR_MODEL');
    assert.equal(error.serverCode, 'overloaded_error');
    assert.match(error.message, /failed inside the stream: Overloaded/);
    assert.equal(language.doStreamCalls.length, 1);
  });

  it('a stream that ends before its finish: ERR_MODEL_CONNECTION (cut short), not retried after a delta', async () => {
    const language = new MockLanguageModelV4({ doStream: streamOf([{ type: 'text-delta', id: 't', delta: 'half' }]) });
    const error = await failure(aiSdkModel(language).generate(request()));
    assert.equal(error.code, 'ERR_MODEL_CONNECTION');
    assert.match(error.message, /cut the answer short/);
    assert.equal(language.doStreamCalls.length, 1);
  });

  it('an attempt past timeoutMs (no response) is ERR_MODEL_TIMEOUT, and the provider’s signal is aborted', async () => {
    let signal: AbortSignal | undefined;
    const language = new MockLanguageModelV4({
      doStream: (options) => {
        signal = options.abortSignal;
        return new Promise(() => {});
      },
    });
    const error = await failure(aiSdkModel(language, { timeoutMs: 20, maxAttempts: 1 }).generate(request()));
    assert.equal(error.code, 'ERR_MODEL_TIMEOUT');
    assert.equal(signal?.aborted, true);
  });

  it('a stream silent for streamIdleTimeoutMs is ERR_MODEL_STREAM_IDLE, and its reader is cancelled', async () => {
    let cancelled = false;
    const language = new MockLanguageModelV4({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'first' });
          },
          cancel() {
            cancelled = true;
          },
        }),
      }),
    });
    const error = await failure(aiSdkModel(language, { streamIdleTimeoutMs: 30 }).generate(request()));
    assert.equal(error.code, 'ERR_MODEL_STREAM_IDLE');
    assert.equal(cancelled, true);
  });

  it('a ModelError crosses a thread with its name, code and fields', async () => {
    const error = await failure(
      model(failing(apiError(429, { 'retry-after': '86400' })), new RecordingClock(), {
        retryAfterCapMs: 1_000,
      }).generate(request()),
    );
    const rebuilt = decodeError(structuredClone(encodeError(error)));
    assert.ok(isTroupeError(rebuilt, 'ERR_MODEL_RATE_LIMITED'));
    assert.equal(rebuilt.name, 'ModelError');
    assert.equal((rebuilt as unknown as ModelError).status, 429);
    assert.equal((rebuilt as unknown as ModelError).retryAfterMs, 86_400_000);
  });
});

describe('aiSdkModel: cancellation, four ways', () => {
  const held = () => {
    const signals: AbortSignal[] = [];
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let cancelled = 0;
    const language = new MockLanguageModelV4({
      doStream: async (options) => {
        if (options.abortSignal !== undefined) signals.push(options.abortSignal);
        return {
          stream: new ReadableStream<LanguageModelV4StreamPart>({
            start(controller) {
              controller.enqueue({ type: 'text-delta', id: 't', delta: 'first' });
            },
            pull() {
              started();
              return new Promise(() => {});
            },
            cancel() {
              cancelled++;
            },
          }),
        };
      },
    });
    return { language, signals, running, cancelledCount: () => cancelled };
  };

  it('already cancelled: rejects with a CancelledError before calling the provider', async () => {
    const { language } = held();
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(aiSdkModel(language).generate(request({ signal: controller.signal })), (e: unknown) =>
      isTroupeError(e, 'ERR_CANCELLED'),
    );
    assert.equal(language.doStreamCalls.length, 0);
  });

  it('cancelled while streaming: rejects at once, the provider’s signal aborts and its stream is cancelled', async () => {
    const { language, signals, running, cancelledCount } = held();
    const controller = new AbortController();
    const call = aiSdkModel(language).generate(request({ signal: controller.signal }));
    await running;
    controller.abort();
    await assert.rejects(call, (e: unknown) => isTroupeError(e, 'ERR_CANCELLED'));
    assert.equal(signals[0]?.aborted, true);
    assert.equal(cancelledCount(), 1);
  });

  it('cancelled after it completed: no effect', async () => {
    const language = new MockLanguageModelV4({ doStream: streamOf(textParts('done')) });
    const controller = new AbortController();
    const response = await aiSdkModel(language).generate(request({ signal: controller.signal }));
    controller.abort();
    assert.equal(response.message.content, 'done');
  });

  it('no sharing: cancelling one call leaves another of the same model running', async () => {
    const a = held();
    const model = aiSdkModel(a.language);
    const first = new AbortController();
    const one = model.generate(request({ signal: first.signal }));
    await a.running;
    const other = new AbortController();
    const two = model.generate(request({ signal: other.signal }));
    first.abort();
    await assert.rejects(one, (e: unknown) => isTroupeError(e, 'ERR_CANCELLED'));
    assert.equal(a.signals.length, 2);
    assert.equal(a.signals[1]?.aborted, false, 'the other call goes on');
    other.abort();
    await assert.rejects(two, (e: unknown) => isTroupeError(e, 'ERR_CANCELLED'));
  });
});

describe('aiSdkModel: bad input, one rule each', () => {
  const refused = (make: () => unknown, pattern: RegExp) =>
    assert.throws(make, (e: unknown) => isTroupeError(e, 'ERR_INVALID_ARGUMENT') && pattern.test((e as Error).message));
  const language = new MockLanguageModelV4();
  it('a model id as a string', () =>
    refused(
      () => aiSdkModel('claude-sonnet-4-5' as never),
      /got the model id "claude-sonnet-4-5"; pass a provider's model object/,
    ));
  it('something that is not a language model', () =>
    refused(() => aiSdkModel({} as never), /pass a language model of an AI SDK provider package/));
  it('a specification version this package does not speak', () =>
    refused(
      () =>
        aiSdkModel({
          ...language,
          doStream: language.doStream,
          doGenerate: language.doGenerate,
          specificationVersion: 'v1',
        } as never),
      /version v1 .*speaks versions v2 to v4/,
    ));
  it('provider settings belong to the provider’s factory', () =>
    refused(
      () => aiSdkModel(language, { apiKey: 'k' } as never),
      /unknown option apiKey: configure the provider .*with its own factory/,
    ));
  it('maxAttempts from 1 to 20', () =>
    refused(
      () => aiSdkModel(language, { maxAttempts: 0 }),
      /maxAttempts is invalid \(got 0\): pass an integer from 1/,
    ));
  it('a whole number of ms for timeouts', () =>
    refused(() => aiSdkModel(language, { timeoutMs: 0 }), /timeoutMs is invalid/));
  it('a known tool choice', () =>
    refused(
      () => aiSdkModel(language, { toolChoice: 'any' as never }),
      /toolChoice is invalid .*'auto', 'none' or 'required'/,
    ));
  it('a known way to ask for structured output', () =>
    refused(
      () => aiSdkModel(language, { structuredOutput: 'json_schema' as never }),
      /structuredOutput is invalid \(got "json_schema"\): pass 'response_format' .* or 'none'/,
    ));
  it('headers are never repeated', () =>
    refused(() => aiSdkModel(language, { headers: { a: 1 as never } }), /headers is invalid \(got \(hidden\)\)/));
  it('defaults', () => {
    const model = aiSdkModel(language);
    assert.equal(model.options.maxAttempts, 3);
    assert.equal(model.options.stream, true);
    assert.equal(model.options.structuredOutput, 'response_format');
    assert.equal(model.provider, 'mock-provider');
    assert.equal(aiSdkModel(language, { provider: 'anthropic' }).provider, 'anthropic');
  });
});
