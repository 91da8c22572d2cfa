// The chunk normaliser, a pure function, against streams recorded in the
// shapes OpenAI, Ollama, vLLM and llama.cpp server send.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ModelDelta } from '@troupe/core';
import { ChatStreamAccumulator, normaliseChunks } from '@troupe/openai';
import { chunksOf, fixture } from './chatServer.js';

const ids = { idFor: (position: number) => `made_${position}` };

function run(name: string) {
  return normaliseChunks(chunksOf(fixture(name)), ids);
}

const textOf = (deltas: readonly ModelDelta[], type: 'text' | 'reasoning') =>
  deltas.map((d) => (d.type === type ? d.text : '')).join('');

describe('normaliser: recorded streams', () => {
  it('OpenAI text: deltas in order, usage with cached tokens from the trailing chunk without choices', () => {
    const { deltas, answer } = run('openai-text.sse');
    assert.deepEqual(
      deltas,
      ['Hello', ', world', '!'].map((text) => ({ type: 'text', text })),
    );
    assert.deepEqual(answer.message, { role: 'assistant', content: 'Hello, world!' });
    assert.deepEqual(answer.usage, { inputTokens: 1234, outputTokens: 5, cachedInputTokens: 1024, reasoningTokens: 0 });
    assert.equal(answer.model, 'gpt-4.1-mini-2025-04-14');
    assert.equal(answer.finishReason, 'stop');
    assert.equal(answer.reasoning, undefined);
  });

  it('OpenAI parallel tool calls: two calls by index, arguments joined and parsed', () => {
    const { deltas, answer } = run('openai-parallel-tools.sse');
    assert.deepEqual(answer.message.toolCalls, [
      { id: 'call_Wz5rQ1', name: 'get_weather', arguments: { city: 'Paris' } },
      { id: 'call_Hk8tP2', name: 'get_time', arguments: { tz: 'Europe/Paris' } },
    ]);
    assert.equal(answer.message.content, '');
    assert.equal(answer.finishReason, 'tool_calls');
    assert.deepEqual(deltas[0], { type: 'tool_call', index: 0, id: 'call_Wz5rQ1', name: 'get_weather' });
    assert.deepEqual(deltas[1], { type: 'tool_call', index: 0, arguments: '{"ci' });
    assert.deepEqual(deltas[3], { type: 'tool_call', index: 1, id: 'call_Hk8tP2', name: 'get_time' });
    assert.equal(deltas.length, 5);
    assert.deepEqual(answer.usage, { inputTokens: 88, outputTokens: 41, cachedInputTokens: 0, reasoningTokens: 0 });
  });

  it('Ollama: complete calls without index in one delta, "" for a tool without parameters, `reasoning`', () => {
    const { deltas, answer } = run('ollama-tools.sse');
    assert.deepEqual(answer.message.toolCalls, [
      { id: 'call_k2v9x0aa', name: 'get_weather', arguments: { city: 'Oslo' } },
      { id: 'call_p81mwq3z', name: 'list_cities', arguments: {} },
    ]);
    assert.equal(answer.reasoning, 'The user wants the weather and the time; two tools.');
    assert.equal(textOf(deltas, 'reasoning'), answer.reasoning);
    assert.deepEqual(answer.usage, { inputTokens: 161, outputTokens: 52 });
    assert.equal(answer.model, 'qwen3:8b');
  });

  it('Ollama without ids: two calls to the same tool are two calls, each given an id', () => {
    const { deltas, answer } = run('ollama-noid-tools.sse');
    assert.deepEqual(answer.message.toolCalls, [
      { id: 'made_0', name: 'get_weather', arguments: { city: 'Rome' } },
      { id: 'made_1', name: 'get_weather', arguments: { city: 'Milan' } },
    ]);
    assert.deepEqual(
      deltas.map((d) => (d.type === 'tool_call' ? [d.index, d.id] : d.type)),
      [
        [0, 'made_0'],
        [1, 'made_1'],
      ],
    );
    // The server said `stop` while calling tools (older Ollama): what it said is reported.
    assert.equal(answer.finishReason, 'stop');
  });

  it('vLLM: the name after the first delta, continuations without index or id, reasoning_content, cached usage', () => {
    const { deltas, answer } = run('vllm-tools.sse');
    assert.deepEqual(answer.message.toolCalls, [
      { id: 'chatcmpl-tool-5e0a', name: 'forecast', arguments: { city: 'Lima', days: 3 } },
    ]);
    assert.equal(answer.reasoning, 'Need the forecast.');
    assert.deepEqual(
      deltas.filter((d) => d.type === 'tool_call'),
      [
        { type: 'tool_call', index: 0, id: 'chatcmpl-tool-5e0a' },
        { type: 'tool_call', index: 0, name: 'forecast' },
        { type: 'tool_call', index: 0, arguments: '{"city": "Lima", ' },
        { type: 'tool_call', index: 0, arguments: '"days": 3}' },
      ],
    );
    assert.deepEqual(answer.usage, { inputTokens: 240, outputTokens: 71, cachedInputTokens: 192 });
  });

  it('llama.cpp: arguments as an object, invalid JSON kept as text for the loop to refuse, usage on the last choice', () => {
    const { deltas, answer } = run('llamacpp-tools.sse');
    assert.deepEqual(answer.message.toolCalls, [
      { id: 'aB3dE5fG7h', name: 'get_weather', arguments: { city: 'Kyoto', unit: 'c' } },
      { id: 'iJ9kL1mN3o', name: 'get_time', arguments: '{"tz": "Asia/Tokyo"' },
    ]);
    assert.deepEqual(deltas[1], {
      type: 'tool_call',
      index: 0,
      id: 'aB3dE5fG7h',
      name: 'get_weather',
      arguments: '{"city":"Kyoto","unit":"c"}',
    });
    assert.equal(answer.reasoning, 'Two lookups.');
    assert.deepEqual(answer.usage, { inputTokens: 312, outputTokens: 38 });
  });

  it('a non-streamed completion reads like one chunk (llama.cpp, arguments as an object)', () => {
    const { answer } = normaliseChunks([JSON.parse(fixture('llamacpp-completion.json'))], ids);
    assert.deepEqual(answer.message, {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'xY7zW1', name: 'get_weather', arguments: { city: 'Quito' } }],
    });
    assert.equal(answer.reasoning, 'One lookup.');
    assert.deepEqual(answer.usage, { inputTokens: 201, outputTokens: 19 });
    assert.equal(answer.finishReason, 'tool_calls');
  });
});

describe('normaliser: odd shapes', () => {
  const chunk = (delta: unknown, extra: Record<string, unknown> = {}) => ({
    choices: [{ index: 0, delta, finish_reason: null }],
    ...extra,
  });

  it('skips what is not a chunk instead of throwing', () => {
    const acc = new ChatStreamAccumulator(ids);
    for (const odd of [null, 42, 'x', [], { choices: null }, { choices: [null] }, { choices: [{}] }, chunk(null)]) {
      assert.equal(acc.push(odd), 0);
    }
    assert.deepEqual(acc.finish().message, { role: 'assistant', content: '' });
  });

  it('a name repeated in every delta is one name; an id repeated in every delta is one call', () => {
    const call = (args: string) => ({ id: 'c1', function: { name: 'lookup', arguments: args } });
    const { answer, deltas } = normaliseChunks(
      [chunk({ tool_calls: [call('{"q":')] }), chunk({ tool_calls: [call('"x"}')] })],
      ids,
    );
    assert.deepEqual(answer.message.toolCalls, [{ id: 'c1', name: 'lookup', arguments: { q: 'x' } }]);
    assert.equal(deltas.length, 2);
  });

  it('every call numbered 0 with distinct ids is still two calls', () => {
    const { answer } = normaliseChunks(
      [
        chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{}' } }] }),
        chunk({ tool_calls: [{ index: 0, id: 'b', function: { name: 'g', arguments: '{"n":1}' } }] }),
      ],
      ids,
    );
    assert.deepEqual(
      answer.message.toolCalls?.map((c) => [c.id, c.name, c.arguments]),
      [
        ['a', 'f', {}],
        ['b', 'g', { n: 1 }],
      ],
    );
  });

  it('an id that arrives after the first delta of its call replaces the one made for it', () => {
    const { answer, deltas } = normaliseChunks(
      [
        chunk({ tool_calls: [{ index: 0, function: { name: 'lookup' } }] }),
        chunk({ tool_calls: [{ index: 0, id: 'real', function: { arguments: '{}' } }] }),
      ],
      ids,
    );
    assert.deepEqual(answer.message.toolCalls, [{ id: 'real', name: 'lookup', arguments: {} }]);
    assert.deepEqual(deltas, [
      { type: 'tool_call', index: 0, id: 'made_0', name: 'lookup' },
      { type: 'tool_call', index: 0, id: 'real', arguments: '{}' },
    ]);
  });

  it('usage repeated in every chunk: the last one wins; missing counts are 0', () => {
    const { answer } = normaliseChunks(
      [
        chunk({ content: 'a' }, { usage: { prompt_tokens: 10, completion_tokens: 1 } }),
        chunk({ content: 'b' }, { usage: { prompt_tokens: 10, completion_tokens: 2 } }),
        { choices: [], usage: { completion_tokens: 3 } },
      ],
      ids,
    );
    assert.deepEqual(answer.usage, { inputTokens: 0, outputTokens: 3 });
  });

  it('a call that never gets arguments has none ({}), and empty content never makes a delta', () => {
    const { answer, deltas } = normaliseChunks(
      [chunk({ content: '' }), chunk({ tool_calls: [{ index: 0, id: 'z', function: { name: 'ping' } }] })],
      ids,
    );
    assert.deepEqual(answer.message.toolCalls, [{ id: 'z', name: 'ping', arguments: {} }]);
    assert.deepEqual(deltas, [{ type: 'tool_call', index: 0, id: 'z', name: 'ping' }]);
  });
});
