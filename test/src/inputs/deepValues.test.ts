// A value nested deeply (5,000 levels, 10 KB of JSON: well inside the daemon's 64 KiB body limit)
// is bad input like any other: the public API must refuse it with a typed error, as startAgent
// already does for metadata ("nested too deeply to be copied or saved"). findNotJson, which
// ContextUpdate's operations, ToolResult.pending and the Answer schema run, recurses once per
// level and throws a RangeError (Maximum call stack size exceeded) instead; the example daemon
// turns that into a 500 "internal error" for an HTTP answer. (With `persistence: null` the answer
// is taken as it is: the RangeError comes from the store's JSON check of the answer.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ContextUpdate, isTroupeError, ToolResult } from '@troupe/core';
import { createSupervisor, type Supervisor } from '@troupe/supervisor';
import { deployer } from '../fixtures/agents/hitl.js';

function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}
const deep = nested(5000);

function typed(error: unknown): boolean {
  assert.ok(
    isTroupeError(error),
    `expected a TroupeError (ERR_INVALID_ARGUMENT / ERR_NOT_JSON: nested too deeply), got ${(error as Error)?.constructor?.name}: ${(error as Error)?.message}`,
  );
  return true;
}

describe('deeply nested values get a typed error', () => {
  let supervisor: Supervisor;
  before(async () => {
    // The default store (MemoryPersistence): like SQLite, it saves an answer as JSON.
    supervisor = createSupervisor({ pool: { threads: 1 } });
    await supervisor.pool.ready();
  });
  after(() => supervisor.close());

  it('startAgent({ metadata }) refuses it with a typed error (holds: the reference behaviour)', async () => {
    await assert.rejects(supervisor.startAgent(deployer, { scope: {}, metadata: { k: deep } }), typed);
  });

  it('supervisor.answer(id, { data }) refuses it with a typed error, and the request stays open and answerable', async () => {
    const agent = await supervisor.startAgent(deployer, { scope: {} });
    const reply = await agent.send('deploy api');
    assert.equal(reply.status, 'suspended');
    const id = (reply as { request: { id: string } }).request.id;
    await assert.rejects(supervisor.answer(id, { ok: true, data: deep }), typed);
    assert.deepEqual(
      supervisor.pendingRequests().map((p) => p.request.id),
      [id],
    );
    const done = await supervisor.answer(id, { ok: true, data: { env: 'prod' } });
    assert.equal(done.status, 'done');
  });

  it('ContextUpdate.set / merge / append and ToolResult.pending refuse it with a typed error', () => {
    assert.throws(() => ContextUpdate.empty().set('k', deep), typed);
    assert.throws(() => ContextUpdate.empty().merge('k', { deep }), typed);
    assert.throws(() => ContextUpdate.empty().append('k', deep), typed);
    assert.throws(() => ToolResult.pending({ kind: 'input', prompt: 'where?', data: deep }), typed);
  });
});
