// Issue 11, item 3: no message can crash or stall the supervisor. A worker's
// suspended result carries its loop state, whose outer shape only is checked
// at the port (agentId, messages, metadata); the supervisor then walks the
// state's `pending` calls. A `pending` that is not an array of calls must be
// refused (the run ends crashed, its worker recycled), never throw on the
// supervisor thread: an unhandled rejection there ends the process, and the
// run never settles.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROTOCOL_VERSION } from '@troupe/core/internal';
import { prober } from '../fixtures/agents/hostileProbe.js';
import { type Hostile, hostileSupervisor, nextFault, processFaults } from './hostileSupervisor.js';

const request = { id: 'q', kind: 'input', prompt: 'p' };
const state = (pending: unknown) => ({ agentId: 'prober', messages: [], metadata: {}, pending });

describe('a forged suspended state whose pending calls are not calls', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  for (const [what, pending] of [
    ['a string', 'not an array'],
    ['an array holding null', [null]],
    ['a call without its call', [{ request }]],
  ] as const) {
    it(`pending: ${what} — the run settles and nothing is thrown on the supervisor`, async () => {
      const faults = processFaults.unhandled.length + processFaults.uncaught.length;
      const forged = ['suspended', PROTOCOL_VERSION, 1, null, null, 0, request, state(pending)];
      const outcome = h.supervisor.spawn(prober, {
        input: JSON.stringify({ calls: [{ name: 'forge', args: { result: forged } }] }),
        scope: { tenant: 'forger' },
      });
      const first = await Promise.race([
        outcome.then((o) => ({ settled: o.status })),
        nextFault().then((fault) => ({ fault: String(fault) })),
      ]);
      assert.deepEqual(
        first,
        { settled: 'crashed' },
        'a malformed state must end the run crashed, not throw on the supervisor',
      );
      assert.equal(processFaults.unhandled.length + processFaults.uncaught.length, faults);
    });
  }
});
