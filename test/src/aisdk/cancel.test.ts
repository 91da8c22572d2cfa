// aiSdkModel on a real provider package (@ai-sdk/anthropic) stops in every
// phase of a call when its run is cancelled: while connecting (a TLS
// handshake that never completes), while waiting for the response, while
// backing off before a retry, and while the answer streams. The call rejects
// with a CancelledError carrying the run's reason, and where the provider's
// request was open its socket is closed (the server sees it).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import { aiSdkModel } from '@troupe/ai-sdk';
import { CancelledError, isTroupeError, type ModelRequest } from '@troupe/core';
import { ChatServer } from '../openai/chatServer.js';
import { RecordingClock } from '../openai/RecordingClock.js';
import { anthropicError, anthropicEvent, messageStart } from './anthropicWire.js';

const request = (signal: AbortSignal, onDelta?: ModelRequest['onDelta']): ModelRequest => ({
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  signal,
  ...(onDelta === undefined ? {} : { onDelta }),
});

const cancelledBy = (reason: CancelledError['reason']) => (error: unknown) =>
  isTroupeError(error, 'ERR_CANCELLED') && (error as CancelledError).reason === reason;

describe('aiSdkModel on @ai-sdk/anthropic: a cancel in every phase', () => {
  let server: ChatServer;
  // A TCP port that accepts connections and never answers a TLS hello.
  const tls = createServer();
  const tlsSockets = new Set<Socket>();
  const connected: (() => void)[] = [];
  tls.on('connection', (socket) => {
    tlsSockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => tlsSockets.delete(socket));
    socket.resume();
    for (const resolve of connected.splice(0)) resolve();
  });
  before(async () => {
    server = await ChatServer.start();
    tls.listen(0, '127.0.0.1');
    await once(tls, 'listening');
  });
  after(async () => {
    for (const s of tlsSockets) s.destroy();
    tls.close();
    await server.close();
  });
  const model = (baseURL: string, clock = new RecordingClock()) =>
    aiSdkModel(createAnthropic({ apiKey: 'sk-ant-test', baseURL })('claude-test'), { clock, maxAttempts: 2 });

  it('while connecting (a TLS handshake that never completes): rejects at once', async () => {
    const port = (tls.address() as { port: number }).port;
    const reached = new Promise<void>((resolve) => connected.push(resolve));
    const controller = new AbortController();
    const call = model(`https://127.0.0.1:${port}/v1`).generate(request(controller.signal));
    await reached;
    controller.abort(new CancelledError('deadline'));
    await assert.rejects(call, cancelledBy('deadline'));
  });

  it('while waiting for the response: rejects at once and the request’s socket is closed', async () => {
    server.reset();
    server.script(() => {});
    const controller = new AbortController();
    const call = model(server.baseURL).generate(request(controller.signal));
    const received = await server.request(1);
    controller.abort(new CancelledError('user'));
    await assert.rejects(call, cancelledBy('user'));
    await received.socketClosed;
  });

  it('while backing off before a retry (retry-after 2 s): rejects at once, no second request', async () => {
    server.reset();
    server.script(anthropicError(429, 'rate_limit_error', 'slow down', { 'retry-after': '2' }));
    const clock = new RecordingClock();
    const controller = new AbortController();
    const call = model(server.baseURL, clock).generate(request(controller.signal));
    await clock.timerSet((ms) => ms === 2_000);
    controller.abort(new CancelledError('parent'));
    await assert.rejects(call, cancelledBy('parent'));
    assert.equal(server.received.length, 1);
  });

  it('while streaming (after the first delta, the server silent): rejects at once and the socket is closed', async () => {
    server.reset();
    server.script((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      messageStart(res);
      anthropicEvent(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      anthropicEvent(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'first' } });
    });
    const controller = new AbortController();
    let first: () => void = () => {};
    const streaming = new Promise<void>((resolve) => {
      first = resolve;
    });
    const call = model(server.baseURL).generate(request(controller.signal, () => first()));
    await streaming;
    controller.abort(new CancelledError('shutdown'));
    await assert.rejects(call, cancelledBy('shutdown'));
    await server.received[0]?.socketClosed;
  });

  it('a signal aborted with a reason that is not a CancelledError: a CancelledError of reason user', async () => {
    server.reset();
    server.script(() => {});
    const controller = new AbortController();
    const call = model(server.baseURL).generate(request(controller.signal));
    await server.request(1);
    controller.abort(new Error('whatever'));
    await assert.rejects(call, cancelledBy('user'));
  });
});
