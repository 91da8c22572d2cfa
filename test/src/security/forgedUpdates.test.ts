// Issue 11, item 3: no message can crash or stall the supervisor. A worker's
// `done` result carries metadata updates, checked at the port only for
// `op` being a string and the whole being JSON. A parent agent that merges
// its subagent's metadata applies them on the supervisor's thread: a
// malformed operation must end in a typed error, never throw there.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROTOCOL_VERSION } from '@troupe/core/internal';
import { probeParent } from '../fixtures/agents/hostileProbe.js';
import { type Hostile, hostileSupervisor, nextFault, processFaults } from './hostileSupervisor.js';

describe("a forged done result's metadata updates, merged by a parent agent", () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  for (const [what, updates] of [
    ['a set without a key', [{ op: 'set' }]],
    ['a merge whose value is not an object', [{ op: 'merge', key: 'k', value: 1 }]],
    ['an unknown operation', [{ op: 'eval', key: 'k' }]],
    ['a logEvent without data', [{ op: 'logEvent', type: 'x' }]],
  ] as const) {
    it(`${what}: the reply settles and nothing is thrown on the supervisor`, async () => {
      const faults = processFaults.unhandled.length + processFaults.uncaught.length;
      const forged = ['done', PROTOCOL_VERSION, 1, null, null, 0, 'forged', updates];
      const handle = await h.supervisor.startAgent(probeParent, { scope: { tenant: 'forger' } });
      const reply = handle.send(JSON.stringify({ calls: [{ name: 'forge', args: { result: forged } }] }));
      const first = await Promise.race([
        reply.then((r) => ({ settled: r.status })),
        nextFault().then((fault) => ({ fault: String(fault) })),
      ]);
      assert.equal('settled' in first, true, `the supervisor threw: ${JSON.stringify(first)}`);
      assert.equal(processFaults.unhandled.length + processFaults.uncaught.length, faults);
    });
  }
});
