// The public-API fuzz weighted towards lifecycle: close({ timeoutMs }) and
// destroy() in the middle of a sequence (every later call must reject, never
// throw or hang), stopAgent and startAgent again, never-yielding tools and
// crashing workers, on the memory store, no store, or SQLite with restarts.
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

describe('public API fuzz, lifecycle', () => {
  it('every invariant holds when close, destroy and stop land at random moments', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenarioArb(fc.constantFrom('memory' as const, 'none' as const, 'sqlite' as const), {
          stop: 2,
          midClose: 1,
          restart: 0.5,
          subs: { spin: 0.5, exit: 0.5, crunch: 3 },
        }),
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
