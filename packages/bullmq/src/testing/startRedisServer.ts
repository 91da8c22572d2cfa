// A redis-server of a test's (or a demo's, a benchmark's) own on 127.0.0.1, on a free port: no persistence
// unless asked, `maxmemory-policy noeviction` (what BullMQ needs), its files in
// a temporary directory. It stops by itself when the test process ends in any
// way — a normal exit, a thrown error, SIGKILL: a watcher process holds the
// read end of a pipe whose only write end is the test process's, and kills the
// server when it reads the end of it (the kernel closes the write end when the
// test process dies, however it dies). The failure tests pause it (SIGSTOP),
// resume it (SIGCONT) and restart it empty on the same port.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What to do when redis-server is missing: the message of the error
 * {@link startRedisServer} throws then.
 *
 * @example
 * ```ts
 * await startRedisServer().catch((e: Error) => { if (e.message === REDIS_MISSING) console.error(e.message) })
 * ```
 */
export const REDIS_MISSING =
  'redis-server is not installed (the @troupe/bullmq tests start their own Redis 7 on 127.0.0.1). ' +
  'Get it: run `pnpm install` as root on Debian/Ubuntu (the project installs it: scripts/provision/redis.mjs), ' +
  'or `sudo apt-get install -y redis-server`, or `brew install redis` on macOS, or put a Redis 7 redis-server on the PATH';

/**
 * Options of {@link startRedisServer}.
 *
 * @example
 * ```ts
 * const options: RedisServerOptions = { persistence: true }
 * const redis = await startRedisServer(options)
 * ```
 */
export interface RedisServerOptions {
  /** Append-only file on (`appendfsync always`), so a restart keeps what was written. Default false. */
  readonly persistence?: boolean;
  /** The eviction policy (default `noeviction`; a test of the start check asks for another). */
  readonly maxmemoryPolicy?: string;
  /** `requirepass` (a test that a URL's password is never shown). */
  readonly password?: string;
}

/**
 * A running redis-server of {@link startRedisServer}.
 *
 * @example
 * ```ts
 * const redis: RedisServer = await startRedisServer()
 * redis.pause() // SIGSTOP: it answers nothing
 * redis.resume()
 * await redis.stop()
 * ```
 */
export interface RedisServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** `redis://127.0.0.1:<port>` (with the password, when there is one). */
  readonly url: string;
  /** The server's process id (changes on a restart). */
  readonly pid: number;
  /** SIGSTOP the server: it holds every connection and answers nothing. */
  pause(): void;
  /** SIGCONT it. */
  resume(): void;
  /** Kill it (SIGKILL) and start a new, empty one on the same port (persisted data kept when `persistence`). */
  restart(options?: { readonly empty?: boolean }): Promise<void>;
  /** One command over a fresh connection (RESP), its reply as text (for checks in tests). */
  command(...args: string[]): Promise<string>;
  /** Every key and every value in the server (strings, hashes, lists, sets, sorted sets, streams), as text. */
  dump(): Promise<string>;
  /** Stop it (SIGTERM, then its exit) and remove its files. Idempotent. */
  stop(): Promise<void>;
}

let checked = false;
function assertInstalled(): void {
  if (checked) return;
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0 || !/v=7\./.test(r.stdout)) {
    const got = r.error === undefined ? ` (found: ${r.stdout.trim() || r.stderr.trim()}; Redis 7 is needed)` : '';
    throw new Error(`${REDIS_MISSING}${got}`);
  }
  checked = true;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

interface Incarnation {
  readonly child: ChildProcess;
  readonly watcher: ChildProcess;
  readonly exited: Promise<void>;
}

/**
 * Start a redis-server of your own on 127.0.0.1 on a free port (no
 * persistence unless asked, `maxmemory-policy noeviction`) and wait until it
 * accepts connections: for tests, demos and benchmarks of a cluster on one
 * machine. It stops by itself when this process ends, however it ends (a
 * watcher process kills it when this process's end of a pipe closes).
 * Throws {@link REDIS_MISSING} when redis-server is not installed: a test
 * should fail with that, never skip.
 *
 * @example
 * ```ts
 * import { bullmqTransport } from '@troupe/bullmq'
 * const redis = await startRedisServer()
 * const transport = bullmqTransport({ connection: redis.url, build: 'dev' })
 * // ...
 * await redis.stop()
 * ```
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  assertInstalled();
  const dir = mkdtempSync(join(tmpdir(), 'troupe-redis-'));
  let port = 0;
  let current: Incarnation | undefined;
  let stopped = false;

  const args = (): string[] => {
    const a = [
      '--bind',
      '127.0.0.1',
      '--port',
      String(port),
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      options.persistence === true ? 'yes' : 'no',
      '--maxmemory-policy',
      options.maxmemoryPolicy ?? 'noeviction',
      '--daemonize',
      'no',
      '--loglevel',
      'notice',
      // Ready is read from the log: keep it on stdout.
      '--logfile',
      '',
      // DEBUG SLEEP from this host: a failure test holds the server a given time by its own clock.
      '--enable-debug-command',
      'local',
    ];
    if (options.persistence === true) a.push('--appendfsync', 'always');
    if (options.password !== undefined) a.push('--requirepass', options.password);
    return a;
  };

  const launch = async (): Promise<Incarnation> => {
    const child = spawn('redis-server', args(), { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let log = '';
    const ready = new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        log += chunk.toString();
        // Redis 7 logs "Ready to accept connections tcp" once it listens (at the notice level).
        if (log.includes('Ready to accept connections')) resolve();
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        reject(new Error(`redis-server exited (${code ?? signal}) at start: ${log}`)),
      );
    });
    // The watcher: its stdin is a pipe whose write end only this process holds (libuv opens it
    // close-on-exec, so no other child inherits it). It blocks reading it; at the end of it —
    // this process gone, however — it kills the server (also when paused) and removes its files.
    const pid = child.pid as number;
    const watcher = spawn(
      'sh',
      [
        '-c',
        'cat >/dev/null; kill -KILL "$1" 2>/dev/null; kill -CONT "$1" 2>/dev/null; rm -rf "$2"',
        'watch',
        String(pid),
        dir,
      ],
      { stdio: ['pipe', 'ignore', 'ignore'], detached: true },
    );
    watcher.unref();
    (watcher.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    await ready;
    // Started: the server must not keep the test process alive (the test stops it, or its end does).
    child.unref();
    (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
    child.stdout?.removeAllListeners('data');
    child.stderr?.removeAllListeners('data');
    child.stdout?.resume();
    child.stderr?.resume();
    return { child, watcher, exited };
  };

  // Another process may take the free port between the probe and the server's bind: try again.
  for (let tries = 0; ; tries++) {
    port = await freePort();
    try {
      current = await launch();
      break;
    } catch (error) {
      if (tries >= 4 || !String(error).includes('Address already in use')) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }

  const retire = async (inc: Incarnation, signal: NodeJS.Signals): Promise<void> => {
    // The watcher first: it must not kill a later process that reuses the pid.
    inc.watcher.kill('SIGKILL');
    // Waited for: it must keep this process alive until it has exited.
    inc.child.ref();
    if (inc.child.exitCode === null && inc.child.signalCode === null) {
      inc.child.kill(signal);
      if (signal !== 'SIGKILL') inc.child.kill('SIGCONT');
    }
    await inc.exited;
  };

  const onExit = () => {
    if (current !== undefined && current.child.exitCode === null) current.child.kill('SIGKILL');
  };
  process.once('exit', onExit);

  const url =
    options.password === undefined ? `redis://127.0.0.1:${port}` : `redis://:${options.password}@127.0.0.1:${port}`;
  const server: RedisServer = {
    host: '127.0.0.1',
    port,
    url,
    get pid() {
      return current?.child.pid as number;
    },
    pause() {
      current?.child.kill('SIGSTOP');
    },
    resume() {
      current?.child.kill('SIGCONT');
    },
    async restart({ empty = true } = {}) {
      if (current !== undefined) await retire(current, 'SIGKILL');
      if (empty) rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      current = await launch();
    },
    command: (...a) => respCommand(port, options.password, a),
    async dump() {
      const keys = (await respCommand(port, options.password, ['KEYS', '*'])).split('\n').filter((k) => k !== '');
      const out: string[] = [];
      for (const key of keys) {
        out.push(key);
        const type = await respCommand(port, options.password, ['TYPE', key]);
        const read: Record<string, string[]> = {
          string: ['GET', key],
          hash: ['HGETALL', key],
          list: ['LRANGE', key, '0', '-1'],
          set: ['SMEMBERS', key],
          zset: ['ZRANGE', key, '0', '-1', 'WITHSCORES'],
          stream: ['XRANGE', key, '-', '+'],
        };
        const command = read[type];
        if (command !== undefined) out.push(await respCommand(port, options.password, command));
      }
      return out.join('\n');
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', onExit);
      if (current !== undefined) await retire(current, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

/** Send one command over RESP on a fresh connection; the reply flattened to lines of text. */
async function respCommand(port: number, password: string | undefined, args: readonly string[]): Promise<string> {
  const socket = new Socket();
  socket.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const encode = (a: readonly string[]) =>
    `*${a.length}\r\n${a.map((s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`).join('')}`;
  let pending = password === undefined ? 1 : 2;
  let buffer = Buffer.alloc(0);
  const replies: string[] = [];
  const done = new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const parsed = parseReply(buffer, 0);
        if (parsed === undefined) return;
        buffer = buffer.subarray(parsed.end);
        replies.push(parsed.text);
        if (--pending === 0) {
          resolve();
          return;
        }
      }
    });
  });
  if (password !== undefined) socket.write(encode(['AUTH', password]));
  socket.write(encode(args));
  await done;
  socket.destroy();
  return replies[replies.length - 1] as string;
}

function parseReply(buf: Buffer, at: number): { text: string; end: number } | undefined {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[at] as number);
  const line = buf.toString('utf8', at + 1, eol);
  switch (type) {
    case '+':
    case ':':
      return { text: line, end: eol + 2 };
    case '-':
      return { text: `ERR ${line}`, end: eol + 2 };
    case '$': {
      const n = Number(line);
      if (n < 0) return { text: '', end: eol + 2 };
      if (buf.length < eol + 2 + n + 2) return undefined;
      return { text: buf.toString('utf8', eol + 2, eol + 2 + n), end: eol + 2 + n + 2 };
    }
    case '*': {
      const n = Number(line);
      let end = eol + 2;
      const parts: string[] = [];
      for (let i = 0; i < n; i++) {
        const p = parseReply(buf, end);
        if (p === undefined) return undefined;
        parts.push(p.text);
        end = p.end;
      }
      return { text: parts.join('\n'), end };
    }
    default:
      return { text: line, end: eol + 2 };
  }
}
