// Issue 11, item 5: any worker can write any word of the cancellation buffer
// it holds. A forged write can at most cancel: it never un-cancels a run,
// extends its deadline, moves a slot's ownership, reaches another thread's
// runs, or makes the supervisor decide anything from what the worker wrote.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { isTroupeError } from '@troupe/core';
import { CancelSlots } from '@troupe/core/internal';
import { echo } from '../fixtures/agents/basic.js';
import { Board, intruder } from '../fixtures/agents/hostile.js';
import { changed, type Hostile, hostileSupervisor, newBoard, nextEvent, processFaults } from './hostileSupervisor.js';

/** Resolves once `board[index]` is at least `n`. */
async function atLeast(board: Int32Array, index: number, n: number): Promise<void> {
  for (let now = Atomics.load(board, index); now < n; now = Atomics.load(board, index))
    await changed(board, index, now);
}

const started = (h: Hostile, toolName: string) =>
  nextEvent(h.supervisor, 'tool.execute.start', (e) => e.toolName === toolName);

describe('the cancellation buffer a worker holds', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2, graceMs: 200 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  it('a cancelled run that writes its words back to live still ends cancelled, never done', async () => {
    const board = newBoard();
    const tool = started(h, 'uncancel');
    const done: string[] = [];
    h.supervisor.on('subagent.done', (e) => done.push(e.agentId));
    const run = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'uncancel', bait: false }),
      scope: { tenant: 'undo' },
      toolContext: { board },
    });
    const { agentId } = await tool;
    await changed(board, Board.stashed);
    assert.equal(h.supervisor.cancel(agentId, 'user'), true);
    const outcome = await run;
    assert.equal(Atomics.load(board, Board.readBack), 0, 'the forged write took: its own check read "not cancelled"');
    assert.equal(outcome.status, 'cancelled');
    assert.equal(outcome.status === 'cancelled' && outcome.reason, 'user');
    assert.equal(done.includes(agentId), false, 'no subagent.done for it');
  });

  it('a run that pushes its deadline in shared memory is still stopped at the deadline the supervisor keeps', async () => {
    const board = newBoard();
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'extendDeadline', bait: false }),
      scope: { tenant: 'late' },
      toolContext: { board },
      timeoutMs: 300,
    });
    const forgedSeconds = Atomics.load(board, Board.readBack);
    assert.ok(forgedSeconds > Date.now() / 1000 + 3600, 'the forged deadline was written and read back');
    assert.equal(outcome.status, 'cancelled');
    if (outcome.status !== 'cancelled') return;
    assert.equal(outcome.reason, 'deadline');
    assert.equal(outcome.forced, true, 'it never yielded: the watchdog killed it');
  });

  it('a call deadline forged in its own lane can only end its own run early, as a forced tool timeout', async () => {
    const board = newBoard();
    // Tool 0 of the intruder is `bait`: the forged lane names it as the call.
    const outcome = await h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'forgeCallDeadline', args: { tool: 0 }, bait: false }),
      scope: { tenant: 'early' },
      toolContext: { board },
    });
    assert.equal(Atomics.load(board, Board.readBack), 1, 'the forged deadline was written');
    assert.equal(outcome.status, 'failed');
    if (outcome.status !== 'failed') return;
    assert.ok(isTroupeError(outcome.error, 'ERR_TOOL_TIMEOUT'), String(outcome.error));
    assert.equal((outcome.error as { forced?: unknown }).forced, true);
    assert.equal((outcome.error as { toolName?: unknown }).toolName, 'bait', 'named as the worker wrote');
  });

  it("garbage in every word of one thread's buffer reaches no run on another thread and crashes nothing", async () => {
    const board = newBoard();
    const victimBoard = newBoard();
    const tool = started(h, 'garbage');
    const hostile = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'garbage', args: { seed: 0x2545f491 }, bait: false }),
      scope: { tenant: 'scribbler' },
      toolContext: { board },
    });
    const { agentId } = await tool;
    await changed(board, Board.stashed);
    // The victim runs on the other thread (the scribbler holds its own) and polls its cancel.
    const victim = h.supervisor.spawn(intruder, {
      input: JSON.stringify({ tool: 'steady', bait: false }),
      scope: { tenant: 'victim' },
      toolContext: { board: victimBoard },
    });
    await changed(victimBoard, Board.polling);
    const from = Atomics.load(board, Board.rounds);
    // 2,000 more rounds of garbage over the whole buffer while the victim polls (and the watchdog ticks).
    await Promise.race([atLeast(board, Board.rounds, from + 2_000), hostile]);
    Atomics.store(victimBoard, Board.stop, 1);
    Atomics.notify(victimBoard, Board.stop);
    const v = await victim;
    assert.equal(v.status === 'done' && v.result, 'never cancelled');
    h.supervisor.cancel(agentId, 'user');
    const out = await hostile;
    assert.notEqual(out.status, 'done');
    assert.ok(Atomics.load(board, Board.rounds) > from, 'the garbage was written');
    // The thread it scribbled on was replaced; runs go on.
    const after = await Promise.all(
      [1, 2, 3].map((i) => h.supervisor.spawn(echo, { input: `after ${i}`, scope: { tenant: 'x' } })),
    );
    assert.deepEqual(
      after.map((r) => r.status),
      ['done', 'done', 'done'],
    );
    assert.deepEqual(processFaults.uncaught, []);
  });

  it('cancelled words written ahead for later generations do not cancel the next run on the thread', async () => {
    const single = await hostileSupervisor({ pool: { threads: 1 } });
    try {
      const board = newBoard();
      const out = await single.supervisor.spawn(intruder, {
        input: JSON.stringify({ tool: 'precancel', bait: false }),
        scope: { tenant: 'ahead' },
        toolContext: { board },
      });
      assert.ok(Atomics.load(board, Board.readBack) > 0, 'the forged words were written');
      // Its own slot's word now reads cancelled to its own check: it cancelled itself, nothing more.
      assert.equal(out.status, 'cancelled');
      const cancelled: string[] = [];
      single.supervisor.on('subagent.cancelled', (e) => cancelled.push(e.agentId));
      const next = await single.supervisor.spawn(echo, { input: 'next', scope: { tenant: 'next' } });
      assert.equal(next.status === 'done' && next.result, 'echo: next');
      assert.deepEqual(cancelled, []);
    } finally {
      await single.supervisor.destroy();
    }
  });
});

describe('CancelSlots: a forged activity word', () => {
  // Lanes 1, two slots: slot 0's lane bits past lane 0 name its call info,
  // its deadlines and slot 1's run word; its deadline words past lane 0 run
  // off the end of the buffer.
  it("makes a cancel and a deadline sweep touch nothing but the slot's own lanes", async () => {
    const slots = CancelSlots.create({ capacity: 2, maxCapacity: 2, lanes: 1 });
    const mine = slots.claim(0);
    const other = slots.claim(1);
    const lane = slots.openLane(mine, 0, Date.now() - 1);
    // A real worker holding the buffer sets every activity bit of slot 0, and every lane-shaped word live.
    const worker = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       const words = new Int32Array(workerData.buffer, 64);
       Atomics.store(words, 1, 0xffff);
       parentPort.postMessage('forged');`,
      { eval: true, workerData: { buffer: slots.buffer } },
    );
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    await worker.terminate();
    const out: number[] = [];
    assert.doesNotThrow(() => slots.expireLanes(mine, Date.now(), out));
    assert.deepEqual(out, [0, lane >>> 4], 'only the real lane expired');
    assert.equal(slots.cancelRun(mine, 'user'), true);
    assert.equal(slots.isLive(other), true, "the next slot's run is not cancelled by it");
  });
});
