import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The compiled examples, run as their own processes. */
export const EXAMPLES_DIST = fileURLToPath(new URL('../../../examples/dist/', import.meta.url));

/** How a child process ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A running Node process whose stdout is read line by line. */
export interface RunningProcess {
  readonly child: ChildProcess;
  /** Every stdout line so far. */
  readonly lines: readonly string[];
  /** Everything written to stderr so far. */
  readonly stderr: () => string;
  /**
   * The first stdout line (past or future) matching `pattern`, counting only
   * lines from index `from` on; rejects if the process exits first.
   */
  line(pattern: RegExp, from?: number): Promise<RegExpExecArray>;
  /** Resolves when the process has exited and its output is read to the end. */
  readonly exited: Promise<Exit>;
}

/**
 * Start `node <script>` and follow its stdout line by line, so a test waits
 * for what the process says (a readiness line, a log line), never for time.
 * Kill it in `t.after` if the test may end early.
 */
export function startProcess(script: string, env: Readonly<Record<string, string>> = {}): RunningProcess {
  const child = spawn(process.execPath, ['--enable-source-maps', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  const waiting: {
    pattern: RegExp;
    from: number;
    resolve: (m: RegExpExecArray) => void;
    reject: (e: Error) => void;
  }[] = [];
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const reader = createInterface({ input: child.stdout as NonNullable<ChildProcess['stdout']> });
  reader.on('line', (line) => {
    lines.push(line);
    for (let i = waiting.length - 1; i >= 0; i--) {
      const w = waiting[i];
      const match = w !== undefined && lines.length > w.from ? w.pattern.exec(line) : null;
      if (w !== undefined && match) {
        waiting.splice(i, 1);
        w.resolve(match);
      }
    }
  });
  const closed = new Promise<void>((resolve) => reader.once('close', resolve));
  let ended = false;
  const exited = new Promise<Exit>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      void closed.then(() => {
        ended = true;
        const error = new Error(
          `the process exited (code ${code}, signal ${signal}) first\nstdout:\n${lines.join('\n')}\nstderr:\n${stderr}`,
        );
        for (const w of waiting.splice(0)) w.reject(error);
        resolve({ code, signal });
      });
    });
  });
  return {
    child,
    lines,
    stderr: () => stderr,
    exited,
    line(pattern, from = 0) {
      for (let i = from; i < lines.length; i++) {
        const match = pattern.exec(lines[i] as string);
        if (match) return Promise.resolve(match);
      }
      if (ended) return Promise.reject(new Error(`the process has exited; no line matched ${pattern}`));
      return new Promise((resolve, reject) => waiting.push({ pattern, from, resolve, reject }));
    },
  };
}
