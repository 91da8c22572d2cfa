// A small chat-completions server on 127.0.0.1 that tests drive: each request
// is answered by the next scripted handler, every request is recorded, and the
// test can wait for a request to arrive and for its socket to close.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What one request looked like. */
export interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are read field by field in assertions.
  readonly body: any;
  /** Resolves when this request's socket closes (the client hung up or the server ended it). */
  readonly socketClosed: Promise<void>;
}

/** Answers one request. */
export type Handler = (res: ServerResponse, received: Received) => void | Promise<void>;

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T>(): Deferred<T> {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export class ChatServer {
  /** The requests since start (or the last `reset()`), in arrival order. */
  readonly received: Received[] = [];
  readonly #server: Server;
  readonly #handlers: Handler[] = [];
  readonly #arrivals: Deferred<Received>[] = [];
  readonly #sockets = new Set<Socket>();
  /** One close promise per connection (a keep-alive socket carries many requests). */
  readonly #socketClosed = new WeakMap<Socket, Promise<void>>();
  readonly #timers = new Set<ReturnType<typeof setInterval>>();
  #port = 0;

  private constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on('connection', (socket) => {
      this.#sockets.add(socket);
      this.#socketClosed.set(
        socket,
        // Not `events.once`: it rejects on 'error', and a reset socket (a client that hung up) errors first.
        new Promise((resolve) => socket.once('close', () => resolve())),
      );
      socket.once('close', () => this.#sockets.delete(socket));
    });
  }

  static async start(): Promise<ChatServer> {
    const server = new ChatServer();
    server.#server.listen(0, '127.0.0.1');
    await once(server.#server, 'listening');
    server.#port = (server.#server.address() as AddressInfo).port;
    return server;
  }

  get port(): number {
    return this.#port;
  }

  /** The OpenAI-compatible root, as `baseURL`. */
  get baseURL(): string {
    return `http://127.0.0.1:${this.#port}/v1`;
  }

  /** Forget the requests seen and the handlers not used: request numbers start again at 1. */
  reset(): void {
    this.received.length = 0;
    this.#arrivals.length = 0;
    this.#handlers.length = 0;
  }

  /** Queue handlers for the next requests, in order. */
  script(...handlers: Handler[]): void {
    this.#handlers.push(...handlers);
  }

  /** Resolves with the `n`th request (1-based) once it has arrived and its body was read. */
  request(n: number): Promise<Received> {
    return this.#arrival(n - 1).promise;
  }

  /** A server-side interval (keep-alive writers); cleared on close. */
  every(ms: number, fn: () => void): void {
    const timer = setInterval(fn, ms);
    this.#timers.add(timer);
  }

  async close(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    for (const s of this.#sockets) s.destroy();
    this.#server.close();
    await once(this.#server, 'close');
  }

  #arrival(index: number): Deferred<Received> {
    for (let i = this.#arrivals.length; i <= index; i++) this.#arrivals.push(deferred());
    return this.#arrivals[index] as Deferred<Received>;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A client that hangs up mid-answer (the point of several tests) resets the socket: not an error here.
    req.on('error', () => {});
    res.on('error', () => {});
    const closed = this.#socketClosed.get(req.socket) ?? Promise.resolve();
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const text = Buffer.concat(parts).toString('utf8');
    let body: unknown = text;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {}
    const received: Received = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      body,
      socketClosed: closed,
    };
    const index = this.received.push(received) - 1;
    const handler = this.#handlers.shift();
    this.#arrival(index).resolve(received);
    if (handler === undefined) {
      json(res, 500, { error: { message: `the test scripted no answer for request ${index + 1}` } });
      return;
    }
    await handler(res, received);
  }
}

/** A JSON response. */
export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Start an SSE response (headers flushed). */
export function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
}

/** One `data:` event. */
export function event(res: ServerResponse, chunk: unknown): void {
  res.write(`data: ${JSON.stringify(chunk)}\n\n`);
}

/** A whole SSE answer: the chunks, then `[DONE]`. */
export function sse(chunks: readonly unknown[]): Handler {
  return (res) => {
    startSse(res);
    for (const c of chunks) event(res, c);
    res.end('data: [DONE]\n\n');
  };
}

/** Replay a recorded SSE file byte for byte. */
export function replay(raw: string): Handler {
  return (res) => {
    startSse(res);
    res.end(raw);
  };
}

/** A recorded stream under `test/src/openai/fixtures/`. */
export function fixture(name: string): string {
  return readFileSync(new URL(`../../src/openai/fixtures/${name}`, import.meta.url), 'utf8');
}

/** The chunks (parsed `data:` lines, `[DONE]` and comments left out) of a recorded SSE stream. */
export function chunksOf(raw: string): unknown[] {
  const chunks: unknown[] = [];
  for (const block of raw.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data !== '' && data !== '[DONE]') chunks.push(JSON.parse(data));
  }
  return chunks;
}

/** A chunk with answer text. */
export function textChunk(text: string, extra: Record<string, unknown> = {}): unknown {
  return {
    id: 'chatcmpl-t',
    object: 'chat.completion.chunk',
    model: 'test-model',
    choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
    ...extra,
  };
}

/** The closing chunk of an answer. */
export function finishChunk(reason = 'stop'): unknown {
  return {
    id: 'chatcmpl-t',
    object: 'chat.completion.chunk',
    model: 'test-model',
    choices: [{ index: 0, delta: {}, finish_reason: reason }],
  };
}

/** A short, complete text answer. */
export function textAnswer(text: string): Handler {
  return sse([textChunk(text), finishChunk()]);
}
