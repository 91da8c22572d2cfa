// openaiModel where it is meant to run: constructed by an agent module inside
// a worker thread, driving the agent loop's tool calls, its errors rebuilt on
// the supervisor's side of the thread.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { ChatServer, json, sse, textAnswer } from './chatServer.js';
import { BASE_URL_VARIABLE, weatherAgent } from './openaiAgents.js';

describe('openaiModel in a worker', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  before(async () => {
    server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    supervisor = createSupervisor({ pool: { threads: 1 } });
  });
  after(async () => {
    await supervisor.destroy();
    delete process.env[BASE_URL_VARIABLE];
    await server.close();
  });

  it('runs tool calls: results go back with matching ids, invalid JSON becomes an error result the model sees', async () => {
    server.reset();
    server.script(
      sse([
        {
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  { index: 0, id: 'call_ok', function: { name: 'lookup', arguments: '{"city":"Oslo"}' } },
                  { index: 1, id: 'call_bad', function: { name: 'lookup', arguments: '{"city": Oslo' } },
                ],
              },
            },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
        {
          choices: [],
          usage: { prompt_tokens: 50, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 32 } },
        },
      ]),
      textAnswer('21 °C in Oslo'),
    );
    const outcome = await supervisor.spawn(weatherAgent, { input: 'How warm is Oslo?', scope: {} });
    assert.equal(outcome.status, 'done', JSON.stringify(outcome));
    assert.equal(outcome.status === 'done' ? outcome.result : '', '21 °C in Oslo');
    assert.equal(server.received[0]?.headers.authorization, 'Bearer sk-worker');
    const second = server.received[1]?.body.messages as { role: string; tool_call_id?: string; content: string }[];
    const results = second.filter((m) => m.role === 'tool');
    assert.deepEqual(
      results.map((m) => m.tool_call_id),
      ['call_ok', 'call_bad'],
    );
    assert.deepEqual(JSON.parse(results[0]?.content ?? ''), { city: 'Oslo', celsius: 21 });
    assert.match(results[1]?.content ?? '', /not valid JSON/);
    if (outcome.status === 'done') {
      assert.equal(outcome.usage.inputTokens, 50);
      assert.equal(outcome.usage.outputTokens, 9);
    }
  });

  it('a refused key fails the run with ERR_MODEL_AUTH, rebuilt with its fields on this side', async () => {
    server.reset();
    server.script((res) =>
      json(res, 401, { error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } }),
    );
    const outcome = await supervisor.spawn(weatherAgent, { input: 'How warm is Oslo?', scope: {} });
    assert.equal(outcome.status, 'failed');
    const error = outcome.status === 'failed' ? outcome.error : undefined;
    assert.ok(isTroupeError(error, 'ERR_MODEL_AUTH'), String(error));
    assert.equal(error.name, 'ModelError');
    assert.equal((error as unknown as { status: number }).status, 401);
    assert.match(error.message, /refused the credentials .*check apiKey/);
  });
});
