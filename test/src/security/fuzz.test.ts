// The whole supervisor under fuzz: hostile runs post generated messages of
// every shape — at least 10,000 to each port the supervisor listens on (the
// host channel, parentPort, piscina's task port) — while normal runs go on.
// The supervisor reads a thread's messages only up to the first one it
// refuses (then it terminates the thread); channelFuzz.test.ts parses every
// one of its 14,000 messages instead.
// After it: the process did not crash, no rejection went unhandled, every
// burst was refused (host.refused) and its worker recycled, normal runs
// still work and nothing is left over.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { echo } from '../fixtures/agents/basic.js';
import { FuzzBoard, fuzzer } from '../fixtures/agents/hostileFuzz.js';
import { byDepth } from '../fixtures/testDepth.js';
import { hostileSupervisor, newBoard, processFaults } from './hostileSupervisor.js';

const PORTS = ['host', 'parent', 'piscina'] as const;
/** Messages each port must have been sent (all of them in the deep tier, TROUPE_TEST_DEPTH=deep). */
const PER_PORT = byDepth({ quick: 3_000, deep: 10_000 });
/**
 * Messages a burst draws (it counts what it posted: a burst the supervisor
 * cut short by terminating its thread counts less).
 */
const PER_BURST = 2_000;
/** A bound on rounds (two bursts each, one per thread). */
const MAX_ROUNDS = 30;

describe('supervisor fuzz', () => {
  it('survives generated messages of every shape on every port and goes on serving', async () => {
    const faultsBefore = { uncaught: processFaults.uncaught.length, unhandled: processFaults.unhandled.length };
    const h = await hostileSupervisor({ pool: { threads: 2, graceMs: 200 } });
    const board = newBoard();
    const statuses = new Map<string, number>();
    try {
      let round = 0;
      for (; round < MAX_ROUNDS; round++) {
        // The port furthest from its share, until each has had it.
        const short = (p: (typeof PORTS)[number]) => Atomics.load(board, FuzzBoard[p]) / PER_PORT;
        const on = [...PORTS].sort((a, b) => short(a) - short(b))[0] as (typeof PORTS)[number];
        if (short(on) >= 1) break;
        const from = h.refused.length;
        // Two hostile bursts (one per thread) and a normal run queued behind them.
        const burst = (i: number) =>
          h.supervisor.spawn(fuzzer, {
            input: JSON.stringify({ on, seed: 1000 + 2 * round + i, count: PER_BURST }),
            scope: { tenant: `fuzz-${round}-${i}` },
            toolContext: { board },
            // A bound, not a wait: a burst that were not refused would end here.
            timeoutMs: 30_000,
          });
        const [first, second, normal] = await Promise.all([
          burst(0),
          burst(1),
          h.supervisor.spawn(echo, { input: `round ${round}`, scope: { tenant: 'normal' } }),
        ]);
        for (const hostile of [first, second]) {
          statuses.set(hostile.status, (statuses.get(hostile.status) ?? 0) + 1);
          assert.notEqual(hostile.status, 'cancelled', `round ${round} (${on}): a burst was never refused`);
        }
        assert.ok(h.refused.length >= from + 2, `round ${round} (${on}): a burst without host.refused`);
        assert.equal(normal.status === 'done' && normal.result, `echo: round ${round}`);
      }
      for (const port of PORTS) {
        const posted = Atomics.load(board, FuzzBoard[port]);
        assert.ok(posted >= PER_PORT, `${posted} messages posted on ${port} in ${round} rounds`);
      }
      assert.ok(h.refused.length >= 2 * round);
      assert.ok(h.recycled.length >= 2 * round);
      // Normal runs, after all of it.
      const after = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          h.supervisor.spawn(echo, { input: `after ${i}`, scope: { tenant: 'after' } }),
        ),
      );
      assert.deepEqual(
        after.map((r) => r.status === 'done' && r.result),
        Array.from({ length: 16 }, (_, i) => `echo: after ${i}`),
      );
      const stats = h.supervisor.stats();
      assert.equal(stats.runs, 0, 'no run left in the tree');
      assert.equal(stats.pool.running, 0);
      assert.equal(stats.pool.queued, 0);
      assert.equal(stats.pool.tableSize, 0, 'no cancellation slot left');
      assert.equal(stats.pendingRequests, 0, 'no request left open');
      assert.ok(stats.pool.openPorts <= 2);
      assert.equal(processFaults.uncaught.length, faultsBefore.uncaught, 'nothing uncaught');
      assert.equal(processFaults.unhandled.length, faultsBefore.unhandled, 'no unhandled rejection');
      console.log(
        `supervisor fuzz: ${round} rounds; posted host ${Atomics.load(board, FuzzBoard.host)}, parent ${Atomics.load(board, FuzzBoard.parent)}, piscina ${Atomics.load(board, FuzzBoard.piscina)}; host.refused ${h.refused.length}, worker.recycled ${h.recycled.length}; hostile outcomes ${JSON.stringify(Object.fromEntries(statuses))}`,
      );
      await h.supervisor.close();
    } finally {
      await h.supervisor.destroy();
    }
  });
});
