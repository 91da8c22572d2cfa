// Servers on 127.0.0.1 that hold a model call in one phase until it is
// aborted: a TCP port that never completes a TLS handshake (connecting), an
// HTTP server that answers each request as the current mode says.
import { once } from 'node:events';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';

/** How the HTTP server answers. */
export type Mode =
  /** Take the request, never answer (waiting for headers). */
  | 'hang'
  /** 503 with `retry-after: 2`: the client backs off for 2 s. */
  | 'retry'
  /** One streamed chunk, then silence (mid-stream, stall); Anthropic's events for `/v1/messages`. */
  | 'stall';

export interface PhaseServers {
  /** `https://` on a port that accepts TCP and never answers the TLS hello. */
  readonly tlsStallURL: string;
  readonly baseURL: string;
  mode: Mode;
  /** Called when a TCP connection reaches the TLS-stall port. */
  onConnection: (() => void) | undefined;
  /** Called when a request arrived (body read). */
  onRequest: (() => void) | undefined;
  /** Called when the `retry` answer was written out. */
  onAnswered: (() => void) | undefined;
  close(): Promise<void>;
}

const chunk = (text: string) =>
  `data: ${JSON.stringify({ model: 'bench', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] })}\n\n`;
const event = (type: string, data: Record<string, unknown>): string =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
/** The start of an Anthropic answer, up to its first text delta. */
const anthropicFirst = (text: string): string =>
  event('message_start', {
    message: {
      id: 'msg_b',
      type: 'message',
      role: 'assistant',
      model: 'bench',
      content: [],
      usage: { input_tokens: 1, output_tokens: 1 },
    },
  }) +
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } });

export async function startPhaseServers(): Promise<PhaseServers> {
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const tcp = createTcpServer((socket) => {
    socket.resume();
    servers.onConnection?.();
  });
  tcp.on('connection', track);
  const http = createHttpServer(async (req, res: ServerResponse) => {
    // Clients hang up mid-answer on purpose: a reset is not an error here.
    req.on('error', () => {});
    res.on('error', () => {});
    for await (const _ of req) {
    }
    servers.onRequest?.();
    switch (servers.mode) {
      case 'hang':
        return;
      case 'retry': {
        const body = JSON.stringify({ error: { message: 'busy' } });
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '2', 'content-length': body.length });
        res.end(body, () => servers.onAnswered?.());
        return;
      }
      case 'stall':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(req.url?.endsWith('/messages') === true ? anthropicFirst('first') : chunk('first'));
        return;
    }
  });
  http.on('connection', track);
  tcp.listen(0, '127.0.0.1');
  http.listen(0, '127.0.0.1');
  await Promise.all([once(tcp, 'listening'), once(http, 'listening')]);
  const tcpPort = (tcp.address() as { port: number }).port;
  const httpPort = (http.address() as { port: number }).port;
  const servers: PhaseServers = {
    tlsStallURL: `https://127.0.0.1:${tcpPort}/v1`,
    baseURL: `http://127.0.0.1:${httpPort}/v1`,
    mode: 'hang',
    onConnection: undefined,
    onRequest: undefined,
    onAnswered: undefined,
    async close() {
      for (const s of sockets) s.destroy();
      tcp.close();
      http.close();
      await Promise.all([once(tcp, 'close'), once(http, 'close')]);
    },
  };
  return servers;
}
