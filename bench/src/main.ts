// `pnpm bench [suite ...] [--quick] [--pin] [--json <file>]` — the one entry for every benchmark.
// Flags are parsed strictly (parseBenchArgs): a misspelt one is an error, not ignored.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchInputError } from './BenchInputError.js';
import { type BenchArgs, HARNESS_FLAGS, parseBenchArgs } from './parseBenchArgs.js';
import { renderCharts } from './renderCharts.js';
import type { Chart, Figure, SuiteInfo } from './Suite.js';
import { flagTokens, type SuiteFlag } from './SuiteFlags.js';
import { round } from './stats.js';
import { suites } from './suites/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '..', '..');

/** Where charts go: bench/results/ for full runs (committed), bench/results/quick/ for --quick (ignored). */
function chartDir(quick: boolean): string {
  return resolve(repoRoot, 'bench', 'results', ...(quick ? ['quick'] : []));
}

function usage(): string {
  const flag = (name: string, f: SuiteFlag) =>
    `  --${`${name}${f.value === undefined ? '' : ` ${f.value}`}`.padEnd(28)} ${f.description}`;
  return [
    'usage: pnpm bench [suite ...] [--quick] [--pin] [--json <file>]',
    ...suites
      .filter((s) => s.flags !== undefined)
      .map(
        (s) =>
          `       pnpm bench ${s.name} ${Object.entries(s.flags ?? {})
            .map(([name, f]) => `[--${name}${f.value === undefined ? '' : ` ${f.value}`}]`)
            .join(' ')}`,
      ),
    ...Object.entries(HARNESS_FLAGS).map(([name, f]) => flag(name, f)),
    ...suites.flatMap((s) => Object.entries(s.flags ?? {}).map(([name, f]) => `${flag(name, f)} (${s.name})`)),
    `charts: SVG files in ${chartDir(false)} (full runs) or ${chartDir(true)} (--quick)`,
    'suites:',
    ...suites.map((s) => `  ${s.name.padEnd(8)} ${s.description}`),
  ].join('\n');
}

const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

/** The commit measured (`+dirty` when the work tree has changes), or `unknown` outside a git checkout. */
function gitCommit(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  return `${head.stdout.trim()}${dirty.stdout.trim() === '' ? '' : '+dirty'}`;
}
const tty = process.stderr.isTTY === true;
const startedAt = Date.now();
let progressLine = '';

function progress(raw: string): void {
  const message = `${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)} s  ${raw}`;
  if (tty) {
    const line = message.slice(0, (process.stderr.columns ?? 100) - 1);
    process.stderr.write(`\r${line}${' '.repeat(Math.max(0, progressLine.length - line.length))}`);
    progressLine = line;
  } else {
    process.stderr.write(`${message}\n`);
  }
}

function clearProgress(): void {
  if (tty && progressLine !== '') {
    process.stderr.write(`\r${' '.repeat(progressLine.length)}\r`);
    progressLine = '';
  }
}

function runChild(suite: SuiteInfo, placement: 'pinned' | 'unpinned', options: BenchArgs): Promise<Figure[]> {
  const entry = resolve(here, 'runSuite.js');
  const nodeArgs = ['--enable-source-maps', '--expose-gc', entry, suite.name, placement];
  if (options.quick) nodeArgs.push('--quick');
  nodeArgs.push(...flagTokens(options.suiteFlags.get(suite.name) ?? {}));
  const [cmd, args] =
    placement === 'pinned' && hasTaskset
      ? ['taskset', ['-c', '0', process.execPath, ...nodeArgs]]
      : [process.execPath, nodeArgs];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd as string, args as string[], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      cwd: repoRoot,
    });
    let figures: Figure[] | undefined;
    let failure: string | undefined;
    let inputError = false;
    child.on('message', (m: { type: string; message?: string; figures?: Figure[]; input?: boolean }) => {
      if (m.type === 'progress') progress(`[${suite.name}/${placement}] ${m.message ?? ''}`);
      else if (m.type === 'figures') figures = m.figures;
      else if (m.type === 'error') {
        failure = m.message;
        inputError = m.input === true;
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (figures !== undefined) resolvePromise(figures.map((f) => ({ placement, ...f })));
      else if (inputError) reject(new BenchInputError(`${suite.name}: ${failure ?? 'bad input'}`));
      else
        reject(
          new Error(
            `suite ${suite.name} (${placement}) failed${code === null ? '' : ` with exit code ${code}`}: ${failure ?? 'no figures'}`,
          ),
        );
    });
  });
}

function printTable(figures: readonly Figure[]): void {
  if (figures.length === 0) return;
  const rows = figures.map((f) => [
    f.name,
    f.placement ?? '',
    `${round(f.value)} ${f.unit}`,
    f.baseline === undefined ? '' : `${f.baseline.name} = ${round(f.baseline.value)}`,
    f.ratio === undefined ? '' : `${round(f.ratio)}×`,
    f.detail === undefined
      ? ''
      : Object.entries(f.detail)
          .map(([k, v]) => `${k}=${typeof v === 'number' ? round(v) : v}`)
          .join(' '),
  ]);
  const header = ['figure', 'placement', 'value', 'baseline (same run)', 'ratio', 'detail'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  let suite: string | undefined;
  rows.forEach((r, i) => {
    const f = figures[i] as Figure;
    // A blank line between suites and between placements keeps long tables readable.
    const group = `${f.suite}/${f.placement ?? ''}`;
    if (suite !== undefined && group !== suite) console.log('');
    suite = group;
    console.log(line(r));
  });
}

/** The charts of the suites that draw any (their code is loaded for it, after every suite ran). */
async function chartsOf(selected: readonly SuiteInfo[], figures: readonly Figure[]): Promise<Chart[]> {
  const charts: Chart[] = [];
  for (const suite of selected) charts.push(...((await suite.load()).charts?.(figures) ?? []));
  return charts;
}

async function main(): Promise<void> {
  let options: BenchArgs;
  try {
    options = parseBenchArgs(process.argv.slice(2), suites);
  } catch (error) {
    if (!(error instanceof BenchInputError)) throw error;
    console.error(`${error.message}\n\n${usage()}`);
    process.exitCode = 2;
    return;
  }
  if (options.help) {
    console.log(usage());
    return;
  }
  if (options.chartsFrom !== undefined) {
    const file = resolve(process.env.INIT_CWD ?? process.cwd(), options.chartsFrom);
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { machine?: { quick?: boolean }; figures: Figure[] };
    const charts = await chartsOf(options.selected, saved.figures);
    const written = await renderCharts(charts, chartDir(saved.machine?.quick === true));
    console.log(
      `charts: ${written.map((f) => relative(process.env.INIT_CWD ?? process.cwd(), f)).join(', ') || 'none'}`,
    );
    return;
  }
  if (options.pin && !hasTaskset) console.error('taskset is not available: --pin runs unpinned');
  const started = Date.now();
  const figures: Figure[] = [];
  let failed = false;
  for (const suite of options.selected) {
    const sensitive =
      typeof suite.placementSensitive === 'function'
        ? suite.placementSensitive(options.suiteFlags.get(suite.name) ?? {})
        : suite.placementSensitive;
    const placements: ('pinned' | 'unpinned')[] = !sensitive
      ? ['unpinned']
      : options.pin
        ? ['pinned']
        : ['pinned', 'unpinned'];
    for (const placement of placements) {
      try {
        figures.push(...(await runChild(suite, placement, options)));
      } catch (error) {
        failed = true;
        clearProgress();
        console.error((error as Error).message);
        if (error instanceof BenchInputError) {
          process.exitCode = 2;
          return;
        }
      }
    }
  }
  clearProgress();
  printTable(figures);
  console.log(
    `\n${figures.length} figures in ${((Date.now() - started) / 1000).toFixed(1)} s${options.quick ? ' (quick)' : ''}`,
  );
  const cpu = cpus();
  const report = {
    machine: {
      cpus: cpu.length,
      cpuModel: cpu[0]?.model ?? 'unknown',
      totalMemGiB: round(totalmem() / 2 ** 30),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      date: new Date().toISOString(),
      quick: options.quick,
      tasksetAvailable: hasTaskset,
      commit: gitCommit(),
    },
    figures,
  };
  const charts = await chartsOf(options.selected, figures);
  if (charts.length > 0) {
    const written = await renderCharts(charts, chartDir(options.quick));
    console.log(`charts: ${written.map((f) => relative(process.env.INIT_CWD ?? process.cwd(), f)).join(', ')}`);
  }
  if (options.json !== undefined) {
    const file = resolve(process.env.INIT_CWD ?? process.cwd(), options.json);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`figures written to ${file}`);
  }
  if (failed) process.exitCode ??= 1;
}

await main();
