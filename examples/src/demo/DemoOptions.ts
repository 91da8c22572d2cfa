import { homedir, tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/** How the demo runs, from its flags and environment. */
export interface DemoOptions {
  /** Where the SQLite database lives. */
  readonly dir: string;
  /** Where `dir` came from, to say so. */
  readonly dirFrom: '--dir' | 'TROUPE_DEMO_DIR' | 'default';
  /** Answer every question without asking. */
  readonly yes: boolean;
  /** A live, paced terminal display; else plain lines. */
  readonly live: boolean;
  /** ANSI colours (live mode without NO_COLOR). */
  readonly color: boolean;
  /** Ask the person on stdin (a terminal, without --yes). */
  readonly ask: boolean;
  /** Why questions are answered automatically, when they are. */
  readonly autoReason: string | undefined;
  readonly help: boolean;
}

/** A flag the demo does not know, or a flag without its value. */
export class DemoUsageError extends Error {
  override readonly name = 'DemoUsageError';
}

export const USAGE = `usage: pnpm demo [--yes] [--plain] [--dir <directory>] [--trace]

  --yes, -y      answer the demo's questions automatically
  --plain        plain lines, as when the output is not a terminal
  --dir <path>   where the demo keeps its SQLite database
                 (also TROUPE_DEMO_DIR; default: troupe-demo in your user
                 cache directory: $XDG_CACHE_HOME or ~/.cache, %LOCALAPPDATA%
                 on Windows, ~/Library/Caches on macOS)
  --trace        print the supervisor's spans as a tree at the end (also
                 TROUPE_DEMO_TRACE=1; OTEL_EXPORTER_OTLP_ENDPOINT exports them)

Plain lines (no colour, no redraw, no pause) when stdout is not a terminal
or CI is set; NO_COLOR turns colour off. TROUPE_MODEL_BASE_URL and
TROUPE_MODEL name an OpenAI-compatible server whose tokens the demo streams.`;

interface Streams {
  readonly stdinIsTTY: boolean;
  readonly stdoutIsTTY: boolean;
}

/**
 * Where the demo keeps its database unless told: `troupe-demo` in the user's
 * cache directory (`$XDG_CACHE_HOME`, else `~/.cache`; `%LOCALAPPDATA%` on
 * Windows; `~/Library/Caches` on macOS) — one per user, never a path shared
 * by every user of the machine (one user's file is not another's to open).
 * Without a home directory: `troupe-demo-<uid or user name>` in the OS temp dir.
 */
export function defaultDemoDir(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): string {
  const set = (name: string): string | undefined => {
    const value = env[name];
    return value !== undefined && value.trim() !== '' ? value : undefined;
  };
  let home: string | undefined = set(platform === 'win32' ? 'USERPROFILE' : 'HOME');
  try {
    home ??= homedir() || undefined;
  } catch {}
  if (platform === 'win32') {
    const local = set('LOCALAPPDATA') ?? (home === undefined ? undefined : join(home, 'AppData', 'Local'));
    if (local !== undefined) return join(local, 'troupe-demo');
  } else if (platform === 'darwin' && home !== undefined) {
    return join(home, 'Library', 'Caches', 'troupe-demo');
  } else {
    const cache = set('XDG_CACHE_HOME') ?? (home === undefined ? undefined : join(home, '.cache'));
    if (cache !== undefined) return join(cache, 'troupe-demo');
  }
  let user: string;
  try {
    const info = userInfo();
    user = info.uid >= 0 ? String(info.uid) : info.username;
  } catch {
    user = set('USER') ?? set('USERNAME') ?? 'unknown';
  }
  return join(tmpdir(), `troupe-demo-${user}`);
}

/** Parse `argv` (without node and the script) strictly: an unknown flag is a {@link DemoUsageError}. */
export function parseDemoOptions(argv: readonly string[], env: NodeJS.ProcessEnv, streams: Streams): DemoOptions {
  let values: { yes?: boolean; plain?: boolean; dir?: string; help?: boolean; trace?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        yes: { type: 'boolean', short: 'y' },
        plain: { type: 'boolean' },
        dir: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        // Read by tracing.ts from argv; declared so that it parses.
        trace: { type: 'boolean' },
      },
    }));
  } catch (error) {
    throw new DemoUsageError(`${(error as Error).message}\n\n${USAGE}`);
  }
  if (values.dir !== undefined && values.dir.trim() === '') throw new DemoUsageError(`--dir needs a path\n\n${USAGE}`);
  const fromEnv = env.TROUPE_DEMO_DIR !== undefined && env.TROUPE_DEMO_DIR !== '' ? env.TROUPE_DEMO_DIR : undefined;
  const dir = resolve(values.dir ?? fromEnv ?? defaultDemoDir(env));
  const ci = env.CI !== undefined && env.CI !== '' && env.CI !== '0' && env.CI.toLowerCase() !== 'false';
  const live = streams.stdoutIsTTY && !ci && values.plain !== true && env.TERM !== 'dumb';
  const yes = values.yes === true;
  const ask = live && streams.stdinIsTTY && !yes;
  const autoReason = ask
    ? undefined
    : yes
      ? '--yes'
      : !streams.stdinIsTTY || !streams.stdoutIsTTY
        ? 'not a terminal'
        : ci
          ? 'CI is set'
          : 'plain output';
  return {
    dir,
    dirFrom: values.dir !== undefined ? '--dir' : fromEnv !== undefined ? 'TROUPE_DEMO_DIR' : 'default',
    yes,
    live,
    color: live && (env.NO_COLOR === undefined || env.NO_COLOR === ''),
    ask,
    autoReason,
    help: values.help === true,
  };
}
