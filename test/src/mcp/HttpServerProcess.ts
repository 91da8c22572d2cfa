// The fixture MCP server in Streamable HTTP mode, as a child process of the
// test: started on a free port of 127.0.0.1, stopped by the test (or, should
// the test process die, by the end of its stdin).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** The compiled fixture server. */
export const SERVER_SCRIPT = fileURLToPath(new URL('./fixtures/server.js', import.meta.url));

export class HttpServerProcess {
  readonly #child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;

  private constructor(child: ChildProcess, port: number) {
    this.#child = child;
    this.url = `http://127.0.0.1:${port}/mcp`;
    this.exited =
      child.exitCode !== null ? Promise.resolve(child.exitCode) : once(child, 'exit').then(([code]) => code as number);
  }

  static async start(env: Readonly<Record<string, string>> = {}): Promise<HttpServerProcess> {
    const child = spawn(process.execPath, [SERVER_SCRIPT, '--http'], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    const port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) =>
        reject(new Error(`the fixture MCP server exited (${code}) before listening; output: ${out}`)),
      );
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => {
        out += chunk;
        const m = /listening (\d+)/.exec(out);
        if (m !== null) resolve(Number(m[1]));
      });
    });
    return new HttpServerProcess(child, port);
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Stop it (its stdin ends: it exits), and wait until it has. */
  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.stdin?.end();
    await this.exited;
  }
}
