// Found by memory.fuzz.test.ts and sqlite.fuzz.test.ts: a subagent on a worker
// that is in the middle of a nested `task` call when its run ends (destroy())
// gets its host-channel message refused: a `host.refused` event ("run ... has
// ended") for a well-behaved worker, delivered after the run's outcome. The
// README: host.refused never fires in a healthy deployment; DESIGN 11/14:
// every event of a run is delivered before its outcome.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { type SubPlan, sub1 } from '../fuzz/agents.js';

async function destroyDuringNestedTask(): Promise<string[]> {
  const supervisor = createSupervisor({ pool: { threads: 2, graceMs: 100 } });
  const seen: string[] = [];
  let ended = false;
  const names = ['subagent.cancelled', 'subagent.done', 'subagent.failed', 'host.refused', 'worker.recycled'] as const;
  for (const name of names) {
    supervisor.on(name, ((e: { reason?: unknown }) => {
      if (name.startsWith('subagent.')) ended = true;
      seen.push(`${name}${ended && !name.startsWith('subagent.') ? ' (after the outcome)' : ''}: ${String(e.reason)}`);
    }) as never);
  }
  const nestedCall = new Promise<void>((resolve) => {
    supervisor.on('tool.execute.start', (e) => {
      if (e.toolName === 'task') resolve();
    });
  });
  const plan: SubPlan = { k: 'nest', n: 'x1', u: 1, child: { k: 'quick', n: 'x2', u: 1 } };
  const outcome = supervisor.spawn(sub1, { input: JSON.stringify(plan), scope: { tenantId: 't1' } });
  await nestedCall;
  await supervisor.destroy();
  await outcome.catch(() => {});
  return seen;
}

describe('a run ended during its nested task call', () => {
  it('destroy() while a subagent calls task: no host.refused, nothing after the outcome', async () => {
    const refusals: string[] = [];
    for (let i = 0; i < 5; i++) {
      const seen = await destroyDuringNestedTask();
      refusals.push(...seen.filter((s) => s.startsWith('host.refused') || s.includes('after the outcome')));
    }
    assert.deepEqual(
      refusals,
      [],
      'a well-behaved worker cut off by destroy() must not be reported as refused, nor have events after its outcome',
    );
  });
});
