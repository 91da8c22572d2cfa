// `pnpm test`'s runner: every test file under test/src (any folder, any depth)
// in two passes of `node --test`.
//
// 1. Together: the files that can share the machine, TROUPE_TEST_CONCURRENCY
//    at a time (default 3: most files wait on threads, child processes and
//    sockets more than they compute), the long runs (files that call byDepth)
//    first.
// 2. Alone, one after the other: the files whose source says `// runs alone:`
//    with the reason (a file that would change what every other file
//    imports, or hold figures no neighbour may disturb). None does today; a
//    new file runs in the first pass unless it says so.
//
// Only files whose source exists run: a compiled test left in test/dist by a
// file since moved or deleted does not. Arguments narrow the run to files
// under the given paths (`node test/dist/runner/runTests.js test/src/core`);
// `--deep-only` to the files whose depth TROUPE_TEST_DEPTH sets (they call
// byDepth). TROUPE_TEST_DEPTH=deep runs the long fuzz, property and stress
// runs at full depth (fixtures/testDepth.ts); it is checked here before
// anything runs.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const testRoot = fileURLToPath(new URL('../../', import.meta.url));
const srcRoot = join(testRoot, 'src');
const distRoot = join(testRoot, 'dist');
/** The marker of a file that must have the machine to itself, followed by why. */
const ALONE = /^\/\/ runs alone: \S/m;
/** A file whose depth TROUPE_TEST_DEPTH sets. */
const DEPTH = /\bbyDepth\(/;

function fail(message: string): never {
  console.error(`test runner: ${message}`);
  process.exit(2);
}

function concurrency(): number {
  const raw = process.env.TROUPE_TEST_CONCURRENCY;
  if (raw === undefined || raw === '') return 3;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > 64) {
    fail(`TROUPE_TEST_CONCURRENCY=${raw}: pass a number of files to run at once, from 1 to 64`);
  }
  return n;
}

/** Every `*.test.ts` under `dir`, sorted. */
function sources(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sources(path));
    else if (entry.isFile() && entry.name.endsWith('.test.ts')) found.push(path);
  }
  return found.sort();
}

/** Whether `file` (a source path) is under one of `paths` (source or compiled, relative to the cwd). */
function selected(file: string, paths: readonly string[]): boolean {
  if (paths.length === 0) return true;
  return paths.some((p) => {
    let target = resolve(p);
    if (target.startsWith(distRoot)) target = join(srcRoot, relative(distRoot, target)).replace(/\.js$/, '.ts');
    return file === target || file.startsWith(target.endsWith(sep) ? target : `${target}${sep}`);
  });
}

function runPass(name: string, files: readonly string[], atOnce: number): boolean {
  if (files.length === 0) return true;
  console.log(`\n# ${name}: ${files.length} files, ${atOnce} at a time (TROUPE_TEST_DEPTH=${depth})`);
  const started = Date.now();
  const result = spawnSync(
    process.execPath,
    ['--test', `--test-concurrency=${atOnce}`, '--enable-source-maps', ...files.map((f) => relative(process.cwd(), f))],
    { stdio: 'inherit' },
  );
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  const passed = result.status === 0;
  console.log(`# ${name}: ${passed ? 'passed' : `failed (exit ${result.status ?? result.signal})`} in ${seconds} s`);
  return passed;
}

let deepOnly: boolean;
let paths: readonly string[];
try {
  const { values, positionals } = parseArgs({
    options: { 'deep-only': { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
  deepOnly = values['deep-only'] === true;
  paths = positionals;
} catch (error) {
  fail(
    `${(error as Error).message.split('\n')[0]}; usage: runTests.js [--deep-only] [path under test/src or test/dist ...]`,
  );
}
// A bad TROUPE_TEST_DEPTH is refused here, in one line, before any file runs.
const depth = await import('../fixtures/testDepth.js').then(
  (m) => m.TEST_DEPTH,
  (error: unknown) => fail((error as Error).message),
);
const together: string[] = [];
const alone: string[] = [];
/** Files that call byDepth: the long fuzz, property and stress runs. */
const long = new Set<string>();
for (const source of sources(srcRoot)) {
  if (!selected(source, paths)) continue;
  const compiled = join(distRoot, relative(srcRoot, source)).replace(/\.ts$/, '.js');
  if (!existsSync(compiled))
    fail(`${relative(testRoot, source)} is not built (no ${relative(testRoot, compiled)}): run pnpm build`);
  const text = readFileSync(source, 'utf8');
  if (deepOnly && !DEPTH.test(text)) continue;
  (ALONE.test(text) ? alone : together).push(compiled);
  if (DEPTH.test(text)) long.add(compiled);
}
// The long runs start first, so the last files to finish are short ones.
together.sort((a, b) => Number(long.has(b)) - Number(long.has(a)));
if (together.length + alone.length === 0) {
  fail(`no test file${deepOnly ? ' that calls byDepth' : ''}${paths.length > 0 ? ` under ${paths.join(', ')}` : ''}`);
}

const started = Date.now();
// Both passes run, so one failure does not hide another; the exit code says whether all passed.
const first = runPass('together', together, concurrency());
const second = runPass('alone', alone, 1);
console.log(
  `\n# ${together.length + alone.length} test files in ${((Date.now() - started) / 1000).toFixed(0)} s: ${first && second ? 'all passed' : 'FAILED'}`,
);
process.exitCode = first && second ? 0 : 1;
