// What the test's MCP servers see, as they tell it: a TCP server on
// 127.0.0.1 to which each fixture server (fixtures/server.ts) writes a JSON
// line per event. Tests wait for events, never for time.
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';

/** One thing a server saw. */
export interface ServerEvent {
  readonly event: 'call' | 'cancelled' | 'dying';
  readonly tool?: string;
  readonly requestId?: string | number;
  readonly reason?: string;
  readonly pid: number;
}

interface Waiter {
  readonly match: (e: ServerEvent) => boolean;
  readonly resolve: (e: ServerEvent) => void;
}

export class Observer {
  /** Every event so far, in arrival order. */
  readonly events: ServerEvent[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #waiters: Waiter[] = [];

  private constructor() {
    this.#server = createServer((socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {});
      let buffered = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        buffered += chunk;
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim() !== '') this.#seen(JSON.parse(line) as ServerEvent);
        }
      });
    });
  }

  static async start(): Promise<Observer> {
    const observer = new Observer();
    observer.#server.listen(0, '127.0.0.1');
    await once(observer.#server, 'listening');
    return observer;
  }

  /** `host:port`, for the servers' TROUPE_MCP_OBSERVER. */
  get address(): string {
    const address = this.#server.address();
    if (typeof address !== 'object' || address === null) throw new Error('the observer is not listening');
    return `127.0.0.1:${address.port}`;
  }

  #seen(event: ServerEvent): void {
    this.events.push(event);
    const ready = this.#waiters.filter((w) => w.match(event));
    this.#waiters = this.#waiters.filter((w) => !w.match(event));
    for (const w of ready) w.resolve(event);
  }

  /** The first event (already seen, or to come) that matches. */
  next(match: (e: ServerEvent) => boolean): Promise<ServerEvent> {
    const seen = this.events.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }

  /** Forget what was seen (between tests). */
  reset(): void {
    this.events.length = 0;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    this.#server.close();
    await once(this.#server, 'close');
  }
}
