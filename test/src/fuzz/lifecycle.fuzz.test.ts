// The public-API fuzz weighted towards lifecycle: close({ timeoutMs }) and
// destroy() in the middle of a sequence (every later call must reject, never
// throw or hang), stopAgent and startAgent again, never-yielding tools and
// crashing workers, on the memory store, no store, or SQLite with restarts.
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { byDepth } from '../fixtures/testDepth.js';
import { fuzzOptions, playChecked, scenarioArb, stopWatchdog } from './harness.js';

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
        (scenario) => playChecked(scenario),
      ),
      fuzzOptions(byDepth({ quick: 12, deep: 50 })),
    );
  });
});
