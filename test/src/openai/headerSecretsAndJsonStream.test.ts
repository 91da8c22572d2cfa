// the openai adapter's error redaction (b2947a7) and its JSON-answer-to-a-stream
// path (7950204), attacked through openaiModel as a user configures it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ModelDelta, type ModelRequest, TroupeError } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { ChatServer, finishChunk, json, textChunk } from './chatServer.js';

const KEY = 'azure-key-REVIEW-SECRET-5521';

const request = (deltas: ModelDelta[] = []): ModelRequest => ({
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  signal: new AbortController().signal,
  onDelta: (d) => deltas.push(d),
});

async function failure(p: Promise<unknown>): Promise<TroupeError> {
  try {
    await p;
  } catch (error) {
    assert.ok(error instanceof TroupeError, `a TroupeError, got ${String(error)}`);
    return error;
  }
  assert.fail('the call should have failed');
}

describe('no secret in an openaiModel error', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('a key passed in headers (Azure "api-key", a gateway\'s x-api-key) that the server echoes in its 401', async () => {
    server.script((res) => json(res, 401, { error: { message: `Access denied: key ${KEY} is not valid` } }));
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, headers: { 'api-key': KEY }, maxAttempts: 1 });
    const error = await failure(model.generate(request()));
    assert.equal((await server.request(1)).headers['api-key'], KEY, 'the key was sent in the header (premise)');
    assert.equal(error.code, 'ERR_MODEL_AUTH');
    assert.ok(
      !error.message.includes(KEY),
      `a credential sent in headers must be redacted as apiKey is: ${error.message}`,
    );
  });

  it('an invalid baseURL with credentials: the options error does not repeat the password', () => {
    // A typo in the scheme: refused at the edge, before any call.
    let message = '';
    try {
      openaiModel({ model: 'm', baseURL: 'htps://proxyuser:pr0xy-PASSWORD@gateway.example/v1' });
    } catch (error) {
      message = (error as Error).message;
    }
    assert.match(message, /baseURL is invalid/, 'refused (premise)');
    assert.ok(!message.includes('pr0xy-PASSWORD'), `the password must be masked here too: ${message}`);
  });
});

describe('a stream labelled application/json', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('an SSE stream a gateway labels application/json is still read as the stream it is', async () => {
    // Before 7950204 the SDK parsed the body as SSE whatever its content-type; now any
    // application/json body of a streamed call is read with response.json().
    server.script((res) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.write(`data: ${JSON.stringify(textChunk('Hello'))}\n\n`);
      res.write(`data: ${JSON.stringify(finishChunk())}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const deltas: ModelDelta[] = [];
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, maxAttempts: 1 });
    const result = await model.generate(request(deltas)).then(
      (r) => r,
      (e: unknown) => e as Error,
    );
    assert.ok(
      !(result instanceof Error),
      `the body is a valid event stream: it should be answered, got ${(result as Error).message}`,
    );
    assert.equal(result.message.content, 'Hello');
  });
});
