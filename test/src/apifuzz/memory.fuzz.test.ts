// The public-API fuzz on the default in-memory store (and with no store):
// random interleavings of sends, spawns, cancels, answers, stops, restarts of
// agents and a close or destroy at the end (see harness.ts for what is checked).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { play, scenarioArb, stopWatchdog } from './harness.js';

const RUNS = Number(process.env.TROUPE_FUZZ_RUNS ?? 60);
// A fixed seed by default (CI runs the same sequences each time); TROUPE_FUZZ_SEED=random explores.
const SEED =
  process.env.TROUPE_FUZZ_SEED === 'random'
    ? undefined
    : process.env.TROUPE_FUZZ_SEED === undefined
      ? 20261202
      : Number(process.env.TROUPE_FUZZ_SEED);

after(() => stopWatchdog());

describe('public API fuzz, memory store', () => {
  it('every invariant holds under random interleavings', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenarioArb(fc.constantFrom('memory' as const, 'memory' as const, 'none' as const), {
          stop: 1,
          midClose: 0.3,
          subs: { spin: 0.3, exit: 0.3 },
        }),
        async (scenario) => {
          const { violations, log } = await play(scenario);
          if (violations.length > 0 || process.env.TROUPE_FUZZ_VERBOSE === '1') {
            console.log(`VIOLATIONS:\n${violations.join('\n')}\n${log.join('\n')}`);
            console.log(JSON.stringify(scenario));
          }
          assert.deepEqual(violations, []);
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
