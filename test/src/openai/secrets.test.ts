// No secret in an error: the API key the model sends, and credentials in its
// base URL, must not reach a ModelError's message — which the outcome, the
// model.error event and every log line that prints `err.message` carry. A
// server (a proxy, a gateway) that echoes the Authorization header back in its
// 401 body is enough to leak the key today.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Model, type ModelRequest, TroupeError } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { createSupervisor, type Supervisor, type SupervisorEvents } from '@troupe/supervisor';
import { ChatServer, json } from './chatServer.js';

const BASE_URL_VARIABLE = 'TROUPE_TEST_CHAT_BASE_URL';
const KEY = 'sk-troupe-SECRET-7731';

const request = (): ModelRequest => ({
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  signal: new AbortController().signal,
});

async function failure(model: Model): Promise<TroupeError> {
  try {
    await model.generate(request());
  } catch (error) {
    assert.ok(error instanceof TroupeError, `a TroupeError, got ${String(error)}`);
    return error;
  }
  assert.fail('the call should have failed');
}

describe('openaiModel: no secret in an error message', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('a 401 whose body echoes the key: the ModelError names the refusal, not the key', async () => {
    server.script((res) => json(res, 401, { error: { message: `Incorrect API key provided: ${KEY}.` } }));
    const error = await failure(openaiModel({ model: 'm', baseURL: server.baseURL, apiKey: KEY, maxAttempts: 1 }));
    assert.equal(error.code, 'ERR_MODEL_AUTH');
    assert.ok(
      !error.message.includes(KEY),
      `the key the model itself sent must be redacted from what the server said, got: ${error.message}`,
    );
    assert.ok(!JSON.stringify(error).includes(KEY), 'nor in any enumerable field of the error');
  });

  it('a base URL with credentials (user:password@host): they are not repeated in the error', async () => {
    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    const error = await failure(
      openaiModel({ model: 'm', baseURL: 'http://proxyuser:pr0xy-PASSWORD@127.0.0.1:9/v1', maxAttempts: 1 }),
    );
    assert.equal(error.code, 'ERR_MODEL_CONNECTION');
    assert.ok(
      !error.message.includes('pr0xy-PASSWORD'),
      `the base URL's password must be masked in the message, got: ${error.message}`,
    );
  });
});

describe('openaiModel in a worker: the key a server echoes reaches no outcome or event', () => {
  let server: ChatServer;
  let supervisor: Supervisor;
  let agents: typeof import('./serverAgents.js');
  before(async () => {
    server = await ChatServer.start();
    process.env[BASE_URL_VARIABLE] = server.baseURL;
    agents = await import('./serverAgents.js');
    assert.equal(agents.SECRET_KEY, KEY);
    supervisor = createSupervisor({ pool: { threads: 1 } });
  });
  after(async () => {
    await supervisor?.close({ timeoutMs: 5000 });
    await server?.close();
  });

  it('a subagent refused with the key echoed: its outcome and its model.error event hold no key', async () => {
    const events: SupervisorEvents['model.error'][0][] = [];
    supervisor.on('model.error', (e) => events.push(e));
    server.script((res) => json(res, 401, { error: { message: `Invalid token ${KEY} for this proxy` } }));
    const outcome = await supervisor.spawn(agents.worker, { input: 'go', scope: {} });
    assert.equal(outcome.status, 'failed');
    assert.ok(outcome.status === 'failed');
    assert.equal((outcome.error as TroupeError).code, 'ERR_MODEL_AUTH');
    assert.ok(
      (await server.request(1)).headers.authorization === `Bearer ${KEY}`,
      'the worker did send the key (the premise of the test)',
    );
    assert.ok(
      !outcome.error.message.includes(KEY),
      `the failed outcome's error must not carry the key: ${outcome.error.message}`,
    );
    assert.equal(events.length, 1);
    const event = events[0] as SupervisorEvents['model.error'][0];
    const said = (event.error as Error).message;
    assert.ok(!said.includes(KEY), `nor the model.error event: ${said}`);
  });
});
