// Structured output through openaiModel, against a chat-completions server on
// 127.0.0.1: asked as a strict JSON schema response format (its nulls for
// optional properties dropped), or with a final-answer tool (by option, or
// once a server refused the response format with a 400, which the model
// remembers); in a worker too. The loop checks what comes back.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defineAgent, OUTPUT_NAME } from '@troupe/core';
import { type OpenAIModelOptions, openaiModel } from '@troupe/openai';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { ChatServer, finishChunk, json, sse, textAnswer } from '../openai/chatServer.js';
import { OUTPUT_BASE_URL_VARIABLE, Place, placeAgent } from './openaiOutputAgents.js';

const scope = Object.freeze({ userId: 'u1' });

/** The strict JSON Schema of `Place`: every property required, the optional one nullable, no others. */
const STRICT_PLACE = {
  type: 'object',
  properties: { city: { type: 'string' }, note: { anyOf: [{ type: 'string' }, { type: 'null' }] } },
  required: ['city', 'note'],
  additionalProperties: false,
};

/** An answer that calls `name` with `args` (streamed in two pieces). */
function callAnswer(name: string, args: string) {
  return sse([
    {
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name, arguments: args.slice(0, 5) } }] },
        },
      ],
    },
    { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(5) } }] } }] },
    finishChunk('tool_calls'),
  ]);
}

describe('structured output with openaiModel', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  before(async () => {
    server = await ChatServer.start();
    process.env[OUTPUT_BASE_URL_VARIABLE] = server.baseURL;
    supervisor = createSupervisor({ pool: { threads: 1 }, persistence: null });
  });
  after(async () => {
    await supervisor.destroy();
    delete process.env[OUTPUT_BASE_URL_VARIABLE];
    await server.close();
  });

  /** A parent agent (on this thread) asking `Place` of an openaiModel with these options. */
  function placeOn(options: Partial<OpenAIModelOptions> = {}) {
    const model = openaiModel({
      model: 'test-model',
      baseURL: server.baseURL,
      apiKey: 'sk',
      maxAttempts: 1,
      ...options,
    });
    return defineAgent({ name: 'place', instructions: 'Name the city.', model, output: Place });
  }

  it('asks for a strict JSON schema response format; the nulls strict mode forced are dropped before the check', async () => {
    server.reset();
    server.script(textAnswer('{"city":"Oslo","note":null}'));
    const handle = await supervisor.startAgent(placeOn(), { scope });
    const reply = await handle.send('Where?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    if (reply.status !== 'done') return;
    assert.deepEqual(reply.output, { city: 'Oslo' });
    assert.equal(reply.text, '{"city":"Oslo"}');
    const body = server.received[0]?.body;
    assert.deepEqual(body.response_format, {
      type: 'json_schema',
      json_schema: { name: OUTPUT_NAME, schema: STRICT_PLACE, strict: true },
    });
    assert.equal(body.tools, undefined, 'no tool is added');
    await handle.stop();
  });

  it('structuredOutput: "tool" asks with a final-answer function instead; its call is the answer', async () => {
    server.reset();
    server.script(callAnswer(OUTPUT_NAME, '{"city":"Oslo"}'));
    const handle = await supervisor.startAgent(placeOn({ structuredOutput: 'tool' }), { scope });
    const reply = await handle.send('Where?');
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    if (reply.status !== 'done') return;
    assert.deepEqual(reply.output, { city: 'Oslo' });
    const body = server.received[0]?.body;
    assert.equal(body.response_format, undefined);
    assert.deepEqual(
      (body.tools as { function: { name: string; parameters: unknown } }[]).map((t) => [
        t.function.name,
        t.function.parameters,
      ]),
      [
        [
          OUTPUT_NAME,
          {
            type: 'object',
            properties: { city: { type: 'string' }, note: { type: 'string' } },
            required: ['city'],
          },
        ],
      ],
    );
    // The transcript keeps the answer as text: no call is left without a result.
    const last = handle.snapshot().messages.at(-1);
    assert.deepEqual(last, { role: 'assistant', content: '{"city":"Oslo"}' });
    await handle.stop();
  });

  it('a server that refuses the response format (400) is asked again with the tool, once; the model remembers it', async () => {
    server.reset();
    server.script(
      (res) => json(res, 400, { error: { message: 'Unrecognized request argument supplied: response_format' } }),
      callAnswer(OUTPUT_NAME, '{"city":"Oslo"}'),
      callAnswer(OUTPUT_NAME, '{"city":"Bergen"}'),
      textAnswer('{"city":"Tromsø","note":null}'),
    );
    const agent = placeOn();
    const handle = await supervisor.startAgent(agent, { scope });
    const first = await handle.send('Where?');
    assert.deepEqual(first.status === 'done' && first.output, { city: 'Oslo' }, JSON.stringify(first));
    const second = await handle.send('And now?');
    assert.deepEqual(second.status === 'done' && second.output, { city: 'Bergen' }, JSON.stringify(second));
    await handle.stop();
    // Another model (on the same server) asks for the response format again: it is remembered per model.
    const other = await supervisor.startAgent(placeOn(), { scope });
    const third = await other.send('Where?');
    assert.deepEqual(third.status === 'done' && third.output, { city: 'Tromsø' }, JSON.stringify(third));
    await other.stop();
    assert.deepEqual(
      server.received.map((r) => [
        r.body.response_format?.type,
        (r.body.tools ?? []).map((t: { function: { name: string } }) => t.function.name),
      ]),
      [
        ['json_schema', []],
        [undefined, [OUTPUT_NAME]],
        [undefined, [OUTPUT_NAME]],
        ['json_schema', []],
      ],
    );
  });

  it('a 400 in tool mode is the model’s error (no second fallback)', async () => {
    server.reset();
    server.script((res) => json(res, 400, { error: { message: 'bad request' } }));
    const handle = await supervisor.startAgent(placeOn({ structuredOutput: 'tool' }), { scope });
    const reply = await handle.send('Where?');
    assert.equal(reply.status, 'failed');
    assert.equal(reply.status === 'failed' && (reply.error as { code?: string }).code, 'ERR_MODEL_BAD_REQUEST');
    assert.equal(server.received.length, 1);
    await handle.stop();
  });

  it('in a worker: a subagent’s model asks for the response format, the checked output crosses back', async () => {
    server.reset();
    server.script(textAnswer('{"city":"Oslo","note":"north"}'));
    const outcome = await supervisor.spawn(placeAgent, { input: 'Where?', scope });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    assert.deepEqual(outcome.status === 'done' && outcome.output, { city: 'Oslo', note: 'north' });
    assert.equal(server.received[0]?.headers.authorization, 'Bearer sk-worker');
    assert.equal(server.received[0]?.body.response_format?.type, 'json_schema');
  });
});
