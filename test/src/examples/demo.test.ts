// `pnpm demo` is the README's first command: run it here too, so `pnpm test`
// fails when a scene stops behaving (the demo exits 1 on any unchecked claim).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import { EXAMPLES_DIST, startProcess } from './startProcess.js';

it('examples/demo runs every scene and exits 0', { timeout: 60_000 }, async (t) => {
  const demo = startProcess(join(EXAMPLES_DIST, 'demo.js'));
  t.after(() => demo.child.kill('SIGKILL'));
  const exit = await demo.exited;
  const output = `${demo.lines.join('\n')}\n${demo.stderr()}`;
  assert.deepEqual(exit, { code: 0, signal: null }, output);
  assert.match(output, /^\d+ claims checked in /m);
  assert.doesNotMatch(output, /✗/);
});

it('examples/quickstart runs and exits 0', { timeout: 30_000 }, async (t) => {
  const quickstart = startProcess(join(EXAMPLES_DIST, 'quickstart.js'));
  t.after(() => quickstart.child.kill('SIGKILL'));
  const exit = await quickstart.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, `${quickstart.lines.join('\n')}\n${quickstart.stderr()}`);
});
