// A real PostgreSQL server for tests: initdb into a temporary directory, `postgres` on 127.0.0.1 on a
// free port, fsync off (a commit is written to the OS at once, so a killed or restarted server keeps
// every commit it acknowledged; only a power loss could lose them). It dies with the test process: it runs with a parent-death signal
// (SIGQUIT, an immediate shutdown, when the process that started it is gone, however it died), and
// `stop()` (or the process's exit) removes its directory. Never skipped when the binaries are
// missing: it fails saying how to get them.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** A running server (one data directory, one port) and what a test does with it. */
export interface PostgresServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** The superuser (no password: trust on loopback). */
  readonly user: string;
  /** The database made at start. */
  readonly database: string;
  /** `postgres://user@127.0.0.1:port/database`. */
  readonly url: string;
  /** The directory of the server's binaries (pg_dump, psql beside them when installed). */
  readonly bin: string;
  /** The URL of `database` on this server. */
  urlOf(database: string): string;
  /** Create a database (empty) and return its URL. */
  createDatabase(name: string): Promise<string>;
  /** Run one SQL text as the superuser on `database` (default: the one made at start). */
  sql(text: string, params?: unknown[], database?: string): Promise<pg.QueryResult>;
  /** Stop the server (fast shutdown: clients are disconnected), keeping its data; `start()` brings it back on the same port. */
  stopServer(): Promise<void>;
  /** Stop the server at once (an immediate shutdown: no checkpoint, recovery at the next start, as after a crash), keeping its data. */
  crashServer(): Promise<void>;
  /** Start it again on the same port and data (after stopServer or crashServer). */
  startServer(): Promise<void>;
  /** Stop it and remove its directory. Idempotent. */
  stop(): Promise<void>;
}

const USER = 'troupe';
const DATABASE = 'troupe';
const live = new Set<() => void>();
process.once('exit', () => {
  for (const remove of live) remove();
});

/** Where the server's binaries are: `TROUPE_POSTGRES_BIN`, else Debian's newest `/usr/lib/postgresql/<n>/bin`. */
export function postgresBin(): string {
  const given = process.env.TROUPE_POSTGRES_BIN;
  const candidates: string[] = [];
  if (given !== undefined && given !== '') candidates.push(given);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(debian, v, 'bin'));
  }
  for (const dir of candidates) {
    if (existsSync(join(dir, 'postgres')) && existsSync(join(dir, 'initdb'))) return dir;
  }
  throw new Error(
    `PostgreSQL's server binaries (initdb, postgres) were not found (looked in: ${candidates.join(', ') || 'TROUPE_POSTGRES_BIN unset, no /usr/lib/postgresql'}). ` +
      "Get them: `pnpm install` as root installs Debian's postgresql (scripts/provision/postgres.mjs), or run `apt-get install -y postgresql`, " +
      'or set TROUPE_POSTGRES_BIN to a directory holding initdb and postgres (version 15 or later).',
  );
}

/** The uid and gid the server runs as: the `postgres` user when this process is root (initdb refuses root). */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      'these tests run as root, and PostgreSQL refuses to run as root: a `postgres` user is needed. ' +
        '`apt-get install -y postgresql` creates it (so does `pnpm install` as root, through scripts/provision/postgres.mjs).',
    );
  }
}

/** argv that runs `argv` as the server's user with a parent-death signal (setpriv), or as it is. */
function asServer(user: { uid: number; gid: number } | undefined, argv: string[]): string[] {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
  if (setpriv === undefined) {
    if (user !== undefined) throw new Error('setpriv (util-linux) is needed to run PostgreSQL as `postgres` from root');
    return argv;
  }
  const who = user === undefined ? [] : [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups'];
  return [setpriv, ...who, '--pdeathsig', 'SIGQUIT', '--', ...argv];
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * Start a server: initdb (C locale, UTF-8, trust on loopback), then `postgres` listening on
 * 127.0.0.1 only (no Unix socket) with fsync off. Resolves once it accepts connections (its log
 * says so) and the database `troupe` exists.
 */
export async function startPostgres(options: { label?: string } = {}): Promise<PostgresServer> {
  const bin = postgresBin();
  const user = serverUser();
  const root = mkdtempSync(join(tmpdir(), `troupe-pg-${options.label ?? 'test'}-`));
  const remove = () => rmSync(root, { recursive: true, force: true });
  live.add(remove);
  const data = join(root, 'data');
  try {
    if (user !== undefined) chownSync(root, user.uid, user.gid);
    const [cmd, ...args] = asServer(user, [
      join(bin, 'initdb'),
      '-D',
      data,
      '-U',
      USER,
      '-A',
      'trust',
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    execFileSync(cmd as string, args, { stdio: 'pipe' });
  } catch (error) {
    remove();
    live.delete(remove);
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`initdb failed: ${(error as Error).message}${stderr === '' ? '' : `\n${stderr}`}`);
  }

  let port = 0;
  let child: ChildProcess | undefined;
  const launch = async (fixedPort?: number): Promise<void> => {
    for (let tries = 0; ; tries++) {
      const p = fixedPort ?? (await freePort());
      const [cmd, ...args] = asServer(user, [
        join(bin, 'postgres'),
        '-D',
        data,
        '-p',
        String(p),
        '-h',
        '127.0.0.1',
        '-k',
        '',
        '-c',
        'fsync=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=200',
        '-c',
        'log_min_messages=warning',
      ]);
      const proc = spawn(cmd as string, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let log = '';
      const ready = await new Promise<boolean>((resolve) => {
        proc.stderr?.setEncoding('utf8');
        const onData = (chunk: string) => {
          log += chunk;
          if (log.includes('ready to accept connections')) {
            proc.stderr?.off('data', onData);
            // Keep draining its log, so a full pipe never blocks the server.
            proc.stderr?.resume();
            resolve(true);
          }
        };
        proc.stderr?.on('data', onData);
        proc.once('exit', () => resolve(false));
      });
      if (ready) {
        port = p;
        child = proc;
        proc.unref();
        (proc.stderr as unknown as { unref?: () => void })?.unref?.();
        return;
      }
      if (fixedPort === undefined && tries < 5 && /could not (bind|create listen)/.test(log)) continue;
      throw new Error(`postgres did not start on 127.0.0.1:${p}:\n${log}`);
    }
  };
  await launch();

  const stopChild = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, 'exit');
    proc.ref(); // held open until the server is gone
    // setpriv execs postgres: the child's pid is the postmaster's.
    proc.kill(signal);
    await exited;
  };

  const urlOf = (database: string) => `postgres://${USER}@127.0.0.1:${port}/${database}`;
  const sql = async (text: string, params: unknown[] = [], database = DATABASE) => {
    const client = new pg.Client({ connectionString: urlOf(database) });
    await client.connect();
    try {
      return await client.query(text, params);
    } finally {
      await client.end();
    }
  };
  await sql(`CREATE DATABASE ${DATABASE}`, [], 'postgres');
  let stopped = false;
  return {
    host: '127.0.0.1',
    get port() {
      return port;
    },
    user: USER,
    database: DATABASE,
    get url() {
      return urlOf(DATABASE);
    },
    bin,
    urlOf,
    async createDatabase(name) {
      await sql(`CREATE DATABASE "${name.replaceAll('"', '""')}"`, [], 'postgres');
      return urlOf(name);
    },
    sql,
    async stopServer() {
      await stopChild('SIGINT');
    },
    async crashServer() {
      await stopChild('SIGQUIT');
    },
    async startServer() {
      if (child !== undefined) throw new Error('the server is running');
      await launch(port);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopChild('SIGINT');
      remove();
      live.delete(remove);
    },
  };
}
