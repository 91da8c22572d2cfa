// A chat-completions server on 127.0.0.1 that answers each request from the
// plan in its last user message (JSON), so a whole tree of concurrent runs can
// be scripted without caring about arrival order. It counts the tokens it
// reported, per label, so usage sums can be checked against it.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What one run does. `u`/`o`: input/output tokens each of its model calls reports. */
export interface Plan {
  readonly label: string;
  readonly u?: number;
  readonly o?: number;
  /** answer: text in `pieces` deltas; delegate: parallel task calls; tool: one call of the named tool. */
  readonly kind: 'answer' | 'delegate' | 'tool';
  readonly children?: readonly Plan[];
  readonly tool?: string;
  /** How the first model call of this run fails (the later ones answer). */
  readonly fail?: 'badjson' | 'cut' | '429' | '500' | '500always' | '400' | 'hang' | '429days';
  readonly pieces?: number;
  /** Cached input and reasoning output tokens each model call reports. */
  readonly cached?: number;
  readonly reasoning?: number;
}

export class PlanServer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** Tokens reported in successful answers: per label. */
  readonly reported = new Map<
    string,
    { input: number; output: number; calls: number; cached?: number; reasoning?: number }
  >();
  /** Requests seen per label. */
  readonly requests = new Map<string, number>();
  /** Text deltas sent per label, in order. */
  readonly sent = new Map<string, string[]>();

  private constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
  }

  static async start(): Promise<PlanServer> {
    const s = new PlanServer();
    s.#server.listen(0, '127.0.0.1');
    await once(s.#server, 'listening');
    return s;
  }

  get baseURL(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
  }

  totals(): { input: number; output: number } {
    let input = 0;
    let output = 0;
    for (const r of this.reported.values()) {
      input += r.input;
      output += r.output;
    }
    return { input, output };
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    this.#server.close();
    await once(this.#server, 'close');
  }

  readonly #gated: ServerResponse[] = [];
  #open = false;

  /** Close the gate again. */
  reset(): void {
    this.#open = false;
  }

  /** Answer every request to `/gate` (held until now) and every later one at once. */
  release(): void {
    this.#open = true;
    for (const res of this.#gated.splice(0)) res.end('open');
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => {});
    res.on('error', () => {});
    if (req.url?.endsWith('/gate')) {
      if (this.#open) res.end('open');
      else this.#gated.push(res);
      return;
    }
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    // biome-ignore lint/suspicious/noExplicitAny: a request body read by field
    const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as any;
    const messages = body.messages as { role: string; content: unknown }[];
    let user = -1;
    for (let i = messages.length - 1; i >= 0; i--) {
      if (messages[i]?.role === 'user') {
        user = i;
        break;
      }
    }
    const plan = JSON.parse(String(messages[user]?.content)) as Plan;
    const after = messages.slice(user + 1);
    const turn = after.filter((m) => m.role === 'assistant').length;
    const n = (this.requests.get(plan.label) ?? 0) + 1;
    this.requests.set(plan.label, n);
    const depth = Number(String(body.model).slice(1));
    if (plan.fail !== undefined && (n === 1 || plan.fail === '500always')) {
      switch (plan.fail) {
        case '429':
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '20' });
          res.end(JSON.stringify({ error: { message: 'slow down' } }));
          return;
        case '429days':
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(3 * 86400) });
          res.end(JSON.stringify({ error: { message: 'come back in three days' } }));
          return;
        case '500':
        case '500always':
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'boom' } }));
          return;
        case '400':
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'bad' } }));
          return;
        case 'badjson':
          sse(res);
          res.end('data: {"choices":[{"index":0,"delta":{"content":"x"\n\ndata: [DONE]\n\n');
          return;
        case 'hang':
          sse(res);
          res.write(`data: ${JSON.stringify(chunk({ content: 'first' }))}\n\n`);
          return;
        case 'cut':
          sse(res);
          res.write(`data: ${JSON.stringify(chunk({ content: 'part' }))}\n\ndata: {"choices":[{"ind`);
          setImmediate(() => res.socket?.destroy());
          return;
      }
    }
    const u = plan.u ?? 1;
    const o = plan.o ?? 1;
    const r = this.reported.get(plan.label) ?? { input: 0, output: 0, calls: 0 };
    this.reported.set(plan.label, {
      input: r.input + u,
      output: r.output + o,
      calls: r.calls + 1,
      cached: (r.cached ?? 0) + (plan.cached ?? 0),
      reasoning: (r.reasoning ?? 0) + (plan.reasoning ?? 0),
    });
    const usage = {
      choices: [],
      usage: {
        prompt_tokens: u,
        completion_tokens: o,
        total_tokens: u + o,
        ...(plan.cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: plan.cached } }),
        ...(plan.reasoning === undefined ? {} : { completion_tokens_details: { reasoning_tokens: plan.reasoning } }),
      },
    };
    sse(res);
    if (turn === 0 && plan.kind !== 'answer') {
      const calls =
        plan.kind === 'delegate'
          ? (plan.children ?? []).map((c, i) => ({
              index: i,
              id: `${plan.label}_${i}`,
              type: 'function',
              function: {
                name: 'task',
                arguments: JSON.stringify({ subagent: `d${depth + 1}`, instructions: JSON.stringify(c) }),
              },
            }))
          : [];
      if (plan.tool !== undefined) {
        calls.push({
          index: calls.length,
          id: `${plan.label}_t`,
          type: 'function',
          function: { name: plan.tool, arguments: '{}' },
        });
      }
      res.write(`data: ${JSON.stringify(chunk({ tool_calls: calls }))}\n\n`);
      res.write(`data: ${JSON.stringify(chunk({}, 'tool_calls'))}\n\n`);
    } else {
      const tools = after.filter((m) => m.role === 'tool').map((m) => String(m.content));
      const text = JSON.stringify({ label: plan.label, results: tools });
      const pieces = plan.pieces ?? 3;
      const size = Math.ceil(text.length / pieces);
      const sent: string[] = [];
      for (let i = 0; i < text.length; i += size) {
        const piece = text.slice(i, i + size);
        sent.push(piece);
        res.write(`data: ${JSON.stringify(chunk({ content: piece }))}\n\n`);
      }
      this.sent.set(plan.label, sent);
      res.write(`data: ${JSON.stringify(chunk({}, 'stop'))}\n\n`);
    }
    res.write(`data: ${JSON.stringify(usage)}\n\n`);
    res.end('data: [DONE]\n\n');
  }
}

function sse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
}

function chunk(delta: unknown, finish: string | null = null): unknown {
  return {
    id: 'c',
    object: 'chat.completion.chunk',
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
}
