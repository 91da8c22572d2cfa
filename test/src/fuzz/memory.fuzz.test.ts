// The public-API fuzz on the default in-memory store (and with no store):
// random interleavings of sends, spawns, cancels, answers, stops, restarts of
// agents and a close or destroy at the end (see harness.ts for what is checked).
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { byDepth } from '../fixtures/testDepth.js';
import { fuzzOptions, playChecked, scenarioArb, stopWatchdog } from './harness.js';

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
        (scenario) => playChecked(scenario),
      ),
      fuzzOptions(byDepth({ quick: 15, deep: 60 })),
    );
  });
});
