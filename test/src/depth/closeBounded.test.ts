// close({ timeoutMs }) during a deep tree (a stalled model stream, a tool that
// never yields, one that waits for its cancel, a direct spawn): it resolves,
// every run ended, and the process exits by itself (no worker, timer or handle).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startProcess } from '../examples/startProcess.js';

describe('close at depth', () => {
  it('is bounded and leaves nothing behind', { timeout: 30_000 }, async (t) => {
    const child = startProcess(fileURLToPath(new URL('./closeChild.js', import.meta.url)));
    t.after(() => child.child.kill('SIGKILL'));
    await child.line(/^STARTED/);
    const closed = await child.line(/^CLOSED (\d+) reply=(\w+) spawn=(\w+) runs=(\d+)/);
    assert.deepEqual(closed.slice(2), ['cancelled', 'cancelled', '0']);
    const exit = await child.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, child.stderr());
    assert.ok(child.lines.includes('LATE 0'), child.lines.join('\n'));
  });
});
