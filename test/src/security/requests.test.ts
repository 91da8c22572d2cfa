// Issue 11, item 4: request ids cannot collide. Runs whose tools return
// `pending` with the same id — of one tenant or two — get distinct requests,
// and an answer reaches exactly the run that asked.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isTroupeError } from '@troupe/core';
import { HostOp } from '@troupe/core/internal';
import type { SubagentOutcome } from '@troupe/supervisor';
import { intruder } from '../fixtures/agents/hostile.js';
import { type Hostile, hostileSupervisor } from './hostileSupervisor.js';

describe('request ids the host sees', () => {
  let h: Hostile;
  before(async () => {
    h = await hostileSupervisor({ pool: { threads: 2 } });
  });
  after(async () => {
    await h.supervisor.destroy();
  });

  for (const tenants of [
    ['acme', 'globex'],
    ['acme', 'acme'],
  ] as const) {
    it(`two runs asking with id "same" (tenants ${tenants.join(' and ')}) get two requests; each answer reaches its own run`, async () => {
      const [a, b] = await Promise.all(
        tenants.map((tenant) =>
          h.supervisor.spawn(intruder, {
            input: JSON.stringify({ tool: 'askSame', args: { id: 'same' }, bait: false }),
            scope: { tenant },
          }),
        ),
      );
      assert.ok(a?.status === 'suspended' && b?.status === 'suspended');
      assert.notEqual(a.request.id, b.request.id);
      const open = h.supervisor.pendingRequests();
      assert.deepEqual(open.map((r) => r.agentId).sort(), [a.agentId, b.agentId].sort());
      assert.equal(new Set(open.map((r) => r.request.id)).size, 2);
      // Each run's own question, as its tool wrote it (its prompt names its tenant).
      assert.equal(open.find((r) => r.agentId === a.agentId)?.request.prompt, `who is ${tenants[0]}?`);
      const ra = await h.supervisor.answer<SubagentOutcome>(a.request.id, { ok: true, data: 'for a' });
      assert.equal(ra.status === 'done' && ra.result, 'answered "for a"');
      const still = h.supervisor.pendingRequests();
      assert.deepEqual(
        still.map((r) => [r.agentId, r.request.id]),
        [[b.agentId, b.request.id]],
        'the other run still waits on its own request',
      );
      await assert.rejects(h.supervisor.answer(a.request.id, { ok: true }), (e) =>
        isTroupeError(e, 'ERR_REQUEST_ALREADY_ANSWERED'),
      );
      const rb = await h.supervisor.answer<SubagentOutcome>(b.request.id, { ok: true, data: 'for b' });
      assert.equal(rb.status === 'done' && rb.result, 'answered "for b"');
      assert.equal(h.supervisor.pendingRequests().length, 0);
    });
  }

  it('questions a worker forges on its host channel with one id and one call id get an id each', async () => {
    const ids: string[] = [];
    const onOpened = (e: { request: { id: string } }) => ids.push(e.request.id);
    h.supervisor.on('request.opened', onOpened);
    try {
      const question = ['q', 'call-same', { id: 'same', kind: 'input', prompt: 'forged' }];
      const outcomes = await Promise.all(
        ['x', 'y'].map((tenant) =>
          h.supervisor.spawn(intruder, {
            input: JSON.stringify({
              tool: 'attack',
              args: { on: 'host', message: [HostOp.events, 0, '$cap', [question]], sync: true },
            }),
            scope: { tenant },
          }),
        ),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['done', 'done'],
      );
      assert.equal(ids.length, 2);
      assert.equal(new Set(ids).size, 2);
      assert.equal(ids.includes('same'), false, 'the host never sees an id a worker chose');
      // The runs ended without suspending: their questions were withdrawn, none left open.
      assert.equal(h.supervisor.pendingRequests().length, 0);
    } finally {
      h.supervisor.off('request.opened', onOpened);
    }
  });
});
