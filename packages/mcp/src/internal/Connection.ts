import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClosedError } from '@troupe/core';
import type { ResolvedMcpServerOptions } from '../McpServerOptions.js';
import { McpToolError } from '../McpToolError.js';
import { CancelTrackingTransport } from './CancelTrackingTransport.js';
import { describeFailure } from './describeFailure.js';

/** How the client introduces itself to servers. */
const CLIENT_INFO = { name: '@troupe/mcp', version: '0.1.0' } as const;
/** The most of a server's stderr kept to explain its death. */
const STDERR_TAIL = 2_048;

/** How long a liveness probe (a `ping`) may take before the server is taken for gone. */
const PROBE_TIMEOUT_MS = 5_000;

/** A live client and the transport it talks through. */
export interface Live {
  readonly client: Client;
  readonly transport: CancelTrackingTransport;
  /** Calls under way on it. */
  inFlight: number;
  /** A `ping` under way after a transport error. */
  probing: boolean;
}

/**
 * This thread's connection to one server: made on first use, shared by every
 * call, and made again on the next use after the server went away. One per
 * `mcpServer` handle, so one per thread that imports the handle's module.
 */
export class Connection {
  readonly #options: ResolvedMcpServerOptions;
  #live: Live | undefined;
  #connecting: Promise<Live> | undefined;
  #closed = false;
  #stderr = '';

  constructor(options: ResolvedMcpServerOptions) {
    this.#options = options;
  }

  /** The last lines the server wrote to stderr (stdio servers), trimmed; `''` when none. */
  get stderrTail(): string {
    const lines = this.#stderr.trim().split('\n');
    return lines.slice(-3).join(' | ');
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The connected client: this one, or a new connection when there is none. Abortable. */
  async live(signal: AbortSignal | undefined): Promise<Live> {
    if (this.#closed) throw this.#closedError();
    if (this.#live !== undefined) return this.#live;
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    const connecting = this.#connecting;
    if (signal === undefined) return connecting;
    signal.throwIfAborted();
    // Another caller may share this connection: an abort stops waiting for it, not the connection.
    return new Promise<Live>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      connecting.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /** Forget `live` if it is still the current connection (its server went away). */
  drop(live: Live): void {
    if (this.#live === live) {
      this.#live = undefined;
      live.client.close().catch(() => {});
    }
  }

  async #connect(): Promise<Live> {
    const o = this.#options;
    const inner =
      o.transport === 'stdio'
        ? new StdioClientTransport({
            command: o.command,
            args: [...o.args],
            env: { ...o.env },
            ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
            stderr: 'pipe',
          })
        : new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers: { ...o.headers } } });
    if (inner instanceof StdioClientTransport) {
      this.#stderr = '';
      // Always read (a full pipe would block the server); copied out unless asked not to.
      inner.stderr?.on('data', (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        this.#stderr = (this.#stderr + text).slice(-STDERR_TAIL);
        if (o.transport === 'stdio' && o.stderr === 'inherit') process.stderr.write(chunk);
      });
    }
    const transport = new CancelTrackingTransport(inner);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const live: Live = { client, transport, inFlight: 0, probing: false };
    client.onclose = () => {
      if (this.#live === live) this.#live = undefined;
    };
    // A transport error while calls are under way may have lost their answers for good: over
    // HTTP, a response stream cut without a resumption point (the server died) is given up by
    // the SDK without failing the call, which would then wait for its deadline. Ask the server
    // whether it is there; if it does not answer, end the connection, which fails the calls at
    // once (`ERR_MCP_CONNECTION`) and makes the next call connect again.
    client.onerror = () => {
      if (live.inFlight === 0 || live.probing || this.#live !== live) return;
      live.probing = true;
      client
        .ping({ timeout: PROBE_TIMEOUT_MS })
        .then(
          () => {},
          () => this.drop(live),
        )
        .finally(() => {
          live.probing = false;
        });
    };
    try {
      await client.connect(transport, { timeout: o.connectTimeoutMs });
    } catch (error) {
      await client.close().catch(() => {});
      throw new McpToolError(describeFailure('connect', o, error, this.stderrTail), {
        code: 'ERR_MCP_CONNECTION',
        server: o.name,
        cause: error,
      });
    }
    if (this.#closed) {
      await client.close().catch(() => {});
      throw this.#closedError();
    }
    this.#live = live;
    return live;
  }

  #closedError(): ClosedError {
    return new ClosedError(
      `the MCP server "${this.#options.name}" was closed in this thread (close() was called): create a new mcpServer() to use it again`,
    );
  }

  /** End the connection (a stdio server is stopped); later uses fail with `ERR_CLOSED`. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const connecting = this.#connecting;
    const live = this.#live;
    this.#live = undefined;
    await live?.client.close().catch(() => {});
    if (connecting !== undefined) await connecting.then((l) => l.client.close()).catch(() => {});
  }
}
