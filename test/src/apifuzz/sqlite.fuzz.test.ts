// The public-API fuzz on SQLite (@troupe/sqlite, a temp file per scenario):
// the same interleavings as memory.fuzz.test.ts plus restarts of the
// supervisor on the same file (after close or destroy), answers to requests
// listed from the store (answer(id, answer, { scope })) and resume() of
// interrupted conversations (see harness.ts for what is checked).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { play, scenarioArb, stopWatchdog } from './harness.js';

const RUNS = Number(process.env.TROUPE_FUZZ_RUNS ?? 50);
// A fixed seed by default (CI runs the same sequences each time); TROUPE_FUZZ_SEED=random explores.
const SEED =
  process.env.TROUPE_FUZZ_SEED === 'random'
    ? undefined
    : process.env.TROUPE_FUZZ_SEED === undefined
      ? 20261202
      : Number(process.env.TROUPE_FUZZ_SEED);

after(() => stopWatchdog());

describe('public API fuzz, SQLite store with restarts', () => {
  it('every invariant holds under random interleavings and restarts', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenarioArb('sqlite', { stop: 1, restart: 1.5, subs: { spin: 0.3, exit: 0.3 } }),
        async (scenario) => {
          const dir = mkdtempSync(join(tmpdir(), 'troupe-apifuzz-'));
          try {
            const { violations, log } = await play(scenario, { dir });
            if (violations.length > 0 || process.env.TROUPE_FUZZ_VERBOSE === '1') {
              console.log(`VIOLATIONS:\n${violations.join('\n')}\n${log.join('\n')}\n${JSON.stringify(scenario)}`);
            }
            assert.deepEqual(violations, []);
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      ),
      {
        numRuns: RUNS,
        ...(SEED === undefined ? {} : { seed: SEED }),
        endOnFailure: process.env.TROUPE_FUZZ_SHRINK !== '1',
      },
    );
  });
});
