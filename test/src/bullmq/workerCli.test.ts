// The troupe-worker command's bad input: flags are parsed strictly, and each
// missing or wrong one is named (exit 2, with the usage), before anything starts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { promisify } from 'node:util';

const bin = createRequire(import.meta.url)
  .resolve('@troupe/bullmq/package.json')
  .replace(/package\.json$/, 'dist/bin/troupe-worker.js');

async function run(...args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, ...args], {
      env: { ...process.env, REDIS_URL: '' },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

it('an unknown flag is an error naming it', async () => {
  const r = await run('--redis', 'redis://127.0.0.1:1', '--bogus');
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Unknown option '--bogus'/);
  assert.match(r.stderr, /usage: troupe-worker/);
});

it('each required flag is named when missing', async () => {
  assert.match((await run('--build', 'b1', '--agents', 'x.js')).stderr, /pass --redis <url>/);
  assert.match((await run('--redis', 'redis://127.0.0.1:1', '--agents', 'x.js')).stderr, /pass --build <id>/);
  assert.match((await run('--redis', 'redis://127.0.0.1:1', '--build', 'b1')).stderr, /pass --agents <module>/);
});

it('a number flag must be a whole number', async () => {
  const module = join(tmpdir(), `troupe-cli-agents-${process.pid}.mjs`);
  writeFileSync(module, 'export const agents = {}\n');
  const r = await run('--redis', 'redis://127.0.0.1:1', '--build', 'b1', '--agents', module, '--concurrency', 'lots');
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--concurrency must be a whole number, got "lots"/);
});

it('an agents module that exports no agents, or something else, is named', async () => {
  const none = join(tmpdir(), `troupe-cli-none-${process.pid}.mjs`);
  writeFileSync(none, 'export const other = 1\n');
  const r1 = await run('--redis', 'redis://127.0.0.1:1', '--build', 'b1', '--agents', none);
  assert.equal(r1.code, 2);
  assert.match(r1.stderr, /exports no `agents` object/);
  const wrong = join(tmpdir(), `troupe-cli-wrong-${process.pid}.mjs`);
  writeFileSync(wrong, 'export const agents = { helper: 42 }\n');
  const r2 = await run('--redis', 'redis://127.0.0.1:1', '--build', 'b1', '--agents', wrong);
  assert.match(r2.stderr, /agents\.helper is not an agent/);
  const missing = await run('--redis', 'redis://127.0.0.1:1', '--build', 'b1', '--agents', '/nonexistent/agents.js');
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot import \/nonexistent\/agents\.js/);
});

it('--help prints the usage and exits 0', async () => {
  const r = await run('--help');
  assert.equal(r.code, 0);
  assert.match(r.stdout, /--drain-ms <ms>/);
});
