// `pnpm demo:cluster` runs here too: a Redis of its own, three worker hosts and
// an API host on SQLite; every claim it prints is checked by the demo itself,
// which exits 1 if one fails.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const demo = fileURLToPath(new URL('../../../examples/dist/cluster.js', import.meta.url));

it('pnpm demo:cluster holds every claim it prints', { timeout: 120_000 }, async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [demo], { timeout: 110_000 });
  assert.match(stdout, /✓ the fan-out spread over all three hosts/);
  assert.match(stdout, /✓ a busy tool on host-\d saw the API host's cancel [\d.]+ ms after it was issued/);
  assert.match(stdout, /✓ answered after host-\d left: resumed on host-\d, the tool ran once/);
  assert.match(stdout, /✓ the charge ran once \(side-effect counter: 1\)/);
  assert.match(stdout, /✓ Redis scanned .*: the scope marker found 0 times/);
  assert.match(stdout, /every claim held/);
  assert.doesNotMatch(stdout, /✗/);
});
