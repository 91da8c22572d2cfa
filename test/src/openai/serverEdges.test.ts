// What real servers and proxies send back, at the edges: an HTML error page,
// a stream closed with [DONE] but no finish_reason, a server that ignores
// `stream: true`, a non-streamed answer that is not JSON.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ModelDelta, type ModelRequest, TroupeError } from '@troupe/core';
import { openaiModel } from '@troupe/openai';
import { ChatServer, event, json, startSse, textChunk } from './chatServer.js';

const request = (deltas: ModelDelta[] = []): ModelRequest => ({
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  signal: new AbortController().signal,
  onDelta: (d) => deltas.push(d),
});

describe('openaiModel against what servers send at the edges', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('a 502 HTML page from a proxy: the error stays one short line, not the whole page', async () => {
    server.script((res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end(`<html><body><h1>502 Bad Gateway</h1>${'<p>padding</p>'.repeat(20_000)}</body></html>`);
    });
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, maxAttempts: 1 });
    const error = await model.generate(request()).then(
      () => assert.fail('a 502 fails the call'),
      (e: unknown) => e as TroupeError,
    );
    assert.equal(error.code, 'ERR_MODEL');
    assert.ok(
      error.message.length < 2_000,
      `"one line that says what failed and what to change" (README): got ${error.message.length} characters`,
    );
  });

  // By design an answer whose stream never said how it finished (no finish_reason) may be a cut
  // one (a proxy that closes the response cleanly mid-answer looks the same): it is not passed off
  // as complete. The deltas already delivered stay delivered; the error says what happened.
  it('a stream of text closed by [DONE] without a finish_reason: the text is delivered, and the call reports it unfinished', async () => {
    server.script((res) => {
      startSse(res);
      event(res, textChunk('Hello'));
      event(res, textChunk(' world'));
      res.end('data: [DONE]\n\n');
    });
    const deltas: ModelDelta[] = [];
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, maxAttempts: 1 });
    const result = await model.generate(request(deltas)).then(
      (r) => r,
      (e: unknown) => e as TroupeError,
    );
    assert.equal(deltas.length, 2, 'both deltas reached onDelta');
    assert.ok(result instanceof TroupeError, 'an answer that never said it finished is not passed off as complete');
    assert.equal(result.code, 'ERR_MODEL_CONNECTION');
    assert.match(result.message, /ended before the answer finished/);
  });

  it('a server that ignores stream: true and sends one JSON completion: read as the answer', async () => {
    const completion = {
      id: 'chatcmpl-j',
      object: 'chat.completion',
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'whole answer' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 5, completion_tokens: 2 },
    };
    server.script((res) => json(res, 200, completion));
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, maxAttempts: 1 });
    const result = await model.generate(request()).then(
      (r) => r,
      (e: unknown) => e as TroupeError,
    );
    assert.ok(
      !(result instanceof TroupeError),
      `an application/json answer to a streamed request should be normalised like a non-streamed one; got ${result instanceof TroupeError ? `${result.code}: ${result.message}` : ''}`,
    );
    assert.equal(result.message.content, 'whole answer');
  });

  it('stream: false and a body that is not JSON: the error does not speak of a stream', async () => {
    server.script((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "chatcmpl-x", "choices": [');
    });
    const model = openaiModel({ model: 'm', baseURL: server.baseURL, maxAttempts: 1, stream: false });
    const error = await model.generate(request()).then(
      () => assert.fail('a truncated body fails the call'),
      (e: unknown) => e as TroupeError,
    );
    assert.equal(error.code, 'ERR_MODEL');
    assert.doesNotMatch(
      error.message,
      /stream|event/,
      'a non-streamed answer has no stream and no events: the message should say the answer was not JSON',
    );
  });
});
