// Cancellation in every phase of a model call, and the stream-idle watch.
// The server observes each closed socket; nothing here waits on a timer.
import assert from 'node:assert/strict';
import { getEventListeners, once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CancelledError, type Message } from '@troupe/core';
import { ModelError, type OpenAIModelOptions, openaiModel } from '@troupe/openai';
import { ChatServer, event, json, startSse, textAnswer, textChunk } from './chatServer.js';
import { RecordingClock } from './RecordingClock.js';

const hi: Message[] = [{ role: 'user', content: 'hi' }];

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('the call succeeded');
}

describe('openaiModel: cancellation', () => {
  let server: ChatServer;
  let clock: RecordingClock;
  const model = (options: Partial<OpenAIModelOptions> = {}) =>
    openaiModel({ model: 'm', baseURL: server.baseURL, clock, ...options });
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());
  const fresh = () => {
    server.reset();
    clock = new RecordingClock();
  };

  it('already cancelled: rejects with the reason and sends nothing', async () => {
    fresh();
    const controller = new AbortController();
    controller.abort(new CancelledError('shutdown'));
    const error = await rejection(model().generate({ messages: hi, tools: [], signal: controller.signal }));
    assert.ok(error instanceof CancelledError);
    assert.equal(error.reason, 'shutdown');
    server.script(textAnswer('next'));
    await model().generate({
      messages: [{ role: 'user', content: 'second' }],
      tools: [],
      signal: new AbortController().signal,
    });
    assert.equal(server.received.length, 1);
    assert.equal(server.received[0]?.body.messages[0].content, 'second');
  });

  it('while connecting (a TLS handshake that never completes): rejects, the socket is closed', async () => {
    fresh();
    const sockets: Socket[] = [];
    // Reads (so it sees the client's FIN) and never answers the TLS hello.
    const tcp = createServer((socket) => {
      socket.resume();
      sockets.push(socket);
    });
    tcp.listen(0, '127.0.0.1');
    await once(tcp, 'listening');
    const { port } = tcp.address() as { port: number };
    try {
      const connected = once(tcp, 'connection') as Promise<[Socket]>;
      const controller = new AbortController();
      const call = rejection(
        model({ baseURL: `https://127.0.0.1:${port}/v1` }).generate({
          messages: hi,
          tools: [],
          signal: controller.signal,
        }),
      );
      const [socket] = await connected;
      const closed = new Promise((resolve) => socket.once('close', resolve));
      controller.abort(new CancelledError('user'));
      const error = await call;
      assert.ok(error instanceof CancelledError, String(error));
      assert.equal(error.reason, 'user');
      await closed;
    } finally {
      for (const s of sockets) s.destroy();
      tcp.close();
    }
  });

  it('while waiting for headers: rejects, the server sees its socket closed', async () => {
    fresh();
    server.script(() => {});
    const controller = new AbortController();
    const call = rejection(model().generate({ messages: hi, tools: [], signal: controller.signal }));
    const arrived = await server.request(1);
    controller.abort(new CancelledError('deadline'));
    const error = await call;
    assert.ok(error instanceof CancelledError);
    assert.equal(error.reason, 'deadline');
    await arrived.socketClosed;
  });

  it('during the backoff sleep: rejects at once, no second request', async () => {
    fresh();
    server.script((res) => json(res, 503, { error: { message: 'busy' } }, { 'retry-after': '30' }));
    const controller = new AbortController();
    const call = rejection(model().generate({ messages: hi, tools: [], signal: controller.signal }));
    await clock.timerSet((ms) => ms === 30_000);
    controller.abort();
    const error = await call;
    assert.ok(error instanceof CancelledError);
    assert.equal(error.reason, 'user', 'a signal aborted without a CancelledError reads as user');
    assert.equal(server.received.length, 1);
  });

  it('mid-stream: rejects after the first token, the server sees its socket closed', async () => {
    fresh();
    server.script((res) => {
      startSse(res);
      event(res, textChunk('first'));
    });
    const controller = new AbortController();
    const seen: string[] = [];
    const call = rejection(
      model().generate({
        messages: hi,
        tools: [],
        signal: controller.signal,
        onDelta: (d) => {
          seen.push(d.type === 'text' ? d.text : d.type);
          controller.abort(new CancelledError('parent'));
        },
      }),
    );
    const error = await call;
    assert.ok(error instanceof CancelledError);
    assert.equal(error.reason, 'parent');
    assert.deepEqual(seen, ['first']);
    await server.received[0]?.socketClosed;
  });

  it('after completion: aborting changes nothing, and no listener is left on the signal', async () => {
    fresh();
    server.script(textAnswer('done'));
    const controller = new AbortController();
    const response = await model().generate({ messages: hi, tools: [], signal: controller.signal });
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
    controller.abort();
    assert.equal(response.message.content, 'done');
  });

  it('no sharing: cancelling one call of a model leaves its other call running', async () => {
    fresh();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    server.script(
      () => {},
      async (res, received) => {
        await held;
        await textAnswer('survivor')(res, received);
      },
    );
    const shared = model();
    const a = new AbortController();
    const first = rejection(shared.generate({ messages: hi, tools: [], signal: a.signal }));
    await server.request(1);
    const second = shared.generate({ messages: hi, tools: [], signal: new AbortController().signal });
    await server.request(2);
    a.abort();
    assert.ok((await first) instanceof CancelledError);
    release();
    assert.equal((await second).message.content, 'survivor');
  });
});

describe('openaiModel: stream idle watch', () => {
  let server: ChatServer;
  before(async () => {
    server = await ChatServer.start();
  });
  after(() => server.close());

  it('a stall after the first chunk fails with ERR_MODEL_STREAM_IDLE, not retried; the socket is closed', async () => {
    server.reset();
    server.script((res) => {
      startSse(res);
      event(res, textChunk('partial'));
      // …and the server stops writing.
    });
    const seen: string[] = [];
    const error = await rejection(
      openaiModel({ model: 'm', baseURL: server.baseURL, streamIdleTimeoutMs: 150 }).generate({
        messages: hi,
        tools: [],
        signal: new AbortController().signal,
        onDelta: (d) => seen.push(d.type),
      }),
    );
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.code, 'ERR_MODEL_STREAM_IDLE');
    assert.match(error.message, /sent nothing for 150 ms: the server stalled/);
    assert.deepEqual(seen, ['text']);
    assert.equal(server.received.length, 1);
    await server.received[0]?.socketClosed;
  });

  it('keep-alive comments alone do not keep a stream alive', async () => {
    server.reset();
    let comments = 0;
    server.script((res) => {
      startSse(res);
      server.every(10, () => {
        if (res.writableEnded || res.destroyed) return;
        res.write(': keep-alive\n\n');
        comments++;
      });
    });
    const error = await rejection(
      openaiModel({ model: 'm', baseURL: server.baseURL, streamIdleTimeoutMs: 200 }).generate({
        messages: hi,
        tools: [],
        signal: new AbortController().signal,
      }),
    );
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.code, 'ERR_MODEL_STREAM_IDLE');
    assert.ok(comments >= 3, `the server wrote ${comments} comments meanwhile`);
    await server.received[0]?.socketClosed;
  });
});
