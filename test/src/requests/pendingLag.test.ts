// Found by memory.fuzz.test.ts: pendingRequests() still lists a request
// whose answer has been accepted (answer() called, the store's
// compare-and-set in flight), so a host answering what it lists gets
// ERR_REQUEST_ALREADY_ANSWERED for a request "waiting for a person".
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { type LeadPlan, lead } from '../fuzz/agents.js';

describe('pendingRequests() after answer()', () => {
  it('does not list a request once answer() has taken it', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      const agent = await supervisor.startAgent(lead, { scope: { tenantId: 't1' } });
      const plan: LeadPlan = { n: 'p1', u: 1, items: [], own: 'ask' };
      const reply = await agent.send(JSON.stringify(plan));
      assert.equal(reply.status, 'suspended');
      const id = reply.status === 'suspended' ? reply.request.id : '';
      const first = supervisor.answer(id, { ok: true, data: { n: 'p1' } });
      const listed = supervisor.pendingRequests().map((p) => p.request.id);
      const second = supervisor.answer(id, { ok: true, data: { n: 'p1' } }).then(
        () => 'answered',
        (error: { code?: string }) => error.code,
      );
      assert.equal((await first).status, 'done');
      const refused = await second;
      assert.ok(
        !listed.includes(id),
        `pendingRequests() listed ${id} after answer(${id}) was accepted; answering it as listed was refused with ${refused}: a listed request must be answerable (or not be listed)`,
      );
    } finally {
      await supervisor.close({ timeoutMs: 1000 });
    }
  });
});
