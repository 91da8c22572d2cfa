// Nothing a worker sends may change an object on the supervisor afterwards:
// a view over a SharedArrayBuffer inside a result stays writable by the worker
// that kept the buffer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSupervisor } from '@troupe/supervisor';
import { sharer } from '../fixtures/agents/hostileShared.js';

describe('shared memory in what a worker sends', () => {
  it('a metadata update holding shared memory is refused, not handed on live', async () => {
    const supervisor = createSupervisor({ pool: { threads: 1 } });
    try {
      await supervisor.pool.ready();
      const first = await supervisor.spawn(sharer, { input: 'shareBack', scope: { tenant: 'a' } });
      // A metadata update is JSON: one holding a view its worker could go on writing is refused
      // when the result is read (the run ends crashed: its worker broke the protocol).
      assert.equal(first.status, 'crashed', JSON.stringify(first));
      if (first.status !== 'crashed') return;
      assert.match(first.error.message, /updates must be operations/);
      // Its worker was replaced: the next run finds nothing the first one kept.
      const second = await supervisor.spawn(sharer, { input: 'writeShared', scope: { tenant: 'b' } });
      assert.equal(second.status === 'done' && second.result, 'nothing kept on this thread');
    } finally {
      await supervisor.destroy();
    }
  });
});
