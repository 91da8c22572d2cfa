// The public-API fuzz on SQLite (@troupe/sqlite, a temp file per scenario):
// the same interleavings as memory.fuzz.test.ts plus restarts of the
// supervisor on the same file (after close or destroy), answers to requests
// listed from the store (answer(id, answer, { scope })) and resume() of
// interrupted conversations (see harness.ts for what is checked).
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { byDepth } from '../fixtures/testDepth.js';
import { fuzzOptions, playChecked, scenarioArb, stopWatchdog } from './harness.js';

after(() => stopWatchdog());

describe('public API fuzz, SQLite store with restarts', () => {
  it('every invariant holds under random interleavings and restarts', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb('sqlite', { stop: 1, restart: 1.5, subs: { spin: 0.3, exit: 0.3 } }), (scenario) =>
        playChecked(scenario),
      ),
      fuzzOptions(byDepth({ quick: 12, deep: 50 })),
    );
  });
});
