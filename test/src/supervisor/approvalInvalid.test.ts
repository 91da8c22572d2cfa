// Issue 31, item 9: an approval handler that returns something that is not a decision —
// `undefined`, `null`, a number, an unknown decision — denies the call, with a
// `tool.approval.invalid` event, on every thread. For a subagent's tool the supervisor posted no
// reply when the handler returned `undefined` (it took it for "nobody waits"): the worker's call
// waited for ever and the run hung until its deadline.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { ApprovalHandler } from '@troupe/core';
import { createSupervisor } from '@troupe/supervisor';
import { admin, lead } from '../fixtures/agents/hitl.js';

const scope = { userId: 'u_invalid' };
const NOT_DECISIONS: readonly [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['a number', 42],
  ['an unknown decision', { decision: 'maybe' }],
];

function open(t: TestContext, returned: unknown) {
  const invalid: { agentId: string; toolName: string; received: string }[] = [];
  const supervisor = createSupervisor({
    pool: { threads: 1 },
    persistence: null,
    approval: (() => returned) as unknown as ApprovalHandler,
  });
  supervisor.on('tool.approval.invalid', (e) => invalid.push(e));
  t.after(() => supervisor.destroy());
  return { supervisor, invalid, runs: new Int32Array(new SharedArrayBuffer(12)) };
}

/** What the last turn's tool results told the model: the one error, not the tool's output. */
function denied(text: string): void {
  const results = JSON.parse(text) as unknown[];
  assert.equal(results.length, 1);
  const error = (results[0] as { error?: { error?: unknown; code?: unknown } }).error;
  assert.match(String(error?.error), /not a decision for tool "drop_table": denied/, text);
  assert.equal(error?.code, 'ERR_APPROVAL_DENIED');
}

describe('an approval handler that returns something that is not a decision', () => {
  for (const [what, returned] of NOT_DECISIONS) {
    it(`returns ${what} for a subagent's tool (a worker): the call is denied, the run goes on`, async (t) => {
      const { supervisor, invalid, runs } = open(t, returned);
      // A bound, not a wait: before the fix the run hung here and ended cancelled.
      const outcome = await supervisor.spawn(admin, {
        input: 'drop it',
        scope,
        toolContext: { runs },
        timeoutMs: 20_000,
      });
      assert.equal(outcome.status, 'done', JSON.stringify(outcome));
      if (outcome.status !== 'done') return;
      denied(outcome.result);
      assert.equal(Atomics.load(runs, 2), 0, 'the tool did not run');
      assert.equal(invalid.length, 1);
      assert.equal(invalid[0]?.toolName, 'drop_table');
    });
  }

  it("returns undefined for the tool of a parent's subagent: the subagent's call is denied, the parent replies", async (t) => {
    const { supervisor, invalid, runs } = open(t, undefined);
    const agent = await supervisor.startAgent(lead, { scope, toolContext: { runs } });
    const reply = await Promise.race([
      agent.send('admin: drop it'),
      new Promise<never>((_, reject) => {
        const timer = setTimeout(() => reject(new Error('the reply never came')), 20_000);
        t.after(() => clearTimeout(timer));
      }),
    ]);
    assert.equal(reply.status, 'done', JSON.stringify(reply));
    assert.equal(Atomics.load(runs, 2), 0, 'the tool did not run');
    assert.equal(invalid.length, 1);
    assert.match(invalid[0]?.agentId ?? '', /-sub-/, 'the event names the subagent');
  });
});
