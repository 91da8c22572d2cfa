// Found by sqlite.fuzz.test.ts: a message that close({ timeoutMs }) cancelled
// (its reply: `cancelled`, reason `shutdown`) comes back `interrupted` in the
// next supervisor on the same SQLite file, and resume() then finishes it: the
// run the host was told was cancelled ends `done`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { sqlitePersistence } from '@troupe/sqlite';
import { createSupervisor } from '@troupe/supervisor';
import { type LeadPlan, lead } from '../fuzz/agents.js';

const SCOPE = { tenantId: 't1', userId: 'u1' };

describe('close() cancels a running message for good', () => {
  it('a message close() cancelled is not restored interrupted, and never ends done', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-fuzz-'));
    const file = join(dir, 'fuzz.sqlite');
    const open = () =>
      createSupervisor({
        agents: [lead],
        pool: { threads: 2, graceMs: 100 },
        persistence: sqlitePersistence({ file }),
      });
    try {
      const first = open();
      const agent = await first.startAgent(lead, { scope: SCOPE, agentId: 'a-1' });
      // A subagent that crunches for a long while (polling isCancelled()): the message is mid-turn at close.
      const plan: LeadPlan = { n: 'm1', u: 1, items: [{ k: 'crunch', n: 'c1', u: 1, iters: 100_000 }], own: 'none' };
      const started = new Promise<void>((resolve) => first.once('subagent.spawned', () => resolve()));
      let cancelledRun: string | undefined;
      first.on('agent.cancelled', (e) => {
        cancelledRun = e.runId;
      });
      const reply = agent.send(JSON.stringify(plan));
      await started;
      await first.close({ timeoutMs: 0 });
      const cancelled = await reply;
      assert.equal(cancelled.status, 'cancelled', 'close() at its timeout cancels the running message');
      assert.equal(cancelled.status === 'cancelled' && cancelled.reason, 'shutdown');

      const second = open();
      let doneRun: string | undefined;
      second.on('agent.done', (e) => {
        doneRun ??= e.runId;
      });
      try {
        const again = await second.startAgent(lead, { scope: SCOPE, agentId: 'a-1' });
        const status = again.status;
        let resumed: string | undefined;
        if (status === 'interrupted') resumed = (await again.resume()).status;
        assert.ok(cancelledRun !== undefined, 'agent.cancelled was emitted for the message');
        assert.ok(
          !(resumed === 'done' && doneRun === cancelledRun),
          `run ${cancelledRun}, whose reply was "cancelled (shutdown)", came back ${status} in the next supervisor and resume() ended the same run done (${doneRun}): a cancelled run must never end done (DESIGN 11), so close() must not leave it to be resumed (or must not report it cancelled)`,
        );
        assert.equal(status, 'idle', 'the conversation of a message close() cancelled is idle in the next supervisor');
        const next = await again.send(JSON.stringify({ n: 'm2', u: 1, items: [], own: 'none' } satisfies LeadPlan));
        assert.equal(next.status, 'done');
      } finally {
        await second.close({ timeoutMs: 1000 });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
