import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// `pnpm bench` runs this file; bad input must fail fast, before any worker starts, with a
// one-line error and exit code 2 (issue 6, "Bad input").
const BENCH_MAIN = fileURLToPath(new URL('../../../bench/dist/main.js', import.meta.url));

function bench(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [BENCH_MAIN, ...args], { encoding: 'utf8' });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('pnpm bench: bad input', () => {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-bench-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('an unknown suite lists the suites', () => {
    const { code, out } = bench('nosuch');
    assert.equal(code, 2);
    const listed = /unknown suite "nosuch"; the suites are: ([a-z, ]+)\n/.exec(out);
    assert.ok(listed !== null, out);
    const names = (listed[1] ?? '').split(', ');
    for (const name of [
      'core',
      'cancel',
      'host',
      'subagent',
      'supervisor',
      'persistence',
      'scope',
      'ab',
      'models',
      'otel',
    ]) {
      assert.ok(names.includes(name), `${name} is listed: ${names.join(', ')}`);
    }
  });

  it('persistence --store names the stores it knows', () => {
    const { code, out } = bench('persistence', '--store', 'mysql');
    assert.equal(code, 2);
    assert.match(out, /--store must be sqlite or postgres, not mysql/);
  });

  it('a scope file that is missing or not JSON is named, with what to do', () => {
    const missing = join(dir, 'missing.json');
    const gone = bench('scope', '--file', missing);
    assert.equal(gone.code, 2);
    assert.ok(gone.out.includes(`${missing}: cannot read it (ENOENT)`), gone.out);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{ "userId": ');
    const notJson = bench('scope', '--file', bad);
    assert.equal(notJson.code, 2);
    assert.ok(notJson.out.includes(`${bad} is not JSON`), notJson.out);
    assert.match(notJson.out, /pass the scope as a JSON document/);
  });

  it('a bad flag value says the range', () => {
    const ok = join(dir, 'ok.json');
    writeFileSync(ok, JSON.stringify({ userId: 'u1', role: 'admin' }));
    for (const [flag, value, message] of [
      ['--hops', '99', /--hops needs an integer from 1 to 8, got 99/],
      ['--samples', '0', /--samples needs an integer from 1 to 100000, got 0/],
      ['--new-scope-samples', '-1', /--new-scope-samples needs an integer from 0 to 100000, got -1/],
    ] as const) {
      const { code, out } = bench('scope', '--file', ok, flag, value);
      assert.equal(code, 2, `${flag} ${value}: ${out}`);
      assert.match(out, message);
    }
  });

  it('a misspelt flag is refused, naming the nearest one, before anything runs', () => {
    for (const [args, message] of [
      [['--quik'], /^unknown flag --quik \(did you mean --quick\?\)$/m],
      [['scope', '--fiel', 'x.json'], /^unknown flag --fiel \(did you mean --file\?\)$/m],
      [['core', '--verbose'], /^unknown flag --verbose$/m],
      [['-q'], /^unknown flag -q$/m],
    ] as const) {
      const { code, out } = bench(...args);
      assert.equal(code, 2, `${args.join(' ')}: ${out}`);
      assert.match(out, message);
      assert.match(out, /usage: pnpm bench/, 'the usage follows the error');
      assert.doesNotMatch(out, /figures in/, 'nothing was measured');
    }
  });

  it("a suite's flag without its suite named says which suite takes it", () => {
    const { code, out } = bench('--against', '.');
    assert.equal(code, 2, out);
    assert.match(out, /--against is a flag of the ab suite: name it, as in pnpm bench ab --against \./);
    const hops = bench('scope', '--hops', '2');
    assert.equal(hops.code, 2, hops.out);
    assert.match(hops.out, /--hops measures a scope file: pass --file <file> too/);
  });

  it('a flag without its value, or a switch given one, is refused', () => {
    const json = bench('core', '--json');
    assert.equal(json.code, 2, json.out);
    assert.match(json.out, /--json <value>' argument missing/);
    const pin = bench('core', '--pin=yes');
    assert.equal(pin.code, 2, pin.out);
    assert.match(pin.out, /'--pin' does not take an argument/);
  });

  it("--help lists every flag, the suites' own included", () => {
    const { code, out } = bench('--help');
    assert.equal(code, 0, out);
    for (const flag of [
      '--quick',
      '--pin',
      '--json',
      '--charts-from',
      '--file',
      '--hops',
      '--samples',
      '--new-scope-samples',
      '--budget',
      '--against',
      '--blocks',
    ]) {
      assert.ok(out.includes(`  ${flag} `), `${flag} is listed:\n${out}`);
    }
  });

  it('ab needs a built checkout to compare with, and says how to make one', () => {
    const none = bench('ab');
    assert.equal(none.code, 2, none.out);
    assert.match(none.out, /ab needs --against <dir>/);
    assert.match(none.out, /git worktree add/);
    const missing = join(dir, 'no-checkout');
    const gone = bench('ab', '--against', missing);
    assert.equal(gone.code, 2, gone.out);
    assert.ok(gone.out.includes(`${missing}: not a directory`), gone.out);
    const unbuilt = bench('ab', '--against', dir);
    assert.equal(unbuilt.code, 2, unbuilt.out);
    assert.ok(
      unbuilt.out.includes(`${dir}: no packages/supervisor/dist/index.js; build that checkout first`),
      unbuilt.out,
    );
    const blocks = bench('ab', '--against', '.', '--blocks', '1');
    assert.equal(blocks.code, 2, blocks.out);
    assert.match(blocks.out, /--blocks needs an integer from 2 to 200, got 1/);
  });
});
