// `pnpm demo` is the README's first command: run it here too, so `pnpm test`
// fails when a scene stops behaving (the demo exits 1 on any claim that does
// not hold). Plain mode (stdout a pipe), twice on one directory (the second
// run restores the first's conversation); bad input; live tokens from a model
// server on 127.0.0.1 (the whole demo on a model adapter is demoModel.test.ts);
// and a terminal, through script(1), when it is there.
//
// It shares the machine with other test files: the demo holds its timing
// claims (a cancel seen within 5 ms, the fan-out's speed-up) to a bare thread
// measured between its own runs, and says so when other processes hold the
// cores (“the machine is busy”) rather than failing; its strict run is the
// README's first command, alone on the machine.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { ChatServer, event, finishChunk, type Handler, startSse, textChunk } from '../openai/chatServer.js';
import { tempDir } from '../persistence/sqliteFiles.js';
import { instructedModel } from './instructedModel.js';
import { EXAMPLES_DIST, startProcess } from './startProcess.js';

const DEMO = join(EXAMPLES_DIST, 'demo.js');
// biome-ignore lint/suspicious/noControlCharactersInRegex: escape sequences are what is looked for.
const ESCAPE = /\x1b/;

const dirs: { remove(): void }[] = [];
after(() => {
  for (const d of dirs) d.remove();
});

function freshDir(): string {
  const d = tempDir('demo');
  dirs.push(d);
  return d.dir;
}

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run the demo to its end with a piped stdout (plain mode), its stdin closed, `CI` and the model unset. */
function runDemo(args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<Run> {
  const base = { ...process.env };
  for (const name of ['CI', 'NO_COLOR', 'TROUPE_DEMO_DIR', 'TROUPE_MODEL_BASE_URL', 'TROUPE_MODEL']) delete base[name];
  const child = spawn(process.execPath, ['--enable-source-maps', DEMO, ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const columns = (line: string): number => [...line].length;

/** The text with every run of white space as one space: claims wrap where their figures make them. */
const flat = (text: string): string => text.replace(/\s+/g, ' ');

/** Every line fits 80 columns and no escape sequence was written. */
function assertPlain(text: string): void {
  assert.doesNotMatch(text, ESCAPE, 'plain mode writes no escape sequence');
  const wide = text.split('\n').filter((l) => columns(l) > 80);
  assert.deepEqual(wide, [], 'every line fits 80 columns');
}

const UNIT_MS: Readonly<Record<string, number>> = { µs: 0.001, ms: 1, s: 1000 };

/** The headline figure `label` of the summary, in ms (or as a plain number when it has no unit). */
function figure(stdout: string, label: string, pattern: string): number {
  const match = new RegExp(`^ {3}${label} +${pattern}`, 'm').exec(stdout);
  assert.ok(match, `the summary gives ${label}:\n${stdout}`);
  const value = Number(match[1]);
  const unit = match[2];
  const ms = unit === undefined ? value : value * (UNIT_MS[unit] ?? Number.NaN);
  assert.ok(Number.isFinite(ms), `${label} is a number: ${match[0]}`);
  return ms;
}

const DURATION = '([\\d.]+) (µs|ms|s)\\b';

describe('examples/demo', { timeout: 180_000 }, () => {
  it('plain mode: every claim holds, with figures measured in this run; a second run restores the conversation', async () => {
    const dir = freshDir();
    const first = await runDemo([], { TROUPE_DEMO_DIR: dir });
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
    assert.equal(first.stderr, '');
    assertPlain(first.stdout);
    const out = first.stdout;
    const claims = Number(/^(\d+) claims checked in /m.exec(out)?.[1]);
    assert.ok(claims >= 30, `${claims} claims`);
    assert.match(
      out,
      new RegExp(`database: ${join(dir, 'troupe.sqlite').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(new\\)`),
    );
    assert.match(flat(out), /answered for you: not a terminal/);

    // The four figures no peer shows, from the summary: numbers, and in the ranges the claims checked.
    const speedup = figure(out, 'fan-out speed-up', '([\\d.]+)×');
    assert.ok(speedup > 0, `speed-up ${speedup}`);
    assert.match(
      flat(out),
      // A speed-up held to what bare threads got in the same round, or a busy machine that says so.
      /✓ (the fan-out ran [\d.]+× faster than one event loop: \d+% of what bare threads got|the machine is busy \(other processes hold its cores: one loop got [\d.]+ of a core, bare threads [\d.]+×\), so no speed-up is claimed this run)/,
    );
    assert.match(flat(out), /✓ the tools ran 2 at a time on worker threads \d+ and \d+/);
    const busy = figure(out, 'event loop busy', '([\\d]+)%');
    assert.ok(busy >= 0 && busy < 50, `the supervisor's loop ran code ${busy}% of the fan-out`);
    assert.match(
      flat(out),
      /✓ meanwhile the supervisor's event loop ran code \d+% of the time .*\(one event loop: \d+%, held [\d.]+ (ms|s)\)/,
    );
    assert.match(flat(out), /✓ the threads ran the same work side by side: [\d.]+ (ms|s) of CPU/);
    const kill = figure(out, 'deadline → kill', DURATION);
    assert.ok(kill >= 199, `deadline → kill ${kill} ms: not before the 200 ms grace`);
    const cancel = figure(out, 'cancel → tool saw it', DURATION);
    assert.ok(cancel > 0 && cancel < 1000, `cancel → tool ${cancel} ms`);
    assert.equal(figure(out, 'threads held by a question', '(0) of 2'), 0);
    assert.match(flat(out), /✓ for the [\d.]+ (µs|ms|s) it was open, \d+ samples of the pool: 0 runs active/);
    assert.match(out, /Nothing saved yet: this is the first run on this database\./);
    assert.match(
      flat(out),
      /✓ a new question is left open for the next run \("Which environment should checkout-api go to\?"\)/,
    );
    assert.match(flat(out), /Skipped: set TROUPE_MODEL_BASE_URL/);

    const second = await runDemo([], { TROUPE_DEMO_DIR: dir });
    assert.equal(second.code, 0, `${second.stdout}\n${second.stderr}`);
    assertPlain(second.stdout);
    const again = second.stdout;
    assert.match(again, /\(from an earlier run\)/);
    assert.match(
      again,
      /restored conversation "desk": 2 messages:\n {5}you {3}deployer: checkout-api\n {5}desk {2}→ task\(deployer, "checkout-api"\)/,
    );
    assert.match(
      flat(again),
      /✓ the question the last run left open came back from the file \(asked [\d.]+ (ms|s) ago by another process\): "Which environment should checkout-api go to\?"/,
    );
    assert.match(
      flat(again),
      /✓ answered: desk-sub-1 resumed on a worker — the same child, restored, not a new one: \["deployed checkout-api to staging"\]/,
    );
    assert.match(
      flat(again),
      /✓ a new question is left open for the next run \("Which environment should search-api go to\?"\)/,
    );
  });

  it('a directory it cannot write: exit 2, naming the directory', async () => {
    const file = join(freshDir(), 'a-file');
    writeFileSync(file, 'not a directory');
    const dir = join(file, 'demo');
    const run = await runDemo(['--dir', dir]);
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.replace(/\n\s*/g, ' ').includes(`cannot keep its database in ${dir}`), run.stderr);
    assert.match(run.stderr, /change --dir/);
    assertPlain(run.stderr);
  });

  it("its default directory is the user's own (issue 32): under HOME, not one path in the OS temp dir", async () => {
    // A HOME that is a file: the default directory cannot be made, and the message names where it was.
    const home = join(freshDir(), 'home-file');
    writeFileSync(home, 'not a directory');
    const run = await runDemo([], { HOME: home, XDG_CACHE_HOME: '' });
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const said = run.stderr.replace(/\n\s*/g, ' ');
    assert.ok(said.includes(`cannot keep its database in ${join(home, '.cache', 'troupe-demo')}`), run.stderr);
    assert.match(said, /pass --dir <directory> or set TROUPE_DEMO_DIR/);
  });

  it('an unknown flag: exit 2 with the usage', async () => {
    const run = await runDemo(['--fast']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /Unknown option '--fast'/);
    assert.match(run.stderr, /usage: pnpm demo \[--yes\] \[--plain\] \[--dir <directory>\] \[--trace\]/);
  });

  it('live tokens: a model server on 127.0.0.1 streams the writer’s words from a worker, shown as they come', async (t) => {
    const server = await ChatServer.start();
    t.after(() => server.close());
    const words =
      'Two worker threads ran the four calls while the event loop stayed free; a runaway tool was killed after its grace.'.split(
        ' ',
      );
    // Every agent but the scripted ones asks this server; the writer gets the words, paced.
    const served = instructedModel('served-model');
    const writer: Handler = async (res, received) => {
      const body = received.body as { messages: { role: string; content: string | null }[] };
      if (!body.messages.some((m) => m.role === 'system' && m.content?.startsWith('You write for engineers'))) {
        return served(res, received);
      }
      startSse(res);
      for (const [i, w] of words.entries()) {
        event(res, textChunk(i === 0 ? w : ` ${w}`));
        // Paced on purpose: the deltas must reach the demo while the answer is still being written.
        await delay(5);
      }
      event(res, finishChunk());
      res.end('data: [DONE]\n\n');
    };
    server.script(...Array.from({ length: 300 }, () => writer));
    const run = await runDemo([], {
      TROUPE_DEMO_DIR: freshDir(),
      TROUPE_MODEL_BASE_URL: server.baseURL,
      TROUPE_MODEL: 'test-model',
    });
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assertPlain(run.stdout);
    const asked = server.received.filter((r) =>
      (r.body.messages as { content: string | null }[]).some((m) => m.content?.startsWith('You write for engineers')),
    );
    assert.equal(asked.length, 1, 'one call of the writer’s model');
    const request = asked[0]?.body as { model: string; stream: boolean; messages: { content: string }[] };
    assert.equal(request.model, 'test-model');
    assert.equal(request.stream, true);
    // The writer was given the figures this run measured.
    assert.match(request.messages.map((m) => m.content).join('\n'), /fan-out speed-up: [\d.]+×/);
    const streamed = run.stdout
      .split('\n')
      .filter((l) => l.startsWith('   │ '))
      .map((l) => l.slice(5))
      .join(' ');
    assert.equal(streamed, words.join(' '));
    assert.match(flat(run.stdout), new RegExp(`✓ ${words.length} text deltas; the first reached the host`));
    assert.match(
      flat(run.stdout),
      /✓ every delta came from editor > editor-sub-1 \(the writer, on a worker\), in order/,
    );
    figure(run.stdout, 'first token', DURATION);
  });

  it('on a terminal: colour, the tree redrawn in place, questions asked on stdin', async (t) => {
    if (spawnSync('script', ['--version']).status !== 0) {
      t.skip('script(1) from util-linux is not installed: no pseudo-terminal to run the demo on');
      return;
    }
    const base = { ...process.env };
    for (const name of ['CI', 'NO_COLOR', 'TROUPE_MODEL_BASE_URL', 'TROUPE_MODEL']) delete base[name];
    const command = `stty cols 80 rows 40; exec ${JSON.stringify(process.execPath)} --enable-source-maps ${JSON.stringify(DEMO)}`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { ...base, TROUPE_DEMO_DIR: freshDir(), TERM: 'xterm-256color' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    t.after(() => child.kill('SIGKILL'));
    let raw = '';
    // Answer each question when its prompt is on the screen (the pty echoes what is typed).
    const answers: [string, string][] = [
      ['go to? [staging]', 'prod'],
      ['(yes/no) [yes]', 'no'],
    ];
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      raw += d;
      const next = answers[0];
      if (next !== undefined && raw.includes(next[0])) {
        answers.shift();
        child.stdin.write(`${next[1]}\r`);
      }
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    const screen = screenOf(raw);
    assert.equal(code, 0, screen.join('\n'));
    assert.deepEqual(answers, [], 'both questions were asked');
    assert.ok(raw.includes('\x1b[32m✓'), 'colour: a green ✓');
    assert.match(raw.replaceAll('\x1b', '^'), /\^\[\d+A\r\^\[J/, 'the live region is redrawn in place');
    assert.ok(raw.trimEnd().endsWith('\x1b[?25h'), 'the cursor is shown again at the end');
    const wide = screen.filter((l) => columns(l) > 80);
    assert.deepEqual(wide, [], 'every line on the screen fits 80 columns');
    const text = flat(screen.join('\n'));
    assert.match(text, /\? Which environment should checkout-api go to\? \[staging\] prod/);
    assert.match(text, /✓ supervisor\.answer resumed the run on a worker: "deployed checkout-api to prod"/);
    assert.match(text, /✓ a person said no: A-2 never ran/);
    assert.match(text, / \d+ claims checked in /);
    assert.deepEqual(
      screen.filter((l) => l.startsWith('✗')),
      [],
      'no failure (the tree marks failed agents ✗ too, indented)',
    );
  });

  it('examples/quickstart runs and exits 0', { timeout: 30_000 }, async (t) => {
    const quickstart = startProcess(join(EXAMPLES_DIST, 'quickstart.js'));
    t.after(() => quickstart.child.kill('SIGKILL'));
    const exit = await quickstart.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, `${quickstart.lines.join('\n')}\n${quickstart.stderr()}`);
  });
});

/**
 * The lines a terminal shows after `raw`: printable text, CR, LF, cursor up
 * (CSI n A) and erase to the end of the screen (CSI J) — what the demo's
 * live output writes; colours are dropped.
 */
function screenOf(raw: string): string[] {
  const lines: string[] = [''];
  let row = 0;
  let col = 0;
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i] as string;
    if (ch === '\x1b') {
      const m = raw[i + 1] === '[' ? /^([0-9;?]*)([A-Za-z])/.exec(raw.slice(i + 2, i + 16)) : null;
      if (m === null) continue;
      const [rest, arg = '', cmd] = m;
      const all = `..${rest}`;
      if (cmd === 'A') row = Math.max(0, row - Number(arg || 1));
      else if (cmd === 'J') {
        lines.length = row + 1;
        lines[row] = (lines[row] ?? '').slice(0, col);
      }
      i += all.length - 1;
    } else if (ch === '\r') col = 0;
    else if (ch === '\n') {
      row++;
      col = 0;
      if (row >= lines.length) lines.push('');
    } else {
      const line = [...(lines[row] ?? '')];
      while (line.length < col) line.push(' ');
      line[col] = ch;
      lines[row] = line.join('');
      col++;
    }
  }
  return lines;
}

// A compiled module of the examples, for the unit checks below.
async function load<T>(path: string): Promise<T> {
  return (await import(pathToFileURL(join(EXAMPLES_DIST, path)).href)) as T;
}

describe('examples/demo: its text layout', () => {
  it('TokenLines cuts streamed text into lines of the width, whatever the chunks', async () => {
    const { TokenLines } = await load<{
      TokenLines: new (
        width: number,
        indent: string,
      ) => { push(text: string): string[]; end(): string[]; readonly partial: string };
    }>('demo/TokenLines.js');
    const text =
      'A cancel reaches a busy tool in microseconds because the flag is in shared memory.\nA second paragraph.';
    for (const size of [1, 3, 7, 1000]) {
      const lines = new TokenLines(30, '> ');
      const out: string[] = [];
      for (let i = 0; i < text.length; i += size) out.push(...lines.push(text.slice(i, i + size)));
      out.push(...lines.end());
      assert.ok(
        out.every((l) => l.startsWith('> ') && columns(l) <= 30),
        `chunks of ${size}: ${JSON.stringify(out)}`,
      );
      assert.equal(out.map((l) => l.slice(2)).join(' '), text.replace('\n', ' '), `chunks of ${size}`);
    }
  });

  it('wrapText and fitText keep every line within the width, figures and colours uncounted', async () => {
    const { wrapText, fitText, fig, visibleLength } = await load<{
      wrapText: (text: string, width: number, first?: string, rest?: string) => string[];
      fitText: (text: string, width: number) => string;
      fig: (text: string) => string;
      visibleLength: (text: string) => number;
    }>('demo/wrapText.js');
    const lines = wrapText(
      `cancel → the tool saw it: ${fig('63.0 µs')} (median) ${'x'.repeat(50)}`,
      20,
      '   ✓ ',
      '     ',
    );
    assert.ok(
      lines.every((l) => visibleLength(l) <= 20),
      JSON.stringify(lines),
    );
    const cut = fitText(`\x1b[32m${'y'.repeat(30)}\x1b[39m`, 10);
    assert.equal(visibleLength(cut), 10);
    assert.ok(cut.endsWith('\x1b[0m…'), 'a cut colour is reset');
  });
});

describe('examples/demo: what it says (issue 32)', () => {
  it('the default database directory is per user: two users, two directories, none shared in the temp dir', async () => {
    const { defaultDemoDir, parseDemoOptions } = await load<{
      defaultDemoDir: (env: NodeJS.ProcessEnv, platform?: NodeJS.Platform) => string;
      parseDemoOptions: (argv: readonly string[], env: NodeJS.ProcessEnv, streams: object) => { dir: string };
    }>('demo/DemoOptions.js');
    const streams = { stdinIsTTY: false, stdoutIsTTY: false };
    const alice = parseDemoOptions([], { HOME: '/home/alice' }, streams).dir;
    const bob = parseDemoOptions([], { HOME: '/home/bob' }, streams).dir;
    if (process.platform === 'linux') {
      assert.equal(alice, '/home/alice/.cache/troupe-demo');
      assert.equal(bob, '/home/bob/.cache/troupe-demo');
      assert.equal(
        parseDemoOptions([], { HOME: '/home/alice', XDG_CACHE_HOME: '/var/cache/alice' }, streams).dir,
        '/var/cache/alice/troupe-demo',
      );
    }
    assert.notEqual(alice, bob);
    assert.ok(!alice.startsWith(tmpdir()) && !bob.startsWith(tmpdir()), `${alice}, ${bob}`);
    assert.equal(
      defaultDemoDir({ HOME: '/Users/carol' }, 'darwin'),
      join('/Users/carol', 'Library', 'Caches', 'troupe-demo'),
    );
    assert.equal(
      defaultDemoDir({ LOCALAPPDATA: 'C:\\Users\\dan\\AppData\\Local' }, 'win32'),
      join('C:\\Users\\dan\\AppData\\Local', 'troupe-demo'),
    );
    // The flag and the variable still win.
    assert.equal(parseDemoOptions(['--dir', '/srv/demo'], { HOME: '/home/alice' }, streams).dir, '/srv/demo');
  });

  it('a ratio below 1 reads as slower, never "0.93× faster"', async () => {
    const { fasterOrSlower } = await load<{ fasterOrSlower: (x: number) => string }>('demo/scenes/fanOut.js');
    assert.equal(fasterOrSlower(1.85), '1.85× faster');
    assert.equal(fasterOrSlower(1), '1.00× faster');
    assert.equal(fasterOrSlower(0.93), '1.08× slower');
    assert.equal(fasterOrSlower(0.5), '2.00× slower');
  });

  it('the transcript shows a reply as its words, not JSON inside JSON', async () => {
    const { transcriptLine } = await load<{
      transcriptLine: (m: { role: string; content: string; toolCalls?: unknown[] }, who: string) => string | undefined;
    }>('demo/transcriptLine.js');
    // What the desk's transcript holds after an answer: its reply, the JSON of its tasks' reports, each
    // report's text the deployer's own JSON answer. Shown before as [{"ok":"[\"deployed…\"]"}].
    const reply = JSON.stringify([{ ok: JSON.stringify(['deployed checkout-api to staging']) }]);
    assert.equal(
      transcriptLine({ role: 'assistant', content: reply }, 'desk'),
      'desk  deployed checkout-api to staging',
    );
    assert.equal(
      transcriptLine({ role: 'tool', content: JSON.stringify(['deployed checkout-api to staging']) }, 'desk'),
      'tool  deployed checkout-api to staging',
    );
    const failed = JSON.stringify([{ ok: 'done' }, { error: { error: 'worker exited', code: 'ERR_WORKER_CRASHED' } }]);
    assert.equal(
      transcriptLine({ role: 'assistant', content: failed }, 'desk'),
      'desk  done | error: worker exited (ERR_WORKER_CRASHED)',
    );
    assert.equal(transcriptLine({ role: 'assistant', content: 'in its own words' }, 'desk'), 'desk  in its own words');
    assert.equal(
      transcriptLine(
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ name: 'task', arguments: { subagent: 'deployer', instructions: 'checkout-api' } }],
        },
        'desk',
      ),
      'desk  → task(deployer, "checkout-api")',
    );
  });
});
