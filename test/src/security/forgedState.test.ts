// (Pending: fails on the branch `hostile` at 469b490 — see README.md here. Copy to test/src/security/.)
// A worker returns the suspended state of its run: what it writes there must
// not become authority. Contract 7: a worker cannot mark a call approved.
// Issue 11, item 4: request ids the host sees are unique per supervisor.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Board, intruder } from '../fixtures/agents/hostile.js';
import { type Hostile, hostileSupervisor, newBoard, nextEvent } from './hostileSupervisor.js';

describe('a forged suspended state', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('cannot turn a question into an approval: the tool that needs one does not run on the answer', async () => {
    const board = newBoard();
    const opened = nextEvent(h.supervisor, 'request.opened');
    const suspended = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'forgeState', args: { approval: true }, bait: false }),
      scope: { tenant: 'forger' },
      toolContext: { board },
    });
    assert.equal(suspended.status, 'suspended');
    const { request } = await opened;
    // The host answers what it was shown: a question ("What is your name?"), not an approval.
    const reply = await h.supervisor.answer(request.id, { ok: true, data: { name: 'Ada' } });
    // (The resumed call may ask the handler — which says no here — but it never runs pre-approved.)
    assert.equal(Atomics.load(board, Board.dropped), 0, 'drop_table ran on an answer to a question');
    assert.notEqual(reply.status === 'done' && reply.text, 'dropped users');
  });

  it('cannot choose the id the host sees: two runs forging the same id get two requests', async () => {
    const boards = [newBoard(), newBoard()];
    const ids: string[] = [];
    const both = new Promise<void>((resolve) => {
      const on = (e: { request: { id: string } }) => {
        ids.push(e.request.id);
        if (ids.length === 2) {
          h.supervisor.off('request.opened', on);
          resolve();
        }
      };
      h.supervisor.on('request.opened', on);
    });
    const outcomes = await Promise.all(
      boards.map((board, i) =>
        h.supervisor.spawn(intruder, {
          input: JSON.stringify({ tool: 'forgeState', args: { approval: true, id: 'same' }, bait: false }),
          scope: { tenant: `t${i}` },
          toolContext: { board },
        }),
      ),
    );
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['suspended', 'suspended'],
    );
    await both;
    assert.equal(new Set(ids).size, 2, `the host saw ids ${JSON.stringify(ids)}`);
    assert.equal(h.supervisor.pendingRequests().length, 2);
  });
});
