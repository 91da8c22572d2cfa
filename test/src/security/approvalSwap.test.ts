// Contract 7 (a worker cannot mark a call approved) and the README's
// "Approval is decided on the supervisor thread": a person approves the call
// the approval handler asked about. The worker returns its suspended state
// itself: if it swaps the call the person approved (a harmless read) for
// another tool that needs approval, the supervisor must not resume the run
// with that other call pre-approved.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Board } from '../fixtures/agents/hostileBoard.js';
import { prober } from '../fixtures/agents/hostileProbe.js';
import { type Hostile, hostileSupervisor, newBoard, nextEvent } from './hostileSupervisor.js';

describe('an approved call swapped in the suspended state', () => {
  let h: Hostile;
  before(async () => {
    // The handler asks a person about `lookup` and rejects anything else (drop_table included).
    h = await hostileSupervisor({ pool: { threads: 2 } }, (request) =>
      request.toolName === 'lookup'
        ? { decision: 'ask', prompt: `May I look up ${JSON.stringify(request.arguments)}?` }
        : { decision: 'reject', reason: 'no' },
    );
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('does not run a tool the handler never saw as approved', async () => {
    const board = newBoard();
    const opened = nextEvent(h.supervisor, 'request.opened');
    const suspended = await h.supervisor.spawn(prober, {
      input: JSON.stringify({
        calls: [
          { name: 'swapPending', args: { from: 'lookup', to: 'drop_table', args: { table: 'users' } } },
          { name: 'lookup', args: { key: 'weather' } },
        ],
      }),
      scope: { tenant: 'swapper' },
      toolContext: { board },
    });
    assert.equal(suspended.status, 'suspended');
    const { request } = await opened;
    assert.equal(request.kind, 'approval');
    // What the person was shown: lookup, never drop_table.
    assert.deepEqual(
      h.approvals.map((a) => a.toolName),
      ['lookup'],
    );
    // The person approves the read they were shown.
    const reply = await h.supervisor.answer(request.id, { ok: true });
    assert.equal(
      Atomics.load(board, Board.dropped),
      0,
      `drop_table ran pre-approved on an approval of lookup (reply: ${JSON.stringify(reply.status === 'done' ? reply.text : reply.status)})`,
    );
  });
});
