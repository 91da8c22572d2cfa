// Agents defined in the script Node runs (a one-file program with top-level await): a direct
// spawn and a parent's task of them complete. Hostile-tester finding: the main thread imported
// the entry script to read the agent's definition, which waited for the script's own top-level
// await — `spawn` exited 13 with nothing printed, a task hung.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startProcess } from '../examples/startProcess.js';

it('a one-file program: agents defined in the entry script, awaited at its top level, spawn and delegate', {
  timeout: 30_000,
}, async (t) => {
  const child = startProcess(fileURLToPath(new URL('./entryScriptChild.js', import.meta.url)));
  t.after(() => child.child.kill());
  const exit = await child.exited;
  assert.equal(exit.code, 0, `exit ${exit.code}: ${child.stderr()}`);
  assert.deepEqual(child.lines, ['spawn: done helped', 'task: done boss got helped']);
});
