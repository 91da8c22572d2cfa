// A chat-completions server in its own thread, for the stream-overhead
// figure: the thread that parses the stream never also serves it. Every
// request is answered with `workerData.deltas` text chunks, then a finish
// chunk, usage and `[DONE]`; a request to `/v1/messages` (Anthropic's
// Messages API, for the AI SDK's provider) with the same text as Anthropic
// streams it, burst only. The request's `model` picks how they are written:
// `burst` (one write per chunk, back to back, as fast as the socket takes
// them) or `paced` (10 chunks per millisecond, each carrying the time it was
// written, in the epoch base every thread shares: what the reader subtracts
// from the time it saw the delta).
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';

const { deltas } = workerData as { readonly deltas: number };
const chunk = (content: string): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-b', object: 'chat.completion.chunk', model: 'bench', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const sharedNow = (): number => performance.timeOrigin + performance.now();
/** Chunks `paced` writes per millisecond. */
const PER_MS = 10;
const CHUNKS = Array.from({ length: deltas }, (_, i) => chunk(`t${i} `));
const TAIL =
  `data: ${JSON.stringify({ model: 'bench', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n` +
  `data: ${JSON.stringify({ model: 'bench', choices: [], usage: { prompt_tokens: 10, completion_tokens: deltas } })}\n\n` +
  'data: [DONE]\n\n';

// Anthropic's events: `message_start`, a text block of `deltas` deltas, `message_delta`, `message_stop`.
const event = (type: string, data: Record<string, unknown>): string =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const ANTHROPIC_HEAD =
  event('message_start', {
    message: {
      id: 'msg_b',
      type: 'message',
      role: 'assistant',
      model: 'bench',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 1 },
    },
  }) + event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
const ANTHROPIC_CHUNKS = Array.from({ length: deltas }, (_, i) =>
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: `t${i} ` } }),
);
const ANTHROPIC_TAIL =
  event('content_block_stop', { index: 0 }) +
  event('message_delta', {
    delta: { stop_reason: 'end_turn', stop_sequence: null },
    usage: { output_tokens: deltas },
  }) +
  event('message_stop', {});

const server = createServer(async (req, res) => {
  req.on('error', () => {});
  res.on('error', () => {});
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  let model = 'burst';
  try {
    model = String((JSON.parse(Buffer.concat(parts).toString('utf8')) as { model?: unknown }).model);
  } catch {}
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
  if (req.url?.endsWith('/messages') === true) {
    res.write(ANTHROPIC_HEAD);
    for (const c of ANTHROPIC_CHUNKS) res.write(c);
    res.end(ANTHROPIC_TAIL);
    return;
  }
  if (model === 'paced') {
    let i = 0;
    const timer = setInterval(() => {
      if (res.destroyed) {
        clearInterval(timer);
        return;
      }
      let batch = '';
      for (let k = 0; k < PER_MS && i < deltas; k++, i++) batch += chunk(`${sharedNow().toFixed(4)} `);
      if (i < deltas) res.write(batch);
      else {
        clearInterval(timer);
        res.end(batch + TAIL);
      }
    }, 1);
    return;
  }
  for (const c of CHUNKS) res.write(c);
  res.end(TAIL);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
parentPort?.postMessage((server.address() as AddressInfo).port);
parentPort?.on('message', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
